#include "base/itoa.h"

#include <string.h>

static const char digit_pairs[201] = "00010203040506070809"
                                     "10111213141516171819"
                                     "20212223242526272829"
                                     "30313233343536373839"
                                     "40414243444546474849"
                                     "50515253545556575859"
                                     "60616263646566676869"
                                     "70717273747576777879"
                                     "80818283848586878889"
                                     "90919293949596979899";

unsigned u64_digits(uint64_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

size_t u64_to_str(uint64_t v, char *out)
{
    unsigned len = u64_digits(v);
    char *p = out + len;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = digit_pairs[i + 1];
        *--p = digit_pairs[i];
    }
    if (v >= 10) {
        unsigned i = (unsigned)v * 2;
        *--p = digit_pairs[i + 1];
        *--p = digit_pairs[i];
    } else {
        *--p = (char)('0' + v);
    }
    return len;
}

size_t i64_to_str(int64_t v, char *out)
{
    if (v >= 0)
        return u64_to_str((uint64_t)v, out);
    out[0] = '-';
    /* -(v+1)+1 avoids overflow for INT64_MIN */
    return 1 + u64_to_str((uint64_t)(-(v + 1)) + 1, out + 1);
}
