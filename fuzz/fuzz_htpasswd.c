/* fuzz_htpasswd.c - the htpasswd reader (mod/htpasswd.h) on arbitrary
 * bytes. What must hold:
 *  - the result is 0, or -EINVAL with a message (never a crash, never a
 *    read past the bytes: they are copied to an exactly sized buffer);
 *  - read: every user is non-empty and has no ':' or line end, users are
 *    sorted and distinct, every hash is of a kind this build checks, and
 *    htpasswd_find() finds each user and no longer or shorter name;
 *  - sealed, htpasswd_find_blind() finds each user too, no shorter name
 *    but a user of that name, and always names a stand-in entry;
 *  - an $apr1$ or {SHA} entry (fast hashes) can be checked: a wrong
 *    password never matches. (Hashes of crypt_r are not run: a bcrypt
 *    cost of 31 takes hours.) */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mod/htpasswd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        abort();
    memcpy(p, data, size);
    struct htpasswd hp;
    char why[200] = "";
    int r = htpasswd_parse(p, size, &hp, why, sizeof(why));
    free(p);
    if (r) {
        if (r != -EINVAL || !why[0])
            abort();
        return 0;
    }
    static const uint8_t secret[16] = {1, 2, 3};
    if (htpasswd_seal(&hp, secret))
        abort(); /* tiny tables: no allocation fails here */
    for (size_t i = 0; i < hp.n; i++) {
        const struct hp_entry *e = &hp.v[i], *stand_in;
        size_t ul = strlen(e->user);
        if (!ul || strpbrk(e->user, ":\n") || !htpasswd_kind_supported(e->kind))
            abort();
        if (i && strcmp(hp.v[i - 1].user, e->user) >= 0)
            abort();
        if (htpasswd_find(&hp, e->user, ul) != e)
            abort();
        const struct hp_entry *f = htpasswd_find(&hp, e->user, ul - 1);
        if (f && strlen(f->user) != ul - 1)
            abort();
        if (htpasswd_find_blind(&hp, e->user, ul, &stand_in) != e || stand_in != e)
            abort();
        f = htpasswd_find_blind(&hp, e->user, ul - 1, &stand_in);
        if (!stand_in || (f && (f != stand_in || strlen(f->user) != ul - 1)))
            abort();
        if (e->kind != HP_CRYPT && htpasswd_check(e->kind, e->hash, "\x01wrong\x02", 7))
            abort();
    }
    htpasswd_free(&hp);
    return 0;
}
