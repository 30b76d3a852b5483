/* fastcgi.c - PHP-FPM and other FastCGI responders: "fastcgi PREFIX { }".
 *
 *     fastcgi /php {
 *         to = unix:/run/php/php8.2-fpm.sock   # or 127.0.0.1:9000, or an upstream's name
 *         root = /srv/app              # the scripts: SCRIPT_FILENAME = root + the path below
 * PREFIX index = index.php            # for a folder front_controller = /index.php  # a path that
 * names no file goes here; absent: 404 static = true                # an existing non-.php file is
 * served as serve_files would param SERVER_SOFTWARE colibri  # extra or overriding params
 * (repeatable) connect_timeout = 5s read_timeout = 60s send_timeout = 60s
 *     }
 *
 * One request per connection at a time (PHP-FPM does not multiplex), on
 * connections kept with FCGI_KEEP_CONN in the worker's pool of the
 * upstream (gateway/upstream.h). The body goes up as STDIN records as it
 * arrives (one without a length is read whole first: CONTENT_LENGTH); STDOUT is parsed for the CGI
 * head and then streamed to the client; STDERR goes to the error log. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "files/files.h"
#include "gateway/fcgi.h"
#include "gateway/uphead.h"
#include "gateway/upio.h"
#include "gateway/fastcgi.h"
#include "gateway/upstream.h"
#include "http/request.h"
#include "http/status.h"
#include "server/builtin.h"

#define FCGI_BUF     (80 * 1024) /* a whole record fits */
#define CGI_HEAD_MAX (32 * 1024)
#define PARAMS_MAX   8

struct script {
    char file[PATH_MAX];   /* SCRIPT_FILENAME */
    char name[PATH_MAX];   /* SCRIPT_NAME: the URL path of the script */
    struct view path_info; /* the rest of the path after the script */
    char path_info_buf[PATH_MAX];
};

struct fjob {
    struct script s;
    struct strbuf params;
    struct colibri_request *req;
    struct fcgi_route *fr;
    int fd, srv;
    char *buf;
    size_t len, pos;
    struct strbuf out, head; /* head: the CGI head, then the body held back from body_at */
    size_t body_at;
    bool reused; /* fd came from the pool */
    /* a body without a length (chunked): read whole before the request
     * goes, body_len bytes in hc->reqbody or in the file hc->bs.fd */
    bool body_kept;
    uint64_t body_len;
    bool drained;  /* nothing to read from fd before it is ready (gw_read_ready) */
    bool fresh;    /* a new connection whose answer has not begun */
    bool starving; /* ... and has waited STARVE_MS for it (gw_starving) */
};

/* How long a new connection's answer may take before its wait counts as
 * maybe queued behind PHP-FPM children that idle kept connections hold
 * (gw_starving): a request PHP-FPM took begins its answer within this
 * most often, so under load the pools keep their connections. */
#define STARVE_MS 50

/* The new connection's wait for its answer is over. */
static void fjob_fed(struct fjob *j)
{
    if (j->starving)
        gw_starving(j->fr->up, (unsigned)j->srv, false);
    j->starving = j->fresh = false;
}

static void fjob_close(struct fjob *j)
{
    fjob_fed(j);
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
}

static void fjob_free(void *arg)
{
    struct fjob *j = arg;
    free(j->buf);
    strbuf_free(&j->out);
    strbuf_free(&j->head);
    strbuf_free(&j->params);
    free(j);
}

static const struct gw_spare fjob_spare = {
    .kind = GW_SPARE_FCGI,
    .size = sizeof(struct fjob),
    .buf_at = offsetof(struct fjob, buf),
    .buf_len = FCGI_BUF,
    .free_job = fjob_free,
};

static void fjob_end(void *arg)
{
    struct fjob *j = arg;
    fjob_close(j);
    gw_spare_put(&fjob_spare, j,
                 j->out.cap <= FCGI_BUF && j->head.cap <= FCGI_BUF && j->params.cap <= FCGI_BUF);
}

/* --- finding the script -------------------------------------------------------------- */

