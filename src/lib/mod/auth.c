/* auth.c - the auth module: HTTP Basic authentication (RFC 7617), a filter
 * of the access phase.
 *
 *     auth /admin {
 *         realm = Admin
 *         htpasswd = ./users.htpasswd
 *     }
 *
 * A request under the prefix without valid credentials gets 401 with
 * `WWW-Authenticate: Basic realm="Admin", charset="UTF-8"`, before its
 * handler runs (and before its body is read). The file (mod/htpasswd.h)
 * is read at start and at reload, and again when it changes: its status is
 * looked at once a second at most, by the first request that needs it.
 *
 * A slow hash (bcrypt costs milliseconds) is paid once per client and
 * password: a successful check is remembered for CACHE_TTL_S, keyed by a
 * digest of user, password and stored hash (with a per-process secret),
 * in a table of CACHE_SLOTS entries; a keep-alive client's next requests
 * find it there. Failures are counted per client address (FAIL_SLOTS
 * entries): beyond FAIL_MAX within FAIL_WINDOW_S the client gets 429 with
 * Retry-After without any hash being computed. The access log shows the
 * user let in. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base64.h"
#include "base/log.h"
#include "base/sha1.h"
#include "http/request.h"
#include "mod/cidr.h"
#include "mod/htpasswd.h"
#include "rt/conn.h"
#include "server/builtin.h"

#define CACHE_SLOTS   1024u
#define CACHE_TTL_S   300u
#define FAIL_SLOTS    1024u
#define FAIL_MAX      20u
#define FAIL_WINDOW_S 60u
#define CRED_MAX      1024u

struct cache_slot {
    uint8_t key[SHA1_LEN];
    uint64_t until_s; /* 0: empty */
};

struct fail_slot {
    uint8_t addr[16];
    uint32_t count;
    uint64_t since_s;
};

struct auth {
    char *path;
    char *challenge;      /* the WWW-Authenticate value */
    pthread_mutex_t lock; /* users, file identity, cache, failures */
    struct htpasswd users;
    struct stat st; /* of the file users came from */
    _Atomic uint64_t checked_s;
    uint8_t secret[16];
    struct cache_slot cache[CACHE_SLOTS];
    struct fail_slot fails[FAIL_SLOTS];
};

static uint64_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec;
}

/* The file's bytes parsed into *out: 0, or -errno with why. */
static int read_file(const char *path, const uint8_t secret[16], struct htpasswd *out,
                     struct stat *st, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot open '%s': %s", path, strerror(e));
        return -e;
    }
    int r = -EINVAL;
    char *buf = NULL;
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "'%s' is not a regular file", path);
        goto out;
    }
    if ((uint64_t)st->st_size > HTPASSWD_MAX_FILE) {
        snprintf(why, whylen, "'%s' is larger than %u bytes", path, HTPASSWD_MAX_FILE);
        goto out;
    }
    size_t len = (size_t)st->st_size;
    buf = malloc(len + 1);
    if (!buf || (len && pread_full(fd, buf, len, 0) < 0)) {
        snprintf(why, whylen, "cannot read '%s'", path);
        r = -EIO;
        goto out;
    }
    char inner[200];
    r = htpasswd_parse(buf, len, out, inner, sizeof(inner));
    if (r)
        snprintf(why, whylen, "'%s' %s", path, inner);
    else if ((r = htpasswd_seal(out, secret))) {
        htpasswd_free(out);
        snprintf(why, whylen, "'%s': out of memory", path);
    }
out:
    if (buf)
        explicit_bzero(buf, (size_t)st->st_size);
    free(buf);
    close(fd);
    return r;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Once a second at most: the file again when it changed (a bad new file
 * keeps the users there were, with a line in the error log). */
