/* fuzz_rewrite.c - a rewrite's replacement (mod/rewrite_tpl.h): compiled
 * from the input's first line, expanded against the rest.
 *
 * The pattern has 9 groups, named "a".."i" (1..9). The ovector is made
 * from the subject's bytes: ranges inside it, ranges that are not (which
 * must count as unset), and unset groups (~0). What must hold:
 *  - compiling gives 0, or -EINVAL with a message;
 *  - an expansion is printable ASCII without blanks or '#' (captures are
 *    percent-encoded), and as long as its result says;
 *  - with exactly the room it needs (its length + 1) it gives the same
 *    bytes; with one byte less, -ENOSPC, never a write past the buffer
 *    (the buffers are exactly sized: ASan sees any overrun). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mod/rewrite_tpl.h"

static int names(void *arg, const char *name, size_t len)
{
    (void)arg;
    return len == 1 && name[0] >= 'a' && name[0] <= 'i' ? name[0] - 'a' + 1 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t tl = nl ? (size_t)(nl - data) : size;
    char *tpl = malloc(tl + 1);
    if (!tpl)
        abort();
    memcpy(tpl, data, tl);
    tpl[tl] = '\0';
    const char *subject = nl ? (const char *)nl + 1 : "";
    size_t sl = nl ? size - tl - 1 : 0;

    struct rw_tpl t;
    char why[200] = "";
    int r = rw_tpl_compile(&t, tpl, 9, names, NULL, why, sizeof(why));
    free(tpl);
    if (r) {
        if (r != -EINVAL || !why[0])
            abort();
        return 0;
    }
    size_t ov[20];
    for (unsigned g = 0; g < 10; g++) {
        unsigned a = sl ? (unsigned char)subject[g % sl] : 0;
        unsigned b = sl ? (unsigned char)subject[(g + 3) % sl] : 0;
        if (a % 7 == 0) {
            ov[2 * g] = ov[2 * g + 1] = ~(size_t)0; /* unset */
        } else {
            ov[2 * g] = a % (sl + 2); /* may run past the subject */
            ov[2 * g + 1] = b % (sl + 2);
        }
    }
    size_t cap = 3 * sl * 10 + t.n_parts + 8192 + 1;
    char *big = malloc(cap);
    if (!big)
        abort();
    long n = rw_tpl_expand(&t, subject, sl, ov, 10, big, cap);
    if (n < 0 || (size_t)n >= cap || strlen(big) != (size_t)n)
        abort();
    for (long i = 0; i < n; i++) {
        unsigned char c = (unsigned char)big[i];
        if (c <= ' ' || c >= 0x7f || c == '#')
            abort();
    }
    char *exact = malloc((size_t)n + 1);
    if (!exact)
        abort();
    if (rw_tpl_expand(&t, subject, sl, ov, 10, exact, (size_t)n + 1) != n ||
        memcmp(exact, big, (size_t)n + 1))
        abort();
    if (n > 0 && rw_tpl_expand(&t, subject, sl, ov, 10, exact, (size_t)n) != -ENOSPC)
        abort();
    free(exact);
    free(big);
    rw_tpl_free(&t);
    return 0;
}
