/* multipart.c - the multipart/form-data parser (multipart.h): a state
 * machine over the body, which scans content in runs between CRs and
 * collects each part's header block in a buffer of its own.
 */
#include "http/multipart.h"

#include <string.h>

#include "http/chars.h"
#include "http/fields.h"

enum {
    MP_S_PREAMBLE = 0, /* discarding until the first delimiter */
    MP_S_AFTER_DELIM,  /* "--" (close), padding or CRLF after a delimiter */
    MP_S_CLOSE,        /* the second '-' of a close delimiter */
    MP_S_PADDING,      /* transport padding (SP, HTAB) before CRLF */
    MP_S_DELIM_LF,
    MP_S_HEADERS,
    MP_S_CONTENT,
    MP_S_EPILOGUE,
    MP_S_ERROR,
};

/* RFC 2046 bchars: DIGIT / ALPHA / "'()+_,-./:=?" / SP */
static bool is_bchar(char c)
{
    return IS_ALPHA(c) || IS_DIGIT(c) || (c && strchr("'()+_,-./:=? ", c));
}

/* One parameter, "OWS ; OWS name=value", at *pp (http_param_next()); the
 * value (a token or a quoted-string, unescaped) into out. 1 with a
 * parameter, 0 at the end, -1 when malformed or the value is longer than
 * cap - 1. */
static int next_param(const char **pp, const char *end, struct view *name, char *out, size_t cap,
                      size_t *outlen)
{
    struct http_param prm;
    int r = http_param_next(pp, end, 0, &prm);
    if (r <= 0)
        return r;
    ssize_t n = http_param_value(prm.value, out, cap);
    if (n < 0)
        return -1;
    *name = prm.name;
    *outlen = (size_t)n;
    return 1;
}

int mp_boundary(struct view ctype, char out[MP_BOUNDARY_MAX + 1], size_t *len)
{
    static const char mt[] = "multipart/form-data";
    if (!http_media_type_is(ctype, mt, sizeof(mt) - 1))
        return -1;
    const char *p = ctype.p, *end = ctype.p + ctype.len;
    while (is_ows(*p)) /* to the parameters, after what was just checked */
        p++;
    p += sizeof(mt) - 1;
    bool found = false;
    struct view name;
    char val[MP_BOUNDARY_MAX + 1];
    size_t vlen;
    int r;
    while ((r = next_param(&p, end, &name, val, sizeof(val), &vlen)) > 0) {
        if (name.len != 8 || !case_eq(name.p, "boundary", 8))
            continue;
        if (found || vlen == 0 || val[vlen - 1] == ' ')
            return -2;
        for (size_t i = 0; i < vlen; i++)
            if (!is_bchar(val[i]))
                return -2;
        memcpy(out, val, vlen + 1);
        *len = vlen;
        found = true;
    }
    return r < 0 || !found ? -2 : 0;
}

void mp_init(struct mp_parser *p, const char *boundary, size_t blen, unsigned max_parts)
{
    memset(p, 0, offsetof(struct mp_parser, hdr));
    if (blen > MP_BOUNDARY_MAX)
        blen = MP_BOUNDARY_MAX;
    memcpy(p->delim, "\r\n--", 4);
    memcpy(p->delim + 4, boundary, blen);
    p->dlen = 4 + blen;
    p->max_parts = max_parts ? max_parts : 1;
    /* the body's first line may be the delimiter: as if a CRLF came first */
    p->match = 2;
    p->state = MP_S_PREAMBLE;
}

static size_t fail(struct mp_parser *p, struct mp_event *ev, size_t used, const char *why)
{
    p->state = MP_S_ERROR;
    p->error = why;
    ev->type = MP_ERROR;
    return used;
}

/* Stores v NUL-terminated in p->vals at *o: its address, or NULL when full. */
static const char *keep(struct mp_parser *p, size_t *o, const char *v, size_t n)
{
    if (*o + n + 1 > sizeof(p->vals))
        return NULL;
    char *s = p->vals + *o;
    memcpy(s, v, n);
    s[n] = '\0';
    *o += n + 1;
    return s;
}

