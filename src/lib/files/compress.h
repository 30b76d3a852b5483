/* compress.h - one-shot compression of small files for serve_files.
 *
 * gzip and deflate (zlib format, as the "deflate" coding means) through
 * zlib; br and zstd through libbrotlienc and libzstd when the build has
 * them (HAVE_BROTLI, HAVE_ZSTD). Levels are chosen for files of a few KiB
 * compressed once per version of a file on a worker: fast enough to do in
 * the request that misses the cache, and with a stack footprint (under
 * 8 KiB) that fits a connection coroutine.
 *
 * Pure functions, any thread.
 */
#pragma once

#include <stddef.h>

#include "http/accept_encoding.h"

/* Bit (1 << coding) for every coding this build can produce. */
unsigned files_codings_built(void);

/* Compresses the len bytes at src with coding into a malloc'ed buffer
 * (*out, *out_len) when the result is shorter than limit bytes. Returns 0,
 * -E2BIG when it is not shorter, -ENOTSUP for a coding not built, -ENOMEM. */
int files_compress(enum http_coding coding, const void *src, size_t len, size_t limit, void **out,
                   size_t *out_len);
