/* ws.c - WebSockets after an HTTP upgrade (RFC 6455): the handshake, then
 * messages read and sent on the connection's coroutine. The frames'
 * rules are in ws_frame.c; this file does the I/O around them.
 *
 * Reading uses the connection's input buffer (ctx->in) as the HTTP layer
 * does: a frame header is parsed in place, its payload copied into the
 * message buffer and unmasked there. Between messages the coroutine waits
 * with conn_wait_fd(CONN_FD_SELF): its own socket, through its transport
 * (bytes TLS holds end the wait at once), so the wait is not
 * timed like a stalled request (waiting is not stalling, rt/conn.h); a
 * frame begun and not finished is read with conn_read() under the request
 * timeout. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base64.h"
#include "base/sha1.h"
#include "http/pubsub.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/ws_deflate.h"
#include "http/ws_frame.h"
#include "rt/conn.h"

#define MAX_MESSAGE_DEFAULT (1024 * 1024)
/* Sent bytes wait in ctx->out until this much is there, or a wait. */
#define SEND_FLUSH_AT (64 * 1024)
/* Larger payloads leave straight from the caller's buffer. */
#define SEND_COPY_MAX (16 * 1024)
/* Shorter messages are sent uncompressed: deflate would not pay. */
#define DEFLATE_MIN 32
/* How long colibri_ws_close() waits for the peer's close frame. */
#define CLOSE_WAIT_MS 1000
/* A message buffer up to this size is kept from one message to the next
 * and never refused for the worker's ws_memory_max; a larger one is freed
 * when the next read begins (an idle WebSocket holds no large buffer). */
#define MSG_KEEP (16 * 1024)

static const char GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

struct colibri_ws {
    struct colibri_request *req;
    struct conn_ctx *ctx;
    size_t max_message;
    int wait_fd; /* CONN_FD_SELF: the connection's socket, for conn_wait_fd() */
    struct ws_rx rx;
    struct ws_utf8 utf8;
    struct strbuf msg;    /* the message being read */
    struct ws_deflate *z; /* permessage-deflate, when negotiated */
    uint64_t zin_len;     /* the compressed bytes of the message being read */
    struct strbuf zout;   /* a message compressed for sending */
    uint8_t ctl[WS_CONTROL_MAX + 1];
    bool close_sent;
    int done;                /* what colibri_ws_read() returns from now on (< 0), or 0 */
    unsigned close_code;     /* colibri_ws_close_code() */
    uint64_t close_by;       /* after close_sent: the deadline for the peer's close (ms) */
    struct colibri_sub *sub; /* colibri_ws_read_sub(): between messages, wait for it too */
    struct http_worker *hw;  /* its ws_memory counts ws->msg's capacity */
    size_t memory_max;       /* ws_memory_max, as the upgrade found it */
    uint32_t idle_ms;        /* ws_idle_timeout (0: off), the same */
    bool ping_sent;          /* idle: a ping went out, nothing came since */
    uint64_t rx_at;          /* when the peer's last bytes came (or the ping left) */
};

/* --- the handshake ----------------------------------------------------------- */

static bool is_tchar_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t';
}

/* Whether the comma-separated list v holds token (case-insensitive). */
static bool has_token(struct colibri_str v, const char *token)
{
    size_t tl = strlen(token), i = 0;
    while (i < v.len) {
        while (i < v.len && is_tchar_sep(v.p[i]))
            i++;
        size_t start = i;
        while (i < v.len && !is_tchar_sep(v.p[i]))
            i++;
        if (i - start == tl && !strncasecmp(v.p + start, token, tl))
            return true;
    }
    return false;
}

/* A message buffer above MSG_KEEP is mapped rather than malloc()ed, so
 * that its pages go back to the system when it is freed: glibc keeps
 * freed heap memory up to a trim threshold that grows with the largest
 * block freed (tens of MiB per arena, whatever the bound says). */
static bool msg_mapped(const struct strbuf *m)
{
    return m->cap > MSG_KEEP;
}

