/* server.c - the server's life: configuration, listeners, workers,
 * shutdown. Nothing here runs per request. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files/files.h"
#include "http/server.h"

#define DEFAULT_PORT "8080"

static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

struct colibri_server *colibri_server_new(void)
{
    struct colibri_server *srv =
        ALLOC_INIT(struct colibri_server, {
                                              .limits = HTTP_LIMITS_DEFAULT,
                                              .max_body = 1 << 20,
                                          });
    if (!srv)
        return NULL;
    srv->wcfg = (struct worker_cfg){
        .keep_alive_s = 15,
        .request_timeout_s = 10,
        .stack_size = CORO_DEFAULT_STACK,
        .max_free_ctx = 64,
        .shutdown_grace_s = 10,
        .conn_main = http_conn_main,
        .on_request_timeout = http_request_timeout,
        .owner = srv,
    };
    strcpy(srv->server_hdr, "Server: colibri\r\n");
    srv->server_hdr_len = strlen(srv->server_hdr);
    srv->acceptor_wake = -1;
    srv->routes = trie_new();
    if (!srv->routes) {
        free(srv);
        return NULL;
    }
    for (unsigned i = 0; i < colibri_n_builtin_handlers; i++)
        colibri_server_register(srv, &colibri_builtin_handlers[i]);
    return srv;
}

void colibri_server_free(struct colibri_server *srv)
{
    if (!srv)
        return;
    while (srv->route_list) {
        struct route *r = srv->route_list;
        srv->route_list = r->next;
        if (r->free_data)
            r->free_data(r->data);
        free(r);
    }
    trie_free(srv->routes);
    tpl_free(srv->error_tpl);
    free(srv->handlers);
    free(srv->listeners);
    config_free(srv->cfg);
    free(srv);
}

int colibri_server_register(struct colibri_server *srv, const struct colibri_handler *h)
{
    for (unsigned i = 0; i < srv->n_handlers; i++)
        if (!strcmp(srv->handlers[i].name, h->name))
            return -EEXIST;
    struct colibri_handler *n = realloc(srv->handlers, (srv->n_handlers + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    srv->handlers = n;
    srv->handlers[srv->n_handlers++] = *h;
    return 0;
}

static const struct colibri_handler *find_handler(struct colibri_server *srv, const char *name)
{
    for (unsigned i = 0; i < srv->n_handlers; i++)
        if (!strcmp(srv->handlers[i].name, name))
            return &srv->handlers[i];
    return NULL;
}

int server_add_route(struct colibri_server *srv, const char *prefix,
                     const struct colibri_handler *h, void *data, void (*free_data)(void *))
{
    struct route *r =
        ALLOC_INIT(struct route,
                   {.handler = h, .data = data, .free_data = free_data, .next = srv->route_list});
    if (!r)
        return -ENOMEM;
    int e = trie_add(srv->routes, prefix, strlen(prefix), r);
    if (e < 0) {
        free(r);
        return e;
    }
    srv->route_list = r;
    return 0;
}

int colibri_server_route(struct colibri_server *srv, const char *prefix, const char *handler,
                         void *data, char *err, size_t errlen)
{
    const struct colibri_handler *h = find_handler(srv, handler);
    if (!h)
        return fail(err, errlen, -ENOENT, "unknown handler '%s'", handler);
    if (prefix[0] != '/')
        return fail(err, errlen, -EINVAL, "route '%s' must start with '/'", prefix);
    int r = server_add_route(srv, prefix, h, data, NULL);
    if (r == -EEXIST)
        return fail(err, errlen, r, "route '%s' is already taken", prefix);
    return r;
}

void colibri_server_clear_listeners(struct colibri_server *srv)
{
    free(srv->listeners);
    srv->listeners = NULL;
    srv->n_listeners = 0;
}

void colibri_server_set_threads(struct colibri_server *srv, unsigned n)
{
    srv->n_threads = n;
}

/* "127.0.0.1:8080", "[::1]:8080", "*:8080", "localhost:8080" or "8080" */
static int parse_listener(const char *spec, struct listener *l, char *err, size_t errlen)
{
    char host[256], port[16];
    const char *colon = strrchr(spec, ':');
    const char *h = spec;
    size_t hl;
    if (!colon) {
        h = "*";
        hl = 1;
        colon = spec - 1;
    } else if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close + 1 != colon)
            return fail(err, errlen, -EINVAL, "bad listener '%s' (expected [v6addr]:port)", spec);
        h = spec + 1;
        hl = (size_t)(close - h);
    } else {
        hl = (size_t)(colon - spec);
    }
    size_t pl = strlen(colon + 1);
    if (hl == 0 || hl >= sizeof(host) || pl == 0 || pl >= sizeof(port))
        return fail(err, errlen, -EINVAL, "bad listener '%s' (expected ADDR:PORT)", spec);
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, colon + 1, pl + 1);
    char *end;
    long pn = strtol(port, &end, 10);
    if (*end || pn < 0 || pn > 65535)
        return fail(err, errlen, -EINVAL, "bad port in listener '%s'", spec);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    bool any = !strcmp(host, "*");
    if (any)
        hints.ai_flags |= AI_PASSIVE;
    int e = getaddrinfo(any ? NULL : host, port, &hints, &res);
    if (e)
        return fail(err, errlen, -EINVAL, "listener '%s': %s", spec, gai_strerror(e));
    /* "*" prefers the IPv6 wildcard, which also takes IPv4 (dual stack) */
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; any && a; a = a->ai_next)
        if (a->ai_family == AF_INET6)
            pick = a;
    memcpy(&l->addr, pick->ai_addr, pick->ai_addrlen);
    l->addr_len = pick->ai_addrlen;
    freeaddrinfo(res);
    snprintf(l->name, sizeof(l->name), "%s", spec);
    return 0;
}

