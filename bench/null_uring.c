/* null_uring - bench/null_server.c on io_uring instead of epoll: the same
 * responses (bench/null_common.h), the same non-parsing, so the two measure
 * the floor each I/O interface allows (issue 12, target 4).
 *
 *   null_uring [-m] PORT THREADS BODY_FILE
 *
 * One ring per thread (SINGLE_ISSUER, DEFER_TASKRUN, registered ring fd) and
 * one SO_REUSEPORT listening socket per thread. One multishot accept; per
 * connection one multishot receive that takes its buffers from a provided
 * buffer ring, and at most one send in flight (a batch of all the responses
 * owed). Every SQE prepared while the completions of one wait are handled
 * goes to the kernel in the same io_uring_enter that waits for the next
 * completions, however many connections they are for.
 *
 * A head with "Connection: close" gets the response saying so; when it is
 * sent, the receive is cancelled and, once it has ended, the socket is
 * closed by the ring. Bodies of any size are sent from memory (io_uring has
 * no sendfile; a splice pair through a pipe would be the zero-copy way).
 *
 * Kernel support is checked at start (opcodes by probe, multishot and
 * buffer rings by the kernel version and by registering the buffer ring);
 * without it the program says what is missing and exits with status 3. */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <sys/utsname.h>

#include "null_common.h"

#define MAX_BATCH 64   /* responses per send for small bodies */
#define BUF_COUNT 1024 /* provided receive buffers per ring (a power of 2) */
#define BUF_SIZE  2048
#define MAX_FD    65536

enum { OP_ACCEPT, OP_RECV, OP_SEND, OP_IGNORE };

struct conn {
    unsigned pending; /* responses owed, not yet in a send */
    unsigned state;   /* how much of "\r\n\r\n" the last bytes matched */
    unsigned in_send; /* responses in the send in flight */
    size_t sent;      /* bytes of that send already done */
    bool sending, recv_armed, close_after, dead, cancelled;
};

struct worker {
    struct io_uring ring;
    struct io_uring_buf_ring *br;
    char *bufs;
    struct conn *conns;
    char *batch;         /* MAX_BATCH copies of the keep-alive response */
    unsigned batch_max;  /* how many copies it holds */
    unsigned to_recycle; /* buffers added to the ring since the last advance */
    int lfd;
};

static uint64_t ud(int op, int fd)
{
    return (uint64_t)(unsigned)fd << 2 | (unsigned)op;
}

static struct io_uring_sqe *sqe_get(struct worker *w)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    if (!sqe) {
        io_uring_submit(&w->ring);
        if (!(sqe = io_uring_get_sqe(&w->ring))) {
            fputs("null_uring: no free SQE\n", stderr);
            exit(1);
        }
    }
    return sqe;
}

static void arm_accept(struct worker *w)
{
    struct io_uring_sqe *sqe = sqe_get(w);
    io_uring_prep_multishot_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0));
}

static void arm_recv(struct worker *w, int fd)
{
    struct io_uring_sqe *sqe = sqe_get(w);
    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, ud(OP_RECV, fd));
    w->conns[fd].recv_armed = true;
}

static void ignore_sqe(struct io_uring_sqe *sqe)
{
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, ud(OP_IGNORE, 0));
}

/* Start the next send for fd: the close response, or a batch of keep-alive
 * responses, or the rest of a partial send. */
static void start_send(struct worker *w, int fd)
{
    struct conn *c = &w->conns[fd];
    const char *p;
    size_t len;
    if (c->sent == 0) {
        if (c->close_after)
            c->in_send = 1;
        else
            c->in_send = c->pending < w->batch_max ? c->pending : w->batch_max;
        c->pending -= c->close_after ? c->pending : c->in_send;
    }
    if (c->close_after) {
        p = small_close;
        len = small_close_len;
    } else {
        p = w->batch;
        len = small_len * c->in_send;
    }
    struct io_uring_sqe *sqe = sqe_get(w);
    /* the close answer waits (MSG_MORE) for the FIN of the close */
    io_uring_prep_send(sqe, fd, p + c->sent, len - c->sent,
                       MSG_NOSIGNAL | (c->close_after ? MSG_MORE : 0));
    io_uring_sqe_set_data64(sqe, ud(OP_SEND, fd));
    c->sending = true;
}

/* Close fd once nothing of it is in flight; cancel its receive first. */
static void finish(struct worker *w, int fd)
{
    struct conn *c = &w->conns[fd];
    c->dead = true;
    if (c->sending)
        return;
    if (c->recv_armed) {
        if (c->cancelled)
            return;
        c->cancelled = true;
        struct io_uring_sqe *sqe = sqe_get(w);
        io_uring_prep_cancel_fd(sqe, fd, 0);
        ignore_sqe(sqe);
        return; /* the receive's last completion comes back here */
    }
    struct io_uring_sqe *sqe = sqe_get(w);
    io_uring_prep_close(sqe, fd);
    ignore_sqe(sqe);
}

static void on_recv(struct worker *w, int fd, struct io_uring_cqe *cqe)
{
    struct conn *c = &w->conns[fd];
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        char *b = w->bufs + (size_t)bid * BUF_SIZE;
        if (cqe->res > 0 && !c->dead) {
            c->pending += count_heads(&c->state, b, (size_t)cqe->res);
            if (memmem(b, (size_t)cqe->res, "Connection: close", 17))
                c->close_after = true;
        }
        io_uring_buf_ring_add(w->br, b, BUF_SIZE, (unsigned short)bid,
                              io_uring_buf_ring_mask(BUF_COUNT), (int)w->to_recycle++);
    }
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        c->recv_armed = false;
        /* ended with data, or out of buffers for a moment: rearm */
        if (!c->dead && (cqe->res > 0 || cqe->res == -ENOBUFS))
            arm_recv(w, fd);
        else
            c->dead = true;
    } else if (cqe->res <= 0) {
        c->dead = true;
    }
    if (c->dead) {
        finish(w, fd);
        return;
    }
    if (c->pending && !c->sending)
        start_send(w, fd);
}

