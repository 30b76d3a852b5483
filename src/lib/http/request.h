/* request.h - one request and its response inside the HTTP layer: the
 * structs behind the public struct colibri_request and colibri_response,
 * and the per-connection and per-worker state they live in. Shared by the
 * files of http/ only; handlers see the accessors of colibri.h.
 *
 * A request belongs to the connection coroutine that parsed it and lives
 * until its handler returned and the answer was written. */
#pragma once

#include <netinet/in.h>
#include <time.h>

#include "base/arena.h"
#include "base/strbuf.h"
#include "http/access_log.h"
#include "http/chunked.h"
#include "http/fields.h"
#include "http/http.h"
#include "http/metrics.h"
#include "http/uri.h"

/* A worker thread's HTTP state (the runtime's proto_state). */
struct http_worker {
    const struct http_config *cfg;
    /* memory was freed in bulk (an HTTP/2 session at rest): the next tick
     * gives glibc's free pages back (malloc_trim) */
    bool trim_wanted;
    time_t date_time;  /* the second date_hdr shows */
    char date_hdr[48]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
    /* "HTTP/1.1 200 OK\r\n" and date_hdr in one piece, for the same second:
     * most answers start with it, as one copy */
    char ok_date[64];
    time_t ok_date_time;
    /* ok_date, Server and Content-Type in one piece, for the same second,
     * config and type (see ok_head in response.c); reset when the worker
     * takes a new config, so a config at a freed one's address is not
     * mistaken for it */
    char ok_head[256];
    size_t ok_head_len;
    size_t ok_mime_off, ok_mime_len; /* where the type's text is in ok_head */
    const char *ok_mime_fixed;       /* the type's address when its bytes cannot change, or NULL */
    uint64_t ok_cl;                  /* the length in the Content-Length line; UINT64_MAX: none */
    size_t ok_cl_len;                /* of that line, behind the others */
    time_t ok_head_time;
    const struct http_config *ok_head_cfg;
    struct tpl_scratch *scratch;
    /* access log lines not written yet, and how many, by file slot
     * (struct http_log_files); slots below log_hi may hold some */
    struct http_log_buf {
        struct strbuf b;
        uint32_t lines;
    } log[HTTP_LOG_FILES_MAX];
    unsigned log_hi;
    time_t log_time;   /* the second log_date shows */
    char log_date[40]; /* "22/Nov/2026:13:40:00 +0000" */
    size_t log_date_len;
    size_t ws_memory;    /* what this worker's WebSocket message buffers hold (ws.c) */
    time_t log_iso_time; /* the second log_iso shows */
    char log_iso[40];    /* "2026-11-22T13:40:00+00:00" */
    size_t log_iso_len;
    struct http_metrics metrics;      /* this worker's counters (http/metrics.h) */
    struct http_worker *metrics_next; /* the workers a scrape sums */
    struct conn_peer log_peer;        /* the last client logged, and its address as text */
    char log_peer_str[48];
    size_t log_peer_len;
};

/* BODY_TO_END: framed by its transport (an HTTP/2 stream without a
 * Content-Length): it ends where conn_read() says 0 */
enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_TO_END };

struct colibri_request;
struct colibri_response;
/* The framing of an exchange that is not HTTP/1.1 on the connection's own
 * socket: an HTTP/2 stream (http2/). NULL in req->fr for HTTP/1.1, whose
 * framing is written inline here (the fast path). Everything else of the
 * exchange is the same code: its body bytes, both ways, go through the
 * runtime's I/O on req->ctx, which for a stream is a sub-context whose
 * I/O the framing implements (rt/conn.h, struct conn_sub_ops). */
struct http_framing {
    /* The head of the answer: status, type (NULL: none), length (< 0:
     * none, a stream), resp->lines and hc->hdrs; after it the body
     * follows through the sub-context's I/O, unless the answer has none
     * (HEAD, 1xx, 204, 304, or length 0), which ends the exchange. */
    void (*head)(struct colibri_request *req, struct colibri_response *resp, int status,
                 int64_t content_length, const char *mime);
};

/* How a request body is being read, in the connection's state rather than
 * the request's, so a request without a body does not pay for zeroing it:
 * reset when a request with a body begins. */
struct http_body_state {
    /* its pace: when its first read began (0: not yet), the bytes read
     * since, and the route's body_timeout (0: the server's) */
    uint64_t t0_ms, got;
    uint32_t timeout_s;
    /* a COLIBRI_NEED_BODY body above body_memory_max: the unnamed file it
     * went to (fd, file_len bytes written; hc->reqbody then holds what
     * waits to be written), and its mapping once colibri_req_body() asked;
     * closed and unmapped by a defer */
    bool spooled;
    int fd;
    uint64_t file_len;
    void *map;
};

