#include "base/common.h"

bool mem_case_eq(const char *a, const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y && (x | 0x20) != (y | 0x20))
            return false;
        /* (x|0x20)==(y|0x20) also matches pairs like '@' and '`': only
         * letters may differ by case. */
        if (x != y && !((x | 0x20) >= 'a' && (x | 0x20) <= 'z'))
            return false;
    }
    return true;
}
