/* common.h - tiny helpers every module uses.
 *
 * Nothing here allocates on its own except memdup()/ALLOC_INIT(), which
 * return NULL on failure like any constructor.
 */
#pragma once

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))
#define UNUSED        __attribute__((unused))

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* A length-delimited view into memory somebody else owns. */
struct view {
    const char *p;
    size_t len;
};

#define VIEW_LIT(s) ((struct view){.p = (s), .len = sizeof(s) - 1})

static inline bool view_eq(struct view v, const char *s, size_t len)
{
    return v.len == len && memcmp(v.p, s, len) == 0;
}

/* ASCII case-insensitive equality of two byte ranges of the same length. */
bool mem_case_eq(const char *a, const char *b, size_t len);

/* How well a host name (no port, no trailing dot) matches a site name
 * (canonical: lower case; "*.example.com" a wildcard): 0 for no match,
 * SIZE_MAX for the same name, else the length of the wildcard's suffix
 * (".example.com": longer is better). A wildcard matches one label or more
 * before its suffix ("a.example.com", "a.b.example.com"), not the suffix
 * alone ("example.com"). Exact names beat wildcards, as in nginx. */
size_t host_name_match(const char *site, size_t site_len, const char *name, size_t len);

/* Reads len bytes at off, through short reads and EINTR: 0, -errno, or
 * -EIO when the file ends first. */
int pread_full(int fd, void *buf, size_t len, off_t off);

/* Opens a regular file for reading, without blocking (a FIFO would) and
 * close-on-exec, its stat in *st: the fd, or -errno: -EISDIR for a
 * directory (which root would read as empty), -EINVAL for another kind. */
struct stat;
int open_regular(const char *path, struct stat *st);

/* Writes all len bytes, through short writes and EINTR: 0 or -errno (a
 * write that takes nothing and says no error is -ENOSPC). */
int write_full(int fd, const void *buf, size_t len);

static inline void *memdup(const void *src, size_t len)
{
    void *p = malloc(len);
    return p ? memcpy(p, src, len) : NULL;
}

/* Heap objects are born fully initialised:
 *     struct foo *f = ALLOC_INIT(struct foo, {.a = 1, .b = "x"});
 * Every named field is type-checked; the rest are zero. */
#define ALLOC_INIT(type, ...) ((type *)memdup(&(type)__VA_ARGS__, sizeof(type)))