/* The lookups of under_root() a worker made in the last SCACHE_MS, so
 * that a script's realpath() (a readlink() per component) and stat() run
 * once a second, not per request: a worker's own table, no locks. */
#define SCACHE_N    32
#define SCACHE_REL  200
#define SCACHE_REAL 600
#define SCACHE_MS   1000
struct scache_ent {
    uint64_t route; /* fcgi_route.id; 0: empty */
    uint64_t at;    /* worker_now_ms() of the lookup */
    uint16_t rel_len;
    bool dir;
    char rel[SCACHE_REL];
    char real[SCACHE_REAL];
};
static pthread_key_t scache_key;
static pthread_once_t scache_once = PTHREAD_ONCE_INIT;
static __thread struct scache_ent *scache; /* SCACHE_N of them, freed at the thread's end */

static void scache_init(void)
{
    pthread_key_create(&scache_key, free);
}

static struct scache_ent *scache_slot(const struct fcgi_route *fr, const char *rel, size_t len)
{
    if (len >= SCACHE_REL)
        return NULL;
    if (!scache) {
        pthread_once(&scache_once, scache_init);
        if (!(scache = calloc(SCACHE_N, sizeof(*scache))))
            return NULL;
        pthread_setspecific(scache_key, scache);
    }
    uint64_t h = gw_hash(rel, len) ^ fr->id * 0x9e3779b97f4a7c15ull;
    return &scache[h % SCACHE_N];
}

static bool under_root_fresh(const struct fcgi_route *fr, const char *rel, size_t len, bool *dir,
                             char *real);

/* Whether root + rel is a regular file (or a folder, *dir) under the root. */
static bool under_root(const struct fcgi_route *fr, const char *rel, size_t len, bool *dir,
                       char *real)
{
    struct scache_ent *e = scache_slot(fr, rel, len);
    uint64_t now = worker_now_ms();
    if (e && e->route == fr->id && e->rel_len == len && now - e->at < SCACHE_MS &&
        !memcmp(e->rel, rel, len)) {
        *dir = e->dir;
        memcpy(real, e->real, strlen(e->real) + 1);
        return true;
    }
    if (!under_root_fresh(fr, rel, len, dir, real))
        return false; /* not cached: a file that appears is seen at once */
    size_t rl = strlen(real);
    if (e && rl < SCACHE_REAL) {
        e->route = fr->id;
        e->at = now;
        e->rel_len = (uint16_t)len;
        e->dir = *dir;
        memcpy(e->rel, rel, len);
        memcpy(e->real, real, rl + 1);
    }
    return true;
}

static bool under_root_fresh(const struct fcgi_route *fr, const char *rel, size_t len, bool *dir,
                             char *real)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof(p), "%s%.*s", fr->root, (int)len, rel) >= sizeof(p))
        return false;
    if (!realpath(p, real))
        return false;
    if (strncmp(real, fr->root, fr->root_len) || (real[fr->root_len] && real[fr->root_len] != '/'))
        return false; /* a link out of the root */
    struct stat st;
    if (stat(real, &st))
        return false;
    *dir = S_ISDIR(st.st_mode);
    return S_ISREG(st.st_mode) || *dir;
}

bool fcgi_is_php(const char *p, size_t len)
{
    return len >= 4 && !memcmp(p + len - 4, ".php", 4);
}

/* Copies at most cap - 1 bytes of p and a NUL to o: the bytes copied. */
static size_t copy_cut(char *o, size_t cap, const char *p, size_t n)
{
    n = MIN(n, cap - 1);
    memcpy(o, p, n);
    o[n] = '\0';
    return n;
}

static void set_script(struct script *s, const struct fcgi_route *fr, const char *rel, size_t len,
                       const char *info, size_t info_len, const char *real)
{
    copy_cut(s->file, sizeof(s->file), real, strlen(real));
    size_t n = copy_cut(s->name, sizeof(s->name), fr->prefix, fr->prefix_len);
    copy_cut(s->name + n, sizeof(s->name) - n, rel, len);
    n = copy_cut(s->path_info_buf, sizeof(s->path_info_buf), info, info_len);
    s->path_info = (struct view){s->path_info_buf, n};
}

