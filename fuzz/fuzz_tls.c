/* fuzz_tls.c - the server side of a TLS connection (rt/tls.c's contexts:
 * two sites, SNI and ALPN callbacks, TLS 1.2 and 1.3) fed arbitrary bytes
 * on a memory BIO: ClientHello-shaped input, garbage records.
 *
 * What must hold: no crash or leak (ASan), the handshake either fails or
 * completes, and after it completes, application data reads without
 * error or ends the stream. The certificates (P-256, one per site) are
 * made once, in memory, at the first input. Without OpenSSL the target
 * does nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/tls.h"

#ifdef COLIBRI_WITH_OPENSSL
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static void make_cert(const char *dir, const char *cn, char *cert, char *key)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, pk);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_sign(x, pk, EVP_sha256());
    sprintf(cert, "%s/%s.pem", dir, cn);
    sprintf(key, "%s/%s.key", dir, cn);
    FILE *f = fopen(cert, "w");
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key, "w");
    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pk);
}

static struct tls_server *server(void)
{
    static struct tls_server *ts;
    if (ts)
        return ts;
    char dir[] = "/tmp/colibri-fuzz-tls-XXXXXX", why[256], cert[300], key[300];
    if (!mkdtemp(dir))
        abort();
    ts = tls_server_new(0, NULL, why, sizeof(why));
    const char *names[] = {"example.com"};
    int def = ts ? tls_server_add_site(ts, NULL, 0, true, why, sizeof(why)) : -1;
    int ex = ts ? tls_server_add_site(ts, names, 1, false, why, sizeof(why)) : -1;
    if (def < 0 || ex < 0)
        abort();
    bool expired;
    make_cert(dir, "default.test", cert, key);
    if (tls_server_add_pair(ts, def, cert, key, &expired, why, sizeof(why)))
        abort();
    unlink(cert);
    unlink(key);
    make_cert(dir, "example.com", cert, key);
    if (tls_server_add_pair(ts, ex, cert, key, &expired, why, sizeof(why)))
        abort();
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return ts;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    SSL *ssl = SSL_new(tls_server_start_ctx(server()));
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    if (!ssl || !in || !out)
        abort();
    BIO_set_mem_eof_return(in, -1);
    SSL_set_bio(ssl, in, out);
    if (size)
        BIO_write(in, data, (int)size);
    int r = SSL_accept(ssl);
    if (r == 1) {
        char buf[4096];
        for (int i = 0; i < 64 && SSL_read(ssl, buf, sizeof(buf)) > 0; i++)
            ;
        SSL_write(ssl, "HTTP/1.1 200 OK\r\n\r\n", 19);
    }
    ERR_clear_error();
    SSL_free(ssl);
    return 0;
}

#else

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}

#endif
