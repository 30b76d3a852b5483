/* systemd.c - socket activation and sd_notify, without libsystemd (see
 * systemd.h for why). */
#include "server/systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

#define SD_FIRST_FD 3
#define SD_MAX_FDS  1024

/* --- socket activation ------------------------------------------------------ */

static struct {
    pthread_mutex_t lock;
    bool read;     /* the environment was read (and unset) */
    char why[160]; /* when n == 0: why there are none */
    unsigned n;    /* fds SD_FIRST_FD .. SD_FIRST_FD + n - 1 */
    char **names;  /* n names ("unknown" when LISTEN_FDNAMES is absent) */
    /* the config (a server) that took each, NULL: free; at a reload the
     * new config takes them over from the running one */
    const void **taken;
} sd = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void read_env(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    char *end;
    sd.read = true;
    if (!fds || !pid) {
        snprintf(sd.why, sizeof(sd.why), "no sockets passed by systemd (LISTEN_FDS is not set)");
        goto out;
    }
    long p = strtol(pid, &end, 10);
    if (*end || p != (long)getpid()) {
        snprintf(sd.why, sizeof(sd.why),
                 "the sockets in LISTEN_FDS are not for this process (LISTEN_PID=%.20s, pid %ld)",
                 pid, (long)getpid());
        goto out;
    }
    long n = strtol(fds, &end, 10);
    if (*end || n <= 0 || n > SD_MAX_FDS) {
        snprintf(sd.why, sizeof(sd.why), "bad LISTEN_FDS '%.20s'", fds);
        goto out;
    }
    sd.names = calloc((size_t)n, sizeof(*sd.names));
    sd.taken = calloc((size_t)n, sizeof(*sd.taken));
    if (!sd.names || !sd.taken) {
        snprintf(sd.why, sizeof(sd.why), "out of memory");
        goto out;
    }
    /* names only when there is one per fd (sd_listen_fds_with_names()
     * refuses the others; here they are just unnamed) */
    unsigned fields = names ? 1 : 0;
    for (const char *c = names; c && *c; c++)
        fields += *c == ':';
    const char *p_name = fields == (unsigned)n ? names : NULL;
    for (long i = 0; i < n; i++) {
        size_t len = p_name ? strcspn(p_name, ":") : 0;
        sd.names[i] = p_name ? strndup(p_name, len) : strdup("unknown");
        if (!sd.names[i]) {
            snprintf(sd.why, sizeof(sd.why), "out of memory");
            goto out;
        }
        if (p_name)
            p_name += len + (p_name[len] == ':');
        /* ours alone: a program we start must not inherit them */
        int fl = fcntl(SD_FIRST_FD + (int)i, F_GETFD);
        if (fl >= 0)
            fcntl(SD_FIRST_FD + (int)i, F_SETFD, fl | FD_CLOEXEC);
    }
    sd.n = (unsigned)n;
out:
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
}

/* Whether fd is a listening stream socket; made non-blocking if so. */
static int check_socket(int fd, const char *name, char *err, size_t errlen)
{
    int type = 0, listening = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
        return err_set(err, errlen, -errno, NULL, "systemd socket fd %d ('%s'): %s", fd, name,
                       strerror(errno));
    len = sizeof(listening);
    if (type != SOCK_STREAM || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 ||
        !listening)
        return err_set(err, errlen, -EINVAL, NULL,
                       "systemd socket fd %d ('%s') is not a listening stream socket", fd, name);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return err_set(err, errlen, -errno, NULL, "systemd socket fd %d ('%s'): %s", fd, name,
                       strerror(errno));
    return 0;
}

int sd_take_sockets(const char *name, int *fds, unsigned max, const void *owner, bool allow_taken,
                    char *err, size_t errlen)
{
    pthread_mutex_lock(&sd.lock);
    if (!sd.read)
        read_env();
    int r = 0;
    if (!sd.n) {
        r = err_set(err, errlen, -ENOENT, NULL, "%s", sd.why);
        goto out;
    }
    for (unsigned i = 0; i < sd.n; i++) {
        if (name && strcmp(sd.names[i], name))
            continue;
        int fd = SD_FIRST_FD + (int)i;
        /* twice in one config is an error at a reload too */
        if (sd.taken[i] && (sd.taken[i] == owner || !allow_taken)) {
            r = err_set(err, errlen, -EEXIST, NULL,
                        "systemd socket fd %d ('%s') is taken by another listener already", fd,
                        sd.names[i]);
            goto out;
        }
        if ((unsigned)r == max) {
            r = err_set(err, errlen, -E2BIG, NULL, "too many systemd sockets");
            goto out;
        }
        int e = check_socket(fd, sd.names[i], err, errlen);
        if (e) {
            r = e;
            goto out;
        }
        fds[r++] = fd;
    }
    if (!r) {
        char have[200] = "";
        size_t used = 0;
        for (unsigned i = 0; i < sd.n && used < sizeof(have); i++)
            used += (size_t)snprintf(have + used, sizeof(have) - used, "%s'%s'", i ? ", " : "",
                                     sd.names[i]);
        r = err_set(err, errlen, -ENOENT, NULL,
                    "no socket named '%s' passed by systemd (LISTEN_FDNAMES has %s)", name, have);
        goto out;
    }
    for (int i = 0; i < r; i++)
        sd.taken[fds[i] - SD_FIRST_FD] = owner;
out:
    pthread_mutex_unlock(&sd.lock);
    return r;
}

void sd_release_socket(int fd)
{
    pthread_mutex_lock(&sd.lock);
    if (fd >= SD_FIRST_FD && (unsigned)(fd - SD_FIRST_FD) < sd.n)
        sd.taken[fd - SD_FIRST_FD] = NULL;
    pthread_mutex_unlock(&sd.lock);
}

/* --- sd_notify ------------------------------------------------------------------ */

static int notify_fd = -1;
static bool notify_read;

int sd_notify_open(char *err, size_t errlen)
{
    if (notify_read)
        return 0;
    notify_read = true;
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len > sizeof(sa.sun_path))
        return err_set(err, errlen, -EINVAL, NULL, "bad NOTIFY_SOCKET '%.100s'", path);
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract: no NUL terminator, the length says */
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    /* connected now, so the path need not be reachable later (chroot) */
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, salen) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return err_set(err, errlen, -e, NULL, "NOTIFY_SOCKET '%.100s': %s", path, strerror(e));
    }
    notify_fd = fd;
    unsetenv("NOTIFY_SOCKET");
    return 0;
}

void sd_notify_send(const char *state)
{
    if (notify_fd < 0)
        return;
    ssize_t r = send(notify_fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r; /* systemd gone or its queue full: nothing better to do */
}

void sd_notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[64];
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    sd_notify_send(msg);
}
