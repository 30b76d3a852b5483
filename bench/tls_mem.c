/* tls_mem.c - what an idle TLS connection of colibri holds in OpenSSL's
 * heap, counted allocation by allocation.
 *
 * OpenSSL's allocator is replaced (CRYPTO_set_mem_functions, before
 * anything else) by one that keeps a count of the live bytes it handed
 * out (malloc_usable_size, so malloc's rounding counts too). N server
 * connections are made with rt/tls.c's context (a P-256 certificate, the
 * site's options as colibri sets them), each on memory BIOs against an
 * OpenSSL client: a TLS 1.3 handshake, one request and one answer, then
 * SSL_free_buffers() as colibri does when a connection goes idle. The
 * clients are then freed; what stays per server connection is the figure.
 * KEEP_BUFFERS=1 skips SSL_free_buffers(), for the buffers' share.
 *
 * Build and run (after make build):
 *   cc -O2 -D_GNU_SOURCE -DCOLIBRI_WITH_OPENSSL -Isrc/lib -o /tmp/tls_mem bench/tls_mem.c \
 *      build/libcolibri.a $(pkg-config --libs openssl libseccomp zlib libbrotlienc libzstd) \
 *      -lpthread -ldl && /tmp/tls_mem 1000
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "rt/tls.h"

static _Atomic long live;

static void *c_malloc(size_t n, const char *f, int l)
{
    (void)f, (void)l;
    void *p = malloc(n);
    if (p)
        live += (long)malloc_usable_size(p);
    return p;
}

static void *c_realloc(void *p, size_t n, const char *f, int l)
{
    (void)f, (void)l;
    long old = p ? (long)malloc_usable_size(p) : 0;
    void *q = realloc(p, n);
    if (q)
        live += (long)malloc_usable_size(q) - old;
    else if (!n)
        live -= old;
    return q;
}

static void c_free(void *p, const char *f, int l)
{
    (void)f, (void)l;
    if (p)
        live -= (long)malloc_usable_size(p);
    free(p);
}

static void make_cert(const char *dir, char *cert, char *key)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pk);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    X509_sign(x, pk, EVP_sha256());
    sprintf(cert, "%s/cert.pem", dir);
    sprintf(key, "%s/key.pem", dir);
    FILE *f = fopen(cert, "w");
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key, "w");
    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pk);
}

/* Moves what each side wrote to the other. */
static void pump(BIO *s_out, BIO *c_in, BIO *c_out, BIO *s_in)
{
    char buf[16384];
    int n;
    while ((n = BIO_read(s_out, buf, sizeof(buf))) > 0)
        BIO_write(c_in, buf, n);
    while ((n = BIO_read(c_out, buf, sizeof(buf))) > 0)
        BIO_write(s_in, buf, n);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (!CRYPTO_set_mem_functions(c_malloc, c_realloc, c_free)) {
        fprintf(stderr, "CRYPTO_set_mem_functions failed\n");
        return 1;
    }
    char dir[] = "/tmp/colibri-tls-mem-XXXXXX", cert[300], key[300], why[256];
    if (!mkdtemp(dir))
        return 1;
    make_cert(dir, cert, key);
    struct tls_server *ts = tls_server_new(0, NULL, why, sizeof(why));
    bool expired;
    if (!ts || tls_server_add_site(ts, NULL, 0, true, why, sizeof(why)) != 0 ||
        tls_server_add_pair(ts, 0, cert, key, &expired, why, sizeof(why))) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    tls_server_ready(ts);
    SSL_CTX *sctx = tls_server_start_ctx(ts);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);

    SSL **servers = calloc((size_t)n, sizeof(*servers));
    SSL **clients = calloc((size_t)n, sizeof(*clients));
    const char *req = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";
    const char *ans = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
    bool keep_buffers = getenv("KEEP_BUFFERS") != NULL;
    long before_all = live, at_new = 0, bio_cap = 0, session = 0;
    for (int i = 0; i < n; i++) {
        SSL *c = SSL_new(cctx);
        BIO *c_in = BIO_new(BIO_s_mem()), *c_out = BIO_new(BIO_s_mem());
        SSL_set_bio(c, c_in, c_out);
        SSL_set_tlsext_host_name(c, "localhost");
        SSL_set_connect_state(c);
        long l0 = live;
        SSL *s = SSL_new(sctx);
        at_new += live - l0;
        BIO *s_in = BIO_new(BIO_s_mem()), *s_out = BIO_new(BIO_s_mem());
        SSL_set_bio(s, s_in, s_out);
        SSL_set_accept_state(s);
        for (int k = 0; k < 20 && (!SSL_is_init_finished(s) || !SSL_is_init_finished(c)); k++) {
            SSL_do_handshake(c);
            pump(c_out, s_in, s_out, c_in);
            SSL_do_handshake(s);
            pump(s_out, c_in, c_out, s_in);
        }
        if (!SSL_is_init_finished(s)) {
            fprintf(stderr, "handshake %d failed: %s\n", i,
                    ERR_error_string(ERR_get_error(), NULL));
            return 1;
        }
        char buf[256];
        SSL_write(c, req, (int)strlen(req));
        pump(c_out, s_in, s_out, c_in);
        SSL_read(s, buf, sizeof(buf));
        SSL_write(s, ans, (int)strlen(ans));
        pump(s_out, c_in, c_out, s_in);
        SSL_read(c, buf, sizeof(buf)); /* the tickets and the answer */
        SSL_read(s, buf, sizeof(buf)); /* nothing more: as colibri's last read */
        if (!keep_buffers)
            SSL_free_buffers(s); /* as colibri does when it goes idle */
        BUF_MEM *bm;
        BIO_get_mem_ptr(s_in, &bm);
        bio_cap += (long)bm->max;
        BIO_get_mem_ptr(s_out, &bm);
        bio_cap += (long)bm->max;
        SSL_SESSION *ss = SSL_get1_session(s);
        unsigned char *der = NULL;
        session += ss ? i2d_SSL_SESSION(ss, &der) : 0;
        OPENSSL_free(der);
        SSL_SESSION_free(ss);
        servers[i] = s;
        clients[i] = c;
    }
    /* the clients go: what is left is the servers' */
    for (int i = 0; i < n; i++)
        SSL_free(clients[i]);
    long per_server = (live - before_all) / n;
    /* and one server with its BIOs, for the share of the two memory BIOs
     * (colibri's socket BIO is one, and smaller) */
    printf("%d idle TLS 1.3 server connections (P-256, X25519), record buffers %s:\n", n,
           keep_buffers ? "kept" : "freed");
    printf("  OpenSSL's live heap per connection: %ld B (malloc_usable_size)\n", per_server);
    printf("    of which SSL_new() alone: %ld B\n", at_new / n);
    printf("    of which this tool's two memory BIOs' buffers (capacity): %ld B\n", bio_cap / n);
    printf("    (the session, serialised: %ld B)\n", session / n);
    for (int i = 0; i < n; i++)
        SSL_free(servers[i]);
    tls_server_free(ts);
    SSL_CTX_free(cctx);
    unlink(cert);
    unlink(key);
    rmdir(dir);
    free(servers);
    free(clients);
    return 0;
}
