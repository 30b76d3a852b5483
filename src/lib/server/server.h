/* server.h - the inside of struct colibri_server: what the public
 * colibri_server_* calls build at start-up and the workers only read
 * afterwards. Shared by the files of server/ (not part of the public API).
 *
 * The server is the top of the tree: it owns the listeners, the routes,
 * the registered handlers and modules, and the workers, and it hands the
 * HTTP layer a struct http_config. Nothing below it knows it exists. */
#pragma once

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "colibri.h"
#include "http/http.h"
#include "http/vhost.h"
#include "rt/accept.h"
#include "rt/worker.h"
#include "server/listen.h"
#include "server/logs.h"
#include "server/privs.h"
#include "server/sandbox.h"

struct config;
struct tpl;

/* A generation: what one config built that requests read (the routes,
 * sites, modules' data, limits, error template: an http_config and what
 * it points to). The workers' HTTP slots point at the newest; a reload
 * publishes a new one and retires the old, which is freed once every
 * worker is done with it (worker_quiesce: no request in flight on it). */
struct server_gen {
    struct colibri_server *owner; /* holds the routes: the server itself, or a reload's */
    struct http_config *http;     /* &owner->http */
    /* by listener index (stable across reloads), 3 tables in one
     * allocation: proxy_protocol, tls, redirect ports (server_finish_http) */
    bool *proxy_protocol;
    struct server_gen *prev; /* the generation this one replaced */
    atomic_uint left;        /* once retired: workers not done with it yet */
    struct server_gen *next_retired;
};

struct colibri_server {
    struct config *cfg; /* the last config file read */
    struct listener *listeners;
    unsigned n_listeners;
    unsigned n_threads;
    struct worker **workers;
    struct http_worker **http_workers; /* one per worker */
    struct conn *conns;
    uint32_t max_fds;
    struct trie *routes; /* the default site's */
    struct http_route *route_list;
    /* objects modules share between their routes (builtin_keep), freed
     * with the routes */
    struct server_kept *kept;
    /* address families upstream connections use (1 << AF_*): what the
     * sandbox lets socket() and connect() make */
    unsigned connect_families;
    uint16_t *connect_ports; /* their TCP ports: what Landlock lets connect() reach */
    unsigned n_connect_ports;
    /* named sites (virtual hosts): one trie per "site NAME... { }" block,
     * and every name with the trie of its block and the line naming it */
    struct trie **site_routes;
    unsigned n_sites;
    struct http_vhost *vhosts; /* names owned */
    int *vhost_lines;
    unsigned n_vhosts;
    struct trie *loading; /* the named site being loaded: add_route's target (NULL: default) */
    int loading_line;     /* the config line being loaded (routes remember it), or 0 */
    bool has_default;     /* a "site { }", or a route added to the default site */
    /* the filters (http/filter.h): the default site's, and by index of
     * site_routes those of the named sites (n_site_filters of them so far) */
    struct http_filters *filters;
    struct http_filters *site_filters;
    unsigned n_site_filters;
    struct colibri_handler **handlers; /* each its own allocation: routes point to them */
    bool *handler_lib;                 /* by handler: registered by a "module FILE" library */
    unsigned n_handlers;
    struct colibri_module *modules;
    bool *module_lib;
    unsigned n_modules;
    bool in_lib_init; /* a library's colibri_module_init() is running */
    void **libs;      /* dlopen() handles of "module FILE" lines */
    unsigned n_libs;
    struct worker_cfg wcfg;
    struct http_config http;
    struct tpl *error_tpl;        /* owned; http.error_tpl points to it */
    bool *listen_shared;          /* by listener: one socket shared by all workers (systemd's) */
    struct privs privs;           /* "user", "chroot" */
    bool accept_thread;           /* accept = thread: one acceptor deals fds to workers */
    uint32_t max_conn_per_client; /* max_connections_per_client; 0: none */
    int acceptor_wake;            /* eventfd, acceptor mode only */
    int *acceptor_fds;            /* its sockets, until the acceptor takes them */
    /* "sandbox = true"; the paths it allows (NULL until one is named) */
    bool sandbox_on;
    struct sandbox *sandbox;
    struct acceptor acceptor;
    bool acceptor_ready; /* acceptor_init() was called */
    struct server_logs logs;
    /* HTTPS: the versions and TLS 1.2 ciphers (NULL: the default), the
     * certificates of the sites (built as their lines load; freed with
     * the routes), the first "tls = true" line; while a site loads, its
     * section and its index in tls */
    unsigned tls_protocols;
    bool tls_no_tickets;              /* tls_session_tickets = false */
    bool ktls_off;                    /* ktls = off */
    uint32_t tls_ticket_rotate;       /* seconds; 0: the default */
    unsigned char tls_ticket_key[80]; /* tls_ticket_key_file's bytes */
    bool has_ticket_key;
    char *tls_ciphers;
    struct tls_server *tls;
    struct config_node *tls_node;
    bool tls_pair_failed; /* a tls_certificate/tls_key line's error was told already */
    struct config_node *tls_site_of;
    int tls_site;
    struct conn_peer *peers; /* the peers' addresses, indexed by fd like conns */
    char *config_path;       /* the file colibri_server_load_config() read: what a reload reads */
    char *user_text, *chroot_text; /* "user" and "chroot" as written */
    /* reloading */
    struct colibri_server *reload_of; /* set in a reload's server: the running one */
    colibri_reload_fn reload_hook;
    void *reload_arg;
    /* what the last reload had for each key only a restart changes (its
     * warning is given once per change) */
    uint64_t restart_seen[16];
    unsigned restart_seen_set;
    struct server_gen *gen;     /* the newest generation, while running */
    struct server_gen *retired; /* older ones, until every worker is done with them */
    /* the control thread: reopens logs and reloads, woken through ctl_fd;
     * with colibri_server_take_signals() it also reads the signals that
     * ask for them (and for a stop) from sig_fd */
    int ctl_fd; /* eventfd, -1 when not running */
    int sig_fd; /* signalfd, -1 unless the server takes the signals */
    bool take_signals;
    atomic_bool ctl_stop, want_reopen, want_reload;
    bool ctl_started;
    pthread_t ctl_thread;
    /* both set from any thread (colibri_server_shutdown), or from a signal
     * handler: lock-free atomics, so that a stop and the start cannot miss
     * each other */
    atomic_int running;
    atomic_int stop_asap; /* shutdown asked for before the workers ran */
};

