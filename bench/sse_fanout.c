/* sse_fanout.c - events per second delivered to many event-stream
 * subscribers of one channel (bench/sse_fanout.sh runs it against
 * samples/chat).
 *
 *     sse_fanout HOST PORT [SUBSCRIBERS [MESSAGES [SIZE [WINDOW [SECONDS]]]]]
 *
 * Opens SUBSCRIBERS (10000) connections to GET /events and waits until each
 * has its ":joined" comment (the server subscribed it). Then it publishes
 * MESSAGES (1000; the script: 200) messages of SIZE (64) bytes with POST /say on one
 * keep-alive connection, keeping at most WINDOW (32) messages ahead of the
 * slowest subscriber, so a subscriber is never dropped for falling behind
 * (the channel's queue holds 256). It counts every event of every
 * connection (an event ends with an empty line) and stops when every
 * subscriber has every message, or after SECONDS (60): exit 1 then. One
 * thread, epoll, level-triggered; RLIMIT_NOFILE is raised as needed.
 *
 * It prints the events delivered per second (MESSAGES x SUBSCRIBERS over the
 * time from the first publish to the last event), and the CPU time of this
 * client, so that a run shows whether the client kept up: if it used less
 * CPU than the time elapsed, the server was the limit. With SERVER_PID set
 * in the environment, the server's CPU time over the same interval too
 * (from /proc/PID/stat). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct sub {
    int fd;
    uint32_t events; /* "\n\n" seen, the joined comment included */
    char last;       /* the last byte read, for a "\n\n" across two reads */
    bool open;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The CPU time of process pid (utime + stime), or -1. */
static double proc_cpu_s(const char *pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t len = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[len] = '\0';
    char *p = strrchr(line, ')'); /* the name may hold spaces */
    unsigned long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static int dial(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("write");
        p += n;
        len -= (size_t)n;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: sse_fanout HOST PORT [SUBSCRIBERS [MESSAGES [SIZE [WINDOW [SECONDS]]]]]\n");
        return 2;
    }
    unsigned n = argc > 3 ? (unsigned)atoi(argv[3]) : 10000;
    unsigned msgs = argc > 4 ? (unsigned)atoi(argv[4]) : 1000;
    unsigned size = argc > 5 ? (unsigned)atoi(argv[5]) : 64;
    unsigned window = argc > 6 ? (unsigned)atoi(argv[6]) : 32;
    double limit = argc > 7 ? atof(argv[7]) : 60;
    if (!n || !msgs || size < 16 || size > 4000 || !window) {
        fprintf(stderr, "sse_fanout: bad numbers\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < n + 64) {
        rl.rlim_cur = n + 64;
        if (rl.rlim_max < rl.rlim_cur)
            rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            die("setrlimit(RLIMIT_NOFILE)");
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "sse_fanout: HOST: an IPv4 address\n");
        return 2;
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct sub *subs = calloc(n, sizeof(*subs));
    /* delivered[k]: subscribers that have message k+1 */
    uint32_t *delivered = calloc(msgs + 1, sizeof(*delivered));
    if (ep < 0 || !subs || !delivered)
        die("setup");
    static const char get[] = "GET /events HTTP/1.1\r\nHost: bench\r\n\r\n";
    for (unsigned i = 0; i < n; i++) {
        subs[i].fd = dial(&sa);
        subs[i].open = true;
        send_all(subs[i].fd, get, sizeof(get) - 1);
        fcntl(subs[i].fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev) < 0)
            die("epoll_ctl");
    }
    int pub = dial(&sa);
    fcntl(pub, F_SETFL, O_NONBLOCK);
    struct epoll_event pev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, pub, &pev);

    char *req = malloc(size + 128), *body = malloc(size);
    static char buf[1 << 16];
    unsigned joined = 0, published = 0, complete = 0, answers = 0, lost = 0;
    const char *server_pid = getenv("SERVER_PID");
    double start = now_s(), t0 = 0, cpu0 = 0, scpu0 = 0;
    struct epoll_event evs[512];
    while (complete < msgs) {
        if (now_s() - start > limit) {
            fprintf(stderr,
                    "sse_fanout: stopped after %.0f s: %u joined, %u published, %u "
                    "complete, %u closed\n",
                    limit, joined, published, complete, lost);
            return 1;
        }
        /* publish while the window allows (after everybody joined) */
        while (joined == n && published < msgs && published - complete < window) {
            if (!published) {
                t0 = now_s();
                cpu0 = cpu_s();
                scpu0 = server_pid ? proc_cpu_s(server_pid) : 0;
            }
            int hl = snprintf(body, size, "m%u ", ++published);
            memset(body + hl, 'x', size - (unsigned)hl);
            int rl_ = snprintf(
                req, 128, "POST /say HTTP/1.1\r\nHost: bench\r\nContent-Length: %u\r\n\r\n", size);
            memcpy(req + rl_, body, size);
            send_all(pub, req, (size_t)rl_ + size);
        }
        int k = epoll_wait(ep, evs, 512, 1000);
        for (int e = 0; e < k; e++) {
            uint32_t i = evs[e].data.u32;
            int fd = i == UINT32_MAX ? pub : subs[i].fd;
            ssize_t r = read(fd, buf, sizeof(buf));
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                if (i == UINT32_MAX) {
                    fprintf(stderr, "sse_fanout: the publishing connection closed\n");
                    return 1;
                }
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                subs[i].open = false;
                lost++;
                fprintf(stderr, "sse_fanout: subscriber %u closed after %u events\n", i,
                        subs[i].events);
                return 1;
            }
            if (i == UINT32_MAX) {
                for (ssize_t j = 0; j + 12 <= r; j++)
                    if (!memcmp(buf + j, "HTTP/1.1 204", 12))
                        answers++;
                continue;
            }
            struct sub *s = &subs[i];
            char prev = s->last;
            for (ssize_t j = 0; j < r; j++) {
                if (buf[j] == '\n' && prev == '\n') {
                    uint32_t m = s->events++; /* 0 is the joined comment */
                    if (!m)
                        joined++;
                    else if (m <= msgs && ++delivered[m] == n)
                        while (complete < msgs && delivered[complete + 1] == n)
                            complete++;
                }
                prev = buf[j];
            }
            s->last = prev;
        }
    }
    double dt = now_s() - t0, cpu = cpu_s() - cpu0;
    double scpu = server_pid ? proc_cpu_s(server_pid) - scpu0 : -1;
    printf("subscribers %u, messages %u of %u bytes, window %u\n", n, msgs, size, window);
    printf("delivered %llu events in %.3f s: %.0f events/s (%.0f messages/s to all)\n",
           (unsigned long long)msgs * n, dt, (double)msgs * n / dt, msgs / dt);
    printf("client CPU %.3f s (%.0f%% of one core); POST answers %u\n", cpu, 100 * cpu / dt,
           answers);
    if (server_pid)
        printf("server CPU %.3f s (%.0f%% of one core)\n", scpu, 100 * scpu / dt);
    return 0;
}
