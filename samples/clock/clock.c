/* samples/clock - a page whose clock ticks over server-sent events.
 *
 *     make run-clock                 # or: build/samples/clock/clock [ADDR]
 *     open http://127.0.0.1:8080/
 *
 * GET / is the page; its script opens an EventSource on /events, and the
 * handler there sends the time (UTC, "HH:MM:SS") once a second, just after
 * each second begins. Between two events the handler sleeps with
 * colibri_sleep(), which suspends its connection only: one worker thread
 * keeps thousands of clocks going and still answers everything else at
 * once. Each event's id is the second it tells (seconds since the epoch),
 * and the first also sets the browser's reconnection delay (retry: 1000).
 * A browser that loses the stream reconnects by itself and gets the time
 * of that moment: a clock has nothing to replay, so Last-Event-ID is not
 * needed. Ctrl-C ends every stream cleanly and stops the server. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sample.h"

/* The time shown is in <span id="clock">, which the browser test reads. */
static const char page[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>colibri clock</title>\n"
    "<style>\n"
    "body { font-family: sans-serif; text-align: center; margin-top: 20vh; }\n"
    "#clock { font-size: 5em; font-variant-numeric: tabular-nums; }\n"
    "#status { color: #777; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<p><span id=\"clock\">--:--:--</span> UTC</p>\n"
    "<p id=\"status\">connecting</p>\n"
    "<script>\n"
    "const clock = document.getElementById('clock');\n"
    "const status = document.getElementById('status');\n"
    "const events = new EventSource('/events');\n"
    "events.onopen = () => { status.textContent = 'live, over server-sent events'; };\n"
    "events.onmessage = (e) => { clock.textContent = e.data; };\n"
    "events.onerror = () => { status.textContent = 'reconnecting'; };\n"
    "</script>\n"
    "</body>\n"
    "</html>\n";

static int index_page(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str path = colibri_req_path(req);
    if (!(path.len == 1 || (path.len == 11 && !memcmp(path.p, "/index.html", 11))))
        return 404;
    return colibri_resp_send_static(resp, 200, "text/html; charset=utf-8", page, sizeof(page) - 1);
}

static int events(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    colibri_resp_set_type(resp, "text/event-stream");
    colibri_resp_header(resp, "Cache-Control", "no-cache");
    if (colibri_req_method(req) == COLIBRI_HEAD) {
        colibri_resp_send_chunk(resp, "", 0); /* the head alone */
        return 200;
    }
    for (int retry = 1000;; retry = -1) {
        struct timespec now;
        struct tm tm;
        char hms[16], id[24];
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        size_t len = strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
        snprintf(id, sizeof(id), "%lld", (long long)now.tv_sec);
        const struct colibri_event ev = {.id = id, .retry_ms = retry, .data = hms, .len = len};
        if (colibri_resp_send_event_ex(resp, &ev) < 0)
            break;
        /* until just after the next second begins: a wait never ends early */
        unsigned ms = 1000u - (unsigned)(now.tv_nsec / 1000000);
        if (colibri_sleep(req, ms) < 0)
            break; /* -ECANCELED: the server is stopping, so end the stream */
    }
    return 200;
}

int main(int argc, char **argv)
{
    static const struct colibri_handler handlers[] = {
        {.name = "clock_page", .fn = index_page},
        {.name = "clock_events", .fn = events},
    };
    const char *addr = argc > 1 ? argv[1] : SAMPLE_DEFAULT_ADDR;
    char err[256];
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: clock [ADDR:PORT]   (default %s)\n", SAMPLE_DEFAULT_ADDR);
        return 2;
    }
    struct colibri_server *srv = colibri_server_new();
    if (!srv)
        return 1;
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        colibri_server_register(srv, &handlers[i]);
    if (colibri_server_listen(srv, addr, err, sizeof(err)) ||
        colibri_server_route(srv, "/", "clock_page", NULL, err, sizeof(err)) ||
        colibri_server_route(srv, "/events", "clock_events", NULL, err, sizeof(err))) {
        fprintf(stderr, "clock: %s\n", err);
        colibri_server_free(srv);
        return 1;
    }
    return sample_run(srv, "clock");
}