/* n in decimal at o (room for 21 bytes): its length, NUL-terminated. */
static size_t fmt_u64(char *o, uint64_t n)
{
    char t[24];
    size_t l = 0;
    do
        t[l++] = (char)('0' + n % 10);
    while ((n /= 10));
    for (size_t i = 0; i < l; i++)
        o[i] = t[l - 1 - i];
    o[l] = '\0';
    return l;
}

/* 0 with s set (a script to run), or a status: the handler's answer
 * (-1: a static file, for files_serve). */
static int find_script(struct colibri_request *req, const struct fcgi_route *fr, struct script *s)
{
    struct colibri_str path = colibri_req_path(req);
    const char *rel = path.p + MIN(fr->prefix_len, path.len);
    size_t rl = path.len > fr->prefix_len ? path.len - fr->prefix_len : 0;
    if (rl && rel[0] != '/')
        return 404; /* "/phpx" is not under "/php" (the router matched a segment) */
    if (!rl)
        rel = "/", rl = 1;
    char real[PATH_MAX];
    bool dir = false;
    /* "/a.php/more": the script, and PATH_INFO "/more" */
    for (size_t i = 0; i + 4 <= rl; i++) {
        if (memcmp(rel + i, ".php", 4) || (i + 4 < rl && rel[i + 4] != '/'))
            continue;
        size_t sl = i + 4;
        if (under_root(fr, rel, sl, &dir, real) && !dir) {
            set_script(s, fr, rel, sl, rel + sl, rl - sl, real);
            return 0;
        }
        break;
    }
    if (under_root(fr, rel, rl, &dir, real)) {
        if (dir) {
            if (rel[rl - 1] != '/') {
                /* a folder without its slash: where its relative links work */
                char loc[PATH_MAX + 8];
                struct colibri_str q = colibri_req_query_string(req);
                snprintf(loc, sizeof(loc), "%.*s/%s%.*s", (int)path.len, path.p, q.len ? "?" : "",
                         (int)q.len, q.p);
                for (char *c = loc; *c; c++)
                    if ((unsigned char)*c < 0x21 || (unsigned char)*c == 0x7f)
                        return 404;
                colibri_resp_header(req->hc->resp, "Location", loc);
                return 301;
            }
            char idx[PATH_MAX];
            int n = snprintf(idx, sizeof(idx), "%.*s%s", (int)rl, rel, fr->index);
            if (n > 0 && (size_t)n < sizeof(idx) && under_root(fr, idx, (size_t)n, &dir, real) &&
                !dir) {
                if (fcgi_is_php(idx, (size_t)n)) {
                    set_script(s, fr, idx, (size_t)n, "", 0, real);
                    return 0;
                }
                if (fr->files)
                    return -1;
            }
        } else if (!fcgi_is_php(rel, rl) && fr->files) {
            return -1;
        }
    }
    if (fr->front && under_root(fr, fr->front, strlen(fr->front), &dir, real) && !dir) {
        set_script(s, fr, fr->front, strlen(fr->front), "", 0, real);
        return 0;
    }
    return 404;
}

/* --- the params ----------------------------------------------------------------------- */

struct pwalk {
    struct strbuf *b;
    const struct fcgi_route *fr;
    int err;
};

static bool overridden(const struct fcgi_route *fr, const char *name, size_t nl)
{
    for (unsigned i = 0; i < fr->n_params; i++)
        if (strlen(fr->params[i].name) == nl && !memcmp(fr->params[i].name, name, nl))
            return true;
    return false;
}

static void pair(struct pwalk *w, const char *name, const char *v, size_t vl)
{
    if (!w->err && !overridden(w->fr, name, strlen(name)))
        w->err = fcgi_pair(w->b, name, strlen(name), v, vl);
}
#define PAIR_S(w, n, s) pair((w), (n), (s), strlen(s))

