/* fields.c - lookups on demand in a parsed request (fields.h). Each scans
 * its text once, left to right, and returns views into it.
 */
#include "http/fields.h"

#include <string.h>

#include "http/chars.h"

bool http_header_find(struct view headers, const char *name, size_t name_len, struct view *value)
{
    const char *p = headers.p, *end = headers.p + headers.len;
    while (p < end) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (!colon)
            return false;
        const char *cr = memchr(colon, '\r', (size_t)(end - colon));
        if (!cr)
            cr = end;
        if ((size_t)(colon - p) == name_len && case_eq(p, name, name_len)) {
            const char *v = colon + 1;
            while (v < cr && is_ows(*v))
                v++;
            const char *v_end = cr;
            while (v_end > v && is_ows(v_end[-1]))
                v_end--;
            *value = mkview(v, v_end);
            return true;
        }
        if (end - cr < 2)
            return false;
        p = cr + 2;
    }
    return false;
}

bool http_header_find_sole(struct view headers, const char *name, size_t name_len,
                           struct view *value)
{
    if (!http_header_find(headers, name, name_len, value))
        return false;
    /* the value's line ends with CRLF, or the block does */
    const char *next = memchr(value->p + value->len, '\n',
                              (size_t)(headers.p + headers.len - value->p - value->len));
    if (!next)
        return true;
    struct view rest = mkview(next + 1, headers.p + headers.len), again;
    return !http_header_find(rest, name, name_len, &again);
}

bool http_media_type_is(struct view ctype, const char *type, size_t type_len)
{
    const char *p = ctype.p, *end = ctype.p + ctype.len;
    while (p < end && is_ows(*p))
        p++;
    if ((size_t)(end - p) < type_len || !case_eq(p, type, type_len))
        return false;
    p += type_len;
    return p == end || *p == ';' || is_ows(*p);
}

int http_param_next(const char **pp, const char *end, unsigned flags, struct http_param *out)
{
    const char *p = *pp;
    /* OWS ";" OWS, any number of times: empty parameters are none */
    for (;;) {
        while (p < end && is_ows(*p))
            p++;
        if (p == end) {
            *pp = p;
            return 0;
        }
        if (*p != ';')
            return -1;
        p++;
        while (p < end && is_ows(*p))
            p++;
        if (p < end && *p != ';')
            break;
    }
    if (p == end) {
        *pp = p;
        return 0;
    }
    const char *n = p;
    while (p < end && is(*p, C_TCHAR))
        p++;
    if (p == n)
        return -1;
    out->name = mkview(n, p);
    const char *after_name = p;
    if (flags & HTTP_PARAM_BWS)
        while (p < end && is_ows(*p))
            p++;
    if (p == end || *p != '=') {
        if (!(flags & HTTP_PARAM_BARE))
            return -1;
        out->value = mkview(after_name, after_name);
        out->has_value = false;
        *pp = after_name;
        return 1;
    }
    p++;
    if (flags & HTTP_PARAM_BWS)
        while (p < end && is_ows(*p))
            p++;
    const char *v = p;
    if (p < end && *p == '"') {
        /* qdtext and quoted-pair: HTAB, SP, VCHAR, obs-text */
        for (p++;; p++) {
            if (p == end)
                return -1;
            if (*p == '"')
                break;
            if (*p == '\\' && ++p == end)
                return -1;
            if (!IS_VALUE((unsigned char)*p))
                return -1;
        }
        p++;
    } else {
        while (p < end && is(*p, C_TCHAR))
            p++;
        if (p == v)
            return -1;
    }
    out->value = mkview(v, p);
    out->has_value = true;
    *pp = p;
    return 1;
}

ssize_t http_param_value(struct view value, char *out, size_t cap)
{
    const char *p = value.p, *end = value.p + value.len;
    size_t o = 0;
    if (p < end && *p == '"') { /* checked by http_param_next(): it ends with '"' */
        p++, end--;
        for (; p < end; p++) {
            if (*p == '\\')
                p++;
            if (o + 1 >= cap)
                return -1;
            out[o++] = *p;
        }
    } else {
        if (value.len >= cap)
            return -1;
        memcpy(out, p, value.len);
        o = value.len;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

bool http_query_find(struct view query, const char *name, size_t name_len, struct view *value)
{
    const char *p = query.p, *end = query.p + query.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *seg_end = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(seg_end - p));
        const char *name_end = eq ? eq : seg_end;
        /* "&&" is no parameter, not one with an empty name */
        if (seg_end > p && (size_t)(name_end - p) == name_len &&
            (name_len == 0 || memcmp(p, name, name_len) == 0)) {
            *value = eq ? mkview(eq + 1, seg_end) : mkview(seg_end, seg_end);
            return true;
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    return false;
}

bool http_cookie_find(struct view cookies, const char *name, size_t name_len, struct view *value)
{
    const char *p = cookies.p, *end = cookies.p + cookies.len;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *pair_end = semi ? semi : end;
        while (p < pair_end && is_ows(*p))
            p++;
        const char *eq = memchr(p, '=', (size_t)(pair_end - p));
        /* a pair without '=' is ignored (RFC 6265 5.2) */
        if (eq) {
            const char *n_end = eq;
            while (n_end > p && is_ows(n_end[-1]))
                n_end--;
            if ((size_t)(n_end - p) == name_len &&
                (name_len == 0 || memcmp(p, name, name_len) == 0)) {
                const char *v = eq + 1, *v_end = pair_end;
                while (v < v_end && is_ows(*v))
                    v++;
                while (v_end > v && is_ows(v_end[-1]))
                    v_end--;
                if (v_end - v >= 2 && *v == '"' && v_end[-1] == '"') {
                    v++;
                    v_end--;
                }
                *value = mkview(v, v_end);
                return true;
            }
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    return false;
}

ssize_t http_percent_decode(char *dst, const char *src, size_t len, bool plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (len - i < 3 || !is(src[i + 1], C_HEX) || !is(src[i + 2], C_HEX))
                return -1;
            c = (char)(hex_val(src[i + 1]) << 4 | hex_val(src[i + 2]));
            /* a decoded NUL, CR or LF would cut or split whatever uses it next */
            if (c == '\0' || c == '\r' || c == '\n')
                return -1;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        dst[o++] = c;
    }
    return (ssize_t)o;
}
