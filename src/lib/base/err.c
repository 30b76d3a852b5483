#include "base/err.h"

#include <stdio.h>

int err_vset(char *err, size_t errlen, int r, const char *where, const char *fmt, va_list ap)
{
    if (!err || !errlen)
        return r;
    int k = 0;
    if (where && where[0])
        k = snprintf(err, errlen, "%s: ", where);
    if (k >= 0 && (size_t)k < errlen)
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    return r;
}

int err_set(char *err, size_t errlen, int r, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(err, errlen, r, where, fmt, ap);
    va_end(ap);
    return r;
}