/* A connection's HTTP state (the runtime's per-connection slot); its
 * buffers are reused from request to request. */
struct http_conn {
    struct strbuf body;          /* the response body a handler fills */
    struct strbuf hdrs;          /* extra response header lines a handler adds */
    struct strbuf reqbody;       /* the request body, once read */
    struct arena arena;          /* per-request scratch: decoded path, query values, pinned head */
    struct http_chunked chunked; /* the decoder of a chunked request body, reset per body */
    struct http_body_state bs;   /* the request body's reading, reset per body */
    bool closing;                /* answer with Connection: close, then close */
    bool lingering;              /* close after draining the client's unread bytes */
    bool mid_request;            /* part of a request is buffered or being read (408 on timeout) */
    bool after_proxy_hdr;        /* a PROXY header came, its first request not yet: not idle */
    struct colibri_response *resp; /* the request handle() runs now (on its stack) */
    /* set when a request's site has filters (req->filtered), else stale:
     * those filters, and the user an auth filter let in (NUL-terminated,
     * in the arena; NULL: none), for the access log */
    const struct http_filters *filters;
    const char *user;
    bool counted; /* metrics: a request of it was counted already */
    /* the connection's own address (getsockname), once a handler asked
     * for it with http_local_addr() */
    bool local_known;
    struct conn_peer local;
    bool h2c_up; /* handle() took an `Upgrade: h2c`: run() hands the head to h2_upgrade */
    void *h2;    /* an HTTP/2 connection's state (http2/h2.h), or NULL */
};
/* The address and port the connection came to (family 0 if unknown): one
 * getsockname() per connection. */
const struct conn_peer *http_local_addr(struct colibri_request *req);
/* The address of peer as text in buf (len >= 46 for IPv6): 0, -ENOTCONN
 * (not an IP address), or -errno. */
int http_peer_str(const struct conn_peer *peer, char *buf, size_t len);
/* The user an auth filter let in, or NULL. */
#define HTTP_REQ_USER(req) ((req)->filtered ? (req)->hc->user : NULL)

struct colibri_request {
    struct conn_ctx *ctx;
    struct http_conn *hc;
    struct http_worker *hw;
    const struct http_config *cfg;
    struct http_head *head;
    const char *head_at; /* the head's bytes in ctx->in, until pinned */
    size_t head_len;
    bool head_pinned; /* the head's views point into the arena: ctx->in may move */
    uint8_t body_kind;
    bool body_done;     /* the body has been read (and kept, or dropped) */
    bool continue_sent; /* "100 Continue" went out */
    /* Expect: 100-continue made the connection closing until the body is
     * read (a handler that never reads it answers with Connection: close);
     * cleared when reading starts (the closing lifted) or when a head
     * announced the close (it stays) */
    bool expect_closing;
    /* filters (in the padding before needs: a request without any pays
     * nothing to zero): whether its site's ran (hc->filters, hc->user are
     * then this request's), whether the head writer runs their headers
     * phase (once), and the internal rewrites so far */
    bool filtered;
    bool head_filters;
    uint8_t rewrites;
    unsigned needs;   /* the handler's enum colibri_need */
    struct view path; /* decoded and normalised: the head's bytes, or the arena's */
    uint64_t body_left;
    uint64_t max_body;             /* the route's limit, or the server's */
    struct http_mp *mp;            /* colibri_req_multipart_next()'s state, once called */
    const struct http_log *log;    /* where its access log line goes (NULL: none) */
    uint64_t t0_ns;                /* the worker's clock when it began (request_time_ms) */
    const struct http_framing *fr; /* NULL: HTTP/1.1 on ctx's socket */
};

struct colibri_response {
    struct colibri_request *req;
    const char *mime;
    int status; /* for streaming; a handler's return value otherwise */
    bool head_only;
    bool streaming;
    bool chunked;
    bool sent;           /* the response went out already (sendfile, static) */
    int final_status;    /* the status that went out (for the access log) */
    uint64_t body_bytes; /* body bytes sent (for the access log) */
    bool interrupted;    /* the connection was cut before the answer was whole */
    bool sse_counted;    /* an event stream, counted open (http_metrics_stream) */
    /* header lines written before hc->hdrs without being copied there
     * first: for a caller whose lines outlive the writing of the head
     * (serve_files' precomputed ones, while it holds the cache entry) */
    struct view lines;
    bool filtering; /* the headers phase runs (filter.c) */
    /* a gateway's: the upstream address(es) tried, as text ("-" none) and
     * the time from its first connect to its answer's head, in ms (-1:
     * none), for the access log's upstream fields */
    const char *upstream_addr;
    int64_t upstream_ms;
};

