/* access_log.h - the access log, one line per answered request, into the
 * worker's buffer for its file (struct http_worker); by default in
 * Combined Log Format, else as a site's log_format says (log_format.h):
 *
 *   ADDR - - [22/Nov/2026:13:40:00 +0000] "GET /hello HTTP/1.1" 200 13 "REFERER" "USER-AGENT"
 *
 * Absent fields are "-". The request line, Referer and User-Agent have
 * every byte below 0x20, from 0x7f, '"' and '\' written as \xHH (as nginx
 * does), so no client can end a line or a field. BYTES is the body bytes
 * sent ($body_bytes_sent): 0 for HEAD, 304 and 204. A request the parser
 * refused is logged with its first line as it came (escaped, at most 2 KiB),
 * or "-" when there was none.
 *
 * The buffer is written with one write() (the fd has O_APPEND, so lines of
 * different workers never interleave) when it holds ACCESS_LOG_FLUSH_AT
 * bytes, in the first second after a line went in (the worker's tick, so
 * an idle worker flushes too), and at shutdown. A write that fails drops
 * the buffered lines: counted, and reported in the error log at most a few
 * times a second; the request never notices. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct colibri_request;
struct conn_ctx;
struct colibri_response;
struct http_worker;
struct http_log_format;

#define ACCESS_LOG_FLUSH_AT (48 * 1024)

/* The access log files of a server, shared by all its generations (a
 * reload adds the files its sites name; a file no config names any more
 * stays open until the server ends). A slot's fd never changes: reopening
 * puts the new file under the same number (dup2). Only the control
 * thread (start, reload, reopening) writes the table, and a slot is
 * filled before the workers get a config that names it. */
#define HTTP_LOG_FILES_MAX 64
struct http_log_files {
    int fd[HTTP_LOG_FILES_MAX];
    char *path[HTTP_LOG_FILES_MAX]; /* as written; "stdout" for fd 1 */
    unsigned n;
};

/* Where and how one site's requests are logged. */
struct http_log {
    unsigned file;                     /* its slot in struct http_log_files */
    const struct http_log_format *fmt; /* NULL: Combined (the fast path) */
};

/* The line of req (what req->log says) into the worker's buffer for its file. */
void http_access_log(struct colibri_request *req, struct colibri_response *resp);
/* Writes what the worker buffered, every file (its thread, or after it ended). */
void http_access_log_flush(struct http_worker *hw);
/* A connection a stop cut off, at info level in the error log: its
 * request and what was sent of the answer (resp), or that no whole
 * request had come (NULL). */
void http_log_cut(struct conn_ctx *ctx, const struct colibri_response *resp);
/* peer as text ("-" when unknown) into a, which has room for
 * INET6_ADDRSTRLEN bytes; returns its length. */
struct conn_peer;
size_t http_peer_text(const struct conn_peer *peer, char *a);
/* Lines dropped so far because a write failed. */
uint64_t http_access_log_dropped(void);
