/* rewrite.c - the rewrite module: a filter of the rewrite phase per line.
 *
 *     rewrite ^/post/([0-9]+)$ /view?id=$1                      # internal
 *     rewrite ^/old/(.*)$ https://example.com/new/$1 permanent   # 301
 *     rewrite ^/(.*)$ /index.php?q=$1 if_missing ./public
 *
 * The pattern (PCRE2, JIT-compiled once per config generation) is matched
 * against the decoded, normalised path; the first line that matches
 * applies. An internal rewrite makes the expansion the request's target
 * (colibri_req_rewrite: decoded, normalised and checked like a request's)
 * and the lines run again on it, at most 10 times (then 500); "redirect"
 * answers 302 and "permanent" 301 with the expansion as Location;
 * "if_missing DIR" applies only when the path names nothing under DIR.
 * The request's query follows: appended behind a replacement without one,
 * behind the replacement's own after a '&', and dropped when the
 * replacement ends with '?'.
 *
 * A match runs under limits (match steps, depth, heap) so that a pattern
 * that backtracks catastrophically costs a bounded time: such a request is
 * a 500 and a line in the error log. JIT matching runs on a stack of the
 * worker thread's own (the coroutines' stacks are small). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "mod/rewrite_tpl.h"
#include "server/builtin.h"

#define MATCH_LIMIT     100000u
#define DEPTH_LIMIT     10000u
#define HEAP_LIMIT_KIB  4096u
#define OVECTOR_PAIRS   64u
#define TARGET_MAX      8192u
#define JIT_STACK_FIRST (32u << 10)
#define JIT_STACK_MAX   (512u << 10)

enum rw_kind { RW_INTERNAL, RW_REDIRECT, RW_PERMANENT };

struct rule {
    pcre2_code *re;
    pcre2_match_context *mctx;
    struct rw_tpl tpl;
    enum rw_kind kind;
    int dir_fd; /* if_missing's folder, or -1 */
    char *pattern;
};

/* The worker thread's match data and JIT stack, made on its first match
 * and freed when the thread ends. */
struct tls_match {
    pcre2_match_data *md;
    pcre2_jit_stack *stack;
};
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
    struct tls_match *m = p;
    pcre2_match_data_free(m->md);
    pcre2_jit_stack_free(m->stack);
    free(m);
}

static void tls_init(void)
{
    pthread_key_create(&tls_key, tls_free);
}

static struct tls_match *thread_match(void)
{
    pthread_once(&tls_once, tls_init);
    struct tls_match *m = pthread_getspecific(tls_key);
    if (m)
        return m;
    m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->md = pcre2_match_data_create(OVECTOR_PAIRS, NULL);
    m->stack = pcre2_jit_stack_create(JIT_STACK_FIRST, JIT_STACK_MAX, NULL);
    if (!m->md || !m->stack || pthread_setspecific(tls_key, m)) {
        tls_free(m);
        return NULL;
    }
    return m;
}

static pcre2_jit_stack *jit_stack(void *arg)
{
    (void)arg;
    struct tls_match *m = pthread_getspecific(tls_key);
    return m ? m->stack : NULL;
}

/* The path names something under the rule's folder. */
static bool exists(const struct rule *r, struct colibri_str path)
{
    char rel[TARGET_MAX];
    /* the path is normalised: no "..", starts with '/' */
    if (path.len >= sizeof(rel))
        return true; /* too long to be a file name: do not rewrite */
    size_t n = path.len > 1 ? path.len - 1 : 0;
    memcpy(rel, path.p + 1, n);
    if (!n)
        return true; /* "/": the folder itself */
    rel[n] = '\0';
    struct stat st;
    return fstatat(r->dir_fd, rel, &st, 0) == 0;
}

/* The expansion with the request's query joined as the module's comment
 * says, into out; its length, or -1 when too long. */
static long with_query(char *out, size_t cap, long n, struct colibri_str q)
{
    char *mark = memchr(out, '?', (size_t)n);
    if (mark && mark == out + n - 1) {
        out[--n] = '\0'; /* "...?": the request's query dropped */
        return n;
    }
    if (!q.len)
        return n;
    if ((size_t)n + 1 + q.len >= cap)
        return -1;
    out[n++] = mark ? '&' : '?';
    memcpy(out + n, q.p, q.len);
    n += (long)q.len;
    out[n] = '\0';
    return n;
}

static int apply(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    const struct rule *r = data;
    struct colibri_str path = colibri_req_path(req);
    struct tls_match *m = thread_match();
    if (!m)
        return 500;
    int rc = pcre2_match(r->re, (PCRE2_SPTR)path.p, path.len, 0, 0, m->md, r->mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(rc, msg, sizeof(msg));
        LOG_LIMITED(LOG_ERROR, "rewrite %.100s on \"%.*s\": %s: answered 500", r->pattern,
                    (int)MIN(path.len, 200), path.p, (const char *)msg);
        return 500;
    }
    if (r->dir_fd >= 0 && exists(r, path))
        return 0;
    char out[TARGET_MAX];
    long n = rw_tpl_expand(&r->tpl, path.p, path.len, pcre2_get_ovector_pointer(m->md),
                           pcre2_get_ovector_count(m->md), out, sizeof(out));
    if (n >= 0)
        n = with_query(out, sizeof(out), n, colibri_req_query_string(req));
    if (n < 0)
        return 414;
    if (r->kind != RW_INTERNAL) {
        if (colibri_resp_header(resp, "Location", out) < 0)
            return 500;
        return r->kind == RW_PERMANENT ? 301 : 302;
    }
    int e = colibri_req_rewrite(req, out, (size_t)n);
    if (e == -ELOOP)
        return e; /* the server says so, and answers 500 */
    if (e == -EBADMSG)
        return 400;
    return e < 0 ? 500 : 0;
}

