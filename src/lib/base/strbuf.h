/* strbuf.h - a growable byte buffer.
 *
 * The buffer owns its memory (buf, cap); len bytes are used and buf[len] is
 * always a NUL, so buf can be handed to C string functions. Appends return 0
 * or -ENOMEM; on failure the buffer is unchanged. Not thread-safe: one owner.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct strbuf {
    char *buf;
    size_t len;
    size_t cap; /* bytes usable before a reallocation, not counting the NUL */
};

/* A zeroed strbuf is a valid empty buffer; init just reserves up front. */
int strbuf_init(struct strbuf *sb, size_t cap);
void strbuf_free(struct strbuf *sb);
static inline void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}
/* Empties the buffer, and frees it if it grew beyond keep bytes (for
 * buffers that are reused: one large answer must not pin its memory). */
static inline void strbuf_shrink(struct strbuf *sb, size_t keep)
{
    if (sb->cap > keep)
        strbuf_free(sb);
    else
        strbuf_reset(sb);
}

/* The slow paths of strbuf_reserve() and strbuf_append(): growing the
 * buffer (and, for the append, copying behind the new room). */
int strbuf_grow(struct strbuf *sb, size_t n);
int strbuf_append_grow(struct strbuf *sb, const void *p, size_t len);

/* Make room for at least n more bytes. Inline: most calls find the room
 * there already (cap > 0 means buf is allocated). */
static inline int strbuf_reserve(struct strbuf *sb, size_t n)
{
    if (__builtin_expect(sb->cap - sb->len >= n && sb->cap, 1))
        return 0;
    return strbuf_grow(sb, n);
}
/* Inline for the same reason: with room, a copy and the NUL. An empty
 * append never allocates (p may be NULL then). */
static inline int strbuf_append(struct strbuf *sb, const void *p, size_t len)
{
    if (__builtin_expect(sb->cap - sb->len >= len && len, 1)) {
        memcpy(sb->buf + sb->len, p, len);
        sb->len += len;
        sb->buf[sb->len] = '\0';
        return 0;
    }
    return strbuf_append_grow(sb, p, len);
}
int strbuf_append_str(struct strbuf *sb, const char *s);
int strbuf_append_char(struct strbuf *sb, char c);
int strbuf_append_u64(struct strbuf *sb, uint64_t v);
int strbuf_append_i64(struct strbuf *sb, int64_t v);
int strbuf_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap);

/* Give up ownership of the bytes: the caller frees the result. */
char *strbuf_steal(struct strbuf *sb);
