/* metrics.c - the metrics module: Prometheus' text exposition at a prefix.
 *
 *     metrics /metrics {
 *         allow = 127.0.0.1/8 ::1     # who may scrape (others: 403); default: anyone
 *     }
 *
 * The section turns counting on (http/metrics.h): from then on every
 * worker counts its answered requests in counters of its own, which the
 * scrape sums. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/metrics.h"
#include "http/request.h"
#include "mod/cidr.h"
#include "rt/conn.h"
#include "server/builtin.h"

struct metrics {
    unsigned n;
    struct cidr allow[];
};

static int scrape(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    const struct metrics *m = data;
    if (m->n) {
        const struct conn_peer *peer = conn_peer_of(req->ctx);
        uint8_t a[16];
        bool known = cidr_addr(peer->family, peer->addr, a), ok = false;
        for (unsigned i = 0; i < m->n && !ok; i++)
            ok = !m->allow[i].bits || (known && cidr_match(&m->allow[i], a));
        if (!ok)
            return 403;
    }
    if (http_metrics_render(req, &req->hc->body) < 0)
        return 500;
    colibri_resp_set_type(resp, "text/plain; version=0.0.4; charset=utf-8");
    return 200;
}

static const struct colibri_handler metrics_handler = {.name = "metrics", .fn = scrape};

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'metrics PREFIX { allow = CIDR... }'");
    struct metrics *m = calloc(1, sizeof(*m));
    struct colibri_conf *k;
    if (!m)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    while ((k = colibri_conf_take(sec, "allow"))) {
        size_t n;
        const char *const *w = colibri_conf_words(k, &n);
        struct metrics *g = n ? realloc(m, sizeof(*m) + (m->n + n) * sizeof(m->allow[0])) : NULL;
        if (!g) {
            free(m);
            return colibri_conf_error(
                k, err, errlen, n ? "out of memory" : "needs addresses (CIDR blocks, or all)");
        }
        m = g;
        for (size_t i = 0; i < n; i++) {
            const char *why;
            if (cidr_parse(w[i], &m->allow[m->n++], &why)) {
                free(m);
                return colibri_conf_error(k, err, errlen, "bad CIDR '%s': %s", w[i], why);
            }
        }
    }
    char why[256];
    if (colibri_server_add_route(srv, prefix, &metrics_handler, m, free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    http_metrics_enable();
    return 0;
}

BUILTIN_MODULE(metrics) = {.name = "metrics", .from_config = from_config};
