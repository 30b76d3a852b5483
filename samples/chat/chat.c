/* samples/chat - a chat room on WebSockets, built on a colibri channel:
 *
 *     make run-chat    (or: build/samples/chat/chat [-t THREADS] [--tls CERT KEY]
 *                       [ADDR:PORT] [WWW])
 *     open http://127.0.0.1:8080/
 *
 * With --tls the listener speaks TLS (PEM certificate and key files) and
 * offers HTTP/2 by ALPN: the page's WebSocket is then an RFC 8441 stream.
 *
 * Every message a client sends on /ws is published to the room's channel,
 * and every message of the channel goes to every client: one handler
 * waits for its client and for the channel at once (colibri_ws_read_sub).
 * The same room can be followed as server-sent events (/events) and
 * written to with a POST (/say), e.g.
 *
 *     curl -N http://127.0.0.1:8080/events
 *     curl -d '{"name":"curl","text":"hello"}' http://127.0.0.1:8080/say
 *
 * A message is any UTF-8 text of at most 4 KiB; the page sends JSON
 * {"name": ..., "text": ...} and shows anything else as it is. A client
 * too slow to keep up (256 messages behind) is dropped from the room. */
#include <colibri.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

#define MESSAGE_MAX  4096
#define KEEPALIVE_MS 15000

static int room_ws(struct colibri_request *req, struct colibri_response *resp, void *room)
{
    const struct colibri_ws_options opt = {.max_message = MESSAGE_MAX, .deflate = true};
    struct colibri_ws *ws;
    struct colibri_sub *sub;
    int st = colibri_ws_upgrade(req, resp, &opt, &ws);
    if (st)
        return st;
    if (colibri_channel_subscribe(req, room, &sub) < 0) {
        colibri_ws_close(ws, 1011, "out of memory");
        return 0;
    }
    struct colibri_ws_msg m;
    int r;
    while ((r = colibri_ws_read_sub(ws, sub, &m)) >= 0) {
        if (r == COLIBRI_WS_SUB) {
            struct colibri_channel_msg cm;
            if ((r = colibri_sub_next(sub, &cm, 0)) < 0) {
                colibri_ws_close(ws, r == -ENOBUFS ? 1008 : 1001,
                                 r == -ENOBUFS ? "too slow" : "going away");
                break;
            }
            colibri_ws_send(ws, COLIBRI_WS_TEXT, cm.p, cm.len);
        } else if (m.type == COLIBRI_WS_TEXT && m.len) {
            colibri_channel_publish(room, m.p, m.len);
        }
    }
    return 0;
}

static int room_events(struct colibri_request *req, struct colibri_response *resp, void *room)
{
    struct colibri_sub *sub;
    if (colibri_channel_subscribe(req, room, &sub) < 0)
        return 500;
    colibri_resp_set_type(resp, "text/event-stream");
    colibri_resp_header(resp, "Cache-Control", "no-cache");
    colibri_resp_send_comment(resp, "joined");
    for (;;) {
        struct colibri_channel_msg m;
        int r = colibri_sub_next(sub, &m, KEEPALIVE_MS);
        if (r == -ETIMEDOUT)
            r = colibri_resp_send_comment(resp, "keep-alive");
        else if (r == 0)
            r = colibri_resp_send_event(resp, NULL, m.p, m.len);
        if (r < 0)
            return 200; /* stopping, dropped: the stream ends */
    }
}

static int room_say(struct colibri_request *req, struct colibri_response *resp, void *room)
{
    struct colibri_str body;
    int st = colibri_req_body(req, &body);
    if (st)
        return st;
    if (!body.len) {
        colibri_resp_append(resp, "empty message\n", 14);
        return 400;
    }
    if (colibri_channel_publish(room, body.p, body.len) < 0)
        return 503;
    return 204;
}

int main(int argc, char **argv)
{
    char err[256];
    static const struct colibri_handler handlers[] = {
        {.name = "room_ws", .fn = room_ws},
        {.name = "room_events", .fn = room_events},
        {.name = "room_say",
         .fn = room_say,
         .methods = COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY},
    };
    unsigned threads = 0; /* one per CPU */
    const char *cert = NULL, *key = NULL;
    if (argc > 2 && !strcmp(argv[1], "-t")) {
        char *end;
        unsigned long t = strtoul(argv[2], &end, 10);
        if (*end || !*argv[2] || t > 1024) {
            fprintf(stderr, "chat: -t: a number of threads (0: one per CPU)\n");
            return 2;
        }
        threads = (unsigned)t;
        argc -= 2;
        argv += 2;
    }
    if (argc > 1 && !strcmp(argv[1], "--tls")) {
        if (argc < 4) {
            fprintf(stderr, "chat: --tls: a certificate and a key file (PEM)\n");
            return 2;
        }
        cert = argv[2];
        key = argv[3];
        argc -= 3;
        argv += 3;
    }
    const char *addr = argc > 1 ? argv[1] : SAMPLE_DEFAULT_ADDR;
    const char *www = argc > 2 ? argv[2] : CHAT_WWW;
    struct colibri_channel *room = colibri_channel_new(NULL);
    struct colibri_server *server = colibri_server_new();
    if (!room || !server)
        return 1;
    /* 4 KiB messages: no larger body on /say either; with --tls a TLS
     * listener (h2 by ALPN) whose certificate is the default site's */
    char conf[4096];
    int n = cert ? snprintf(conf, sizeof(conf),
                            "max_request_body = 4k\nlistener %s {\n    tls = true\n}\n"
                            "site {\n    tls_certificate = %s\n    tls_key = %s\n}\n",
                            addr, cert, key)
                 : snprintf(conf, sizeof(conf), "max_request_body = 4k\n");
    if (n < 0 || (size_t)n >= sizeof(conf)) {
        fprintf(stderr, "chat: --tls: paths too long\n");
        return 2;
    }
    if (colibri_server_load_config_string(server, "chat", conf, err, sizeof(err))) {
        fprintf(stderr, "chat: %s\n", err);
        return 1;
    }
    colibri_server_set_threads(server, threads);
    for (unsigned i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        colibri_server_register(server, &handlers[i]);
    if ((!cert && colibri_server_listen(server, addr, err, sizeof(err))) ||
        colibri_serve_files(server, "/", www, err, sizeof(err)) ||
        colibri_server_route(server, "/ws", "room_ws", room, err, sizeof(err)) ||
        colibri_server_route(server, "/events", "room_events", room, err, sizeof(err)) ||
        colibri_server_route(server, "/say", "room_say", room, err, sizeof(err))) {
        fprintf(stderr, "chat: %s\n", err);
        return 1;
    }
    int r = sample_run(server, "chat"); /* until Ctrl-C or SIGTERM; frees server */
    colibri_channel_free(room);
    return r;
}
