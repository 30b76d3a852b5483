/* filter.c - running a site's filters at their phases (filter.h), and the
 * calls filters make: colibri_req_rewrite(), colibri_resp_header_remove(). */
#include "http/filter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "http/request.h"

bool http_prefix_match(const char *prefix, size_t plen, const char *path, size_t len)
{
    if (len < plen || memcmp(path, prefix, plen) != 0)
        return false;
    return len == plen || prefix[plen - 1] == '/' || path[plen] == '/';
}

int http_filters_add(struct http_filters *fs, const struct colibri_filter *f, const char *prefix,
                     void *data, void (*free_data)(void *), int line)
{
    char *p = strdup(prefix);
    struct http_filter *v = p ? realloc(fs->v, (fs->n + 1) * sizeof(*v)) : NULL;
    if (!v) {
        free(p);
        return -ENOMEM;
    }
    fs->v = v;
    /* behind the last of its phase: the phases stay sorted; in the
     * headers phase behind the last of a prefix as short or shorter (outer
     * sections first, in config order among equals) */
    unsigned at = fs->first[f->phase + 1];
    size_t plen = strlen(p);
    if (f->phase == COLIBRI_PHASE_HEADERS)
        while (at > fs->first[f->phase] && v[at - 1].prefix_len > plen)
            at--;
    memmove(v + at + 1, v + at, (fs->n - at) * sizeof(*v));
    v[at] = (struct http_filter){.f = *f,
                                 .prefix = p,
                                 .prefix_len = plen,
                                 .data = data,
                                 .free_data = free_data,
                                 .line = line};
    fs->n++;
    for (unsigned ph = f->phase + 1; ph <= COLIBRI_PHASE_COUNT; ph++)
        fs->first[ph]++;
    return 0;
}

void http_filters_free(struct http_filters *fs)
{
    for (unsigned i = 0; i < fs->n; i++) {
        if (fs->v[i].free_data)
            fs->v[i].free_data(fs->v[i].data);
        free(fs->v[i].prefix);
    }
    free(fs->v);
    *fs = (struct http_filters){0};
}

static inline bool applies(const struct http_filter *f, const struct colibri_request *req)
{
    return http_prefix_match(f->prefix, f->prefix_len, req->path.p, req->path.len);
}

int http_filters_before(struct colibri_request *req, struct colibri_response *resp,
                        const struct http_filters *fs)
{
    unsigned a = fs->first[COLIBRI_PHASE_REWRITE], b = fs->first[COLIBRI_PHASE_REWRITE + 1];
    /* the rewrites: the first that applies and rewrites sends the new path
     * through them again, from the first */
    for (unsigned i = a; i < b;) {
        const struct http_filter *f = &fs->v[i];
        unsigned done = req->rewrites;
        int r = applies(f, req) ? f->f.fn(req, resp, f->data) : 0;
        if (r)
            return r;
        if (req->rewrites != done) {
            i = a;
            continue;
        }
        i++;
    }
    a = fs->first[COLIBRI_PHASE_ACCESS];
    b = fs->first[COLIBRI_PHASE_ACCESS + 1];
    for (unsigned i = a; i < b; i++) {
        const struct http_filter *f = &fs->v[i];
        int r = applies(f, req) ? f->f.fn(req, resp, f->data) : 0;
        if (r)
            return r;
    }
    return 0;
}

const char *http_filters_head(struct colibri_request *req, struct colibri_response *resp,
                              const char *mime)
{
    struct http_conn *hc = req->hc;
    const struct http_filters *fs = hc->filters;
    req->head_filters = false; /* once per answer */
    /* the lines written from elsewhere join the handler's, so that a
     * filter sees (and may remove) every one */
    if (resp->lines.len) {
        if (strbuf_reserve(&hc->hdrs, resp->lines.len) == 0) {
            memmove(hc->hdrs.buf + resp->lines.len, hc->hdrs.buf, hc->hdrs.len);
            memcpy(hc->hdrs.buf, resp->lines.p, resp->lines.len);
            hc->hdrs.len += resp->lines.len;
            resp->lines = (struct view){0};
        } else {
            return mime; /* out of memory: the answer goes out unfiltered */
        }
    }
    resp->mime = mime;
    resp->filtering = true;
    for (unsigned i = fs->first[COLIBRI_PHASE_HEADERS]; i < fs->first[COLIBRI_PHASE_HEADERS + 1];
         i++) {
        const struct http_filter *f = &fs->v[i];
        if (applies(f, req))
            f->f.fn(req, resp, f->data);
    }
    resp->filtering = false;
    return resp->mime;
}

int colibri_req_rewrite(struct colibri_request *req, const char *target, size_t len)
{
    if (req->rewrites >= HTTP_REWRITES_MAX)
        return -ELOOP;
    if (!len || target[0] != '/')
        return -EBADMSG;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)target[i];
        if (c <= ' ' || c >= 0x7f || c == '#')
            return -EBADMSG;
    }
    char *t = arena_alloc(&req->hc->arena, len + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t, target, len);
    t[len] = '\0';
    const char *q = memchr(t, '?', len);
    struct http_head *head = req->head;
    struct view path = head->path, query = head->query;
    head->path = (struct view){t, q ? (size_t)(q - t) : len};
    head->query = q ? (struct view){q + 1, len - (size_t)(q + 1 - t)} : (struct view){t + len, 0};
    int r = http_decode_path_escaped(req);
    if (r) {
        head->path = path;
        head->query = query;
        return r;
    }
    if (q)
        head->flags |= HTTP_F_HAS_QUERY;
    else
        head->flags &= (uint16_t)~HTTP_F_HAS_QUERY;
    req->rewrites++;
    return 0;
}

int colibri_resp_header_remove(struct colibri_response *resp, const char *name)
{
    struct strbuf *h = &resp->req->hc->hdrs;
    size_t nlen = strlen(name), at = 0, out = 0;
    int n = 0;
    if (resp->lines.len && !resp->filtering)
        return 0; /* lines not ours to edit (a handler's call, outside the phase) */
    while (at < h->len) {
        const char *eol = memchr(h->buf + at, '\n', h->len - at);
        size_t end = eol ? (size_t)(eol - h->buf) + 1 : h->len;
        bool drop =
            end - at > nlen && h->buf[at + nlen] == ':' && mem_case_eq(h->buf + at, name, nlen);
        if (drop) {
            n++;
        } else {
            memmove(h->buf + out, h->buf + at, end - at);
            out += end - at;
        }
        at = end;
    }
    h->len = out;
    if (h->buf)
        h->buf[out] = '\0';
    return n;
}