static void rule_free(void *p)
{
    struct rule *r = p;
    pcre2_code_free(r->re);
    pcre2_match_context_free(r->mctx);
    rw_tpl_free(&r->tpl);
    if (r->dir_fd >= 0)
        close(r->dir_fd);
    free(r->pattern);
    free(r);
}

static int group_of(void *arg, const char *name, size_t len)
{
    char nm[256];
    if (len >= sizeof(nm))
        return -1;
    memcpy(nm, name, len);
    nm[len] = '\0';
    int g = pcre2_substring_number_from_name((pcre2_code *)arg, (PCRE2_SPTR)nm);
    return g > 0 ? g : -1;
}

static const struct colibri_filter rewrite_filter = {
    .name = "rewrite",
    .phase = COLIBRI_PHASE_REWRITE,
    .fn = apply,
};

#define USAGE "expected 'rewrite REGEX REPLACEMENT [redirect | permanent | if_missing DIR]'"

static int from_config(struct colibri_server *srv, struct colibri_conf *line, char *err,
                       size_t errlen)
{
    size_t n;
    const char *const *w = colibri_conf_words(line, &n);
    enum rw_kind kind = RW_INTERNAL;
    const char *dir = NULL;
    if (n == 3 && !strcmp(w[2], "redirect"))
        kind = RW_REDIRECT;
    else if (n == 3 && !strcmp(w[2], "permanent"))
        kind = RW_PERMANENT;
    else if (n == 4 && !strcmp(w[2], "if_missing"))
        dir = w[3];
    else if (n != 2)
        return colibri_conf_error(line, err, errlen, USAGE);
    const char *to = w[1];
    bool url = !strncmp(to, "http://", 7) || !strncmp(to, "https://", 8);
    if (kind == RW_INTERNAL && to[0] != '/')
        return colibri_conf_error(
            line, err, errlen, "an internal rewrite's replacement must be a path (/...): '%s'", to);
    if (!url && (to[0] != '/' || to[1] == '/'))
        return colibri_conf_error(line, err, errlen,
                                  "a redirect's replacement must be a path (/...) or an "
                                  "http(s):// URL: '%s'",
                                  to);

    struct rule *r = calloc(1, sizeof(*r));
    if (!r)
        return colibri_conf_error(line, err, errlen, "out of memory");
    r->dir_fd = -1;
    r->kind = kind;
    int ec;
    PCRE2_SIZE eo;
    char why[300];
    r->re = pcre2_compile((PCRE2_SPTR)w[0], PCRE2_ZERO_TERMINATED, 0, &ec, &eo, NULL);
    if (!r->re) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        rule_free(r);
        return colibri_conf_error(line, err, errlen, "bad regex '%s' at offset %zu: %s", w[0],
                                  (size_t)eo, (const char *)msg);
    }
    /* JIT when it can (a sandboxed reload may forbid executable memory:
     * the interpreter then matches, under the same limits) */
    pcre2_jit_compile(r->re, PCRE2_JIT_COMPLETE);
    uint32_t groups = 0;
    pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &groups);
    int e = rw_tpl_compile(&r->tpl, to, groups, group_of, r->re, why, sizeof(why));
    if (!e && r->tpl.max_group >= OVECTOR_PAIRS) {
        snprintf(why, sizeof(why), "group %u: at most %u groups can be used", r->tpl.max_group,
                 OVECTOR_PAIRS - 1);
        e = -EINVAL;
    }
    if (!e && !(r->pattern = strdup(w[0]))) {
        snprintf(why, sizeof(why), "out of memory");
        e = -ENOMEM;
    }
    if (!e && !(r->mctx = pcre2_match_context_create(NULL))) {
        snprintf(why, sizeof(why), "out of memory");
        e = -ENOMEM;
    }
    if (e) {
        rule_free(r);
        return colibri_conf_error(line, err, errlen, "%s", why);
    }
    pcre2_set_match_limit(r->mctx, MATCH_LIMIT);
    pcre2_set_depth_limit(r->mctx, DEPTH_LIMIT);
    pcre2_set_heap_limit(r->mctx, HEAP_LIMIT_KIB);
    pcre2_jit_stack_assign(r->mctx, jit_stack, NULL);
    if (dir) {
        r->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r->dir_fd < 0) {
            int en = errno;
            rule_free(r);
            return colibri_conf_error(line, err, errlen, "if_missing '%s': %s", dir, strerror(en));
        }
        if (colibri_server_allow_path(srv, dir, COLIBRI_PATH_READ, why, sizeof(why))) {
            rule_free(r);
            return colibri_conf_error(line, err, errlen, "%s", why);
        }
    }
    if (colibri_server_add_filter(srv, "/", &rewrite_filter, r, rule_free, why, sizeof(why)))
        return colibri_conf_error(line, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(rewrite) = {.name = "rewrite", .from_config = from_config, .line_form = true};
