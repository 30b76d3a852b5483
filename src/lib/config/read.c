/* read.c - reading the parsed tree: taking keys (and finding the ones
 * nobody took), converting values, and errors that name file, line and
 * key. The parser is config.c; both are declared in config.h. */
#include "config/config.h"
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "base/common.h"
#include "base/err.h"
#include "base/strbuf.h"

struct config_node *config_take(struct config_node *section, const char *name)
{
    if (!section)
        return NULL;
    for (struct config_node *n = section->children; n; n = n->next) {
        if (!n->used && strcmp(n->name, name) == 0) {
            n->used = true;
            return n;
        }
    }
    return NULL;
}

struct config_node *config_take_any(struct config_node *section)
{
    if (!section)
        return NULL;
    for (struct config_node *n = section->children; n; n = n->next) {
        if (!n->used) {
            n->used = true;
            return n;
        }
    }
    return NULL;
}

void config_where(const struct config_node *n, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%d: %s", n->file ? n->file : "?", n->line, n->name ? n->name : "");
}

int config_verror(const struct config_node *n, char *err, size_t errlen, const char *fmt,
                  va_list ap)
{
    char where[PATH_MAX + 160] = "";
    if (n)
        config_where(n, where, sizeof(where));
    return err_vset(err, errlen, -EINVAL, where, fmt, ap);
}

int config_error(const struct config_node *n, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = config_verror(n, err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

/* The first node nobody took, depth first, and the section holding it. */
static const struct config_node *first_unused(const struct config_node *section,
                                              const struct config_node **parent)
{
    for (const struct config_node *n = section->children; n; n = n->next) {
        if (!n->used) {
            *parent = section;
            return n;
        }
        const struct config_node *u = first_unused(n, parent);
        if (u)
            return u;
    }
    return NULL;
}

void config_mark_used(struct config_node *n)
{
    n->used = true;
    for (struct config_node *c = n->children; c; c = c->next)
        config_mark_used(c);
}

/* The message about n, the first node nobody took, in section parent. A
 * reader that takes a key once leaves a second copy of it behind; one
 * that takes it in a loop (listener, handler) leaves none. So an earlier
 * copy that was taken makes this one a duplicate. */
static int unused_error(const struct config_node *parent, const struct config_node *n, char *err,
                        size_t errlen)
{
    for (const struct config_node *p = parent->children; p != n; p = p->next)
        if (p->used && strcmp(p->name, n->name) == 0)
            return config_error(n, err, errlen, "duplicate key (first at line %d)", p->line);
    return config_error(n, err, errlen, "unknown key");
}

int config_take_unused(struct config *cfg, char *err, size_t errlen)
{
    const struct config_node *parent = NULL;
    const struct config_node *n = first_unused(cfg->root, &parent);
    if (!n)
        return 0;
    int r = unused_error(parent, n, err, errlen);
    config_mark_used((struct config_node *)n);
    return r;
}

int config_check_unused(const struct config *cfg, char *err, size_t errlen)
{
    const struct config_node *parent = NULL;
    const struct config_node *n = first_unused(cfg->root, &parent);
    return n ? unused_error(parent, n, err, errlen) : 0;
}

static const char *value_of(const struct config_node *n)
{
    return n->value ? n->value : "";
}

/* Leading decimal digits of *pp: 0, -EINVAL when there are none, -ERANGE
 * when they do not fit. */
static int parse_digits(const char **pp, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    bool overflow = false;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    *pp = p;
    *out = v;
    return overflow ? -ERANGE : 0;
}

int config_duration_ms(const struct config_node *n, uint64_t *ms, char *err, size_t errlen)
{
    static const struct {
        const char *unit;
        uint64_t ms;
    } units[] = {{"", 1000},       {"ms", 1},          {"s", 1000},
                 {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 24 * 3600 * 1000}};
    const char *s = value_of(n), *p = s;
    uint64_t v;
    int r = parse_digits(&p, &v);
    if (r == -EINVAL)
        return config_error(n, err, errlen, "bad duration '%s'", s);
    for (size_t i = 0; i < N_ELEMENTS(units); i++) {
        if (strcmp(p, units[i].unit) != 0)
            continue;
        if (r == -ERANGE || v > UINT64_MAX / units[i].ms)
            return config_error(n, err, errlen, "duration '%s' is too large", s);
        *ms = v * units[i].ms;
        return 0;
    }
    return config_error(n, err, errlen, "bad duration '%s' (use ms, s, m, h or d)", s);
}

int config_size(const struct config_node *n, uint64_t *bytes, char *err, size_t errlen)
{
    const char *s = value_of(n), *p = s;
    uint64_t v;
    int r = parse_digits(&p, &v);
    if (r == -EINVAL)
        return config_error(n, err, errlen, "bad size '%s'", s);
    unsigned shift;
    switch (*p | 0x20) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    case 't':
        shift = 40;
        break;
    default:
        shift = 0;
    }
    if (shift)
        p++;
    /* "8k", "8kb", "8KiB" alike; a bare number may say "b" */
    if (shift && (p[0] | 0x20) == 'i' && (p[1] | 0x20) == 'b')
        p += 2;
    else if ((*p | 0x20) == 'b')
        p++;
    if (*p)
        return config_error(n, err, errlen, "bad size '%s' (use k, M, G or T)", s);
    if (r == -ERANGE || v > (UINT64_MAX >> shift))
        return config_error(n, err, errlen, "size '%s' is too large", s);
    *bytes = v << shift;
    return 0;
}

int config_bool(const struct config_node *n, bool *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    const char *s = value_of(n);
    for (size_t i = 0; i < N_ELEMENTS(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return config_error(n, err, errlen, "bad boolean '%s' (use true or false)", s);
}

int config_int(const struct config_node *n, long min, long max, long *out, char *err, size_t errlen)
{
    const char *s = value_of(n), *p = s;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    uint64_t v;
    int r = parse_digits(&p, &v);
    if (r == -EINVAL || *p)
        return config_error(n, err, errlen, "bad integer '%s'", s);
    /* the magnitude of LONG_MIN is one more than LONG_MAX */
    uint64_t limit = neg ? (uint64_t)LONG_MAX + 1 : (uint64_t)LONG_MAX;
    long val = 0;
    if (r == 0 && v <= limit)
        val = !neg ? (long)v : v == (uint64_t)LONG_MAX + 1 ? LONG_MIN : -(long)v;
    if (r < 0 || v > limit || val < min || val > max)
        return config_error(n, err, errlen, "%s is out of range [%ld, %ld]", s, min, max);
    *out = val;
    return 0;
}
