/* rewrite_tpl.c - compiling and expanding a rewrite's replacement
 * (rewrite_tpl.h). */
#include "mod/rewrite_tpl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool add_part(struct rw_tpl *t, uint32_t group, uint32_t off, uint32_t len)
{
    if (!group && !len)
        return true;
    struct rw_part *p = realloc(t->parts, (t->n_parts + 1) * sizeof(*p));
    if (!p)
        return false;
    t->parts = p;
    p[t->n_parts++] = (struct rw_part){.group = group, .off = off, .len = len};
    if (group > t->max_group)
        t->max_group = group;
    return true;
}

static int fail(char *why, size_t whylen, const char *fmt, const char *a, size_t alen, long n)
{
    snprintf(why, whylen, fmt, (int)alen, a, n);
    return -EINVAL;
}

int rw_tpl_compile(struct rw_tpl *t, const char *s, uint32_t groups, rw_name_fn names, void *arg,
                   char *why, size_t whylen)
{
    size_t n = strlen(s);
    *t = (struct rw_tpl){0};
    if (n > 8192)
        return fail(why, whylen, "%.*sreplacement longer than %ld bytes", "", 0, 8192);
    if (!(t->text = malloc(n + 1)))
        return -ENOMEM;
    uint32_t lit = 0, lit_start = 0;
    int r = 0;
    for (size_t i = 0; i < n && !r;) {
        unsigned char c = (unsigned char)s[i];
        if (c != '$') {
            if (c <= ' ' || c >= 0x7f || c == '#') {
                if (c == '#')
                    snprintf(why, whylen, "'#' cannot be in a target (percent-encode it: %%23)");
                else
                    snprintf(why, whylen, "byte 0x%02x cannot be in a URL (percent-encode it)", c);
                r = -EINVAL;
                break;
            }
            t->text[lit++] = (char)c;
            i++;
            continue;
        }
        uint32_t group = 0;
        size_t end;
        if (i + 1 < n && s[i + 1] == '$') { /* "$$": a '$' */
            t->text[lit++] = '$';
            i += 2;
            continue;
        }
        if (i + 1 < n && s[i + 1] >= '1' && s[i + 1] <= '9') {
            group = (uint32_t)(s[i + 1] - '0');
            end = i + 2;
        } else if (i + 1 < n && s[i + 1] == '{') {
            const char *close = memchr(s + i + 2, '}', n - i - 2);
            if (!close) {
                r = fail(why, whylen, "unterminated '%.*s'", "${", 2, 0);
                break;
            }
            const char *nm = s + i + 2;
            size_t nl = (size_t)(close - nm);
            bool digits = nl > 0 && nl <= 5;
            for (size_t k = 0; k < nl && digits; k++)
                digits = nm[k] >= '0' && nm[k] <= '9';
            if (digits) {
                group = (uint32_t)strtoul(nm, NULL, 10);
            } else {
                int g = nl && names ? names(arg, nm, nl) : -1;
                if (g <= 0) {
                    r = fail(why, whylen, "'${%.*s}': the pattern has no group of that name", nm,
                             nl, 0);
                    break;
                }
                group = (uint32_t)g;
            }
            end = (size_t)(close - s) + 1;
        } else {
            r = fail(why, whylen, "a '$' must be followed by 1-9, {N}, {name} or '$'%.*s", "", 0,
                     0);
            break;
        }
        if (!group || group > groups) {
            r = fail(why, whylen, "'%.*s': the pattern has %ld capture groups", s + i, end - i,
                     (long)groups);
            break;
        }
        if (!add_part(t, 0, lit_start, lit - lit_start) || !add_part(t, group, 0, 0))
            r = -ENOMEM;
        lit_start = lit;
        i = end;
    }
    if (!r && !add_part(t, 0, lit_start, lit - lit_start))
        r = -ENOMEM;
    if (r == -ENOMEM)
        snprintf(why, whylen, "out of memory");
    if (r)
        rw_tpl_free(t);
    return r;
}

void rw_tpl_free(struct rw_tpl *t)
{
    free(t->text);
    free(t->parts);
    *t = (struct rw_tpl){0};
}

/* Bytes a capture keeps as they are: RFC 3986 unreserved, sub-delims,
 * ':', '@', '/'. */
static bool keep(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

long rw_tpl_expand(const struct rw_tpl *t, const char *subject, size_t subject_len,
                   const size_t *ovector, uint32_t n_pairs, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!cap)
        return -ENOSPC;
    for (unsigned i = 0; i < t->n_parts; i++) {
        const struct rw_part *p = &t->parts[i];
        if (!p->group) {
            if (p->len >= cap - o)
                return -ENOSPC;
            memcpy(out + o, t->text + p->off, p->len);
            o += p->len;
            continue;
        }
        if (p->group >= n_pairs)
            continue; /* not captured: empty */
        size_t a = ovector[2 * p->group], b = ovector[2 * p->group + 1];
        if (a > b || b > subject_len)
            continue; /* unset (~0), or not a range of the subject */
        for (size_t k = a; k < b; k++) {
            unsigned char c = (unsigned char)subject[k];
            if (keep(c)) {
                if (cap - o < 2)
                    return -ENOSPC;
                out[o++] = (char)c;
            } else {
                if (cap - o < 4)
                    return -ENOSPC;
                out[o++] = '%';
                out[o++] = hex[c >> 4];
                out[o++] = hex[c & 15];
            }
        }
    }
    out[o] = '\0';
    return (long)o;
}
