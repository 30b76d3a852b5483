/* test_transport.c - one line protocol run over the plain socket and over
 * TLS (rt/tls.c) by the same worker: listener 0 is plain, listener 1 TLS.
 * The protocol answers the same bytes whichever transport carries them:
 * echoed lines, a long answer in many records, a file through
 * conn_sendfile(). And the wait on the connection's own socket
 * (conn_wait_fd(CONN_FD_SELF)) asks the transport first: bytes decrypted
 * and held inside OpenSSL, which no readiness event announces, end it at
 * once (without that check the wait would run to its timeout). */
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "rt/tls.h"
#include "rt/worker.h"

#ifdef COLIBRI_WITH_OPENSSL
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static struct tls_server *server_tls;
static int file_fd = -1;
#define FILE_LEN 100000

struct st {
    bool narrow; /* the next read takes at most 5 bytes */
};

static enum conn_verdict line_run(struct conn_ctx *ctx)
{
    struct st *st = conn_state(ctx);
    for (;;) {
        char *start = ctx->in + ctx->in_pos;
        char *nl = memchr(start, '\n', ctx->in_len - ctx->in_pos);
        if (nl) {
            size_t len = (size_t)(nl - start) + 1;
            ctx->in_pos += len;
            char msg[64];
            if (len == 7 && !memcmp(start, "narrow", 6)) {
                st->narrow = true;
                conn_write(ctx, "ok\n", 3);
            } else if (len == 5 && !memcmp(start, "wait", 4)) {
                int r = conn_wait_fd(ctx, CONN_FD_SELF, CONN_WAIT_READ, 3000);
                int n = snprintf(msg, sizeof(msg), "woke %d\n", r);
                conn_write(ctx, msg, (size_t)n);
            } else if (len == 4 && !memcmp(start, "big", 3)) {
                static char big[70000];
                memset(big, 'b', sizeof(big));
                big[sizeof(big) - 1] = '\n';
                conn_write(ctx, big, sizeof(big));
            } else if (len == 5 && !memcmp(start, "file", 4)) {
                conn_sendfile(ctx, file_fd, 0, FILE_LEN);
            } else if (len == 7 && !memcmp(start, "secure", 6)) {
                int n = snprintf(msg, sizeof(msg), "%s\n",
                                 conn_is_secure(ctx) ? conn_tls_version(ctx) : "plain");
                conn_write(ctx, msg, (size_t)n);
            } else {
                conn_write(ctx, start, len);
            }
            continue;
        }
        conn_compact(ctx);
        size_t cap = ctx->in_cap;
        if (st->narrow) /* a small window: the rest stays in the transport */
            ctx->in_cap = MIN(cap, ctx->in_len + 5);
        ssize_t n = conn_read(ctx, false);
        ctx->in_cap = cap;
        st->narrow = false;
        if (n <= 0)
            return CONN_CLOSE;
    }
}

static bool line_between(const struct conn_ctx *ctx)
{
    (void)ctx;
    return true;
}

static struct tls_server *line_tls_for(const struct conn_ctx *ctx)
{
    return conn_listener(ctx) == 1 ? server_tls : NULL;
}

static const struct conn_proto line_proto = {
    .state_size = sizeof(struct st),
    .run = line_run,
    .between_requests = line_between,
    .tls_for = line_tls_for,
};

