/* null_server - the least work an HTTP/1.1 server can do per request, to
 * measure the ceiling of a load test rather than a server.
 *
 *   null_server [-m] PORT THREADS BODY_FILE
 *
 * Every request gets the same 200 response whose body is BODY_FILE, with the
 * header fields the colibri issues require and nothing else: Date,
 * Content-Type and Content-Length, plus Last-Modified and ETag for a file
 * that is not *.txt. -m sends Content-Length alone (see bench/RESULTS.md on
 * why the header's length changes what wrk measures for large files). The
 * server does not parse: it counts the blank lines that end request heads
 * ("\r\n\r\n") and sends one response per head, all the responses to one
 * read in one write (so pipelining works). A head containing
 * "Connection: close" gets a response saying so, sent with MSG_MORE so that
 * the FIN of the close() that follows leaves in the same segment, as
 * colibri does (small bodies only: the large-body path is for keep-alive).
 * Bodies up to 64 KiB are kept in memory and sent with the header in one
 * write; larger ones go as a header with MSG_MORE and one sendfile per
 * response. The listening socket has TCP_DEFER_ACCEPT, and a new connection
 * is read and answered right after accept(); it joins epoll only if it has
 * to wait, as colibri's do. bench/null_common.h lists the environment
 * settings for experiments; bench/null_uring.c is the same server on
 * io_uring.
 *
 * It is not a server anyone should use (no request parsing, no limits, no
 * timeouts); it exists so bench/ceiling.sh can show what wrk -t1 on this
 * machine can measure at all. Threads: one epoll and one SO_REUSEPORT
 * listening socket each, edge-triggered, as colibri does. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "null_common.h"

#define MAX_BATCH 64 /* responses per write for small bodies */

static size_t chunk;     /* NULL_CHUNK, 0: no limit */
static char *split_body; /* NULL_SPLIT: the body in a buffer of its own */

struct conn {
    unsigned pending; /* responses owed */
    unsigned state;   /* how much of "\r\n\r\n" the last bytes matched */
    size_t sent;      /* bytes of the response (or batch) in progress already sent */
    int close_after;  /* a head asked for Connection: close */
};

/* Send what is owed; 0 when all is sent, 1 on EAGAIN, -1 on error. */
static int flush(int fd, struct conn *c)
{
    static __thread char *batch;
    if (body_len <= SMALL_MAX) {
        if (!batch) {
            if (!(batch = malloc(small_len * MAX_BATCH)))
                die("malloc");
            for (unsigned i = 0; i < MAX_BATCH; i++)
                memcpy(batch + i * small_len, small, small_len);
        }
        if (c->close_after) {
            /* the last answer on this connection says so; any other
             * heads in the same read are answered by it alone */
            /* MSG_MORE: the answer waits for the FIN close() adds, and
             * both leave in one segment, as colibri does */
            ssize_t w =
                send(fd, small_close + c->sent, small_close_len - c->sent, MSG_MORE | MSG_NOSIGNAL);
            if (w < 0)
                return errno == EAGAIN ? 1 : -1;
            c->sent += (size_t)w;
            if (c->sent < small_close_len)
                return 1;
            c->pending = 0;
            return 0;
        }
        while (c->pending) {
            /* pending only grows while a batch is part-sent, so c->sent
             * stays inside the (same or longer) batch */
            unsigned k = c->pending < MAX_BATCH ? c->pending : MAX_BATCH;
            size_t total = small_len * k;
            ssize_t w;
            if (split_body && k == 1 && c->sent == 0) {
                /* NULL_SPLIT: header and body from two buffers, as colibri
                 * writes a cached file (the rest of a partial write comes
                 * from the batch, which holds the same bytes) */
                struct iovec iov[2] = {{header, header_len}, {split_body, body_len}};
                w = writev(fd, iov, 2);
            } else {
                w = write(fd, batch + c->sent, total - c->sent);
            }
            if (w < 0)
                return errno == EAGAIN ? 1 : -1;
            c->sent += (size_t)w;
            if (c->sent < total)
                return 1; /* partial: the socket is full; resume on EPOLLOUT */
            c->pending -= k;
            c->sent = 0;
        }
        return 0;
    }
    while (c->pending) {
        ssize_t w;
        if (c->sent < header_len) {
            w = send(fd, header + c->sent, header_len - c->sent, MSG_MORE);
        } else {
            off_t off = (off_t)(c->sent - header_len);
            size_t left = body_len - (size_t)off;
            w = sendfile(fd, body_fd, &off, chunk && chunk < left ? chunk : left);
        }
        if (w < 0)
            return errno == EAGAIN ? 1 : -1;
        c->sent += (size_t)w;
        if (c->sent == header_len + body_len) {
            c->pending--;
            c->sent = 0;
        }
    }
    return 0;
}

/* Read what fd has and answer it; true when the connection is done. */
static bool serve(int fd, struct conn *c, char *buf, uint32_t events)
{
    bool dead = false;
    if (events & EPOLLIN) {
        for (;;) {
            ssize_t r = read(fd, buf, 65536);
            if (r > 0) {
                c->pending += count_heads(&c->state, buf, (size_t)r);
                if (memmem(buf, (size_t)r, "Connection: close", 17))
                    c->close_after = 1;
                if (r < 65536)
                    break;
            } else {
                dead = r == 0 || errno != EAGAIN;
                break;
            }
        }
    }
    if (!dead && c->pending) {
        int f = flush(fd, c);
        dead = f < 0 || (f == 0 && c->close_after);
    }
    return dead || (events & (EPOLLERR | EPOLLHUP));
}

static void *worker(void *arg)
{
    (void)arg;
    int lfd = listen_socket();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = -1};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct conn *conns = calloc(65536, sizeof(*conns));
    char *buf = malloc(65536);
    if (!conns || !buf)
        die("calloc");
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd >= 0) {
                if (serve(fd, &conns[fd], buf, evs[i].events))
                    close(fd);
                continue;
            }
            int c;
            while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                if (c >= 65536) {
                    close(c);
                    continue;
                }
                /* the request is usually there already (TCP_DEFER_ACCEPT):
                 * answer it, and join epoll only if there is more to wait
                 * for, as colibri does */
                conns[c] = (struct conn){0};
                if (serve(c, &conns[c], buf, EPOLLIN)) {
                    close(c);
                    continue;
                }
                ev = (struct epoll_event){.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP,
                                          .data.fd = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
            }
        }
    }
    return NULL;
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-m] PORT THREADS BODY_FILE\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int minimal = argc > 1 && strcmp(argv[1], "-m") == 0;
    bool short_header = minimal || getenv("NULL_MINIMAL"); /* -m, or per server in cpu.sh */
    argv += minimal;
    argc -= minimal;
    if (argc != 4)
        usage(argv[-minimal]);
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    build_responses(argv[3], short_header, false);
    /* NULL_CHUNK: at most this many bytes per sendfile() call */
    const char *v = getenv("NULL_CHUNK");
    chunk = v ? (size_t)atol(v) : 0;
    /* NULL_SPLIT=N: single responses go as writev(header, body) with the
     * body at N bytes past a 4 KiB boundary (N = the header length: the
     * body keeps the alignment it has in one contiguous buffer) */
    if ((v = getenv("NULL_SPLIT")) && body_len <= SMALL_MAX) {
        char *p = aligned_alloc(4096, body_len + 8192);
        if (!p)
            die("aligned_alloc");
        split_body = p + atol(v) % 4096;
        memcpy(split_body, small + header_len, body_len);
    }
    run_threads(threads, worker);
    return 0;
}
