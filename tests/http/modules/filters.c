/* filters.c - a "module FILE" library for tests/http/test_rules.py: a
 * module of its own that adds filters through colibri_server_add_filter(),
 * as any module library may, and handlers that show what the filters did.
 *
 * Handlers:
 *   where      "path=P query=Q" (colibri_req_path, colibri_req_query_string)
 *   count      COLIBRI_NEED_BODY, any method: counts its runs, answers the
 *              body's length
 *   count_get  how many times count ran
 * Module:
 *   stamp PREFIX { name = WORD }   a headers-phase filter adding
 *              "X-Stamp: WORD", and an access-phase one answering 418 to a
 *              request with an X-Teapot header */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static int where(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str p = colibri_req_path(req), q = colibri_req_query_string(req);
    colibri_resp_printf(resp, "path=%.*s query=%.*s\n", (int)p.len, p.p, (int)q.len, q.p);
    return 200;
}

static atomic_uint runs;

static int count(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)data;
    struct colibri_str body;
    atomic_fetch_add(&runs, 1);
    int r = colibri_req_body(req, &body);
    if (r)
        return r;
    colibri_resp_printf(resp, "%zu\n", body.len);
    return 200;
}

static int count_get(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    (void)data;
    colibri_resp_printf(resp, "%u\n", atomic_load(&runs));
    return 200;
}

static int stamp_head(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    colibri_resp_header(resp, "X-Stamp", data);
    return 0;
}

static int teapot(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)resp;
    (void)data;
    struct colibri_str v;
    return colibri_req_header(req, "X-Teapot", &v) ? 418 : 0;
}

static const struct colibri_filter stamp_filter = {
    .name = "stamp", .phase = COLIBRI_PHASE_HEADERS, .fn = stamp_head};
static const struct colibri_filter teapot_filter = {
    .name = "teapot", .phase = COLIBRI_PHASE_ACCESS, .fn = teapot};

static int stamp_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                        size_t errlen)
{
    struct colibri_conf *name = colibri_conf_take(sec, "name");
    if (!name)
        return colibri_conf_error(sec, err, errlen, "needs 'name = WORD'");
    char *word = strdup(colibri_conf_value(name));
    if (!word)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    char why[256];
    if (colibri_server_add_filter(srv, colibri_conf_value(sec), &stamp_filter, word, free, why,
                                  sizeof(why)) ||
        colibri_server_add_filter(srv, colibri_conf_value(sec), &teapot_filter, NULL, NULL, why,
                                  sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

int colibri_module_init(struct colibri_server *srv)
{
    static const struct colibri_handler handlers[] = {
        {.name = "where", .fn = where},
        {.name = "count",
         .fn = count,
         .methods = COLIBRI_M(COLIBRI_GET) | COLIBRI_M(COLIBRI_POST),
         .needs = COLIBRI_NEED_BODY},
        {.name = "count_get", .fn = count_get},
    };
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        if (colibri_server_register(srv, &handlers[i]))
            return 1;
    static const struct colibri_module stamp = {.name = "stamp", .from_config = stamp_config};
    return colibri_server_add_module(srv, &stamp);
}