int colibri_server_listen(struct colibri_server *srv, const char *addr, char *err, size_t errlen)
{
    struct listener l = {0};
    int r = parse_listener(addr, &l, err, errlen);
    if (r)
        return r;
    struct listener *n = realloc(srv->listeners, (srv->n_listeners + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    srv->listeners = n;
    srv->listeners[srv->n_listeners++] = l;
    return 0;
}

/* --- configuration --------------------------------------------------------- */

static int seconds(const struct config_node *n, uint32_t *out, char *err, size_t errlen)
{
    uint64_t ms;
    int r = config_duration_ms(n, &ms, err, errlen);
    if (r)
        return r;
    if (ms == 0 || ms > 86400ull * 1000 * 365)
        return config_error(n, err, errlen, "must be between 1s and a year");
    *out = (uint32_t)((ms + 999) / 1000);
    return 0;
}

static int size_in(const struct config_node *n, uint64_t min, uint64_t max, size_t *out, char *err,
                   size_t errlen)
{
    uint64_t v;
    int r = config_size(n, &v, err, errlen);
    if (r)
        return r;
    if (v < min || v > max)
        return config_error(n, err, errlen, "must be between %llu and %llu bytes",
                            (unsigned long long)min, (unsigned long long)max);
    *out = (size_t)v;
    return 0;
}

static int load_site(struct colibri_server *srv, struct config_node *site, char *err, size_t errlen)
{
    struct config_node *n;
    while ((n = config_take_any(site))) {
        if (!strcmp(n->name, "handler") && !n->is_section) {
            char prefix[1024], name[128], extra;
            if (sscanf(n->value, "%1023s %127s %c", prefix, name, &extra) != 2)
                return config_error(n, err, errlen, "expected 'handler PREFIX NAME'");
            const struct colibri_handler *h = find_handler(srv, name);
            if (!h)
                return config_error(n, err, errlen, "unknown handler '%s'", name);
            if (prefix[0] != '/')
                return config_error(n, err, errlen, "prefix '%s' must start with '/'", prefix);
            int r = server_add_route(srv, prefix, h, NULL, NULL);
            if (r == -EEXIST)
                return config_error(n, err, errlen, "prefix '%s' is already routed", prefix);
            if (r)
                return config_error(n, err, errlen, "%s", strerror(-r));
        } else if (!strcmp(n->name, "serve_files") && n->is_section) {
            int r = files_route_from_config(srv, n, err, errlen);
            if (r)
                return r;
        } else {
            return config_error(n, err, errlen, "unknown key in site");
        }
    }
    return 0;
}

static int load_config(struct colibri_server *srv, struct config *cfg, char *err, size_t errlen)
{
    struct config_node *root = cfg->root, *n;
    int r;
    while ((n = config_take(root, "listener"))) {
        char why[256];
        r = colibri_server_listen(srv, n->value, why, sizeof(why));
        if (r)
            return config_error(n, err, errlen, "%s", why);
    }
    if ((n = config_take(root, "threads"))) {
        long v;
        if ((r = config_int(n, 0, 1024, &v, err, errlen)))
            return r;
        srv->n_threads = (unsigned)v;
    }
    if ((n = config_take(root, "keep_alive_timeout")) &&
        (r = seconds(n, &srv->wcfg.keep_alive_s, err, errlen)))
        return r;
    if ((n = config_take(root, "request_timeout")) &&
        (r = seconds(n, &srv->wcfg.request_timeout_s, err, errlen)))
        return r;
    if ((n = config_take(root, "shutdown_timeout")) &&
        (r = seconds(n, &srv->wcfg.shutdown_grace_s, err, errlen)))
        return r;
    if ((n = config_take(root, "max_request_head")) &&
        (r = size_in(n, 256, 1 << 20, &srv->limits.max_head, err, errlen)))
        return r;
    if ((n = config_take(root, "max_request_target")) &&
        (r = size_in(n, 16, 1 << 20, &srv->limits.max_target, err, errlen)))
        return r;
    if ((n = config_take(root, "max_request_body")) &&
        (r = size_in(n, 0, SIZE_MAX, &srv->max_body, err, errlen)))
        return r;
    if ((n = config_take(root, "server_header"))) {
        if (strlen(n->value) > 100 || strpbrk(n->value, "\r\n"))
            return config_error(n, err, errlen, "must be one short line");
        srv->server_hdr_len = n->value[0]
                                  ? (size_t)snprintf(srv->server_hdr, sizeof(srv->server_hdr),
                                                     "Server: %s\r\n", n->value)
                                  : 0;
    }
    if ((n = config_take(root, "error_template"))) {
        char why[512];
        struct tpl *t = tpl_compile_file(n->value, &http_error_desc, why, sizeof(why));
        if (!t)
            return config_error(n, err, errlen, "%s", why);
        tpl_free(srv->error_tpl);
        srv->error_tpl = t;
    }
    if ((n = config_take(root, "accept"))) {
        if (!strcmp(n->value, "thread"))
            srv->accept_thread = true;
        else if (!strcmp(n->value, "reuseport"))
            srv->accept_thread = false;
        else
            return config_error(n, err, errlen, "expected 'reuseport' or 'thread'");
    }
    while ((n = config_take(root, "site"))) {
        if (!n->is_section)
            return config_error(n, err, errlen, "site must be a section: site { ... }");
        if ((r = load_site(srv, n, err, errlen)))
            return r;
    }
    return config_check_unused(cfg, err, errlen);
}

static int adopt_config(struct colibri_server *srv, struct config *cfg, char *err, size_t errlen)
{
    if (!cfg)
        return -EINVAL;
    int r = load_config(srv, cfg, err, errlen);
    if (r) {
        config_free(cfg);
        return r;
    }
    config_free(srv->cfg);
    srv->cfg = cfg;
    return 0;
}

int colibri_server_load_config(struct colibri_server *srv, const char *path, char *err,
                               size_t errlen)
{
    return adopt_config(srv, config_parse_file(path, err, errlen), err, errlen);
}

int colibri_server_load_config_string(struct colibri_server *srv, const char *name,
                                      const char *text, char *err, size_t errlen)
{
    return adopt_config(srv, config_parse_string(name, text, err, errlen), err, errlen);
}

/* --- running ------------------------------------------------------------------ */

/* The first socket of a listener binds without SO_REUSEPORT, so a port
 * that anyone (another colibri included) already listens on is an error,
 * as users expect; it joins the port group after binding, and the other
 * workers' sockets bind beside it. A port 0 becomes the one the first
 * socket got. */
static int open_listener(struct listener *l, unsigned defer_s, bool first, char *err, size_t errlen)
{
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(err, errlen, -errno, "listener %s: socket: %s", l->name, strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* one socket per worker: the kernel spreads connections, no fd ever
     * changes threads, no accept lock */
    if (!first)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    /* inherited by accepted sockets: no per-connection system call */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* accept() only once the request has arrived, so the first read works */
    int defer = (int)defer_s;
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer));
    if (l->addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (const struct sockaddr *)&l->addr, l->addr_len) < 0)
        goto out_close;
    if (first) {
        socklen_t len = sizeof(l->addr);
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
            getsockname(fd, (struct sockaddr *)&l->addr, &len) < 0)
            goto out_close;
        l->addr_len = len;
    }
    if (listen(fd, 4096) < 0)
        goto out_close;
    return fd;

