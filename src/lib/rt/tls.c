/* tls.c - the TLS transport on OpenSSL 3 (see tls.h). */
#include "rt/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/err.h"
#include "rt/conn.h"
#include "rt/internal.h"

#ifdef COLIBRI_WITH_OPENSSL

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* Mozilla "intermediate" (TLS 1.2 suites; 1.3 has its own, all allowed) */
#define CIPHERS_INTERMEDIATE                                                                       \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"     \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"       \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"

/* At most this much of a writev is gathered into one SSL_write: one
 * record, so an answer's head and a small body leave together. */
#define TLS_GATHER 16384

struct tls_site {
    SSL_CTX *ctx;
    char **names;
    unsigned n_names;
    unsigned n_pairs;
    unsigned char *staple; /* a DER OCSP response, or NULL */
    size_t staple_len;
};

struct tls_server {
    unsigned protocols;
    char *ciphers;
    struct tls_site *sites;
    unsigned n_sites;
    int default_site; /* -1: none yet */
    bool no_tickets;
    bool ktls;
    struct tls_tickets *tickets;
};

bool tls_available(void)
{
    return true;
}

const char *tls_library(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

/* The last OpenSSL error, for a message. */
static const char *ssl_why(void)
{
    static _Thread_local char buf[200];
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return "unknown error";
    const char *reason = ERR_reason_error_string(e);
    snprintf(buf, sizeof(buf), "%s", reason ? reason : "unknown error");
    ERR_clear_error();
    return buf;
}

struct tls_server *tls_server_new(unsigned protocols, const char *ciphers, char *err, size_t errlen)
{
    struct tls_server *ts = calloc(1, sizeof(*ts));
    if (!ts || !(ts->ciphers = strdup(ciphers ? ciphers : CIPHERS_INTERMEDIATE))) {
        free(ts);
        err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        return NULL;
    }
    ts->protocols = protocols ? protocols : TLS_PROTO_V12 | TLS_PROTO_V13;
    ts->default_site = -1;
    if (!(ts->tickets = tls_tickets_new(0, NULL))) {
        err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        tls_server_free(ts);
        return NULL;
    }
    /* the cipher list checked once, here, on a context of its own */
    SSL_CTX *probe = SSL_CTX_new(TLS_server_method());
    if (!probe || !SSL_CTX_set_cipher_list(probe, ts->ciphers)) {
        err_set(err, errlen, -EINVAL, NULL, "bad cipher list '%s': %s", ts->ciphers, ssl_why());
        SSL_CTX_free(probe);
        tls_server_free(ts);
        return NULL;
    }
    SSL_CTX_free(probe);
    return ts;
}

void tls_server_tickets(struct tls_server *ts, bool on)
{
    ts->no_tickets = !on;
}

void tls_server_ktls(struct tls_server *ts, bool on)
{
    ts->ktls = on;
}

int tls_server_ticket_keys(struct tls_server *ts, unsigned rotate_s, const unsigned char *key80)
{
    if (ts->n_sites) /* their contexts hold the keys in use */
        return -EBUSY;
    struct tls_tickets *t = tls_tickets_new(rotate_s, key80);
    if (!t)
        return -ENOMEM;
    tls_tickets_free(ts->tickets);
    ts->tickets = t;
    return 0;
}

void tls_server_free(struct tls_server *ts)
{
    if (!ts)
        return;
    for (unsigned i = 0; i < ts->n_sites; i++) {
        SSL_CTX_free(ts->sites[i].ctx);
        for (unsigned j = 0; j < ts->sites[i].n_names; j++)
            free(ts->sites[i].names[j]);
        free(ts->sites[i].names);
        free(ts->sites[i].staple);
    }
    free(ts->sites);
    free(ts->ciphers);
    tls_tickets_free(ts->tickets);
    free(ts);
}

/* SNI: the site named, or the default one (whose context the connection
 * started with). */
static int on_server_name(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    struct tls_server *ts = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!name)
        return SSL_TLSEXT_ERR_OK;
    /* an exact name first, else the longest wildcard (as Host's lookup) */
    size_t len = strlen(name), best_m = 0;
    if (len && name[len - 1] == '.')
        len--;
    struct tls_site *best = NULL;
    for (unsigned i = 0; i < ts->n_sites; i++)
        for (unsigned j = 0; j < ts->sites[i].n_names; j++) {
            const char *s = ts->sites[i].names[j];
            size_t m = host_name_match(s, strlen(s), name, len);
            if (m > best_m) {
                best_m = m;
                best = &ts->sites[i];
            }
        }
    if (best && best->n_pairs && SSL_get_SSL_CTX(ssl) != best->ctx)
        SSL_set_SSL_CTX(ssl, best->ctx);
    return SSL_TLSEXT_ERR_OK; /* unknown: the default site's certificate */
}