/* Frees the message buffer, uncounting it. */
static void msg_free(struct colibri_ws *ws)
{
    struct strbuf *m = &ws->msg;
    ws->hw->ws_memory -= m->cap;
    if (msg_mapped(m))
        munmap(m->buf, m->cap + 1);
    else
        free(m->buf);
    *m = (struct strbuf){0};
}

/* Room for n more bytes in the message buffer m (ws->msg), counted in the
 * worker's ws_memory: 0, -ENOMEM, or -1013 when the buffer would grow
 * beyond MSG_KEEP while the worker's WebSockets hold ws_memory_max. It
 * doubles, but never beyond what the largest message needs. */
static int msg_reserve(struct strbuf *m, size_t n, void *arg)
{
    struct colibri_ws *ws = arg;
    if (m->cap && m->cap - m->len >= n)
        return 0;
    size_t want = m->len + n;
    if (want < m->len || want > SIZE_MAX / 4)
        return -ENOMEM;
    size_t cap = m->cap ? m->cap : 256;
    while (cap < want)
        cap *= 2;
    if (cap > ws->max_message + 1)
        cap = MAX(want, ws->max_message + 1);
    if (cap > MSG_KEEP) /* whole pages, the NUL included */
        cap = ((cap + 1 + 4095) & ~(size_t)4095) - 1;
    size_t *used = &ws->hw->ws_memory;
    if (cap > MSG_KEEP && *used - m->cap + cap > ws->memory_max)
        return -WS_CLOSE_TRY_AGAIN;
    char *p;
    if (cap <= MSG_KEEP) {
        if (!(p = realloc(m->buf, cap + 1)))
            return -ENOMEM;
        if (!m->buf)
            p[0] = '\0';
    } else if (msg_mapped(m)) {
        if ((p = mremap(m->buf, m->cap + 1, cap + 1, MREMAP_MAYMOVE)) == MAP_FAILED)
            return -ENOMEM;
    } else {
        p = mmap(NULL, cap + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -ENOMEM;
        if (m->buf)
            memcpy(p, m->buf, m->len + 1);
        free(m->buf);
    }
    *used = *used - m->cap + cap;
    m->buf = p;
    m->cap = cap;
    return 0;
}

static void ws_free(void *arg)
{
    struct colibri_ws *ws = arg;
    msg_free(ws);
    strbuf_free(&ws->zout);
    if (ws->z) {
        ws_deflate_free(ws->z);
        free(ws->z);
    }
    if (ws->wait_fd >= 0)
        close(ws->wait_fd);
    free(ws);
}

/* The 101 answer, into ctx->out: it leaves with the first send or wait.
 * Room for all of it is reserved first, so it goes whole or not at all:
 * 0, or -ENOMEM with nothing written. */
static int write_101(struct colibri_ws *ws, const char *accept, const char *ext)
{
    static const char head[] = "HTTP/1.1 101 Switching Protocols\r\n"
                               "Upgrade: websocket\r\n"
                               "Connection: Upgrade\r\n"
                               "Sec-WebSocket-Accept: ";
    static const char exth[] = "Sec-WebSocket-Extensions: ";
    struct strbuf *out = &ws->ctx->out;
    const struct http_config *cfg = ws->req->cfg;
    size_t alen = strlen(accept), elen = ext ? strlen(ext) : 0;
    size_t n = sizeof(head) - 1 + alen + 2 + (ext ? sizeof(exth) - 1 + elen + 2 : 0) +
               cfg->server_hdr_len + 2;
    if (strbuf_reserve(out, n) < 0)
        return -ENOMEM;
    strbuf_append(out, head, sizeof(head) - 1);
    strbuf_append(out, accept, alen);
    strbuf_append(out, "\r\n", 2);
    if (ext) {
        strbuf_append(out, exth, sizeof(exth) - 1);
        strbuf_append(out, ext, elen);
        strbuf_append(out, "\r\n", 2);
    }
    strbuf_append(out, cfg->server_hdr, cfg->server_hdr_len);
    strbuf_append(out, "\r\n", 2);
    return 0;
}

/* The HTTP/1.1 handshake's checks: 0 and the Sec-WebSocket-Accept value
 * in accept, or the status that refuses it. */
static int check_http1(struct colibri_request *req, struct colibri_response *resp, char *accept)
{
    struct colibri_str v, key;
    if (!colibri_req_header(req, "Upgrade", &v) || !has_token(v, "websocket")) {
        colibri_resp_header(resp, "Upgrade", "websocket");
        colibri_resp_header(resp, "Sec-WebSocket-Version", "13");
        return 426;
    }
    /* the parser read every Connection field already */
    if (colibri_req_method(req) != COLIBRI_GET || colibri_req_http_minor(req) < 1 ||
        colibri_req_has_body(req) || !(req->head->flags & HTTP_F_CONN_UPGRADE))
        return 400;
    if (!colibri_req_header(req, "Sec-WebSocket-Version", &v) || v.len != 2 ||
        memcmp(v.p, "13", 2)) {
        colibri_resp_header(resp, "Sec-WebSocket-Version", "13");
        return 400;
    }
    /* one key, of 16 bytes: two Key fields are no handshake */
    uint8_t raw[18];
    struct view kv;
    if (!http_header_find_sole(req->head->headers, "Sec-WebSocket-Key", 17, &kv))
        return 400;
    key = (struct colibri_str){.p = kv.p, .len = kv.len};
    if (key.len != 24 || base64_decode(key.p, key.len, raw) != 16)
        return 400;

    struct sha1 s;
    uint8_t digest[SHA1_LEN];
    sha1_init(&s);
    sha1_update(&s, key.p, key.len);
    sha1_update(&s, GUID, sizeof(GUID) - 1);
    sha1_final(&s, digest);
    base64_encode(digest, SHA1_LEN, accept);
    return 0;
}

/* An HTTP/2 stream's handshake (RFC 8441): an extended CONNECT with
 * :protocol websocket (the stream's head says HTTP_F_WS_CONNECT), no key;
 * 0, or the status that refuses it. */
static int check_http2(struct colibri_request *req, struct colibri_response *resp)
{
    struct colibri_str v;
    if (!(req->head->flags & HTTP_F_WS_CONNECT)) /* a GET: HTTP/2 has no Upgrade */
        return 400;
    if (!colibri_req_header(req, "Sec-WebSocket-Version", &v) || v.len != 2 ||
        memcmp(v.p, "13", 2)) {
        colibri_resp_header(resp, "Sec-WebSocket-Version", "13");
        return 400;
    }
    return 0;
}

int colibri_ws_upgrade(struct colibri_request *req, struct colibri_response *resp,
                       const struct colibri_ws_options *opt, struct colibri_ws **out)
{
    struct colibri_str v;
    char accept[BASE64_LEN(SHA1_LEN) + 1];
    *out = NULL;
    if (resp->streaming || resp->sent)
        return 500;
    int status = req->fr ? check_http2(req, resp) : check_http1(req, resp, accept);
    if (status)
        return status;

    struct colibri_ws *ws = calloc(1, sizeof(*ws));
    if (!ws)
        return 500;
    ws->req = req;
    ws->ctx = req->ctx;
    ws->max_message = opt && opt->max_message ? opt->max_message : MAX_MESSAGE_DEFAULT;
    ws->hw = req->hw;
    ws->memory_max = req->cfg->ws_memory_max;
    ws->idle_ms = req->cfg->ws_idle_timeout_ms;
    ws->rx_at = worker_now_ms();
    /* the connection's own socket, through its transport (rt/wait.c) */
    ws->wait_fd = CONN_FD_SELF;
    if (colibri_defer(req, ws_free, ws) < 0)
        return 500; /* it ran already */
    /* permessage-deflate, when asked for and offered acceptably */
    char ext[WS_DEFLATE_RESPONSE_MAX];
    struct ws_deflate z;
    bool deflate = opt && opt->deflate && colibri_req_header(req, "Sec-WebSocket-Extensions", &v) &&
                   ws_deflate_negotiate(v.p, v.len, &z, ext);
    if (deflate) {
        if (!(ws->z = malloc(sizeof(*ws->z))))
            return 500;
        *ws->z = z;
        ws->z->reserve = msg_reserve;
        ws->z->reserve_arg = ws;
        ws->rx.deflate = true;
    }
    /* frames are read into the input buffer, under the head's views: the
     * head moves to the arena first (headers and the access log line stay
     * readable) */
    if (http_pin_head(req) < 0)
        return 500;
    if (req->fr) {
        /* RFC 8441: a 200 opens the stream's tunnel; frames go as DATA */
        if (deflate && colibri_resp_header(resp, "Sec-WebSocket-Extensions", ext) < 0)
            return 500; /* not without it: the client would not inflate */
        req->fr->head(req, resp, 200, -1, NULL);
    } else if (write_101(ws, accept, deflate ? ext : NULL) < 0) {
        return 500;
    }
    /* the connection is the handler's now: no HTTP answer follows, and
     * none after it (a timeout while a frame is half read gets no 408) */
    resp->sent = true;
    resp->final_status = req->fr ? 200 : 101;
    req->hc->closing = true;
    req->hc->mid_request = false;
    http_metrics_stream(req, HTTP_METRICS_WS);
    *out = ws;
    return 0;
}

/* --- sending ---------------------------------------------------------------- */

static void send_frame(struct colibri_ws *ws, uint8_t opcode, uint8_t rsv, const void *p,
                       size_t len)
{
    struct conn_ctx *ctx = ws->ctx;
    uint8_t h[WS_FRAME_HDR_MAX];
    size_t hl = ws_frame_head(h, true, rsv, opcode, len);
    if (strbuf_append(&ctx->out, h, hl) < 0)
        coro_abort(ctx->coro);
    if (len > SEND_COPY_MAX) {
        conn_flush_with(ctx, p, len);
        return;
    }
    if (len && strbuf_append(&ctx->out, p, len) < 0)
        coro_abort(ctx->coro);
    if (ctx->out.len >= SEND_FLUSH_AT)
        conn_flush(ctx);
}

/* A close frame with code (none for 1005) and reason. */
static void send_close(struct colibri_ws *ws, unsigned code, const char *reason, size_t rlen)
{
    uint8_t p[WS_CONTROL_MAX];
    size_t n = 0;
    if (code != WS_CLOSE_NO_STATUS) {
        p[0] = (uint8_t)(code >> 8);
        p[1] = (uint8_t)code;
        if (rlen)
            memcpy(p + 2, reason, rlen);
        n = 2 + rlen;
    }
    send_frame(ws, WS_OP_CLOSE, 0, p, n);
    ws->close_sent = true;
    ws->close_by = worker_now_ms() + CLOSE_WAIT_MS;
}

int colibri_ws_send(struct colibri_ws *ws, enum colibri_ws_type type, const void *p, size_t len)
{
    if (type != COLIBRI_WS_TEXT && type != COLIBRI_WS_BINARY)
        return -EINVAL;
    if (ws->done || ws->close_sent)
        return -EPIPE;
    if (ws->z && len >= DEFLATE_MIN) {
        if (ws_deflate_compress(ws->z, p, len, &ws->zout) < 0)
            return -ENOMEM;
        send_frame(ws, (uint8_t)type, WS_RSV1, ws->zout.buf, ws->zout.len);
        if (ws->zout.cap > SEND_FLUSH_AT)
            strbuf_free(&ws->zout); /* one large message must not pin its memory */
        return 0;
    }
    send_frame(ws, (uint8_t)type, 0, p, len);
    return 0;
}

/* --- reading ------------------------------------------------------------------ */

/* The WebSocket is over: colibri_ws_read() returns r from now on. */
static int end(struct colibri_ws *ws, int r, unsigned code)
{
    ws->done = r;
    if (!ws->close_code)
        ws->close_code = code;
    conn_flush(ws->ctx);
    return r;
}

/* A violation: close with code at once (RFC 6455 §7.1.7: no waiting for
 * the peer's close). */
static int fail(struct colibri_ws *ws, unsigned code)
{
    if (!ws->close_sent)
        send_close(ws, code, NULL, 0);
    return end(ws, -EPIPE, code);
}

/* The peer sent something: it is alive. */
static inline void heard(struct colibri_ws *ws)
{
    ws->rx_at = worker_now_ms();
    ws->ping_sent = false;
}

/* More input into ctx->in. idle: nothing of a frame has come yet, so the
 * wait has no time limit (after close_sent: the close deadline). 0, or
 * -ECONNRESET (end of stream), -ECANCELED (stopping), -ETIMEDOUT; idle
 * with ws->sub set, COLIBRI_WS_SUB when the subscription has something. */
static int more(struct colibri_ws *ws, bool idle)
{
    struct conn_ctx *ctx = ws->ctx;
    if (ctx->in_pos == ctx->in_len)
        ctx->in_pos = ctx->in_len = 0;
    else if (ctx->in_len == ctx->in_cap || ctx->in_cap - ctx->in_pos < WS_FRAME_HDR_MAX)
        conn_compact(ctx);
    if (!idle && !ws->close_sent) {
        ssize_t n = conn_read(ctx, false);
        if (n <= 0)
            return -ECONNRESET;
        heard(ws);
        return 0;
    }
    /* the socket is edge-triggered: a read that left room drained it, so
     * a new read would only say EAGAIN (the wait below is level-triggered
     * and sees bytes that came since) */
    bool try_read = ctx->last_read_full;
    for (;;) {
        if (try_read) {
            ssize_t n = conn_read(ctx, true);
            if (n > 0) {
                heard(ws);
                return 0;
            }
            if (n == 0)
                return -ECONNRESET;
        }
        try_read = true;
        int timeout = -1;
        if (ws->close_sent) {
            uint64_t now = worker_now_ms();
            if (now >= ws->close_by)
                return -ETIMEDOUT;
            timeout = (int)(ws->close_by - now);
        } else if (ws->idle_ms) {
            /* silent for idle_ms: a ping; silent as long again: gone */
            uint64_t now = worker_now_ms();
            if (now >= ws->rx_at + ws->idle_ms) {
                if (ws->ping_sent)
                    return -ETIMEDOUT;
                send_frame(ws, WS_OP_PING, 0, NULL, 0);
                ws->ping_sent = true;
                ws->rx_at = now;
            }
            timeout = (int)(ws->rx_at + ws->idle_ms - now);
        }
        conn_flush(ctx);
        int r = ws->sub && !ws->close_sent
                    ? ps_wait_fd(ws->sub, ws->wait_fd, CONN_WAIT_READ, timeout)
                    : conn_wait_fd(ctx, ws->wait_fd, CONN_WAIT_READ, timeout);
        if (r == -ETIMEDOUT && !ws->close_sent)
            continue; /* the idle timeout: the ping, or the end, above */
        if (r < 0)
            return r;
        if (r & CONN_WOKEN)
            return COLIBRI_WS_SUB;
    }
}

/* A message refused for its size (1009) or for the worker's memory
 * (1013): not a violation, so the WebSocket closes as a normal close
 * does. The close goes now, the message's buffer is let go, and what the
 * peer still sends is read and dropped until its close or the close
 * deadline: closing at once with its bytes unread would make the kernel
 * reset the connection, and the peer could lose the close frame. */
static void refuse(struct colibri_ws *ws, unsigned code)
{
    if (!ws->close_sent)
        send_close(ws, code, NULL, 0);
    if (!ws->close_code)
        ws->close_code = code;
    msg_free(ws);
}

/* The input ended or the wait was cut short. */
static int io_end(struct colibri_ws *ws, int r)
{
    /* stopping, or silent through the idle timeout and a ping */
    if ((r == -ECANCELED || r == -ETIMEDOUT) && !ws->close_sent) {
        send_close(ws, WS_CLOSE_GOING_AWAY, NULL, 0);
        return end(ws, r, WS_CLOSE_GOING_AWAY);
    }
    if (ws->close_sent)
        return end(ws, -EPIPE, ws->close_code);
    return end(ws, -ECONNRESET, WS_CLOSE_ABNORMAL);
}

/* A control frame's payload, unmasked, into ws->ctl (its length is at
 * most WS_CONTROL_MAX, checked by the parser). */
static int read_control(struct colibri_ws *ws, const struct ws_frame *f)
{
    struct conn_ctx *ctx = ws->ctx;
    size_t got = 0;
    while (got < f->len) {
        size_t avail = ctx->in_len - ctx->in_pos;
        if (!avail) {
            int r = more(ws, false);
            if (r)
                return r;
            continue;
        }
        size_t n = MIN(avail, (size_t)f->len - got);
        memcpy(ws->ctl + got, ctx->in + ctx->in_pos, n);
        ws_unmask(ws->ctl + got, n, f->mask, got);
        ctx->in_pos += n;
        got += n;
    }
    return 0;
}

/* A data frame's payload, taken as it arrives: unmasked, inflated when the
 * message is compressed, appended to ws->msg; a text message's new bytes
 * are checked at once, so that bad UTF-8 fails the frame at its first bad
 * byte rather than at its last (RFC 6455 §8.1). While closing, payloads
 * are only counted and dropped. 0, or the end of the WebSocket. */
static int read_data(struct colibri_ws *ws, const struct ws_frame *f)
{
    struct conn_ctx *ctx = ws->ctx;
    struct strbuf *msg = &ws->msg;
    bool keep = !ws->close_sent, text = keep && ws->rx.opcode == WS_OP_TEXT;
    bool inflate = keep && ws->rx.compressed;
    uint64_t got = 0;
    while (got < f->len) {
        size_t avail = ctx->in_len - ctx->in_pos;
        if (!avail) {
            int r = more(ws, false);
            if (r)
                return io_end(ws, r);
            continue;
        }
        size_t n = (size_t)MIN((uint64_t)avail, f->len - got);
        uint8_t *p = (uint8_t *)ctx->in + ctx->in_pos;
        size_t before = msg->len;
        if (inflate) {
            /* unmasked in place: the input buffer is done with these bytes */
            ws_unmask(p, n, f->mask, got);
            int r = ws_deflate_inflate_piece(ws->z, p, n, ws->max_message, msg);
            if (r == -WS_CLOSE_TOO_BIG || r == -WS_CLOSE_TRY_AGAIN) {
                refuse(ws, (unsigned)-r);
                keep = text = inflate = false;
            } else if (r < 0) {
                return fail(ws, r == -ENOMEM ? WS_CLOSE_INTERNAL : (unsigned)-r);
            }
        } else if (keep) {
            int r = msg_reserve(msg, n, ws);
            if (r == -WS_CLOSE_TRY_AGAIN) {
                refuse(ws, (unsigned)-r);
                keep = text = false;
                continue; /* these bytes again, dropped */
            }
            if (r < 0)
                return fail(ws, r == -ENOMEM ? WS_CLOSE_INTERNAL : (unsigned)-r);
            memcpy(msg->buf + before, p, n);
            msg->len += n;
            msg->buf[msg->len] = '\0';
            ws_unmask((uint8_t *)msg->buf + before, n, f->mask, got);
        }
        ctx->in_pos += n;
        got += n;
        if (text && !ws_utf8_feed(&ws->utf8, (const uint8_t *)msg->buf + before, msg->len - before))
            return fail(ws, WS_CLOSE_BAD_DATA);
    }
    return 0;
}

/* A control frame, its payload in ws->ctl: 0 to go on reading, or the
 * end of the WebSocket. */
static int control(struct colibri_ws *ws, const struct ws_frame *f)
{
    size_t n = (size_t)f->len;
    if (f->opcode == WS_OP_PING) {
        if (!ws->close_sent)
            send_frame(ws, WS_OP_PONG, 0, ws->ctl, n);
        return 0;
    }
    if (f->opcode == WS_OP_PONG)
        return 0;
    uint16_t code;
    int r = ws_close_parse(ws->ctl, n, &code);
    if (r < 0)
        return fail(ws, (unsigned)-r);
    if (!ws->close_sent) /* the peer began: echo its code (§5.5.1) */
        send_close(ws, code, NULL, 0);
    ws->close_code = code;
    return end(ws, -EPIPE, code);
}

int colibri_ws_read(struct colibri_ws *ws, struct colibri_ws_msg *msg)
{
    struct conn_ctx *ctx = ws->ctx;
    if (ws->done)
        return ws->done;
    if (ws->msg.cap > MSG_KEEP)
        msg_free(ws); /* the last message was large: not kept while idle */
    strbuf_reset(&ws->msg);
    ws->zin_len = 0;
    ws->utf8 = (struct ws_utf8){0};
    for (;;) {
        struct ws_frame f;
        ssize_t h;
        while ((h = ws_frame_parse((const uint8_t *)ctx->in + ctx->in_pos,
                                   ctx->in_len - ctx->in_pos, true, &f)) == 0) {
            int r = more(ws, ctx->in_len == ctx->in_pos && !ws->rx.in_message);
            if (r == COLIBRI_WS_SUB)
                return r; /* nothing of a message was read */
            if (r)
                return io_end(ws, r);
        }
        if (h < 0)
            return fail(ws, (unsigned)-h);
        int r = ws_rx_frame(&ws->rx, &f);
        if (r < 0)
            return fail(ws, (unsigned)-r);
        ctx->in_pos += (size_t)h;

        if (f.opcode & 0x8) {
            if ((r = read_control(ws, &f)) < 0)
                return io_end(ws, r);
            if ((r = control(ws, &f)) < 0)
                return r;
            continue;
        }
        /* a compressed message is held to the limit by its compressed
         * size too (the inflated one is checked as it grows) */
        uint64_t sofar = ws->rx.compressed ? ws->zin_len : ws->msg.len;
        if (f.len > ws->max_message - sofar && !ws->close_sent)
            refuse(ws, WS_CLOSE_TOO_BIG); /* its payload is dropped below */
        if (ws->rx.compressed)
            ws->zin_len += f.len;
        if ((r = read_data(ws, &f)) < 0)
            return r;
        conn_progress(ctx);   /* a frame came whole: the next gets its own timeout */
        if (ws->close_sent) { /* closing: messages are dropped */
            if (f.fin)
                strbuf_reset(&ws->msg);
            continue;
        }
        if (!f.fin)
            continue;
        if (ws->rx.compressed) {
            size_t before = ws->msg.len;
            if ((r = ws_deflate_inflate_end(ws->z, ws->max_message, &ws->msg)) < 0)
                return fail(ws, r == -ENOMEM ? WS_CLOSE_INTERNAL : (unsigned)-r);
            if (ws->rx.opcode == WS_OP_TEXT &&
                !ws_utf8_feed(&ws->utf8, (const uint8_t *)ws->msg.buf + before,
                              ws->msg.len - before))
                return fail(ws, WS_CLOSE_BAD_DATA);
        }
        if (ws->rx.opcode == WS_OP_TEXT && !ws_utf8_complete(&ws->utf8))
            return fail(ws, WS_CLOSE_BAD_DATA);
        msg->type = ws->rx.opcode == WS_OP_TEXT ? COLIBRI_WS_TEXT : COLIBRI_WS_BINARY;
        msg->p = ws->msg.buf ? ws->msg.buf : "";
        msg->len = ws->msg.len;
        return 0;
    }
}

int colibri_ws_read_sub(struct colibri_ws *ws, struct colibri_sub *sub, struct colibri_ws_msg *msg)
{
    ws->sub = sub;
    int r = colibri_ws_read(ws, msg);
    ws->sub = NULL;
    return r;
}

int colibri_ws_close(struct colibri_ws *ws, uint16_t code, const char *reason)
{
    size_t rlen = reason ? strlen(reason) : 0;
    if (!ws_close_code_ok(code) || rlen > WS_CONTROL_MAX - 2 ||
        !ws_utf8_valid((const uint8_t *)reason, rlen))
        return -EINVAL;
    if (ws->done || ws->close_sent)
        return -EPIPE;
    send_close(ws, code, reason, rlen);
    ws->close_code = code;
    struct colibri_ws_msg m;
    while (colibri_ws_read(ws, &m) == 0)
        ; /* until the peer's close, or the deadline */
    return 0;
}

unsigned colibri_ws_close_code(const struct colibri_ws *ws)
{
    return ws->close_code;
}
