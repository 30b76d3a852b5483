/* colibri.h - the public API of libcolibri.
 *
 * A server is built from a config file (or by hand), gets handlers by name,
 * and runs until colibri_server_shutdown(). Handlers are plain synchronous C:
 * every call that would block (reading the body, sending a chunk) suspends
 * only the connection's coroutine, never the worker thread.
 *
 *     static int hello(struct colibri_request *req, struct colibri_response *resp, void *data)
 *     {
 *         colibri_resp_set_type(resp, "text/plain");
 *         colibri_resp_append(resp, "Hello!", 6);
 *         return 200;
 *     }
 *
 * Thread model: handlers run on the worker threads, many at once; a request
 * and its response belong to one handler call and must not leak out of it.
 * Strings handed out by colibri_req_*() stay valid until the handler returns.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct colibri_server;
struct colibri_request;
struct colibri_response;

/* A byte string that somebody else owns (not NUL-terminated). */
struct colibri_str {
    const char *p;
    size_t len;
};

enum colibri_method {
    COLIBRI_GET = 0,
    COLIBRI_HEAD,
    COLIBRI_POST,
    COLIBRI_PUT,
    COLIBRI_DELETE,
    COLIBRI_OPTIONS,
    COLIBRI_PATCH,
    COLIBRI_TRACE,
};
#define COLIBRI_M(m) (1u << (m))

/* What a handler reads besides method and path. Nothing else is parsed or
 * read on its behalf: a body sent to a handler without COLIBRI_NEED_BODY is
 * skipped (or the connection closed) by the server. */
enum colibri_need {
    COLIBRI_NEED_BODY = 1u << 0,
};

/* Returns the HTTP status. With a status >= 400 and an empty body, the
 * server writes its error page. */
typedef int (*colibri_handler_fn)(struct colibri_request *req, struct colibri_response *resp,
                                  void *data);

struct colibri_handler {
    const char *name; /* for "handler PREFIX NAME" in the config */
    colibri_handler_fn fn;
    unsigned methods; /* COLIBRI_M(...) bits; 0 means GET (and HEAD) */
    unsigned needs;   /* enum colibri_need */
};

/* --- server lifecycle --------------------------------------------------- */

struct colibri_server *colibri_server_new(void);
void colibri_server_free(struct colibri_server *srv);

/* Makes a handler available to config files (copied; name must be unique).
 * The built-in ones, hello_world and echo, are always there. */
int colibri_server_register(struct colibri_server *srv, const struct colibri_handler *h);

/* Reads a config file; errors name file, line and key. 0 or -errno. */
int colibri_server_load_config(struct colibri_server *srv, const char *path, char *err,
                               size_t errlen);
/* Same from a string (name is used in error messages). */
int colibri_server_load_config_string(struct colibri_server *srv, const char *name,
                                      const char *text, char *err, size_t errlen);

/* Programmatic set-up, also allowed after a config was loaded. */
int colibri_server_listen(struct colibri_server *srv, const char *addr, char *err,
                          size_t errlen); /* "127.0.0.1:8080", "[::1]:80", "*:80" */
int colibri_server_route(struct colibri_server *srv, const char *prefix, const char *handler,
                         void *data, char *err, size_t errlen);
/* Forgets the listeners given so far (a command line overriding the config). */
void colibri_server_clear_listeners(struct colibri_server *srv);
void colibri_server_set_threads(struct colibri_server *srv, unsigned n); /* 0: one per CPU */

/* Binds, starts the workers and blocks until shutdown; 0 or -errno. */
int colibri_server_run(struct colibri_server *srv, char *err, size_t errlen);
/* Graceful stop: no new connections, requests in flight finish, idle
 * connections close. Async-signal-safe. */
void colibri_server_shutdown(struct colibri_server *srv);

/* --- request ------------------------------------------------------------ */

enum colibri_method colibri_req_method(const struct colibri_request *req);
/* Percent-decoded path, dot segments removed. */
struct colibri_str colibri_req_path(const struct colibri_request *req);
/* The request-target exactly as sent. */
struct colibri_str colibri_req_target(const struct colibri_request *req);
/* The raw query string (without '?'). */
struct colibri_str colibri_req_query_string(const struct colibri_request *req);
/* Decoded value of a query parameter; false if absent or badly encoded. */
bool colibri_req_query(struct colibri_request *req, const char *name, struct colibri_str *value);
bool colibri_req_header(const struct colibri_request *req, const char *name,
                        struct colibri_str *value);
bool colibri_req_cookie(const struct colibri_request *req, const char *name,
                        struct colibri_str *value);
/* The whole request body (de-chunked), read on first call; only for handlers
 * with COLIBRI_NEED_BODY. Returns 0, or the HTTP status to give up with
 * (413 too large, 400 malformed). */
int colibri_req_body(struct colibri_request *req, struct colibri_str *body);
/* Whether the request carries a body (Content-Length > 0 or chunked). */
bool colibri_req_has_body(const struct colibri_request *req);
/* The raw header block, for debugging handlers like echo. */
struct colibri_str colibri_req_headers_raw(const struct colibri_request *req);
int colibri_req_http_minor(const struct colibri_request *req);
/* "127.0.0.1" or "::1" into buf; 0 or -errno. */
int colibri_req_remote_addr(const struct colibri_request *req, char *buf, size_t len);

/* Runs fn(arg) when the handler returns, or when the connection dies while
 * the handler is suspended (a write to a vanished client never returns to
 * the handler). 0, or -ENOMEM after running fn at once. */
int colibri_defer(struct colibri_request *req, void (*fn)(void *), void *arg);

/* --- response ----------------------------------------------------------- */

/* The MIME type (a static or long-lived string). Default: text/plain. */
void colibri_resp_set_type(struct colibri_response *resp, const char *mime);
/* Adds "name: value"; -EINVAL if either contains CR, LF or NUL. */
int colibri_resp_header(struct colibri_response *resp, const char *name, const char *value);
/* Appends preformatted header lines ("Name: value\r\n" each, already
 * validated by the caller): for headers built once and cached. */
int colibri_resp_header_lines(struct colibri_response *resp, const char *lines, size_t len);
int colibri_resp_append(struct colibri_response *resp, const void *p, size_t len);
int colibri_resp_printf(struct colibri_response *resp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Streaming: the first call sends the headers (status 200 unless set with
 * colibri_resp_set_status) and from then on the body goes out piece by piece
 * (chunked for HTTP/1.1, close-delimited for HTTP/1.0). 0 or -errno. */
void colibri_resp_set_status(struct colibri_response *resp, int status);
int colibri_resp_send_chunk(struct colibri_response *resp, const void *p, size_t len);
/* Answers with len bytes of the open file fd from offset: small files go out
 * in one writev with the header, large ones as header + sendfile(). The fd
 * stays the caller's. Returns status, for "return colibri_resp_sendfile(...)". */
int colibri_resp_sendfile(struct colibri_response *resp, int status, const char *mime, int fd,
                          off_t offset, size_t len);
/* Answers with the len bytes at p without copying them: the header and the
 * bytes leave at once in one writev (behind any earlier pipelined answers),
 * so p only has to stay valid until this call returns. mime may be NULL when
 * the header lines carry Content-Type. Returns status. */
int colibri_resp_send_static(struct colibri_response *resp, int status, const char *mime,
                             const void *p, size_t len);
/* One server-sent event (text/event-stream); event may be NULL. */
int colibri_resp_send_event(struct colibri_response *resp, const char *event, const char *data,
                            size_t len);

#ifdef __cplusplus
}
#endif
