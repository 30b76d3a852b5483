#include "http/uri.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool path_byte_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=:@/", c));
}

size_t http_path_escape(char *out, const char *p, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (path_byte_ok(c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    return (size_t)(o - out);
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t http_query_escape(char *out, const char *q, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *o = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)q[i];
        /* an escape stays as sent; a '%' that starts none is one itself */
        bool escape = c == '%' && len - i >= 3 && is_hex((unsigned char)q[i + 1]) &&
                      is_hex((unsigned char)q[i + 2]);
        if (escape || (c != '%' && (path_byte_ok(c) || c == '?'))) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    return (size_t)(o - out);
}

char *http_location(const char *base, size_t base_len, const char *path, size_t path_len,
                    bool slash, const char *query, size_t query_len)
{
    char *loc = malloc(base_len + 3 * path_len + 1 + 1 + 3 * query_len + 1);
    if (!loc)
        return NULL;
    char *o = loc;
    memcpy(o, base, base_len);
    o += base_len;
    o += http_path_escape(o, path, path_len);
    if (slash)
        *o++ = '/';
    if (query_len) {
        *o++ = '?';
        o += http_query_escape(o, query, query_len);
    }
    *o = '\0';
    return loc;
}
