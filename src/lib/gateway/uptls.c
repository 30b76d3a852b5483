/* uptls.c - TLS to an upstream (see uptls.h). A socket's session is found
 * in a table indexed by its fd, made once (at the first https:// upstream's
 * config) as large as the process's fd limit: only the worker that holds
 * an fd touches its slot, and the table lives as long as the process. */
#include "gateway/uptls.h"

#include "gateway/upstream.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef COLIBRI_WITH_OPENSSL

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base/log.h"

struct gw_tls {
    SSL_CTX *ctx;
    char name[256]; /* SNI and the verified name */
    bool verify;
    pthread_mutex_t lock; /* sess */
    SSL_SESSION *sess;    /* the latest session: the next connection resumes it */
};

static SSL **tab;
static size_t tab_cap;
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_make(void)
{
    struct rlimit rl;
    size_t cap = 1u << 16;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > cap)
        cap = (size_t)rl.rlim_max;
    if (cap > (1u << 22))
        cap = 1u << 22;
    /* untouched pages of a large calloc cost no memory */
    if ((tab = calloc(cap, sizeof(*tab))))
        tab_cap = cap;
}

static SSL *ssl_of(int fd)
{
    return fd >= 0 && (size_t)fd < tab_cap ? tab[fd] : NULL;
}

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct gw_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (!t)
        return 0; /* not kept: OpenSSL frees it */
    pthread_mutex_lock(&t->lock);
    SSL_SESSION *old = t->sess;
    t->sess = sess;
    pthread_mutex_unlock(&t->lock);
    if (old)
        SSL_SESSION_free(old);
    return 1; /* we keep the reference */
}

int gw_tls_new(struct gw_tls **out, const char *host, bool verify, const char *ca, const char *name,
               char *why, size_t whylen)
{
    *out = NULL;
    pthread_once(&tab_once, tab_make);
    if (!tab)
        return snprintf(why, whylen, "out of memory"), -EINVAL;
    struct gw_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return snprintf(why, whylen, "out of memory"), -EINVAL;
    pthread_mutex_init(&t->lock, NULL);
    t->verify = verify;
    snprintf(t->name, sizeof(t->name), "%s", name ? name : host);
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (!t->ctx) {
        gw_tls_free(t);
        return snprintf(why, whylen, "cannot make a TLS context"), -EINVAL;
    }
    if (!SSL_CTX_set_app_data(t->ctx, t)) { /* new_session() needs it */
        gw_tls_free(t);
        return snprintf(why, whylen, "out of memory"), -EINVAL;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(t->ctx, alpn, sizeof(alpn) - 1);
    SSL_CTX_set_session_cache_mode(t->ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(t->ctx, new_session);
    if (verify) {
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        int ok = ca ? SSL_CTX_load_verify_locations(t->ctx, ca, NULL)
                    : SSL_CTX_set_default_verify_paths(t->ctx);
        if (ok != 1) {
            unsigned long e = ERR_peek_last_error();
            char buf[256];
            ERR_error_string_n(e, buf, sizeof(buf));
            snprintf(why, whylen, "cannot load CA certificates%s%s: %s", ca ? " from " : "",
                     ca ? ca : "", e ? buf : "none found");
            ERR_clear_error();
            gw_tls_free(t);
            return -EINVAL;
        }
    }
    *out = t;
    return 0;
}

void gw_tls_default_paths(const char **file, const char **dir)
{
    *file = getenv(X509_get_default_cert_file_env());
    if (!*file)
        *file = X509_get_default_cert_file();
    *dir = getenv(X509_get_default_cert_dir_env());
    if (!*dir)
        *dir = X509_get_default_cert_dir();
}

void gw_tls_free(struct gw_tls *t)
{
    if (!t)
        return;
    if (t->sess)
        SSL_SESSION_free(t->sess);
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* What the wait for an SSL call that returned r needs: 0 done (r > 0),
 * CONN_WAIT_READ/WRITE, or a negative errno. */
static int want(SSL *ssl, int r)
{
    int e = SSL_get_error(ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        return CONN_WAIT_READ;
    case SSL_ERROR_WANT_WRITE:
        return CONN_WAIT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return -EPIPE;
    case SSL_ERROR_SYSCALL: {
        int err = errno;
        ERR_clear_error();
        return err && err != EAGAIN ? -err : -EPIPE;
    }
    default:
        ERR_clear_error();
        return -EPROTO;
    }
}

/* A new connection's names (SNI for a name, not for an address literal;
 * the name or address verified) and the session it offers. */
static void setup(SSL *ssl, struct gw_tls *t)
{
    bool literal = strspn(t->name, "0123456789.") == strlen(t->name) || strchr(t->name, ':');
    if (!literal)
        SSL_set_tlsext_host_name(ssl, t->name);
    if (t->verify) {
        if (literal)
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name);
        else
            SSL_set1_host(ssl, t->name);
    }
    pthread_mutex_lock(&t->lock);
    if (t->sess)
        SSL_set_session(ssl, t->sess);
    pthread_mutex_unlock(&t->lock);
    SSL_set_connect_state(ssl);
}

/* Why a handshake failed with SSL error e. */
static void handshake_failed(SSL *ssl, const struct gw_tls *t, int e, char *why, size_t whylen)
{
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK)
        snprintf(why, whylen, "certificate verify failed: %s (verified name %s)",
                 X509_verify_cert_error_string(v), t->name);
    else if (e == SSL_ERROR_SYSCALL)
        snprintf(why, whylen, "%s", errno ? strerror(errno) : "connection closed");
    else
        ERR_error_string_n(ERR_peek_last_error(), why, whylen);
    ERR_clear_error();
}

int gw_tls_connect(struct conn_ctx *ctx, struct gw_tls *t, const char *text, int fd, int timeout_ms)
{
    if ((size_t)fd >= tab_cap) {
        close(fd);
        return -EMFILE;
    }
    ERR_clear_error();
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl || !SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        close(fd);
        ERR_clear_error();
        return -ENOMEM;
    }
    setup(ssl, t);
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            int w = conn_wait_fd_kept(
                ctx, fd, e == SSL_ERROR_WANT_READ ? CONN_WAIT_READ : CONN_WAIT_WRITE, timeout_ms);
            if (w < 0) {
                SSL_free(ssl);
                close(fd);
                return w;
            }
            continue;
        }
        char why[512];
        handshake_failed(ssl, t, e, why, sizeof(why));
        LOG_LIMITED(LOG_WARN, "proxy: upstream %s: TLS handshake failed: %s", text, why);
        SSL_free(ssl);
        close(fd);
        return -EPROTO;
    }
    tab[fd] = ssl;
    return fd;
}

