/* tls_info.c - what the layers above ask of a connection's TLS (rt/conn.h):
 * whether it is secure and what its handshake chose, for
 * colibri_req_is_secure(), the access log and ALPN's protocol; and the
 * kTLS probe. An HTTP/2 stream (a sub-context) answers for its
 * connection. */
#include <stdio.h>
#include <string.h>

#include "rt/conn.h"
#include "rt/tls.h"

#ifdef COLIBRI_WITH_OPENSSL
#include <openssl/ssl.h>
#endif

bool tls_ktls_probe(const char *ulp_list)
{
    FILE *f = fopen(ulp_list ? ulp_list : "/proc/sys/net/ipv4/tcp_available_ulp", "re");
    if (!f)
        return false;
    char buf[512];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (char *save, *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save))
        if (!strcmp(w, "tls"))
            return true;
    return false;
}

bool conn_is_secure(const struct conn_ctx *ctx)
{
    return (ctx->parent ? ctx->parent : ctx)->tls != NULL;
}

#ifdef COLIBRI_WITH_OPENSSL

/* The connection's SSL (its parent's for a sub-context), or NULL. */
static SSL *ssl_of(const struct conn_ctx *ctx)
{
    return (ctx->parent ? ctx->parent : ctx)->tls;
}

const char *conn_tls_version(const struct conn_ctx *ctx)
{
    SSL *ssl = ssl_of(ctx);
    return ssl ? SSL_get_version(ssl) : NULL;
}

const char *conn_tls_server_name(const struct conn_ctx *ctx)
{
    SSL *ssl = ssl_of(ctx);
    return ssl ? SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}

const char *conn_tls_cipher(const struct conn_ctx *ctx)
{
    SSL *ssl = ssl_of(ctx);
    return ssl ? SSL_get_cipher_name(ssl) : NULL;
}

bool conn_tls_resumed(const struct conn_ctx *ctx)
{
    SSL *ssl = ssl_of(ctx);
    return ssl && SSL_session_reused(ssl);
}

bool conn_tls_alpn_is(const struct conn_ctx *ctx, const char *name)
{
    SSL *ssl = ssl_of(ctx);
    if (!ssl)
        return false;
    const unsigned char *p;
    unsigned len;
    SSL_get0_alpn_selected(ssl, &p, &len);
    return len == strlen(name) && !memcmp(p, name, len);
}

#else /* without OpenSSL: no connection is secure */

const char *conn_tls_version(const struct conn_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

const char *conn_tls_server_name(const struct conn_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

const char *conn_tls_cipher(const struct conn_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

bool conn_tls_resumed(const struct conn_ctx *ctx)
{
    (void)ctx;
    return false;
}

bool conn_tls_alpn_is(const struct conn_ctx *ctx, const char *name)
{
    (void)ctx, (void)name;
    return false;
}

#endif
