/* proxy.h - what the proxy's handler and its config reader share: a route. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "gateway/upstream.h"

struct proxy_route {
    struct gw_upstream *up;
    bool own_up; /* a group made from a "to" address: freed with the route */
    size_t prefix_len;
    bool strip_prefix, preserve_host, websocket, buffer_response;
    int connect_ms, read_ms, send_ms;
    unsigned retries;
    uint64_t max_body;
};

/* The route's handler (proxy.c); its data is the route. */
int proxy_handler(struct colibri_request *req, struct colibri_response *resp, void *data);