/* The handler or module registered under name, or NULL. */
const struct colibri_handler *server_find_handler(const struct colibri_server *srv,
                                                  const char *name);
const struct colibri_module *server_find_module(const struct colibri_server *srv, const char *name);

/* server.c */
unsigned server_cpu_count(void);
/* Frees the routes, sites and error template the server's config built
 * (idempotent). */
void server_release_routes(struct colibri_server *srv);
/* Fills s->http from what s loaded (routes, sites, methods) for the
 * listeners and logs of srv (s itself at start, the running server at a
 * reload), with proxy (room for srv->n_listeners) filled as its PROXY
 * table: by listener index, whether connections begin with a PROXY
 * header. */
void server_finish_http(struct colibri_server *s, const struct colibri_server *srv, bool *proxy);
/* The size of that table for n listeners. */
size_t server_listener_tables(unsigned n);

/* control.c: the control thread (log reopening, reloads) */
/* The signalfd of a server that takes its signals, opened before the
 * sandbox closes (control_stop closes it). */
int control_open_signals(struct colibri_server *srv, char *err, size_t errlen);
int control_start(struct colibri_server *srv, char *err, size_t errlen);
void control_stop(struct colibri_server *srv);
/* load_tls.c: one TLS config line each (load.c meets them): 0, or a
 * config error in err */
struct config_node;
int load_tls_protocols(struct colibri_server *srv, struct config_node *n, char *err, size_t errlen);
int load_ticket_key(struct colibri_server *srv, struct config_node *n, char *err, size_t errlen);
int load_tls_pair(struct colibri_server *srv, struct config_node *site, struct config_node *n,
                  char *err, size_t errlen);
int load_tls_staple(struct colibri_server *srv, struct config_node *site, struct config_node *n,
                    char *err, size_t errlen);

/* reload.c */
void server_reload(struct colibri_server *srv);
/* Frees every retired generation (the workers are gone) */
void server_free_retired(struct colibri_server *srv);
void server_gen_free(struct colibri_server *srv, struct server_gen *g);
