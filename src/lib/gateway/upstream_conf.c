/* upstream_conf.c - upstream groups from the config: the addresses, the
 * "upstream NAME { }" section (a top-level module), a route's single
 * address, the timeout keys (see upstream.h). */
#include "gateway/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/common.h"
#include "base/log.h"
#include "gateway/uptls.h"
#include "server/builtin.h"

/* --- addresses ------------------------------------------------------------------ */

/* "unix:/path", "HOST:PORT" or "[V6]:PORT" (a name is resolved now, its
 * first address kept). 0, or -EINVAL with why. */
static int parse_addr(const char *a, struct gw_server *s, char *why, size_t whylen)
{
    memset(&s->addr, 0, sizeof(s->addr));
    if (!strncmp(a, "unix:", 5)) {
        struct sockaddr_un *un = (struct sockaddr_un *)&s->addr;
        const char *path = a + 5;
        if (path[0] != '/' || strlen(path) >= sizeof(un->sun_path))
            return snprintf(why, whylen,
                            "'%s': a unix socket needs an absolute path of at most %zu bytes", a,
                            sizeof(un->sun_path) - 1),
                   -EINVAL;
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        s->addr_len = sizeof(*un);
        snprintf(s->text, sizeof(s->text), "%.*s", (int)sizeof(s->text) - 1, a);
        snprintf(s->host, sizeof(s->host), "localhost");
        return 0;
    }
    char host[256];
    const char *port;
    if (a[0] == '[') {
        const char *close = strchr(a, ']');
        if (!close || close[1] != ':' || (size_t)(close - a - 1) >= sizeof(host))
            goto bad;
        memcpy(host, a + 1, (size_t)(close - a - 1));
        host[close - a - 1] = '\0';
        port = close + 2;
    } else {
        const char *colon = strrchr(a, ':');
        if (!colon || colon == a || (size_t)(colon - a) >= sizeof(host) ||
            memchr(a, ':', (size_t)(colon - a)))
            goto bad;
        memcpy(host, a, (size_t)(colon - a));
        host[colon - a] = '\0';
        port = colon + 1;
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 1 || p > 65535)
        goto bad;
    for (const char *c = host; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == '/' || *c == '@' || (unsigned char)*c >= 0x7f)
            goto bad;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int r = getaddrinfo(host, port, &hints, &res);
    if (r)
        return snprintf(why, whylen, "'%s': %s", a, gai_strerror(r)), -EINVAL;
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    s->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    snprintf(s->text, sizeof(s->text), "%.*s", (int)sizeof(s->text) - 1, a);
    snprintf(s->host, sizeof(s->host), "%.*s", (int)sizeof(s->host) - 1, a);
    return 0;
bad:
    snprintf(why, whylen, "'%s' is not an address (HOST:PORT, [IPV6]:PORT or unix:/PATH)", a);
    return -EINVAL;
}

/* An address with an optional scheme: "http://HOST[:PORT]" (port 80),
 * "https://HOST[:PORT]" (443; the server is spoken to over TLS), or one
 * of parse_addr's. schemed: whether it had one. 0, or -EINVAL with why. */
static int parse_url(const char *a, struct gw_server *s, bool *schemed, char *why, size_t whylen)
{
    bool https = !strncmp(a, "https://", 8);
    *schemed = https || !strncmp(a, "http://", 7);
    if (!*schemed)
        return parse_addr(a, s, why, whylen);
    const char *h = a + (https ? 8 : 7);
    if (strchr(h, '/') || strchr(h, '?'))
        return snprintf(why, whylen, "'%s': no path after the address", a), -EINVAL;
    char withport[300];
    if (h[0] != '[' ? !strchr(h, ':') : !strstr(h, "]:")) {
        snprintf(withport, sizeof(withport), "%s:%s", h, https ? "443" : "80");
        h = withport;
    }
    if (https && strlen(h) >= sizeof(s->text))
        return snprintf(why, whylen, "'%s': host name too long", a), -EINVAL;
    int r = parse_addr(h, s, why, whylen);
    s->https = https && !r;
    return r;
}

/* --- config ---------------------------------------------------------------------- */

