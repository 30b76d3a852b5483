/* stream.h - HTTP/2 streams: what h2.c's session callbacks collect for
 * a stream, and the stream as an exchange of the HTTP layer (stream.c). */
#pragma once

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/strbuf.h"
#include "http/http.h"
#include "http/request.h"
#include "rt/conn.h"

struct h2_stream;

/* Output gathered from mem_send is written once it reaches this, and at
 * the end of every turn. */
#define H2_OUT_FLUSH_AT (256 * 1024)

/* A file's bytes for one DATA frame, to leave by sendfile() right after
 * the first `at` bytes of ctx->out (its frame header ends there). */
struct h2_file_part {
    size_t at;
    int fd;
    off_t off;
    size_t len;
};
#define H2_FILE_PARTS 16

#define H2_HEAP_CLASSES 7
struct h2_heap {
    void *chunks; /* mapped, linked through their first word */
    char *bump;   /* the newest chunk's part not carved yet */
    size_t left;
    void *free[H2_HEAP_CLASSES]; /* freed blocks by class */
};

/* A connection's HTTP/2 state (in its struct http_conn, hc->h2). */
/* What a connection keeps across rests: all of it when it rests without
 * its context (rest.c: h2_away() hands it to the runtime, h2_unpack()
 * takes it back), some 200 bytes where the h2_conn is some 800. */
struct h2_kept {
    /* stream errors the client provoked (RST_STREAM sent, but NO_ERROR):
     * a bucket of H2_PROVOKED_BURST, refilled at H2_PROVOKED_RATE a
     * second; empty, the connection ends (MadeYouReset, CVE-2025-8671) */
    uint64_t provoked_ms;
    uint32_t provoked_tokens;
    /* the client's stream ids it skipped (RFC 9113 5.1.1: never to be
     * opened later), the latest H2_GAPS ranges: nghttp2 ignores a HEADERS
     * below the last id, as it cannot tell such an id from a closed one */
    int32_t max_id;
    unsigned n_gaps, next_gap;
    struct {
        int32_t lo, hi;
    } gaps[8];
    int32_t floor_id; /* the client's stream ids up to this were used before a rebuild */
    /* our SETTINGS as first sent (a reload may free c->cfg's successor's
     * values, not these) */
    uint32_t local_streams, local_window, local_head;
    /* the client's SETTINGS and its connection window for us, at rest */
    int32_t kept_window;
    uint32_t kept_settings[9]; /* by SETTINGS id - 1 */
    bool rfc9218;              /* the client sent SETTINGS_NO_RFC7540_PRIORITIES = 1 */
};

struct h2_conn {
    nghttp2_session *s;
    struct h2_heap heap; /* s's memory */
    nghttp2_mem mem;
    struct conn_ctx *ctx; /* the connection's own */
    const struct http_config *cfg;
    struct h2_stream *streams; /* every stream not freed yet */
    unsigned n_streams;
    unsigned n_running; /* streams whose request runs (in its sub-context) */
    bool runnable;      /* some stream is ready to run (h2_run_streams) */
    bool goaway;        /* sent for a stop */
    bool use_sendfile;  /* cleartext: file DATA by sendfile(), else read into ctx->out */
    /* file DATA frames gathered by the send turn (h2_send_data), written
     * with ctx->out by h2_flush(); while any wait, no stream's request may
     * end for a timeout (its file must stay open) */
    unsigned n_parts;
    bool paused; /* h2_send_data() made mem_send() return (parts are full) */
    size_t parts_bytes;
    struct h2_file_part parts[H2_FILE_PARTS];
    /* The input's frame boundaries (h2.c, track_frames()): the preface's
     * bytes still to come, the bytes left of the current frame's payload,
     * its 9-byte header as far as it came, and whether a header block is
     * open (CONTINUATION frames to come). */
    uint8_t magic_left, hd_n;
    bool in_block;
    uint32_t frame_left;
    uint8_t hd[9];
    /* An idle connection rests (h2.c, rest()): its session is deleted (s
     * is NULL) and rebuilt on the next bytes (wake()) from these. */
    bool tbl0;       /* our SETTINGS_HEADER_TABLE_SIZE = 0 was submitted */
    bool idle_tried; /* a rest was due but impossible: no timed wait until input */
    bool quiet;      /* idle for H2_REST_MS, and no stream began since */
    bool resting;    /* s was deleted by a rest (and not rebuilt yet) */
    bool away;       /* freed at rest, its state kept by the runtime (h2_away) */
    /* what a rebuilt session believes it may send on the connection beyond
     * what the client allows (it kept less than the initial 65,535 for us,
     * which no frame fed to a new session can say): data_read() holds
     * that much back */
    uint32_t send_debt;
    /* what outlives the context when the connection rests away (h2_away) */
    struct h2_kept kept;
};

