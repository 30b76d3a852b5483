/* entry.c - building the cache entries of serve_files (see files.h).
 *
 * Small files are copied, not mmapped: a copy is a consistent snapshot when
 * the file is rewritten in place (a mapping would show the new bytes under
 * the old length and ETag, or fault past a shortened end), and it costs the
 * same one writev per request.
 *
 * When an entry expires and the file's identity (device, inode, size, mtime,
 * ctime) is unchanged, the new entry shares the old one's contents and
 * compressed copies: a hot file is compressed once per version, not once
 * per cache_for. An entry removed because inotify reported a change is
 * rebuilt from scratch (cache_invalidate: no stale entry is passed). */
#include "files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "files/compress.h"
#include "files/listing.h"
#include "files/mime.h"
#include "http/date.h"
#include "http/uri.h"

/* Takes data (freed on failure). */
static struct files_blob *blob_wrap(struct files *f, void *data, size_t len)
{
    struct files_blob *b = malloc(sizeof(*b));
    if (!b) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data = data;
    b->used = &f->mem_used;
    atomic_fetch_add_explicit(b->used, len, memory_order_relaxed);
    atomic_fetch_add_explicit(&files_cache_bytes, len, memory_order_relaxed);
    return b;
}

/* Whether n more bytes may be kept in memory. */
static bool mem_room(struct files *f, size_t n)
{
    return atomic_load_explicit(&f->mem_used, memory_order_relaxed) + n <= f->mem_max;
}

static struct files_blob *blob_ref(struct files_blob *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

static void blob_put(struct files_blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        atomic_fetch_sub_explicit(b->used, b->len, memory_order_relaxed);
        atomic_fetch_sub_explicit(&files_cache_bytes, b->len, memory_order_relaxed);
        free(b->data);
        free(b);
    }
}

static struct files_ident ident_of(const struct stat *st)
{
    return (struct files_ident){.dev = st->st_dev,
                                .ino = st->st_ino,
                                .size = st->st_size,
                                .mtim = st->st_mtim,
                                .ctim = st->st_ctim};
}

