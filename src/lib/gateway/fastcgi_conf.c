/* fastcgi_conf.c - a "fastcgi PREFIX { ... }" section read into a route (fastcgi.c says
 * what its keys mean): the root, index, front controller, params. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "files/files.h"
#include "gateway/fcgi.h"
#include "gateway/uphead.h"
#include "gateway/upio.h"
#include "gateway/fastcgi.h"
#include "gateway/upstream.h"
#include "http/request.h"
#include "http/status.h"
#include "server/builtin.h"

static _Atomic uint64_t route_ids;

/* --- config --------------------------------------------------------------------------- */

static const struct colibri_handler fcgi_h = {
    .name = "fastcgi",
    .fn = fcgi_handler,
    .methods = (1u << COLIBRI_METHOD_COUNT) - 1,
};

static void route_free(void *arg)
{
    struct fcgi_route *fr = arg;
    if (fr->own_up)
        gw_upstream_free(fr->up);
    if (fr->files)
        files_free(fr->files);
    for (unsigned i = 0; i < fr->n_params; i++) {
        free(fr->params[i].name);
        free(fr->params[i].value);
    }
    free(fr->params);
    free(fr->prefix);
    free(fr->root);
    free(fr->index);
    free(fr->front);
    free(fr);
}

static bool plain_path(const char *p)
{
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p == 0x7f)
            return false;
    return true;
}

static int load(struct colibri_server *srv, struct colibri_conf *sec, struct fcgi_route *fr,
                char *err, size_t errlen)
{
    struct colibri_conf *c, *to = colibri_conf_take(sec, "to");
    char why[512];
    if (!to)
        return colibri_conf_error(sec, err, errlen, "needs 'to = ADDRESS or UPSTREAM'");
    const char *v = colibri_conf_value(to);
    fr->up = builtin_find(srv, "upstream", v);
    if (!fr->up) {
        int r = gw_upstream_single(to, v, &fr->up, err, errlen);
        if (r)
            return r;
        fr->own_up = true;
        if (builtin_allow_connect(srv, (const struct sockaddr *)&fr->up->servers[0].addr, why,
                                  sizeof(why)))
            return colibri_conf_error(to, err, errlen, "%s", why);
    }
    fr->up->holds_process = true; /* PHP-FPM: a child per connection */
    if (fr->up->https)
        return colibri_conf_error(to, err, errlen,
                                  "FastCGI does not go over TLS: '%s' has an https:// server", v);
    if (!(c = colibri_conf_take(sec, "root")))
        return colibri_conf_error(sec, err, errlen, "needs 'root = FOLDER'");
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(colibri_conf_value(c), real) || stat(real, &st) || !S_ISDIR(st.st_mode))
        return colibri_conf_error(c, err, errlen, "'%s' is not a folder", colibri_conf_value(c));
    if (!(fr->root = strdup(strcmp(real, "/") ? real : "")))
        return colibri_conf_error(c, err, errlen, "out of memory");
    fr->root_len = strlen(fr->root);
    if (colibri_server_allow_path(srv, real, COLIBRI_PATH_READ, why, sizeof(why)))
        return colibri_conf_error(c, err, errlen, "%s", why);
    const char *index = "index.php";
    if ((c = colibri_conf_take(sec, "index"))) {
        index = colibri_conf_value(c);
        if (!index[0] || strchr(index, '/') || !plain_path(index))
            return colibri_conf_error(c, err, errlen, "expected a file name");
    }
    if (!(fr->index = strdup(index)))
        return colibri_conf_error(sec, err, errlen, "out of memory");
    if ((c = colibri_conf_take(sec, "front_controller"))) {
        const char *f = colibri_conf_value(c);
        if (f[0] != '/' || strstr(f, "/../") || !plain_path(f) || !fcgi_is_php(f, strlen(f)))
            return colibri_conf_error(c, err, errlen, "expected a path of a .php file under root");
        if (!(fr->front = strdup(f)))
            return colibri_conf_error(c, err, errlen, "out of memory");
    }
    fr->static_files = true;
    if ((c = colibri_conf_take(sec, "static")) &&
        colibri_conf_bool(c, &fr->static_files, err, errlen))
        return -EINVAL;
    while ((c = colibri_conf_take(sec, "param"))) {
        const char *pv = colibri_conf_value(c);
        const char *sp = strchr(pv, ' ');
        size_t nl = sp ? (size_t)(sp - pv) : strlen(pv);
        bool ok = nl > 0 && !(pv[0] >= '0' && pv[0] <= '9');
        for (size_t i = 0; i < nl; i++)
            ok = ok && ((pv[i] >= 'A' && pv[i] <= 'Z') || (pv[i] >= 'a' && pv[i] <= 'z') ||
                        (pv[i] >= '0' && pv[i] <= '9') || pv[i] == '_');
        if (!ok)
            return colibri_conf_error(c, err, errlen, "expected 'param NAME VALUE'");
        struct fcgi_param *np = realloc(fr->params, (fr->n_params + 1) * sizeof(*np));
        if (!np)
            return colibri_conf_error(c, err, errlen, "out of memory");
        fr->params = np;
        const char *val = sp ? sp + 1 : "";
        while (*val == ' ')
            val++;
        np[fr->n_params].name = strndup(pv, nl);
        np[fr->n_params].value = strdup(val);
        if (!np[fr->n_params].name || !np[fr->n_params].value) {
            free(np[fr->n_params].name);
            free(np[fr->n_params].value);
            return colibri_conf_error(c, err, errlen, "out of memory");
        }
        fr->n_params++;
    }
    int r = gw_take_timeout(sec, "connect_timeout", &fr->connect_ms, err, errlen);
    if (!r)
        r = gw_take_timeout(sec, "read_timeout", &fr->read_ms, err, errlen);
    if (!r)
        r = gw_take_timeout(sec, "send_timeout", &fr->send_ms, err, errlen);
    if (r)
        return r;
    if (fr->static_files && files_open(srv, fr->prefix, real, &fr->files, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    if (!fr->own_up)
        gw_upstream_use(fr->up);
    return 0;
}

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'fastcgi PREFIX { to = ...; root = ... }'");
    struct fcgi_route *fr = calloc(1, sizeof(*fr));
    if (!fr)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    fr->id = atomic_fetch_add_explicit(&route_ids, 1, memory_order_relaxed) + 1;
    fr->connect_ms = 5000;
    fr->read_ms = fr->send_ms = 60000;
    fr->prefix = strdup(prefix);
    fr->prefix_len = strlen(prefix);
    if (fr->prefix_len && prefix[fr->prefix_len - 1] == '/')
        fr->prefix_len--;
    int r = fr->prefix ? load(srv, sec, fr, err, errlen)
                       : colibri_conf_error(sec, err, errlen, "out of memory");
    if (r) {
        route_free(fr);
        return r;
    }
    char why[256];
    if (colibri_server_add_route(srv, prefix, &fcgi_h, fr, route_free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(fastcgi) = {.name = "fastcgi", .from_config = from_config};
