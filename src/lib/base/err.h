/* err.h - the one way a failure is described to a caller: an -errno
 * return value and a message in the caller's buffer (char *err, size_t
 * errlen), optionally behind a place ("colibri.conf:4: threads").
 * Never allocates; a message that does not fit is cut. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

/* Formats "WHERE: message" (or just the message when where is NULL or
 * empty) into err and returns r, so a caller can write
 *     return err_set(err, errlen, -EINVAL, NULL, "bad port '%s'", s); */
int err_set(char *err, size_t errlen, int r, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int err_vset(char *err, size_t errlen, int r, const char *where, const char *fmt, va_list ap);
