/* htpasswd.c - reading htpasswd files and checking passwords (htpasswd.h). */
#include "mod/htpasswd.h"

#include <crypt.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/sha1.h"

#ifdef COLIBRI_WITH_OPENSSL
#include <openssl/evp.h>
#endif

/* Equal lengths and bytes, in time that depends on the length only. */
static bool ct_equal(const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < len; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

static bool b64_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '/';
}

/* The kind of hash, or -1 with *why. */
static int kind_of(const char *h, size_t len, const char **why)
{
    if (len > HTPASSWD_HASH_MAX) {
        *why = "hash too long";
        return -1;
    }
    if (len >= 4 && h[0] == '$' && h[1] == '2' && (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') &&
        h[3] == '$') {
        bool ok =
            len == 60 && h[4] >= '0' && h[4] <= '3' && h[5] >= '0' && h[5] <= '9' && h[6] == '$';
        for (size_t i = 7; ok && i < len; i++)
            ok = b64_char(h[i]);
        if (!ok) {
            *why = "malformed bcrypt hash";
            return -1;
        }
        return HP_CRYPT;
    }
    if ((len > 3 && !memcmp(h, "$y$", 3)) || (len > 3 && !memcmp(h, "$5$", 3)) ||
        (len > 3 && !memcmp(h, "$6$", 3))) {
        char buf[HTPASSWD_HASH_MAX + 1];
        memcpy(buf, h, len);
        buf[len] = '\0';
        /* libxcrypt knows the setting (and its parameters) */
        const char *last = strrchr(buf, '$');
        int cs = crypt_checksalt(buf); /* SHA-256 is "legacy" to it, still supported */
        if (!last || !last[1] || (cs != CRYPT_SALT_OK && cs != CRYPT_SALT_METHOD_LEGACY)) {
            *why = h[1] == 'y' ? "malformed yescrypt hash" : "malformed SHA-crypt hash";
            return -1;
        }
        return HP_CRYPT;
    }
    if (len > 6 && !memcmp(h, "$apr1$", 6)) {
        const char *salt = h + 6, *end = memchr(salt, '$', len - 6);
        size_t sl = end ? (size_t)(end - salt) : 0;
        bool ok = end && sl >= 1 && sl <= 8 && (size_t)(h + len - end - 1) == 22;
        for (size_t i = 0; ok && i < 22; i++)
            ok = b64_char(end[1 + i]);
        if (!ok) {
            *why = "malformed $apr1$ hash";
            return -1;
        }
        return HP_APR1;
    }
    if (len > 5 && !memcmp(h, "{SHA}", 5)) {
        unsigned char d[32];
        if (len != 5 + 28 || base64_decode(h + 5, 28, d) != 20) {
            *why = "malformed {SHA} hash";
            return -1;
        }
        return HP_SHA;
    }
    *why = "unknown hash format (bcrypt, yescrypt, SHA-crypt, $apr1$ or {SHA})";
    return -1;
}

static int by_user(const void *a, const void *b)
{
    return strcmp(((const struct hp_entry *)a)->user, ((const struct hp_entry *)b)->user);
}

int htpasswd_parse(const char *text, size_t len, struct htpasswd *hp, char *why, size_t whylen)
{
    *hp = (struct htpasswd){0};
    if (len > HTPASSWD_MAX_FILE) {
        snprintf(why, whylen, "larger than %u bytes", HTPASSWD_MAX_FILE);
        return -EINVAL;
    }
    if (!(hp->mem = malloc(len + 1)))
        goto nomem;
    size_t cap = 0, at = 0, line = 0;
    char *mem = hp->mem;
    const char *p = text, *end = text + len;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r')
            le--;
        const char *b = p;
        p = next;
        if (b == le || b[0] == '#')
            continue;
        const char *colon = memchr(b, ':', (size_t)(le - b));
        const char *kwhy;
        if (!colon || colon == b || memchr(b, '\0', (size_t)(le - b))) {
            snprintf(why, whylen, "line %zu: malformed (expected 'user:hash')", line);
            goto bad;
        }
        size_t ul = (size_t)(colon - b), hl = (size_t)(le - colon - 1);
        int kind = kind_of(colon + 1, hl, &kwhy);
        if (kind < 0) {
            snprintf(why, whylen, "line %zu: %s", line, kwhy);
            goto bad;
        }
        if (!htpasswd_kind_supported((enum hp_kind)kind)) {
            snprintf(why, whylen, "line %zu: this build has no OpenSSL for that hash", line);
            goto bad;
        }
        if (hp->n == cap) {
            cap = cap ? 2 * cap : 16;
            struct hp_entry *v = realloc(hp->v, cap * sizeof(*v));
            if (!v)
                goto nomem;
            hp->v = v;
        }
        /* user and hash, each NUL-terminated: ul + hl + 2 <= line + 1 */
        char *u = mem + at;
        memcpy(u, b, ul);
        u[ul] = '\0';
        char *h = u + ul + 1;
        memcpy(h, colon + 1, hl);
        h[hl] = '\0';
        at += ul + hl + 2;
        hp->v[hp->n++] = (struct hp_entry){.user = u, .hash = h, .kind = (enum hp_kind)kind};
    }
    if (hp->n)
        qsort(hp->v, hp->n, sizeof(*hp->v), by_user);
    for (size_t i = 1; i < hp->n; i++) {
        if (!strcmp(hp->v[i].user, hp->v[i - 1].user)) {
            snprintf(why, whylen, "user '%.64s' is there twice", hp->v[i].user);
            goto bad;
        }
    }
    return 0;
nomem:
    snprintf(why, whylen, "out of memory");
    htpasswd_free(hp);
    return -ENOMEM;
bad:
    htpasswd_free(hp);
    return -EINVAL;
}

