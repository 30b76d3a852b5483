/* fastcgi.h - what the FastCGI handler and its config reader share: a route. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "gateway/upstream.h"

struct fcgi_param {
    char *name, *value;
};

struct fcgi_route {
    struct gw_upstream *up;
    bool own_up;
    char *prefix;
    size_t prefix_len;
    char *root; /* realpath, no trailing slash */
    size_t root_len;
    char *index;
    char *front; /* front_controller, or NULL */
    bool static_files;
    struct files *files; /* for static, or NULL */
    struct fcgi_param *params;
    unsigned n_params;
    int connect_ms, read_ms, send_ms;
    uint64_t id; /* unique in the process: the key of its lookups in scache */
};

/* The route's handler (fastcgi.c); its data is the route. */
int fcgi_handler(struct colibri_request *req, struct colibri_response *resp, void *data);
/* Whether the path names a PHP script (".php" at its end). */
bool fcgi_is_php(const char *p, size_t len);