/* --- http.c --- */

/* Routes the request and runs its handler (or answers it): the status for
 * http_write_response() when the handler did not answer itself. The
 * exchange's part of a request, whatever its framing. */
int http_dispatch(struct colibri_request *req, struct colibri_response *resp);

/* --- request.c --- */

/* Decodes and normalises the target's path into req->path: 0, -EBADMSG,
 * or -ENOMEM. Inline, because every request needs it and most
 * paths have nothing to decode: those are the head's own bytes (a view
 * that http_pin_head() moves with the head); the others go to
 * http_decode_path_escaped(), which decodes into the arena. */
int http_decode_path_escaped(struct colibri_request *req);
static inline __attribute__((always_inline)) int http_decode_path(struct colibri_request *req)
{
    struct view raw = req->head->path;
    /* only '%' escapes, "." segments and repeated slashes need work */
    if (!raw.len || raw.p[0] != '/' || http_path_needs_decoding(raw.p, raw.len))
        return http_decode_path_escaped(req);
    req->path = raw;
    return 0;
}
/* Copies the head into the arena and points its views (and req->path)
 * there: 0, or -ENOMEM. Whoever reads more input while the request lives
 * calls it before ctx->in moves (a body read, WebSocket frames), or the
 * access log and the header lookups see the new bytes. Once per request. */
int http_pin_head(struct colibri_request *req);
/* Reads the rest of the body (keep) or drops it. A kept body is in
 * hc->reqbody, or, beyond body_memory_max, in the unnamed file hc->bs.fd
 * (hc->bs.spooled). 0, or -errno to give up with (the connection then
 * closes; http_status_of() answers it). */
int http_body_pump(struct colibri_request *req, bool keep);
/* The next bytes of the body (de-chunked), read from the socket when none
 * are buffered: 0 with out->len > 0, 0 with out->len == 0 at its end, or
 * -errno to give up with (the connection then closes): -EFBIG above
 * max_body, -EBADMSG malformed or cut short, -ETIMEDOUT too slow
 * (body_timeout, body_min_rate), -ENOMEM. The bytes stay valid until the
 * next call. */
int http_body_next(struct colibri_request *req, struct view *out);
/* Consumes a body nobody read, so the next request is framed right; if
 * that is not possible, the connection closes. */
void http_skip_body(struct colibri_request *req);

/* --- multipart_req.c --- */

/* An unnamed file in dir, readable by nobody else: O_TMPFILE, or where
 * the file system has none, mkstemp and an unlink at once. The fd, or -1
 * (errno). */
int http_temp_file(const char *dir);

/* --- proxy_step.c --- */

/* On a proxy_protocol listener, the connection's first run reads and
 * parses the PROXY header and records its source as the connection's peer
 * (conn_set_peer), for the access log and colibri_req_remote_addr(). False
 * when the connection must close without an answer (a header malformed,
 * missing or cut short). */
bool http_proxy_step(struct conn_ctx *ctx);

/* --- response.c --- */

/* The answer to a handler's return (body, or the error page), into ctx->out. */
void http_write_response(struct colibri_request *req, struct colibri_response *resp, int status);
/* The head of an answer of len body bytes that the caller sends itself
 * after it, with the conn_* writes (serve_files' multi-range answers):
 * into ctx->out, the response then counts as sent. false when there is no
 * body to send (HEAD, len 0) or an answer went out already. */
bool http_answer_head(struct colibri_response *resp, int status, const char *mime, uint64_t len);
/* Starts a streamed answer (chunked, or close-delimited for HTTP/1.0). */
void http_start_stream(struct colibri_response *resp);
/* An error before or instead of a request: the answer, and the connection closes. */
void http_send_error(struct conn_ctx *ctx, int status);
/* "Date: ...\r\n" for the worker's current second. */
#define HTTP_DATE_HDR_LEN (6 + 29 + 2)
const char *http_date_header(struct http_worker *hw, time_t now);
/* The header "Allow: GET, HEAD\r\n" for methods (COLIBRI_M bits), into
 * hdrs: 0, or -ENOMEM (hdrs unchanged). */
int http_allow_header(struct strbuf *hdrs, unsigned methods);
