/* conf_api.c - the config tree as the public API shows it to modules:
 * struct colibri_conf is a struct config_node under another name. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "colibri.h"
#include "config/config.h"

static const struct config_node *node(const struct colibri_conf *c)
{
    return (const struct config_node *)c;
}

const char *colibri_conf_name(const struct colibri_conf *c)
{
    return node(c)->name;
}

const char *colibri_conf_value(const struct colibri_conf *c)
{
    return node(c)->value;
}

const char *const *colibri_conf_words(const struct colibri_conf *c, size_t *n)
{
    *n = node(c)->n_words;
    return (const char *const *)node(c)->words;
}

struct colibri_conf *colibri_conf_take(struct colibri_conf *section, const char *name)
{
    return (struct colibri_conf *)config_take((struct config_node *)section, name);
}

struct colibri_conf *colibri_conf_take_any(struct colibri_conf *section)
{
    return (struct colibri_conf *)config_take_any((struct config_node *)section);
}

int colibri_conf_error(const struct colibri_conf *c, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = config_verror(node(c), err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

int colibri_conf_int(const struct colibri_conf *c, long min, long max, long *out, char *err,
                     size_t errlen)
{
    return config_int(node(c), min, max, out, err, errlen);
}

int colibri_conf_bool(const struct colibri_conf *c, bool *out, char *err, size_t errlen)
{
    return config_bool(node(c), out, err, errlen);
}

int colibri_conf_duration_ms(const struct colibri_conf *c, uint64_t *ms, char *err, size_t errlen)
{
    return config_duration_ms(node(c), ms, err, errlen);
}

int colibri_conf_size(const struct colibri_conf *c, uint64_t *bytes, char *err, size_t errlen)
{
    return config_size(node(c), bytes, err, errlen);
}
