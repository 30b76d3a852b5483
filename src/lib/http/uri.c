#include "http/uri.h"

#include <stdbool.h>
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