/* The config a new stream reads: the worker's current one (a reload
 * changes it between two streams, as between two HTTP/1.1 requests);
 * c->cfg is the one the connection's settings came from. */
static inline const struct http_config *h2_cfg(const struct h2_conn *c)
{
    const struct http_worker *hw = conn_worker_state(c->ctx);
    return hw->cfg;
}

struct h2_stream {
    int32_t id;
    struct h2_conn *c;
    struct h2_stream *prev, *next;
    struct conn_ctx *sub; /* its request's sub-context, while it runs */
    /* the request head as it came: its fields as "name: value\r\n" lines
     * (cookies joined at the end), the pseudo-fields' values */
    struct strbuf lines, cookies, pseudo;
    size_t method_off, method_len, path_off, path_len, auth_off, auth_len;
    bool has_method, has_path, has_auth, file_fields, too_large, bad;
    /* :protocol came (RFC 8441 extended CONNECT), and said "websocket" */
    bool has_protocol, protocol_ws;
    int64_t content_length;
    bool head_done;    /* END_HEADERS: it may start */
    bool req_end;      /* END_STREAM came: the request is whole */
    bool no_body;      /* it came with the HEADERS */
    bool started;      /* its sub-context was made */
    bool handler_done; /* the exchange ended: what comes now is dropped */
    bool closed;       /* nghttp2 closed it (answered, or reset) */
    bool ready;        /* to be resumed by the connection (h2_run_streams) */
    bool want_rx;      /* its request waits for body bytes */
    bool want_tx;      /* its request waits for the answer's bytes to leave */
    bool in_wait;      /* in wait_conn(): woken by conn_wake() */
    bool wait_input;   /* in sub_wait_input(): woken with CONN_WAIT_READ */
    bool stalled;      /* the client left it waiting past request_timeout */
    /* the request body received and not handed over yet */
    struct strbuf rx;
    size_t rx_off;
    /* the answer: its head submitted, whether a body follows, the bytes
     * waiting for DATA frames, then a file's range; eof once whole */
    bool submitted, has_body, eof, deferred;
    /* the answer's END_STREAM waits for the request's: a request whose
     * body nobody read is read to its end (and dropped) first, as
     * HTTP/1.1 does, so that what the client still sends on the stream
     * is judged on an open stream; error answers end at once */
    bool hold_end;
    /* the answer's promised length not yet taken for DATA (< 0: none
     * said): at 0 its last DATA frame carries END_STREAM at once, not
     * after the handler returns (an urgent stream ends before the
     * connection turns to other streams: RFC 9218 priorities) */
    int64_t body_left;
    bool body_done; /* END_STREAM went with the body: a close is no reset */
    bool debt_wait; /* deferred for the connection's send_debt: a WINDOW_UPDATE resumes it */
    struct strbuf tx;
    size_t tx_off;
    int file_fd;
    off_t file_off;
    size_t file_left;
};

/* nghttp2's send_data_callback: a DATA frame whose bytes data_read left
 * where they are (NGHTTP2_DATA_FLAG_NO_COPY): its header and the answer's
 * bytes appended to ctx->out, a file's read straight into it, or planned
 * for sendfile() (c->parts). */
int h2_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *hd, size_t len,
                 nghttp2_data_source *src, void *user);
