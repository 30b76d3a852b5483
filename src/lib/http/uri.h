/* uri.h - building URIs from decoded paths, for Location headers.
 * Pure functions, any thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Writes the decoded path p (len bytes) with every byte that may not
 * stand for itself in a URI path (RFC 3986: pchar and '/') percent-encoded;
 * out needs room for 3 * len bytes. Returns the bytes written (no NUL). */
size_t http_path_escape(char *out, const char *p, size_t len);

/* A Location for a redirect, malloc()ed and NUL-terminated: base as it is,
 * the decoded path escaped, a '/' when slash, and "?query" when the query
 * is not empty. NULL when out of memory. */
char *http_location(const char *base, size_t base_len, const char *path, size_t path_len,
                    bool slash, const char *query, size_t query_len);
