/* files.c - serve_files: static files from a directory tree.
 *
 * A request path is a cache key. On a miss the entry is built: the path is
 * resolved below the root with files_realpath_at(), opened, and then
 *  - a small file is read into memory once, with a compressed copy per
 *    coding that pays for its extra header, and goes out in one writev
 *    together with the response header;
 *  - a large file keeps its open fd (and those of precompressed siblings)
 *    and goes out as header (MSG_MORE) + sendfile;
 *  - a directory without a slash becomes a redirect; with one, its index
 *    file or a listing.
 * Each entry carries its header lines preformatted per coding, so a hit
 * costs a hash lookup, one pass over the request headers and the write.
 *
 * Small files are copied, not mmapped: a copy is a consistent snapshot when
 * the file is rewritten in place (a mapping would show the new bytes under
 * the old length and ETag, or fault past a shortened end), and it costs the
 * same one writev per request.
 *
 * When an entry expires and the file's identity (device, inode, size, mtime,
 * ctime) is unchanged, the new entry shares the old one's contents and
 * compressed copies: a hot file is compressed once per version, not once
 * per cache_for. */
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/itoa.h"
#include "base/strbuf.h"
#include "cache/cache.h"
#include "files/compress.h"
#include "files/listing.h"
#include "files/mime.h"
#include "files/realpath.h"
#include "http/accept_encoding.h"
#include "http/date.h"
#include "http/range.h"
#include "http/server.h"

/* measured (bench/RESULTS.md): from memory with writev is cheaper than
 * sendfile up to 64 KiB, by ~15% of server CPU at 32 KiB and ~4% at 64 KiB */
#define SMALL_DEFAULT     (32 * 1024)
#define CACHE_FOR_DEFAULT 5000
#define MEMORY_DEFAULT    (256u << 20)
#define MAX_ENTRIES       16384 /* each may hold a few fds */
#define MAX_RANGES        16
#define MULTIPART_MAX     (4u << 20) /* larger multipart answers: the whole file instead */
#define ETAG_MAX          56
#define DEFAULT_CHARSET_TYPES                                                                      \
    "text/html text/plain text/css text/javascript text/markdown text/csv text/xml"

struct files {
    int root_fd;
    char *root_abs;
    char *prefix;
    size_t prefix_len;
    char *index;
    size_t index_len;
    enum files_follow follow;
    bool listing;
    bool precompressed;
    bool compress;
    size_t small_max;
    int64_t expires_s;            /* -1: no Expires header */
    char *cache_control;          /* "Cache-Control: ...\r\n" or NULL */
    char *charset_types;          /* " text/html text/plain " (padded with spaces) */
    unsigned codings;             /* what this instance may answer with */
    char multipart[80];           /* "multipart/byteranges; boundary=..." */
    const char *boundary;         /* inside multipart */
    struct files_listing *lister; /* with listing = true */
    struct cache *cache;
    size_t mem_max;          /* file bytes kept in memory at most... */
    _Atomic size_t mem_used; /* ...and now; beyond, small files go by fd */
};

/* --- shared contents --------------------------------------------------------- */

/* Bytes shared by the entries of one version of a file. */
struct blob {
    _Atomic uint32_t refs;
    size_t len;
    char *data;           /* malloc'ed */
    _Atomic size_t *used; /* the owner's count of bytes in memory */
};

/* Takes data (freed on failure). */
static struct blob *blob_wrap(struct files *f, void *data, size_t len)
{
    struct blob *b = malloc(sizeof(*b));
    if (!b) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data = data;
    b->used = &f->mem_used;
    atomic_fetch_add_explicit(b->used, len, memory_order_relaxed);
    return b;
}

/* Whether n more bytes may be kept in memory. */
static bool mem_room(struct files *f, size_t n)
{
    return atomic_load_explicit(&f->mem_used, memory_order_relaxed) + n <= f->mem_max;
}

static struct blob *blob_ref(struct blob *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

static void blob_put(struct blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        atomic_fetch_sub_explicit(b->used, b->len, memory_order_relaxed);
        free(b->data);
        free(b);
    }
}

