/* files.h - the serve_files module: a directory tree under a URL prefix.
 *
 * Every lookup is relative to the root directory, opened once, one path
 * component at a time with O_NOFOLLOW, so nothing outside the root can be
 * reached: not through "..", encoded dots or slashes (the path is decoded
 * and normalised before routing), nor through symbolic links. */
#pragma once

#include <stddef.h>

struct colibri_server;
struct config_node;

/* "serve_files PREFIX { path = DIR ... }"; errors name file and line. */
int files_route_from_config(struct colibri_server *srv, struct config_node *n, char *err,
                            size_t errlen);
/* The same by hand: serve root at prefix with the defaults. */
int files_route(struct colibri_server *srv, const char *prefix, const char *root, char *err,
                size_t errlen);
