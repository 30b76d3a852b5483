/* files.h - the inside of the serve_files module: a directory tree
 * under a URL prefix, shared by its three files:
 *   entry.c   builds cache entries: a file's bytes or fd, its compressed
 *             variants, ETags and preformatted header lines; listings;
 *   serve.c   answers a request from an entry (the HTTP layer's
 *             preconditions and ranges, multipart, directory redirects);
 *   module.c  the config section, the defaults, colibri_serve_files().
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
 * An entry lives for cache_for, or until inotify reports a change to what
 * it was built from (watch.h), whichever comes first.
 *
 * Every lookup is relative to the root directory, opened once, one path
 * component at a time with O_NOFOLLOW, so nothing outside the root can be
 * reached: not through "..", encoded dots or slashes (the path is decoded
 * and normalised before routing), nor through symbolic links. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "colibri.h"
#include "files/realpath.h"
#include "files/watch.h"
#include "http/accept_encoding.h"

/* measured (bench/RESULTS.md): from memory with writev is cheaper than
 * sendfile up to 64 KiB, by ~15% of server CPU at 32 KiB and ~4% at 64 KiB */
#define SMALL_DEFAULT (32 * 1024)
/* files up to this are compressed: larger ones of a text type too, their
 * compressed copies in memory beside the fd */
#define COMPRESS_MAX_DEFAULT (1u << 20)
#define CACHE_FOR_DEFAULT    5000
#define MEMORY_DEFAULT       (256u << 20)
#define MAX_ENTRIES          16384 /* each may hold a few fds */
#define MAX_RANGES           16
#define MULTIPART_MAX        (4u << 20) /* larger multipart answers: the whole file instead */
#define ETAG_MAX             56
#define DEFAULT_CHARSET_TYPES                                                                      \
    "text/html text/plain text/css text/javascript text/markdown text/csv text/xml"

struct files {
    int root_fd;
    char *root_abs;
    char *prefix;
    size_t prefix_len;
    bool prefix_slash; /* the prefix ends in '/' */
    char *index;
    size_t index_len;
    enum files_follow follow;
    bool listing;
    bool precompressed;
    bool compress;
    size_t small_max;
    size_t compress_max;          /* files up to this are compressed (see entry.c) */
    int64_t expires_s;            /* -1: no Expires header */
    char *cache_control;          /* "Cache-Control: ...\r\n" or NULL */
    char *charset_types;          /* " text/html text/plain " (padded with spaces) */
    unsigned codings;             /* what this instance may answer with */
    char multipart[80];           /* "multipart/byteranges; boundary=..." */
    const char *boundary;         /* inside multipart */
    struct files_listing *lister; /* with listing = true */
    struct cache *cache;
    struct files_watch *watch; /* NULL: entries live for cache_for (watch.h) */
    size_t mem_max;            /* file bytes kept in memory at most... */
    _Atomic size_t mem_used;   /* ...and now; beyond, small files go by fd */
};

/* Bytes shared by the entries of one version of a file. */
struct files_blob {
    _Atomic uint32_t refs;
    size_t len;
    char *data;           /* malloc'ed */
    _Atomic size_t *used; /* the owner's count of bytes in memory */
};

/* What tells one version of a file from another. */
struct files_ident {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

enum fe_kind {
    FE_FILE,     /* a file or a listing, in memory or behind an fd */
    FE_REDIRECT, /* a directory asked for without its slash */
};

static_assert(1 + 16 + 1 + 16 + 3 + 16 + 1 <= ETAG_MAX, "the longest ETag make_etag() writes");

struct files_variant {
    struct files_blob *body; /* in memory; NULL behind an fd */
    int fd;                  /* -1 when in memory */
    uint64_t size;
    bool from_sibling; /* a precompressed file beside the original */
    struct files_ident sibling;
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
    struct files_ident id;
    const char *ctype; /* static, or ctype_buf */
    char *hdrs;
    struct files_variant v[HTTP_CODING_COUNT];
    char ctype_buf[128];
};

/* entry.c: creates and destroys entries for the cache (ctx: the struct files). */
extern const struct cache_ops files_entry_ops;
/* stats.c: what a request defers to give its entry back (the entry's
 * release, or that and a count when metrics are on); a miss (an entry
 * built) counted; the counts offered to the metrics (the module's
 * from_config). */
void files_release_entry(void *e);
/* hidden: read with one instruction (%rip-relative, no GOT), where a
 * function's address was loaded before */
extern __attribute__((visibility("hidden"))) void (*_Atomic files_release)(void *e);
void files_count_miss(void);
void files_stats_register(void);
/* the bytes of files (and their compressed forms, listings) that every
 * serve_files cache holds in memory now: each module's mem_used, summed */
extern _Atomic uint64_t files_cache_bytes;
/* entry.c: the precompressed sibling's extension per coding (".gz"), or
 * NULL; watch.c drops a file's entry when a sibling of it changes. */
extern const char *const files_sibling_ext[HTTP_CODING_COUNT];

/* serve.c: the handler; data is the struct files. */
int files_serve(struct colibri_request *req, struct colibri_response *resp, void *data);
/* A tree with the serve_files defaults, for another module to answer
 * with files_serve() (FastCGI's static files): 0 with *out (freed with
 * files_free), or -errno with err set. */
int files_open(struct colibri_server *srv, const char *prefix, const char *root, struct files **out,
               char *err, size_t errlen);
void files_free(void *f);