/* What tells one version of a file from another. */
struct ident {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

static struct ident ident_of(const struct stat *st)
{
    return (struct ident){.dev = st->st_dev,
                          .ino = st->st_ino,
                          .size = st->st_size,
                          .mtim = st->st_mtim,
                          .ctim = st->st_ctim};
}

static bool ident_eq(const struct ident *a, const struct ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
           a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* --- entries --------------------------------------------------------------------- */

enum fe_kind {
    FE_FILE,     /* a file or a listing, in memory or behind an fd */
    FE_REDIRECT, /* a directory asked for without its slash */
};

static_assert(1 + 16 + 1 + 16 + 3 + 16 + 1 <= ETAG_MAX, "the longest ETag make_etag() writes");

struct variant {
    struct blob *body; /* in memory; NULL behind an fd */
    int fd;            /* -1 when in memory */
    uint64_t size;
    bool from_sibling; /* a precompressed file beside the original */
    struct ident sibling;
    size_t hdr_off, hdr_len; /* header lines in fentry->hdrs */
    char etag[ETAG_MAX];
    uint8_t etag_len;
};

struct fentry {
    struct cache_entry base;
    struct files *f;
    uint8_t kind;
    bool large;
    bool listing;
    unsigned avail; /* bit per coding with a variant */
    int64_t mtime;  /* seconds */
    struct ident id;
    const char *ctype; /* static, or ctype_buf */
    char *hdrs;
    struct variant v[HTTP_CODING_COUNT];
    char ctype_buf[128];
};

static void entry_free(struct fentry *e)
{
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        blob_put(e->v[c].body);
        if (e->v[c].fd >= 0)
            close(e->v[c].fd);
    }
    free(e->hdrs);
    free(e);
}

static void entry_destroy(void *ctx, struct cache_entry *ce)
{
    (void)ctx;
    entry_free((struct fentry *)ce);
}

static struct fentry *entry_new(struct files *f, enum fe_kind kind)
{
    struct fentry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->f = f;
    e->kind = (uint8_t)kind;
    for (int c = 0; c < HTTP_CODING_COUNT; c++)
        e->v[c].fd = -1;
    return e;
}

/* --- building entries ---------------------------------------------------------- */

static const char *const etag_suffix[HTTP_CODING_COUNT] = {
    [HTTP_CODING_IDENTITY] = "", [HTTP_CODING_GZIP] = "-gz", [HTTP_CODING_DEFLATE] = "-df",
    [HTTP_CODING_BR] = "-br",    [HTTP_CODING_ZSTD] = "-zs",
};
static const char *const sibling_ext[HTTP_CODING_COUNT] = {
    [HTTP_CODING_GZIP] = ".gz",
    [HTTP_CODING_BR] = ".br",
    [HTTP_CODING_ZSTD] = ".zst",
};
/* tried in this order: an incompressible file fails gzip and is left alone */
static const enum http_coding compress_order[] = {HTTP_CODING_GZIP, HTTP_CODING_DEFLATE,
                                                  HTTP_CODING_BR, HTTP_CODING_ZSTD};

/* What a variant costs in header bytes beyond the identity answer. */
static size_t extra_header_bytes(enum http_coding c)
{
    return sizeof("Content-Encoding: \r\n") - 1 + http_coding_name(c).len + strlen(etag_suffix[c]);
}

/* Lower-case hex of v at out; returns the digits written (at most 16). */
static size_t hex(char *out, uint64_t v)
{
    char buf[16];
    size_t n = 0;
    do {
        buf[15 - n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    memcpy(out, buf + 16 - n, n);
    return n;
}

/* "<mtime ns>-<size>" in hex, quoted, plus the coding's suffix and, for a
 * sibling, its own stamp: a sibling changed alone is a new representation.
 * At most 1 + 16 + 1 + 16 + 3 + 16 + 1 bytes: ETAG_MAX. */
static void make_etag(struct variant *v, const struct ident *id, enum http_coding c,
                      uint64_t content_hash)
{
    char *p = v->etag;
    *p++ = '"';
    if (content_hash) {
        *p++ = 'h';
        p += hex(p, content_hash);
    } else {
        p += hex(p, (uint64_t)id->mtim.tv_sec * 1000000000u + (uint64_t)id->mtim.tv_nsec);
        *p++ = '-';
        p += hex(p, (uint64_t)id->size);
    }
    size_t sl = strlen(etag_suffix[c]);
    memcpy(p, etag_suffix[c], sl);
    p += sl;
    if (v->from_sibling)
        p += hex(p, (uint64_t)v->sibling.mtim.tv_sec ^ (uint64_t)v->sibling.size << 32);
    *p++ = '"';
    v->etag_len = (uint8_t)(p - v->etag);
}

static bool charset_wanted(const struct files *f, const char *mime)
{
    if (!f->charset_types)
        return false;
    size_t n = strlen(mime);
    for (const char *p = f->charset_types; (p = strstr(p, mime)); p += n)
        if (p[-1] == ' ' && p[n] == ' ')
            return true;
    return false;
}

static void set_ctype(struct fentry *e, const char *name, size_t len)
{
    const char *mime = files_mime_type(name, len);
    e->ctype = mime;
    if (charset_wanted(e->f, mime) && strlen(mime) + 16 < sizeof(e->ctype_buf)) {
        snprintf(e->ctype_buf, sizeof(e->ctype_buf), "%s; charset=utf-8", mime);
        e->ctype = e->ctype_buf;
    }
}

/* The header lines of every variant, into one buffer. */
static int build_headers(struct fentry *e)
{
    struct files *f = e->f;
    struct strbuf sb = {0};
    char lm[HTTP_DATE_LEN];
    /* reserved once, so none of the appends below can fail */
    size_t per = 160 + ETAG_MAX + (f->cache_control ? strlen(f->cache_control) : 0);
    if (strbuf_reserve(&sb, per * HTTP_CODING_COUNT) < 0)
        return -ENOMEM;
    http_date_format(e->mtime, lm);
    bool vary = (e->avail & ~1u) != 0;
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        struct variant *v = &e->v[c];
        if (!(e->avail & (1u << c)))
            continue;
        v->hdr_off = sb.len;
        if (!e->listing) {
            strbuf_append(&sb, "Last-Modified: ", 15);
            strbuf_append(&sb, lm, sizeof(lm));
            strbuf_append(&sb, "\r\n", 2);
        }
        strbuf_append(&sb, "ETag: ", 6);
        strbuf_append(&sb, v->etag, v->etag_len);
        strbuf_append(&sb, "\r\n", 2);
        if (c != HTTP_CODING_IDENTITY) {
            struct view name = http_coding_name((enum http_coding)c);
            strbuf_append(&sb, "Content-Encoding: ", 18);
            strbuf_append(&sb, name.p, name.len);
            strbuf_append(&sb, "\r\n", 2);
        }
        if (vary)
            strbuf_append_str(&sb, "Vary: Accept-Encoding\r\n");
        strbuf_append_str(&sb, "Accept-Ranges: bytes\r\n");
        if (f->cache_control)
            strbuf_append_str(&sb, f->cache_control);
        v->hdr_len = sb.len - v->hdr_off;
    }
    e->hdrs = strbuf_steal(&sb);
    return e->hdrs ? 0 : -ENOMEM;
}

/* Reads the whole of a small file (at most max bytes; more: -EFBIG). */
static int read_all(struct files *f, int fd, size_t expect, size_t max, struct blob **out)
{
    size_t cap = MIN(expect, max) + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            free(buf);
            return e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap) {
            /* it grew since fstat */
            free(buf);
            return -EFBIG;
        }
    }
    *out = blob_wrap(f, buf, len);
    return *out ? 0 : -ENOMEM;
}

