/* greet.c - a "module FILE" library for the black-box tests
 * (tests/http/test_modules.py builds it). It is compiled against colibri.h
 * alone, without -lcolibri: every colibri_* symbol it calls must come from
 * the program that loads it.
 *
 * Handlers:
 *   greet       "Hello from a module"
 *   peek_body   no COLIBRI_NEED_BODY, yet calls colibri_req_body() and
 *               answers with what it returns (the API says 500)
 *   tally       COLIBRI_NEED_BODY; counts its runs, answers the body length
 *   tally_count how many times tally ran
 *   versioned   a fixed document with an ETag and a Last-Modified,
 *               honouring conditional requests and a single byte range
 *   remote_addr what colibri_req_remote_addr() says, on a line of its own
 *   nap         streams "napping\n", registers a defer that counts, then
 *               sleeps ?ms= (default 60000) and sends "awake N\n" (N: what
 *               colibri_sleep returned)
 *   nap_defers  how many of nap's defers ran
 *   fd_wait     waits on the module's eventfd (colibri_wait_fd, ?timeout=
 *               ms, default -1), answers "ready N" (and consumes the
 *               count) or "error N"
 *   fd_poke     writes 1 to that eventfd
 *   body_sum    COLIBRI_NEED_BODY: the body's length and Adler-32 as
 *               colibri_req_body() shows it, and whether it is in a file
 *   events      an event stream of every field: a comment, an event with
 *               name, id, retry and data of several lines (CRLF, LF, CR and a
 *               trailing line break), a nameless one, one of an id only, and
 *               "last: ID" (the client's Last-Event-ID) or "last: none"
 *   form        COLIBRI_NEED_BODY; answers "name=[N] note=[T]" from an
 *               urlencoded form ("-" for a field it lacks)
 *   upload      COLIBRI_NEED_BODY_STREAM; a line per multipart part:
 *               "name=N filename=F type=T size=S adler32=X in=memory|file
 *               links=L" (F "-" for none; L the temporary file's link count,
 *               "-" in memory), then "end"; or the status the API returned
 * Module:
 *   shout PREFIX { text = WORDS   repeat = N }   WORDS in capitals, N times
 *
 * -DGREET_NO_INIT leaves colibri_module_init out; -DGREET_INIT_FAILS makes
 * it return 42 after registering nothing. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri.h"

static int greet(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    colibri_resp_set_type(resp, "text/plain");
    colibri_resp_append(resp, "Hello from a module", 19);
    return 200;
}

static int peek_body(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str body;
    int r = colibri_req_body(req, &body);
    if (r)
        return r;
    colibri_resp_printf(resp, "body of %zu bytes", body.len);
    return 200;
}

static atomic_uint tally_runs;

static int tally(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    atomic_fetch_add(&tally_runs, 1);
    struct colibri_str body = {0};
    int r = colibri_req_body(req, &body);
    if (r)
        return r;
    colibri_resp_printf(resp, "tally got %zu bytes", body.len);
    return 200;
}

static int tally_count(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    colibri_resp_printf(resp, "%u", atomic_load(&tally_runs));
    return 200;
}

#define DOC_ETAG       "\"v1\""
#define DOC_MTIME      INT64_C(1700000000)
#define DOC_MTIME_HTTP "Tue, 14 Nov 2023 22:13:20 GMT"
static const char doc[] = "0123456789abcdefghijklmnopqrstuvwxyz\n";

static int versioned(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    const uint64_t size = sizeof(doc) - 1;
    colibri_resp_header(resp, "ETag", DOC_ETAG);
    colibri_resp_header(resp, "Last-Modified", DOC_MTIME_HTTP);
    colibri_resp_header(resp, "Accept-Ranges", "bytes");
    int r = colibri_req_preconditions(req, DOC_ETAG, DOC_MTIME);
    if (r)
        return r; /* 304 or 412, with the validators above */
    uint64_t first, last;
    char cr[64];
    switch (colibri_req_range(req, DOC_ETAG, DOC_MTIME, size, &first, &last)) {
    case 206:
        snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last, size);
        colibri_resp_header(resp, "Content-Range", cr);
        colibri_resp_append(resp, doc + first, (size_t)(last - first + 1));
        return 206;
    case 416:
        snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
        colibri_resp_header(resp, "Content-Range", cr);
        return 416;
    default:
        colibri_resp_append(resp, doc, (size_t)size);
        return 200;
    }
}

static int remote_addr(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    char addr[64];
    int r = colibri_req_remote_addr(req, addr, sizeof(addr));
    if (r)
        return 500;
    colibri_resp_set_type(resp, "text/plain");
    colibri_resp_printf(resp, "%s\n", addr);
    return 200;
}

/* colibri_req_is_secure() as the handler sees it: "secure" or "plain". */
static int is_secure(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    colibri_resp_set_type(resp, "text/plain");
    colibri_resp_printf(resp, "%s\n", colibri_req_is_secure(req) ? "secure" : "plain");
    return 200;
}