static void maybe_reload(struct auth *a, uint64_t now)
{
    uint64_t was = atomic_load_explicit(&a->checked_s, memory_order_relaxed);
    if (was == now || !atomic_compare_exchange_strong(&a->checked_s, &was, now))
        return;
    struct stat st;
    if (stat(a->path, &st) < 0)
        return; /* gone for a moment (an editor's rename): keep what there is */
    pthread_mutex_lock(&a->lock);
    bool same = same_file(&st, &a->st);
    pthread_mutex_unlock(&a->lock);
    if (same)
        return;
    struct htpasswd users;
    char why[300];
    if (read_file(a->path, a->secret, &users, &st, why, sizeof(why))) {
        LOG_LIMITED(LOG_ERROR, "auth: %s: keeping the users read before", why);
        return;
    }
    pthread_mutex_lock(&a->lock);
    struct htpasswd old = a->users;
    a->users = users;
    a->st = st;
    memset(a->cache, 0, sizeof(a->cache)); /* a removed user goes at once */
    pthread_mutex_unlock(&a->lock);
    htpasswd_free(&old);
    log_msg(LOG_INFO, "auth: read '%s' again (%zu users)", a->path, users.n);
}

static int challenge(struct colibri_response *resp, const struct auth *a)
{
    return colibri_resp_header(resp, "WWW-Authenticate", a->challenge) < 0 ? 500 : 401;
}

static struct fail_slot *fail_slot(struct auth *a, const uint8_t addr[16])
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ addr[i]) * 16777619u;
    return &a->fails[h % FAIL_SLOTS];
}

static int check(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct auth *a = data;
    uint64_t now = now_s();
    maybe_reload(a, now);

    const struct conn_peer *peer = conn_peer_of(req->ctx);
    uint8_t addr[16] = {0};
    cidr_addr(peer->family, peer->addr, addr);
    pthread_mutex_lock(&a->lock);
    struct fail_slot *fs = fail_slot(a, addr);
    bool blocked =
        !memcmp(fs->addr, addr, 16) && fs->count >= FAIL_MAX && now - fs->since_s < FAIL_WINDOW_S;
    uint64_t retry = blocked ? FAIL_WINDOW_S - (now - fs->since_s) : 0;
    pthread_mutex_unlock(&a->lock);
    if (blocked) {
        char v[24];
        snprintf(v, sizeof(v), "%llu", (unsigned long long)(retry ? retry : 1));
        colibri_resp_header(resp, "Retry-After", v);
        return 429;
    }

    struct colibri_str h;
    if (!colibri_req_header(req, "Authorization", &h))
        return challenge(resp, a);
    /* "Basic" 1*SP token68 (the scheme is case-insensitive) */
    size_t i = 0;
    if (h.len < 6 || strncasecmp(h.p, "Basic ", 6))
        return challenge(resp, a);
    for (i = 6; i < h.len && h.p[i] == ' ';)
        i++;
    size_t b64 = h.len - i;
    char cred[CRED_MAX];
    ssize_t n = b64 && b64 <= 4 * (CRED_MAX / 3) ? base64_decode(h.p + i, b64, cred) : -1;
    const char *colon = n > 0 ? memchr(cred, ':', (size_t)n) : NULL;
    if (!colon || colon == cred)
        return challenge(resp, a);
    size_t ul = (size_t)(colon - cred), pl = (size_t)n - ul - 1;
    const char *pw = colon + 1;

    char hash[HTPASSWD_HASH_MAX + 1];
    enum hp_kind kind = HP_CRYPT;
    /* An unknown user costs what a known one does: the lookup's time does
     * not depend on the name (htpasswd_find_blind), and the password is
     * verified against a real entry's hash all the same (same kind and
     * cost), its result not taken. */
    pthread_mutex_lock(&a->lock);
    const struct hp_entry *stand_in;
    bool known = htpasswd_find_blind(&a->users, cred, ul, &stand_in) != NULL;
    if (stand_in) {
        strcpy(hash, stand_in->hash);
        kind = stand_in->kind;
    }
    pthread_mutex_unlock(&a->lock);

    bool ok = false;
    uint8_t key[SHA1_LEN];
    if (stand_in) {
        struct sha1 s;
        sha1_init(&s);
        sha1_update(&s, a->secret, sizeof(a->secret));
        sha1_update(&s, cred, (size_t)n); /* user:password */
        sha1_update(&s, "\0", 1);
        sha1_update(&s, hash, strlen(hash));
        sha1_final(&s, key);
        pthread_mutex_lock(&a->lock);
        struct cache_slot *c = &a->cache[(key[0] | key[1] << 8) % CACHE_SLOTS];
        ok = known && c->until_s > now && !memcmp(c->key, key, SHA1_LEN);
        pthread_mutex_unlock(&a->lock);
        if (!ok && htpasswd_check(kind, hash, pw, pl) && known) {
            ok = true;
            pthread_mutex_lock(&a->lock);
            memcpy(c->key, key, SHA1_LEN);
            c->until_s = now + CACHE_TTL_S;
            pthread_mutex_unlock(&a->lock);
        }
    }
    explicit_bzero(cred + ul, (size_t)n - ul);
    if (!ok) {
        pthread_mutex_lock(&a->lock);
        if (memcmp(fs->addr, addr, 16) || now - fs->since_s >= FAIL_WINDOW_S) {
            memcpy(fs->addr, addr, 16);
            fs->count = 0;
            fs->since_s = now;
        }
        fs->count++;
        pthread_mutex_unlock(&a->lock);
        return challenge(resp, a);
    }
    char *user = arena_alloc(&req->hc->arena, ul + 1);
    if (user) {
        memcpy(user, cred, ul);
        user[ul] = '\0';
        req->hc->user = user;
    }
    return 0;
}

