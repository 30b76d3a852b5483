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

/* The library is built with -fvisibility=hidden: only what this header
 * declares is exported, so nothing but colibri_* can clash with a program. */
#pragma GCC visibility push(default)

struct colibri_server;
struct colibri_request;
struct colibri_response;

/* A byte string that somebody else owns (not NUL-terminated). */
struct colibri_str {
    const char *p;
    size_t len;
};

/* The methods colibri knows, the one list everything else is built from:
 * the enum, the names, and the parser's recogniser (which a unit test
 * checks against this list). */
#define COLIBRI_METHODS(X) X(GET) X(HEAD) X(POST) X(PUT) X(DELETE) X(OPTIONS) X(PATCH) X(TRACE)

enum colibri_method {
#define COLIBRI_METHOD_ENUM_(m) COLIBRI_##m,
    COLIBRI_METHODS(COLIBRI_METHOD_ENUM_)
#undef COLIBRI_METHOD_ENUM_
        COLIBRI_METHOD_COUNT
};
#define COLIBRI_M(m) (1u << (m))

/* "GET" for COLIBRI_GET; NULL out of range. */
const char *colibri_method_name(enum colibri_method m);

/* What a handler reads besides method, path, query and headers (which are
 * found on demand in the validated head, at no cost until asked for).
 *  - COLIBRI_NEED_BODY: the server reads the whole body (de-chunked, at
 *    most max_request_body) before the handler runs, answering 413 or 400
 *    itself when it cannot; colibri_req_body() hands it over. Without it,
 *    colibri_req_body() answers 500 and the server skips a body after the
 *    handler (or closes the connection if it cannot).
 *  - COLIBRI_NEED_BODY_STREAM: the handler reads the body itself, as it
 *    arrives, with colibri_req_multipart_next(); nothing of it is read
 *    before the handler runs, except that a Content-Length above the
 *    route's max_body is answered 413 without running the handler. What
 *    the handler leaves unread is skipped after it returns.
 * A route's max_body ("handler PREFIX NAME { max_body = SIZE }") replaces
 * the server's max_request_body for both. */