ssize_t gw_tls_check(struct gw_tls *t, int fd, int stop_fd, uint64_t deadline_ms, const char *req,
                     size_t n, char *buf, size_t cap, char *why, size_t whylen)
{
    ERR_clear_error();
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl || !SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        ERR_clear_error();
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    setup(ssl, t);
    enum { SHAKE, SEND, READ } step = SHAKE;
    size_t sent = 0, got = 0;
    bool done = false;
    snprintf(why, whylen, "timed out");
    while (!done) {
        size_t k = 0;
        ERR_clear_error();
        int r = step == SHAKE  ? SSL_connect(ssl)
                : step == SEND ? SSL_write_ex(ssl, req + sent, n - sent, &k)
                               : SSL_read_ex(ssl, buf + got, cap - got, &k);
        if (r == 1) {
            if (step == SHAKE)
                step = SEND;
            else if (step == SEND && (sent += k) == n)
                step = READ;
            else if (step == READ)
                done = (got += k) >= 12 || got == cap; /* a status line */
            continue;
        }
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            if (step == SHAKE)
                handshake_failed(ssl, t, e, why, whylen);
            else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !errno))
                snprintf(why, whylen, "closed without an answer");
            else
                snprintf(why, whylen, "%s", e == SSL_ERROR_SYSCALL ? strerror(errno) : "TLS error");
            break;
        }
        uint64_t now = gw_mono_ms();
        if (now >= deadline_ms)
            break;
        struct pollfd p[2] = {{.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT},
                              {.fd = stop_fd, .events = POLLIN}};
        int pr = poll(p, 2, (int)(deadline_ms - now));
        if ((pr < 0 && errno != EINTR) || (pr > 0 && p[1].revents))
            break;
    }
    ERR_clear_error();
    if (got && SSL_shutdown(ssl) < 0) /* close_notify: the session stays resumable */
        ERR_clear_error();
    SSL_free(ssl);
    return got ? (ssize_t)got : -1;
}

bool gw_tls_on(int fd)
{
    return ssl_of(fd) != NULL;
}

int gw_tls_writev(struct conn_ctx *ctx, int fd, struct iovec *iov, int iovcnt, int timeout_ms)
{
    SSL *ssl = ssl_of(fd);
    /* on the coroutine's stack (32 KiB, OpenSSL's write path below it):
     * kept small. Not thread-local: a retry after a wait sends these bytes
     * again, and another connection of the thread runs meanwhile. 16 KiB
     * here overflowed the stack once a fault library's backtrace() was
     * added under write() (check-faults) */
    char rec[4096];
    while (iovcnt > 0) {
        /* small pieces go as one record */
        const char *p;
        size_t len = 0;
        if (iov->iov_len >= sizeof(rec) || iovcnt == 1) {
            p = iov->iov_base;
            len = iov->iov_len;
            iov++, iovcnt--;
        } else {
            while (iovcnt > 0 && len + iov->iov_len <= sizeof(rec)) {
                memcpy(rec + len, iov->iov_base, iov->iov_len);
                len += iov->iov_len;
                iov++, iovcnt--;
            }
            p = rec;
        }
        while (len) {
            size_t n;
            ERR_clear_error();
            int r = SSL_write_ex(ssl, p, len, &n);
            if (r > 0) {
                p += n, len -= n;
                continue;
            }
            int w = want(ssl, r);
            if (w < 0)
                return w;
            if ((w = conn_wait_fd_kept(ctx, fd, (unsigned)w, timeout_ms)) < 0)
                return w;
        }
    }
    return 0;
}

