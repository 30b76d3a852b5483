/* control.c - the server's control thread: what signals ask for (log
 * reopening, reloads) done off the signal handler and off the workers,
 * and the freeing of retired generations once the workers are done with
 * them. The public calls only set a flag and write an eventfd, so they
 * are async-signal-safe. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/err.h"
#include "server/server.h"

/* How often retired generations are looked at while some wait. */
#define RETIRED_POLL_MS 10

static void *control_main(void *arg)
{
    struct colibri_server *srv = arg;
    for (;;) {
        struct pollfd p = {.fd = srv->ctl_fd, .events = POLLIN};
        int n = poll(&p, 1, srv->retired ? RETIRED_POLL_MS : -1);
        if (n > 0) {
            uint64_t v;
            ssize_t k = read(srv->ctl_fd, &v, sizeof(v));
            (void)k;
        }
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
