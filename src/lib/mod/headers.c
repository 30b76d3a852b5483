/* headers.c - the headers module: a filter of the headers phase.
 *
 *     headers / {
 *         set Strict-Transport-Security = "max-age=63072000; includeSubDomains"
 *         add Link = "</style.css>; rel=preload; as=style"
 *         remove = X-Powered-By
 *     }
 *
 * On every answer under the prefix (handlers, files, redirects, error
 * pages, 304s), in the order written: set replaces every line of the name
 * (or adds one), add appends one, remove deletes them all. Several
 * sections that apply run outer first (filter.c orders the phase by
 * prefix). Server and Date stay the server's, and so do the framing
 * fields (Content-Length, Transfer-Encoding, Connection); Content-Type
 * may be set or removed, not added twice. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/request.h"
#include "server/builtin.h"

enum op_kind { OP_SET, OP_ADD, OP_REMOVE };

struct op {
    enum op_kind kind;
    bool type; /* the name is Content-Type: the answer's type */
    char *name;
    char *value;
};

struct headers {
    unsigned n;
    struct op ops[];
};

static int apply(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    (void)req;
    const struct headers *h = data;
    for (unsigned i = 0; i < h->n; i++) {
        const struct op *o = &h->ops[i];
        if (o->type) {
            /* the answer's type is resp->mime, or a line of the head: a
             * proxy or FastCGI passes its upstream's on as it came (and a
             * handler may write one); an answer without a type (a 304, a
             * 204) gets none */
            bool line = colibri_resp_header_remove(resp, "Content-Type") > 0;
            if (resp->mime || line)
                colibri_resp_set_type(resp, o->kind == OP_REMOVE ? NULL : o->value);
            continue;
        }
        if (o->kind != OP_ADD)
            colibri_resp_header_remove(resp, o->name);
        if (o->kind != OP_REMOVE)
            colibri_resp_header(resp, o->name, o->value);
    }
    return 0;
}

static void headers_free(void *p)
{
    struct headers *h = p;
    for (unsigned i = 0; h && i < h->n; i++) {
        free(h->ops[i].name);
        free(h->ops[i].value);
    }
    free(h);
}

static const struct colibri_filter headers_filter = {
    .name = "headers",
    .phase = COLIBRI_PHASE_HEADERS,
    .fn = apply,
};

static bool token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  (c && strchr("!#$%&'*+-.^_`|~", c));
        if (!ok)
            return false;
    }
    return true;
}

/* Why the server keeps name to itself, or NULL. */
static const char *reserved(const char *name)
{
    if (!strcasecmp(name, "Server") || !strcasecmp(name, "Date"))
        return "Server and Date are the server's";
    if (!strcasecmp(name, "Content-Length") || !strcasecmp(name, "Transfer-Encoding") ||
        !strcasecmp(name, "Connection"))
        return "the framing fields are the server's";
    return NULL;
}

/* One key into *o: 0, or an error naming it. */
static int one(struct colibri_conf *k, struct op *o, char *err, size_t errlen)
{
    const char *key = colibri_conf_name(k);
    size_t n;
    const char *const *w = colibri_conf_words(k, &n);
    if (!strcmp(key, "remove")) {
        o->kind = OP_REMOVE;
        if (n != 1)
            return colibri_conf_error(k, err, errlen, "expected 'remove = NAME'");
    } else if (!strcmp(key, "set") || !strcmp(key, "add")) {
        o->kind = key[0] == 's' ? OP_SET : OP_ADD;
        /* NAME = VALUE, or NAME VALUE; the value one word (quote it) */
        size_t v = n >= 2 && !strcmp(w[1], "=") ? 2 : 1;
        if (n != v + 1)
            return colibri_conf_error(
                k, err, errlen, "expected '%s NAME = VALUE' (quote a value with blanks)", key);
        for (const char *c = w[v]; *c; c++)
            if ((unsigned char)*c < ' ' && *c != '\t')
                return colibri_conf_error(k, err, errlen, "a control byte in the value of '%s'",
                                          w[0]);
        if (!(o->value = strdup(w[v])))
            return colibri_conf_error(k, err, errlen, "out of memory");
    } else {
        return colibri_conf_error(k, err, errlen, "unknown key (headers takes set, add, remove)");
    }
    if (!token(w[0]))
        return colibri_conf_error(k, err, errlen, "bad header name '%s'", w[0]);
    const char *why = reserved(w[0]);
    if (why)
        return colibri_conf_error(k, err, errlen, "%s: %s", w[0], why);
    o->type = !strcasecmp(w[0], "Content-Type");
    if (o->type && o->kind == OP_ADD)
        return colibri_conf_error(k, err, errlen, "an answer has one Content-Type: use set");
    if (!(o->name = strdup(w[0])))
        return colibri_conf_error(k, err, errlen, "out of memory");
    return 0;
}

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(sec, err, errlen,
                                  "expected 'headers PREFIX { set NAME = VALUE ... }'");
    struct headers *h = calloc(1, sizeof(*h));
    struct colibri_conf *k;
    if (!h)
        return colibri_conf_error(sec, err, errlen, "out of memory");
    while ((k = colibri_conf_take_any(sec))) {
        struct headers *g = realloc(h, sizeof(*h) + (h->n + 1) * sizeof(h->ops[0]));
        if (!g) {
            headers_free(h);
            return colibri_conf_error(k, err, errlen, "out of memory");
        }
        h = g;
        h->ops[h->n] = (struct op){0};
        int r = one(k, &h->ops[h->n], err, errlen);
        h->n++;
        if (r) {
            headers_free(h);
            return r;
        }
    }
    if (!h->n) {
        headers_free(h);
        return colibri_conf_error(sec, err, errlen, "needs set, add or remove lines");
    }
    char why[256];
    if (colibri_server_add_filter(srv, prefix, &headers_filter, h, headers_free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(headers) = {.name = "headers", .from_config = from_config};