static struct gw_upstream *new_group(const char *name, unsigned n)
{
    struct gw_upstream *up = calloc(1, sizeof(*up));
    if (!up)
        return NULL;
    up->name = strdup(name);
    up->servers = calloc(n ? n : 1, sizeof(*up->servers));
    up->balance = GW_ROUND_ROBIN;
    up->keepalive = 32;
    up->keepalive_timeout_ms = 60000;
    up->max_fails = 1;
    up->fail_timeout_ms = 10000;
    up->health_interval_ms = 5000;
    up->stop_fd = -1;
    if (!up->name || !up->servers) {
        gw_upstream_free(up);
        return NULL;
    }
    return up;
}

static int take_ms(struct colibri_conf *sec, const char *key, uint64_t min, uint64_t *out,
                   char *err, size_t errlen)
{
    struct colibri_conf *c = colibri_conf_take(sec, key);
    if (!c)
        return 0;
    int r = colibri_conf_duration_ms(c, out, err, errlen);
    if (!r && (*out < min || *out > 86400000ull))
        r = colibri_conf_error(c, err, errlen, "must be between %llums and a day",
                               (unsigned long long)min);
    return r;
}

static int take_uint(struct colibri_conf *sec, const char *key, long min, long max, unsigned *out,
                     char *err, size_t errlen)
{
    struct colibri_conf *c = colibri_conf_take(sec, key);
    long v;
    if (!c)
        return 0;
    int r = colibri_conf_int(c, min, max, &v, err, errlen);
    if (!r)
        *out = (unsigned)v;
    return r;
}

static int load_server(struct gw_upstream *up, struct colibri_conf *c, char *err, size_t errlen)
{
    struct gw_server *s = &up->servers[up->n];
    char why[512];
    const char *v = colibri_conf_value(c);
    bool schemed;
    if (!v[0] || strchr(v, ' '))
        return colibri_conf_error(c, err, errlen,
                                  "expected 'server ADDRESS' or 'server ADDRESS { weight = N }'");
    if (parse_url(v, s, &schemed, why, sizeof(why)))
        return colibri_conf_error(c, err, errlen, "%s", why);
    up->https = up->https || s->https;
    s->weight = 1;
    int r = take_uint(c, "weight", 1, 1000, &s->weight, err, errlen);
    struct colibri_conf *b = colibri_conf_take(c, "backup");
    if (!r && b)
        r = colibri_conf_bool(b, &s->backup, err, errlen);
    if (!r)
        up->n++;
    return r;
}

