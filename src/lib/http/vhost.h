/* vhost.h - virtual hosts: which site answers a request, chosen by its
 * host (the Host field, or the authority of an absolute-form target, as
 * the parser leaves it in head->host).
 *
 * A host matches a site's name case-insensitively, without its port and
 * without one trailing dot: "Example.COM.:8080" is the site
 * "example.com"; an IP literal keeps its brackets ("[::1]:8080" is
 * "[::1]"). A host no site names, or none at all (HTTP/1.0), goes to the
 * default site. Pure functions: no I/O, no allocation. */
#pragma once

#include <stddef.h>

#include "base/common.h"

struct trie;
struct http_log;
struct http_filters;

/* A name of a named site, as the server hands them to the HTTP layer. */
struct http_vhost {
    const char *name; /* canonical: lower case, no port, no trailing dot */
    size_t len;
    const struct trie *routes;
    const struct http_log *log;         /* its site's access log (NULL: none) */
    const struct http_filters *filters; /* its site's filters (http/filter.h); NULL: none */
};

/* The name part of a host the parser accepted: without ":port" and
 * without one trailing dot. Case is left alone; a view into host. */
struct view http_host_name(struct view host);

/* The site whose canonical name matches host (a raw head->host: port and
 * case are ignored; an exact name first, else the longest wildcard), or
 * NULL. */
const struct http_vhost *http_vhost_find(const struct http_vhost *v, unsigned n, struct view host);

/* A site name from the config in canonical form (lower case, one trailing
 * dot dropped) into out, which holds cap bytes (NUL-terminated): its
 * length, or -1 with *why saying what is wrong. A name is labels of
 * letters, digits and '-' joined by '.', at most 253 bytes, or an IPv6
 * literal in brackets, or "*." before such a name (a wildcard: every name
 * ending with ".example.com" that no exact name takes); it has no port. */
int http_vhost_canon(const char *name, char *out, size_t cap, const char **why);
