/* rest.c - an idle HTTP/2 connection at rest, without its nghttp2
 * session, and its wake (h2.c's loop calls these; see the comment below
 * and ARCHITECTURE.md section 9). */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/log.h"
#include "http/metrics.h"
#include "http2/stream.h"

/* --- an idle connection at rest -------------------------------------------
 *
 * An nghttp2 server session is some 25 KB, most of an idle connection's
 * memory. A connection idle for H2_REST_MS (no stream, nothing to send, its
 * input at a frame boundary) gives it up and keeps only what rebuilds it:
 * the client's SETTINGS, its connection window for us, the last stream id.
 * HPACK is what cannot be rebuilt from numbers, so first, both ways:
 * - the client's encoder: our SETTINGS_HEADER_TABLE_SIZE = 0, and the rest
 *   only once the client acknowledged it (RFC 7541 4.2: its next header
 *   block then begins with a table size update to 0, which empties the
 *   table our next session's decoder has never seen);
 * - our encoder: the new session's is empty, and the client's decoder is
 *   made empty too: the state fed to the new session carries the client's
 *   SETTINGS_HEADER_TABLE_SIZE as 0 then its own value, and the encoder
 *   signals the smallest size since its last block (RFC 7541 4.2), so our
 *   next header block begins with size updates to 0 and back.
 * The receive window is granted in full before the rest (a WINDOW_UPDATE
 * for what was consumed and not yet updated), so that the new session's
 * view of it is the client's. The new session is built by feeding it the
 * frames of that state (wake()); what it answers to them is dropped once
 * its frames are checked to be those answers. */

/* Keeps count of where the input's frames begin (the bytes fed to the
 * session): a rest must not cut a frame, nor a header block. */
void h2_track_frames(struct h2_conn *c, const uint8_t *p, size_t n)
{
    if (c->magic_left) {
        size_t k = MIN(n, (size_t)c->magic_left);
        c->magic_left = (uint8_t)(c->magic_left - k);
        p += k;
        n -= k;
    }
    while (n) {
        if (c->frame_left) {
            size_t k = MIN(n, (size_t)c->frame_left);
            c->frame_left -= (uint32_t)k;
            p += k;
            n -= k;
            continue;
        }
        size_t k = MIN(n, (size_t)(9 - c->hd_n));
        memcpy(c->hd + c->hd_n, p, k);
        c->hd_n = (uint8_t)(c->hd_n + k);
        p += k;
        n -= k;
        if (c->hd_n < 9)
            break;
        c->hd_n = 0;
        c->frame_left = (uint32_t)c->hd[0] << 16 | (uint32_t)c->hd[1] << 8 | c->hd[2];
        uint8_t type = c->hd[3];
        if (type == NGHTTP2_HEADERS || type == NGHTTP2_PUSH_PROMISE || type == NGHTTP2_CONTINUATION)
            c->in_block = !(c->hd[4] & NGHTTP2_FLAG_END_HEADERS);
    }
}

/* Nothing under way: no stream, nothing to send, no frame begun. */
bool h2_idle(const struct h2_conn *c)
{
    return !c->streams && !c->goaway && !c->magic_left && !c->hd_n && !c->frame_left &&
           !c->in_block && !c->ctx->out.len && !c->n_parts && !nghttp2_session_want_write(c->s);
}

/* The windows as a rebuilt session would have them: the receive window
 * granted in full, the client's for us at least the initial one (a
 * WINDOW_UPDATE can only add to it). */
bool h2_windows_kept(const struct h2_conn *c)
{
    return nghttp2_session_get_remote_window_size(c->s) >= (int32_t)c->send_debt &&
           nghttp2_session_get_effective_recv_data_length(c->s) == 0 &&
           nghttp2_session_get_effective_local_window_size(c->s) == (int32_t)c->kept.local_window;
}

/* Idle for H2_REST_MS: what a rest needs is asked for. False when it
 * cannot be had (the client keeps our window for it low). */
