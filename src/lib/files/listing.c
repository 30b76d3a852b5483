/* listing.c - read, sort and render a directory. */
#include "files/listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/err.h"
#include "base/itoa.h"
#include "base/strbuf.h"
#include "base/coro.h"
#include "tpl/tpl.h"

#define MAX_ROWS 100000 /* a bigger directory is listed only in part */

struct row {
    const char *name;
    const char *href;
    char size[U64_STR_MAX + 1];
    char mtime[24]; /* "2024-01-31 23:59:59" */
    bool dir;
};

struct page {
    const char *path;
    bool parent;
    struct row *rows;
    size_t n_rows;
};

static void gen_rows(struct coro *coro, const void *parent, void *item)
{
    const struct page *p = parent;
    for (size_t i = 0; i < p->n_rows; i++) {
        *(struct row *)item = p->rows[i];
        coro_yield(coro, 0);
    }
}

static const struct tpl_desc row_desc =
    TPL_DESC(struct row, TPL_FIELD(struct row, name), TPL_FIELD(struct row, href),
             TPL_FIELD(struct row, size), TPL_FIELD(struct row, mtime), TPL_FIELD(struct row, dir));
static const struct tpl_desc page_desc =
    TPL_DESC(struct page, TPL_FIELD(struct page, path), TPL_FIELD(struct page, parent),
             TPL_SEQ("rows", gen_rows, row_desc));

static const char page_template[] =
    "<!DOCTYPE html>\n"
    "<html>\n<head>\n<meta charset=\"utf-8\">\n<title>Index of {{path}}</title>\n"
    "<style>body{font-family:sans-serif}td{padding:0 1em 0 0}td.s{text-align:right}</style>\n"
    "</head>\n<body>\n<h1>Index of {{path}}</h1>\n<table>\n"
    "<tr><th>Name</th><th>Size</th><th>Last modified (UTC)</th></tr>\n"
    "{{#parent}}\n"
    "<tr><td><a href=\"../\">../</a></td><td class=\"s\">-</td><td></td></tr>\n"
    "{{/parent}}\n"
    "{{#rows}}\n"
    "<tr><td><a href=\"{{href}}\">{{name}}{{#dir}}/{{/dir}}</a></td>"
    "<td class=\"s\">{{size}}</td><td>{{mtime}}</td></tr>\n"
    "{{/rows}}\n"
    "</table>\n</body>\n</html>\n";

struct files_listing {
    struct tpl *tpl;
};

struct files_listing *files_listing_new(char *err, size_t errlen)
{
    struct tpl *t = tpl_compile("listing", page_template, sizeof(page_template) - 1, &page_desc,
                                NULL, err, errlen);
    if (!t)
        return NULL;
    struct files_listing *l = ALLOC_INIT(struct files_listing, {.tpl = t});
    if (!l) {
        tpl_free(t);
        err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    }
    return l;
}

void files_listing_free(struct files_listing *l)
{
    if (!l)
        return;
    tpl_free(l->tpl);
    free(l);
}

static int by_dir_then_name(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* The name percent-encoded as a relative link ("./" never needed: ':' is
 * encoded, so no name reads as a scheme), with a slash for a directory. */
static char *href_of(const char *name, bool dir)
{
    size_t n = strlen(name);
    char *h = malloc(3 * n + 2), *o = h;
    if (!h)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (unreserved(c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = "0123456789ABCDEF"[c >> 4];
            *o++ = "0123456789ABCDEF"[c & 15];
        }
    }
    if (dir)
        *o++ = '/';
    *o = '\0';
    return h;
}

static void fill_row(struct row *r, const struct stat *st)
{
    r->dir = S_ISDIR(st->st_mode);
    if (r->dir) {
        strcpy(r->size, "-");
    } else {
        size_t n = u64_to_str((uint64_t)st->st_size, r->size);
        r->size[n] = '\0';
    }
    struct tm tm;
    time_t t = st->st_mtim.tv_sec;
    if (gmtime_r(&t, &tm))
        strftime(r->mtime, sizeof(r->mtime), "%Y-%m-%d %H:%M:%S", &tm);
}

static void free_rows(struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)rows[i].name);
        free((char *)rows[i].href);
    }
    free(rows);
}

/* Reads the visible entries of dfd into *rows, sorted. */
static int read_rows(int dfd, files_link_fn *link_fn, void *link_ctx, struct row **out,
                     size_t *n_out)
{
    int fd = dup(dfd);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = -errno;
        close(fd);
        return e;
    }
    rewinddir(d); /* a dup shares the offset of a directory read before */
    struct row *rows = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    while (n < MAX_ROWS && (errno = 0, de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and hidden files */
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISLNK(st.st_mode) && (!link_fn || link_fn(link_ctx, de->d_name, &st) < 0))
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct row *nr = realloc(rows, ncap * sizeof(*nr));
            if (!nr) {
                r = -ENOMEM;
                break;
            }
            rows = nr;
            cap = ncap;
        }
        struct row *row = &rows[n];
        *row = (struct row){0};
        fill_row(row, &st);
        row->name = strdup(de->d_name);
        row->href = href_of(de->d_name, row->dir);
        n++;
        if (!row->name || !row->href) {
            r = -ENOMEM;
            break;
        }
    }
    if (!r && errno && n < MAX_ROWS)
        r = -errno;
    closedir(d);
    if (r) {
        free_rows(rows, n);
        return r;
    }
    if (n)
        qsort(rows, n, sizeof(*rows), by_dir_then_name);
    *out = rows;
    *n_out = n;
    return 0;
}

int files_listing_render(const struct files_listing *l, int dfd, const char *url, size_t len,
                         files_link_fn *link_fn, void *link_ctx, struct strbuf *out)
{
    struct row *rows = NULL;
    size_t n = 0;
    int r = read_rows(dfd, link_fn, link_ctx, &rows, &n);
    if (r)
        return r;
    char *path = strndup(url, len);
    if (!path) {
        free_rows(rows, n);
        return -ENOMEM;
    }
    struct page page = {
        .path = path,
        .parent = !(len == 1 && url[0] == '/'),
        .rows = rows,
        .n_rows = n,
    };
    char err[128];
    r = tpl_render(l->tpl, &page, out, NULL, err, sizeof(err));
    free(path);
    free_rows(rows, n);
    return r;
}
