/* tls_ticket.c - the keys of TLS session tickets (see tls.h): either 80
 * bytes from tls_ticket_key_file (name 16, HMAC 32, AES 32, as nginx
 * reads them; several instances sharing the file resume each other's
 * tickets), or the process's own ring: a current key that encrypts and
 * the previous one that still decrypts, both random, rotated every
 * tls_ticket_rotate and kept across reloads. Tickets are AES-256-CBC with
 * HMAC-SHA256, as OpenSSL's own. The callback runs during handshakes only,
 * on any worker thread: the ring has a mutex. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "rt/tls.h"

#ifdef COLIBRI_WITH_OPENSSL

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

struct ticket_key {
    unsigned char name[16], hmac[32], aes[32];
};

struct tls_tickets {
    bool from_file;
    struct ticket_key file; /* from_file */
    unsigned rotate_s;      /* the ring's period */
};

/* The process's ring, shared by every configuration generation. */
static struct {
    pthread_mutex_t lock;
    bool made;
    struct ticket_key cur, prev;
    uint64_t rotated_at; /* monotonic seconds */
} ring = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

static bool key_new(struct ticket_key *k)
{
    return RAND_bytes((unsigned char *)k, sizeof(*k)) == 1;
}

/* The ring as of now (rotated as many periods as went by): copies of the
 * two keys. False when no key could be made. */
static bool ring_keys(unsigned rotate_s, struct ticket_key *cur, struct ticket_key *prev,
                      bool *has_prev)
{
    pthread_mutex_lock(&ring.lock);
    uint64_t now = now_s();
    bool ok = true;
    if (!ring.made) {
        ok = key_new(&ring.cur);
        ring.made = ok;
        ring.rotated_at = now;
        memset(&ring.prev, 0, sizeof(ring.prev));
    } else if (rotate_s && now - ring.rotated_at >= rotate_s) {
        uint64_t periods = (now - ring.rotated_at) / rotate_s;
        struct ticket_key next;
        if (key_new(&next)) {
            /* two periods or more: the previous key is too old as well */
            if (periods >= 2 && !key_new(&ring.prev))
                memset(&ring.prev, 0, sizeof(ring.prev));
            else if (periods == 1)
                ring.prev = ring.cur;
            ring.cur = next;
            ring.rotated_at += periods * rotate_s;
        }
    }
    *cur = ring.cur;
    *prev = ring.prev;
    static const struct ticket_key zero;
    *has_prev = memcmp(&ring.prev, &zero, sizeof(zero)) != 0;
    pthread_mutex_unlock(&ring.lock);
    return ok;
}

static int use_key(const struct ticket_key *k, unsigned char *iv, EVP_CIPHER_CTX *cctx,
                   EVP_MAC_CTX *hctx, int enc)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, sizeof(k->hmac)),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (!EVP_MAC_CTX_set_params(hctx, params))
        return -1;
    int r = enc ? EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv)
                : EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv);
    return r == 1 ? 1 : -1;
}

static int ticket_cb(SSL *ssl, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    const struct tls_tickets *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (!t)
        return enc ? -1 : 0;
    struct ticket_key cur, prev;
    bool has_prev = false;
    if (t->from_file)
        cur = t->file;
    else if (!ring_keys(t->rotate_s, &cur, &prev, &has_prev))
        return enc ? -1 : 0;
    if (enc) {
        if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1)
            return -1;
        memcpy(name, cur.name, sizeof(cur.name));
        return use_key(&cur, iv, cctx, hctx, 1);
    }
    /* TLS 1.3 tickets are for one use (RFC 8446 C.4: clients do not offer
     * one twice), and a resumed handshake sends a new one only when this
     * says 2 (renew): without it a client resumes twice, then falls back
     * to a full handshake. TLS 1.2 tickets are reused as they are. */
    if (!memcmp(name, cur.name, sizeof(cur.name))) {
        int r = use_key(&cur, iv, cctx, hctx, 0);
        return r == 1 && SSL_version(ssl) >= TLS1_3_VERSION ? 2 : r;
    }
    /* the previous key still decrypts; 2 asks for a ticket under the new one */
    if (has_prev && !memcmp(name, prev.name, sizeof(prev.name)))
        return use_key(&prev, iv, cctx, hctx, 0) == 1 ? 2 : -1;
    return 0; /* unknown key: a full handshake */
}

struct tls_tickets *tls_tickets_new(unsigned rotate_s, const unsigned char *file_key)
{
    struct tls_tickets *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->rotate_s = rotate_s ? rotate_s : 3600;
    if (file_key) {
        t->from_file = true;
        memcpy(t->file.name, file_key, 16);
        memcpy(t->file.hmac, file_key + 16, 32);
        memcpy(t->file.aes, file_key + 48, 32);
    }
    return t;
}

void tls_tickets_free(struct tls_tickets *t)
{
    if (t)
        OPENSSL_cleanse(t, sizeof(*t));
    free(t);
}

void tls_tickets_install(void *ssl_ctx, struct tls_tickets *t)
{
    SSL_CTX *c = ssl_ctx;
    SSL_CTX_set_app_data(c, t);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(c, ticket_cb);
    /* the keys decide how long a ticket resumes (two periods at most);
     * the session's own lifetime only bounds it from further out */
    SSL_CTX_set_timeout(c, (long)(t->from_file ? 86400 : 3 * t->rotate_s));
}

#else

struct tls_tickets *tls_tickets_new(unsigned rotate_s, const unsigned char *file_key)
{
    (void)rotate_s, (void)file_key;
    return NULL;
}

void tls_tickets_free(struct tls_tickets *t)
{
    (void)t;
}

void tls_tickets_install(void *ssl_ctx, struct tls_tickets *t)
{
    (void)ssl_ctx, (void)t;
}

#endif
