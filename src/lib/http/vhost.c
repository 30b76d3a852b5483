/* vhost.c - host names: the request's, without its port, and the config's,
 * checked and made canonical; the site table lookup. */
#include "http/vhost.h"

#include <string.h>

#include "http/chars.h"

#define NAME_MAX_LEN 253 /* RFC 1035, without the trailing dot */

struct view http_host_name(struct view host)
{
    const char *p = host.p, *e = host.p + host.len;
    if (p < e && *p == '[') {
        /* an IP literal: up to and including its ']' (the parser checked it) */
        const char *close = memchr(p, ']', host.len);
        return (struct view){.p = p, .len = close ? (size_t)(close + 1 - p) : host.len};
    }
    const char *colon = memchr(p, ':', host.len);
    if (colon)
        e = colon;
    if (e > p && e[-1] == '.')
        e--;
    return (struct view){.p = p, .len = (size_t)(e - p)};
}

const struct http_vhost *http_vhost_find(const struct http_vhost *v, unsigned n, struct view host)
{
    struct view h = http_host_name(host);
    const struct http_vhost *best = NULL;
    size_t best_m = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t m = host_name_match(v[i].name, v[i].len, h.p, h.len);
        if (m == SIZE_MAX)
            return &v[i];
        if (m > best_m) {
            best_m = m;
            best = &v[i];
        }
    }
    return best;
}

int http_vhost_canon(const char *name, char *out, size_t cap, const char **why)
{
    size_t n = strlen(name);
    if (n && name[0] == '[') {
        size_t i = 1;
        bool colon = false;
        while (i < n && (IS_HEX(name[i]) || name[i] == ':' || name[i] == '.'))
            colon |= name[i++] == ':';
        if (i + 1 == n && name[i] == ']' && colon)
            goto copy;
        if (i < n && name[i] == ']' && i + 1 < n && name[i + 1] == ':')
            *why = "a site name has no port (every port matches)";
        else
            *why = "not an IPv6 literal ('[' hex digits and ':' ']')";
        return -1;
    }
    if (n && name[n - 1] == '.')
        n--; /* "example.com." is "example.com" */
    if (n == 0) {
        *why = "empty host name";
        return -1;
    }
    if (n > NAME_MAX_LEN) {
        *why = "host name longer than 253 bytes";
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == '.') {
            if (i == 0 || name[i - 1] == '.') {
                *why = "empty label in host name";
                return -1;
            }
        } else if (c == ':') {
            *why = "a site name has no port (every port matches)";
            return -1;
        } else if (c == '*') {
            if (i != 0 || n < 3 || name[1] != '.') {
                *why = "a wildcard is '*.' before the rest of the name (\"*.example.com\")";
                return -1;
            }
        } else if (!IS_ALPHA(c) && !IS_DIGIT(c) && c != '-') {
            *why = "a host name has only letters, digits, '-' and '.'";
            return -1;
        }
    }
copy:
    if (n + 1 > cap) {
        *why = "host name too long";
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (char)lower_tab[(unsigned char)name[i]];
    out[n] = '\0';
    return (int)n;
}
