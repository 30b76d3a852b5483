/* server.h - the inside of struct colibri_server: what the public
 * colibri_server_* calls build at start-up and the workers only read
 * afterwards. Shared by the files of server/ (not part of the public API).
 *
 * The server is the top of the tree: it owns the listeners, the routes,
 * the registered handlers and modules, and the workers, and it hands the
 * HTTP layer a struct http_config. Nothing below it knows it exists. */
#pragma once

#include <signal.h>
#include <sys/socket.h>

#include "colibri.h"
#include "http/http.h"
#include "http/vhost.h"
#include "rt/worker.h"
#include "server/listen.h"
#include "server/logs.h"
#include "server/privs.h"

struct config;
struct tpl;

struct colibri_server {
    struct config *cfg; /* the last config file read */
    struct listener *listeners;
    unsigned n_listeners;
    unsigned n_threads;
    struct worker *workers;
    struct http_worker **http_workers; /* one per worker */
    struct conn *conns;
    uint32_t max_fds;
    struct trie *routes; /* the default site's */
    struct http_route *route_list;
    /* named sites (virtual hosts): one trie per "site NAME... { }" block,
     * and every name with the trie of its block and the line naming it */
    struct trie **site_routes;
    unsigned n_sites;
    struct http_vhost *vhosts; /* names owned */
    int *vhost_lines;
    unsigned n_vhosts;
    struct trie *loading; /* the named site being loaded: add_route's target (NULL: default) */
    bool has_default;     /* a "site { }", or a route added to the default site */
    struct colibri_handler *handlers;
    unsigned n_handlers;
    struct colibri_module *modules;
    unsigned n_modules;
    void **libs; /* dlopen() handles of "module FILE" lines */
    unsigned n_libs;
    struct worker_cfg wcfg;
    struct http_config http;
    struct tpl *error_tpl; /* owned; http.error_tpl points to it */
    bool *proxy_protocol;  /* by listener; http.proxy_protocol points to it */
    bool *listen_shared;   /* by listener: one socket shared by all workers (systemd's) */
    struct privs privs;    /* "user", "chroot" */
    bool accept_thread;    /* accept = thread: one acceptor deals fds to workers */
    int acceptor_wake;     /* eventfd, acceptor mode only */
    int *acceptor_fds;
    struct server_logs logs;
    struct conn_peer *peers; /* the peers' addresses, indexed by fd like conns */
    volatile sig_atomic_t running;
    volatile sig_atomic_t stop_asap; /* shutdown asked for before the workers ran */
};

/* The handler or module registered under name, or NULL. */
const struct colibri_handler *server_find_handler(const struct colibri_server *srv,
                                                  const char *name);
const struct colibri_module *server_find_module(const struct colibri_server *srv, const char *name);