ssize_t gw_tls_read_now(int fd, void *buf, size_t cap)
{
    SSL *ssl = ssl_of(fd);
    size_t n;
    ERR_clear_error();
    int r = SSL_read_ex(ssl, buf, cap, &n);
    if (r > 0)
        return (ssize_t)n;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    int w = want(ssl, r);
    if (w == -EPIPE)
        return 0;
    return w > 0 ? -EAGAIN : w;
}

ssize_t gw_tls_read(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms)
{
    SSL *ssl = ssl_of(fd);
    for (;;) {
        size_t n;
        ERR_clear_error();
        int r = SSL_read_ex(ssl, buf, cap, &n);
        if (r > 0)
            return (ssize_t)n;
        if (SSL_get_error(ssl, r) == SSL_ERROR_ZERO_RETURN)
            return 0;
        int w = want(ssl, r);
        if (w == -EPIPE)
            return 0; /* the end without close_notify (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        if (w < 0)
            return w;
        if ((w = conn_wait_fd_kept(ctx, fd, (unsigned)w, timeout_ms)) < 0)
            return w;
        if (w & CONN_WAIT_HUP)
            gw_pool_ended(fd); /* not to be pooled (upstream.h) */
    }
}

bool gw_tls_idle_alive(int fd)
{
    SSL *ssl = ssl_of(fd);
    if (SSL_pending(ssl))
        return false;
    char c;
    size_t n;
    ERR_clear_error();
    int r = SSL_peek_ex(ssl, &c, 1, &n);
    if (r > 0)
        return false; /* stray bytes */
    int e = SSL_get_error(ssl, r);
    ERR_clear_error();
    return e == SSL_ERROR_WANT_READ;
}

bool gw_tls_pending(int fd)
{
    SSL *ssl = ssl_of(fd);
    return ssl && SSL_pending(ssl) > 0;
}

void gw_tls_drop(int fd)
{
    SSL *ssl = ssl_of(fd);
    if (!ssl)
        return;
    tab[fd] = NULL;
    /* a close_notify if it goes at once: a session freed unshut could not
     * be resumed */
    ERR_clear_error();
    if (SSL_shutdown(ssl) < 0)
        ERR_clear_error();
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
}

#else /* no OpenSSL */

int gw_tls_new(struct gw_tls **out, const char *host, bool verify, const char *ca, const char *name,
               char *why, size_t whylen)
{
    (void)host, (void)verify, (void)ca, (void)name;
    *out = NULL;
    snprintf(why, whylen, "https:// upstreams need colibri built with OpenSSL");
    return -EINVAL;
}
void gw_tls_free(struct gw_tls *t)
{
    (void)t;
}
void gw_tls_default_paths(const char **file, const char **dir)
{
    *file = *dir = NULL;
}
int gw_tls_connect(struct conn_ctx *ctx, struct gw_tls *t, const char *text, int fd, int timeout_ms)
{
    (void)ctx, (void)t, (void)text, (void)timeout_ms;
    close(fd);
    return -EPROTO;
}
ssize_t gw_tls_check(struct gw_tls *t, int fd, int stop_fd, uint64_t deadline_ms, const char *req,
                     size_t n, char *buf, size_t cap, char *why, size_t whylen)
{
    (void)t, (void)fd, (void)stop_fd, (void)deadline_ms, (void)req, (void)n, (void)buf, (void)cap;
    snprintf(why, whylen, "no TLS in this build");
    return -1;
}
bool gw_tls_on(int fd)
{
    (void)fd;
    return false;
}
int gw_tls_writev(struct conn_ctx *ctx, int fd, struct iovec *iov, int iovcnt, int timeout_ms)
{
    (void)ctx, (void)fd, (void)iov, (void)iovcnt, (void)timeout_ms;
    return -EPROTO;
}
ssize_t gw_tls_read(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms)
{
    (void)ctx, (void)fd, (void)buf, (void)cap, (void)timeout_ms;
    return -EPROTO;
}
ssize_t gw_tls_read_now(int fd, void *buf, size_t cap)
{
    (void)fd, (void)buf, (void)cap;
    return -EPROTO;
}
bool gw_tls_idle_alive(int fd)
{
    (void)fd;
    return false;
}
bool gw_tls_pending(int fd)
{
    (void)fd;
    return false;
}
void gw_tls_drop(int fd)
{
    (void)fd;
}

#endif