/* Content-Disposition: form-data; name="..."; filename="..." */
static const char *disposition(struct mp_parser *p, const char *v, const char *end, size_t *o)
{
    const char *t = v;
    while (v < end && is(*v, C_TCHAR))
        v++;
    if (v - t != 9 || !case_eq(t, "form-data", 9))
        return "Content-Disposition is not form-data";
    struct view name;
    size_t vlen;
    int r;
    char *val = p->vals + *o; /* decoded in place, then kept if wanted */
    size_t cap = sizeof(p->vals) - *o;
    while ((r = next_param(&v, end, &name, val, cap, &vlen)) > 0) {
        const char **to = NULL;
        if (name.len == 4 && case_eq(name.p, "name", 4))
            to = &p->name;
        else if (name.len == 8 && case_eq(name.p, "filename", 8))
            to = &p->filename;
        else
            continue; /* filename* and others: RFC 7578 4.2 leaves them out */
        if (*to)
            return "a repeated Content-Disposition parameter";
        *to = val;
        *o += vlen + 1;
        val = p->vals + *o;
        cap = sizeof(p->vals) - *o;
    }
    if (r < 0)
        return "a malformed Content-Disposition";
    if (!p->name)
        return "a part without a name";
    return NULL;
}

/* The header block hdr[0..hlen) (without its final empty line): part
 * fields, or an error message. */
static const char *part_headers(struct mp_parser *p)
{
    const char *s = p->hdr, *end = p->hdr + p->hlen;
    size_t o = 0;
    bool have_cd = false;
    p->name = p->filename = p->content_type = NULL;
    while (s < end) {
        const char *eol = s;
        while (eol + 1 < end && !(eol[0] == '\r' && eol[1] == '\n'))
            eol++;
        if (eol + 1 >= end)
            eol = end; /* the last line */
        const char *n = s;
        while (s < eol && is(*s, C_TCHAR))
            s++;
        if (s == n || s == eol || *s != ':')
            return "a malformed part header";
        size_t nlen = (size_t)(s - n);
        const char *v = s + 1, *ve = eol;
        while (v < ve && is_ows(*v))
            v++;
        while (ve > v && is_ows(ve[-1]))
            ve--;
        for (const char *q = v; q < ve; q++)
            if (!IS_VALUE((unsigned char)*q))
                return "a control character in a part header";
        if (nlen == 19 && case_eq(n, "Content-Disposition", 19)) {
            if (have_cd)
                return "a repeated Content-Disposition";
            have_cd = true;
            const char *why = disposition(p, v, ve, &o);
            if (why)
                return why;
        } else if (nlen == 12 && case_eq(n, "Content-Type", 12)) {
            if (p->content_type)
                return "a repeated Content-Type";
            if (v == ve)
                return "an empty Content-Type";
            if (!(p->content_type = keep(p, &o, v, (size_t)(ve - v))))
                return "part headers too large";
        }
        s = eol + 2;
    }
    if (!have_cd)
        return "a part without Content-Disposition";
    if (!p->content_type)
        p->content_type = "text/plain";
    return NULL;
}