static bool http_field(struct view name, struct view value, void *arg)
{
    struct pwalk *w = arg;
    char n[128] = "HTTP_";
    if (name.len > sizeof(n) - 6)
        return true;
    for (size_t i = 0; i < name.len; i++) {
        char c = name.p[i];
        n[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
    }
    n[5 + name.len] = '\0';
    /* not twice (CONTENT_*), and never HTTP_PROXY (httpoxy) */
    if (!strcmp(n, "HTTP_CONTENT_TYPE") || !strcmp(n, "HTTP_CONTENT_LENGTH") ||
        !strcmp(n, "HTTP_PROXY"))
        return true;
    pair(w, n, value.p, value.len);
    return !w->err;
}

static int build_params(struct fjob *j, const struct script *s, struct strbuf *b)
{
    struct colibri_request *req = j->req;
    const struct http_head *h = req->head;
    const struct fcgi_route *fr = j->fr;
    struct pwalk w = {.b = b, .fr = fr};
    char num[32], addr[64] = "";
    PAIR_S(&w, "GATEWAY_INTERFACE", "CGI/1.1");
    PAIR_S(&w, "SERVER_SOFTWARE", "colibri");
    PAIR_S(&w, "SCRIPT_FILENAME", s->file);
    PAIR_S(&w, "SCRIPT_NAME", s->name);
    pair(&w, "PATH_INFO", s->path_info.p, s->path_info.len);
    if (s->path_info.len) {
        char pt[PATH_MAX + PATH_MAX];
        snprintf(pt, sizeof(pt), "%s%.*s", fr->root, (int)s->path_info.len, s->path_info.p);
        PAIR_S(&w, "PATH_TRANSLATED", pt);
    }
    pair(&w, "REQUEST_URI", h->target.p, h->target.len);
    struct colibri_str path = colibri_req_path(req);
    pair(&w, "DOCUMENT_URI", path.p, path.len);
    PAIR_S(&w, "DOCUMENT_ROOT", fr->root);
    pair(&w, "QUERY_STRING", h->query.p, h->query.len);
    pair(&w, "REQUEST_METHOD", h->method_str.p, h->method_str.len);
    struct colibri_str ct;
    if (colibri_req_header(req, "Content-Type", &ct))
        pair(&w, "CONTENT_TYPE", ct.p, ct.len);
    else
        PAIR_S(&w, "CONTENT_TYPE", "");
    if (req->body_kind == BODY_LENGTH) {
        pair(&w, "CONTENT_LENGTH", num, fmt_u64(num, (uint64_t)h->content_length));
    } else if (j->body_kept) {
        pair(&w, "CONTENT_LENGTH", num, fmt_u64(num, j->body_len));
    } else {
        PAIR_S(&w, "CONTENT_LENGTH", "");
    }
    PAIR_S(&w, "SERVER_PROTOCOL", h->version_minor ? "HTTP/1.1" : "HTTP/1.0");
    PAIR_S(&w, "REDIRECT_STATUS", "200");
    colibri_req_remote_addr(req, addr, sizeof(addr));
    PAIR_S(&w, "REMOTE_ADDR", addr);
    const struct conn_peer *peer = conn_peer_of(req->ctx);
    pair(&w, "REMOTE_PORT", num,
         fmt_u64(num, (unsigned)(peer->port >> 8 | (peer->port & 0xff) << 8)));
    /* the address and port the request came to */
    char saddr[64] = "", sport[24] = "";
    const struct conn_peer *me = http_local_addr(req);
    if (http_peer_str(me, saddr, sizeof(saddr)))
        saddr[0] = '\0';
    fmt_u64(sport, (unsigned)(me->port >> 8 | (me->port & 0xff) << 8));
    PAIR_S(&w, "SERVER_ADDR", saddr);
    PAIR_S(&w, "SERVER_PORT", sport);
    struct view host = h->host;
    const char *colon = host.len && host.p[0] != '[' ? memchr(host.p, ':', host.len) : NULL;
    if (host.len && host.p[0] == '[') {
        const char *e = memchr(host.p, ']', host.len);
        colon = e ? e + 1 : NULL;
    }
    if (colon)
        host.len = (size_t)(colon - host.p);
    if (host.len)
        pair(&w, "SERVER_NAME", host.p, host.len);
    else
        PAIR_S(&w, "SERVER_NAME", saddr);
    if (colibri_req_is_secure(req))
        PAIR_S(&w, "HTTPS", "on");
    gw_fields_each(h->headers, http_field, &w);
    for (unsigned i = 0; !w.err && i < fr->n_params; i++)
        w.err = fcgi_pair(b, fr->params[i].name, strlen(fr->params[i].name), fr->params[i].value,
                          strlen(fr->params[i].value));
    return w.err ? -ENOMEM : 0;
}

/* --- the exchange ------------------------------------------------------------------------ */

/* A kept body as STDIN records, from memory or from its file: 0 or -errno. */
static int send_kept_body(struct fjob *j)
{
    struct colibri_request *req = j->req;
    const struct http_body_state *bs = &req->hc->bs;
    int r;
    for (uint64_t off = 0; off < j->body_len;) {
        /* a piece of at most a record's content (j->buf is free until
         * relay() reads the answer into it) */
        size_t n = (size_t)MIN(j->body_len - off, (uint64_t)FCGI_CONTENT_MAX);
        const char *p;
        if (bs->spooled) {
            ssize_t got = pread(bs->fd, j->buf, n, (off_t)off);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                LOG_LIMITED(LOG_WARN, "fastcgi: the request body's file: %s",
                            got < 0 ? strerror(errno) : "shorter than written");
                return -EIO;
            }
            n = (size_t)got;
            p = j->buf;
        } else {
            p = req->hc->reqbody.buf + off;
        }
        strbuf_reset(&j->out);
        if (fcgi_stream(&j->out, FCGI_STDIN, 1, p, n, false))
            return -ENOMEM;
        if ((r = gw_write(req->ctx, j->fd, j->out.buf, j->out.len, j->fr->send_ms)))
            return r;
        off += n;
    }
    strbuf_reset(&j->out);
    if (fcgi_stream(&j->out, FCGI_STDIN, 1, NULL, 0, true))
        return -ENOMEM;
    return gw_write(req->ctx, j->fd, j->out.buf, j->out.len, j->fr->send_ms);
}

