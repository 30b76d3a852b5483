/* server.c - the server's life: registered handlers and modules, routes,
 * workers, shutdown. Nothing here runs per request. */
#include "server/server.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "http2/h2.h"
#include "base/err.h"
#include "base/log.h"
#include "builtins.h"
#include "config/config.h"
#include "http/filter.h"
#include "route/trie.h"
#include "server/builtin.h"
#include "server/privs.h"
#include "server/sandbox.h"
#include "rt/tls.h"
#include "server/systemd.h"
#include "tpl/tpl.h"

#define DEFAULT_PORT "8080"

#define DECLARE_MODULE(id)  extern const struct colibri_module builtin_module_##id;
#define DECLARE_HANDLER(id) extern const struct colibri_handler builtin_handler_##id;
#define REF_MODULE(id)      &builtin_module_##id,
#define REF_HANDLER(id)     &builtin_handler_##id,
BUILTIN_MODULES(DECLARE_MODULE)
BUILTIN_HANDLERS(DECLARE_HANDLER)
static const struct colibri_module *const builtin_modules[] = {BUILTIN_MODULES(REF_MODULE)};
static const struct colibri_handler *const builtin_handlers[] = {BUILTIN_HANDLERS(REF_HANDLER)};

struct colibri_server *colibri_server_new(void)
{
    struct colibri_server *srv =
        ALLOC_INIT(struct colibri_server, {.acceptor_wake = -1, .ctl_fd = -1, .sig_fd = -1});
    if (!srv)
        return NULL;
    srv->wcfg = (struct worker_cfg){
        .keep_alive_s = 15,
        .request_timeout_s = 10,
        .stack_size = CORO_DEFAULT_STACK,
        .max_free_ctx = 64,
        .shutdown_grace_s = 10,
        .proto = &http_proto,
    };
    srv->http = (struct http_config){
        .limits = HTTP_LIMITS_DEFAULT,
        .h2_max_streams = 128,
        .h2_window = 1 << 20,
        .max_body = 1 << 20,
        .body_timeout_s = 60,
        .body_rate_grace_s = 10,
        .body_min_rate = 1024,
        .multipart_memory_max = 64 << 10,
        .body_memory_max = 1 << 20,
        .ws_memory_max = (size_t)256 << 20,
    };
    const char *tmp = getenv("TMPDIR");
    snprintf(srv->http.temp_dir, sizeof(srv->http.temp_dir), "%s",
             tmp && tmp[0] == '/' && strlen(tmp) < sizeof(srv->http.temp_dir) ? tmp : "/tmp");
    logs_init(&srv->logs);
    strcpy(srv->http.server_hdr, "Server: colibri\r\n");
    srv->http.server_hdr_len = strlen(srv->http.server_hdr);
    srv->routes = trie_new();
    srv->http.routes = srv->routes;
    bool ok = srv->routes != NULL;
    for (size_t i = 0; ok && i < N_ELEMENTS(builtin_handlers); i++)
        ok = colibri_server_register(srv, builtin_handlers[i]) == 0;
    for (size_t i = 0; ok && i < N_ELEMENTS(builtin_modules); i++)
        ok = colibri_server_add_module(srv, builtin_modules[i]) == 0;
    if (!ok) {
        colibri_server_free(srv);
        return NULL;
    }
    return srv;
}

static void release_listeners(struct colibri_server *srv);

void server_release_routes(struct colibri_server *srv)
{
    while (srv->route_list) {
        struct http_route *r = srv->route_list;
        srv->route_list = r->next;
        if (r->free_data)
            r->free_data(r->data);
        free(r);
    }
    /* after the routes, which may point to them */
    builtin_release(srv);
    trie_free(srv->routes);
    srv->routes = NULL;
    for (unsigned i = 0; i < srv->n_sites; i++)
        trie_free(srv->site_routes[i]);
    free(srv->site_routes);
    srv->site_routes = NULL;
    srv->n_sites = 0;
    for (unsigned i = 0; i < srv->n_vhosts; i++)
        free((char *)srv->vhosts[i].name);
    free(srv->vhosts);
    srv->vhosts = NULL;
    free(srv->vhost_lines);
    srv->vhost_lines = NULL;
    if (srv->filters)
        http_filters_free(srv->filters);
    free(srv->filters);
    srv->filters = NULL;
    for (unsigned i = 0; i < srv->n_site_filters; i++)
        http_filters_free(&srv->site_filters[i]);
    free(srv->site_filters);
    srv->site_filters = NULL;
    srv->n_site_filters = 0;
    srv->n_vhosts = 0;
    tpl_free(srv->error_tpl);
    srv->error_tpl = NULL;
    tls_server_free(srv->tls);
    srv->tls = NULL;
    srv->http.tls = NULL;
}

