/* htpasswd.h - Apache htpasswd files: reading them (pure: bytes in, a
 * table out, so it is fuzzed alone: fuzz/fuzz_htpasswd.c) and checking a
 * password against an entry.
 *
 * A line is "user:hash"; blank lines and lines starting with '#' are
 * skipped; a CR before the LF is dropped. Hashes: bcrypt ($2y$ $2b$
 * $2a$), yescrypt ($y$), SHA-crypt ($5$ $6$), checked by libxcrypt's
 * crypt_r; Apache's MD5 ($apr1$) and {SHA}, computed here (OpenSSL's MD5
 * and SHA-1). Anything else is an error naming the line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hp_kind {
    HP_CRYPT, /* bcrypt, yescrypt, SHA-crypt: crypt_r (slow: run off the I/O thread) */
    HP_APR1,  /* $apr1$SALT$HASH */
    HP_SHA,   /* {SHA}BASE64 */
};

struct hp_entry {
    const char *user;
    const char *hash;
    enum hp_kind kind;
};

/* An entry's place in the blind index: a keyed digest of its user. */
struct hp_blind {
    uint8_t uh[20]; /* SHA-1(secret, user) */
    size_t i;       /* the entry, in v */
};

struct htpasswd {
    struct hp_entry *v; /* sorted by user */
    size_t n;
    char *mem;           /* the users' and hashes' bytes */
    struct hp_blind *bx; /* htpasswd_seal(): v's entries by their keyed digest */
    uint8_t secret[16];  /* its key */
};

#define HTPASSWD_MAX_FILE (4u << 20)
#define HTPASSWD_HASH_MAX 255

/* Reads len bytes of a file into *hp: 0, or -EINVAL with "line N: ..."
 * in why (a line without ':' or without a user, a user twice, an unknown
 * or malformed hash), -ENOMEM. */
int htpasswd_parse(const char *text, size_t len, struct htpasswd *hp, char *why, size_t whylen);
void htpasswd_free(struct htpasswd *hp);
/* The entry of user (len bytes), or NULL. */
const struct hp_entry *htpasswd_find(const struct htpasswd *hp, const char *user, size_t len);

/* The blind index for htpasswd_find_blind(), keyed with secret (16 random
 * bytes): 0 or -ENOMEM. */
int htpasswd_seal(struct htpasswd *hp, const uint8_t secret[16]);
/* htpasswd_find() whose time does not tell whether user exists: the
 * lookup is over keyed digests of the users (what its comparisons see says
 * nothing of the names), takes the same number of steps for every name
 * and ends in one constant-time comparison. *stand_in is an entry in any
 * case (NULL only when the table is empty): the one found, or a real
 * neighbour whose hash the caller verifies the password against all the
 * same, so that an unknown user costs what a known one does. */
const struct hp_entry *htpasswd_find_blind(const struct htpasswd *hp, const char *user, size_t len,
                                           const struct hp_entry **stand_in);

/* Whether pw (len bytes) matches hash, of kind; comparisons in constant
 * time. HP_CRYPT needs a large stack (struct crypt_data is 32 KiB): not
 * on a connection's coroutine. */
bool htpasswd_check(enum hp_kind kind, const char *hash, const char *pw, size_t len);
/* Whether this build can check hashes of kind (HP_APR1 and HP_SHA need
 * OpenSSL). */
bool htpasswd_kind_supported(enum hp_kind kind);