/* Resolves and opens key+ext; the fd of a regular file or -errno. */
static int open_sibling(struct files *f, const char *key, size_t len, const char *ext,
                        struct stat *st)
{
    size_t elen = strlen(ext);
    char *path = malloc(2 * PATH_MAX + 1);
    if (!path)
        return -ENOMEM;
    char *canon = path + PATH_MAX;
    int fd = -ENAMETOOLONG;
    if (len + elen < PATH_MAX) {
        memcpy(path, key, len);
        memcpy(path + len, ext, elen + 1);
        ssize_t n = files_realpath_at(f->root_fd, f->root_abs, path, len + elen, f->follow, canon,
                                      PATH_MAX + 1);
        fd = n < 0 ? (int)n : files_open_resolved(f->root_fd, canon, O_RDONLY | O_NONBLOCK);
    }
    free(path);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

static bool not_older(const struct stat *sib, const struct ident *orig)
{
    return sib->st_mtim.tv_sec > orig->mtim.tv_sec ||
           (sib->st_mtim.tv_sec == orig->mtim.tv_sec && sib->st_mtim.tv_nsec >= orig->mtim.tv_nsec);
}

/* The compressed variants of an in-memory entry whose identity body is set. */
static void small_variants(struct fentry *e, const char *key, size_t len,
                           const struct fentry *stale)
{
    struct files *f = e->f;
    struct blob *orig = e->v[HTTP_CODING_IDENTITY].body;
    bool same = stale && stale->kind == FE_FILE && !stale->large && !e->listing &&
                ident_eq(&stale->id, &e->id);
    bool incompressible = false;

    for (size_t i = 0; i < N_ELEMENTS(compress_order); i++) {
        enum http_coding c = compress_order[i];
        struct variant *v = &e->v[c];
        size_t extra = extra_header_bytes(c);
        if (!(f->codings & (1u << c)) || orig->len <= extra)
            continue;
        size_t limit = orig->len - extra; /* a variant must beat the original */

        if (f->precompressed && sibling_ext[c] && !e->listing) {
            struct stat st;
            int fd = open_sibling(f, key, len, sibling_ext[c], &st);
            if (fd >= 0) {
                struct ident sid = ident_of(&st);
                const struct variant *old = same ? &stale->v[c] : NULL;
                if (old && old->from_sibling && old->body && ident_eq(&old->sibling, &sid)) {
                    v->body = blob_ref(old->body);
                } else if (not_older(&st, &e->id) && (size_t)st.st_size < limit) {
                    if (read_all(f, fd, (size_t)st.st_size, limit - 1, &v->body) < 0)
                        v->body = NULL;
                }
                close(fd);
                if (v->body) {
                    v->from_sibling = true;
                    v->sibling = sid;
                    continue;
                }
            }
        }
        if (!f->compress || incompressible)
            continue;
        if (same && stale->v[c].body && !stale->v[c].from_sibling) {
            v->body = blob_ref(stale->v[c].body);
            continue;
        }
        if (same && !(stale->avail & (1u << c)))
            continue; /* it did not pay last time either */
        if (!mem_room(f, limit))
            continue;
        void *out;
        size_t out_len;
        int r = files_compress(c, orig->data, orig->len, limit, &out, &out_len);
        if (r == -E2BIG && c == HTTP_CODING_GZIP)
            incompressible = true;
        if (r == 0)
            v->body = blob_wrap(f, out, out_len);
    }
    for (int c = 1; c < HTTP_CODING_COUNT; c++) {
        if (e->v[c].body) {
            e->v[c].size = e->v[c].body->len;
            e->avail |= 1u << c;
        }
    }
}

/* Precompressed siblings of a large file, kept open beside it. */
static void large_variants(struct fentry *e, const char *key, size_t len)
{
    struct files *f = e->f;
    if (!f->precompressed)
        return;
    for (int c = 1; c < HTTP_CODING_COUNT; c++) {
        if (!sibling_ext[c] || !(f->codings & (1u << c)))
            continue;
        struct stat st;
        int fd = open_sibling(f, key, len, sibling_ext[c], &st);
        if (fd < 0)
            continue;
        if (!not_older(&st, &e->id) || (uint64_t)st.st_size >= (uint64_t)e->id.size) {
            close(fd);
            continue;
        }
        struct variant *v = &e->v[c];
        v->fd = fd;
        v->size = (uint64_t)st.st_size;
        v->from_sibling = true;
        v->sibling = ident_of(&st);
        e->avail |= 1u << c;
    }
}

static void finish_etags(struct fentry *e, uint64_t content_hash)
{
    for (int c = 0; c < HTTP_CODING_COUNT; c++)
        if (e->avail & (1u << c))
            make_etag(&e->v[c], &e->id, (enum http_coding)c, content_hash);
}

/* An entry for the open regular file fd; name gives the type. Takes fd. */
static struct fentry *file_entry(struct files *f, int fd, const struct stat *st, const char *key,
                                 size_t len, const char *name, size_t name_len,
                                 const struct fentry *stale, int *err)
{
    struct fentry *e = entry_new(f, FE_FILE);
    if (!e) {
        close(fd);
        *err = -ENOMEM;
        return NULL;
    }
    e->id = ident_of(st);
    e->mtime = st->st_mtim.tv_sec;
    set_ctype(e, name, name_len);
    struct variant *id = &e->v[HTTP_CODING_IDENTITY];
    e->avail = 1u << HTTP_CODING_IDENTITY;

    int r = -EFBIG;
    if ((uint64_t)st->st_size <= f->small_max) {
        bool same = stale && stale->kind == FE_FILE && !stale->large && !stale->listing &&
                    ident_eq(&stale->id, &e->id);
        if (same) {
            id->body = blob_ref(stale->v[HTTP_CODING_IDENTITY].body);
            r = 0;
        } else if (mem_room(f, (size_t)st->st_size)) {
            r = read_all(f, fd, (size_t)st->st_size, f->small_max, &id->body);
        } /* else over the memory budget: served from the fd like a large file */
    }
    if (r == 0) {
        close(fd);
        id->size = id->body->len;
        small_variants(e, key, len, stale);
    } else if (r == -EFBIG) {
        e->large = true;
        id->fd = fd;
        id->size = (uint64_t)st->st_size;
        large_variants(e, key, len);
    } else {
        close(fd);
        entry_free(e);
        *err = r;
        return NULL;
    }
    finish_etags(e, 0);
    if ((r = build_headers(e)) < 0) {
        entry_free(e);
        *err = r;
        return NULL;
    }
    return e;
}

static uint64_t fnv1a(const char *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h | 1; /* never 0: 0 means "no content hash" */
}

static int open_key(struct files *f, const char *key, size_t len, struct stat *st);

struct link_ctx {
    struct files *f;
    const char *key; /* the directory's, ending in '/' or empty */
    size_t len;
};

/* A link in a listed directory is listed when a request could follow it. */
static int listed_link(void *p, const char *name, struct stat *st)
{
    struct link_ctx *lc = p;
    size_t n = strlen(name);
    char *key = malloc(lc->len + n + 1);
    if (!key)
        return -ENOMEM;
    memcpy(key, lc->key, lc->len);
    memcpy(key + lc->len, name, n + 1);
    int fd = open_key(lc->f, key, lc->len + n, st);
    free(key);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

/* A listing of the open directory fd (taken), for the URL path of key. */
static struct fentry *listing_entry(struct files *f, int fd, const char *key, size_t len,
                                    const struct fentry *stale, int *err)
{
    struct strbuf html = {0};
    char *url = malloc(f->prefix_len + len + 2);
    int r = -ENOMEM;
    if (url) {
        /* the URL path the listing is for: prefix + key, one slash between */
        size_t n = f->prefix_len;
        memcpy(url, f->prefix, n);
        if (!n || url[n - 1] != '/')
            url[n++] = '/';
        memcpy(url + n, key, len);
        url[n + len] = '\0';
        struct link_ctx lc = {.f = f, .key = key, .len = len};
        r = files_listing_render(f->lister, fd, url, n + len, listed_link, &lc, &html);
        free(url);
    }
    close(fd);
    if (r < 0) {
        strbuf_free(&html);
        *err = r;
        return NULL;
    }
    struct fentry *e = entry_new(f, FE_FILE);
    size_t hlen = html.len;
    char *data = strbuf_steal(&html);
    if (!e || !data) {
        free(data);
        free(e);
        *err = -ENOMEM;
        return NULL;
    }
    e->listing = true;
    e->ctype = "text/html; charset=utf-8";
    e->mtime = time(NULL);
    e->avail = 1u << HTTP_CODING_IDENTITY;
    struct variant *id = &e->v[HTTP_CODING_IDENTITY];
    id->body = blob_wrap(f, data, hlen);
    if (!id->body) {
        entry_free(e);
        *err = -ENOMEM;
        return NULL;
    }
    id->size = hlen;
    small_variants(e, key, len, stale);
    finish_etags(e, fnv1a(id->body->data, hlen));
    if ((r = build_headers(e)) < 0) {
        entry_free(e);
        *err = r;
        return NULL;
    }
    return e;
}

/* Resolves and opens key; the fd (file or directory) and its stat. */
static int open_key(struct files *f, const char *key, size_t len, struct stat *st)
{
    char *canon = malloc(PATH_MAX + 1);
    if (!canon)
        return -ENOMEM;
    ssize_t n =
        files_realpath_at(f->root_fd, f->root_abs, key, len, f->follow, canon, PATH_MAX + 1);
    /* O_NONBLOCK: opening a FIFO must not hang the worker; it is refused below */
    int fd = n < 0 ? (int)n : files_open_resolved(f->root_fd, canon, O_RDONLY | O_NONBLOCK);
    free(canon);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
        close(fd);
        return -ENOENT; /* devices, FIFOs, sockets are not files to serve */
    }
    return fd;
}

static struct fentry *dir_entry(struct files *f, int dfd, const char *key, size_t len,
                                const struct fentry *stale, int *err)
{
    char *ikey = malloc(len + f->index_len + 1);
    if (!ikey) {
        close(dfd);
        *err = -ENOMEM;
        return NULL;
    }
    memcpy(ikey, key, len);
    memcpy(ikey + len, f->index, f->index_len + 1);
    struct stat st;
    int fd = open_key(f, ikey, len + f->index_len, &st);
    struct fentry *e = NULL;
    if (fd >= 0 && S_ISREG(st.st_mode)) {
        close(dfd);
        e = file_entry(f, fd, &st, ikey, len + f->index_len, f->index, f->index_len, stale, err);
    } else {
        if (fd >= 0)
            close(fd);
        if (f->listing) {
            e = listing_entry(f, dfd, key, len, stale, err);
        } else {
            close(dfd);
            *err = -EACCES; /* a directory without index: 403, as nginx */
        }
    }
    free(ikey);
    return e;
}

static struct cache_entry *entry_create(void *ctx, const char *key, size_t len,
                                        const struct cache_entry *stale_ce, int *err)
{
    struct files *f = ctx;
    const struct fentry *stale = (const struct fentry *)stale_ce;
    struct stat st;
    int fd = open_key(f, key, len, &st);
    if (fd < 0) {
        *err = fd;
        return NULL;
    }
    bool slash = len && key[len - 1] == '/';
    struct fentry *e;
    if (S_ISDIR(st.st_mode)) {
        if (len && !slash) {
            close(fd);
            e = entry_new(f, FE_REDIRECT);
            if (!e)
                *err = -ENOMEM;
        } else {
            e = dir_entry(f, fd, key, len, stale, err);
        }
    } else if (slash) {
        close(fd);
        *err = -ENOTDIR;
        e = NULL;
    } else {
        const char *name = memrchr(key, '/', len);
        name = name ? name + 1 : key;
        e = file_entry(f, fd, &st, key, len, name, (size_t)(key + len - name), stale, err);
    }
    return e ? &e->base : NULL;
}

/* --- requests ------------------------------------------------------------------------ */

struct conds {
    struct view if_match, if_none_match, if_modified_since, if_unmodified_since;
    struct view range, if_range;
    struct view accept_encoding[4];
    unsigned n_ae;
    bool has_if_match, has_inm, has_ims, has_ius, has_range, has_if_range;
};

static struct view trim(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return (struct view){p, (size_t)(end - p)};
}

#define NAME_IS(p, n, lit) ((n) == sizeof(lit) - 1 && mem_case_eq((p), (lit), sizeof(lit) - 1))

/* One pass over the request's header block for the fields we use; the
 * first of each counts (Accept-Encoding lines add up). */
static void scan_headers(const struct colibri_request *req, struct conds *c)
{
    struct colibri_str raw = colibri_req_headers_raw(req);
    const char *p = raw.p, *end = raw.p + raw.len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        if (line_end > p && line_end[-1] == '\r')
            line_end--;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon) {
            size_t n = (size_t)(colon - p);
            struct view v = trim(colon + 1, line_end);
            switch (n) {
            case 5:
                if (!c->has_range && NAME_IS(p, n, "Range"))
                    c->range = v, c->has_range = true;
                break;
            case 8:
                if (!c->has_if_range && NAME_IS(p, n, "If-Range"))
                    c->if_range = v, c->has_if_range = true;
                else if (!c->has_if_match && NAME_IS(p, n, "If-Match"))
                    c->if_match = v, c->has_if_match = true;
                break;
            case 13:
                if (!c->has_inm && NAME_IS(p, n, "If-None-Match"))
                    c->if_none_match = v, c->has_inm = true;
                break;
            case 15:
                if (c->n_ae < N_ELEMENTS(c->accept_encoding) && NAME_IS(p, n, "Accept-Encoding"))
                    c->accept_encoding[c->n_ae++] = v;
                break;
            case 17:
                if (!c->has_ims && NAME_IS(p, n, "If-Modified-Since"))
                    c->if_modified_since = v, c->has_ims = true;
                break;
            case 19:
                if (!c->has_ius && NAME_IS(p, n, "If-Unmodified-Since"))
                    c->if_unmodified_since = v, c->has_ius = true;
                break;
            }
        }
        if (!eol)
            break;
        p = eol + 1;
    }
}

