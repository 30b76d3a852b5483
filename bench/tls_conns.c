/* tls_conns.c - one TLS handshake and one request per connection, for
 * bench/cpu.sh's "full" and "resume" workloads (wrk keeps connections).
 *
 *   tls_conns PORT SECONDS full|resume [PATH] [CONNS]
 *
 * Runs CONNS (default 16) connections at once, each in turn: connect,
 * handshake (TLS 1.3, P-256 key share; "resume" offers the ticket the
 * previous connection of the same slot received), GET PATH with
 * "Connection: close", read to the end, close. Stops after SECONDS and
 * prints what bench/cpu.sh reads from wrk ("N requests in", "Requests/sec:")
 * and how many handshakes resumed; exits 1 when a request failed or, in
 * "resume" mode, fewer than 9 in 10 handshakes resumed.
 *
 * Build: cc -O2 -o tls_conns bench/tls_conns.c -lssl -lcrypto */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One connection's life, blocking (each slot is its own thread). */
struct slot {
    SSL_CTX *ctx;
    int port;
    const char *path;
    double until;
    int resume;
    long done, reused, failed;
    SSL_SESSION *sess; /* the last ticket received (each is used once) */
};

/* A ticket arrived (TLS 1.3 sends them after the handshake, on resumed
 * connections too): the slot's next connection offers it. */
static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct slot *s = SSL_get_app_data(ssl);
    SSL_SESSION_free(s->sess);
    s->sess = sess;
    return 1; /* we keep the reference */
}

static int one(struct slot *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one_ = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof(one_));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    SSL *ssl = SSL_new(s->ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    SSL_set_app_data(ssl, s);
    if (s->resume && s->sess) {
        SSL_set_session(ssl, s->sess);
        SSL_SESSION_free(s->sess); /* a ticket is offered once */
        s->sess = NULL;
    }
    int ok = -1;
    if (SSL_connect(ssl) == 1) {
        char req[512];
        int n =
            snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", s->path);
        if (SSL_write(ssl, req, n) == n) {
            char buf[16384];
            long got = 0;
            int r;
            while ((r = SSL_read(ssl, buf, sizeof(buf))) > 0) {
                if (!got && (r < 12 || memcmp(buf, "HTTP/1.1 200", 12)))
                    break;
                got += r;
            }
            if (got && SSL_get_error(ssl, r) == SSL_ERROR_ZERO_RETURN)
                ok = 0;
            else if (got && r == 0)
                ok = 0; /* closed without close_notify: the answer was whole (Connection: close) */
        }
        if (!ok && SSL_session_reused(ssl))
            s->reused++;
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(fd);
    return ok;
}

#include <pthread.h>

static void *run(void *arg)
{
    struct slot *s = arg;
    while (now() < s->until) {
        if (one(s) == 0)
            s->done++;
        else
            s->failed++;
    }
    SSL_SESSION_free(s->sess);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tls_conns PORT SECONDS full|resume [PATH] [CONNS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    double secs = atof(argv[2]);
    int resume = !strcmp(argv[3], "resume");
    const char *path = argc > 4 ? argv[4] : "/hello";
    int conns = argc > 5 ? atoi(argv[5]) : 16;
    if (conns < 1 || conns > 1024)
        conns = 16;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set1_groups_list(ctx, "P-256");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session);
    struct slot *s = calloc((size_t)conns, sizeof(*s));
    pthread_t *t = calloc((size_t)conns, sizeof(*t));
    double t0 = now();
    for (int i = 0; i < conns; i++) {
        s[i] = (struct slot){
            .ctx = ctx, .port = port, .path = path, .until = t0 + secs, .resume = resume};
        pthread_create(&t[i], NULL, run, &s[i]);
    }
    long done = 0, reused = 0, failed = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(t[i], NULL);
        done += s[i].done;
        reused += s[i].reused;
        failed += s[i].failed;
    }
    double el = now() - t0;
    printf("  %ld requests in %.2fs, %ld resumed, %ld failed\n", done, el, reused, failed);
    printf("Requests/sec: %.2f\n", (double)done / el);
    if (failed)
        printf("  Socket errors: %ld failed connections\n", failed);
    if (failed || (resume && reused * 10 < done * 9)) {
        fprintf(stderr, "tls_conns: %ld failed, %ld of %ld resumed\n", failed, reused, done);
        return 1;
    }
    return 0;
}
