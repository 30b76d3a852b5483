/* response.c - the response module: a prefix answered with a fixed status.
 *
 *     response /gone {
 *         code = 410     # a 4xx or 5xx of src/lib/http/status.txt
 *     }
 *
 * The body is the server's error page for that status (error_template
 * when one is configured). Every method is answered. */
#include <stdlib.h>
#include <string.h>

#include "server/builtin.h"

static int answer(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)resp;
    return *(const int *)data; /* an empty body: the server writes the page */
}

static const struct colibri_handler response_handler = {
    .name = "response",
    .fn = answer,
    .methods = (1u << COLIBRI_METHOD_COUNT) - 1,
};

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    struct colibri_conf *code = colibri_conf_take(sec, "code");
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen, "expected 'response PREFIX { code = N }'");
    if (!code)
        return colibri_conf_error(sec, err, errlen, "needs 'code = 4xx or 5xx'");
    long c;
    int r = colibri_conf_int(code, 400, 599, &c, err, errlen);
    if (r)
        return r;
    int *data = malloc(sizeof(*data));
    if (!data)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    *data = (int)c;
    char why[256];
    if (colibri_server_add_route(srv, prefix, &response_handler, data, free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(response) = {.name = "response", .from_config = from_config};
