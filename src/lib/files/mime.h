/* mime.h - Content-Type by file name, from the table generated at build
 * time from /etc/mime.types (cmake/gen-mime.cmake).
 *
 * Pure lookup in a sorted constant table, any thread.
 */
#pragma once

#include <stddef.h>

/* The type for the last path component of name (len bytes): the longest
 * known extension wins ("a.tar.gz" tries "tar.gz", then "gz"), case does
 * not matter, a leading dot does not start an extension. Without a match:
 * "application/octet-stream". The result is a static string. */
const char *files_mime_type(const char *name, size_t len);