bool h2_prepare_rest(struct h2_conn *c)
{
    nghttp2_session *s = c->s;
    int32_t owed = nghttp2_session_get_effective_recv_data_length(s);
    if (owed > 0 && nghttp2_submit_window_update(s, NGHTTP2_FLAG_NONE, 0, owed))
        return false;
    if (!c->tbl0) {
        nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};
        if (nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &iv, 1))
            return false;
        c->tbl0 = true;
    }
    return true;
}

/* The session goes; what rebuilds it stays. */
void h2_rest(struct h2_conn *c)
{
    nghttp2_session *s = c->s;
    for (int32_t id = NGHTTP2_SETTINGS_HEADER_TABLE_SIZE;
         id <= NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE; id++)
        c->kept.kept_settings[id - 1] =
            nghttp2_session_get_remote_settings(s, (nghttp2_settings_id)id);
    c->kept.kept_settings[NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL - 1] =
        nghttp2_session_get_remote_settings(s, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL) == 1;
    c->kept.kept_window = nghttp2_session_get_remote_window_size(s) - (int32_t)c->send_debt;
    c->kept.floor_id = MAX(c->kept.max_id, nghttp2_session_get_last_proc_stream_id(s));
    nghttp2_session_del(s);
    h2_heap_release(&c->heap); /* every page of the session at once */
    c->s = NULL;
    c->resting = true;
    c->quiet = false;
    /* the connection's own HTTP/1.1 scratch (its preface was parsed as a
     * request line): its streams have theirs */
    struct http_conn *hc = conn_state(c->ctx);
    arena_free(&hc->arena);
    strbuf_free(&hc->body);
    strbuf_free(&hc->hdrs);
    strbuf_free(&hc->reqbody);
    struct http_worker *hw = conn_worker_state(c->ctx);
    /* the session's blocks are free, but glibc keeps their pages until a
     * trim: the worker's next tick (once a second at most) */
    hw->trim_wanted = true;
    conn_want_tick(c->ctx);
    http_metrics_begin(hw, HTTP_METRICS_H2_REST);
}

bool h2_away(struct h2_conn *c)
{
    struct conn_ctx *ctx = c->ctx;
    struct h2_kept *k = h2_kept_new();
    if (!k)
        return false;
    *k = c->kept;
    if (!conn_rest_put(ctx, k)) {
        h2_kept_del(k);
        return false;
    }
    /* h2.c's conn_free(), the coroutine's defer, frees c: not as a close */
    c->resting = false;
    c->away = true;
    return true;
}

struct h2_conn *h2_unpack(struct conn_ctx *ctx, struct h2_kept *k)
{
    struct h2_conn *c = h2_conn_alloc();
    if (!c)
        return NULL;
    *c = (struct h2_conn){
        .ctx = ctx,
        .cfg = ((const struct http_worker *)conn_worker_state(ctx))->cfg,
        .use_sendfile = !conn_is_secure(ctx),
        .tbl0 = true,
        .resting = true,
        .kept = *k,
    };
    h2_kept_del(k);
    return c;
}

void h2_drop(struct http_worker *hw, void *state)
{
    http_metrics_end(hw, HTTP_METRICS_H2_REST);
    http_metrics_end(hw, HTTP_METRICS_H2_CONN);
    h2_kept_del(state);
}

static size_t put_frame_hd(uint8_t *p, size_t len, uint8_t type, uint8_t flags)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    memset(p + 5, 0, 4); /* stream 0 */
    return 9;
}

static size_t put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

static size_t put_setting(uint8_t *p, uint16_t id, uint32_t v)
{
    p[0] = (uint8_t)(id >> 8);
    p[1] = (uint8_t)id;
    return 2 + put_u32(p + 2, v);
}

/* Takes what a session being rebuilt sends in answer to the state it is
 * given, counting its frames: our SETTINGS, SETTINGS ACKs, WINDOW_UPDATEs
 * of the connection. False for anything else, or an error. */