static void on_send(struct worker *w, int fd, int res)
{
    struct conn *c = &w->conns[fd];
    c->sending = false;
    if (res < 0 || c->dead) {
        finish(w, fd);
        return;
    }
    size_t len = c->close_after ? small_close_len : small_len * c->in_send;
    c->sent += (size_t)res;
    if (c->sent < len) {
        start_send(w, fd); /* partial: the rest */
        return;
    }
    c->sent = 0;
    c->in_send = 0;
    if (c->close_after)
        finish(w, fd);
    else if (c->pending)
        start_send(w, fd);
}

static void on_accept(struct worker *w, struct io_uring_cqe *cqe)
{
    if (!(cqe->flags & IORING_CQE_F_MORE))
        arm_accept(w); /* the multishot ended (e.g. an error): rearm */
    int fd = cqe->res;
    if (fd < 0)
        return;
    if (fd >= MAX_FD) {
        close(fd);
        return;
    }
    w->conns[fd] = (struct conn){0};
    arm_recv(w, fd);
}

static void ring_setup(struct worker *w)
{
    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL;
    p.flags |= IORING_SETUP_CQSIZE;
    p.cq_entries = 16384;
    int r = io_uring_queue_init_params(1024, &w->ring, &p);
    if (r < 0) {
        fprintf(stderr, "null_uring: io_uring_setup: %s (needs Linux 6.1 or later)\n",
                strerror(-r));
        exit(3);
    }
    io_uring_register_ring_fd(&w->ring); /* optional: saves a file lookup per enter */
    if (posix_memalign((void **)&w->br, 4096, BUF_COUNT * sizeof(struct io_uring_buf)) ||
        !(w->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE)))
        die("malloc");
    io_uring_buf_ring_init(w->br);
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)w->br, .ring_entries = BUF_COUNT, .bgid = 0};
    if ((r = io_uring_register_buf_ring(&w->ring, &reg, 0)) < 0) {
        fprintf(stderr, "null_uring: provided buffer ring: %s (needs Linux 5.19 or later)\n",
                strerror(-r));
        exit(3);
    }
    for (unsigned i = 0; i < BUF_COUNT; i++)
        io_uring_buf_ring_add(w->br, w->bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(BUF_COUNT), (int)i);
    io_uring_buf_ring_advance(w->br, BUF_COUNT);
}

static void *worker(void *arg)
{
    (void)arg;
    struct worker w = {0};
    ring_setup(&w);
    w.lfd = listen_socket();
    if (!(w.conns = calloc(MAX_FD, sizeof(*w.conns))))
        die("calloc");
    w.batch_max = small_len <= SMALL_MAX ? MAX_BATCH : 1;
    if (!(w.batch = malloc(small_len * w.batch_max)))
        die("malloc");
    for (unsigned i = 0; i < w.batch_max; i++)
        memcpy(w.batch + i * small_len, small, small_len);
    arm_accept(&w);
    for (;;) {
        int r = io_uring_submit_and_wait(&w.ring, 1);
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
            fprintf(stderr, "null_uring: io_uring_enter: %s\n", strerror(-r));
            exit(1);
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w.ring, head, cqe)
        {
            int fd = (int)(cqe->user_data >> 2);
            switch (cqe->user_data & 3) {
            case OP_ACCEPT:
                on_accept(&w, cqe);
                break;
            case OP_RECV:
                if (cqe->res == -EINVAL) {
                    fputs("null_uring: multishot receive not supported (needs Linux 6.0)\n",
                          stderr);
                    exit(3);
                }
                on_recv(&w, fd, cqe);
                break;
            case OP_SEND:
                on_send(&w, fd, cqe->res);
                break;
            default:
                break;
            }
            seen++;
        }
        io_uring_cq_advance(&w.ring, seen);
        if (w.to_recycle) {
            io_uring_buf_ring_advance(w.br, (int)w.to_recycle);
            w.to_recycle = 0;
        }
    }
    return NULL;
}

/* The opcodes used, by probe; multishot receive (6.0) by version too. */
static void check_kernel(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0)
        sscanf(u.release, "%d.%d", &major, &minor);
    if (major < 6 || (major == 6 && minor < 1)) {
        fprintf(stderr, "null_uring: kernel %s: needs Linux 6.1 or later\n", u.release);
        exit(3);
    }
    struct io_uring_probe *p = io_uring_get_probe();
    if (!p) {
        fputs("null_uring: io_uring is not available (kernel.io_uring_disabled?)\n", stderr);
        exit(3);
    }
    static const int ops[] = {IORING_OP_ACCEPT, IORING_OP_RECV, IORING_OP_SEND,
                              IORING_OP_ASYNC_CANCEL, IORING_OP_CLOSE};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!io_uring_opcode_supported(p, ops[i])) {
            fprintf(stderr, "null_uring: io_uring opcode %d not supported\n", ops[i]);
            exit(3);
        }
    io_uring_free_probe(p);
}

int main(int argc, char **argv)
{
    int minimal = argc > 1 && strcmp(argv[1], "-m") == 0;
    bool short_header = minimal || getenv("NULL_MINIMAL"); /* -m, or per server in cpu.sh */
    argv += minimal;
    argc -= minimal;
    if (argc != 4) {
        fprintf(stderr, "usage: %s [-m] PORT THREADS BODY_FILE\n", argv[-minimal]);
        return 2;
    }
    check_kernel();
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    build_responses(argv[3], short_header, true);
    run_threads(threads, worker);
    return 0;
}