/* ALPN: the first of the protocol's list (conn_proto.alpn, else
 * http/1.1) that the client offers; none of them: no ALPN at all (as
 * nginx). */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    (void)arg;
    const struct conn_ctx *ctx = SSL_get_app_data(ssl);
    const struct conn_proto *proto = ctx ? ctx->worker->cfg->proto : NULL;
    const char *ours = proto && proto->alpn ? proto->alpn(ctx) : "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, (const unsigned char *)ours, (unsigned)strlen(ours), in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *site_ctx_new(struct tls_server *ts, char *err, size_t errlen)
{
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    if (!c) {
        err_set(err, errlen, -ENOMEM, NULL, "SSL_CTX_new: %s", ssl_why());
        return NULL;
    }
    int min = (ts->protocols & TLS_PROTO_V12) ? TLS1_2_VERSION : TLS1_3_VERSION;
    int max = (ts->protocols & TLS_PROTO_V13) ? TLS1_3_VERSION : TLS1_2_VERSION;
    SSL_CTX_set_min_proto_version(c, min);
    SSL_CTX_set_max_proto_version(c, max);
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* idle connections give their record buffers back; a write may be
     * retried from another buffer with the same bytes (conn_writev) */
    SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* tickets (stateless) resume; no session cache kept in memory */
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    if (ts->ktls)
        SSL_CTX_set_options(c, SSL_OP_ENABLE_KTLS);
    if (ts->no_tickets) {
        SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(c, 0);
    } else {
        tls_tickets_install(c, ts->tickets);
    }
    SSL_CTX_set1_groups_list(c, "X25519:P-256");
    SSL_CTX_set_cipher_list(c, ts->ciphers);
    SSL_CTX_set_tlsext_servername_callback(c, on_server_name);
    SSL_CTX_set_tlsext_servername_arg(c, ts);
    SSL_CTX_set_alpn_select_cb(c, on_alpn, NULL);
    return c;
}

int tls_server_add_site(struct tls_server *ts, const char *const *names, unsigned n,
                        bool is_default, char *err, size_t errlen)
{
    struct tls_site *s = realloc(ts->sites, (ts->n_sites + 1) * sizeof(*s));
    if (!s)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    ts->sites = s;
    s = &ts->sites[ts->n_sites];
    *s = (struct tls_site){0};
    if (!(s->ctx = site_ctx_new(ts, err, errlen)))
        return -ENOMEM;
    s->names = calloc(n ? n : 1, sizeof(char *));
    if (!s->names) {
        SSL_CTX_free(s->ctx);
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    }
    ts->n_sites++;
    for (unsigned i = 0; i < n; i++) {
        if (!(s->names[i] = strdup(names[i])))
            return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        s->n_names++;
    }
    if (is_default && ts->default_site < 0)
        ts->default_site = (int)ts->n_sites - 1;
    return (int)ts->n_sites - 1;
}

/* 0 when path is a regular file this process opens for reading, else
 * -errno: -EISDIR for a directory (which root would "read" as an empty
 * PEM file), -EINVAL for another kind (a FIFO would block the load). The
 * open does not block; the file is closed again. */