static atomic_uint nap_defers_ran;

static void nap_defer(void *arg)
{
    (void)arg;
    atomic_fetch_add(&nap_defers_ran, 1);
}

/* The decimal query parameter name as a long, or def. */
static long query_long(struct colibri_request *req, const char *name, long def)
{
    struct colibri_str v;
    char buf[24];
    if (!colibri_req_query(req, name, &v) || !v.len || v.len >= sizeof(buf))
        return def;
    memcpy(buf, v.p, v.len);
    buf[v.len] = '\0';
    return strtol(buf, NULL, 10);
}

static int nap(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    colibri_defer(req, nap_defer, NULL);
    colibri_resp_send_chunk(resp, "napping\n", 8);
    int r = colibri_sleep(req, (unsigned)query_long(req, "ms", 60000));
    char line[32];
    int n = snprintf(line, sizeof(line), "awake %d\n", r);
    colibri_resp_send_chunk(resp, line, (size_t)n);
    return 200;
}

static int nap_defers(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    colibri_resp_printf(resp, "%u", atomic_load(&nap_defers_ran));
    return 200;
}

static int event_fd = -1;

static int fd_wait(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    int r = colibri_wait_fd(req, event_fd, COLIBRI_WAIT_READ, (int)query_long(req, "timeout", -1));
    if (r < 0) {
        colibri_resp_printf(resp, "error %d", r);
        return 200;
    }
    uint64_t v;
    ssize_t n = read(event_fd, &v, sizeof(v));
    (void)n;
    colibri_resp_printf(resp, "ready %d", r);
    return 200;
}

static int fd_poke(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    uint64_t one = 1;
    if (write(event_fd, &one, sizeof(one)) != sizeof(one))
        return 500;
    colibri_resp_append(resp, "poked", 5);
    return 200;
}

struct shout {
    size_t len;
    char text[];
};

static int shout_answer(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    const struct shout *s = data;
    colibri_resp_append(resp, s->text, s->len);
    return 200;
}

static const struct colibri_handler shout_handler = {.name = "shout", .fn = shout_answer};