static void auth_free(void *p)
{
    struct auth *a = p;
    if (!a)
        return;
    htpasswd_free(&a->users);
    pthread_mutex_destroy(&a->lock);
    free(a->path);
    free(a->challenge);
    free(a);
}

static const struct colibri_filter auth_filter = {
    .name = "auth",
    .phase = COLIBRI_PHASE_ACCESS,
    .fn = check,
};

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'auth PREFIX { realm = NAME  htpasswd = FILE }'");
    struct colibri_conf *realm = colibri_conf_take(sec, "realm"),
                        *file = colibri_conf_take(sec, "htpasswd");
    if (!file)
        return colibri_conf_error(sec, err, errlen, "needs 'htpasswd = FILE'");
    const char *rv = realm ? colibri_conf_value(realm) : "Restricted";
    if (realm && !rv[0])
        return colibri_conf_error(realm, err, errlen, "must not be empty");
    for (const char *c = rv; *c; c++)
        if ((unsigned char)*c < ' ' || *c == 0x7f)
            return colibri_conf_error(realm, err, errlen, "a control byte in the realm");
    struct auth *a = calloc(1, sizeof(*a));
    if (!a)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    pthread_mutex_init(&a->lock, NULL);
    /* realm="..." with '"' and '\' escaped (a quoted-string) */
    size_t cap = 2 * strlen(rv) + 48;
    a->challenge = malloc(cap);
    a->path = strdup(colibri_conf_value(file));
    if (!a->challenge || !a->path || getrandom(a->secret, sizeof(a->secret), 0) < 0) {
        auth_free(a);
        return colibri_conf_error(sec, err, errlen, "out of memory");
    }
    char *o = a->challenge + sprintf(a->challenge, "Basic realm=\"");
    for (const char *c = rv; *c; c++) {
        if (*c == '"' || *c == '\\')
            *o++ = '\\';
        *o++ = *c;
    }
    strcpy(o, "\", charset=\"UTF-8\"");
    char why[400];
    if (read_file(a->path, a->secret, &a->users, &a->st, why, sizeof(why))) {
        auth_free(a);
        return colibri_conf_error(file, err, errlen, "%s", why);
    }
    a->checked_s = now_s();
    if (colibri_server_allow_path(srv, colibri_conf_value(file), COLIBRI_PATH_READ, why,
                                  sizeof(why))) {
        auth_free(a);
        return colibri_conf_error(file, err, errlen, "%s", why);
    }
    if (colibri_server_add_filter(srv, prefix, &auth_filter, a, auth_free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(auth) = {.name = "auth", .from_config = from_config};