void htpasswd_free(struct htpasswd *hp)
{
    free(hp->bx);
    free(hp->v);
    free(hp->mem);
    *hp = (struct htpasswd){0};
}

const struct hp_entry *htpasswd_find(const struct htpasswd *hp, const char *user, size_t len)
{
    size_t lo = 0, hi = hp->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *u = hp->v[mid].user;
        int c = strncmp(u, user, len);
        if (!c)
            c = u[len] ? 1 : 0;
        if (!c)
            return &hp->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void user_digest(const uint8_t secret[16], const char *user, size_t len, uint8_t out[20])
{
    struct sha1 s;
    sha1_init(&s);
    sha1_update(&s, secret, 16);
    sha1_update(&s, user, len);
    sha1_final(&s, out);
}

static int by_digest(const void *a, const void *b)
{
    return memcmp(((const struct hp_blind *)a)->uh, ((const struct hp_blind *)b)->uh, 20);
}

int htpasswd_seal(struct htpasswd *hp, const uint8_t secret[16])
{
    free(hp->bx);
    hp->bx = NULL;
    memcpy(hp->secret, secret, sizeof(hp->secret));
    if (!hp->n)
        return 0;
    if (!(hp->bx = calloc(hp->n, sizeof(*hp->bx))))
        return -ENOMEM;
    for (size_t i = 0; i < hp->n; i++) {
        user_digest(secret, hp->v[i].user, strlen(hp->v[i].user), hp->bx[i].uh);
        hp->bx[i].i = i;
    }
    qsort(hp->bx, hp->n, sizeof(*hp->bx), by_digest);
    return 0;
}

const struct hp_entry *htpasswd_find_blind(const struct htpasswd *hp, const char *user, size_t len,
                                           const struct hp_entry **stand_in)
{
    *stand_in = NULL;
    if (!hp->n || !hp->bx)
        return NULL;
    uint8_t uh[20];
    user_digest(hp->secret, user, len, uh);
    /* the last digest not above uh: ceil(log2(n)) steps whatever the name */
    size_t base = 0, n = hp->n;
    while (n > 1) {
        size_t half = n / 2;
        base = memcmp(hp->bx[base + half].uh, uh, 20) <= 0 ? base + half : base;
        n -= half;
    }
    *stand_in = &hp->v[hp->bx[base].i];
    return ct_equal(hp->bx[base].uh, uh, 20) ? *stand_in : NULL;
}

bool htpasswd_kind_supported(enum hp_kind kind)
{
#ifdef COLIBRI_WITH_OPENSSL
    (void)kind;
    return true;
#else
    return kind == HP_CRYPT;
#endif
}

#ifdef COLIBRI_WITH_OPENSSL
static bool digest(const char *name, const void *const *parts, const size_t *lens, unsigned n,
                   unsigned char *out)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestInit_ex(c, EVP_get_digestbyname(name), NULL) == 1;
    for (unsigned i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(c, parts[i], lens[i]) == 1;
    ok = ok && EVP_DigestFinal_ex(c, out, NULL) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}

static const char itoa64[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

static char *to64(char *s, unsigned long v, int n)
{
    while (n-- > 0) {
        *s++ = itoa64[v & 0x3f];
        v >>= 6;
    }
    return s;
}

/* Apache's MD5-crypt ("$apr1$"), the 22 characters after the salt. */
static bool apr1(const char *pw, size_t len, const char *salt, size_t sl, char out[22])
{
    static const char magic[] = "$apr1$";
    unsigned char fin[16], alt[16];
    const void *p3[] = {pw, salt, pw};
    size_t l3[] = {len, sl, len};
    if (!digest("MD5", p3, l3, 3, alt))
        return false;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestInit_ex(c, EVP_md5(), NULL) == 1 && EVP_DigestUpdate(c, pw, len) &&
              EVP_DigestUpdate(c, magic, 6) && EVP_DigestUpdate(c, salt, sl);
    for (size_t i = len; ok && i > 0; i -= i > 16 ? 16 : i)
        ok = EVP_DigestUpdate(c, alt, i > 16 ? 16 : i);
    for (size_t i = len; ok && i; i >>= 1)
        ok = EVP_DigestUpdate(c, (i & 1) ? "" : pw, 1);
    ok = ok && EVP_DigestFinal_ex(c, fin, NULL);
    EVP_MD_CTX_free(c);
    for (int i = 0; ok && i < 1000; i++) {
        const void *parts[4];
        size_t lens[4];
        unsigned n = 0;
        parts[n] = (i & 1) ? (const void *)pw : fin;
        lens[n++] = (i & 1) ? len : 16;
        if (i % 3) {
            parts[n] = salt;
            lens[n++] = sl;
        }
        if (i % 7) {
            parts[n] = pw;
            lens[n++] = len;
        }
        parts[n] = (i & 1) ? (const void *)fin : pw;
        lens[n++] = (i & 1) ? 16 : len;
        unsigned char next[16];
        ok = digest("MD5", parts, lens, n, next);
        memcpy(fin, next, 16);
    }
    if (!ok)
        return false;
    char *s = out;
    s = to64(s, ((unsigned long)fin[0] << 16) | ((unsigned long)fin[6] << 8) | fin[12], 4);
    s = to64(s, ((unsigned long)fin[1] << 16) | ((unsigned long)fin[7] << 8) | fin[13], 4);
    s = to64(s, ((unsigned long)fin[2] << 16) | ((unsigned long)fin[8] << 8) | fin[14], 4);
    s = to64(s, ((unsigned long)fin[3] << 16) | ((unsigned long)fin[9] << 8) | fin[15], 4);
    s = to64(s, ((unsigned long)fin[4] << 16) | ((unsigned long)fin[10] << 8) | fin[5], 4);
    to64(s, fin[11], 2);
    return true;
}
#endif

bool htpasswd_check(enum hp_kind kind, const char *hash, const char *pw, size_t len)
{
    size_t hl = strlen(hash);
    if (kind == HP_CRYPT) {
        /* crypt_r takes a C string: a password with a NUL never matches */
        if (memchr(pw, '\0', len))
            return false;
        char buf[1024];
        if (len >= sizeof(buf))
            return false;
        memcpy(buf, pw, len);
        buf[len] = '\0';
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
            return false;
        const char *out = crypt_r(buf, hash, cd);
        bool ok = out && out[0] != '*' && strlen(out) == hl && ct_equal(out, hash, hl);
        explicit_bzero(buf, sizeof(buf));
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        return ok;
    }
#ifdef COLIBRI_WITH_OPENSSL
    if (kind == HP_APR1) {
        const char *salt = hash + 6, *d = strchr(salt, '$');
        char out[22];
        return d && apr1(pw, len, salt, (size_t)(d - salt), out) && ct_equal(out, d + 1, 22);
    }
    if (kind == HP_SHA) {
        unsigned char want[32], got[20];
        const void *p[] = {pw};
        size_t l[] = {len};
        return base64_decode(hash + 5, hl - 5, want) == 20 && digest("SHA1", p, l, 1, got) &&
               ct_equal(got, want, 20);
    }
#endif
    return false;
}
