/* load.c - a config file into a server: settings, "module FILE" lines,
 * and sites, whose sections go to the module registered under their
 * keyword. This file knows no module by name. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "config/config.h"
#include "route/trie.h"
#include "rt/tls.h"
#include "server/builtin.h"
#include "server/server.h"
#include "tpl/tpl.h"

/* Every error a config file has, not only the first: each independent
 * step (a line, a section of a site) is checked, a failed one is noted
 * and skipped with what it holds (so its keys are not reported again as
 * unknown), and the loading goes on. The messages end up in the caller's
 * buffer, one per line. */
struct errs {
    char *buf;
    size_t cap, len;
    unsigned n;
};

static void note(struct errs *e, struct config_node *n, const char *msg)
{
    if (n)
        config_mark_used(n);
    e->n++;
    if (!e->cap || e->len + 1 >= e->cap)
        return;
    int k = snprintf(e->buf + e->len, e->cap - e->len, "%s%s", e->len ? "\n" : "",
                     msg[0] ? msg : "error");
    e->len = k < 0 ? e->len : MIN(e->len + (size_t)k, e->cap - 1);
}

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

/* A timeout that may be off: "off" or 0, else between 1s and a day. */
static int idle_ms(const struct config_node *n, uint32_t *out, char *err, size_t errlen)
{
    uint64_t ms = 0;
    if (strcmp(n->value, "off") != 0) {
        int r = config_duration_ms(n, &ms, err, errlen);
        if (r)
            return r;
        if (ms && (ms < 1000 || ms > 86400ull * 1000))
            return config_error(n, err, errlen, "must be 'off' or between 1s and a day");
    }
    *out = (uint32_t)ms;
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

/* "handler PREFIX NAME", or "handler PREFIX NAME { max_body = SIZE }" */
static int load_handler(struct colibri_server *srv, struct config_node *n, char *err, size_t errlen)
{
    char prefix[1024], name[128], extra, why[256];
    if (sscanf(n->value, "%1023s %127s %c", prefix, name, &extra) != 2)
        return config_error(n, err, errlen, "expected 'handler PREFIX NAME'");
    const struct colibri_handler *h = server_find_handler(srv, name);
    if (!h)
        return config_error(n, err, errlen, "unknown handler '%s'", name);
    size_t max_body = 0;
    uint32_t body_timeout_s = 0;
    struct config_node *o;
    int r;
    if (n->is_section && (o = config_take(n, "max_body")) &&
        (r = size_in(o, 1, SIZE_MAX, &max_body, err, errlen)))
        return r;
    if (n->is_section && (o = config_take(n, "body_timeout")) &&
        (r = seconds(o, &body_timeout_s, err, errlen)))
        return r;
    if (colibri_server_add_route(srv, prefix, h, NULL, NULL, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    srv->route_list->max_body = max_body; /* the route just added */
    srv->route_list->body_timeout_s = body_timeout_s;
    /* anything else in the block: config_take_unused() names it */
    return 0;
}

/* "listener ADDR", or "listener ADDR { proxy_protocol = BOOL }"; ADDR
 * "systemd" or "systemd:NAME" is every socket systemd passed, or those
 * named NAME, and may make several listeners, all with the block's
 * options. */
static int load_listener(struct colibri_server *srv, struct config_node *n, char *err,
                         size_t errlen)
{
    char why[256];
    unsigned first = srv->n_listeners;
    int r = colibri_server_listen(srv, n->value, why, sizeof(why));
    if (r)
        return config_error(n, err, errlen, "%s", why);
    if (!n->is_section)
        return 0;
    struct config_node *o;
    bool proxy = false, tls = false, http2 = true, h2c_upgrade = false;
    long long port = 0;
    if ((o = config_take(n, "proxy_protocol")) && (r = config_bool(o, &proxy, err, errlen)))
        return r;
    if ((o = config_take(n, "tls")) && (r = config_bool(o, &tls, err, errlen)))
        return r;
    if (tls && !tls_available())
        return config_error(o, err, errlen,
                            "this build has no TLS (OpenSSL 3 was not found at build time)");
    if (tls && !srv->tls_node)
        srv->tls_node = o;
    if ((o = config_take(n, "http2")) && (r = config_bool(o, &http2, err, errlen)))
        return r;
    if ((o = config_take(n, "h2c_upgrade")) && (r = config_bool(o, &h2c_upgrade, err, errlen)))
        return r;
    if (h2c_upgrade && tls)
        return config_error(o, err, errlen,
                            "Upgrade: h2c is for cleartext listeners (TLS offers h2 by ALPN)");
    if (h2c_upgrade && !http2)
        return config_error(o, err, errlen, "Upgrade: h2c needs http2 = true on this listener");
    if ((o = config_take(n, "redirect_to_https"))) {
        char *end;
        port = strtoll(o->value, &end, 10);
        if (!o->value[0] || *end || port < 1 || port > 65535)
            return config_error(o, err, errlen, "expected a port number (1-65535)");
        if (tls)
            return config_error(o, err, errlen, "a TLS listener cannot redirect to HTTPS");
    }
    for (unsigned i = first; i < srv->n_listeners; i++) {
        srv->listeners[i].proxy_protocol = proxy;
        srv->listeners[i].tls = tls;
        srv->listeners[i].redirect_https = (uint16_t)port;
        srv->listeners[i].no_http2 = !http2;
        srv->listeners[i].h2c_upgrade = h2c_upgrade;
    }
    /* anything else in the block: config_take_unused() names it */
    return 0;
}

/* "tls_protocols = TLSv1.2 TLSv1.3": the versions allowed; the older ones
 * are refused. */
/* "user = NAME" and "chroot = DIR" (which needs "user"): applied by
 * colibri_server_run() once the listeners are bound. */
static int load_privs(struct colibri_server *srv, struct config_node *root, char *err,
                      size_t errlen)
{
    char why[256];
    struct config_node *user = config_take(root, "user"), *dir = config_take(root, "chroot");
    free(srv->user_text);
    free(srv->chroot_text);
    srv->user_text = user ? strdup(user->value) : NULL;
    srv->chroot_text = dir ? strdup(dir->value) : NULL;
    /* a reload only compares them (they take effect at a restart): after
     * the drop, looking the user up or checking the folder may fail */
    if (srv->reload_of)
        return 0;
    if (user && privs_set_user(&srv->privs, user->value, why, sizeof(why)))
        return config_error(user, err, errlen, "%s", why);
    if (!dir)
        return 0;
    if (!user)
        return config_error(dir, err, errlen,
                            "needs 'user' too (a root process can leave a chroot)");
    if (privs_set_chroot(&srv->privs, dir->value, why, sizeof(why)))
        return config_error(dir, err, errlen, "%s", why);
    return 0;
}

static bool top_level_module(const char *name)
{
    static const char *const top[] = BUILTIN_TOP_LEVEL_MODULES;
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        if (!strcmp(top[i], name))
            return true;
    return false;
}

/* The top-level sections of BUILTIN_TOP_LEVEL_MODULES, before the sites
 * that refer to them. */
static void load_top_modules(struct colibri_server *srv, struct config_node *root, struct errs *e)
{
    static const char *const top[] = BUILTIN_TOP_LEVEL_MODULES;
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
        struct config_node *n;
        while ((n = config_take(root, top[i]))) {
            char err[1024] = "";
            const struct colibri_module *m = server_find_module(srv, top[i]);
            int r;
            if (!m)
                r = config_error(n, err, sizeof(err), "no module '%s'", top[i]);
            else if (!n->is_section)
                r = config_error(n, err, sizeof(err), "expected '%s NAME { ... }'", top[i]);
            else if ((r = m->from_config(srv, (struct colibri_conf *)n, err, sizeof(err))) &&
                     !err[0])
                config_error(n, err, sizeof(err), "%s", strerror(r < 0 ? -r : EINVAL));
            if (r)
                note(e, n, err);
        }
    }
}

static void load_site_body(struct colibri_server *srv, struct config_node *site, struct errs *e)
{
    struct config_node *n;
    while ((n = config_take_any(site))) {
        char err[1024] = "";
        size_t errlen = sizeof(err);
        int r;
        srv->loading_line = n->line;
        if (!strcmp(n->name, "handler")) {
            r = load_handler(srv, n, err, errlen);
        } else if (!strcmp(n->name, "tls_certificate") || !strcmp(n->name, "tls_key")) {
            r = load_tls_pair(srv, site, n, err, errlen);
            srv->tls_pair_failed = srv->tls_pair_failed || r;
        } else if (!strcmp(n->name, "tls_ocsp_staple")) {
            r = load_tls_staple(srv, site, n, err, errlen);
        } else if (!strcmp(n->name, "access_log") || !strcmp(n->name, "log_format")) {
            r = logs_load_site(&srv->logs, srv->loading, n, err, errlen);
        } else {
            const struct colibri_module *m = server_find_module(srv, n->name);
            if (m && top_level_module(n->name))
                r = config_error(n, err, errlen, "belongs at the top level, not in a site");
            else if (!m && n->is_section)
                r = config_error(n, err, errlen,
                                 "unknown key in site (no module '%s': is a 'module FILE' line "
                                 "missing?)",
                                 n->name);
            else if (!m)
                r = config_error(n, err, errlen, "unknown key in site");
            else if (m->line_form && n->is_section)
                r = config_error(n, err, errlen, "is a line, not a section");
            else if (!n->is_section && !m->line_form)
                r = config_error(n, err, errlen, "expected '%s PREFIX { ... }'", n->name);
            else if ((r = m->from_config(srv, (struct colibri_conf *)n, err, errlen)) && !err[0])
                /* the module said nothing: at least say where */
                config_error(n, err, errlen, "%s", strerror(r < 0 ? -r : EINVAL));
        }
        if (r)
            note(e, n, err);
    }
    srv->loading_line = 0;
}

/* One name of "site NAME... { }" for the site whose routes are *routes
 * (created with the first name). A name may belong to one site only. */
static int add_vhost(struct colibri_server *srv, const struct config_node *site, const char *word,
                     struct trie **routes, char *err, size_t errlen)
{
    char canon[256];
    const char *why;
    int len = http_vhost_canon(word, canon, sizeof(canon), &why);
    if (len < 0)
        return config_error(site, err, errlen, "bad host name '%s': %s", word, why);
    for (unsigned i = 0; i < srv->n_vhosts; i++)
        if (!strcmp(srv->vhosts[i].name, canon))
            return config_error(site, err, errlen, "'%s' is already a name of the site at line %d",
                                word, srv->vhost_lines[i]);
    if (!*routes) {
        struct trie **sr = realloc(srv->site_routes, (srv->n_sites + 1) * sizeof(*sr));
        if (!sr)
            return config_error(site, err, errlen, "out of memory");
        srv->site_routes = sr;
        if (!(sr[srv->n_sites] = trie_new()))
            return config_error(site, err, errlen, "out of memory");
        *routes = sr[srv->n_sites++];
    }
    struct http_vhost *v = realloc(srv->vhosts, (srv->n_vhosts + 1) * sizeof(*v));
    if (v)
        srv->vhosts = v;
    int *lines = v ? realloc(srv->vhost_lines, (srv->n_vhosts + 1) * sizeof(*lines)) : NULL;
    if (lines)
        srv->vhost_lines = lines;
    char *name = lines ? strdup(canon) : NULL;
    if (!name)
        return config_error(site, err, errlen, "out of memory");
    srv->vhosts[srv->n_vhosts] =
        (struct http_vhost){.name = name, .len = (size_t)len, .routes = *routes};
    srv->vhost_lines[srv->n_vhosts++] = site->line;
    return 0;
}

/* "site NAME... { ... }": a virtual host, chosen by the request's host,
 * with routes of its own; "site { ... }" is the default site, for every
 * other host. Several "site { }" blocks make one default site (a prefix
 * routed twice is still an error). Routes that modules add while a named
 * site loads go to that site (srv->loading). */
static int load_site(struct colibri_server *srv, struct config_node *site, struct errs *e,
                     char *err, size_t errlen)
{
    if (!site->is_section)
        return config_error(site, err, errlen, "site must be a section: site [NAME...] { ... }");
    struct trie *routes = NULL;
    for (const char *p = site->value; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, " \t");
        if (!n)
            break;
        char word[300];
        if (n >= sizeof(word))
            return config_error(site, err, errlen, "bad host name '%.40s...': too long", p);
        memcpy(word, p, n);
        word[n] = '\0';
        int r = add_vhost(srv, site, word, &routes, err, errlen);
        if (r)
            return r;
        p += n;
    }
    if (!routes)
        srv->has_default = true;
    srv->loading = routes;
    load_site_body(srv, site, e);
    srv->loading = NULL;
    return 0;
}

/* "module FILE": a shared library whose colibri_module_init() registers
 * handlers and modules. A relative FILE is taken from the config file's
 * folder, as the library travels with the config that names it. */
static int load_library(struct colibri_server *srv, const struct config_node *n, char *err,
                        size_t errlen)
{
    char path[PATH_MAX];
    if (!n->value[0] || n->is_section)
        return config_error(n, err, errlen, "expected 'module FILE'");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", n->file ? n->file : ".");
    const char *d = dirname(dir);
    if (n->value[0] == '/' || !strcmp(d, ".")) {
        /* a config in the current folder: FILE as written (not ././lib.so) */
        snprintf(path, sizeof(path), "%s", n->value);
        if (!strchr(path, '/') && strlen(path) + 2 < sizeof(path)) /* dlopen() would search */
            snprintf(path, sizeof(path), "./%s", n->value);
    } else if (snprintf(path, sizeof(path), "%s/%s", d,
                        strncmp(n->value, "./", 2) ? n->value : n->value + 2) >=
               (int)sizeof(path)) {
        return config_error(n, err, errlen, "path too long");
    }
    char why[512];
    if (sandbox_allow(srv, path, COLIBRI_PATH_READ, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    void **libs = realloc(srv->libs, (srv->n_libs + 1) * sizeof(*libs));
    if (!libs)
        return config_error(n, err, errlen, "out of memory");
    srv->libs = libs;
    /* RTLD_NOW: a symbol the module needs and we lack fails here, not
     * in the middle of a request */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return config_error(n, err, errlen, "cannot load: %s", dlerror());
    srv->libs[srv->n_libs++] = lib;
    int (*init)(struct colibri_server *) =
        (int (*)(struct colibri_server *))dlsym(lib, "colibri_module_init");
    if (!init)
        return config_error(n, err, errlen, "%s has no colibri_module_init()", path);
    srv->in_lib_init = true; /* what it registers goes with the config that named it */
    int r = init(srv);
    srv->in_lib_init = false;
    if (r)
        return config_error(n, err, errlen, "colibri_module_init() of %s failed (%d)", path, r);
    return 0;
}

static void load_settings(struct colibri_server *srv, struct config *cfg, struct errs *e)
{
    struct config_node *root = cfg->root, *n;
    char err[1024];
    size_t errlen = sizeof(err);
    int r;
    /* first: whether paths named below are for a sandbox */
    if ((n = config_take(root, "sandbox")) && (r = config_bool(n, &srv->sandbox_on, err, errlen)))
        note(e, n, err);
    /* then the handlers and modules the sites below may name */
    while ((n = config_take(root, "module")))
        if ((r = load_library(srv, n, err, errlen)))
            note(e, n, err);
    while ((n = config_take(root, "listener")))
        if ((r = load_listener(srv, n, err, errlen)))
            note(e, n, err);
    if ((r = load_privs(srv, root, err, errlen)))
        note(e, NULL, err);
    if ((n = config_take(root, "threads"))) {
        long v;
        if ((r = config_int(n, 0, 1024, &v, err, errlen)))
            note(e, n, err);
        else
            srv->n_threads = (unsigned)v;
    }
    if ((n = config_take(root, "max_connections_per_client"))) {
        long v;
        if ((r = config_int(n, 0, 1000000, &v, err, errlen)))
            note(e, n, err);
        else
            srv->max_conn_per_client = (uint32_t)v;
    }
    if ((n = config_take(root, "keep_alive_timeout")) &&
        (r = seconds(n, &srv->wcfg.keep_alive_s, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "request_timeout")) &&
        (r = seconds(n, &srv->wcfg.request_timeout_s, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "shutdown_timeout")) &&
        (r = seconds(n, &srv->wcfg.shutdown_grace_s, err, errlen)))
        note(e, n, err);
    struct http_config *h = &srv->http;
    if ((n = config_take(root, "max_request_head")) &&
        (r = size_in(n, 256, 1 << 20, &h->limits.max_head, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "max_request_target")) &&
        (r = size_in(n, 16, 1 << 20, &h->limits.max_target, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "max_request_body")) &&
        (r = size_in(n, 0, SIZE_MAX, &h->max_body, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "body_timeout")) &&
        (r = seconds(n, &h->body_timeout_s, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "body_rate_grace")) &&
        (r = seconds(n, &h->body_rate_grace_s, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "body_min_rate")) &&
        (r = size_in(n, 0, 1 << 30, &h->body_min_rate, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "body_memory_max")) &&
        (r = size_in(n, 0, 1 << 30, &h->body_memory_max, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "multipart_memory_max")) &&
        (r = size_in(n, 0, 1 << 30, &h->multipart_memory_max, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "http2_max_concurrent_streams"))) {
        long v;
        if ((r = config_int(n, 1, 1 << 16, &v, err, errlen)))
            note(e, n, err);
        else
            h->h2_max_streams = (uint32_t)v;
    }
    if ((n = config_take(root, "http2_initial_window")) &&
        (r = size_in(n, 65535, (1u << 31) - 1, &h->h2_window, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "ws_memory_max")) &&
        (r = size_in(n, 64 << 10, (uint64_t)1 << 40, &h->ws_memory_max, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "ws_idle_timeout")) &&
        (r = idle_ms(n, &h->ws_idle_timeout_ms, err, errlen)))
        note(e, n, err);
    if ((n = config_take(root, "temp_dir"))) {
        char why[512];
        if (n->value[0] != '/' || strlen(n->value) >= sizeof(h->temp_dir))
            note(e, n, (config_error(n, err, errlen, "must be an absolute path"), err));
        else if (sandbox_allow(srv, n->value, COLIBRI_PATH_WRITE, why, sizeof(why)))
            note(e, n, (config_error(n, err, errlen, "%s", why), err));
        else
            strcpy(h->temp_dir, n->value);
    }
    if ((n = config_take(root, "server_header"))) {
        if (strlen(n->value) > 100 || strpbrk(n->value, "\r\n")) {
            config_error(n, err, errlen, "must be one short line");
            note(e, n, err);
        } else
            h->server_hdr_len = n->value[0] ? (size_t)snprintf(h->server_hdr, sizeof(h->server_hdr),
                                                               "Server: %s\r\n", n->value)
                                            : 0;
    }
    if ((n = config_take(root, "error_template"))) {
        char why[512];
        struct tpl *t = sandbox_allow(srv, n->value, COLIBRI_PATH_READ, why, sizeof(why))
                            ? NULL
                            : tpl_compile_file(n->value, &http_error_desc, why, sizeof(why));
        if (!t) {
            config_error(n, err, errlen, "%s", why);
            note(e, n, err);
        } else {
            tpl_free(srv->error_tpl);
            srv->error_tpl = t;
        }
    }
    if ((n = config_take(root, "accept"))) {
        if (!strcmp(n->value, "thread"))
            srv->accept_thread = true;
        else if (!strcmp(n->value, "reuseport"))
            srv->accept_thread = false;
        else
            note(e, n, (config_error(n, err, errlen, "expected 'reuseport' or 'thread'"), err));
    }
    if ((r = logs_load(&srv->logs, root, err, errlen)))
        note(e, NULL, err);
    if ((n = config_take(root, "tls_protocols")) && load_tls_protocols(srv, n, err, errlen))
        note(e, n, err);
    if ((n = config_take(root, "ktls"))) {
        if (!strcmp(n->value, "auto") || !strcmp(n->value, "off"))
            srv->ktls_off = !strcmp(n->value, "off");
        else
            note(e, n, (config_error(n, err, errlen, "expected 'auto' or 'off'"), err));
    }
    if ((n = config_take(root, "tls_ticket_rotate")) &&
        seconds(n, &srv->tls_ticket_rotate, err, errlen))
        note(e, n, err);
    if ((n = config_take(root, "tls_ticket_key_file")) && load_ticket_key(srv, n, err, errlen))
        note(e, n, err);
    if ((n = config_take(root, "tls_session_tickets"))) {
        bool on = true;
        if (config_bool(n, &on, err, errlen))
            note(e, n, err);
        srv->tls_no_tickets = !on;
    }
    if ((n = config_take(root, "tls_ciphers"))) {
        /* checked here, so the error names this line; a bad list is not
         * kept (the default stays), or each certificate and the TLS
         * listener would fail on it again */
        char why[512];
        struct tls_server *probe =
            tls_available() ? tls_server_new(srv->tls_protocols, n->value, why, sizeof(why)) : NULL;
        if (tls_available() && !probe) {
            note(e, n, (config_error(n, err, errlen, "%s", why), err));
        } else {
            free(srv->tls_ciphers);
            srv->tls_ciphers = strdup(n->value);
        }
        tls_server_free(probe);
    }
    load_top_modules(srv, root, e);
    while ((n = config_take(root, "site")))
        if ((r = load_site(srv, n, e, err, errlen)))
            note(e, n, err);
    /* (also fixes the sites' places, for the OCSP staples' callbacks) */
    bool tls_ready = srv->tls && tls_server_ready(srv->tls);
    /* not when a certificate's own line failed: that error says it all */
    if (srv->tls_node && !tls_ready && !srv->tls_pair_failed)
        note(e, srv->tls_node,
             (config_error(srv->tls_node, err, errlen,
                           "a TLS listener needs a certificate: tls_certificate and tls_key "
                           "in a site"),
              err));
    /* what nobody took, every key of it */
    while (config_take_unused(cfg, err, errlen))
        note(e, NULL, err);
}

/* The line number of a "FILE:LINE: ..." message (INT_MAX: none). */
static long line_of(const char *msg, size_t len)
{
    for (const char *c = memchr(msg, ':', len); c && c < msg + len;
         c = memchr(c + 1, ':', (size_t)(msg + len - c - 1))) {
        char *end;
        long v = strtol(c + 1, &end, 10);
        if (end > c + 1 && end < msg + len && *end == ':' && c[1] >= '0' && c[1] <= '9')
            return v;
    }
    return INT_MAX;
}

/* The messages (one a line) in the order of their lines in the file, not
 * of the loading steps that found them; a message without a line keeps
 * its place among those of the same number (stable). */
static void sort_by_line(char *buf)
{
    size_t len = strlen(buf);
    unsigned n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    struct msg {
        const char *p;
        size_t len;
        long line;
    } *m = calloc(n + 1, sizeof(*m));
    char *copy = malloc(len + 1);
    if (!m || !copy) {
        free(m);
        free(copy);
        return;
    }
    memcpy(copy, buf, len + 1);
    unsigned k = 0;
    for (char *p = copy, *nl; p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        m[k++] = (struct msg){.p = p, .len = l, .line = line_of(p, l)};
    }
    for (unsigned i = 1; i < k; i++) /* insertion sort: stable, and few */
        for (unsigned j = i; j > 0 && m[j - 1].line > m[j].line; j--) {
            struct msg t = m[j];
            m[j] = m[j - 1];
            m[j - 1] = t;
        }
    char *w = buf;
    for (unsigned i = 0; i < k; i++) {
        if (i)
            *w++ = '\n';
        memcpy(w, m[i].p, m[i].len);
        w += m[i].len;
    }
    *w = '\0';
    free(m);
    free(copy);
}

static int load_config(struct colibri_server *srv, struct config *cfg, char *err, size_t errlen)
{
    struct errs e = {.buf = err, .cap = errlen};
    if (errlen)
        err[0] = '\0';
    load_settings(srv, cfg, &e);
    if (e.n > 1 && errlen)
        sort_by_line(err);
    return e.n ? -EINVAL : 0;
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
    int r = adopt_config(srv, config_parse_file(path, err, errlen), err, errlen);
    if (r)
        return r;
    /* what a reload reads again (as written: its messages name it so) */
    char *p = strdup(path);
    if (!p)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    free(srv->config_path);
    srv->config_path = p;
    return 0;
}

int colibri_server_load_config_string(struct colibri_server *srv, const char *name,
                                      const char *text, char *err, size_t errlen)
{
    return adopt_config(srv, config_parse_string(name, text, err, errlen), err, errlen);
}
