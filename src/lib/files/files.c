/* files.c - serve_files: static files from a directory tree.
 *
 * This is the first, plain version: every request walks the path with
 * openat(O_NOFOLLOW), stats and sends the file. Caching of open files and
 * small-file mappings, compression, ranges and conditional requests, and
 * listings come with the static-files work. */
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http/server.h"

struct files {
    int root_fd;
    size_t prefix_len;
    char *index;
};

static const struct {
    const char *ext, *mime;
} mime_types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css"},
    {"js", "text/javascript"},
    {"mjs", "text/javascript"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"ico", "image/vnd.microsoft.icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"woff2", "font/woff2"},
};

static const char *mime_for(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < N_ELEMENTS(mime_types); i++)
            if (!strcasecmp(dot + 1, mime_types[i].ext))
                return mime_types[i].mime;
    return "application/octet-stream";
}

static void close_fd(void *p)
{
    close((int)(intptr_t)p);
}

/* Opens rel (no leading slash, no "." or ".." segments: the request path is
 * normalised) below dirfd, refusing every symbolic link. */
static int open_beneath(int dirfd, const char *rel)
{
    int fd = dup(dirfd);
    if (fd < 0)
        return -errno;
    char comp[256];
    while (*rel) {
        const char *slash = strchr(rel, '/');
        size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
        if (len >= sizeof(comp)) {
            close(fd);
            return -ENAMETOOLONG;
        }
        memcpy(comp, rel, len);
        comp[len] = '\0';
        rel += len + (slash ? 1 : 0);
        int next = openat(fd, comp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (*rel ? O_DIRECTORY : 0));
        int e = errno;
        close(fd);
        if (next < 0)
            return -e;
        fd = next;
    }
    return fd;
}

static int status_for(int e)
{
    switch (e) {
    case -ENOENT:
    case -ENOTDIR:
    case -ELOOP: /* a symbolic link: never followed */
    case -ENAMETOOLONG:
        return 404;
    case -EACCES:
    case -EPERM:
        return 403;
    default:
        return 500;
    }
}

static int serve(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct files *f = data;
    struct colibri_str path = colibri_req_path(req);
    const char *rel = path.p + MIN(f->prefix_len, path.len);
    while (*rel == '/')
        rel++;

    int fd = open_beneath(f->root_fd, rel);
    if (fd < 0)
        return status_for(fd);
    colibri_defer(req, close_fd, (void *)(intptr_t)fd);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return 500;
    const char *name = rel;
    if (S_ISDIR(st.st_mode)) {
        if (path.p[path.len - 1] != '/') {
            struct colibri_str q = colibri_req_query_string(req);
            char *loc = malloc(path.len + q.len + 3);
            if (!loc)
                return 500;
            colibri_defer(req, free, loc);
            sprintf(loc, "%.*s/%s%.*s", (int)path.len, path.p, q.len ? "?" : "", (int)q.len, q.p);
            colibri_resp_header(resp, "Location", loc);
            return 301;
        }
        int ifd = openat(fd, f->index, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (ifd < 0)
            return errno == ENOENT ? 403 : status_for(-errno);
        colibri_defer(req, close_fd, (void *)(intptr_t)ifd);
        if (fstat(ifd, &st) < 0)
            return 500;
        fd = ifd;
        name = f->index;
    }
    if (!S_ISREG(st.st_mode))
        return 404;
    char lm[64];
    struct tm tm;
    gmtime_r(&st.st_mtime, &tm);
    strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    colibri_resp_header(resp, "Last-Modified", lm);
    return colibri_resp_sendfile(resp, 200, mime_for(name), fd, 0, (size_t)st.st_size);
}

static const struct colibri_handler files_handler = {
    .name = "serve_files",
    .fn = serve,
};

static void files_free(void *p)
{
    struct files *f = p;
    close(f->root_fd);
    free(f->index);
    free(f);
}

static int add(struct colibri_server *srv, const char *prefix, const char *root, const char *index,
               char *err, size_t errlen)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", root, strerror(errno));
        return -errno;
    }
    struct files *f = ALLOC_INIT(
        struct files, {.root_fd = fd, .prefix_len = strlen(prefix), .index = strdup(index)});
    if (!f || !f->index) {
        close(fd);
        free(f);
        return -ENOMEM;
    }
    int r = server_add_route(srv, prefix, &files_handler, f, files_free);
    if (r) {
        snprintf(err, errlen, "prefix '%s': %s", prefix,
                 r == -EEXIST ? "already routed" : strerror(-r));
        files_free(f);
    }
    return r;
}

int files_route(struct colibri_server *srv, const char *prefix, const char *root, char *err,
                size_t errlen)
{
    return add(srv, prefix, root, "index.html", err, errlen);
}

int files_route_from_config(struct colibri_server *srv, struct config_node *n, char *err,
                            size_t errlen)
{
    struct config_node *path = config_take(n, "path"), *index = config_take(n, "index");
    if (!path)
        return config_error(n, err, errlen, "needs 'path = DIR'");
    if (n->value[0] != '/')
        return config_error(n, err, errlen, "prefix '%s' must start with '/'", n->value);
    if (index && (!index->value[0] || strchr(index->value, '/')))
        return config_error(index, err, errlen, "must be a plain file name");
    char why[256];
    int r = add(srv, n->value, path->value, index ? index->value : "index.html", why, sizeof(why));
    if (r)
        return config_error(path, err, errlen, "%s", why);
    return 0;
}