/* The request: BEGIN_REQUEST, PARAMS, STDIN as the body arrives (or from
 * where it was kept). 0, or -errno with *client set when the client's
 * body failed. */
static int send_request(struct fjob *j, const struct script *s, bool *client)
{
    struct colibri_request *req = j->req;
    struct strbuf *params = &j->params;
    strbuf_reset(&j->out);
    strbuf_reset(params);
    *client = false;
    int r = fcgi_begin(&j->out, 1) || build_params(j, s, params) ||
                    fcgi_params(&j->out, 1, params->buf, params->len)
                ? -ENOMEM
                : 0;
    if (r)
        return r;
    /* no body, or a small kept one: the whole request in one write */
    bool whole = req->body_kind == BODY_NONE ||
                 (j->body_kept && !req->hc->bs.spooled && j->body_len <= FCGI_CONTENT_MAX);
    if (whole && fcgi_stream(&j->out, FCGI_STDIN, 1, j->body_len ? req->hc->reqbody.buf : NULL,
                             (size_t)j->body_len, true))
        return -ENOMEM;
    if ((r = gw_write(req->ctx, j->fd, j->out.buf, j->out.len, j->fr->send_ms)))
        return r;
    if (whole)
        return 0;
    if (j->body_kept)
        return send_kept_body(j);
    for (;;) {
        struct view v;
        if ((r = http_body_next(req, &v))) {
            *client = true;
            return r;
        }
        strbuf_reset(&j->out);
        if (fcgi_stream(&j->out, FCGI_STDIN, 1, v.p, v.len, !v.len))
            return -ENOMEM;
        if ((r = gw_write(req->ctx, j->fd, j->out.buf, j->out.len, j->fr->send_ms)))
            return r;
        if (!v.len)
            return 0;
    }
}