static int file_readable(const char *path)
{
    struct stat st;
    int fd = open_regular(path, &st);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

static int file_error(int r, const char *path, char *err, size_t errlen)
{
    return err_set(err, errlen, r, NULL, "%s: %s", path,
                   r == -EINVAL ? "not a regular file" : strerror(-r));
}

int tls_server_add_pair(struct tls_server *ts, int site, const char *cert, const char *key,
                        bool *expired, char *err, size_t errlen)
{
    struct tls_site *s = &ts->sites[site];
    *expired = false;
    int r;
    if ((r = file_readable(cert)) < 0)
        return file_error(r, cert, err, errlen);
    if ((r = file_readable(key)) < 0)
        return file_error(r, key, err, errlen);
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(s->ctx, cert) != 1)
        return err_set(err, errlen, -EINVAL, NULL, "%s: not a PEM certificate chain: %s", cert,
                       ssl_why());
    if (SSL_CTX_use_PrivateKey_file(s->ctx, key, SSL_FILETYPE_PEM) != 1) {
        const char *why = ssl_why();
        if (strstr(why, "mismatch"))
            return err_set(err, errlen, -EINVAL, NULL, "%s does not match the certificate %s", key,
                           cert);
        return err_set(err, errlen, -EINVAL, NULL, "%s: not a PEM private key: %s", key, why);
    }
    if (SSL_CTX_check_private_key(s->ctx) != 1)
        return err_set(err, errlen, -EINVAL, NULL, "%s does not match the certificate %s", key,
                       cert);
    X509 *leaf = SSL_CTX_get0_certificate(s->ctx);
    if (leaf && X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0)
        *expired = true;
    s->n_pairs++;
    return 0;
}

/* status_request: the site's staple, copied for OpenSSL to free. */
static int on_status(SSL *ssl, void *arg)
{
    const struct tls_site *s = arg;
    if (!s || !s->staple)
        return SSL_TLSEXT_ERR_NOACK;
    unsigned char *copy = OPENSSL_malloc(s->staple_len);
    if (!copy)
        return SSL_TLSEXT_ERR_NOACK;
    memcpy(copy, s->staple, s->staple_len);
    if (!SSL_set_tlsext_status_ocsp_resp(ssl, copy, (long)s->staple_len)) {
        OPENSSL_free(copy);
        return SSL_TLSEXT_ERR_NOACK;
    }
    return SSL_TLSEXT_ERR_OK;
}

int tls_server_add_staple(struct tls_server *ts, int site, const char *der, char *err,
                          size_t errlen)
{
    struct tls_site *s = &ts->sites[site];
    int fr = file_readable(der);
    if (fr < 0)
        return file_error(fr, der, err, errlen);
    FILE *f = fopen(der, "rbe");
    if (!f)
        return err_set(err, errlen, -errno, NULL, "%s: %s", der, strerror(errno));
    unsigned char *buf = malloc(65536 + 1);
    size_t n = buf ? fread(buf, 1, 65536 + 1, f) : 0;
    fclose(f);
    if (!buf)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    if (n > 65536) {
        free(buf);
        return err_set(err, errlen, -EFBIG, NULL, "%s: larger than 64 KiB", der);
    }
    const unsigned char *p = buf;
    OCSP_RESPONSE *r = d2i_OCSP_RESPONSE(NULL, &p, (long)n);
    if (!r || p != buf + n) {
        OCSP_RESPONSE_free(r);
        free(buf);
        ERR_clear_error();
        return err_set(err, errlen, -EINVAL, NULL, "%s: not a DER OCSP response", der);
    }
    OCSP_RESPONSE_free(r);
    free(s->staple);
    s->staple = buf;
    s->staple_len = n;
    /* the array of sites may move while they load: the callback's
     * argument is set once loading is done (tls_server_ready) */
    SSL_CTX_set_tlsext_status_cb(s->ctx, on_status);
    return 0;
}

bool tls_server_ready(const struct tls_server *ts)
{
    bool ready = false;
    for (unsigned i = 0; ts && i < ts->n_sites; i++) {
        /* the sites are where they stay: the status callbacks' arguments */
        SSL_CTX_set_tlsext_status_arg(ts->sites[i].ctx, &ts->sites[i]);
        ready |= ts->sites[i].n_pairs > 0;
    }
    return ready;
}

/* The context a connection starts with: the default site's, or the first
 * with a certificate. */
