/* http.h - the HTTP/1.1 protocol as the runtime runs it: what the server
 * hands the HTTP layer at start-up, and the protocol it gets back.
 *
 * The HTTP layer does not know the server: it sees a struct http_config,
 * written before the workers see it and only read afterwards (a reload
 * hands them a new one, http_worker_set_config), and one
 * struct http_worker per worker thread (its Date header and render
 * scratch), given to the runtime as the worker's protocol slot. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "colibri.h"
#include "http/parser.h"
#include "rt/conn.h"

struct trie;
struct http_vhost;
struct http_log;
struct http_log_files;
struct http_filters;
struct tpl;
struct tpl_scratch;

/* A route: what the trie maps a path prefix to. */
struct http_route {
    const struct colibri_handler *handler;
    void *data;
    void (*free_data)(void *);
    struct http_route *next; /* every route, for freeing */
    uint64_t max_body;       /* its request bodies' limit; 0: the server's max_body */
    uint32_t body_timeout_s; /* its bodies' whole-body deadline; 0: the server's */
    int line;                /* the config line that made it (0: a program's call) */
};

struct http_worker;
struct http_config {
    /* the default site's routes (path prefix -> struct http_route); NULL
     * when there are named sites and no default: an unknown host gets 421 */
    const struct trie *routes;
    const struct http_vhost *vhosts; /* the named sites' names (http/vhost.h) */
    unsigned n_vhosts;               /* 0: every request goes to routes */
    bool site_by_host;               /* n_vhosts or redirect_https: dispatch looks at the host */
    struct http_limits limits;
    size_t max_body;
    /* A body must come whole within body_timeout_s of its first read, and
     * once body_rate_grace_s passed, at body_min_rate bytes a second on
     * average since then (0: no minimum); else 408. request_timeout_s is
     * the runtime's: the longest wait for one read. */
    uint32_t body_timeout_s, body_rate_grace_s, request_timeout_s;
    uint64_t body_min_rate;
    size_t multipart_memory_max; /* a multipart part above this goes to a temporary file */
    size_t body_memory_max;      /* a COLIBRI_NEED_BODY body above this goes to one too */
    char temp_dir[256];          /* where: temp_dir, else $TMPDIR, else /tmp */
    char server_hdr[128];        /* "Server: colibri\r\n", or "" */
    size_t server_hdr_len;
    const struct tpl *error_tpl; /* error_template, or NULL for the built-in pages */
    unsigned methods;            /* what some route answers: OPTIONS * lists these */
    /* By listener index (conn_ctx.listener): whether its connections must
     * begin with a PROXY header (http/proxy.h). NULL: none do. */
    const bool *proxy_protocol;
    unsigned n_proxy_protocol;
    /* The TLS server of this generation (rt/tls.h), and by listener index
     * (n_proxy_protocol of them) whether a listener speaks TLS; NULL: no
     * listener does. redirect_https: by listener index, the port a plain
     * listener sends every request to over HTTPS (308), 0: none. */
    struct tls_server *tls;
    const bool *tls_on;
    const uint16_t *redirect_https;
    /* HTTP/2: the run of a connection that begins with its preface
     * (http2/h2.h; NULL: none, the preface gets 505), by listener index
     * (n_proxy_protocol of them) whether a listener refuses it (NULL:
     * none does), and the settings it advertises */
    enum conn_verdict (*h2_run)(struct conn_ctx *ctx);
    const bool *http2_off;
    /* `Upgrade: h2c` (RFC 7540 3.2): by listener index whether a listener
     * takes it (h2c_upgrade = true; NULL: none does), and the run that
     * answers 101 and the request as stream 1 (http2/h2.h) */
    const bool *h2c_upgrade;
    enum conn_verdict (*h2_upgrade)(struct conn_ctx *ctx, const struct http_head *head);
    /* an HTTP/2 connection at rest without its context (conn_rest_put):
     * its run when bytes come, its state freed when it closes at rest */
    enum conn_verdict (*h2_resume)(struct conn_ctx *ctx, void *state);
    void (*h2_drop)(struct http_worker *hw, void *state);
    uint32_t h2_max_streams;     /* SETTINGS_MAX_CONCURRENT_STREAMS */
    size_t h2_window;            /* SETTINGS_INITIAL_WINDOW_SIZE, and the connection's */
    size_t ws_memory_max;        /* WebSocket messages being read, per worker: beyond, 1013 */
    uint32_t ws_idle_timeout_ms; /* a silent WebSocket is pinged, then closed; 0: never */
    /* the access log: the server's files (NULL: none), the top level's
     * log (requests no site took: refused by the parser), the default
     * site's (its own, else the top level's); NULL: not logged */
    const struct http_log_files *log_files;
    const struct http_log *access_log;
    const struct http_log *site_log;
    const struct http_filters *filters; /* the default site's (http/filter.h); NULL: none */
};

/* The methods a handler is called for: its own (GET when it names none)
 * and HEAD wherever GET is. */
static inline unsigned http_handler_calls(const struct colibri_handler *h)
{
    unsigned m = h->methods ? h->methods : COLIBRI_M(COLIBRI_GET);
    if (m & COLIBRI_M(COLIBRI_GET))
        m |= COLIBRI_M(COLIBRI_HEAD);
    return m;
}
/* The methods its route answers (the Allow header): those, and OPTIONS,
 * which the server answers itself when the handler does not. */
static inline unsigned http_handler_methods(const struct colibri_handler *h)
{
    return http_handler_calls(h) | COLIBRI_M(COLIBRI_OPTIONS);
}

/* The protocol every connection runs (state: struct http_conn). */
extern const struct conn_proto http_proto;

/* A worker's HTTP slot; NULL when out of memory. */
struct http_worker *http_worker_new(const struct http_config *cfg);
void http_worker_free(struct http_worker *hw);
/* On the worker's thread, between requests: the config every request
 * that starts from now on reads (a reload). A request already running
 * keeps the one it began with: the caller frees the old config only once
 * none is left (worker_quiesce). */
void http_worker_set_config(struct http_worker *hw, const struct http_config *cfg);
/* Writes the access log lines the worker buffered: at shutdown, after its
 * thread ended. */
void http_worker_flush_log(struct http_worker *hw);

/* What an error_template sees: {{status}}, {{reason}}, {{method}}, {{path}}. */
extern const struct tpl_desc http_error_desc;