/* The next whole record in buf at pos: > 0 (its size, content at pos + 8),
 * or < 0 (-errno: read failed, -EPIPE closed, -EBADMSG). *got: a byte came. */
static ssize_t next_record(struct fjob *j, struct fcgi_rec *rec, bool *got)
{
    for (;;) {
        size_t have = j->len - j->pos;
        if (have >= FCGI_HEADER_LEN) {
            if (fcgi_parse_header((unsigned char *)j->buf + j->pos, rec))
                return -EBADMSG;
            size_t whole = FCGI_HEADER_LEN + rec->len + rec->pad;
            if (have >= whole)
                return (ssize_t)whole;
        }
        if (j->pos) {
            memmove(j->buf, j->buf + j->pos, have);
            j->len = have;
            j->pos = 0;
        }
        int ms = j->fr->read_ms;
        if (j->fresh && !j->starving && ms > STARVE_MS)
            ms = STARVE_MS; /* then, with nothing yet, the rest of read_timeout */
        ssize_t n =
            gw_read_ready(j->req->ctx, j->fd, j->buf + j->len, FCGI_BUF - j->len, ms, &j->drained);
        if (n == -ETIMEDOUT && ms != j->fr->read_ms) {
            /* PHP-FPM may not have taken the connection: while it waits,
             * the pools give back the children their idle ones hold */
            j->starving = true;
            gw_starving(j->fr->up, (unsigned)j->srv, true);
            n = gw_read_ready(j->req->ctx, j->fd, j->buf + j->len, FCGI_BUF - j->len,
                              j->fr->read_ms - STARVE_MS, &j->drained);
        }
        if (n < 0)
            return n;
        if (n == 0)
            return -EPIPE;
        *got = true;
        fjob_fed(j);
        j->len += (size_t)n;
    }
}

/* Whether a whole record is in buf at pos (no read needed for it). */
static bool record_buffered(const struct fjob *j)
{
    size_t have = j->len - j->pos;
    if (have < FCGI_HEADER_LEN)
        return false;
    struct fcgi_rec rec;
    if (fcgi_parse_header((const unsigned char *)j->buf + j->pos, &rec))
        return true; /* next_record reports it */
    return have >= (size_t)FCGI_HEADER_LEN + rec.len + rec.pad;
}

/* Sends the head and the body held back so far; the rest streams. */
static void start_stream(struct fjob *j)
{
    struct colibri_response *resp = j->req->hc->resp;
    http_start_stream(resp);
    if (j->head.len > j->body_at)
        colibri_resp_send_chunk(resp, j->head.buf + j->body_at, j->head.len - j->body_at);
    strbuf_reset(&j->head);
    j->body_at = 0;
}

/* Relays the answer. Returns the handler's status; *keep: the connection
 * ended cleanly (END_REQUEST, nothing after it) and may be pooled. */
