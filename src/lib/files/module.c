/* module.c - the serve_files module: its config section, its defaults,
 * and colibri_serve_files() for programs that set up by hand. */
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "files/compress.h"
#include "files/listing.h"
#include "server/builtin.h"

struct files_opts {
    const char *index;
    enum files_follow follow;
    bool listing, precompressed, compress;
    uint64_t small_max;
    uint64_t compress_max;
    uint64_t cache_ms;
    uint64_t mem_max;
    int64_t expires_s;
    const char *cache_control;
    const char *charset_types;
};

static const struct files_opts default_opts = {
    .index = "index.html",
    .follow = FILES_FOLLOW_INSIDE,
    .listing = false,
    .precompressed = true,
    .compress = true,
    .small_max = SMALL_DEFAULT,
    .compress_max = COMPRESS_MAX_DEFAULT,
    .cache_ms = CACHE_FOR_DEFAULT,
    .mem_max = MEMORY_DEFAULT,
    .expires_s = -1,
    .charset_types = DEFAULT_CHARSET_TYPES,
};

static const struct colibri_handler files_handler = {
    .name = "serve_files",
    .fn = files_serve,
};

void files_free(void *p)
{
    struct files *f = p;
    files_watch_free(f->watch); /* joins its thread, which uses the cache */
    cache_free(f->cache);       /* joins the pruning thread */
    files_listing_free(f->lister);
    if (f->root_fd >= 0)
        close(f->root_fd);
    free(f->root_abs);
    free(f->prefix);
    free(f->index);
    free(f->cache_control);
    free(f->charset_types);
    free(f);
}

static char *cache_control_line(const struct files_opts *o)
{
    char *s = NULL;
    int n = -1;
    if (o->cache_control)
        n = asprintf(&s, "Cache-Control: %s\r\n", o->cache_control);
    else if (o->expires_s >= 0)
        n = asprintf(&s, "Cache-Control: max-age=%lld\r\n", (long long)o->expires_s);
    return n < 0 ? NULL : s;
}

static int build(struct colibri_server *srv, const char *prefix, const char *root,
                 const struct files_opts *o, struct files **out, char *err, size_t errlen)
{
    int r = -ENOMEM;
    *out = NULL;
    struct files *f = ALLOC_INIT(struct files, {
                                                   .root_fd = -1,
                                                   .prefix_len = strlen(prefix),
                                                   .index_len = strlen(o->index),
                                                   .follow = o->follow,
                                                   .listing = o->listing,
                                                   .precompressed = o->precompressed,
                                                   /* without a cache, compressing
                                                      would happen per request */
                                                   .compress = o->compress && o->cache_ms,
                                                   .small_max = o->small_max,
                                                   .compress_max = o->compress_max,
                                                   .expires_s = o->expires_s,
                                                   .codings = files_codings_built(),
                                                   .mem_max = o->mem_max,
                                               });
    if (!f)
        goto out_oom;
    f->prefix = strdup(prefix);
    f->index = strdup(o->index);
    if (!f->prefix || !f->index)
        goto out_free;
    f->prefix_slash = f->prefix_len && prefix[f->prefix_len - 1] == '/';
    if ((o->cache_control || o->expires_s >= 0) && !(f->cache_control = cache_control_line(o)))
        goto out_free;
    if (o->charset_types && o->charset_types[0] &&
        asprintf(&f->charset_types, " %s ", o->charset_types) < 0) {
        f->charset_types = NULL;
        goto out_free;
    }
    if (f->charset_types)
        for (char *c = f->charset_types; *c; c++)
            if (*c == '\t' || *c == ',')
                *c = ' ';

    if ((r = colibri_server_allow_path(srv, root, COLIBRI_PATH_READ, err, errlen)))
        goto out_free;
    f->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->root_fd < 0 || !(f->root_abs = realpath(root, NULL))) {
        r = err_set(err, errlen, -errno, NULL, "cannot open '%s': %s", root, strerror(errno));
        goto out_free;
    }
    if (f->listing && !(f->lister = files_listing_new(err, errlen))) {
        r = -EINVAL;
        goto out_free;
    }
    uint64_t rnd[2] = {0};
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
        rnd[0] = (uint64_t)time(NULL) ^ (uintptr_t)f, rnd[1] = (uint64_t)getpid();
    int bl = snprintf(f->multipart, sizeof(f->multipart), "multipart/byteranges; boundary=");
    snprintf(f->multipart + bl, sizeof(f->multipart) - (size_t)bl, "colibri%016llx%08llx",
             (unsigned long long)rnd[0], (unsigned long long)(rnd[1] & 0xffffffff));
    f->boundary = f->multipart + bl;

    struct cache_params cp = {.ttl_ms = (uint32_t)MIN(o->cache_ms, UINT32_MAX),
                              .max_entries = MAX_ENTRIES};
    f->cache = cache_new(&files_entry_ops, f, &cp);
    if (!f->cache) {
        r = -ENOMEM; /* r is 0 since colibri_server_allow_path() */
        goto out_free;
    }
    /* without inotify, entries are refreshed after cache_for only */
    if (cp.ttl_ms)
        f->watch = files_watch_new(f->root_abs, f->cache);

    *out = f;
    return 0;