static SSL_CTX *start_ctx(const struct tls_server *ts)
{
    if (ts->default_site >= 0 && ts->sites[ts->default_site].n_pairs)
        return ts->sites[ts->default_site].ctx;
    for (unsigned i = 0; i < ts->n_sites; i++)
        if (ts->sites[i].n_pairs)
            return ts->sites[i].ctx;
    return NULL;
}

void *tls_server_start_ctx(const struct tls_server *ts)
{
    return start_ctx(ts);
}

/* After an SSL call that failed: -1 and errno (EAGAIN with tls_want set
 * when it must wait), or 0 for the end of the stream. */
static ssize_t ssl_fail(struct conn_ctx *ctx, SSL *ssl, int r)
{
    /* OpenSSL's socket BIO retries EINTR as it does EAGAIN (WANT_READ or
     * WANT_WRITE), but an interrupted call may leave bytes in the socket
     * that epoll will not announce again: the caller must retry at once,
     * not wait. errno was cleared before the call, so it says which. */
    int again = errno == EINTR ? EINTR : EAGAIN;
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
        ctx->tls_want = CONN_WAIT_READ;
        errno = again;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        ctx->tls_want = CONN_WAIT_WRITE;
        errno = again;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (errno == 0 || errno == EAGAIN)
            errno = ECONNRESET;
        return -1;
    default:
        ERR_clear_error();
        errno = EPROTO;
        return -1;
    }
}

/* The first byte of the stream, without taking it: 0x16 begins a TLS
 * handshake record; -1 when the peer closed or failed first. */
static int first_byte(struct conn_ctx *ctx)
{
    if (ctx->in_len > ctx->in_pos)
        return (unsigned char)ctx->in[ctx->in_pos];
    for (;;) {
        unsigned char b;
        ssize_t n = recv(ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 1)
            return b;
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        if (errno == EAGAIN)
            conn_wait_io(ctx, CONN_WAIT_READ);
    }
}

/* Handshake counts (tls_handshake_counts): one relaxed atomic add per
 * handshake, which costs a thousand times that in arithmetic. */
static _Atomic uint64_t hs_full, hs_resumed, hs_failed;

void tls_handshake_counts(uint64_t *full, uint64_t *resumed, uint64_t *failed)
{
    *full = atomic_load_explicit(&hs_full, memory_order_relaxed);
    *resumed = atomic_load_explicit(&hs_resumed, memory_order_relaxed);
    *failed = atomic_load_explicit(&hs_failed, memory_order_relaxed);
}

static int handshake_failed(void)
{
    atomic_fetch_add_explicit(&hs_failed, 1, memory_order_relaxed);
    return -1;
}

int tls_accept(struct conn_ctx *ctx, struct tls_server *ts)
{
    int b = first_byte(ctx);
    if (b < 0)
        return -1;
    if (b != 0x16)
        return TLS_NOT_TLS;
    SSL_CTX *c = start_ctx(ts);
    SSL *ssl = c ? SSL_new(c) : NULL;
    if (!ssl)
        return handshake_failed();
    if (!SSL_set_fd(ssl, ctx->fd)) {
        SSL_free(ssl);
        return handshake_failed();
    }
    /* the connection owns it from here: conn_close() frees it */
    conn_worker_of(ctx)->conns[ctx->fd].tls = ssl;
    SSL_set_app_data(ssl, ctx); /* for on_alpn(), during the handshake */
    /* bytes read before the handshake (behind a PROXY header) come first:
     * a memory BIO holds them until drained, then the socket's takes over */
    size_t early = ctx->in_len - ctx->in_pos;
    if (early) {
        BIO *copy = BIO_new(BIO_s_mem());
        if (!copy || BIO_write(copy, ctx->in + ctx->in_pos, (int)early) != (int)early) {
            BIO_free(copy);
            return handshake_failed();
        }
        BIO_set_mem_eof_return(copy, -1);
        SSL_set0_rbio(ssl, copy);
    }
    ctx->in_pos = ctx->in_len = 0;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_accept(ssl);
        if (r == 1)
            break;
        if (ssl_fail(ctx, ssl, r) >= 0)
            return handshake_failed();
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return handshake_failed();
        if (early && ctx->tls_want == CONN_WAIT_READ) {
            /* the early bytes are used up: on to the socket */
            early = 0;
            BIO *sock = SSL_get_wbio(ssl);
            BIO_up_ref(sock);
            SSL_set0_rbio(ssl, sock);
            continue;
        }
        conn_wait_io(ctx, ctx->tls_want);
    }
    SSL_set_app_data(ssl, NULL); /* the context is only lent */
    /* one read() per request from here: without read-ahead OpenSSL reads
     * a record's 5-byte header and then its body, two system calls each
     * time. Not during the handshake: with bytes read before it (behind a
     * PROXY header) in a memory BIO, a read-ahead handshake stalled when
     * the ClientHello came in parts (seen under valgrind). */
    SSL_set_read_ahead(ssl, 1);
    atomic_fetch_add_explicit(SSL_session_reused(ssl) ? &hs_resumed : &hs_full, 1,
                              memory_order_relaxed);
    ctx->tls = ssl;
    conn_progress(ctx); /* the first request gets its own timeout */
    return 0;
}