out_close:;
    int e = errno;
    close(fd);
    return fail(err, errlen, -e, "listener %s: %s", l->name, strerror(e));
}

static unsigned cpu_count(void)
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

int colibri_server_run(struct colibri_server *srv, char *err, size_t errlen)
{
    int r = 0;
    if (!srv->n_listeners && (r = colibri_server_listen(srv, "*:" DEFAULT_PORT, err, errlen)))
        return r;
    signal(SIGPIPE, SIG_IGN);

    unsigned n = srv->n_threads ? srv->n_threads : cpu_count();
    srv->max_fds = raise_fd_limit();
    /* untouched pages of the table cost no memory */
    /* mapped: page-aligned, so each pair of 32-byte entries fills exactly
     * one cache line, and untouched pages of the table cost no memory */
    size_t table = (size_t)srv->max_fds * sizeof(struct conn);
    srv->conns = mmap(NULL, table, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (srv->conns == MAP_FAILED)
        srv->conns = NULL;
    srv->workers = calloc(n, sizeof(struct worker));
    srv->scratch = calloc(n, sizeof(*srv->scratch));
    for (unsigned i = 0; srv->scratch && i < n; i++)
        if (!(srv->scratch[i] = tpl_scratch_new()))
            srv->workers = (free(srv->workers), NULL);
    if (!srv->conns || !srv->workers || !srv->scratch) {
        r = fail(err, errlen, -ENOMEM, "out of memory for %u connections", srv->max_fds);
        goto out_free;
    }
    /* room for a whole head and the start of a body, in whole pages */
    srv->wcfg.in_cap = (srv->limits.max_head + 1024 + 4095) & ~(size_t)4095;

    /* with an acceptor thread, one set of sockets for it; otherwise one set
     * per worker */
    unsigned started = 0, sets = srv->accept_thread ? 1 : n;
    for (unsigned i = 0; i < sets + (srv->accept_thread ? n : 0); i++) {
        bool own = i < sets;
        int *fds = own ? calloc(srv->n_listeners, sizeof(int)) : NULL;
        if (own && !fds) {
            r = -ENOMEM;
            goto out_workers;
        }
        for (unsigned j = 0; own && j < srv->n_listeners; j++) {
            int fd =
                open_listener(&srv->listeners[j], srv->wcfg.request_timeout_s, i == 0, err, errlen);
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
        r = worker_init(&srv->workers[wi], &srv->wcfg, wi, srv->conns, srv->max_fds, fds,
                        own ? srv->n_listeners : 0);
        started = wi + 1;
        if (!r && srv->accept_thread &&
            !(srv->workers[wi].ring = calloc(1, sizeof(struct fd_ring))))
            r = -ENOMEM;
        if (r) {
            fail(err, errlen, r, "worker %u: %s", wi, strerror(-r));
            goto out_workers;
        }
    }
    if (srv->accept_thread && (srv->acceptor_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        r = fail(err, errlen, -errno, "eventfd: %s", strerror(errno));
        goto out_workers;
    }
    srv->n_threads = n;

    /* workers leave SIGINT/SIGTERM to the thread that called us */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    unsigned running = 0;
    for (; running < n; running++)
        if (pthread_create(&srv->workers[running].thread, NULL, worker_main,
                           &srv->workers[running])) {
            r = fail(err, errlen, -EAGAIN, "cannot start worker thread %u", running);
            break;
        }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    srv->running = 1;
    if (r || srv->stop_asap)
        colibri_server_shutdown(srv);
    if (srv->accept_thread && !r) {
        acceptor_run(srv->workers, n, srv->acceptor_fds, srv->n_listeners, srv->acceptor_wake,
                     &srv->stop_asap);
        /* refuse new connections at once, not when the last worker is done */
        for (unsigned j = 0; j < srv->n_listeners; j++)
            close(srv->acceptor_fds[j]);
        free(srv->acceptor_fds);
        srv->acceptor_fds = NULL;
    }
    for (unsigned i = 0; i < running; i++)
        pthread_join(srv->workers[i].thread, NULL);
    srv->running = 0;

out_workers:
    for (unsigned i = 0; i < started; i++)
        worker_destroy(&srv->workers[i]);
out_free:
    for (unsigned j = 0; srv->acceptor_fds && j < srv->n_listeners; j++)
        close(srv->acceptor_fds[j]);
    free(srv->acceptor_fds);
    srv->acceptor_fds = NULL;
    if (srv->acceptor_wake >= 0)
        close(srv->acceptor_wake);
    srv->acceptor_wake = -1;
    for (unsigned i = 0; srv->scratch && i < n; i++)
        tpl_scratch_free(srv->scratch[i]);
    free(srv->scratch);
    srv->scratch = NULL;
    free(srv->workers);
    srv->workers = NULL;
    if (srv->conns)
        munmap(srv->conns, (size_t)srv->max_fds * sizeof(struct conn));
    srv->conns = NULL;
    return r;
}

void colibri_server_shutdown(struct colibri_server *srv)
{
    srv->stop_asap = 1;
    if (!srv->running || !srv->workers)
        return;
    if (srv->acceptor_wake >= 0) {
        uint64_t one = 1;
        ssize_t r = write(srv->acceptor_wake, &one, sizeof(one));
        (void)r;
    }
    for (unsigned i = 0; i < srv->n_threads; i++)
        worker_wake(&srv->workers[i]);
}
