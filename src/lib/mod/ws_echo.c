/* ws_echo: a WebSocket endpoint that sends back every message it
 * receives, unchanged (text as text, binary as binary), for demos and
 * external checks (the Autobahn testsuite's echo server). Messages up to
 * 16 MiB; permessage-deflate when the client offers it. */
#include "server/builtin.h"

#define ECHO_MAX_MESSAGE (16u * 1024 * 1024)

static int ws_echo(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    const struct colibri_ws_options opt = {.max_message = ECHO_MAX_MESSAGE, .deflate = true};
    struct colibri_ws *ws;
    int status = colibri_ws_upgrade(req, resp, &opt, &ws);
    if (status)
        return status;
    struct colibri_ws_msg m;
    while (colibri_ws_read(ws, &m) == 0)
        if (colibri_ws_send(ws, m.type, m.p, m.len) < 0)
            break;
    return 0;
}

BUILTIN_HANDLER(ws_echo) = {.name = "ws_echo", .fn = ws_echo};
