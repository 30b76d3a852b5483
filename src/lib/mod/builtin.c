/* The built-in handlers: hello_world and echo. */
#include "base/common.h"
#include "server/builtin.h"

/* "Hello, World!", or "Hello, NAME!" for ?name=NAME. The constant answer
 * leaves as static bytes: not copied into the body buffer first. */
static int hello_world(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct colibri_str name;
    (void)data;
    if (colibri_req_query_string(req).len && colibri_req_query(req, "name", &name)) {
        if (colibri_resp_append(resp, "Hello, ", 7) < 0 ||
            colibri_resp_append(resp, name.p, name.len) < 0 ||
            colibri_resp_append(resp, "!", 1) < 0)
            return 500;
        return 200;
    }
    return colibri_resp_send_static(resp, 200, "text/plain", "Hello, World!", 13);
}

/* The body as received (de-chunked), or, without a body, the request line
 * and headers: a debugging aid. */
static int echo(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    if (colibri_req_has_body(req)) {
        /* a large body kept in a file goes back from there, with sendfile */
        int fd = colibri_req_body_fd(req);
        struct colibri_str body;
        if (fd >= 0 && !colibri_req_body(req, &body))
            return colibri_resp_sendfile(resp, 200, "text/plain", fd, 0, body.len);
        int r = colibri_req_body(req, &body);
        if (r)
            return r;
        return colibri_resp_append(resp, body.p, body.len) < 0 ? 500 : 200;
    }
    struct colibri_str target = colibri_req_target(req), headers = colibri_req_headers_raw(req);
    if (colibri_resp_printf(resp, "%s %.*s HTTP/1.%d\r\n",
                            colibri_method_name(colibri_req_method(req)), (int)target.len, target.p,
                            colibri_req_http_minor(req)) < 0 ||
        colibri_resp_append(resp, headers.p, headers.len) < 0)
        return 500;
    return 200;
}

BUILTIN_HANDLER(hello_world) = {.name = "hello_world", .fn = hello_world};

BUILTIN_HANDLER(echo) = {
    .name = "echo",
    .fn = echo,
    .methods = COLIBRI_M(COLIBRI_GET) | COLIBRI_M(COLIBRI_HEAD) | COLIBRI_M(COLIBRI_POST) |
               COLIBRI_M(COLIBRI_PUT) | COLIBRI_M(COLIBRI_DELETE) | COLIBRI_M(COLIBRI_OPTIONS) |
               COLIBRI_M(COLIBRI_PATCH),
    .needs = COLIBRI_NEED_BODY,
};
