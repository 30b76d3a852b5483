/* server.h - the inside of struct colibri_server, shared by the HTTP
 * modules (not part of the public API). Everything here is written at
 * start-up and only read by the workers afterwards. */
#pragma once

#include <signal.h>
#include <sys/socket.h>

#include "colibri.h"
#include "config/config.h"
#include "http/parser.h"
#include "route/trie.h"
#include "rt/worker.h"
#include "tpl/tpl.h"

struct route {
    const struct colibri_handler *handler;
    void *data;
    void (*free_data)(void *);
    struct route *next; /* every route, for freeing */
};

struct listener {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char name[80];
};

struct colibri_server {
    struct config *cfg;
    struct listener *listeners;
    unsigned n_listeners;
    unsigned n_threads;
    struct worker *workers;
    struct conn *conns;
    uint32_t max_fds;
    struct trie *routes;
    struct route *route_list;
    struct colibri_handler *handlers;
    unsigned n_handlers;
    struct worker_cfg wcfg;
    struct http_limits limits;
    size_t max_body;
    char server_hdr[128]; /* "Server: colibri\r\n", or "" */
    size_t server_hdr_len;
    bool accept_thread; /* accept = thread: one acceptor deals fds to workers */
    int acceptor_wake;  /* eventfd, acceptor mode only */
    int *acceptor_fds;
    struct tpl *error_tpl;        /* error_template, or NULL for the built-in pages */
    struct tpl_scratch **scratch; /* one per worker, for rendering */
    volatile sig_atomic_t running;
    volatile sig_atomic_t stop_asap; /* shutdown asked for before the workers ran */
};

/* The connection coroutine (conn_http.c). */
void http_conn_main(struct coro *coro, void *ctx);
void http_request_timeout(struct worker *w, int fd);

/* Built-in handlers (mod/builtin.c). */
extern const struct colibri_handler colibri_builtin_handlers[];
extern const unsigned colibri_n_builtin_handlers;

/* The status line "HTTP/1.1 200 OK\r\n" and the reason phrase; an unknown
 * code gets a generic line of its class. */
struct view http_status_line(int status);
struct view http_status_reason(int status);
/* A small HTML page for an error status. */
struct view http_error_page(int status);

/* What an error_template sees: {{status}}, {{reason}}, {{method}}, {{path}}. */
struct http_error_data {
    int status;
    const char *reason;
    struct view method;
    struct view path;
};
extern const struct tpl_desc http_error_desc;

/* Adds a route to a handler the caller owns (server.c). */
int server_add_route(struct colibri_server *srv, const char *prefix,
                     const struct colibri_handler *h, void *data, void (*free_data)(void *));
