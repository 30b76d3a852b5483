/* reload.c - a new config while the old one serves (colibri_server_reload).
 *
 * On the control thread: the config file is loaded into a server of its
 * own ("next"), which knows the handlers and modules the program
 * registered (those of "module FILE" libraries come again from the
 * libraries the new config names), and is checked as a start would check
 * it. Its new listeners are opened. Any error: everything logged, nothing
 * changed. Otherwise its routes become a new generation (server.h), which
 * every worker takes at its next wake-up, between two requests; the old
 * one is retired and freed once every worker has no request left on it
 * (worker_quiesce). Listeners keep their indices: a kept one is not
 * touched, a removed one's index is never reused, a new one takes the
 * next. Nothing here runs per request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "http/metrics.h"
#include "config/config.h"
#include "server/builtin.h"
#include "server/server.h"
#include "server/systemd.h"

#define ERR_MAX 16384

void server_gen_free(struct colibri_server *srv, struct server_gen *g)
{
    if (g->owner == srv)
        server_release_routes(srv);
    else
        colibri_server_free(g->owner);
    free(g->proxy_protocol);
    free(g);
}

void server_free_retired(struct colibri_server *srv)
{
    while (srv->retired) {
        struct server_gen *g = srv->retired;
        srv->retired = g->next_retired;
        server_gen_free(srv, g);
    }
}

/* --- loading ------------------------------------------------------------------ */

/* A server for the new config, knowing what the program registered. */
static struct colibri_server *load_next(struct colibri_server *srv, char *err, size_t errlen)
{
    struct colibri_server *next = colibri_server_new();
    if (!next) {
        err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        return NULL;
    }
    next->reload_of = srv;
    int r = 0;
    /* the built-in ones are there already (-EEXIST) */
    for (unsigned i = 0; !r && i < srv->n_handlers; i++)
        if (!srv->handler_lib[i] &&
            (r = colibri_server_register(next, srv->handlers[i])) == -EEXIST)
            r = 0;
    for (unsigned i = 0; !r && i < srv->n_modules; i++)
        if (!srv->module_lib[i] &&
            (r = colibri_server_add_module(next, &srv->modules[i])) == -EEXIST)
            r = 0;
    if (r)
        err_set(err, errlen, r, NULL, "out of memory");
    else if (srv->config_path)
        r = colibri_server_load_config(next, srv->config_path, err, errlen);
    if (!r && srv->reload_hook && (r = srv->reload_hook(next, srv->reload_arg, err, errlen)) &&
        !err[0])
        err_set(err, errlen, r, NULL, "the program's reload hook failed: %s", strerror(-r));
    if (r) {
        colibri_server_free(next);
        return NULL;
    }
    return next;
}

/* "FILE:LINE: KEY" of a top-level key of next's config, or "FILE: KEY". */
static void where_of(const struct colibri_server *next, const char *key, char *buf, size_t len)
{
    const struct config_node *n = next->cfg ? next->cfg->root->children : NULL;
    for (; n; n = n->next)
        if (!strcmp(n->name, key)) {
            config_where(n, buf, len);
            return;
        }
    snprintf(buf, len, "%s: %s", next->cfg ? next->cfg->file : "config", key);
}

static bool str_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b));
}

/* A value as a number, to tell whether a reload saw it before. */
static uint64_t sig_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return s ? h : 0;
}

/* What only a restart changes keeps its running value, with a warning:
 * once per change (the reload that brings a new value), not at every
 * reload that still has it. */