/* Whether the entity-tag list matches etag: "*" matches anything; weak
 * comparison ignores W/, strong comparison never matches a weak tag. */
static bool etag_match(struct view list, const char *etag, size_t elen, bool weak)
{
    const char *p = list.p, *end = list.p + list.len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p == end)
            return false;
        if (*p == '*')
            return true;
        bool is_weak = false;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
            is_weak = true;
            p += 2;
        }
        if (*p != '"')
            return false;
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return false;
        size_t n = (size_t)(q + 1 - p);
        if ((weak || !is_weak) && n == elen && !memcmp(p, etag, n))
            return true;
        p = q + 1;
    }
}

static void release(void *p)
{
    struct fentry *e = p;
    cache_put(e->f->cache, &e->base);
}

static int status_for(int err)
{
    switch (err) {
    case -EACCES:
    case -EPERM:
        return 403;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        return 503;
    case -ENOENT:
    case -ENOTDIR:
    case -ELOOP:
    case -EXDEV:
    case -ENAMETOOLONG:
    case -EINVAL:
    case -ENXIO: /* a socket, or a device without its driver */
    case -ENODEV:
        return 404;
    default:
        return 500;
    }
}

/* Bytes a path may carry as they are in a Location (RFC 3986 pchar and '/'). */
static bool path_byte_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=:@/", c));
}