int gw_upstream_from_config(struct colibri_conf *sec, struct gw_upstream **out, char *err,
                            size_t errlen)
{
    const char *name = colibri_conf_value(sec);
    *out = NULL;
    if (!name[0] || strchr(name, ' ') || strchr(name, '/') || strchr(name, ':'))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'upstream NAME { server ADDRESS ... }' (a plain name)");
    struct gw_upstream *up = new_group(name, GW_SERVERS_MAX);
    if (!up)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    int r = 0;
    struct colibri_conf *c;
    while (!r && (c = colibri_conf_take(sec, "server"))) {
        if (up->n == GW_SERVERS_MAX)
            r = colibri_conf_error(c, err, errlen, "at most %d servers", GW_SERVERS_MAX);
        else
            r = load_server(up, c, err, errlen);
    }
    if (!r && !up->n)
        r = colibri_conf_error(sec, err, errlen, "needs at least one 'server ADDRESS'");
    bool primary = false;
    for (unsigned i = 0; i < up->n; i++)
        primary = primary || !up->servers[i].backup;
    if (!r && !primary)
        r = colibri_conf_error(sec, err, errlen, "needs a server that is not a backup");
    if (!r && (c = colibri_conf_take(sec, "balance"))) {
        const char *b = colibri_conf_value(c);
        if (!strcmp(b, "round_robin"))
            up->balance = GW_ROUND_ROBIN;
        else if (!strcmp(b, "least_conn"))
            up->balance = GW_LEAST_CONN;
        else if (!strcmp(b, "hash"))
            up->balance = GW_HASH;
        else
            r = colibri_conf_error(c, err, errlen,
                                   "expected 'round_robin', 'least_conn' or 'hash'");
    }
    if (!r && (c = colibri_conf_take(sec, "hash_key"))) {
        const char *k = colibri_conf_value(c);
        if (up->balance != GW_HASH)
            r = colibri_conf_error(c, err, errlen, "needs 'balance = hash'");
        else if (!strcmp(k, "client_addr") || !strcmp(k, "remote_addr"))
            ;
        else if (!strncmp(k, "header:", 7) && k[7]) {
            for (const char *p = k + 7; *p && !r; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
                    r = colibri_conf_error(c, err, errlen, "'%s' is not a header name", k + 7);
            if (!r && !(up->hash_header = strdup(k + 7)))
                r = colibri_conf_error(c, err, errlen, "out of memory");
        } else
            r = colibri_conf_error(c, err, errlen, "expected 'client_addr' or 'header:NAME'");
    }
    if (!r)
        r = take_uint(sec, "keepalive", 0, 4096, &up->keepalive, err, errlen);
    if (!r)
        r = take_ms(sec, "keepalive_timeout", 1, &up->keepalive_timeout_ms, err, errlen);
    if (!r)
        r = take_uint(sec, "max_fails", 0, 1000, &up->max_fails, err, errlen);
    if (!r)
        r = take_ms(sec, "fail_timeout", 1, &up->fail_timeout_ms, err, errlen);
    if (!r && (c = colibri_conf_take(sec, "health_check"))) {
        const char *p = colibri_conf_value(c);
        bool ok = p[0] == '/';
        for (const char *q = p; *q && ok; q++)
            ok = (unsigned char)*q > ' ' && (unsigned char)*q < 0x7f;
        if (!ok)
            r = colibri_conf_error(c, err, errlen, "expected a path (/...) of visible characters");
        else if (!(up->health_check = strdup(p)))
            r = colibri_conf_error(c, err, errlen, "out of memory");
    }
    if (!r && (c = colibri_conf_take(sec, "health_interval"))) {
        if (!up->health_check)
            r = colibri_conf_error(c, err, errlen, "needs 'health_check = PATH'");
        else {
            r = colibri_conf_duration_ms(c, &up->health_interval_ms, err, errlen);
            if (!r && (up->health_interval_ms < 100 || up->health_interval_ms > 86400000))
                r = colibri_conf_error(c, err, errlen, "must be between 100ms and a day");
        }
    }
    if (r) {
        gw_upstream_free(up);
        return r;
    }
    *out = up;
    return 0;
}

int gw_upstream_single(struct colibri_conf *to, const char *addr, struct gw_upstream **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    struct gw_upstream *up = new_group(addr, 1);
    if (!up)
        return colibri_conf_error(to, err, errlen, "out of memory");
    char why[512];
    bool schemed;
    if (parse_url(addr, &up->servers[0], &schemed, why, sizeof(why))) {
        gw_upstream_free(up);
        if (schemed)
            return colibri_conf_error(to, err, errlen, "%s", why);
        return colibri_conf_error(to, err, errlen,
                                  "'%s' is neither an upstream's name nor an address "
                                  "(http://HOST:PORT, HOST:PORT or unix:/PATH)",
                                  addr);
    }
    up->https = up->servers[0].https;
    up->servers[0].weight = 1;
    up->n = 1;
    gw_stats_register(up);
    *out = up;
    return 0;
}

/* The host of a server's "HOST:PORT" or "[V6]:PORT": its TLS name. */
static void host_of(const char *text, char *out, size_t cap)
{
    const char *h = text[0] == '[' ? text + 1 : text;
    size_t n = strcspn(h, text[0] == '[' ? "]" : ":");
    snprintf(out, cap, "%.*s", (int)n, h);
}

int gw_upstream_tls(struct colibri_server *srv, struct colibri_conf *sec,
                    struct colibri_conf *anchor, struct gw_upstream *up, const char *needs,
                    char *err, size_t errlen)
{
    static const char *const keys[] = {"tls_verify", "tls_ca", "tls_server_name"};
    struct colibri_conf *c[3];
    for (int i = 0; i < 3; i++)
        c[i] = colibri_conf_take(sec, keys[i]);
    for (int i = 0; i < 3; i++)
        if (c[i] && !up->https)
            return colibri_conf_error(c[i], err, errlen, "%s", needs);
    if (!up->https)
        return 0;
    bool verify = true;
    const char *ca = NULL, *name = NULL;
    int r;
    if (c[0] && (r = colibri_conf_bool(c[0], &verify, err, errlen)))
        return r;
    if (c[1]) {
        ca = colibri_conf_value(c[1]);
        if (!verify)
            return colibri_conf_error(c[1], err, errlen, "has no use with 'tls_verify = false'");
        if (!*ca || access(ca, R_OK))
            return colibri_conf_error(c[1], err, errlen, "'%s': %s", ca,
                                      *ca ? strerror(errno) : "expected a file");
    }
    if (c[2]) {
        name = colibri_conf_value(c[2]);
        size_t n = strlen(name);
        bool ok = n > 0 && n < 254;
        for (const char *q = name; *q && ok; q++)
            ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                 *q == '.' || *q == '-' || *q == ':' || *q == '_';
        if (!ok)
            return colibri_conf_error(c[2], err, errlen, "'%s': expected a host name", name);
    }
    char why[512];
    /* the CAs are read now; the system's folder also while verifying
     * (OpenSSL looks certificates up there by hash): the sandbox lets them */
    if (ca && colibri_server_allow_path(srv, ca, COLIBRI_PATH_READ, why, sizeof(why)))
        return colibri_conf_error(c[1], err, errlen, "%s", why);
    if (verify && !ca) {
        const char *paths[2];
        gw_tls_default_paths(&paths[0], &paths[1]);
        for (int i = 0; i < 2; i++)
            if (paths[i] && !access(paths[i], R_OK) &&
                colibri_server_allow_path(srv, paths[i], COLIBRI_PATH_READ, why, sizeof(why)))
                return colibri_conf_error(anchor, err, errlen, "%s", why);
    }
    /* a context per server: its own name, and its own latest session to resume */
    for (unsigned i = 0; i < up->n; i++) {
        struct gw_server *s = &up->servers[i];
        char host[sizeof(s->text)];
        if (!s->https)
            continue;
        host_of(s->text, host, sizeof(host));
        if (gw_tls_new(&s->tls, host, verify, ca, name, why, sizeof(why)))
            return colibri_conf_error(c[1] ? c[1] : anchor, err, errlen, "%s", why);
    }
    return 0;
}

/* --- the "upstream NAME { }" section (a top-level module) -------------------------- */

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    struct gw_upstream *up;
    int r = gw_upstream_from_config(sec, &up, err, errlen);
    if (r)
        return r;
    char why[256];
    for (unsigned i = 0; i < up->n; i++)
        if (builtin_allow_connect(srv, (const struct sockaddr *)&up->servers[i].addr, why,
                                  sizeof(why))) {
            gw_upstream_free(up);
            return colibri_conf_error(sec, err, errlen, "%s", why);
        }
    r = gw_upstream_tls(srv, sec, sec, up, "needs a 'server https://HOST:PORT'", err, errlen);
    if (r) {
        gw_upstream_free(up);
        return r;
    }
    r = builtin_keep(srv, "upstream", up->name, up, gw_upstream_free, gw_upstream_live);
    if (r == -EEXIST) {
        gw_upstream_free(up);
        return colibri_conf_error(sec, err, errlen, "upstream '%s' is defined twice",
                                  colibri_conf_value(sec));
    }
    if (r) {
        gw_upstream_free(up);
        return colibri_conf_error(sec, err, errlen, "out of memory");
    }
    gw_stats_register(up);
    return 0;
}

BUILTIN_MODULE(upstream) = {.name = "upstream", .from_config = from_config};

int gw_take_timeout(struct colibri_conf *sec, const char *key, int *out, char *err, size_t errlen)
{
    struct colibri_conf *c = colibri_conf_take(sec, key);
    uint64_t ms;
    if (!c)
        return 0;
    int r = colibri_conf_duration_ms(c, &ms, err, errlen);
    if (r)
        return r;
    if (ms < 1 || ms > 86400000)
        return colibri_conf_error(c, err, errlen, "must be between 1ms and a day");
    *out = (int)ms;
    return 0;
}
