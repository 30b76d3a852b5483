/* mime.c - binary search in the generated table. */
#include "files/mime.h"

#include <string.h>

#include "base/common.h"
#include "mime_table.h"

struct mime {
    const char *ext;
    unsigned char ext_len;
    const char *type;
};

static const struct mime table[] = {
#define MIME(ext, type) {ext, sizeof(ext) - 1, type},
    MIME_TABLE(MIME)
#undef MIME
};

#define EXT_MAX 32

/* Byte order with "shorter first" on a common prefix: the generator's. */
static int cmp(const char *a, size_t alen, const struct mime *m)
{
    int c = memcmp(a, m->ext, MIN(alen, (size_t)m->ext_len));
    if (c)
        return c;
    return alen < m->ext_len ? -1 : alen > m->ext_len;
}

static const char *lookup(const char *ext, size_t len)
{
    size_t lo = 0, hi = N_ELEMENTS(table);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp(ext, len, &table[mid]);
        if (!c)
            return table[mid].type;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *files_mime_type(const char *name, size_t len)
{
    const char *base = memrchr(name, '/', len);
    base = base ? base + 1 : name;
    size_t blen = (size_t)(name + len - base);
    for (size_t i = 1; i < blen; i++) { /* i = 1: ".profile" has no extension */
        if (base[i] != '.')
            continue;
        size_t elen = blen - i - 1;
        if (!elen || elen > EXT_MAX)
            continue;
        char ext[EXT_MAX];
        for (size_t k = 0; k < elen; k++) {
            char c = base[i + 1 + k];
            ext[k] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
        }
        const char *t = lookup(ext, elen);
        if (t)
            return t;
    }
    return "application/octet-stream";
}