/* ctx->out and the planned file parts, in order. */
void h2_flush(struct h2_conn *c);

/* The session's callbacks' side. */
void h2_stream_header(struct h2_stream *st, const char *name, size_t nlen, const char *value,
                      size_t vlen);
/* Something happened that the stream's request may wait for. */
void h2_stream_ready(struct h2_stream *st);
/* Freed: not before it is closed and its request ended. */
/* A zeroed stream, maybe one a finished stream left with its buffers. */
struct h2_stream *h2_stream_alloc(void);
/* A stream's memory back to the worker's spares (or freed). */
void h2_stream_release(struct h2_stream *st);
void h2_stream_free(struct h2_stream *st);

/* The stream's head as the HTTP/1.1 parser would have made it, in ar
 * (its views point there): 0, or the status that answers it (400, 414,
 * 431, 501, 500). */
int h2_build_head(struct h2_stream *st, struct arena *ar, struct http_head *h);

/* A server session whose callbacks collect c's streams (h2.c); NULL when
 * out of memory. Used by h2_run(), and by the fuzz target alone. */
/* h2mem.c: a session's own heap (its nghttp2_mem, h2_heap_mem()), whose
 * pages all go back when the session is deleted (h2_heap_release(), after
 * nghttp2_session_del()). */
void h2_heap_mem(struct h2_heap *hp, nghttp2_mem *mem);
void h2_heap_release(struct h2_heap *hp);
/* A zeroed struct h2_conn, and its end: mapped pages of their own, for
 * the same reason (it is freed when the connection rests). */
struct h2_conn *h2_conn_alloc(void);
void h2_conn_release(struct h2_conn *c);
nghttp2_session *h2_session_new(struct h2_conn *c);
/* The same for a connection waking from a rest (no client preface). */
nghttp2_session *h2_session_rebuild(struct h2_conn *c);
/* Our SETTINGS and connection window, as the connection began: 0 or -1. */
int h2_submit_local(struct h2_conn *c);

/* rest.c: an idle connection at rest (no session) and its wake */
#define H2_REST_MS 1000 /* idle this long: a rest is asked for */
/* The input's frame boundaries, for the bytes fed to the session. */
void h2_track_frames(struct h2_conn *c, const uint8_t *p, size_t n);
/* Nothing under way: no stream, nothing to send, no frame begun. */
bool h2_idle(const struct h2_conn *c);
/* The windows are as a rebuilt session would have them. */
bool h2_windows_kept(const struct h2_conn *c);
/* What a rest needs is asked for (false: it cannot be had). */
bool h2_prepare_rest(struct h2_conn *c);
/* The session goes; what rebuilds it stays. */
void h2_rest(struct h2_conn *c);
/* After h2_rest(): the context goes too, the runtime keeping the
 * connection's struct h2_kept for the fd (conn_rest_put); c is freed and
 * run() returns CONN_KEEP. False when it cannot: the connection rests
 * keeping its context. */
bool h2_away(struct h2_conn *c);
/* The h2_conn of a connection resumed from its kept state (freed), for
 * ctx; NULL when out of memory. */
struct h2_conn *h2_unpack(struct conn_ctx *ctx, struct h2_kept *k);
/* h2mem.c: kept states come from slabs of their own, mapped per thread,
 * so that the few bytes a connection keeps for hours never pin a page of
 * the heap between other blocks (malloc_trim() could not give it back). */
struct h2_kept *h2_kept_new(void);
void h2_kept_del(struct h2_kept *k);
/* A session as the last one was, for bytes that came (false: the
 * connection ends). */
bool h2_wake(struct h2_conn *c);
/* A GOAWAY (INTERNAL_ERROR) without a session, after a failed wake. */
void h2_goaway_raw(struct h2_conn *c);

/* The connection's side: starts the streams whose head came, resumes
 * those that are ready, ends the requests that finished, frees the
 * streams done with; h2_end_streams() ends them all (the connection
 * closes). */
void h2_run_streams(struct h2_conn *c);
void h2_end_streams(struct h2_conn *c);
