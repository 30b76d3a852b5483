/* uri.h - building URIs from decoded paths, for Location headers.
 * Pure functions, any thread. */
#pragma once

#include <stddef.h>

/* Writes the decoded path p (len bytes) with every byte that may not
 * stand for itself in a URI path (RFC 3986: pchar and '/') percent-encoded;
 * out needs room for 3 * len bytes. Returns the bytes written (no NUL). */
size_t http_path_escape(char *out, const char *p, size_t len);
