/* access.c - the access module: a filter of the access phase.
 *
 *     access /admin {
 *         allow = 127.0.0.1/8 ::1 10.0.0.0/8    # CIDR lists; first match wins
 *         deny = all                             # 403
 *     }
 *
 * The allow and deny keys are read in the order written; the first block
 * that holds the client's address decides (deny: 403 before the handler
 * runs or a body is read); an address no block holds is let through. The
 * address is the connection's, or the one its PROXY header named. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"
#include "mod/cidr.h"
#include "rt/conn.h"
#include "server/builtin.h"

struct rule {
    struct cidr block;
    bool allow;
};

struct access {
    unsigned n;
    struct rule rules[];
};

static int check(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)resp;
    const struct access *a = data;
    const struct conn_peer *peer = conn_peer_of(req->ctx);
    uint8_t addr[16];
    bool known = cidr_addr(peer->family, peer->addr, addr);
    for (unsigned i = 0; i < a->n; i++) {
        const struct rule *r = &a->rules[i];
        if (r->block.bits ? known && cidr_match(&r->block, addr) : true)
            return r->allow ? 0 : 403;
    }
    return 0;
}

static const struct colibri_filter access_filter = {
    .name = "access",
    .phase = COLIBRI_PHASE_ACCESS,
    .fn = check,
};

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'access PREFIX { allow = CIDR... deny = CIDR... }'");
    struct access *a = calloc(1, sizeof(*a));
    if (!a)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    struct colibri_conf *k;
    while ((k = colibri_conf_take_any(sec))) {
        const char *name = colibri_conf_name(k);
        bool allow = !strcmp(name, "allow");
        if (!allow && strcmp(name, "deny")) {
            free(a);
            return colibri_conf_error(k, err, errlen, "unknown key (access takes allow and deny)");
        }
        size_t n;
        const char *const *w = colibri_conf_words(k, &n);
        if (!n) {
            free(a);
            return colibri_conf_error(k, err, errlen, "needs addresses (CIDR blocks, or all)");
        }
        struct access *b = realloc(a, sizeof(*a) + (a->n + n) * sizeof(a->rules[0]));
        if (!b) {
            free(a);
            return colibri_conf_error(k, err, errlen, "out of memory");
        }
        a = b;
        for (size_t i = 0; i < n; i++) {
            const char *why;
            if (cidr_parse(w[i], &a->rules[a->n].block, &why)) {
                free(a);
                return colibri_conf_error(k, err, errlen, "bad CIDR '%s': %s", w[i], why);
            }
            a->rules[a->n++].allow = allow;
        }
    }
    if (!a->n) {
        free(a);
        return colibri_conf_error(sec, err, errlen, "needs allow or deny lines");
    }
    char why[256];
    if (colibri_server_add_filter(srv, prefix, &access_filter, a, free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(access) = {.name = "access", .from_config = from_config};
