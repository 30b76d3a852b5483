/* null_common.h - what bench/null_server.c (epoll) and bench/null_uring.c
 * (io_uring) share: the listening socket, the canned responses and the
 * request-head counter. Both servers answer exactly the same bytes, so the
 * difference between them is the I/O interface alone. Header-only, static:
 * each server is one translation unit. */
#ifndef NULL_COMMON_H
#define NULL_COMMON_H

#include <signal.h>
#include <pthread.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SMALL_MAX (64 * 1024)

static int port;
static int body_fd;
static size_t body_len;
static char *small;       /* header + body, for small bodies */
static size_t small_len;  /* its length */
static char *small_close; /* the same with "Connection: close" */
static size_t small_close_len;
static char header[512];
static size_t header_len;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Runs worker on `threads` threads (this one included), SIGPIPE ignored. */
static void run_threads(int threads, void *(*worker)(void *))
{
    signal(SIGPIPE, SIG_IGN);
    pthread_t t;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&t, NULL, worker, NULL) != 0)
            die("pthread_create");
    worker(NULL);
}

/* Experiments (bench/RESULTS.md, issue 12), from the environment, the
 * defaults are the servers' normal behaviour: NULL_CC (congestion control name), NULL_SNDBUF
 * (bytes, SO_SNDBUF, which turns autotuning off), NULL_DEFER (seconds of TCP_DEFER_ACCEPT, default
 * 1 as in colibri; 0: off); accepted sockets inherit them from the listener. NULL_MINIMAL (any
 * value): the header is Content-Length alone, like -m. */
static void listen_options(int fd)
{
    const char *v;
    if ((v = getenv("NULL_CC")) && *v &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, v, (socklen_t)strlen(v)) < 0)
        die("NULL_CC");
    int n;
    if ((v = getenv("NULL_SNDBUF")) && (n = atoi(v)) > 0 &&
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n)) < 0)
        die("NULL_SNDBUF");
    /* accept only once the request is there, as colibri's listener does */
    n = (v = getenv("NULL_DEFER")) ? atoi(v) : 1;
    if (n > 0 && setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &n, sizeof(n)) < 0)
        die("NULL_DEFER");
}

static int listen_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    listen_options(fd);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0)
        die("bind/listen");
    return fd;
}

/* Count request heads ("\r\n\r\n") in buf; *state carries a partial match
 * from one read to the next. */
static unsigned count_heads(unsigned *state, const char *buf, size_t n)
{
    static const char end[] = "\r\n\r\n";
    unsigned heads = 0, s = *state;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == end[s]) {
            if (++s == 4) {
                heads++;
                s = 0;
            }
        } else {
            s = buf[i] == '\r';
        }
    }
    *state = s;
    return heads;
}

/* Open BODY_FILE and build the response header (and, for small bodies,
 * header + body with and without "Connection: close"). minimal: the header
 * is the status line and Content-Length alone. Bodies above SMALL_MAX are
 * kept in memory too when keep_large is set (io_uring has no sendfile). */
static void build_responses(const char *file, bool minimal, bool keep_large)
{
    body_fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (body_fd < 0 || fstat(body_fd, &st) < 0)
        die(file);
    body_len = (size_t)st.st_size;
    /* The header fields the issues require of colibri, with values of the
     * real lengths; the Date is not updated (its length is what counts). */
    static const char date[] = "Sun, 22 Nov 2026 06:00:00 GMT";
    const char *slash = strrchr(file, '/');
    bool text = strstr(slash ? slash : file, ".txt") != NULL;
    if (minimal)
        header_len = (size_t)snprintf(header, sizeof(header),
                                      "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", body_len);
    else if (text)
        header_len = (size_t)snprintf(header, sizeof(header),
                                      "HTTP/1.1 200 OK\r\nDate: %s\r\n"
                                      "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
                                      date, body_len);
    else
        header_len = (size_t)snprintf(
            header, sizeof(header),
            "HTTP/1.1 200 OK\r\nDate: %s\r\nContent-Type: application/octet-stream\r\n"
            "Content-Length: %zu\r\nLast-Modified: %s\r\nETag: \"%016llx-%zx\"\r\n\r\n",
            date, body_len, date, (unsigned long long)st.st_mtime, body_len);
    if (body_len <= SMALL_MAX || keep_large) {
        small_len = header_len + body_len;
        if (!(small = malloc(small_len)))
            die("malloc");
        memcpy(small, header, header_len);
        if (pread(body_fd, small + header_len, body_len, 0) != (ssize_t)body_len)
            die("pread");
        static const char cc[] = "Connection: close\r\n";
        small_close_len = small_len + sizeof(cc) - 1;
        if (!(small_close = malloc(small_close_len)))
            die("malloc");
        memcpy(small_close, header, header_len - 2);
        memcpy(small_close + header_len - 2, cc, sizeof(cc) - 1);
        memcpy(small_close + header_len - 2 + sizeof(cc) - 1, small + header_len - 2, body_len + 2);
    }
}

#endif