size_t mp_feed(struct mp_parser *p, const char *buf, size_t len, struct mp_event *ev)
{
    size_t i = 0;
    ev->data = NULL;
    ev->len = 0;
    while (i < len) {
        char c = buf[i];
        switch (p->state) {
        case MP_S_PREAMBLE:
        case MP_S_CONTENT:
            if (p->match == 0) {
                const char *cr = memchr(buf + i, '\r', len - i);
                size_t stop = cr ? (size_t)(cr - buf) : len;
                if (stop > i && p->state == MP_S_CONTENT) {
                    ev->type = MP_DATA;
                    ev->data = buf + i;
                    ev->len = stop - i;
                    return stop;
                }
                i = stop;
                if (cr) {
                    p->match = 1;
                    i++;
                }
                continue;
            }
            if (c == p->delim[p->match]) {
                i++;
                if (++p->match == p->dlen) {
                    p->match = 0;
                    p->state = MP_S_AFTER_DELIM;
                    if (p->in_part) {
                        p->in_part = false;
                        ev->type = MP_PART_END;
                        return i;
                    }
                }
                continue;
            }
            /* not a delimiter after all: what matched was content (CR is
             * not a bchar, so no later byte of it can start a match) */
            if (p->state == MP_S_CONTENT) {
                ev->type = MP_DATA;
                ev->data = p->delim;
                ev->len = p->match;
                p->match = 0;
                return i;
            }
            p->match = 0;
            continue;
        case MP_S_AFTER_DELIM:
            i++;
            if (c == '-')
                p->state = MP_S_CLOSE;
            else if (c == ' ' || c == '\t')
                p->state = MP_S_PADDING;
            else if (c == '\r')
                p->state = MP_S_DELIM_LF;
            else
                return fail(p, ev, i, "the boundary inside content");
            continue;
        case MP_S_CLOSE:
            i++;
            if (c != '-')
                return fail(p, ev, i, "a malformed close delimiter");
            p->state = MP_S_EPILOGUE;
            ev->type = MP_DONE;
            return i;
        case MP_S_PADDING:
            i++;
            if (c == '\r')
                p->state = MP_S_DELIM_LF;
            else if (c != ' ' && c != '\t')
                return fail(p, ev, i, "the boundary inside content");
            continue;
        case MP_S_DELIM_LF:
            i++;
            if (c != '\n')
                return fail(p, ev, i, "a delimiter line without CRLF");
            if (p->parts++ == p->max_parts)
                return fail(p, ev, i, "too many parts");
            p->state = MP_S_HEADERS;
            p->hlen = 0;
            continue;
        case MP_S_HEADERS: {
            i++;
            if (p->hlen == sizeof(p->hdr))
                return fail(p, ev, i, "part headers too large");
            p->hdr[p->hlen++] = c;
            size_t h = p->hlen;
            /* a LF only after CR, a CR only before LF */
            if (c == '\n' && (h < 2 || p->hdr[h - 2] != '\r'))
                return fail(p, ev, i, "a bare LF in part headers");
            if (h >= 2 && p->hdr[h - 2] == '\r' && c != '\n')
                return fail(p, ev, i, "a bare CR in part headers");
            if (c != '\n')
                continue;
            if (h == 2) {
                p->hlen = 0; /* no fields at all */
            } else if (h >= 4 && p->hdr[h - 3] == '\n') {
                p->hlen = h - 4;
            } else {
                if (h > 2 && (p->hdr[0] == ' ' || p->hdr[0] == '\t'))
                    return fail(p, ev, i, "a folded part header");
                continue; /* the end of a field line */
            }
            /* obs-fold: a line that starts with whitespace */
            for (size_t k = 0; k < p->hlen; k++)
                if ((k == 0 || p->hdr[k - 1] == '\n') && (p->hdr[k] == ' ' || p->hdr[k] == '\t'))
                    return fail(p, ev, i, "a folded part header");
            const char *why = part_headers(p);
            if (why)
                return fail(p, ev, i, why);
            p->state = MP_S_CONTENT;
            p->in_part = true;
            ev->type = MP_PART;
            return i;
        }
        case MP_S_EPILOGUE:
            ev->type = MP_DONE;
            return len;
        default:
            ev->type = MP_ERROR;
            return len;
        }
    }
    ev->type = p->state == MP_S_ERROR ? MP_ERROR : p->state == MP_S_EPILOGUE ? MP_DONE : MP_MORE;
    return len;
}

int mp_finish(struct mp_parser *p)
{
    if (p->state == MP_S_EPILOGUE)
        return 0;
    if (p->state != MP_S_ERROR) {
        p->state = MP_S_ERROR;
        p->error = "no close delimiter";
    }
    return -1;
}