enum colibri_need {
    COLIBRI_NEED_BODY = 1u << 0,
    COLIBRI_NEED_BODY_STREAM = 1u << 1,
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
/* The TLS library this build uses ("OpenSSL 3.0.17 1 Jul 2025"), NULL when
 * it was built without TLS. */
const char *colibri_tls_library(void);
/* The HTTP/2 and regular-expression libraries this build runs with, as
 * "nghttp2 1.52.0" and "PCRE2 10.42" into buf (len bytes); 0, or -ENOSPC. */
int colibri_libraries(char *buf, size_t len);
void colibri_server_free(struct colibri_server *srv);

/* Makes a handler available to config files (copied; name must be unique:
 * -EEXIST otherwise). The built-in ones, hello_world and echo, are always
 * there. */
int colibri_server_register(struct colibri_server *srv, const struct colibri_handler *h);

/* Reads a config file; errors name file, line and key. 0 or -errno. */
int colibri_server_load_config(struct colibri_server *srv, const char *path, char *err,
                               size_t errlen);
/* Same from a string (name is used in error messages). */
int colibri_server_load_config_string(struct colibri_server *srv, const char *name,
                                      const char *text, char *err, size_t errlen);

/* Programmatic set-up, also allowed after a config was loaded. */
/* "127.0.0.1:8080", "[::1]:80", "*:80"; or "systemd" (every socket passed
 * by systemd socket activation) or "systemd:NAME" (those named NAME) */
int colibri_server_listen(struct colibri_server *srv, const char *addr, char *err, size_t errlen);
/* Routes prefix to the registered handler named handler; data is passed
 * to every call. Prefixes match whole path segments: "/hello" answers
 * "/hello", "/hello/x" and "/hello?x", never "/hellothere"; a prefix
 * ending in '/' answers everything below it. The longest prefix wins. */
int colibri_server_route(struct colibri_server *srv, const char *prefix, const char *handler,
                         void *data, char *err, size_t errlen);
/* The same for a handler the caller owns (it must outlive the server);
 * free_data(data) runs when the server is freed, and also here if the
 * route cannot be added. Called from a module's from_config(), it routes
 * in the site being loaded (a virtual host, or the default site); called
 * from anywhere else, in the default site. */
int colibri_server_add_route(struct colibri_server *srv, const char *prefix,
                             const struct colibri_handler *h, void *data, void (*free_data)(void *),
                             char *err, size_t errlen);
/* Forgets the default site's route at exactly prefix (running its
 * free_data): for a command line that replaces a config's route. 0 or
 * -ENOENT. */
int colibri_server_remove_route(struct colibri_server *srv, const char *prefix);
/* Serves the directory root at prefix with the serve_files defaults (the
 * config's "serve_files PREFIX { path = ROOT }"). */
int colibri_serve_files(struct colibri_server *srv, const char *prefix, const char *root, char *err,
                        size_t errlen);
/* Forgets the listeners given so far (a command line overriding the config). */
void colibri_server_clear_listeners(struct colibri_server *srv);
void colibri_server_set_threads(struct colibri_server *srv, unsigned n); /* 0: one per CPU */

/* Binds, starts the workers and blocks until shutdown; 0 or -errno. */
int colibri_server_run(struct colibri_server *srv, char *err, size_t errlen);
/* Graceful stop: no new connections, requests in flight finish, idle
 * connections close. Async-signal-safe. */
void colibri_server_shutdown(struct colibri_server *srv);
/* Reopens the access and error log files at their paths (log rotation:
 * rename the files, then call this). Async-signal-safe: it only wakes the
 * server's log thread; a no-op while the server is not running. */
void colibri_server_reopen_logs(struct colibri_server *srv);

/* Reloads the config file without dropping anything (SIGHUP in the colibri
 * program). Async-signal-safe: it only wakes the server's control thread,
 * which reads the file colibri_server_load_config() read, and checks it
 * fully while the running config serves. A bad config (every error is
 * logged, "reload failed: ...") changes nothing. A good one serves every
 * request that starts from then on; requests in flight finish on the old
 * routes, which are freed afterwards. Listeners that stay are kept
 * (never closed), new ones open, removed ones close. Settings that need a
 * restart (threads, accept, max_request_head, timeouts, user, chroot, the
 * log files and pid_file) keep their running values, with a warning. A
 * no-op while the server is not running. */
void colibri_server_reload(struct colibri_server *srv);
/* Lets the server answer the usual signals itself, as the colibri program
 * does: SIGTERM and SIGINT stop it gracefully, SIGHUP reloads the config,
 * SIGUSR1 reopens the logs. No handler is installed: the four signals are
 * blocked in the calling thread (call this before starting threads of
 * your own, which inherit the mask) and, while colibri_server_run() runs,
 * the server's control thread reads them from a signalfd. One sent before
 * the server runs waits and is answered when it does. 0, or -errno with
 * err set. */
int colibri_server_take_signals(struct colibri_server *srv, char *err, size_t errlen);
/* Called during a reload, on the control thread, with the server the new
 * config was loaded into (next): a program applies here what it did by
 * hand after colibri_server_load_config() (routes, listeners, threads),
 * as it would to a new server. 0, or -errno with err set to fail the
 * reload. */
typedef int (*colibri_reload_fn)(struct colibri_server *next, void *arg, char *err, size_t errlen);
void colibri_server_on_reload(struct colibri_server *srv, colibri_reload_fn fn, void *arg);

/* With "sandbox = true" (README, "Sandbox") the running server opens only
 * the files it was told about while its config loaded: a module whose
 * handlers open files names them here, from its from_config() or its
 * colibri_module_init(); a folder covers everything below it. Without
 * the sandbox this only records. During a reload of a sandboxed server it
 * checks instead: a path the start-up did not allow gives -EACCES with
 * err set (the sandbox cannot widen; the running config stays). */
#define COLIBRI_PATH_READ  1u /* read files, list folders */
#define COLIBRI_PATH_WRITE 2u /* also create, write and remove files */
int colibri_server_allow_path(struct colibri_server *srv, const char *path, unsigned how, char *err,
                              size_t errlen);

/* --- modules ------------------------------------------------------------ */

/* A module is a kind of config section, "NAME PREFIX { key = value ... }"
 * inside a site, that becomes routes: serve_files, redirect and response
 * are modules, and a program or a shared library (the "module FILE" line)
 * can add its own. A config file names modules; the loader knows none. */
struct colibri_conf; /* one line or section of a config file */

struct colibri_module {
    const char *name; /* the section's keyword */
    /* Reads the section (its argument with colibri_conf_value(), its keys
     * with colibri_conf_take()) and adds routes with
     * colibri_server_add_route(). Returns 0, or -errno with err set, best
     * with colibri_conf_error() so it names file, line and key. Keys the
     * module does not take are errors ("unknown key"). */
    int (*from_config)(struct colibri_server *srv, struct colibri_conf *section, char *err,
                       size_t errlen);
    /* The module is a line ("rewrite REGEX TARGET"), not a section: its
     * from_config() gets the line, whose words colibri_conf_words() gives. */
    bool line_form;
};

/* Makes a module available to config files (copied; the name must be
 * unique and not "handler": -EEXIST otherwise). */
int colibri_server_add_module(struct colibri_server *srv, const struct colibri_module *m);

/* --- filters ------------------------------------------------------------ */

/* A filter runs around the routes, for every request whose path is under
 * its prefix (whole segments, as a route's), whatever route answers it:
 *  - COLIBRI_PHASE_REWRITE: before routing; it may change the target
 *    (colibri_req_rewrite(): the request is routed again, from the first
 *    rewrite filter, at most 10 times, then 500) or answer (a redirect);
 *  - COLIBRI_PHASE_ACCESS: after the rewrites, before the route's handler
 *    (and before its body is read): access lists, authentication, limits;
 *  - COLIBRI_PHASE_HEADERS: on the answer's head, just before it is
 *    written (handlers, files, redirects, error pages, 304s): it may add
 *    (colibri_resp_header), remove (colibri_resp_header_remove) and change
 *    the type (colibri_resp_set_type); Server and Date stay the server's.
 * Within a phase, filters run in the order they were added (the config's).
 * fn returns 0 to go on, or (rewrite and access phases) the status the
 * server answers with at once, the handler never running; its return is
 * ignored in the headers phase. A module adds filters from its
 * from_config() with colibri_server_add_filter(), in the site being
 * loaded, as it adds routes. */
enum colibri_phase {
    COLIBRI_PHASE_REWRITE,
    COLIBRI_PHASE_ACCESS,
    COLIBRI_PHASE_HEADERS,
    COLIBRI_PHASE_COUNT
};

struct colibri_filter {
    const char *name; /* for messages: "rewrite", "access", ... */
    enum colibri_phase phase;
    int (*fn)(struct colibri_request *req, struct colibri_response *resp, void *data);
};

/* Adds a filter (copied) for paths under prefix; data is passed to every
 * call and free_data(data) runs when the server is freed (also here when
 * the filter cannot be added). 0, or -errno with err set. */
int colibri_server_add_filter(struct colibri_server *srv, const char *prefix,
                              const struct colibri_filter *f, void *data, void (*free_data)(void *),
                              char *err, size_t errlen);
/* Rewrite phase: the request's target becomes target (len bytes, an
 * origin-form "/path?query": percent-encoded, normalised and checked as a
 * request's), and the request is routed again. colibri_req_target() keeps
 * the target as sent; colibri_req_path() and the query follow the new
 * one. 0, -EBADMSG for a bad target (a 400 for the caller to return),
 * -ELOOP past 10 rewrites (500), -ENOMEM. */
int colibri_req_rewrite(struct colibri_request *req, const char *target, size_t len);
/* Headers phase (or a handler): removes every header line called name
 * (case-insensitive) that the answer carries so far; the number removed. */
int colibri_resp_header_remove(struct colibri_response *resp, const char *name);
/* The config value's words: blanks separate them, a double-quoted word
 * ("a b", with \" and \\) is one, quotes removed; *n their count. Valid
 * as long as the config. */
const char *const *colibri_conf_words(const struct colibri_conf *c, size_t *n);

/* A shared library named by "module FILE" defines this; it registers
 * handlers and modules and returns 0, or non-zero to fail the start. It
 * is built against colibri.h alone, without -lcolibri: the colibri symbols
 * come from the program that loads it. */
int colibri_module_init(struct colibri_server *srv);

/* The section's keyword ("redirect") and its argument ("/old"; "" if none). */
const char *colibri_conf_name(const struct colibri_conf *c);
const char *colibri_conf_value(const struct colibri_conf *c);
/* The first key called name in the section, marked as read; NULL if absent.
 * Call again for a repeatable key. */
struct colibri_conf *colibri_conf_take(struct colibri_conf *section, const char *name);
/* The next key of the section not taken yet, whatever its name, marked
 * as read; NULL after the last: for keys whose order matters ("allow",
 * "deny"). */
struct colibri_conf *colibri_conf_take_any(struct colibri_conf *section);
/* "FILE:LINE: NAME: message" into err; returns -EINVAL. */
int colibri_conf_error(const struct colibri_conf *c, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Conversions of a key's value; 0, or -EINVAL with err set. Durations take
 * ms, s, m, h, d; sizes k, M, G; booleans true/false, on/off, yes/no. */
int colibri_conf_int(const struct colibri_conf *c, long min, long max, long *out, char *err,
                     size_t errlen);
int colibri_conf_bool(const struct colibri_conf *c, bool *out, char *err, size_t errlen);
int colibri_conf_duration_ms(const struct colibri_conf *c, uint64_t *ms, char *err, size_t errlen);
int colibri_conf_size(const struct colibri_conf *c, uint64_t *bytes, char *err, size_t errlen);

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
/* A field of an application/x-www-form-urlencoded body, decoded ('+' is a
 * space); false if absent, badly encoded, or the body is not such a form.
 * Only for handlers with COLIBRI_NEED_BODY (the body is there already). */
bool colibri_req_form(struct colibri_request *req, const char *name, struct colibri_str *value);
bool colibri_req_header(const struct colibri_request *req, const char *name,
                        struct colibri_str *value);
bool colibri_req_cookie(const struct colibri_request *req, const char *name,
                        struct colibri_str *value);
/* The whole request body (de-chunked), read on first call; only for handlers
 * with COLIBRI_NEED_BODY. Returns 0, or the HTTP status to give up with
 * (413 too large, 400 malformed). */
int colibri_req_body(struct colibri_request *req, struct colibri_str *body);
/* A body above body_memory_max (config key, default 1M) is kept in an
 * unnamed temporary file in temp_dir, not in memory; colibri_req_body()
 * maps it (pages cost memory once read). This is that file's fd, for
 * pread() or colibri_resp_sendfile() without mapping it, or -1 when the
 * body is in memory (or there is none, or it could not be read). The fd
 * stays the server's and is closed when the handler returns. */
int colibri_req_body_fd(struct colibri_request *req);
/* multipart/form-data (RFC 7578), part by part, for handlers with
 * COLIBRI_NEED_BODY_STREAM: the body is parsed as it arrives and never held
 * whole. A part of at most multipart_memory_max bytes (config key, default
 * 64k) is handed over in memory; a larger one goes to a temporary file in
 * temp_dir (config key; default $TMPDIR, else /tmp), created with
 * O_TMPFILE (or mkstemp and an immediate unlink), mode 0600: it has no
 * name anybody can open, and it is gone once its fd is closed. */
struct colibri_part {
    const char *name;         /* the field's name (Content-Disposition) */
    const char *filename;     /* the file's name as the client sent it; NULL: not a file */
    const char *content_type; /* the part's Content-Type; "text/plain" when it has none */
    uint64_t size;            /* bytes of content */
    const char *data;         /* the content, when in memory (size bytes); else NULL */
    int fd;                   /* -1, or the temporary file holding the content, at offset 0 */
};
/* Reads the next part whole. Returns 1 with *part filled, 0 after the last
 * part, or the HTTP status to give up with: 415 when the body is not
 * multipart/form-data with a valid boundary, 400 when it is malformed (a
 * missing close delimiter, bad part headers, more than 1000 parts), 413
 * when it outgrows max_body, 500 without COLIBRI_NEED_BODY_STREAM or when
 * a temporary file cannot be written. name, filename and content_type stay
 * valid until the handler returns; data and fd only until the next call
 * (the fd is closed then, or when the handler returns, or when the client
 * vanishes mid-upload: dup() it to keep the file). A failure is final:
 * later calls return the same status. */
int colibri_req_multipart_next(struct colibri_request *req, struct colibri_part *part);
/* Whether the request carries a body (Content-Length > 0 or chunked). */
bool colibri_req_has_body(const struct colibri_request *req);
/* The raw header block, for debugging handlers like echo. */
struct colibri_str colibri_req_headers_raw(const struct colibri_request *req);
int colibri_req_http_minor(const struct colibri_request *req);
/* The protocol the request came by: "HTTP/1.0", "HTTP/1.1" or "HTTP/2.0"
 * (then colibri_req_http_minor() says 1). */
const char *colibri_req_protocol(const struct colibri_request *req);
/* "127.0.0.1" or "::1" into buf (the address accept() gave, or the one a
 * PROXY header named); 0, -ENOSPC when buf is too small, -ENOTCONN when
 * unknown. */
int colibri_req_remote_addr(const struct colibri_request *req, char *buf, size_t len);
/* Whether the request came over TLS (an https listener). */
bool colibri_req_is_secure(const struct colibri_request *req);

/* Conditional requests (RFC 9110 §13.2.2) against the validators of what
 * the handler would send: etag a quoted entity-tag ("\"v1\"", or NULL),
 * last_modified in seconds since the epoch (or -1). Returns 0 to answer
 * normally, or 304 / 412 for the handler to return (with its ETag). */
int colibri_req_preconditions(struct colibri_request *req, const char *etag, int64_t last_modified);
/* A single byte range of a GET (RFC 9110 §14), honouring If-Range: 206 with
 * *first and *last (inclusive) set, 416 when nothing is satisfiable, 0 to
 * send the whole representation (no Range, several ranges, or a stale
 * If-Range). */
int colibri_req_range(struct colibri_request *req, const char *etag, int64_t last_modified,
                      uint64_t size, uint64_t *first, uint64_t *last);

/* Runs fn(arg) when the handler returns, or when the connection dies while
 * the handler is suspended (a write to a vanished client never returns to
 * the handler). 0, or -ENOMEM after running fn at once. */
int colibri_defer(struct colibri_request *req, void (*fn)(void *), void *arg);

/* Waiting without blocking: the connection's coroutine is suspended, the
 * worker thread serves the others meanwhile. Before it waits, what the
 * response has buffered goes out (a chunk or event sent with
 * colibri_resp_send_*() reaches the client before the wait).
 *
 * - A client that disconnects (or half-closes) while its handler waits
 *   ends the handler: the call never returns, the handler's defers run
 *   (colibri_defer), the connection closes.
 * - A graceful stop (colibri_server_shutdown, SIGTERM) wakes every waiter
 *   at once with -ECANCELED, and from then on the calls return -ECANCELED
 *   at once: the handler should finish its answer and return.
 * - A waiting request is not a stalled one: the request timeout does not
 *   run while its handler waits (it starts afresh at the next read or
 *   write); the handler's own timeouts bound the wait.
 * - Resolution is a millisecond, on a clock that ticks every 1-4 ms: a wait
 *   ends at its deadline or a few milliseconds later, never earlier.
 *
 * colibri_sleep() returns 0 after ms milliseconds, or -ECANCELED. */
int colibri_sleep(struct colibri_request *req, unsigned ms);
#define COLIBRI_WAIT_READ  1u
#define COLIBRI_WAIT_WRITE 2u
/* Waits until fd (a pipe, an eventfd, a socket the handler owns; not a
 * regular file) is ready for events (COLIBRI_WAIT_READ and/or _WRITE), at
 * most timeout_ms milliseconds (-1: no limit). Returns the ready events
 * (> 0; a hangup or error on fd reports all asked for, and the next call
 * on fd tells which), -ETIMEDOUT, -ECANCELED, or -errno when fd cannot be
 * watched (-EINVAL, -EPERM for a regular file). The handler keeps
 * ownership of fd; it is watched only during the call. */
int colibri_wait_fd(struct colibri_request *req, int fd, unsigned events, int timeout_ms);

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
 * (chunked for HTTP/1.1, close-delimited for HTTP/1.0). 0 or -errno; a
 * piece is written from where it is, not copied, and 0 means it went out
 * whole. A connection that fails meanwhile unwinds the handler (its defers
 * run) rather than returning. */
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
/* Server-sent events (text/event-stream; the first one starts the stream).
 * data may hold any number of lines (CRLF, LF or CR), each sent as its own
 * "data:" field, so the client rebuilds it exactly. */
struct colibri_event {
    const char *event; /* the event's name; NULL: a "message" */
    const char *id;    /* NULL: none; the client sends it back as Last-Event-ID */
    int retry_ms;      /* >= 0: the client's reconnection delay; < 0: none */
    const char *data;  /* NULL: no data field (an event of id or retry only) */
    size_t len;
};
/* 0, -EINVAL for a name or id with a line break, or -errno (-ENOMEM:
 * nothing was sent, never part of an event). */
int colibri_resp_send_event_ex(struct colibri_response *resp, const struct colibri_event *ev);
/* The same with a name (or NULL) and data only. */
int colibri_resp_send_event(struct colibri_response *resp, const char *event, const char *data,
                            size_t len);
/* A comment line (": text"), which clients ignore: a keep-alive for proxies. */
int colibri_resp_send_comment(struct colibri_response *resp, const char *text);
/* The Last-Event-ID a reconnecting client sent; false if none. */
bool colibri_req_last_event_id(const struct colibri_request *req, struct colibri_str *id);

/* --- WebSockets (RFC 6455) ---------------------------------------------- */

/* A handler turns its request into a WebSocket with colibri_ws_upgrade(),
 * then reads and sends whole messages until the peer closes; when the
 * handler returns, the server closes the connection (no HTTP follows).
 *
 *     static int chat(struct colibri_request *req, struct colibri_response *resp, void *data)
 *     {
 *         struct colibri_ws *ws;
 *         struct colibri_ws_msg m;
 *         int st = colibri_ws_upgrade(req, resp, NULL, &ws);
 *         if (st)
 *             return st; // 426 or 400: not a WebSocket handshake
 *         while (colibri_ws_read(ws, &m) == 0)
 *             colibri_ws_send(ws, m.type, m.p, m.len);
 *         return 0;
 *     }
 *
 * Reads and sends suspend the coroutine, never the worker. Between
 * messages a connection waits without a timeout unless the config sets
 * ws_idle_timeout (then a silent peer is pinged, and closed with 1001 when
 * still silent: -ETIMEDOUT); the request timeout runs only while a frame
 * is half received or a send is stuck; a graceful stop ends the wait
 * (colibri_ws_read returns -ECANCELED after sending close 1001). Pings are
 * answered during colibri_ws_read(), pongs ignored. Any protocol violation
 * closes the connection with its code (1002; 1007 for text that is not
 * UTF-8, at its first bad byte; 1009 for a message above max_message;
 * 1013 for a large message while the worker's WebSockets hold
 * ws_memory_max). */
struct colibri_ws;

struct colibri_ws_options {
    size_t max_message; /* the largest message read, in bytes; 0: 1 MiB */
    bool deflate;       /* accept permessage-deflate (RFC 7692) when offered */
};

enum colibri_ws_type {
    COLIBRI_WS_TEXT = 1,   /* UTF-8 */
    COLIBRI_WS_BINARY = 2, /* anything */
};

struct colibri_ws_msg {
    enum colibri_ws_type type;
    const char *p; /* NUL-terminated (a text can be used as a C string) */
    size_t len;
};

/* Checks the handshake and answers it with 101 Switching Protocols: 0 with
 * *ws set (the WebSocket lives until the handler returns), or the status
 * for the handler to return: 426 (with Upgrade: websocket) for a request
 * that asks for no WebSocket, 400 for a bad handshake (a method other than
 * GET, HTTP/1.0, no "Connection: upgrade", a Sec-WebSocket-Version other
 * than 13, a Sec-WebSocket-Key that is not 16 bytes of base64, a body),
 * 500 when out of memory. opt may be NULL (the defaults). */
int colibri_ws_upgrade(struct colibri_request *req, struct colibri_response *resp,
                       const struct colibri_ws_options *opt, struct colibri_ws **ws);
/* The next whole message: 0 with *msg valid until the next call, or < 0
 * when the WebSocket is over and the handler should return: -EPIPE (a
 * close handshake, or a violation this side closed for: see
 * colibri_ws_close_code), -ECONNRESET (the peer left without a close
 * frame), -ECANCELED (the server is stopping: close 1001 was sent),
 * -ETIMEDOUT (silent through ws_idle_timeout and a ping: close 1001 was
 * sent). */
int colibri_ws_read(struct colibri_ws *ws, struct colibri_ws_msg *msg);
/* Sends one message (a text must be UTF-8: it is not checked). 0, -EINVAL
 * for a bad type, -EPIPE once closed. The bytes are buffered and leave at
 * the latest when the handler next waits or returns. */
int colibri_ws_send(struct colibri_ws *ws, enum colibri_ws_type type, const void *p, size_t len);
/* Starts the close handshake with code (1000-1003, 1007-1011, 3000-4999)
 * and a reason (UTF-8, at most 123 bytes, or NULL), then waits up to a
 * second for the peer's close frame, dropping messages meanwhile. 0,
 * -EINVAL for a bad code or reason, -EPIPE when closed already. */
int colibri_ws_close(struct colibri_ws *ws, uint16_t code, const char *reason);
/* The close code the WebSocket ended with: the peer's (echoed back), the
 * one this side sent, 1005 for a close frame without a code, 1006 for a
 * connection that dropped; 0 while open. */
unsigned colibri_ws_close_code(const struct colibri_ws *ws);

/* --- publish/subscribe ------------------------------------------------- */

/* A channel carries messages (bytes) from any thread to every connection
 * subscribed to it, in one process. A handler subscribes its connection
 * and waits for messages; any thread (a handler on any worker, or a thread
 * of the application) publishes.
 *
 *     static int feed(struct colibri_request *req, struct colibri_response *resp, void *ch)
 *     {
 *         struct colibri_sub *sub;
 *         struct colibri_channel_msg m;
 *         if (colibri_channel_subscribe(req, ch, &sub))
 *             return 500;
 *         colibri_resp_set_type(resp, "text/event-stream");
 *         for (;;) {
 *             int r = colibri_sub_next(sub, &m, 15000);
 *             if (r == -ETIMEDOUT)
 *                 r = colibri_resp_send_comment(resp, "keep-alive");
 *             else if (r == 0)
 *                 r = colibri_resp_send_event(resp, NULL, m.p, m.len);
 *             if (r < 0)
 *                 return 200; // stopping, dropped, or the channel closed
 *         }
 *     }
 *
 *     colibri_channel_publish(ch, "hello", 5); // from any thread
 *
 * A message is copied once when published and shared by every subscriber
 * (reference counted); each worker thread that has subscribers gets it
 * through one cross-thread command and hands it to its own subscribers.
 * Messages reach each subscriber in the order they were published (one
 * order for every subscriber, whichever threads publish). A subscriber
 * has a bounded queue of messages it has not taken yet (queue_max): one
 * that falls that far behind (a client that does not read, so its
 * handler is stuck sending) is dropped, so a slow client never holds up
 * the others or grows memory: its next colibri_sub_next() returns
 * -ENOBUFS, colibri_channel_dropped() counts it, and the error log says
 * so at level warn (rate-limited like every error-log message). A
 * subscription ends when its handler returns, when the client
 * disconnects (the handler's defers run), or with colibri_sub_end(). */
struct colibri_channel;
struct colibri_sub;

struct colibri_channel_options {
    unsigned queue_max; /* messages a subscriber may fall behind; 0: 256 */
};

/* A new channel (opt may be NULL: the defaults), or NULL when out of memory. */
struct colibri_channel *colibri_channel_new(const struct colibri_channel_options *opt);
/* The channel's owner is done with it: publishing is over; every
 * subscriber still there takes what was published before, then gets
 * -EPIPE. The memory goes when the last subscriber has ended. Any
 * thread. */
void colibri_channel_free(struct colibri_channel *ch);
/* Sends a copy of len bytes at p to every current subscriber. Any thread;
 * it never waits for a subscriber (it takes a lock for as long as it
 * takes to queue one command per worker thread). 0 or -ENOMEM. */
int colibri_channel_publish(struct colibri_channel *ch, const void *p, size_t len);
/* Subscribers dropped for being too slow, since the channel was made. */
uint64_t colibri_channel_dropped(struct colibri_channel *ch);
/* Subscribers now. */
size_t colibri_channel_subscribers(struct colibri_channel *ch);

/* Subscribes the handler's connection: messages published from now on
 * queue up for it. The subscription lives until the handler returns (or
 * colibri_sub_end). 0, or -ENOMEM. */
int colibri_channel_subscribe(struct colibri_request *req, struct colibri_channel *ch,
                              struct colibri_sub **sub);
/* Ends a subscription early (its queue is emptied; colibri_sub_next
 * returns -EPIPE from then on). The handle stays valid until the handler
 * returns. */
void colibri_sub_end(struct colibri_sub *sub);

struct colibri_channel_msg {
    const char *p; /* NUL-terminated, valid until the next colibri_sub_next() */
    size_t len;
};
/* The next message: 0 with *msg set, at once when one is queued; else the
 * handler waits (flushing what it sent first, as colibri_sleep does) at
 * most timeout_ms milliseconds (-1: no limit; 0: do not wait) and gets
 * -ETIMEDOUT. Also -ECANCELED when the server is stopping, -ENOBUFS when
 * the subscriber was dropped for falling queue_max messages behind,
 * -EPIPE when the subscription or the channel ended. Every error but
 * -ETIMEDOUT is final: the handler should end its answer. A client that
 * disconnects during the wait ends the handler as in colibri_sleep(). */
int colibri_sub_next(struct colibri_sub *sub, struct colibri_channel_msg *msg, int timeout_ms);

/* colibri_wait_fd() that also returns when sub has a message (or an
 * error) for the handler: COLIBRI_WAIT_SUB among the ready events, at once
 * when one is queued already; colibri_sub_next(sub, &m, 0) takes it. fd
 * may be -1 (events 0): the subscription alone. Otherwise as
 * colibri_wait_fd(): the ready events of fd, -ETIMEDOUT, -ECANCELED,
 * -errno. */
#define COLIBRI_WAIT_SUB 4u
int colibri_sub_wait_fd(struct colibri_sub *sub, int fd, unsigned events, int timeout_ms);

/* colibri_ws_read() that also returns when sub has a message (or an
 * error) for the handler: COLIBRI_WS_SUB, and then colibri_sub_next(sub,
 * &m, 0) takes it. Otherwise as colibri_ws_read(): 0 with *msg, a message
 * from the client (one that arrived already comes first), or < 0 when the
 * WebSocket is over. A message begun by the client is read to its end
 * before the subscription is looked at again. */
#define COLIBRI_WS_SUB 1
int colibri_ws_read_sub(struct colibri_ws *ws, struct colibri_sub *sub, struct colibri_ws_msg *msg);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