static void restart_only(struct colibri_server *srv, struct colibri_server *next)
{
    unsigned threads = next->n_threads ? next->n_threads : server_cpu_count();
    const struct server_logs *a = &srv->logs, *b = &next->logs;
    const struct {
        const char *key;
        bool changed;
        uint64_t value; /* next's */
    } keys[] = {
        {"threads", threads != srv->n_threads, threads},
        {"accept", next->accept_thread != srv->accept_thread, next->accept_thread},
        {"max_request_head", next->http.limits.max_head != srv->http.limits.max_head,
         next->http.limits.max_head},
        {"keep_alive_timeout", next->wcfg.keep_alive_s != srv->wcfg.keep_alive_s,
         next->wcfg.keep_alive_s},
        {"request_timeout", next->wcfg.request_timeout_s != srv->wcfg.request_timeout_s,
         next->wcfg.request_timeout_s},
        {"shutdown_timeout", next->wcfg.shutdown_grace_s != srv->wcfg.shutdown_grace_s,
         next->wcfg.shutdown_grace_s},
        {"user", str_differ(next->user_text, srv->user_text), sig_str(next->user_text)},
        {"chroot", str_differ(next->chroot_text, srv->chroot_text), sig_str(next->chroot_text)},
        {"access_log", str_differ(b->access_path, a->access_path), sig_str(b->access_path)},
        {"error_log", str_differ(b->error_path, a->error_path), sig_str(b->error_path)},
        {"error_log_level", b->level != a->level, b->level},
        {"pid_file", str_differ(b->pid_path, a->pid_path), sig_str(b->pid_path)},
        {"sandbox", next->sandbox_on != srv->sandbox_on, next->sandbox_on},
        {"max_connections_per_client", next->max_conn_per_client != srv->max_conn_per_client,
         next->max_conn_per_client},
    };
    _Static_assert(N_ELEMENTS(keys) <= N_ELEMENTS(srv->restart_seen), "room for every key");
    for (size_t i = 0; i < N_ELEMENTS(keys); i++) {
        bool seen = (srv->restart_seen_set >> i & 1) && srv->restart_seen[i] == keys[i].value;
        srv->restart_seen[i] = keys[i].value;
        srv->restart_seen_set |= 1u << i;
        if (!keys[i].changed || seen)
            continue;
        char where[400];
        where_of(next, keys[i].key, where, sizeof(where));
        log_msg(LOG_WARN, "%s: changed, takes effect at restart", where);
    }
    next->http.limits.max_head = srv->http.limits.max_head; /* the buffers' size */
}

/* --- listeners ---------------------------------------------------------------- */

static bool same_listener(const struct listener *a, const struct listener *b)
{
    if (a->inherited || b->inherited)
        return a->inherited && b->inherited && a->fd == b->fd;
    if (!strcmp(a->name, b->name))
        return true;
    /* port 0 is whatever the kernel picked: only the same spelling matches */
    return a->addr_len == b->addr_len && !memcmp(&a->addr, &b->addr, a->addr_len);
}

/* What changes in the listeners: for each of next's, the running index it
 * keeps (or -1: new, with p->sets sockets opened in fds), and which
 * running ones go. */
struct plan {
    int *match;       /* by next's listener */
    int **fds;        /* by next's listener: its sockets (new ones) */
    bool *gone;       /* by running listener */
    unsigned n_fresh; /* new listeners */
    unsigned sets;    /* sockets per new listener: one per worker, or one
                         for the acceptor thread */
};

static void plan_free(struct plan *p, unsigned n)
{
    unsigned sets = p->sets;
    for (unsigned j = 0; p->fds && j < n; j++) {
        for (unsigned i = 0; p->fds[j] && i < sets; i++)
            if (p->fds[j][i] >= 0)
                close(p->fds[j][i]);
        free(p->fds[j]);
    }
    free(p->fds);
    free(p->match);
    free(p->gone);
}

static int plan_listeners(struct colibri_server *srv, struct colibri_server *next, struct plan *p,
                          char *err, size_t errlen)
{
    unsigned n = next->n_listeners, sets = srv->accept_thread ? 1 : srv->n_threads;
    p->sets = sets;
    p->match = malloc((n + 1) * sizeof(*p->match));
    p->fds = calloc(n + 1, sizeof(*p->fds));
    p->gone = calloc(srv->n_listeners + 1, sizeof(*p->gone));
    if (!p->match || !p->fds || !p->gone)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    bool *kept = p->gone; /* first: which running ones are kept */
    for (unsigned j = 0; j < n; j++) {
        p->match[j] = -1;
        for (unsigned i = 0; i < srv->n_listeners && p->match[j] < 0; i++)
            if (!srv->listeners[i].retired && !kept[i] &&
                same_listener(&srv->listeners[i], &next->listeners[j])) {
                p->match[j] = (int)i;
                kept[i] = true;
            }
        p->n_fresh += p->match[j] < 0;
    }
    for (unsigned i = 0; i < srv->n_listeners; i++)
        p->gone[i] = !srv->listeners[i].retired && !kept[i];
    for (unsigned j = 0; j < n; j++) {
        if (p->match[j] >= 0)
            continue;
        /* no socket() in the sandbox: a listener from systemd is an fd we hold */
        if (sandbox_closed(srv) && !next->listeners[j].inherited) {
            char where[400];
            where_of(next, "listener", where, sizeof(where));
            return err_set(err, errlen, -EPERM, NULL,
                           "%s: '%s' is a new listener: sandbox = true opens none after "
                           "start-up (a restart adds it)",
                           where, next->listeners[j].name);
        }
        if (!(p->fds[j] = malloc(sets * sizeof(int))))
            return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        for (unsigned i = 0; i < sets; i++)
            p->fds[j][i] = -1;
        for (unsigned i = 0; i < sets; i++) {
            int fd = listener_open(&next->listeners[j], srv->wcfg.request_timeout_s, i == 0, err,
                                   errlen);
            if (fd < 0)
                return fd;
            p->fds[j][i] = fd;
        }
    }
    return 0;
}