out_free:
    files_free(f);
out_oom:
    if (r == -ENOMEM)
        err_set(err, errlen, r, NULL, "out of memory");
    return r;
}

static int add(struct colibri_server *srv, const char *prefix, const char *root,
               const struct files_opts *o, char *err, size_t errlen)
{
    struct files *f;
    int r = build(srv, prefix, root, o, &f, err, errlen);
    if (r)
        return r;
    /* the route owns f from here, and frees it if it cannot be added */
    return colibri_server_add_route(srv, prefix, &files_handler, f, files_free, err, errlen);
}

int files_open(struct colibri_server *srv, const char *prefix, const char *root, struct files **out,
               char *err, size_t errlen)
{
    return build(srv, prefix, root, &default_opts, out, err, errlen);
}

int colibri_serve_files(struct colibri_server *srv, const char *prefix, const char *root, char *err,
                        size_t errlen)
{
    return add(srv, prefix, root, &default_opts, err, errlen);
}

static int take_bool(struct colibri_conf *sec, const char *key, bool *out, char *err, size_t errlen)
{
    struct colibri_conf *n = colibri_conf_take(sec, key);
    return n ? colibri_conf_bool(n, out, err, errlen) : 0;
}

/* "serve_files PREFIX { path = DIR ... }"; errors name file, line and key. */
static int from_config(struct colibri_server *srv, struct colibri_conf *n, char *err, size_t errlen)
{
    struct files_opts o = default_opts;
    struct colibri_conf *path = colibri_conf_take(n, "path"), *k;
    files_stats_register();
    const char *prefix = colibri_conf_value(n);
    int r;
    if (!path)
        return colibri_conf_error(n, err, errlen, "needs 'path = DIR'");
    if (prefix[0] != '/')
        return colibri_conf_error(n, err, errlen, "prefix '%s' must start with '/'", prefix);
    if ((k = colibri_conf_take(n, "index"))) {
        const char *v = colibri_conf_value(k);
        if (!v[0] || strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, ".."))
            return colibri_conf_error(k, err, errlen, "must be a plain file name");
        o.index = v;
    }
    if ((r = take_bool(n, "listing", &o.listing, err, errlen)) ||
        (r = take_bool(n, "precompressed", &o.precompressed, err, errlen)) ||
        (r = take_bool(n, "compress", &o.compress, err, errlen)))
        return r;
    if ((k = colibri_conf_take(n, "follow_symlinks"))) {
        const char *v = colibri_conf_value(k);
        if (!strcmp(v, "inside"))
            o.follow = FILES_FOLLOW_INSIDE;
        else if (!strcmp(v, "always"))
            o.follow = FILES_FOLLOW_ALWAYS;
        else if (!strcmp(v, "never"))
            o.follow = FILES_FOLLOW_NEVER;
        else
            return colibri_conf_error(k, err, errlen, "must be inside, always or never");
    }
    if ((k = colibri_conf_take(n, "cache_for"))) {
        if ((r = colibri_conf_duration_ms(k, &o.cache_ms, err, errlen)))
            return r;
        if (o.cache_ms > 86400ull * 1000)
            return colibri_conf_error(k, err, errlen, "must be at most a day");
    }
    if ((k = colibri_conf_take(n, "small_file_max"))) {
        if ((r = colibri_conf_size(k, &o.small_max, err, errlen)))
            return r;
        if (o.small_max > (64u << 20))
            return colibri_conf_error(k, err, errlen, "must be at most 64M");
    }
    if ((k = colibri_conf_take(n, "compress_max"))) {
        if ((r = colibri_conf_size(k, &o.compress_max, err, errlen)))
            return r;
        if (o.compress_max > (64u << 20))
            return colibri_conf_error(k, err, errlen, "must be at most 64M");
    }
    if ((k = colibri_conf_take(n, "cache_memory")) &&
        (r = colibri_conf_size(k, &o.mem_max, err, errlen)))
        return r;
    if ((k = colibri_conf_take(n, "expires"))) {
        uint64_t ms;
        if ((r = colibri_conf_duration_ms(k, &ms, err, errlen)))
            return r;
        if (ms > 86400ull * 1000 * 366 * 10)
            return colibri_conf_error(k, err, errlen, "must be at most ten years");
        o.expires_s = (int64_t)(ms / 1000);
    }
    if ((k = colibri_conf_take(n, "cache_control"))) {
        for (const char *c = colibri_conf_value(k); *c; c++)
            if ((unsigned char)*c < ' ' || *c == 0x7f)
                return colibri_conf_error(k, err, errlen, "control characters are not allowed");
        o.cache_control = colibri_conf_value(k);
    }
    if ((k = colibri_conf_take(n, "charset_types")))
        o.charset_types = colibri_conf_value(k);

    char why[256] = "";
    r = add(srv, prefix, colibri_conf_value(path), &o, why, sizeof(why));
    if (r)
        return colibri_conf_error(path, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(serve_files) = {.name = "serve_files", .from_config = from_config};
