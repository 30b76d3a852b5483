/* control.c - the server's control thread: what signals ask for (log
 * reopening, reloads, a stop) done off the signal handler and off the
 * workers, and the freeing of retired generations once the workers are
 * done with them. The public calls only set a flag and write an eventfd,
 * so they are async-signal-safe.
 *
 * A program that lets the server take its signals
 * (colibri_server_take_signals) has no handler at all: the signals stay
 * blocked in every thread and this thread takes them when its signalfd
 * says some are pending, as plain data. Nothing then runs at an arbitrary point of another thread,
 * and a signal sent before the server runs waits in the kernel instead
 * of being lost. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "server/server.h"

/* How often retired generations are looked at while some wait. */
#define RETIRED_POLL_MS 10

/* The signals a server that takes them answers. */
static void taken_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
}

int colibri_server_take_signals(struct colibri_server *srv, char *err, size_t errlen)
{
    sigset_t set;
    taken_signals(&set);
    int r = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (r)
        return err_set(err, errlen, -r, NULL, "pthread_sigmask: %s", strerror(r));
    srv->take_signals = true;
    return 0;
}

int control_open_signals(struct colibri_server *srv, char *err, size_t errlen)
{
    if (!srv->take_signals || srv->sig_fd >= 0)
        return 0;
    sigset_t set;
    taken_signals(&set);
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return err_set(err, errlen, -errno, NULL, "signalfd: %s", strerror(errno));
    srv->sig_fd = fd;
    return 0;
}

/* Every signal pending, as the handlers of a program would take them.
 * The signalfd only says that some are (poll): sigtimedwait() takes them
 * without a buffer to read, so no failed read can leave one behind to
 * wake the thread again and again. */
static void take_signals(struct colibri_server *srv)
{
    sigset_t set;
    taken_signals(&set);
    const struct timespec now = {0};
    for (int sig; (sig = sigtimedwait(&set, NULL, &now)) > 0 || (sig < 0 && errno == EINTR);)
        switch (sig) {
        case SIGHUP:
            atomic_store(&srv->want_reload, true);
            break;
        case SIGUSR1:
            atomic_store(&srv->want_reopen, true);
            break;
        case SIGINT:
        case SIGTERM:
            colibri_server_shutdown(srv);
            break;
        default: /* EINTR: again */
            break;
        }
}

static void *control_main(void *arg)
{
    struct colibri_server *srv = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = srv->ctl_fd, .events = POLLIN},
                              {.fd = srv->sig_fd, .events = POLLIN}};
        int n = poll(p, srv->sig_fd >= 0 ? 2 : 1, srv->retired ? RETIRED_POLL_MS : -1);
        if (n > 0 && p[0].revents) {
            uint64_t v;
            ssize_t k = read(srv->ctl_fd, &v, sizeof(v));
            (void)k;
        }
        if (n > 0 && srv->sig_fd >= 0 && p[1].revents)
            take_signals(srv);
        if (atomic_load(&srv->ctl_stop))
            break;
        if (atomic_exchange(&srv->want_reopen, false))
            logs_reopen(&srv->logs);
        if (atomic_exchange(&srv->want_reload, false))
            server_reload(srv);
        /* the generations every worker is done with */
        for (struct server_gen **g = &srv->retired; *g;) {
            if (atomic_load_explicit(&(*g)->left, memory_order_acquire)) {
                g = &(*g)->next_retired;
                continue;
            }
            struct server_gen *done = *g;
            *g = done->next_retired;
            server_gen_free(srv, done);
        }
    }
    return NULL;
}

static void ctl_wake(struct colibri_server *srv);

int control_start(struct colibri_server *srv, char *err, size_t errlen)
{
    atomic_store(&srv->ctl_stop, false);
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0)
        return err_set(err, errlen, -errno, NULL, "eventfd: %s", strerror(errno));
    srv->ctl_fd = fd;
    /* a SIGHUP or SIGUSR1 since the listeners opened found no eventfd to
     * wake: its flag is set, and the thread must see it at once */
    if (atomic_load(&srv->want_reload) || atomic_load(&srv->want_reopen))
        ctl_wake(srv);
    if (pthread_create(&srv->ctl_thread, NULL, control_main, srv))
        return err_set(err, errlen, -EAGAIN, NULL, "cannot start the control thread");
    srv->ctl_started = true;
    return 0;
}

static void ctl_wake(struct colibri_server *srv)
{
    int fd = srv->ctl_fd;
    if (fd < 0)
        return;
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

void control_stop(struct colibri_server *srv)
{
    if (srv->ctl_started) {
        atomic_store(&srv->ctl_stop, true);
        ctl_wake(srv);
        pthread_join(srv->ctl_thread, NULL);
        srv->ctl_started = false;
    }
    int fd = srv->ctl_fd;
    srv->ctl_fd = -1; /* first: a late signal must not write to a reused fd */
    if (fd >= 0)
        close(fd);
    /* signals that come from here on wait, blocked, until the program
     * ends or runs the server again */
    if (srv->sig_fd >= 0)
        close(srv->sig_fd);
    srv->sig_fd = -1;
}

void colibri_server_reopen_logs(struct colibri_server *srv)
{
    atomic_store(&srv->want_reopen, true);
    ctl_wake(srv);
}

void colibri_server_reload(struct colibri_server *srv)
{
    atomic_store(&srv->want_reload, true);
    ctl_wake(srv);
}

void colibri_server_on_reload(struct colibri_server *srv, colibri_reload_fn fn, void *arg)
{
    srv->reload_hook = fn;
    srv->reload_arg = arg;
}