static int relay(struct fjob *j, bool *keep, bool *got)
{
    struct colibri_request *req = j->req;
    struct colibri_response *resp = req->hc->resp;
    const char *where = j->fr->up->servers[j->srv].text;
    bool head_done = false;
    *keep = false;
    j->len = j->pos = 0;
    j->drained = true; /* the request just went: the answer takes a while */
    strbuf_reset(&j->head);
    for (;;) {
        struct fcgi_rec rec;
        ssize_t whole = next_record(j, &rec, got);
        if (whole < 0) {
            if (!head_done) {
                if (j->reused && !*got && (whole == -EPIPE || whole == -ECONNRESET))
                    return 502; /* a kept connection found closed: sent again, quietly */
                LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: %s", where,
                            whole == -ETIMEDOUT ? "timed out"
                            : whole == -EBADMSG ? "invalid record"
                            : whole == -EPIPE   ? "closed the connection without an answer"
                                                : strerror((int)-whole));
                return whole == -ETIMEDOUT ? 504 : 502;
            }
            LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: %s: the answer is cut short", where,
                        whole == -ETIMEDOUT ? "timed out" : "failed");
            if (!resp->streaming)
                start_stream(j);
            req->hc->closing = true;
            resp->chunked = false; /* no last chunk: the client sees the cut */
            resp->interrupted = true;
            return 200;
        }
        const char *c = j->buf + j->pos + FCGI_HEADER_LEN;
        j->pos += (size_t)whole;
        if (rec.id != 1)
            goto next; /* not ours (a management record) */
        if (rec.type == FCGI_STDERR) {
            if (rec.len)
                LOG_LIMITED(LOG_WARN, "fastcgi: %s: stderr: %.*s", where,
                            (int)MIN(rec.len, 1000u) - (c[rec.len - 1] == '\n'), c);
            goto next;
        }
        if (rec.type == FCGI_END_REQUEST) {
            int proto = rec.len >= 5 ? (unsigned char)c[4] : 0;
            if (!head_done) {
                if (j->reused && !*got && (whole == -EPIPE || whole == -ECONNRESET))
                    return 502; /* a kept connection found closed: sent again, quietly */
                LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: %s", where,
                            proto ? "refused the request (overloaded or cannot multiplex)"
                                  : "ended without a complete CGI head");
                return proto ? 503 : 502;
            }
            *keep = proto == 0 && j->pos == j->len;
            if (!resp->streaming && req->head->method == COLIBRI_HEAD)
                start_stream(j);       /* PHP sent no body: no length to tell */
            else if (!resp->streaming) /* the whole answer came: head and body in one writev */
                return colibri_resp_send_static(resp, resp->status, resp->mime,
                                                j->head.buf + j->body_at, j->head.len - j->body_at);
            return 200;
        }
        if (rec.type != FCGI_STDOUT || !rec.len)
            goto next;
        if (head_done) {
            if (resp->streaming)
                colibri_resp_send_chunk(resp, c, rec.len);
            else if (strbuf_append(&j->head, c, rec.len))
                return 500;
            goto next;
        }
        /* the CGI head, gathered across records */
        if (strbuf_append(&j->head, c, rec.len))
            return 500;
        struct cgi_head h;
        ssize_t hl = cgi_parse_head(j->head.buf, j->head.len, CGI_HEAD_MAX, &h);
        if (hl == 0)
            continue;
        if (hl < 0) {
            LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: invalid CGI head", where);
            return 502;
        }
        head_done = true;
        colibri_resp_set_type(resp, NULL);
        if (cgi_answer_fields(&req->hc->hdrs, &h))
            return 500;
        resp->status = h.status;
        j->body_at = (size_t)hl;
        if (h.status == 204 || h.status == 304) {
            /* no body: the head alone (what follows is dropped) */
            resp->head_only = true;
            start_stream(j);
        }
    next:
        /* the body so far is held back while more records are buffered,
         * so that a whole small answer leaves in one writev; before a
         * read that may wait, it goes out as the start of a stream */
        if (head_done && !resp->streaming && !record_buffered(j))
            start_stream(j);
    }
}