ssize_t tls_read(struct conn_ctx *ctx, void *buf, size_t len)
{
    SSL *ssl = ctx->tls;
    ERR_clear_error();
    errno = 0;
    int r = SSL_read(ssl, buf, (int)MIN(len, (size_t)INT32_MAX));
    return r > 0 ? r : ssl_fail(ctx, ssl, r);
}

ssize_t tls_writev(struct conn_ctx *ctx, const struct iovec *iov, int iovcnt)
{
    SSL *ssl = ctx->tls;
    const void *p = iov[0].iov_base;
    size_t len = iov[0].iov_len;
    static _Thread_local char gather[TLS_GATHER];
    if (iovcnt > 1 && len < TLS_GATHER) {
        /* one record for what fits: the same bytes again on a retry */
        len = 0;
        for (int i = 0; i < iovcnt && len < TLS_GATHER; i++) {
            size_t k = MIN(iov[i].iov_len, TLS_GATHER - len);
            memcpy(gather + len, iov[i].iov_base, k);
            len += k;
        }
        p = gather;
    }
    if (!len)
        return 0;
    ERR_clear_error();
    errno = 0;
    int r = SSL_write(ssl, p, (int)MIN(len, (size_t)INT32_MAX));
    if (r > 0)
        return r;
    ssize_t f = ssl_fail(ctx, ssl, r);
    if (f == 0) {
        errno = EPIPE;
        return -1;
    }
    return f;
}

void tls_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len)
{
    /* with kernel TLS for sending: the kernel encrypts the file's pages
     * (zero copy). Not exercised on a kernel without the tls ULP. */
    while (len > 0 && BIO_get_ktls_send(SSL_get_wbio(ctx->tls))) {
        ERR_clear_error();
        errno = 0;
        ossl_ssize_t n = SSL_sendfile(ctx->tls, file_fd, offset, len, 0);
        if (n > 0) {
            offset += n;
            len -= (size_t)n;
            continue;
        }
        ctx->unsent = len; /* if the wait or the connection ends here */
        if (ssl_fail(ctx, ctx->tls, (int)n) < 0 && errno == EAGAIN)
            conn_wait_io(ctx, ctx->tls_want);
        else if (errno != EINTR)
            coro_abort(ctx->coro);
        ctx->unsent = 0;
    }
    /* through ctx->out (empty here: the head went first), which stays the
     * connection's while it waits, so a retried write sees its bytes */
    while (len > 0) {
        size_t want = MIN(len, (size_t)TLS_GATHER);
        if (strbuf_reserve(&ctx->out, want) < 0)
            coro_abort(ctx->coro);
        ssize_t n = pread(file_fd, ctx->out.buf, want, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ctx->unsent = len;
            coro_abort(ctx->coro); /* an error, or the file shrank under us */
        }
        /* what went out is counted right when the client leaves midway */
        offset += n;
        len -= (size_t)n;
        conn_write_part(ctx, ctx->out.buf, (size_t)n, len);
    }
    strbuf_reset(&ctx->out);
}

void tls_idle(struct conn_ctx *ctx)
{
    SSL_free_buffers(ctx->tls);
}