/* A self-signed P-256 certificate and its key, as PEM files in dir. */
static void make_cert(const char *dir, char *cert, char *key)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pk);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"test", -1, -1, 0);
    X509_set_issuer_name(x, name);
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

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    listen(fd, 16);
    getsockname(fd, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A client over either transport: ssl NULL for plain. */
struct cl {
    int fd;
    SSL *ssl;
};

static bool cl_open(struct cl *c, int port, SSL_CTX *tls)
{
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    c->ssl = NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        return false;
    if (!tls)
        return true;
    c->ssl = SSL_new(tls);
    SSL_set_fd(c->ssl, c->fd);
    return SSL_connect(c->ssl) == 1;
}

/* One write: one TLS record, or one send. */
static void cl_send(struct cl *c, const char *s)
{
    int n = (int)strlen(s);
    CHECK_EQ_INT(c->ssl ? SSL_write(c->ssl, s, n) : (int)write(c->fd, s, (size_t)n), n);
}

static size_t cl_read_n(struct cl *c, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        int r = c->ssl ? SSL_read(c->ssl, buf + got, (int)(n - got))
                       : (int)read(c->fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void cl_close(struct cl *c)
{
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    close(c->fd);
}

/* The same exchange over one transport; tls NULL for plain. */
static void exchange(int port, SSL_CTX *tls)
{
    struct cl c;
    CHECK(cl_open(&c, port, tls));
    static char buf[120000];

    cl_send(&c, "hello\n");
    CHECK_EQ_INT(cl_read_n(&c, buf, 6), 6);
    CHECK_EQ_MEM(buf, 6, "hello\n", 6);

    cl_send(&c, "secure\n");
    const char *want = tls ? "TLSv1.3\n" : "plain\n";
    CHECK_EQ_INT(cl_read_n(&c, buf, strlen(want)), strlen(want));
    CHECK_EQ_MEM(buf, strlen(want), want, strlen(want));

    /* "wait" arrives with "hello" behind it in one record; the narrow read
     * takes "wait\n" only, so "hello\n" is held by the transport (TLS) or
     * the socket (plain): either way the wait ends at once */
    cl_send(&c, "narrow\n");
    CHECK_EQ_INT(cl_read_n(&c, buf, 3), 3);
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    cl_send(&c, "wait\nhello\n");
    CHECK_EQ_INT(cl_read_n(&c, buf, 13), 13);
    gettimeofday(&t1, NULL);
    CHECK_EQ_MEM(buf, 13, "woke 1\nhello\n", 13);
    CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000 < 2000);

    /* a long answer: many records */
    cl_send(&c, "big\n");
    CHECK_EQ_INT(cl_read_n(&c, buf, 70000), 70000);
    CHECK(buf[0] == 'b' && buf[69998] == 'b' && buf[69999] == '\n');

    /* a file */
    cl_send(&c, "file\n");
    CHECK_EQ_INT(cl_read_n(&c, buf, FILE_LEN), FILE_LEN);
    char *expect = malloc(FILE_LEN);
    CHECK_EQ_INT(pread(file_fd, expect, FILE_LEN, 0), FILE_LEN);
    CHECK(!memcmp(buf, expect, FILE_LEN));
    free(expect);
    cl_close(&c);
}

TEST(one_protocol_over_plain_and_tls)
{
    char dir[] = "/tmp/colibri-transport-XXXXXX", cert[256], key[256], why[256];
    CHECK(mkdtemp(dir) != NULL);
    make_cert(dir, cert, key);
    server_tls = tls_server_new(0, NULL, why, sizeof(why));
    CHECK(server_tls != NULL);
    int site = tls_server_add_site(server_tls, NULL, 0, true, why, sizeof(why));
    CHECK_EQ_INT(site, 0);
    bool expired = true;
    CHECK_EQ_INT(tls_server_add_pair(server_tls, site, cert, key, &expired, why, sizeof(why)), 0);
    CHECK(!expired);
    /* a key that is not its certificate's is refused, saying so */
    char other[300];
    snprintf(other, sizeof(other), "%s/other", dir);
    CHECK(mkdir(other, 0700) == 0);
    char cert2[256], key2[256];
    make_cert(other, cert2, key2);
    CHECK(tls_server_add_pair(server_tls, site, cert, key2, &expired, why, sizeof(why)) < 0);
    CHECK(strstr(why, "does not match") != NULL);

    char path[300];
    snprintf(path, sizeof(path), "%s/file", dir);
    file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    char *bytes = malloc(FILE_LEN);
    for (int i = 0; i < FILE_LEN; i++)
        bytes[i] = (char)('a' + i % 26);
    CHECK_EQ_INT(write(file_fd, bytes, FILE_LEN), FILE_LEN);
    free(bytes);

    enum { MAX_FDS = 1024 };
    struct conn *conns = calloc(MAX_FDS, sizeof(*conns));
    struct worker_cfg cfg = {
        .keep_alive_s = 30,
        .request_timeout_s = 5,
        .in_cap = 4096,
        .stack_size = CORO_DEFAULT_STACK,
        .max_free_ctx = 4,
        .shutdown_grace_s = 2,
        .proto = &line_proto,
    };
    int ports[2];
    int *fds = malloc(2 * sizeof(int));
    fds[0] = listen_any(&ports[0]);
    fds[1] = listen_any(&ports[1]);
    struct worker *w;
    CHECK_EQ_INT(worker_new(&w, &cfg, 0, conns, NULL, MAX_FDS, fds, 2, NULL), 0);
    CHECK_EQ_INT(worker_start(w), 0);

    SSL_CTX *client = SSL_CTX_new(TLS_client_method());
    exchange(ports[0], NULL);
    exchange(ports[1], client);
    SSL_CTX_free(client);

    worker_wake(w);
    worker_join(w);
    worker_free(w);
    tls_server_free(server_tls);
    free(conns);
    close(file_fd);
    unlink(path);
    unlink(cert);
    unlink(key);
    unlink(cert2);
    unlink(key2);
    rmdir(other);
    rmdir(dir);
}

TEST(ktls_probe_reads_the_ulp_list)
{
    char path[] = "/tmp/colibri-ulp-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ_INT(write(fd, "mptcp\n", 6), 6);
    CHECK(!tls_ktls_probe(path));
    CHECK_EQ_INT(pwrite(fd, "mptcp tls\n", 10, 0), 10);
    CHECK(tls_ktls_probe(path));
    CHECK_EQ_INT(pwrite(fd, "tlsx espintcp\n", 14, 0), 14);
    CHECK(!tls_ktls_probe(path));
    close(fd);
    unlink(path);
    CHECK(!tls_ktls_probe("/nonexistent/tcp_available_ulp"));
}

int main(void)
{
    RUN(one_protocol_over_plain_and_tls);
    RUN(ktls_probe_reads_the_ulp_list);
    return test_summary();
}

#else

int main(void)
{
    printf("built without OpenSSL: nothing to test\n");
    return 0;
}

#endif
