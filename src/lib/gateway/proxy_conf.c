/* proxy_conf.c - a "proxy PREFIX { ... }" section read into a route (proxy.c says what
 * its keys mean), the upstream group it names or makes, its TLS client
 * context for an https:// upstream. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/log.h"
#include "gateway/proxy.h"
#include "gateway/uphead.h"
#include "gateway/upio.h"
#include "gateway/upstream.h"
#include "http/request.h"
#include "http/status.h"
#include "rt/tls.h"
#include "gateway/uptls.h"
#include "server/builtin.h"

/* --- config ------------------------------------------------------------------------ */

static const struct colibri_handler proxy_h = {
    .name = "proxy",
    .fn = proxy_handler,
    .methods = (1u << COLIBRI_METHOD_COUNT) - 1,
};

static void route_free(void *arg)
{
    struct proxy_route *pr = arg;
    if (pr->own_up)
        gw_upstream_free(pr->up);
    free(pr);
}

static int take_bool(struct colibri_conf *sec, const char *key, bool *out, char *err, size_t errlen)
{
    struct colibri_conf *c = colibri_conf_take(sec, key);
    return c ? colibri_conf_bool(c, out, err, errlen) : 0;
}

/* tls_verify, tls_ca, tls_server_name: for a "to = https://..." upstream,
 * whose client context is made here; a named group has its own. */
static int take_tls(struct colibri_server *srv, struct colibri_conf *sec, struct colibri_conf *to,
                    struct proxy_route *pr, char *err, size_t errlen)
{
    if (pr->own_up)
        return gw_upstream_tls(srv, sec, to, pr->up, "needs 'to = https://HOST:PORT'", err, errlen);
    static const char *const keys[] = {"tls_verify", "tls_ca", "tls_server_name"};
    for (int i = 0; i < 3; i++) {
        struct colibri_conf *c = colibri_conf_take(sec, keys[i]);
        if (c)
            return colibri_conf_error(c, err, errlen,
                                      "'to' names the upstream '%s': this key goes in its "
                                      "section, beside its 'server https://...' lines",
                                      pr->up->name);
    }
    return 0;
}

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen, "expected 'proxy PREFIX { to = UPSTREAM }'");
    struct proxy_route *pr = calloc(1, sizeof(*pr));
    if (!pr)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    *pr = (struct proxy_route){
        .websocket = true, .connect_ms = 5000, .read_ms = 60000, .send_ms = 60000, .retries = 2};
    pr->prefix_len = strlen(prefix);
    if (prefix[pr->prefix_len - 1] == '/')
        pr->prefix_len--;
    int r = 0;
    struct colibri_conf *to = colibri_conf_take(sec, "to"), *c;
    if (!to) {
        r = colibri_conf_error(sec, err, errlen, "needs 'to = UPSTREAM or ADDRESS'");
    } else {
        const char *v = colibri_conf_value(to);
        pr->up = builtin_find(srv, "upstream", v);
        if (!pr->up) {
            r = gw_upstream_single(to, v, &pr->up, err, errlen);
            pr->own_up = !r;
            char why[256];
            if (!r && builtin_allow_connect(srv, (const struct sockaddr *)&pr->up->servers[0].addr,
                                            why, sizeof(why)))
                r = colibri_conf_error(to, err, errlen, "%s", why);
        }
    }
    if (!r)
        r = take_bool(sec, "strip_prefix", &pr->strip_prefix, err, errlen);
    if (!r)
        r = take_bool(sec, "preserve_host", &pr->preserve_host, err, errlen);
    if (!r)
        r = gw_take_timeout(sec, "connect_timeout", &pr->connect_ms, err, errlen);
    if (!r)
        r = gw_take_timeout(sec, "read_timeout", &pr->read_ms, err, errlen);
    if (!r)
        r = gw_take_timeout(sec, "send_timeout", &pr->send_ms, err, errlen);
    if (!r && (c = colibri_conf_take(sec, "retries"))) {
        long v;
        if (!(r = colibri_conf_int(c, 0, GW_SERVERS_MAX, &v, err, errlen)))
            pr->retries = (unsigned)v;
    }
    if (!r)
        r = take_bool(sec, "websocket", &pr->websocket, err, errlen);
    if (!r)
        r = take_bool(sec, "buffer_response", &pr->buffer_response, err, errlen);
    if (!r && (c = colibri_conf_take(sec, "max_body")))
        r = colibri_conf_size(c, &pr->max_body, err, errlen);
    if (!r)
        r = take_tls(srv, sec, to, pr, err, errlen);
    if (!r && pr->up && !pr->own_up)
        gw_upstream_use(pr->up);
    if (r) {
        route_free(pr);
        return r;
    }
    char why[256];
    if (colibri_server_add_route(srv, prefix, &proxy_h, pr, route_free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(proxy) = {.name = "proxy", .from_config = from_config};