void colibri_server_free(struct colibri_server *srv)
{
    if (!srv)
        return;
    server_free_retired(srv);
    if (srv->gen) {
        server_gen_free(srv, srv->gen);
        srv->gen = NULL;
    }
    server_release_routes(srv);
    for (unsigned i = 0; i < srv->n_handlers; i++)
        free(srv->handlers[i]);
    free(srv->handlers);
    free(srv->handler_lib);
    free(srv->modules);
    free(srv->module_lib);
    release_listeners(srv);
    free(srv->config_path);
    free(srv->connect_ports);
    free(srv->tls_ciphers);
    free(srv->user_text);
    free(srv->chroot_text);
    free(srv->listen_shared);
    free(srv->privs.chroot_dir);
    sandbox_free(srv->sandbox);
    config_free(srv->cfg);
    logs_free(&srv->logs);
    /* last: handlers, modules and route data may live in these libraries */
    for (unsigned i = srv->n_libs; i-- > 0;)
        dlclose(srv->libs[i]);
    free(srv->libs);
    free(srv);
}

int colibri_server_register(struct colibri_server *srv, const struct colibri_handler *h)
{
    if (!h->name || !h->fn)
        return -EINVAL;
    if (server_find_handler(srv, h->name))
        return -EEXIST;
    /* a copy of its own, which never moves: a program may register a
     * handler after routing others, and those routes point to theirs */
    struct colibri_handler **n = realloc(srv->handlers, (srv->n_handlers + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    srv->handlers = n;
    bool *lib = realloc(srv->handler_lib, (srv->n_handlers + 1) * sizeof(*lib));
    if (!lib)
        return -ENOMEM;
    srv->handler_lib = lib;
    if (!(n[srv->n_handlers] = memdup(h, sizeof(*h))))
        return -ENOMEM;
    lib[srv->n_handlers++] = srv->in_lib_init;
    return 0;
}

const struct colibri_handler *server_find_handler(const struct colibri_server *srv,
                                                  const char *name)
{
    for (unsigned i = 0; i < srv->n_handlers; i++)
        if (!strcmp(srv->handlers[i]->name, name))
            return srv->handlers[i];
    return NULL;
}

int colibri_server_add_module(struct colibri_server *srv, const struct colibri_module *m)
{
    if (!m->name || !m->name[0] || !m->from_config)
        return -EINVAL;
    if (!strcmp(m->name, "handler") || server_find_module(srv, m->name))
        return -EEXIST;
    struct colibri_module *n = realloc(srv->modules, (srv->n_modules + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    srv->modules = n;
    bool *lib = realloc(srv->module_lib, (srv->n_modules + 1) * sizeof(*lib));
    if (!lib)
        return -ENOMEM;
    srv->module_lib = lib;
    lib[srv->n_modules] = srv->in_lib_init;
    srv->modules[srv->n_modules++] = *m;
    return 0;
}

const struct colibri_module *server_find_module(const struct colibri_server *srv, const char *name)
{
    for (unsigned i = 0; i < srv->n_modules; i++)
        if (!strcmp(srv->modules[i].name, name))
            return &srv->modules[i];
    return NULL;
}

int colibri_server_add_route(struct colibri_server *srv, const char *prefix,
                             const struct colibri_handler *h, void *data, void (*free_data)(void *),
                             char *err, size_t errlen)
{
    int e = -ENOMEM;
    if (!prefix || prefix[0] != '/') {
        e = err_set(err, errlen, -EINVAL, NULL, "prefix '%s' must start with '/'",
                    prefix ? prefix : "");
        goto out_free;
    }
    /* the site being loaded; outside config loading, the default site */
    struct trie *t = srv->loading ? srv->loading : srv->routes;
    struct http_route *r = ALLOC_INIT(struct http_route, {.handler = h,
                                                          .data = data,
                                                          .free_data = free_data,
                                                          .next = srv->route_list,
                                                          .line = srv->loading_line});
    if (!r || (e = trie_add(t, prefix, strlen(prefix), r)) < 0) {
        free(r);
        size_t len = strlen(prefix), matched = 0;
        const struct http_route *first =
            e == -EEXIST ? trie_lookup(t, prefix, len, &matched) : NULL;
        if (first && matched == len && first->line)
            err_set(err, errlen, e, NULL, "prefix '%s' is already routed at line %d", prefix,
                    first->line);
        else if (e == -EEXIST)
            err_set(err, errlen, e, NULL, "prefix '%s' is already routed", prefix);
        else
            err_set(err, errlen, e, NULL, "prefix '%s': %s", prefix, strerror(-e));
        goto out_free;
    }
    srv->route_list = r;
    if (!srv->loading)
        srv->has_default = true;
    return 0;

out_free:
    if (free_data)
        free_data(data);
    return e;
}

int colibri_server_add_filter(struct colibri_server *srv, const char *prefix,
                              const struct colibri_filter *f, void *data, void (*free_data)(void *),
                              char *err, size_t errlen)
{
    int e = -EINVAL;
    if (!prefix || prefix[0] != '/') {
        err_set(err, errlen, e, NULL, "prefix '%s' must start with '/'", prefix ? prefix : "");
        goto out_free;
    }
    if (!f || !f->fn || (unsigned)f->phase >= COLIBRI_PHASE_COUNT) {
        err_set(err, errlen, e, NULL, "a filter needs a function and a phase");
        goto out_free;
    }
    e = -ENOMEM;
    struct http_filters *fs = NULL;
    if (!srv->loading) {
        if (!srv->filters && !(srv->filters = calloc(1, sizeof(*srv->filters))))
            goto out_nomem;
        fs = srv->filters;
    } else {
        unsigned i = 0;
        while (i < srv->n_sites && srv->site_routes[i] != srv->loading)
            i++;
        if (i >= srv->n_site_filters) {
            fs = realloc(srv->site_filters, (i + 1) * sizeof(*fs));
            if (!fs)
                goto out_nomem;
            memset(fs + srv->n_site_filters, 0, (i + 1 - srv->n_site_filters) * sizeof(*fs));
            srv->site_filters = fs;
            srv->n_site_filters = i + 1;
        }
        fs = &srv->site_filters[i];
    }
    if (http_filters_add(fs, f, prefix, data, free_data, srv->loading_line) == 0)
        return 0;
out_nomem:
    err_set(err, errlen, e, NULL, "out of memory");
out_free:
    if (free_data)
        free_data(data);
    return e;
}

/* The filters of the site whose routes are routes; NULL: none. */
static const struct http_filters *filters_of(const struct colibri_server *s,
                                             const struct trie *routes)
{
    for (unsigned i = 0; i < s->n_site_filters && i < s->n_sites; i++)
        if (s->site_routes[i] == routes)
            return s->site_filters[i].n ? &s->site_filters[i] : NULL;
    return NULL;
}

int colibri_server_remove_route(struct colibri_server *srv, const char *prefix)
{
    void *v;
    int r = trie_remove(srv->routes, prefix, strlen(prefix), &v);
    if (r)
        return r;
    for (struct http_route **p = &srv->route_list; *p; p = &(*p)->next) {
        if (*p != v)
            continue;
        struct http_route *gone = *p;
        *p = gone->next;
        if (gone->free_data)
            gone->free_data(gone->data);
        free(gone);
        break;
    }
    return 0;
}

int colibri_server_route(struct colibri_server *srv, const char *prefix, const char *handler,
                         void *data, char *err, size_t errlen)
{
    const struct colibri_handler *h = server_find_handler(srv, handler);
    if (!h)
        return err_set(err, errlen, -ENOENT, NULL, "unknown handler '%s'", handler);
    return colibri_server_add_route(srv, prefix, h, data, NULL, err, errlen);
}

static void release_listeners(struct colibri_server *srv)
{
    /* a reload's server gives nothing back: the running one holds them */
    for (unsigned i = 0; i < srv->n_listeners && !srv->reload_of; i++)
        if (srv->listeners[i].inherited && !srv->listeners[i].retired)
            sd_release_socket(srv->listeners[i].fd);
    free(srv->listeners);
    srv->listeners = NULL;
    srv->n_listeners = 0;
}

void colibri_server_clear_listeners(struct colibri_server *srv)
{
    release_listeners(srv);
}

void colibri_server_set_threads(struct colibri_server *srv, unsigned n)
{
    srv->n_threads = n;
}

static int add_listener(struct colibri_server *srv, const struct listener *l, char *err,
                        size_t errlen)
{
    if (srv->n_listeners >= UINT16_MAX) /* connections carry a 16-bit index */
        return err_set(err, errlen, -E2BIG, NULL, "too many listeners");
    struct listener *n = realloc(srv->listeners, (srv->n_listeners + 1) * sizeof(*n));
    if (!n)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    srv->listeners = n;
    srv->listeners[srv->n_listeners++] = *l;
    return 0;
}

/* "systemd" (every socket passed) or "systemd:NAME" (those named NAME):
 * one listener per socket. */
static int listen_systemd(struct colibri_server *srv, const char *name, char *err, size_t errlen)
{
    if (name && !name[0])
        return err_set(err, errlen, -EINVAL, NULL, "expected 'systemd' or 'systemd:NAME'");
    int fds[256];
    /* a reload may name the sockets the running config took, but no
     * config one twice (systemd.c keeps who took which) */
    int n = sd_take_sockets(name, fds, N_ELEMENTS(fds), srv, srv->reload_of != NULL, err, errlen),
        r = 0;
    for (int i = 0; i < n; i++) {
        struct listener l;
        if (!r && !(r = listener_inherit(&l, fds[i], name ? name : "systemd", err, errlen)))
            r = add_listener(srv, &l, err, errlen);
        if (r && !srv->reload_of) /* not a listener after all: free for another line */
            sd_release_socket(fds[i]);
    }
    return n < 0 ? n : r;
}

int colibri_server_listen(struct colibri_server *srv, const char *addr, char *err, size_t errlen)
{
    if (!strncmp(addr, "systemd", 7) && (addr[7] == '\0' || addr[7] == ':'))
        return listen_systemd(srv, addr[7] ? addr + 8 : NULL, err, errlen);
    struct listener l = {0};
    int r = listener_parse(addr, &l, err, errlen);
    if (r)
        return r;
    return add_listener(srv, &l, err, errlen);
}

/* --- running ------------------------------------------------------------------ */

unsigned server_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static uint32_t raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 22))
        return 1u << 22;
    return (uint32_t)rl.rlim_cur;
}

size_t server_listener_tables(unsigned n)
{
    return ((2 * (size_t)n + 1) & ~(size_t)1) + (size_t)n * sizeof(uint16_t) + 2 * (size_t)n;
}

void server_finish_http(struct colibri_server *s, const struct colibri_server *srv, bool *proxy)
{
    unsigned n = srv->n_listeners;
    bool any_proxy = false, any_tls = false, any_redirect = false, any_h2_off = false;
    bool *tls = proxy + n;
    uint16_t *ports = (uint16_t *)(void *)((char *)proxy + ((2 * (size_t)n + 1) & ~(size_t)1));
    bool *h2_off = (bool *)(ports + n);
    bool *h2c_up = h2_off + n;
    bool any_h2c_up = false;
    for (unsigned i = 0; i < n; i++) {
        const struct listener *l = &srv->listeners[i];
        any_proxy |= proxy[i] = !l->retired && l->proxy_protocol;
        any_tls |= tls[i] = !l->retired && l->tls;
        ports[i] = l->retired ? 0 : l->redirect_https;
        any_redirect |= ports[i] != 0;
        any_h2_off |= h2_off[i] = !l->retired && l->no_http2;
        any_h2c_up |= h2c_up[i] = !l->retired && l->h2c_upgrade;
    }
    s->http.h2_run = h2_run;
    s->http.h2_upgrade = h2_upgrade;
    s->http.h2_resume = h2_resume;
    s->http.h2_drop = h2_drop;
    s->http.h2c_upgrade = any_h2c_up ? h2c_up : NULL;
    s->http.http2_off = any_h2_off ? h2_off : NULL;
    /* NULL: no listener wants PROXY headers, and run() need not ask */
    s->http.proxy_protocol = any_proxy ? proxy : NULL;
    s->http.n_proxy_protocol = n;
    s->http.tls = s->tls;
    s->http.tls_on = any_tls && s->tls ? tls : NULL;
    s->http.redirect_https = any_redirect ? ports : NULL;
    s->http.request_timeout_s = srv->wcfg.request_timeout_s; /* the running one's */
    /* the access logs: the running server's files, what each site uses */
    s->http.log_files = srv->logs.files;
    s->http.access_log = s->logs.top_logged ? &s->logs.top : NULL;
    s->http.site_log = logs_site(&s->logs, NULL);
    for (unsigned i = 0; i < s->n_vhosts; i++)
        s->vhosts[i].log = logs_site(&s->logs, s->vhosts[i].routes);
    s->http.filters = s->filters && s->filters->n ? s->filters : NULL;
    for (unsigned i = 0; i < s->n_vhosts; i++)
        s->vhosts[i].filters = filters_of(s, s->vhosts[i].routes);
    s->http.error_tpl = s->error_tpl;
    /* without named sites, everything goes to the default site (routes or
     * not); with them, an unknown host gets 421 unless there is a default */
    s->http.routes = s->n_vhosts && !s->has_default ? NULL : s->routes;
    s->http.vhosts = s->vhosts;
    s->http.n_vhosts = s->n_vhosts;
    s->http.site_by_host = any_redirect || s->n_vhosts;
    s->http.methods = 0;
    for (const struct http_route *rt = s->route_list; rt; rt = rt->next)
        s->http.methods |= http_handler_methods(rt->handler);
}

int colibri_server_run(struct colibri_server *srv, char *err, size_t errlen)
{
    int r = 0;
    if (!srv->n_listeners && (r = colibri_server_listen(srv, "*:" DEFAULT_PORT, err, errlen)))
        return r;
    signal(SIGPIPE, SIG_IGN);

    unsigned n = srv->n_threads ? srv->n_threads : server_cpu_count();
    srv->max_fds = raise_fd_limit();
    if (accept_client_limit(srv->max_conn_per_client, srv->max_fds) < 0)
        return err_set(err, errlen, -ENOMEM, NULL, "max_connections_per_client: out of memory");
    /* mapped: page-aligned, so each pair of 32-byte entries fills exactly
     * one cache line, and untouched pages of the table cost no memory */
    size_t table = (size_t)srv->max_fds * sizeof(struct conn);
    srv->conns = mmap(NULL, table, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (srv->conns == MAP_FAILED)
        srv->conns = NULL;
    srv->peers = mmap(NULL, (size_t)srv->max_fds * sizeof(struct conn_peer), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (srv->peers == MAP_FAILED)
        srv->peers = NULL;
    srv->workers = calloc(n, sizeof(*srv->workers));
    srv->http_workers = calloc(n, sizeof(*srv->http_workers));
    bool ok = srv->conns && srv->peers && srv->workers && srv->http_workers;
    for (unsigned i = 0; ok && i < n; i++)
        ok = (srv->http_workers[i] = http_worker_new(&srv->http)) != NULL;
    if (!ok) {
        r = err_set(err, errlen, -ENOMEM, NULL, "out of memory for %u connections", srv->max_fds);
        goto out_free;
    }
    /* A socket from systemd is one socket, where our own are one per
     * worker. listener_open() gives each worker (or the acceptor) a dup of
     * it rather than the one fd to all: each then owns its fd and closes
     * it at a graceful stop as it does its own sockets, with no fd number
     * closed twice; systemd's copy keeps the socket listening for the next
     * start. The workers wait on their dups with EPOLLEXCLUSIVE (worker.c),
     * so a connection wakes one worker, not all. */
    free(srv->listen_shared);
    if (!(srv->listen_shared = calloc(srv->n_listeners, sizeof(bool)))) {
        r = err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        goto out_free;
    }
    bool any_shared = false;
    for (unsigned j = 0; j < srv->n_listeners; j++)
        any_shared |= srv->listen_shared[j] = srv->listeners[j].inherited;
    srv->wcfg.listen_shared = any_shared ? srv->listen_shared : NULL;
    /* the first generation: the server's own routes */
    srv->gen = calloc(1, sizeof(*srv->gen));
    bool *proxy = calloc(1, server_listener_tables(srv->n_listeners));
    if (!srv->gen || !proxy) {
        free(srv->gen);
        srv->gen = NULL;
        free(proxy);
        r = err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        goto out_free;
    }
    *srv->gen = (struct server_gen){.owner = srv, .http = &srv->http, .proxy_protocol = proxy};
    if ((r = logs_link(&srv->logs, &srv->logs, err, errlen)))
        goto out_free;
    server_finish_http(srv, srv, proxy);
    /* room for a whole head and the start of a body, in whole pages */
    srv->wcfg.in_cap = (srv->http.limits.max_head + 1024 + 4095) & ~(size_t)4095;

    /* with an acceptor thread, one set of sockets for it; otherwise one set
     * per worker */
    unsigned started = 0, sets = srv->accept_thread ? 1 : n;
    srv->wcfg.handed_fds = srv->accept_thread;
    for (unsigned i = 0; i < sets + (srv->accept_thread ? n : 0); i++) {
        bool own = i < sets;
        int *fds = own ? calloc(srv->n_listeners, sizeof(int)) : NULL;
        if (own && !fds) {
            r = err_set(err, errlen, -ENOMEM, NULL, "out of memory");
            goto out_workers;
        }
        for (unsigned j = 0; own && j < srv->n_listeners; j++) {
            int fd =
                listener_open(&srv->listeners[j], srv->wcfg.request_timeout_s, i == 0, err, errlen);
            if (fd < 0) {
                while (j--)
                    close(fds[j]);
                free(fds);
                r = fd;
                goto out_workers;
            }
            fds[j] = fd;
        }
        if (srv->accept_thread && own) {
            srv->acceptor_fds = fds;
            continue;
        }
        unsigned wi = srv->accept_thread ? i - 1 : i;
        r = worker_new(&srv->workers[wi], &srv->wcfg, wi, srv->conns, srv->peers, srv->max_fds, fds,
                       own ? srv->n_listeners : 0, srv->http_workers[wi]);
        started = wi + 1;
        if (r) {
            for (unsigned j = 0; fds && j < srv->n_listeners; j++)
                close(fds[j]);
            free(fds);
        }
        if (r) {
            err_set(err, errlen, r, NULL, "worker %u: %s", wi, strerror(-r));
            goto out_workers;
        }
    }
    if (srv->accept_thread && (srv->acceptor_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        r = err_set(err, errlen, -errno, NULL, "eventfd: %s", strerror(errno));
        goto out_workers;
    }
    if (srv->accept_thread) {
        /* the acceptor takes its sockets; a reload may add and remove some */
        acceptor_init(&srv->acceptor, srv->acceptor_wake);
        srv->acceptor_ready = true;
        for (unsigned j = 0; j < srv->n_listeners; j++) {
            int fd = srv->acceptor_fds[j];
            srv->acceptor_fds[j] = -1;
            if (acceptor_add_listener(&srv->acceptor, j, fd) < 0) {
                r = err_set(err, errlen, -ENOMEM, NULL, "out of memory");
                goto out_workers;
            }
        }
        free(srv->acceptor_fds);
        srv->acceptor_fds = NULL;
    }
    srv->n_threads = n;
    /* the listeners are bound: the pid file, the error log */
    if ((r = logs_start(&srv->logs, err, errlen)))
        goto out_workers;
    for (unsigned j = 0; j < srv->n_listeners; j++) {
        char url[80];
        listener_url(&srv->listeners[j], url, sizeof(url));
        log_msg(LOG_INFO, "listening on %s", url);
    }
    if (srv->tls)
        log_msg(LOG_INFO, "%s",
                srv->ktls_off ? "kTLS: off (ktls = off): TLS records are made in user space"
                : tls_ktls_probe(NULL)
                    ? "kTLS: the kernel has the tls ULP: records go to the kernel "
                      "after each handshake, files with SSL_sendfile"
                    : "kTLS: the kernel offers no tls ULP "
                      "(/proc/sys/net/ipv4/tcp_available_ulp): TLS records are "
                      "made in user space");
    log_msg(LOG_DEBUG, "%u worker threads (%s), room for %u file descriptors", n,
            srv->accept_thread ? "accept = thread" : "accept = reuseport", srv->max_fds);
    if (srv->logs.access_path)
        log_msg(LOG_DEBUG, "access log: %s", srv->logs.access_path);
    /* before a chroot: the notify socket's path is looked up here */
    char why[256];
    if (sd_notify_open(why, sizeof(why)) < 0)
        log_msg(LOG_WARN, "%s", why);
    /* the signalfd too: the sandbox has no signalfd4 */
    if ((r = control_open_signals(srv, err, errlen)))
        goto out_workers;
    /* the listeners are bound and the config's files open: root is no
     * longer needed (threads started from here on run as the user), and
     * with "sandbox = true" the sandbox closes around every thread: its
     * paths are opened before the drop (and a chroot), it closes after */
    /* root is worth a warning only for a server that keeps it while it
     * listens, as configured: not for a program without a config file
     * (a sample run by hand) */
    if (!srv->privs.set && geteuid() == 0 && srv->config_path && srv->n_listeners)
        log_msg(LOG_WARN, "running as root; set 'user' in the config to run as an "
                          "unprivileged user once the listeners are bound");
    if ((r = sandbox_prepare(srv, err, errlen)) || (r = privs_drop(&srv->privs, err, errlen)) ||
        (r = sandbox_enter(srv, err, errlen)))
        goto out_workers;

    /* workers leave SIGINT/SIGTERM to the thread that called us */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    r = control_start(srv, err, errlen);
    if (!r) /* inside the sandbox: what the modules start for serving (health checks) */
        builtin_live(srv);
    unsigned running = 0;
    for (; !r && running < n; running++)
        if (worker_start(srv->workers[running]) < 0) {
            r = err_set(err, errlen, -EAGAIN, NULL, "cannot start worker thread %u", running);
            break;
        }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!r && !srv->stop_asap)
        sd_notify_send("READY=1");
    srv->running = 1;
    if (r || srv->stop_asap)
        colibri_server_shutdown(srv);
    if (srv->accept_thread && !r) {
        r = acceptor_run(&srv->acceptor, srv->workers, n, &srv->stop_asap);
        if (r) {
            err_set(err, errlen, r, NULL, "cannot run the acceptor: %s", strerror(-r));
            colibri_server_shutdown(srv);
        }
        /* refuse new connections at once, not when the last worker is done */
        acceptor_destroy(&srv->acceptor);
        srv->acceptor_ready = false;
    }
    for (unsigned i = 0; i < running; i++)
        worker_join(srv->workers[i]);
    srv->running = 0;
    /* no reload from here on (one in progress ends first) */
    control_stop(srv);
    /* the workers are gone: what they buffered for the access log goes out */
    for (unsigned i = 0; i < n; i++)
        http_worker_flush_log(srv->http_workers[i]);
    server_free_retired(srv);
    if (!r)
        log_msg(LOG_INFO, "stopped");

out_workers:
    control_stop(srv);
    logs_stop(&srv->logs);
    for (unsigned i = 0; i < started; i++)
        worker_free(srv->workers[i]);
out_free:
    /* the workers are gone, and the generation they read goes with them
     * (the server's own routes stay: colibri_server_free() or a next run
     * has them) */
    if (srv->gen) {
        if (srv->gen->owner != srv)
            colibri_server_free(srv->gen->owner);
        free(srv->gen->proxy_protocol);
        free(srv->gen);
        srv->gen = NULL;
    }
    for (unsigned j = 0; srv->acceptor_fds && j < srv->n_listeners; j++)
        if (srv->acceptor_fds[j] >= 0)
            close(srv->acceptor_fds[j]);
    free(srv->acceptor_fds);
    srv->acceptor_fds = NULL;
    if (srv->acceptor_ready)
        acceptor_destroy(&srv->acceptor);
    srv->acceptor_ready = false;
    if (srv->acceptor_wake >= 0)
        close(srv->acceptor_wake);
    srv->acceptor_wake = -1;
    for (unsigned i = 0; srv->http_workers && i < n; i++)
        http_worker_free(srv->http_workers[i]);
    free(srv->http_workers);
    srv->http_workers = NULL;
    free(srv->workers);
    srv->workers = NULL;
    if (srv->conns)
        munmap(srv->conns, (size_t)srv->max_fds * sizeof(struct conn));
    srv->conns = NULL;
    if (srv->peers)
        munmap(srv->peers, (size_t)srv->max_fds * sizeof(struct conn_peer));
    srv->peers = NULL;
    return r;
}

void colibri_server_shutdown(struct colibri_server *srv)
{
    if (!atomic_exchange(&srv->stop_asap, 1)) /* once, however many signals come */
        sd_notify_send("STOPPING=1");
    if (!srv->running || !srv->workers)
        return;
    if (srv->acceptor_wake >= 0) {
        uint64_t one = 1;
        ssize_t r = write(srv->acceptor_wake, &one, sizeof(one));
        (void)r;
    }
    for (unsigned i = 0; i < srv->n_threads; i++)
        worker_wake(srv->workers[i]);
}