bool tls_pending(const struct conn_ctx *ctx)
{
    /* SSL_pending() counts decrypted bytes only; with read-ahead, whole
     * records may wait undecrypted in OpenSSL's buffer too */
    return ctx->tls && !ctx->sub_ops && SSL_has_pending(ctx->tls);
}

void tls_try_write(struct conn_ctx *ctx, const void *p, size_t len)
{
    ERR_clear_error();
    if (len && SSL_write(ctx->tls, p, (int)MIN(len, (size_t)INT32_MAX)) <= 0)
        ERR_clear_error();
}

void tls_close_notify(struct conn_ctx *ctx)
{
    ERR_clear_error();
    if (SSL_shutdown(ctx->tls) < 0)
        ERR_clear_error();
}

void tls_free(void *tls)
{
    SSL_free(tls);
}

#else /* without OpenSSL */

bool tls_available(void)
{
    return false;
}

const char *tls_library(void)
{
    return NULL;
}

struct tls_server *tls_server_new(unsigned protocols, const char *ciphers, char *err, size_t errlen)
{
    (void)protocols;
    (void)ciphers;
    err_set(err, errlen, -ENOTSUP, NULL, "this build has no TLS (OpenSSL 3 was not found)");
    return NULL;
}

void tls_server_free(struct tls_server *ts)
{
    (void)ts;
}

void tls_server_tickets(struct tls_server *ts, bool on)
{
    (void)ts, (void)on;
}

void tls_server_ktls(struct tls_server *ts, bool on)
{
    (void)ts, (void)on;
}

int tls_server_ticket_keys(struct tls_server *ts, unsigned rotate_s, const unsigned char *key80)
{
    (void)ts, (void)rotate_s, (void)key80;
    return -ENOTSUP;
}

int tls_server_add_staple(struct tls_server *ts, int site, const char *der, char *err,
                          size_t errlen)
{
    (void)ts, (void)site, (void)der;
    return err_set(err, errlen, -ENOTSUP, NULL, "this build has no TLS");
}

int tls_server_add_site(struct tls_server *ts, const char *const *names, unsigned n,
                        bool is_default, char *err, size_t errlen)
{
    (void)ts, (void)names, (void)n, (void)is_default;
    return err_set(err, errlen, -ENOTSUP, NULL, "this build has no TLS");
}

int tls_server_add_pair(struct tls_server *ts, int site, const char *cert, const char *key,
                        bool *expired, char *err, size_t errlen)
{
    (void)ts, (void)site, (void)cert, (void)key, (void)expired;
    return err_set(err, errlen, -ENOTSUP, NULL, "this build has no TLS");
}

bool tls_server_ready(const struct tls_server *ts)
{
    (void)ts;
    return false;
}

void *tls_server_start_ctx(const struct tls_server *ts)
{
    (void)ts;
    return NULL;
}

int tls_accept(struct conn_ctx *ctx, struct tls_server *ts)
{
    (void)ctx, (void)ts;
    return -1;
}

ssize_t tls_read(struct conn_ctx *ctx, void *buf, size_t len)
{
    (void)ctx, (void)buf, (void)len;
    errno = ENOTSUP;
    return -1;
}

ssize_t tls_writev(struct conn_ctx *ctx, const struct iovec *iov, int iovcnt)
{
    (void)ctx, (void)iov, (void)iovcnt;
    errno = ENOTSUP;
    return -1;
}

void tls_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len)
{
    (void)file_fd, (void)offset, (void)len;
    coro_abort(ctx->coro);
}

void tls_idle(struct conn_ctx *ctx)
{
    (void)ctx;
}

bool tls_pending(const struct conn_ctx *ctx)
{
    (void)ctx;
    return false;
}

void tls_try_write(struct conn_ctx *ctx, const void *p, size_t len)
{
    (void)ctx, (void)p, (void)len;
}

void tls_close_notify(struct conn_ctx *ctx)
{
    (void)ctx;
}

void tls_free(void *tls)
{
    (void)tls;
}

void tls_handshake_counts(uint64_t *full, uint64_t *resumed, uint64_t *failed)
{
    *full = *resumed = *failed = 0;
}

#endif