static bool ident_eq(const struct files_ident *a, const struct files_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
           a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

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
const char *const files_sibling_ext[HTTP_CODING_COUNT] = {
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
static void make_etag(struct files_variant *v, const struct files_ident *id, enum http_coding c,
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
        struct files_variant *v = &e->v[c];
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
static int read_all(struct files *f, int fd, size_t expect, size_t max, struct files_blob **out)
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

static bool not_older(const struct stat *sib, const struct files_ident *orig)
{
    return sib->st_mtim.tv_sec > orig->mtim.tv_sec ||
           (sib->st_mtim.tv_sec == orig->mtim.tv_sec && sib->st_mtim.tv_nsec >= orig->mtim.tv_nsec);
}

/* The compressed variants of an in-memory entry whose identity body is set. */
static void small_variants(struct fentry *e, const char *key, size_t len,
                           const struct fentry *stale)
{
    struct files *f = e->f;
    struct files_blob *orig = e->v[HTTP_CODING_IDENTITY].body;
    bool same = stale && stale->kind == FE_FILE && !stale->large && !e->listing &&
                ident_eq(&stale->id, &e->id);
    bool incompressible = false;

    for (size_t i = 0; i < N_ELEMENTS(compress_order); i++) {
        enum http_coding c = compress_order[i];
        struct files_variant *v = &e->v[c];
        size_t extra = extra_header_bytes(c);
        if (!(f->codings & (1u << c)) || orig->len <= extra)
            continue;
        size_t limit = orig->len - extra; /* a variant must beat the original */

        if (f->precompressed && files_sibling_ext[c] && !e->listing) {
            struct stat st;
            int fd = open_sibling(f, key, len, files_sibling_ext[c], &st);
            if (fd >= 0) {
                struct files_ident sid = ident_of(&st);
                const struct files_variant *old = same ? &stale->v[c] : NULL;
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
        if (!f->compress || incompressible || orig->len > f->compress_max)
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

/* Whether a type is worth compressing beyond small_file_max: text, and
 * the structured text formats sent as application/ or image/. Small files
 * are tried whatever their type (a failed gzip marks them incompressible),
 * which costs little; a megabyte of JPEG is not read to learn it. */
static bool compressible_type(const char *ctype)
{
    static const char *const types[] = {
        "application/javascript", "application/json", "application/xml", "application/xhtml+xml",
        "application/wasm",       "image/svg+xml",    "image/x-icon",    "image/bmp",
    };
    size_t len = strcspn(ctype, "; ");
    if (len >= 5 && !memcmp(ctype, "text/", 5))
        return true;
    if ((len > 5 && !memcmp(ctype + len - 5, "+json", 5)) ||
        (len > 4 && !memcmp(ctype + len - 4, "+xml", 4)))
        return true;
    for (size_t i = 0; i < N_ELEMENTS(types); i++)
        if (strlen(types[i]) == len && !memcmp(ctype, types[i], len))
            return true;
    return false;
}

/* The whole of fd (size bytes) into a new buffer, or NULL when it cannot
 * be read or its size is not size any more. */
static char *read_snapshot(int fd, size_t size)
{
    char *buf = malloc(size + 1);
    size_t len = 0;
    while (buf && len <= size) {
        ssize_t n = pread(fd, buf + len, size + 1 - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (buf && len != size) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

/* Compressed copies, in memory, of a file served from its fd (above
 * small_file_max, up to compress_max, of a compressible type), for the
 * codings no precompressed sibling gave. Like a small file's: each must
 * beat the original, they count against cache_memory, and a version of
 * the file is compressed once (an expired entry's copies are taken over). */
static void large_compressed(struct fentry *e, int fd, const struct fentry *stale)
{
    struct files *f = e->f;
    size_t size = (size_t)e->id.size;
    bool same = stale && stale->kind == FE_FILE && stale->large && ident_eq(&stale->id, &e->id);
    char *src = NULL;
    for (size_t i = 0; i < N_ELEMENTS(compress_order); i++) {
        enum http_coding c = compress_order[i];
        struct files_variant *v = &e->v[c];
        size_t extra = extra_header_bytes(c);
        if (!(f->codings & (1u << c)) || (e->avail & (1u << c)) || size <= extra)
            continue;
        size_t limit = size - extra;
        if (same && stale->v[c].body && !stale->v[c].from_sibling) {
            v->body = blob_ref(stale->v[c].body);
        } else if (same && !(stale->avail & (1u << c))) {
            continue; /* it did not pay last time either */
        } else {
            if (!mem_room(f, limit))
                continue;
            if (!src && !(src = read_snapshot(fd, size)))
                break;
            void *out;
            size_t out_len;
            int r = files_compress(c, src, size, limit, &out, &out_len);
            if (r == -E2BIG && c == HTTP_CODING_GZIP)
                break; /* incompressible */
            if (r == 0)
                v->body = blob_wrap(f, out, out_len);
        }
        if (v->body) {
            v->size = v->body->len;
            e->avail |= 1u << c;
        }
    }
    free(src);
}

/* Precompressed siblings of a large file, kept open beside it. */
static void large_variants(struct fentry *e, const char *key, size_t len)
{
    struct files *f = e->f;
    if (!f->precompressed)
        return;
    for (int c = 1; c < HTTP_CODING_COUNT; c++) {
        if (!files_sibling_ext[c] || !(f->codings & (1u << c)))
            continue;
        struct stat st;
        int fd = open_sibling(f, key, len, files_sibling_ext[c], &st);
        if (fd < 0)
            continue;
        if (!not_older(&st, &e->id) || (uint64_t)st.st_size >= (uint64_t)e->id.size) {
            close(fd);
            continue;
        }
        struct files_variant *v = &e->v[c];
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
    struct files_variant *id = &e->v[HTTP_CODING_IDENTITY];
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
        if (f->compress && id->size <= f->compress_max && compressible_type(e->ctype))
            large_compressed(e, fd, stale);
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
    struct files_variant *id = &e->v[HTTP_CODING_IDENTITY];
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
    /* never a name with a backslash or a NUL, nor one longer than a path
     * (404): checked here, on a miss, as a hit's key passed when its entry
     * was built */
    if (len >= PATH_MAX || http_path_has_nul_or_backslash(key, len)) {
        *err = -ENOENT;
        return NULL;
    }
    /* before anything is read: a change from now on is reported */
    files_watch_ensure(f->watch, key, len);
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
    if (e)
        files_count_miss();
    return e ? &e->base : NULL;
}

const struct cache_ops files_entry_ops = {
    .create = entry_create,
    .destroy = entry_destroy,
};