static int shout_from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                             size_t errlen)
{
    struct colibri_conf *text = colibri_conf_take(sec, "text");
    struct colibri_conf *repeat = colibri_conf_take(sec, "repeat");
    if (!text)
        return colibri_conf_error(sec, err, errlen, "needs 'text = WORDS'");
    const char *t = colibri_conf_value(text);
    if (!t[0])
        return colibri_conf_error(text, err, errlen, "must not be empty");
    long n = 1;
    if (repeat) {
        int r = colibri_conf_int(repeat, 1, 10, &n, err, errlen);
        if (r)
            return r;
    }
    size_t tl = strlen(t);
    struct shout *s = malloc(sizeof(*s) + tl * (size_t)n + 1);
    if (!s)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    s->len = tl * (size_t)n;
    for (long i = 0; i < n; i++)
        for (size_t j = 0; j < tl; j++)
            s->text[(size_t)i * tl + j] =
                t[j] >= 'a' && t[j] <= 'z' ? (char)(t[j] - 'a' + 'A') : t[j];
    s->text[s->len] = '\0';
    char why[256];
    if (colibri_server_add_route(srv, colibri_conf_value(sec), &shout_handler, s, free, why,
                                 sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

static int events(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str last;
    char buf[128];
    if (colibri_resp_send_comment(resp, "keep-alive") < 0)
        return 500;
    static const char multi[] = "one\r\ntwo\nthree\rfour\n";
    struct colibri_event e = {
        .event = "update", .id = "7", .retry_ms = 2500, .data = multi, .len = sizeof(multi) - 1};
    if (colibri_resp_send_event_ex(resp, &e) < 0)
        return 500;
    if (colibri_resp_send_event(resp, NULL, "plain", 5) < 0)
        return 500;
    struct colibri_event only_id = {.id = "8", .retry_ms = -1};
    if (colibri_resp_send_event_ex(resp, &only_id) < 0)
        return 500;
    /* a name or an id with a line break would forge fields: refused */
    struct colibri_event bad = {.event = "x\ndata: forged", .retry_ms = -1, .data = "", .len = 0};
    struct colibri_event bad_id = {.id = "1\r2", .retry_ms = -1};
    int refused = colibri_resp_send_event_ex(resp, &bad) == -EINVAL &&
                  colibri_resp_send_event_ex(resp, &bad_id) == -EINVAL;
    int n =
        colibri_req_last_event_id(req, &last)
            ? snprintf(buf, sizeof(buf), "last: %.*s, refused: %d", (int)last.len, last.p, refused)
            : snprintf(buf, sizeof(buf), "last: none, refused: %d", refused);
    return colibri_resp_send_event(resp, "end", buf, (size_t)n) < 0 ? 500 : 200;
}

static int form(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str name = {"-", 1}, note = {"-", 1};
    colibri_req_form(req, "name", &name);
    colibri_req_form(req, "note", &note);
    colibri_resp_printf(resp, "name=[%.*s] note=[%.*s]", (int)name.len, name.p, (int)note.len,
                        note.p);
    return 200;
}

/* zlib's Adler-32, as Python's zlib.adler32 computes it */
static uint32_t adler32(uint32_t a, const unsigned char *p, size_t n)
{
    uint32_t s1 = a & 0xffff, s2 = a >> 16;
    while (n) {
        size_t k = n < 5552 ? n : 5552;
        n -= k;
        while (k--) {
            s1 += *p++;
            s2 += s1;
        }
        s1 %= 65521;
        s2 %= 65521;
    }
    return s2 << 16 | s1;
}

static int upload(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_part part;
    int r;
    while ((r = colibri_req_multipart_next(req, &part)) == 1) {
        uint32_t sum = 1;
        uint64_t seen = 0;
        char links[24] = "-";
        if (part.fd >= 0) {
            /* from the heap, not a __thread array: a dlopen()ed module's
             * thread-local storage is allocated by glibc on first touch,
             * and glibc ends the process when that allocation fails */
            enum { BUF = 65536 };
            unsigned char *buf = malloc(BUF);
            if (!buf)
                return 500;
            ssize_t n;
            while ((n = read(part.fd, buf, BUF)) > 0) {
                sum = adler32(sum, buf, (size_t)n);
                seen += (uint64_t)n;
            }
            free(buf);
            struct stat st;
            if (fstat(part.fd, &st) == 0)
                snprintf(links, sizeof(links), "%lu", (unsigned long)st.st_nlink);
        } else {
            sum = adler32(sum, (const unsigned char *)part.data, (size_t)part.size);
            seen = part.size;
        }
        colibri_resp_printf(resp,
                            "name=%s filename=%s type=%s size=%" PRIu64 " adler32=%08x in=%s "
                            "links=%s\n",
                            part.name, part.filename ? part.filename : "-", part.content_type, seen,
                            sum, part.fd >= 0 ? "file" : "memory", links);
    }
    if (r)
        return r;
    colibri_resp_append(resp, "end\n", 4);
    return 200;
}

/* A WebSocket that closes from the server's side: after the first message
 * it says whether a bad close code is refused, then closes with 4000
 * "bye" and waits for the client's close (colibri_ws_close). */
static int ws_bye(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_ws *ws;
    struct colibri_ws_msg m;
    int status = colibri_ws_upgrade(req, resp, NULL, &ws);
    if (status)
        return status;
    if (colibri_ws_read(ws, &m) < 0)
        return 0;
    bool refused = colibri_ws_close(ws, 1005, NULL) == -EINVAL &&
                   colibri_ws_close(ws, 1000, "\xff") == -EINVAL;
    colibri_ws_send(ws, COLIBRI_WS_TEXT, refused ? "refused" : "accepted", refused ? 7 : 8);
    colibri_ws_close(ws, 4000, "bye");
    return 0;
}

#ifndef GREET_NO_INIT
/* The body through colibri_req_body()'s view: its length, its Adler-32,
 * and whether it was kept in a file (colibri_req_body_fd). */
static int body_sum(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str body;
    int r = colibri_req_body(req, &body);
    if (r)
        return r;
    colibri_resp_printf(resp, "%zu bytes, adler32 %u, in %s", body.len,
                        adler32(1, (const unsigned char *)body.p, body.len),
                        colibri_req_body_fd(req) >= 0 ? "a file" : "memory");
    return 200;
}

int colibri_module_init(struct colibri_server *srv)
{
#ifdef GREET_INIT_FAILS
    (void)srv;
    return 42;
#else
    static const struct colibri_handler handlers[] = {
        {.name = "greet", .fn = greet},
        {.name = "peek_body",
         .fn = peek_body,
         .methods = COLIBRI_M(COLIBRI_GET) | COLIBRI_M(COLIBRI_POST)},
        {.name = "tally",
         .fn = tally,
         .methods = COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY},
        {.name = "tally_count", .fn = tally_count},
        {.name = "versioned", .fn = versioned},
        {.name = "remote_addr", .fn = remote_addr},
        {.name = "is_secure", .fn = is_secure},
        {.name = "nap", .fn = nap},
        {.name = "nap_defers", .fn = nap_defers},
        {.name = "fd_wait", .fn = fd_wait},
        {.name = "fd_poke", .fn = fd_poke},
        {.name = "ws_bye", .fn = ws_bye},
        {.name = "events", .fn = events},
        {.name = "form",
         .fn = form,
         .methods = COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY},
        {.name = "body_sum",
         .fn = body_sum,
         .methods = COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY},
        {.name = "upload",
         .fn = upload,
         .methods = COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY_STREAM},
    };
    if (event_fd < 0 && (event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return -errno;
    static const struct colibri_module shout = {.name = "shout", .from_config = shout_from_config};
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
        int r = colibri_server_register(srv, &handlers[i]);
        if (r)
            return r;
    }
    return colibri_server_add_module(srv, &shout);
#endif
}
#endif
