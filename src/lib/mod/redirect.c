/* redirect.c - the redirect module: a prefix that sends clients elsewhere.
 *
 *     redirect /old {
 *         to = /new       # or an absolute URL (http://host/path)
 *         code = 301      # 301, 302, 303, 307 or 308; default 301
 *     }
 *
 * The rest of the path below the prefix and the query are appended:
 * "/old/a/b?x=1" goes to "/new/a/b?x=1". The rest comes from the decoded,
 * normalised path, escaped again, never from the raw target, so no request
 * can turn the Location into another host. Every method is answered. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/uri.h"
#include "server/builtin.h"

struct redirect {
    int code;
    size_t prefix_len;
    size_t to_len;
    char to[]; /* NUL-terminated */
};

static int answer(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    const struct redirect *rd = data;
    struct colibri_str path = colibri_req_path(req), q = colibri_req_query_string(req);
    /* the router matched whole segments, so the rest is empty or a "/..." */
    const char *rest = path.p + rd->prefix_len;
    size_t rest_len = path.len > rd->prefix_len ? path.len - rd->prefix_len : 0;
    if (rest_len && rest[0] == '/' && rd->to_len && rd->to[rd->to_len - 1] == '/')
        rest++, rest_len--; /* "/new/" + "/a": one slash between */
    char *loc = http_location(rd->to, rd->to_len, rest, rest_len, false, q.p, q.len);
    if (!loc)
        return 503;
    int r = colibri_resp_header(resp, "Location", loc);
    free(loc);
    return r < 0 ? 500 : rd->code;
}

static const struct colibri_handler redirect_handler = {
    .name = "redirect",
    .fn = answer,
    .methods = (1u << COLIBRI_METHOD_COUNT) - 1,
};

/* A target is a path, or an absolute http(s) URL, of visible ASCII only:
 * it goes into a header as it is. */
static bool target_ok(const char *t)
{
    if (!(t[0] == '/' || !strncmp(t, "http://", 7) || !strncmp(t, "https://", 8)))
        return false;
    if (t[0] == '/' && t[1] == '/')
        return false; /* protocol-relative: another host, say so with a scheme */
    for (const char *c = t; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            return false;
    return true;
}

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    struct colibri_conf *to = colibri_conf_take(sec, "to"), *code = colibri_conf_take(sec, "code");
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen, "expected 'redirect PREFIX { to = URL }'");
    if (!to)
        return colibri_conf_error(sec, err, errlen, "needs 'to = PATH or URL'");
    if (!target_ok(colibri_conf_value(to)))
        return colibri_conf_error(to, err, errlen, "'%s' is not a path (/...) or an http(s):// URL",
                                  colibri_conf_value(to));
    long c = 301;
    if (code) {
        int r = colibri_conf_int(code, 300, 399, &c, err, errlen);
        if (r)
            return r;
        if (c != 301 && c != 302 && c != 303 && c != 307 && c != 308)
            return colibri_conf_error(code, err, errlen, "must be 301, 302, 303, 307 or 308");
    }
    size_t tl = strlen(colibri_conf_value(to));
    struct redirect *rd = malloc(sizeof(*rd) + tl + 1);
    if (!rd)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    rd->code = (int)c;
    rd->prefix_len = strlen(prefix);
    /* "redirect /old/": the rest of "/old/a" is "/a", as under "/old", so
     * it never runs into the target ("/new" + "a", or "https://host" + ".x") */
    if (prefix[rd->prefix_len - 1] == '/')
        rd->prefix_len--;
    rd->to_len = tl;
    memcpy(rd->to, colibri_conf_value(to), tl + 1);
    char why[256];
    if (colibri_server_add_route(srv, prefix, &redirect_handler, rd, free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(redirect) = {.name = "redirect", .from_config = from_config};
