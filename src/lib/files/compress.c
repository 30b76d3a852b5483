/* compress.c - the codings behind files_compress(). */
#include "files/compress.h"

#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

#ifdef HAVE_BROTLI
#include <brotli/encode.h>
#endif
#ifdef HAVE_ZSTD
#include <zstd.h>
#include <zstd_errors.h>
#endif

#define ZLIB_LEVEL   6
#define BROTLI_LEVEL 5 /* 10 and 11 take ten times longer and 16 KiB more stack */
#define ZSTD_LEVEL   9

unsigned files_codings_built(void)
{
    unsigned m = 1u << HTTP_CODING_IDENTITY | 1u << HTTP_CODING_GZIP | 1u << HTTP_CODING_DEFLATE;
#ifdef HAVE_BROTLI
    m |= 1u << HTTP_CODING_BR;
#endif
#ifdef HAVE_ZSTD
    m |= 1u << HTTP_CODING_ZSTD;
#endif
    return m;
}

/* windowBits 31: gzip wrapper; 15: zlib wrapper. */
static int zlib_compress(int window_bits, const void *src, size_t len, unsigned char *out,
                         size_t cap, size_t *out_len)
{
    z_stream z = {0};
    if (deflateInit2(&z, ZLIB_LEVEL, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    return r == Z_STREAM_END ? 0 : -E2BIG;
}

#ifdef HAVE_BROTLI
static int brotli_compress(const void *src, size_t len, unsigned char *out, size_t cap,
                           size_t *out_len)
{
    int lgwin = BROTLI_MIN_WINDOW_BITS;
    while (lgwin < BROTLI_MAX_WINDOW_BITS && ((size_t)1 << lgwin) < len)
        lgwin++;
    *out_len = cap;
    if (!BrotliEncoderCompress(BROTLI_LEVEL, lgwin, BROTLI_MODE_GENERIC, len, src, out_len, out))
        return -E2BIG; /* also when it does not fit in cap */
    return 0;
}
#else
static int brotli_compress(const void *src, size_t len, unsigned char *out, size_t cap,
                           size_t *out_len)
{
    (void)src, (void)len, (void)out, (void)cap, (void)out_len;
    return -ENOTSUP;
}
#endif

#ifdef HAVE_ZSTD
static int zstd_compress(const void *src, size_t len, unsigned char *out, size_t cap,
                         size_t *out_len)
{
    /* an explicit context: ZSTD_compress() would put one on the stack */
    ZSTD_CCtx *cx = ZSTD_createCCtx();
    if (!cx)
        return -ENOMEM;
    size_t n = ZSTD_compressCCtx(cx, out, cap, src, len, ZSTD_LEVEL);
    ZSTD_freeCCtx(cx);
    if (ZSTD_isError(n))
        return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -E2BIG;
    *out_len = n;
    return 0;
}
#else
static int zstd_compress(const void *src, size_t len, unsigned char *out, size_t cap,
                         size_t *out_len)
{
    (void)src, (void)len, (void)out, (void)cap, (void)out_len;
    return -ENOTSUP;
}
#endif

int files_compress(enum http_coding coding, const void *src, size_t len, size_t limit, void **out,
                   size_t *out_len)
{
    if (!(files_codings_built() & (1u << coding)) || coding == HTTP_CODING_IDENTITY)
        return -ENOTSUP;
    if (limit <= 1)
        return -E2BIG;
    size_t cap = limit - 1; /* the result must be shorter than limit */
    unsigned char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    size_t n = 0;
    int r;
    switch (coding) {
    case HTTP_CODING_GZIP:
        r = zlib_compress(31, src, len, buf, cap, &n);
        break;
    case HTTP_CODING_DEFLATE:
        r = zlib_compress(15, src, len, buf, cap, &n);
        break;
    case HTTP_CODING_BR:
        r = brotli_compress(src, len, buf, cap, &n);
        break;
    case HTTP_CODING_ZSTD:
        r = zstd_compress(src, len, buf, cap, &n);
        break;
    default:
        r = -ENOTSUP;
        break;
    }
    if (r) {
        free(buf);
        return r;
    }
    *out = buf;
    *out_len = n;
    return 0;
}
