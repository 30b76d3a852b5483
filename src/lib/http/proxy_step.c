/* proxy_step.c - the PROXY header on a listener that requires it: read and
 * parsed (http/proxy.h) before the first request, its client address kept
 * for the connection's life, also while it idles without a context. */
#include <stdlib.h>
#include <string.h>

#include "http/proxy.h"
#include "http/request.h"
#include "rt/worker.h"

/* The worker's slot for fd, grown as needed; NULL when out of memory. */
static union http_addr *peer_slot(struct http_worker *hw, int fd)
{
    if ((uint32_t)fd >= hw->n_peers) {
        uint32_t n = hw->n_peers ? hw->n_peers : 64;
        while (n <= (uint32_t)fd)
            n *= 2;
        union http_addr *p = realloc(hw->peers, n * sizeof(*p));
        if (!p)
            return NULL;
        memset(p + hw->n_peers, 0, (n - hw->n_peers) * sizeof(*p));
        hw->peers = p;
        hw->n_peers = n;
    }
    return &hw->peers[fd];
}

bool http_proxy_step(struct conn_ctx *ctx, struct http_conn *hc)
{
    struct http_worker *hw = conn_worker_state(ctx);
    const struct http_config *cfg = hw->cfg;
    if (!cfg->proxy_protocol || ctx->listener >= cfg->n_proxy_protocol ||
        !cfg->proxy_protocol[ctx->listener])
        return true;
    if (!ctx->fresh) { /* the header came on an earlier run */
        if ((uint32_t)ctx->fd >= hw->n_peers)
            return false;
        hc->peer = hw->peers[ctx->fd];
        hc->proxied = true;
        return true;
    }
    /* Nothing answers until the header is whole: a timeout closes without
     * a 408 (mid_request stays false) and so does a graceful stop. */
    for (;;) {
        struct proxy_hdr ph;
        enum proxy_result r = proxy_parse(ctx->in + ctx->in_pos, ctx->in_len - ctx->in_pos, &ph);
        if (r == PROXY_DONE) {
            union http_addr *slot = peer_slot(hw, ctx->fd);
            if (!slot)
                return false;
            memset(slot, 0, sizeof(*slot));
            if (ph.local)
                slot->sa.sa_family = AF_UNSPEC;
            else
                memcpy(slot, &ph.src,
                       ph.src.ss_family == AF_INET ? sizeof(slot->in) : sizeof(slot->in6));
            hc->peer = *slot;
            hc->proxied = true;
            ctx->in_pos += ph.len;
            conn_progress(ctx); /* the request gets its own timeout */
            return true;
        }
        if (r == PROXY_BAD || ctx->in_len == ctx->in_cap)
            return false;
        if (conn_read(ctx, false) <= 0)
            return false;
    }
}