/* --- publishing --------------------------------------------------------------- */

/* What one worker does for a reload, on its thread. */
struct apply {
    struct server_gen *gen;
    unsigned n_add, n_del;
    struct {
        unsigned idx;
        int fd;
        bool shared;
    } * add;
    unsigned *del;
    struct worker_cmd *post, *quiesce; /* allocated before the commit */
};

static void gen_done(struct worker *w, void *arg)
{
    (void)w;
    struct server_gen *g = arg;
    atomic_fetch_sub_explicit(&g->left, 1, memory_order_release);
}

static void apply_free(struct apply *a)
{
    free(a->quiesce);
    free(a->add);
    free(a->del);
    free(a);
}

static void apply_drop(void *arg)
{
    struct apply *a = arg;
    for (unsigned i = 0; i < a->n_add; i++)
        close(a->add[i].fd);
    apply_free(a);
}

static void apply_run(struct worker *w, void *arg)
{
    struct apply *a = arg;
    /* requests from now on read the new routes; those suspended in a
     * wait keep the old ones until they end */
    http_worker_set_config(worker_proto_state(w), a->gen->http);
    a->quiesce->arg = a->gen->prev;
    worker_quiesce(w, a->quiesce);
    a->quiesce = NULL;
    for (unsigned i = 0; i < a->n_add; i++) {
        int r = worker_add_listener(w, a->add[i].idx, a->add[i].fd, a->add[i].shared);
        if (r < 0)
            log_msg(LOG_ERROR, "worker %u: cannot accept on a new listener: %s", worker_index(w),
                    strerror(-r));
    }
    for (unsigned i = 0; i < a->n_del; i++)
        worker_remove_listener(w, a->del[i]);
    apply_free(a);
}

