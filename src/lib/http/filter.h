/* filter.h - filters: code that runs around the routes at a phase
 * (colibri.h, "filters"): before routing (rewrite), before the handler
 * (access, auth, limits), on the answer's head (headers). The server
 * collects them per site in config order; the HTTP layer runs them.
 *
 * With no filter in a site, the request pays one test of the site's
 * filters (dispatch) and one of req->head_filters (the head writer); its
 * filter state lives in padding of struct colibri_request and, once a
 * site has filters, in the connection's (hc->filters, hc->user). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/common.h"
#include "colibri.h"

struct colibri_request;
struct colibri_response;

/* One filter: its phase, its path prefix (whole segments, as routes) and
 * what it runs. */
struct http_filter {
    struct colibri_filter f;
    char *prefix;
    size_t prefix_len;
    void *data;
    void (*free_data)(void *);
    int line; /* the config line that made it (0: a program's call) */
};

/* A site's filters: sorted by phase, in the order they were added within
 * a phase; first[p] .. first[p + 1] are those of phase p. */
struct http_filters {
    struct http_filter *v;
    unsigned n;
    unsigned first[COLIBRI_PHASE_COUNT + 1];
};

/* Internal rewrites a request may go through; one more is a 500. */
#define HTTP_REWRITES_MAX 10

/* Whether path is under prefix: equal, or prefix followed by '/', or
 * prefix ending in '/'. */
bool http_prefix_match(const char *prefix, size_t plen, const char *path, size_t len);

/* Adds f (copied) to fs at its phase; 0 or -ENOMEM (data is then the
 * caller's). */
int http_filters_add(struct http_filters *fs, const struct colibri_filter *f, const char *prefix,
                     void *data, void (*free_data)(void *), int line);
void http_filters_free(struct http_filters *fs);

/* The rewrite phase, then the access phase, for a request whose path is
 * decoded: 0 to go on to the route (req->path may have changed), or the
 * status to answer with. */
int http_filters_before(struct colibri_request *req, struct colibri_response *resp,
                        const struct http_filters *fs);
/* The headers phase, just before the head is written: the type the
 * answer goes out with (mime, or what a filter made it). */
const char *http_filters_head(struct colibri_request *req, struct colibri_response *resp,
                              const char *mime);
