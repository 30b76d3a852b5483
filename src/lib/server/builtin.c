/* builtin.c - what the server keeps for the modules built into the library
 * (see builtin.h): objects shared between a module's routes for a config
 * generation, the addresses a gateway may connect to under the sandbox,
 * and the versions of the libraries those modules run on. */
#include "server/builtin.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <arpa/inet.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "rt/tls.h"
#include "server/sandbox.h"
#include "server/server.h"

struct server_kept {
    char *kind, *name;
    void *obj;
    void (*free_fn)(void *);
    void (*live_fn)(void *);
    bool live;
    struct server_kept *next;
};

int builtin_keep(struct colibri_server *srv, const char *kind, const char *name, void *obj,
                 void (*free_fn)(void *), void (*live_fn)(void *))
{
    if (builtin_find(srv, kind, name))
        return -EEXIST;
    struct server_kept *k = calloc(1, sizeof(*k));
    if (!k || !(k->kind = strdup(kind)) || !(k->name = strdup(name))) {
        if (k)
            free(k->kind);
        free(k);
        return -ENOMEM;
    }
    *k = (struct server_kept){.kind = k->kind,
                              .name = k->name,
                              .obj = obj,
                              .free_fn = free_fn,
                              .live_fn = live_fn,
                              .next = srv->kept};
    srv->kept = k;
    return 0;
}

void builtin_live(struct colibri_server *srv)
{
    for (struct server_kept *k = srv->kept; k; k = k->next)
        if (k->live_fn && !k->live) {
            k->live = true;
            k->live_fn(k->obj);
        }
}

void *builtin_find(struct colibri_server *srv, const char *kind, const char *name)
{
    for (struct server_kept *k = srv->kept; k; k = k->next)
        if (!strcmp(k->kind, kind) && !strcmp(k->name, name))
            return k->obj;
    return NULL;
}

static bool has_port(const struct colibri_server *srv, uint16_t port)
{
    for (unsigned i = 0; i < srv->n_connect_ports; i++)
        if (srv->connect_ports[i] == port)
            return true;
    return false;
}

int builtin_allow_connect(struct colibri_server *srv, const struct sockaddr *addr, char *err,
                          size_t errlen)
{
    int family = addr->sa_family;
    unsigned bit = 1u << family;
    uint16_t port = 0;
    if (family == AF_INET)
        port = ntohs(((const struct sockaddr_in *)(const void *)addr)->sin_port);
    else if (family == AF_INET6)
        port = ntohs(((const struct sockaddr_in6 *)(const void *)addr)->sin6_port);
    const struct colibri_server *top = srv->reload_of ? srv->reload_of : srv;
    if (sandbox_closed(srv) && (!(top->connect_families & bit) || (port && !has_port(top, port))))
        return err_set(err, errlen, -EACCES, NULL,
                       "the sandbox was closed without connections to this address family or "
                       "port: restart to add them");
    srv->connect_families |= bit;
    if (port && !has_port(srv, port)) {
        uint16_t *p = realloc(srv->connect_ports, (srv->n_connect_ports + 1) * sizeof(*p));
        if (!p)
            return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        p[srv->n_connect_ports++] = port;
        srv->connect_ports = p;
    }
    return 0;
}

void builtin_release(struct colibri_server *srv)
{
    while (srv->kept) {
        struct server_kept *k = srv->kept;
        srv->kept = k->next;
        if (k->free_fn)
            k->free_fn(k->obj);
        free(k->kind);
        free(k->name);
        free(k);
    }
}

int colibri_libraries(char *buf, size_t len)
{
    char pcre[32] = "";
    if (pcre2_config(PCRE2_CONFIG_VERSION, pcre) < 0)
        snprintf(pcre, sizeof(pcre), "?");
    int n = snprintf(buf, len, "nghttp2 %s, PCRE2 %s", nghttp2_version(0)->version_str, pcre);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

const char *colibri_tls_library(void)
{
    return tls_library();
}