static bool drop_rebuild_output(nghttp2_session *s, unsigned *settings, unsigned *acks,
                                unsigned *updates)
{
    for (;;) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(s, &d);
        if (n <= 0)
            return n == 0;
        for (size_t off = 0; off < (size_t)n;) {
            const uint8_t *h = d + off;
            if ((size_t)n - off < 9)
                return false;
            size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
            if ((h[5] & 0x7f) | h[6] | h[7] | h[8] || (size_t)n - off - 9 < len)
                return false; /* not the connection's, or not whole */
            if (h[3] == NGHTTP2_SETTINGS && (h[4] & NGHTTP2_FLAG_ACK) && !len)
                ++*acks;
            else if (h[3] == NGHTTP2_SETTINGS && !(h[4] & NGHTTP2_FLAG_ACK))
                ++*settings;
            else if (h[3] == NGHTTP2_WINDOW_UPDATE && len == 4)
                ++*updates;
            else
                return false;
            off += 9 + len;
        }
    }
}

/* Bytes came for a connection at rest: a session as the last one was,
 * for them. False when that failed (out of memory): the connection ends. */
bool h2_wake(struct h2_conn *c)
{
    c->resting = false;
    http_metrics_end(conn_worker_state(c->ctx), HTTP_METRICS_H2_REST);
    nghttp2_session *s = h2_session_rebuild(c);
    if (!s)
        return false;
    c->s = s;
    unsigned settings = 0, acks = 0, updates = 0;
    /* our SETTINGS and window, as sent when the connection began */
    if (h2_submit_local(c) < 0 || !drop_rebuild_output(s, &settings, &acks, &updates))
        goto fail;
    /* the client's: its SETTINGS (the table size first 0: our encoder's
     * next block empties the client's decoder table), its window for us;
     * then its ACK of ours */
    uint8_t in[3 * 9 + 6 + 8 * 6 + 9 + 4];
    size_t n = put_frame_hd(in, 6, NGHTTP2_SETTINGS, 0);
    n += put_setting(in + n, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0);
    size_t at = n;
    n += 9;
    for (uint16_t id = NGHTTP2_SETTINGS_HEADER_TABLE_SIZE;
         id <= NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE; id++)
        n += put_setting(in + n, id, c->kept.kept_settings[id - 1]);
    if (c->kept.kept_settings[NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL - 1])
        n += put_setting(in + n, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1);
    if (c->kept.rfc9218)
        n += put_setting(in + n, NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1);
    put_frame_hd(in + at, n - at - 9, NGHTTP2_SETTINGS, 0);
    c->send_debt = c->kept.kept_window < NGHTTP2_INITIAL_WINDOW_SIZE
                       ? (uint32_t)(NGHTTP2_INITIAL_WINDOW_SIZE - c->kept.kept_window)
                       : 0;
    if (c->kept.kept_window > NGHTTP2_INITIAL_WINDOW_SIZE) {
        n += put_frame_hd(in + n, 4, NGHTTP2_WINDOW_UPDATE, 0);
        n += put_u32(in + n, (uint32_t)(c->kept.kept_window - NGHTTP2_INITIAL_WINDOW_SIZE));
    }
    n += put_frame_hd(in + n, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK);
    if (nghttp2_session_mem_recv(s, in, n) != (ssize_t)n ||
        !drop_rebuild_output(s, &settings, &acks, &updates) || settings != 1 || acks != 2 ||
        updates > 1 ||
        nghttp2_session_get_remote_window_size(s) - (int32_t)c->send_debt != c->kept.kept_window ||
        nghttp2_session_get_effective_local_window_size(s) != (int32_t)c->kept.local_window)
        goto fail;
    /* the client may use its table again */
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096};
    if (nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &iv, 1))
        goto fail;
    c->tbl0 = false;
    return true;
fail:
    LOG_LIMITED(LOG_WARN, "http2: a connection's session could not be rebuilt: closed");
    nghttp2_session_del(s);
    h2_heap_release(&c->heap);
    c->s = NULL;
    return false;
}

/* A GOAWAY (INTERNAL_ERROR) without a session, after a failed wake(). */
void h2_goaway_raw(struct h2_conn *c)
{
    uint8_t f[9 + 8];
    size_t n = put_frame_hd(f, 8, NGHTTP2_GOAWAY, 0);
    n += put_u32(f + n, (uint32_t)c->kept.floor_id);
    n += put_u32(f + n, NGHTTP2_INTERNAL_ERROR);
    if (strbuf_append(&c->ctx->out, f, n) < 0)
        strbuf_reset(&c->ctx->out);
}
