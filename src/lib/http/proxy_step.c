/* proxy_step.c - the PROXY header on a listener that requires it: read and
 * parsed (http/proxy.h) before the first request, its client address kept
 * for the connection's life, also while it idles without a context. */
#include <stdlib.h>
#include <string.h>

#include "http/proxy.h"
#include "http/request.h"
#include "rt/conn.h"

bool http_proxy_step(struct conn_ctx *ctx)
{
    struct http_worker *hw = conn_worker_state(ctx);
    const struct http_config *cfg = hw->cfg;
    if (!cfg->proxy_protocol || conn_listener(ctx) >= cfg->n_proxy_protocol ||
        !cfg->proxy_protocol[conn_listener(ctx)])
        return true;
    if (!ctx->fresh)
        return true; /* the header came on the first run, or it closed */
    /* Nothing answers until the header is whole: a timeout closes without
     * a 408 (mid_request stays false) and so does a graceful stop. */
    for (;;) {
        struct proxy_hdr ph;
        enum proxy_result r = proxy_parse(ctx->in + ctx->in_pos, ctx->in_len - ctx->in_pos, &ph);
        if (r == PROXY_DONE) {
            /* LOCAL, UNKNOWN: the connection's own address stays */
            if (!ph.local) {
                struct conn_peer peer = conn_peer_from(&ph.src);
                if (peer.family)
                    conn_set_peer(ctx, &peer);
            }
            ctx->in_pos += ph.len;
            conn_progress(ctx); /* the request gets its own timeout */
            /* A balancer sends the header as the connection opens and the
             * request right behind it, often in a second segment: wait for
             * it here, within request_timeout, rather than idle. A graceful
             * stop closes idle connections at once, and one closed between
             * the two segments would fail a request the balancer already
             * sent (between_requests() says no while this waits; a timeout
             * still closes without a word). */
            if (ctx->in_pos == ctx->in_len) {
                struct http_conn *hc = conn_state(ctx);
                hc->after_proxy_hdr = true;
                ssize_t n = conn_read(ctx, false);
                hc->after_proxy_hdr = false;
                if (n <= 0)
                    return false; /* closed after the header: a health check */
            }
            return true;
        }
        if (r == PROXY_BAD || ctx->in_len == ctx->in_cap)
            return false;
        if (conn_read(ctx, false) <= 0)
            return false;
    }
}