/* Commits: the listeners change, the new generation is published. */
static int publish(struct colibri_server *srv, struct colibri_server *next, struct plan *p,
                   char *err, size_t errlen)
{
    unsigned n = next->n_listeners, base = srv->n_listeners, total = base + p->n_fresh;
    struct listener *ls = realloc(srv->listeners, (total + 1) * sizeof(*ls));
    if (ls)
        srv->listeners = ls;
    struct server_gen *g = calloc(1, sizeof(*g));
    bool *table = calloc(1, server_listener_tables(total + 1));
    struct apply **ap = calloc(srv->n_threads, sizeof(*ap));
    bool ok = ls && g && table && ap && total <= UINT16_MAX;
    for (unsigned i = 0; ok && i < srv->n_threads; i++) {
        ok = (ap[i] = calloc(1, sizeof(**ap))) &&
             (ap[i]->add = calloc(p->n_fresh + 1, sizeof(*ap[i]->add))) &&
             (ap[i]->del = calloc(base + 1, sizeof(*ap[i]->del))) &&
             (ap[i]->post = worker_cmd_new(apply_run, apply_drop, ap[i])) &&
             (ap[i]->quiesce = worker_cmd_new(gen_done, NULL, NULL));
    }
    if (!ok) {
        for (unsigned i = 0; ap && i < srv->n_threads; i++)
            if (ap[i]) {
                free(ap[i]->post);
                apply_free(ap[i]);
            }
        free(ap);
        free(table);
        free(g);
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    }
    /* from here on nothing fails */
    unsigned idx = base;
    for (unsigned j = 0; j < n; j++) {
        struct listener *nl = &next->listeners[j];
        char url[80];
        if (p->match[j] >= 0) {
            srv->listeners[p->match[j]].proxy_protocol = nl->proxy_protocol;
            srv->listeners[p->match[j]].tls = nl->tls;
            srv->listeners[p->match[j]].redirect_https = nl->redirect_https;
            srv->listeners[p->match[j]].no_http2 = nl->no_http2;
            srv->listeners[p->match[j]].h2c_upgrade = nl->h2c_upgrade;
            continue;
        }
        srv->listeners[idx] = *nl;
        if (srv->accept_thread) {
            /* the acceptor thread alone accepts: it takes the socket */
            if (acceptor_add_listener(&srv->acceptor, idx, p->fds[j][0]) < 0)
                log_msg(LOG_ERROR, "cannot accept on a new listener: out of memory");
            p->fds[j][0] = -1;
        }
        for (unsigned i = 0; i < srv->n_threads && !srv->accept_thread; i++) {
            struct apply *a = ap[i];
            a->add[a->n_add].idx = idx;
            a->add[a->n_add].fd = p->fds[j][i];
            a->add[a->n_add++].shared = nl->inherited;
            p->fds[j][i] = -1; /* the worker's now */
        }
        listener_url(nl, url, sizeof(url));
        log_msg(LOG_INFO, "listening on %s", url);
        idx++;
    }
    srv->n_listeners = idx;
    for (unsigned i = 0; i < base; i++) {
        if (!p->gone[i])
            continue;
        char url[80];
        listener_url(&srv->listeners[i], url, sizeof(url));
        log_msg(LOG_INFO, "no longer listening on %s", url);
        srv->listeners[i].retired = true;
        if (srv->listeners[i].inherited)
            sd_release_socket(srv->listeners[i].fd);
        if (srv->accept_thread)
            acceptor_remove_listener(&srv->acceptor, i);
        for (unsigned k = 0; k < srv->n_threads && !srv->accept_thread; k++)
            ap[k]->del[ap[k]->n_del++] = i;
    }
    /* next's listeners are the server's now, or were not wanted */
    free(next->listeners);
    next->listeners = NULL;
    next->n_listeners = 0;

    server_finish_http(next, srv, table);
    builtin_live(next); /* its health checks start: it serves from now on */
    /* what only the reload needed (its sites' logs go with its generation) */
    logs_release_top(&next->logs);

    *g = (struct server_gen){.owner = next, .http = &next->http, .proxy_protocol = table};
    struct server_gen *old = srv->gen;
    g->prev = old;
    atomic_store(&old->left, srv->n_threads);
    old->next_retired = srv->retired;
    srv->retired = old;
    srv->gen = g;
    for (unsigned i = 0; i < srv->n_threads; i++) {
        ap[i]->gen = g;
        worker_post(srv->workers[i], ap[i]->post); /* frees it after apply_run */
    }
    free(ap);
    return 0;
}

void server_reload(struct colibri_server *srv)
{
    char *err = calloc(1, ERR_MAX);
    if (!err) {
        log_msg(LOG_ERROR, "reload failed: out of memory");
        http_metrics_reloaded(false);
        return;
    }
    log_msg(LOG_INFO, "reloading");
    sd_notify_reloading();
    struct plan p = {0};
    struct colibri_server *next = load_next(srv, err, ERR_MAX);
    if (next)
        sandbox_reload_temp_dir(next);
    unsigned n = next ? next->n_listeners : 0;
    int r = next ? 0 : -EINVAL;
    if (!r && !srv->workers)
        r = err_set(err, ERR_MAX, -ESRCH, NULL, "the server is not running");
    if (!r)
        r = plan_listeners(srv, next, &p, err, ERR_MAX);
    if (!r)
        r = logs_link(&next->logs, &srv->logs, err, ERR_MAX);
    if (!r) {
        restart_only(srv, next);
        r = publish(srv, next, &p, err, ERR_MAX);
    }
    plan_free(&p, n);
    if (r) {
        if (next)
            colibri_server_free(next);
        /* every error, one line each */
        for (char *line = err, *nl; line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            log_msg(LOG_ERROR, "reload failed: %.*s", nl ? (int)(nl - line) : (int)strlen(line),
                    line);
        }
    } else {
        log_msg(LOG_INFO, "reloaded");
    }
    http_metrics_reloaded(r == 0);
    sd_notify_send("READY=1");
    free(err);
}
