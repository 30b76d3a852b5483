/* lookup.h - what a name refers to in the data, in either binding, and
 * whether that is truthy (tpl.h says what is falsy). Lookups do not fail:
 * what is not there is NULL.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpl/render.h"

/* Dynamic binding: the value of n, searched through the context stack, or
 * NULL. */
const struct tpl_value *tpl_lookup(const struct render *r, const struct tpl_name *n);
bool tpl_truthy(const struct tpl_value *v);

/* Struct binding: the struct that holds the value of n, with *f set to its
 * field; for "." on a struct, the struct itself and *f NULL. NULL when a
 * pointer on the way is NULL, or no frame of n's type is on the stack (a
 * block override rendered outside the context it was written in). */
const char *tpl_lookup_struct(const struct render *r, const struct tpl_name *n,
                              const struct tpl_field **f);
/* Is field f of the struct at base truthy? A sequence always is: whether it
 * yields an item is for its generator to say. */
bool tpl_field_truthy(const char *base, const struct tpl_field *f);

/* The value of an integer or floating-point member of `size` bytes. */
static inline int64_t tpl_read_int(const char *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const int8_t *)p;
    case 2:
        return *(const int16_t *)p;
    case 4:
        return *(const int32_t *)p;
    default:
        return *(const int64_t *)p;
    }
}

static inline uint64_t tpl_read_uint(const char *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const uint8_t *)p;
    case 2:
        return *(const uint16_t *)p;
    case 4:
        return *(const uint32_t *)p;
    default:
        return *(const uint64_t *)p;
    }
}

static inline double tpl_read_float(const char *p, size_t size)
{
    return size == sizeof(float) ? *(const float *)p : *(const double *)p;
}
