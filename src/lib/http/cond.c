/* cond.c - conditional requests and ranges (see cond.h). */
#include "http/cond.h"

#include "http/date.h"
#include "http/range.h"
#include "http/request.h"

static struct view trim(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return (struct view){p, (size_t)(end - p)};
}

#define NAME_IS(p, n, lit) ((n) == sizeof(lit) - 1 && mem_case_eq((p), (lit), sizeof(lit) - 1))

/* One pass over the request's header block for the fields we use; the
 * first of each counts (Accept-Encoding lines add up). */
void http_conds_scan(struct view raw, struct http_conds *c)
{
    c->n_ae = 0;
    c->has_if_match = c->has_inm = c->has_ims = c->has_ius = false;
    c->has_range = c->has_if_range = false;
    const char *p = raw.p, *end = raw.p + raw.len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        if (line_end > p && line_end[-1] == '\r')
            line_end--;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon) {
            size_t n = (size_t)(colon - p);
            struct view v = trim(colon + 1, line_end);
            switch (n) {
            case 5:
                if (!c->has_range && NAME_IS(p, n, "Range"))
                    c->range = v, c->has_range = true;
                break;
            case 8:
                if (!c->has_if_range && NAME_IS(p, n, "If-Range"))
                    c->if_range = v, c->has_if_range = true;
                else if (!c->has_if_match && NAME_IS(p, n, "If-Match"))
                    c->if_match = v, c->has_if_match = true;
                break;
            case 13:
                if (!c->has_inm && NAME_IS(p, n, "If-None-Match"))
                    c->if_none_match = v, c->has_inm = true;
                break;
            case 15:
                if (c->n_ae < N_ELEMENTS(c->accept_encoding) && NAME_IS(p, n, "Accept-Encoding"))
                    c->accept_encoding[c->n_ae++] = v;
                break;
            case 17:
                if (!c->has_ims && NAME_IS(p, n, "If-Modified-Since"))
                    c->if_modified_since = v, c->has_ims = true;
                break;
            case 19:
                if (!c->has_ius && NAME_IS(p, n, "If-Unmodified-Since"))
                    c->if_unmodified_since = v, c->has_ius = true;
                break;
            }
        }
        if (!eol)
            break;
        p = eol + 1;
    }
}

/* Whether the entity-tag list matches etag: "*" matches anything; weak
 * comparison ignores W/, strong comparison never matches a weak tag. */
bool http_etag_match(struct view list, const char *etag, size_t elen, bool weak)
{
    const char *p = list.p, *end = list.p + list.len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p == end)
            return false;
        if (*p == '*')
            return true;
        bool is_weak = false;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
            is_weak = true;
            p += 2;
        }
        if (*p != '"')
            return false;
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return false;
        size_t n = (size_t)(q + 1 - p);
        if ((weak || !is_weak) && n == elen && !memcmp(p, etag, n))
            return true;
        p = q + 1;
    }
}

/* "Content-Range: bytes a-b/N\r\n" (a < 0: "bytes * /N") into buf. */
size_t http_content_range(char *buf, int64_t first, uint64_t last, uint64_t size)
{
    size_t n = 0;
    memcpy(buf, "Content-Range: bytes ", 21);
    n = 21;
    if (first < 0) {
        buf[n++] = '*';
    } else {
        n += u64_to_str((uint64_t)first, buf + n);
        buf[n++] = '-';
        n += u64_to_str(last, buf + n);
    }
    buf[n++] = '/';
    n += u64_to_str(size, buf + n);
    buf[n++] = '\r';
    buf[n++] = '\n';
    return n;
}

bool http_if_range(const struct http_conds *c, const char *etag, size_t elen, int64_t mtime)
{
    if (!c->has_if_range)
        return true;
    struct view v = c->if_range;
    /* An entity-tag starts with '"' or "W/": a date starts with a day's
     * name, and "Wed" begins with W too. A weak tag never matches here
     * (If-Range compares strongly). */
    if (v.len && (v.p[0] == '"' || (v.len >= 2 && v.p[0] == 'W' && v.p[1] == '/')))
        return etag && http_etag_match(v, etag, elen, false);
    int64_t d;
    return mtime >= 0 && http_date_parse(v.p, v.len, &d) && d == mtime;
}

/* --- the public API ---------------------------------------------------------- */

int colibri_req_preconditions(struct colibri_request *req, const char *etag, int64_t last_modified)
{
    struct http_conds c;
    http_conds_scan(req->head->headers, &c);
    return http_preconditions(&c, req->head->method, etag, etag ? strlen(etag) : 0, last_modified);
}

int colibri_req_range(struct colibri_request *req, const char *etag, int64_t last_modified,
                      uint64_t size, uint64_t *first, uint64_t *last)
{
    struct http_conds c;
    http_conds_scan(req->head->headers, &c);
    if (!c.has_range || req->head->method != COLIBRI_GET ||
        !http_if_range(&c, etag, etag ? strlen(etag) : 0, last_modified))
        return 0;
    struct http_range r;
    unsigned n = 0;
    switch (http_range_parse(c.range.p, c.range.len, size, &r, 1, &n)) {
    case HTTP_RANGE_UNSATISFIABLE:
        return 416;
    case HTTP_RANGE_OK:
        if (n != 1)
            return 0;
        *first = r.first;
        *last = r.last;
        return 206;
    default:
        return 0;
    }
}