int fcgi_handler(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct fcgi_route *fr = data;
    struct fjob *j = gw_spare_get(&fjob_spare);
    if (!j)
        return 503;
    j->req = req;
    j->fr = fr;
    j->fd = j->srv = -1;
    j->len = j->pos = j->body_at = 0;
    j->reused = j->drained = j->body_kept = j->starving = j->fresh = false;
    j->body_len = 0;
    if (colibri_defer(req, fjob_end, j)) {
        return 503; /* the end ran at once: the job is back (kept or freed) */
    }
    struct script *s = &j->s;
    int st = find_script(req, fr, s);
    if (st)
        return st == -1 ? files_serve(req, resp, fr->files) : st;
    if (req->body_kind == BODY_LENGTH) {
        req->max_body = UINT64_MAX; /* PHP's post_max_size judges it */
    } else if (req->body_kind != BODY_NONE) {
        /* chunked (or an HTTP/2 body without content-length): PHP needs
         * CONTENT_LENGTH, so the body is read whole first, within
         * max_request_body (413), in memory up to body_memory_max and
         * beyond that in an unnamed file in temp_dir */
        int r = http_body_pump(req, true);
        if (r)
            return http_status_of(r);
        j->body_kept = true;
        j->body_len = req->hc->bs.spooled ? req->hc->bs.file_len : req->hc->reqbody.len;
    }
    struct gw_upstream *up = fr->up;
    unsigned widx = conn_worker_index(req->ctx);
    uint64_t t0 = worker_now_ms(), tried = 0;
    bool fresh_retry = false, safe = gw_idempotent(req->head->method);
    for (;;) {
        if (!fresh_retry) {
            j->srv = gw_pick(up, widx, worker_now_ms(), tried, 0);
            if (j->srv < 0) {
                if (!tried)
                    LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: no server is up", up->name);
                return 502;
            }
            tried |= 1ull << j->srv;
        }
        const struct gw_server *sv = &up->servers[j->srv];
        resp->upstream_addr = sv->text;
        bool reused = false;
        if (!fresh_retry) {
            /* as for proxy: a kept connection closed since the worker's
             * last wake-up fails the request, which a bodiless idempotent
             * one survives (sent again below); the others peek first */
            while ((j->fd = gw_pool_take(up, widx, (unsigned)j->srv)) >= 0 &&
                   (req->body_kind != BODY_NONE || !safe) && !gw_idle_alive(j->fd))
                fjob_close(j);
            reused = j->fd >= 0;
        }
        fresh_retry = false;
        if (j->fd < 0) {
            int fd = gw_connect(req->ctx, sv, fr->connect_ms);
            if (fd < 0) {
                if (fd == -ECANCELED)
                    return 503;
                LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: connect: %s", sv->text,
                            fd == -ETIMEDOUT ? "timed out" : strerror(-fd));
                gw_failed(up, (unsigned)j->srv, worker_now_ms());
                if (req->body_kind == BODY_NONE || j->body_kept || !req->hc->bs.t0_ms) {
                    if (gw_pick(up, widx, worker_now_ms(), tried, 0) >= 0)
                        continue;
                }
                return fd == -ETIMEDOUT ? 504 : 502;
            }
            j->fd = fd;
            /* PHP-FPM may not take it while its children are held by idle
             * kept connections: if its answer is slow to begin, they are
             * closed until it is answered (next_record) */
            j->fresh = true;
        }
        j->reused = reused && safe; /* what a failed answer may be sent again for */
        bool client = false, keep = false, got = false;
        int r = send_request(j, s, &client);
        if (client) {
            fjob_close(j);
            return http_status_of(r);
        }
        if (r == -ENOMEM) {
            fjob_close(j);
            return 503;
        }
        if ((r == -EPIPE || r == -ECONNRESET) && reused &&
            (req->body_kind == BODY_NONE || j->body_kept || !req->hc->bs.t0_ms)) {
            /* a kept connection PHP-FPM had closed (none of the request
             * went): once more, fresh */
            fjob_close(j);
            fresh_retry = true;
            continue;
        }
        if (r == -ETIMEDOUT) {
            LOG_LIMITED(LOG_WARN, "fastcgi: upstream %s: sending timed out", sv->text);
            fjob_close(j);
            return 504;
        }
        st = relay(j, &keep, &got);
        if (!got && j->reused && st == 502 && (req->body_kind == BODY_NONE || j->body_kept)) {
            fjob_close(j);
            fresh_retry = true;
            continue;
        }
        resp->upstream_ms = (int64_t)(worker_now_ms() - t0);
        gw_stats_answer(up, j->srv, resp->upstream_ms);
        if (st >= 502 && st <= 504 && !resp->streaming)
            gw_failed(up, (unsigned)j->srv, worker_now_ms());
        else
            gw_succeeded(up, (unsigned)j->srv);
        if (keep) {
            gw_pool_put(up, req->ctx, (unsigned)j->srv, j->fd);
            j->fd = -1;
        } else {
            fjob_close(j);
        }
        return st;
    }
}
