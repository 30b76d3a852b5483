/* base64.h - the standard base64 alphabet with padding (RFC 4648 §4). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* The encoded length of n bytes (without a NUL). */
#define BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Encodes n bytes of p into out (BASE64_LEN(n) + 1 bytes: NUL-terminated);
 * returns the length written. */
size_t base64_encode(const void *p, size_t n, char *out);
/* Decodes len characters (padded, canonical: unused bits zero) into out
 * (at most len / 4 * 3 bytes); returns the byte count, or -1 when s is not
 * canonical padded base64. */
ssize_t base64_decode(const char *s, size_t len, void *out);