/* "/dir" -> "/dir/", query kept. Built from the decoded, normalised path
 * (re-encoded), never from the raw target: "//evil.example/%2e%2e/dir" must
 * not become a protocol-relative Location. */
static int redirect(struct colibri_request *req, struct colibri_response *resp)
{
    static const char hex[] = "0123456789ABCDEF";
    struct colibri_str path = colibri_req_path(req), q = colibri_req_query_string(req);
    char *loc = malloc(path.len * 3 + q.len + 3);
    if (!loc)
        return 500;
    char *o = loc;
    for (size_t i = 0; i < path.len; i++) {
        unsigned char c = (unsigned char)path.p[i];
        if (path_byte_ok(c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '/';
    if (q.len) {
        *o++ = '?';
        memcpy(o, q.p, q.len);
        o += q.len;
    }
    *o = '\0';
    int r = colibri_resp_header(resp, "Location", loc);
    free(loc);
    return r < 0 ? 400 : 301;
}

static void add_expires(const struct files *f, struct colibri_response *resp)
{
    if (f->expires_s < 0)
        return;
    char line[HTTP_DATE_LEN + 11] = "Expires: ";
    http_date_format((int64_t)time(NULL) + f->expires_s, line + 9);
    memcpy(line + 9 + HTTP_DATE_LEN, "\r\n", 2);
    colibri_resp_header_lines(resp, line, sizeof(line));
}

/* "Content-Range: bytes a-b/N\r\n" (a < 0: "bytes * /N") into buf. */
static size_t content_range(char *buf, int64_t first, uint64_t last, uint64_t size)
{
    size_t n = 0;
    memcpy(buf, "Content-Range: bytes ", 21);
    n = 21;
    if (first < 0) {
        buf[n++] = '*';
    } else {
        n += u64_to_str((uint64_t)first, buf + n);
        buf[n++] = '-';
        n += u64_to_str(last, buf + n);
    }
    buf[n++] = '/';
    n += u64_to_str(size, buf + n);
    buf[n++] = '\r';
    buf[n++] = '\n';
    return n;
}
#define CONTENT_RANGE_MAX (21 + 3 * U64_STR_MAX + 4)

static int pread_full(int fd, char *buf, size_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO; /* shorter than its entry says */
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int multipart(struct colibri_response *resp, const struct fentry *e, const struct variant *v,
                     const struct http_range *r, unsigned n)
{
    const struct files *f = e->f;
    struct strbuf body = {0};
    int status = 206;
    /* reserved once, so none of the appends below can fail */
    size_t total = 64 + strlen(f->boundary);
    for (unsigned i = 0; i < n; i++)
        total += 64 + strlen(f->boundary) + strlen(e->ctype) + CONTENT_RANGE_MAX +
                 (size_t)(r[i].last - r[i].first + 1);
    if (strbuf_reserve(&body, total) < 0)
        return 503;
    for (unsigned i = 0; i < n; i++) {
        char cr[CONTENT_RANGE_MAX];
        strbuf_append_str(&body, "\r\n--");
        strbuf_append_str(&body, f->boundary);
        strbuf_append_str(&body, "\r\nContent-Type: ");
        strbuf_append_str(&body, e->ctype);
        strbuf_append(&body, "\r\n", 2);
        strbuf_append(&body, cr, content_range(cr, (int64_t)r[i].first, r[i].last, v->size));
        strbuf_append(&body, "\r\n", 2);
        size_t len = (size_t)(r[i].last - r[i].first + 1);
        if (v->body) {
            strbuf_append(&body, v->body->data + r[i].first, len);
        } else {
            if (pread_full(v->fd, body.buf + body.len, len, r[i].first) < 0) {
                status = 500;
                goto out_free;
            }
            body.len += len;
            body.buf[body.len] = '\0';
        }
    }
    strbuf_append_str(&body, "\r\n--");
    strbuf_append_str(&body, f->boundary);
    strbuf_append_str(&body, "--\r\n");
    colibri_resp_set_type(resp, f->multipart);
    colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
    add_expires(f, resp);
    if (colibri_resp_append(resp, body.buf, body.len) < 0)
        status = 503;
out_free:
    strbuf_free(&body);
    return status;
}

static int send_variant(struct colibri_response *resp, const struct fentry *e,
                        const struct variant *v, int status, uint64_t off, uint64_t len)
{
    if (v->body)
        return colibri_resp_send_static(resp, status, e->ctype, v->body->data + off, len);
    return colibri_resp_sendfile(resp, status, e->ctype, v->fd, (off_t)off, len);
}

static bool date_le(struct view v, int64_t t)
{
    int64_t d;
    return http_date_parse(v.p, v.len, &d) && t <= d;
}

static int serve_file(struct colibri_request *req, struct colibri_response *resp,
                      const struct fentry *e)
{
    const struct files *f = e->f;
    struct conds c = {0};
    scan_headers(req, &c);

    /* which representation: compressed ones only when a range is not asked for */
    int coding = HTTP_CODING_IDENTITY;
    if (e->avail != 1u) {
        if (!c.has_range) {
            struct http_accept_encoding ae;
            http_accept_encoding_begin(&ae);
            for (unsigned i = 0; i < c.n_ae; i++)
                http_accept_encoding_add(&ae, c.accept_encoding[i].p, c.accept_encoding[i].len);
            if (!c.n_ae) /* no field: identity only */
                ae.q[HTTP_CODING_IDENTITY] = 1000, ae.explicit_q = 1u << HTTP_CODING_IDENTITY;
            http_accept_encoding_end(&ae);
            uint64_t sizes[HTTP_CODING_COUNT];
            for (int i = 0; i < HTTP_CODING_COUNT; i++)
                sizes[i] = e->v[i].size;
            coding = http_accept_encoding_choose(&ae, e->avail, sizes);
            if (coding < 0) {
                colibri_resp_header_lines(resp, "Vary: Accept-Encoding\r\n", 23);
                return 406;
            }
        }
    }
    const struct variant *v = &e->v[coding];

    /* RFC 9110 §13.2.2: the preconditions, in their order */
    if (c.has_if_match) {
        if (!etag_match(c.if_match, v->etag, v->etag_len, false))
            return 412;
    } else if (c.has_ius && !e->listing && !date_le(c.if_unmodified_since, e->mtime)) {
        return 412;
    }
    if (c.has_inm ? etag_match(c.if_none_match, v->etag, v->etag_len, true)
                  : c.has_ims && !e->listing && date_le(c.if_modified_since, e->mtime)) {
        colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
        add_expires(f, resp);
        return 304;
    }

    if (c.has_range && colibri_req_method(req) == COLIBRI_GET) {
        bool fresh = true;
        if (c.has_if_range) {
            int64_t d;
            if (c.if_range.len && (c.if_range.p[0] == '"' || c.if_range.p[0] == 'W'))
                fresh = etag_match(c.if_range, v->etag, v->etag_len, false);
            else
                fresh = !e->listing && http_date_parse(c.if_range.p, c.if_range.len, &d) &&
                        d == e->mtime;
        }
        struct http_range r[MAX_RANGES];
        unsigned n = 0;
        enum http_range_result res =
            fresh ? http_range_parse(c.range.p, c.range.len, v->size, r, MAX_RANGES, &n)
                  : HTTP_RANGE_IGNORE;
        if (res == HTTP_RANGE_UNSATISFIABLE) {
            char cr[CONTENT_RANGE_MAX];
            colibri_resp_header_lines(resp, cr, content_range(cr, -1, 0, v->size));
            return 416;
        }
        if (res == HTTP_RANGE_OK && n == 1) {
            char cr[CONTENT_RANGE_MAX];
            colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
            colibri_resp_header_lines(resp, cr,
                                      content_range(cr, (int64_t)r[0].first, r[0].last, v->size));
            add_expires(f, resp);
            return send_variant(resp, e, v, 206, r[0].first, r[0].last - r[0].first + 1);
        }
        if (res == HTTP_RANGE_OK) {
            uint64_t total = 0;
            for (unsigned i = 0; i < n; i++)
                total += r[i].last - r[i].first + 1;
            if (total <= MULTIPART_MAX)
                return multipart(resp, e, v, r, n);
        }
    }
    colibri_resp_header_lines(resp, e->hdrs + v->hdr_off, v->hdr_len);
    add_expires(f, resp);
    return send_variant(resp, e, v, 200, 0, v->size);
}

static int serve(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct files *f = data;
    struct colibri_str path = colibri_req_path(req);
    if (path.len < f->prefix_len)
        return 404;
    const char *rel = path.p + f->prefix_len;
    size_t len = path.len - f->prefix_len;
    bool prefix_slash = f->prefix_len && f->prefix[f->prefix_len - 1] == '/';
    if (!prefix_slash) {
        if (!len) /* "/static" of "serve_files /static": the root wants its slash */
            return redirect(req, resp);
        if (rel[0] != '/')
            return 404; /* "/staticx" is not below "/static" */
    }
    while (len && rel[0] == '/')
        rel++, len--;
    /* never a name with a backslash or a NUL, nor one longer than a path */
    if (len >= PATH_MAX || memchr(rel, '\\', len) || memchr(rel, '\0', len))
        return 404;

    int err = -EIO;
    struct cache_entry *ce = cache_get(f->cache, rel, len, &err);
    if (!ce)
        return status_for(err);
    struct fentry *e = (struct fentry *)ce;
    if (colibri_defer(req, release, e) < 0)
        return 503; /* released already */
    if (e->kind == FE_REDIRECT)
        return redirect(req, resp);
    return serve_file(req, resp, e);
}

static const struct colibri_handler files_handler = {
    .name = "serve_files",
    .fn = serve,
};

/* --- set-up --------------------------------------------------------------------------- */

static const struct cache_ops entry_ops = {
    .create = entry_create,
    .destroy = entry_destroy,
};

struct files_opts {
    const char *index;
    enum files_follow follow;
    bool listing, precompressed, compress;
    uint64_t small_max;
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
    .cache_ms = CACHE_FOR_DEFAULT,
    .mem_max = MEMORY_DEFAULT,
    .expires_s = -1,
    .charset_types = DEFAULT_CHARSET_TYPES,
};

static void files_free(void *p)
{
    struct files *f = p;
    cache_free(f->cache); /* joins the pruning thread */
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

static int add(struct colibri_server *srv, const char *prefix, const char *root,
               const struct files_opts *o, char *err, size_t errlen)
{
    int r = -ENOMEM;
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

    f->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->root_fd < 0 || !(f->root_abs = realpath(root, NULL))) {
        r = -errno;
        snprintf(err, errlen, "cannot open '%s': %s", root, strerror(errno));
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
    f->cache = cache_new(&entry_ops, f, &cp);
    if (!f->cache)
        goto out_free;

    r = server_add_route(srv, prefix, &files_handler, f, files_free);
    if (r) {
        snprintf(err, errlen, "prefix '%s': %s", prefix,
                 r == -EEXIST ? "already routed" : strerror(-r));
        files_free(f);
    }
    return r;

out_free:
    files_free(f);
out_oom:
    if (r == -ENOMEM)
        snprintf(err, errlen, "out of memory");
    return r;
}

int files_route(struct colibri_server *srv, const char *prefix, const char *root, char *err,
                size_t errlen)
{
    return add(srv, prefix, root, &default_opts, err, errlen);
}

static int take_bool(struct config_node *sec, const char *key, bool *out, char *err, size_t errlen)
{
    struct config_node *n = config_take(sec, key);
    return n ? config_bool(n, out, err, errlen) : 0;
}

int files_route_from_config(struct colibri_server *srv, struct config_node *n, char *err,
                            size_t errlen)
{
    struct files_opts o = default_opts;
    struct config_node *path = config_take(n, "path"), *k;
    int r;
    if (!path)
        return config_error(n, err, errlen, "needs 'path = DIR'");
    if (n->value[0] != '/')
        return config_error(n, err, errlen, "prefix '%s' must start with '/'", n->value);
    if ((k = config_take(n, "index"))) {
        if (!k->value[0] || strchr(k->value, '/') || !strcmp(k->value, ".") ||
            !strcmp(k->value, ".."))
            return config_error(k, err, errlen, "must be a plain file name");
        o.index = k->value;
    }
    if ((r = take_bool(n, "listing", &o.listing, err, errlen)) ||
        (r = take_bool(n, "precompressed", &o.precompressed, err, errlen)) ||
        (r = take_bool(n, "compress", &o.compress, err, errlen)))
        return r;
    if ((k = config_take(n, "follow_symlinks"))) {
        if (!strcmp(k->value, "inside"))
            o.follow = FILES_FOLLOW_INSIDE;
        else if (!strcmp(k->value, "always"))
            o.follow = FILES_FOLLOW_ALWAYS;
        else if (!strcmp(k->value, "never"))
            o.follow = FILES_FOLLOW_NEVER;
        else
            return config_error(k, err, errlen, "must be inside, always or never");
    }
    if ((k = config_take(n, "cache_for"))) {
        if ((r = config_duration_ms(k, &o.cache_ms, err, errlen)))
            return r;
        if (o.cache_ms > 86400ull * 1000)
            return config_error(k, err, errlen, "must be at most a day");
    }
    if ((k = config_take(n, "small_file_max"))) {
        if ((r = config_size(k, &o.small_max, err, errlen)))
            return r;
        if (o.small_max > (64u << 20))
            return config_error(k, err, errlen, "must be at most 64M");
    }
    if ((k = config_take(n, "cache_memory")) && (r = config_size(k, &o.mem_max, err, errlen)))
        return r;
    if ((k = config_take(n, "expires"))) {
        uint64_t ms;
        if ((r = config_duration_ms(k, &ms, err, errlen)))
            return r;
        if (ms > 86400ull * 1000 * 366 * 10)
            return config_error(k, err, errlen, "must be at most ten years");
        o.expires_s = (int64_t)(ms / 1000);
    }
    if ((k = config_take(n, "cache_control"))) {
        for (const char *c = k->value; *c; c++)
            if ((unsigned char)*c < ' ' || *c == 0x7f)
                return config_error(k, err, errlen, "control characters are not allowed");
        o.cache_control = k->value;
    }
    if ((k = config_take(n, "charset_types")))
        o.charset_types = k->value;

    char why[256] = "";
    r = add(srv, n->value, path->value, &o, why, sizeof(why));
    if (r)
        return config_error(path, err, errlen, "%s", why);
    return 0;
}
