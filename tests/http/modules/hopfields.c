/* hopfields.c - a "module FILE" library for tests/http/test_http2_more.py:
 * a handler that puts HTTP/1.1's connection-specific fields in its answer,
 * which HTTP/2 forbids (RFC 9113 8.2.2) and colibri drops from a stream's
 * HEADERS.
 *
 * Handlers:
 *   hop_fields  "Connection: close", "Keep-Alive: timeout=5", "UPGRADE: h2c"
 *               (the name in capitals), "Transfer-Encoding: chunked",
 *               "Proxy-Connection: close" and "X-Kept: yes", body
 *               "fields\n"; with ?stream=1 the body is sent as a streamed
 *               answer (colibri_resp_send_chunk) instead of a buffered one */
#include <string.h>

#include "colibri.h"

static int hop_fields(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    static const char *const fields[][2] = {
        {"Connection", "close"},          {"Keep-Alive", "timeout=5"},   {"UPGRADE", "h2c"},
        {"Transfer-Encoding", "chunked"}, {"Proxy-Connection", "close"}, {"X-Kept", "yes"},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (colibri_resp_header(resp, fields[i][0], fields[i][1]) < 0)
            return 500;
    struct colibri_str q = colibri_req_query_string(req);
    if (q.len == 8 && !memcmp(q.p, "stream=1", 8)) {
        colibri_resp_send_chunk(resp, "fields\n", 7);
        return 200;
    }
    colibri_resp_printf(resp, "fields\n");
    return 200;
}

int colibri_module_init(struct colibri_server *srv)
{
    static const struct colibri_handler h = {.name = "hop_fields", .fn = hop_fields};
    return colibri_server_register(srv, &h);
}
