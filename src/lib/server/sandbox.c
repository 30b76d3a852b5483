/* sandbox.c - "sandbox = true" (see sandbox.h and README, "Sandbox"): the
 * paths the server needs after start-up, and closing the sandbox on every
 * thread.
 *
 * Landlock restricts only the thread that asks and the threads it starts
 * afterwards. The workers and the control thread start after the sandbox
 * closes; the helper threads that config loading started (a cache's
 * pruner, a file watcher, a module's own) exist already. Each of those is
 * sent THREAD_SYNC_SIGNAL, the one signal helper threads leave unblocked
 * (base/thread.h), and restricts itself in the handler; the start-up
 * waits until all have, and fails if one does not answer. The seccomp
 * filter then goes on all threads at once (TSYNC). */
#include "server/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/thread.h"
#include "server/server.h"

/* How long the start-up waits for the helper threads to restrict
 * themselves (they answer in microseconds; a thread that blocks the
 * signal never does). */
#define SYNC_WAIT_MS 3000

bool sandbox_closed(const struct colibri_server *srv)
{
    const struct colibri_server *top = srv->reload_of ? srv->reload_of : srv;
    return top->sandbox && top->sandbox->entered;
}

void sandbox_free(struct sandbox *sb)
{
    if (!sb)
        return;
    for (unsigned i = 0; i < sb->n_paths; i++) {
        if (sb->paths[i].fd >= 0)
            close(sb->paths[i].fd);
        free(sb->paths[i].path);
    }
    free(sb->paths);
    if (sb->ruleset_fd >= 0)
        close(sb->ruleset_fd);
    free(sb->tids);
    if (sb->private_tmp)
        rmdir(sb->private_tmp); /* empty unless a part's file is still open */
    free(sb->private_tmp);
    free(sb->shared_tmp);
    free(sb);
}

static struct sandbox *sandbox_of(struct colibri_server *srv)
{
    if (!srv->sandbox && (srv->sandbox = calloc(1, sizeof(*srv->sandbox))))
        srv->sandbox->ruleset_fd = -1;
    return srv->sandbox;
}

/* --- paths -------------------------------------------------------------------- */

static int record(struct sandbox *sb, const char *path, unsigned how)
{
    for (unsigned i = 0; i < sb->n_paths; i++)
        if (!strcmp(sb->paths[i].path, path)) {
            sb->paths[i].how |= how;
            return 0;
        }
    struct sandbox_path *n = realloc(sb->paths, (sb->n_paths + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    sb->paths = n;
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    sb->paths[sb->n_paths++] = (struct sandbox_path){.path = copy, .how = how, .fd = -1};
    return 0;
}

/* Whether what was allowed as have covers want (writing includes reading). */
static bool covers(unsigned have, unsigned want)
{
    if (have & COLIBRI_PATH_WRITE)
        have |= COLIBRI_PATH_READ;
    return (want & ~have) == 0;
}

/* The entry allowing the object fd is, if any covers want. */
static bool allowed_here(const struct sandbox *sb, int fd, unsigned want, struct stat *st)
{
    if (fstat(fd, st) < 0)
        return false;
    for (unsigned i = 0; i < sb->n_paths; i++) {
        const struct sandbox_path *p = &sb->paths[i];
        if (p->known && p->dev == st->st_dev && p->ino == st->st_ino && covers(p->how, want))
            return true;
    }
    return false;
}

/* Whether path, or a folder above it, was allowed for want at start-up.
 * O_PATH opens are not subject to Landlock. */
static bool covered(const struct sandbox *sb, const char *path, unsigned want)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return false;
    bool ok = allowed_here(sb, fd, want, &st);
    if (!ok && !S_ISDIR(st.st_mode)) { /* a file: the rest from its folder */
        close(fd);
        char copy[PATH_MAX];
        snprintf(copy, sizeof(copy), "%s", path);
        if ((fd = open(dirname(copy), O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            return false;
        ok = allowed_here(sb, fd, want, &st);
    }
    while (!ok) {
        int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat ust;
        if (up < 0 || fstat(up, &ust) < 0 || (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)) {
            if (up >= 0)
                close(up);
            break; /* the root */
        }
        close(fd);
        fd = up;
        ok = allowed_here(sb, fd, want, &st);
    }
    close(fd);
    return ok;
}

int sandbox_allow(struct colibri_server *srv, const char *path, unsigned how, char *err,
                  size_t errlen)
{
    const struct colibri_server *top = srv->reload_of ? srv->reload_of : srv;
    if (sandbox_closed(srv)) {
        const struct sandbox *sb = top->sandbox;
        /* the shared temp_dir: its private folder (sandbox_reload_temp_dir) */
        if (sb->shared_tmp && how == COLIBRI_PATH_WRITE && !strcmp(path, sb->shared_tmp))
            return 0;
        /* without Landlock nothing limits files: nothing to widen */
        if (sb->abi && !covered(sb, path, how))
            return err_set(err, errlen, -EACCES, NULL,
                           "'%s' is outside what the sandbox allowed at start-up "
                           "(sandbox = true: a restart widens it)",
                           path);
        return 0;
    }
    if (srv->reload_of) /* a reload of a server without the sandbox */
        return 0;
    struct sandbox *sb = sandbox_of(srv);
    if (!sb || record(sb, path, how) < 0)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    return 0;
}

int colibri_server_allow_path(struct colibri_server *srv, const char *path, unsigned how, char *err,
                              size_t errlen)
{
    if (!path || !path[0] || !(how & (COLIBRI_PATH_READ | COLIBRI_PATH_WRITE)) ||
        (how & ~(COLIBRI_PATH_READ | COLIBRI_PATH_WRITE)))
        return err_set(err, errlen, -EINVAL, NULL, "colibri_server_allow_path: bad arguments");
    return sandbox_allow(srv, path, how, err, errlen);
}

/* The folder of a file path (a log, the pid file, the config). */
static int allow_dir_of(struct sandbox *sb, const char *file, unsigned how)
{
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof(copy), "%s", file) >= (int)sizeof(copy))
        return -ENAMETOOLONG;
    return record(sb, dirname(copy), how);
}

/* What the server itself opens after start-up. */
static int allow_server_paths(struct colibri_server *srv, struct sandbox *sb)
{
    const struct server_logs *l = &srv->logs;
    int r = 0;
    /* a reload reads the config again: the file, not its folder (which
     * may be /etc); a file renamed over it is another file (README) */
    if (srv->config_path)
        r = record(sb, srv->config_path, COLIBRI_PATH_READ);
    /* SIGUSR1 opens the logs again, creating them if rotated away */
    if (!r && l->access_path && l->access_fd > 2)
        r = allow_dir_of(sb, l->access_path, SANDBOX_LOG_DIR);
    if (!r && l->error_path && l->error_fd > 2)
        r = allow_dir_of(sb, l->error_path, SANDBOX_LOG_DIR);
    /* the pid file is removed at exit */
    if (!r && l->pid_path && l->pid_written)
        r = allow_dir_of(sb, l->pid_path, SANDBOX_REMOVE_DIR);
    /* multipart parts too large for memory */
    if (!r)
        r = record(sb, srv->http.temp_dir, COLIBRI_PATH_WRITE);
#ifdef SANITIZED
    /* LeakSanitizer reads /proc/self/{task,maps} at exit */
    if (!r)
        r = record(sb, "/proc", COLIBRI_PATH_READ);
#endif
    return r;
}

/* A shared temp_dir (sticky and writable by all: /tmp) would stay open
 * to the sandbox as a whole, since Landlock grants by folder: a folder of
 * colibri's own inside it instead, made now, removed at exit. */
static int private_temp_dir(struct colibri_server *srv, struct sandbox *sb)
{
    char *dir = srv->http.temp_dir, made[sizeof(srv->http.temp_dir)];
    struct stat st;
    /* (in a chroot it would be made outside the jail) */
    if (srv->privs.chroot_dir || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        !(st.st_mode & S_ISVTX) || !(st.st_mode & S_IWOTH))
        return 0;
    if (snprintf(made, sizeof(made), "%s/colibri-XXXXXX", dir) >= (int)sizeof(made) ||
        !mkdtemp(made)) {
        log_msg(LOG_WARN,
                "sandbox: temp_dir '%s' is a shared folder and no folder of colibri's own "
                "could be made in it (%s): all of it stays readable and writable",
                dir, strerror(errno));
        return 0;
    }
    /* the user that root becomes writes there */
    if (srv->privs.set && geteuid() == 0 && chown(made, srv->privs.uid, srv->privs.gid) < 0)
        log_msg(LOG_WARN, "sandbox: chown '%s': %s", made, strerror(errno));
    if (!(sb->shared_tmp = strdup(dir)) || !(sb->private_tmp = strdup(made))) {
        rmdir(made);
        return -ENOMEM;
    }
    /* an explicit "temp_dir = /tmp" gives way */
    for (unsigned i = 0; i < sb->n_paths; i++)
        if (!strcmp(sb->paths[i].path, dir))
            sb->paths[i].how &= ~(unsigned)COLIBRI_PATH_WRITE;
    log_msg(LOG_INFO, "sandbox: temp_dir '%s' is shared: parts go to '%s'", dir, made);
    snprintf(srv->http.temp_dir, sizeof(srv->http.temp_dir), "%s", made);
    return record(sb, sb->shared_tmp, SANDBOX_RMDIR);
}

void sandbox_reload_temp_dir(struct colibri_server *next)
{
    const struct sandbox *sb = next->reload_of ? next->reload_of->sandbox : NULL;
    if (sb && sb->private_tmp && !strcmp(next->http.temp_dir, sb->shared_tmp))
        snprintf(next->http.temp_dir, sizeof(next->http.temp_dir), "%s", sb->private_tmp);
}

/* With a chroot, what is opened by path after start-up (a reload, the
 * logs, temp_dir) is looked up inside the jail, while the roots opened
 * before it may lie outside: every path on both sides. */
static int in_jail(const struct colibri_server *srv, struct sandbox *sb)
{
    const char *jail = srv->privs.chroot_dir;
    for (unsigned i = 0, n = sb->n_paths; jail && i < n; i++) {
        char full[PATH_MAX];
        if (snprintf(full, sizeof(full), "%s/%s", jail, sb->paths[i].path) >= (int)sizeof(full))
            continue;
        if (record(sb, full, sb->paths[i].how) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Every thread of the process but this one, from /proc/self/task. */
static int list_threads(struct sandbox *sb, char *err, size_t errlen)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return err_set(err, errlen, -errno, NULL,
                       "sandbox: cannot list the threads (/proc/self/task: %s)", strerror(errno));
    pid_t self = (pid_t)syscall(SYS_gettid);
    struct dirent *e;
    int r = 0;
    while (!r && (e = readdir(d))) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (e->d_name[0] == '.' || *end || tid == self)
            continue;
        pid_t *n = realloc(sb->tids, (sb->n_tids + 1) * sizeof(*n));
        if (!n)
            r = err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        else
            (sb->tids = n)[sb->n_tids++] = (pid_t)tid;
    }
    closedir(d);
    return r;
}

int sandbox_prepare(struct colibri_server *srv, char *err, size_t errlen)
{
    if (!srv->sandbox_on)
        return 0;
    struct sandbox *sb = sandbox_of(srv);
    if (!sb)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    char why[256] = "";
    sb->abi = landlock_abi(why, sizeof(why));
    if (!sb->abi) {
        log_msg(LOG_WARN,
                "sandbox: Landlock is not available (%s): file access is not restricted; "
                "the system call filter still applies",
                why);
        return 0;
    }
    if (private_temp_dir(srv, sb) < 0 || allow_server_paths(srv, sb) < 0 || in_jail(srv, sb) < 0)
        return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
    for (unsigned i = 0; i < sb->n_paths; i++) {
        struct sandbox_path *p = &sb->paths[i];
        struct stat st;
        p->fd = open(p->path, O_PATH | O_CLOEXEC);
        if (p->fd < 0 || fstat(p->fd, &st) < 0) {
            /* with a chroot, a path is often there on one side only */
            log_msg(srv->privs.chroot_dir ? LOG_DEBUG : LOG_WARN, "sandbox: '%s': %s: not allowed",
                    p->path, strerror(errno));
            if (p->fd >= 0)
                close(p->fd);
            p->fd = -1;
            continue;
        }
        p->dev = st.st_dev;
        p->ino = st.st_ino;
        p->is_dir = S_ISDIR(st.st_mode);
        p->known = true;
        /* Landlock grants by folder: a shared one stays open */
        if ((p->how & COLIBRI_PATH_WRITE) && p->is_dir && (st.st_mode & S_ISVTX) &&
            (st.st_mode & S_IWOTH))
            log_msg(LOG_WARN,
                    "sandbox: '%s' is a shared folder, and everything below it stays readable "
                    "and writable",
                    p->path);
    }
    int fd = landlock_ruleset(sb, sb->abi, srv->connect_ports, srv->n_connect_ports, err, errlen);
    if (fd < 0)
        return fd;
    sb->ruleset_fd = fd;
    return list_threads(sb, err, errlen);
}

/* --- closing ------------------------------------------------------------------ */

static int sync_ruleset = -1;
static atomic_uint sync_done;
static atomic_int sync_err;

static void on_sync(int sig)
{
    (void)sig;
    int saved = errno;
    int r = landlock_restrict(sync_ruleset);
    if (r < 0)
        atomic_store(&sync_err, -r);
    atomic_fetch_add(&sync_done, 1);
    errno = saved;
}

/* The threads that exist already restrict themselves; then this one. */
static int restrict_all(struct sandbox *sb, char *err, size_t errlen)
{
    struct sigaction sa = {.sa_handler = on_sync, .sa_flags = SA_RESTART}, old;
    sigemptyset(&sa.sa_mask);
    sync_ruleset = sb->ruleset_fd;
    atomic_store(&sync_done, 0);
    atomic_store(&sync_err, 0);
    sigaction(THREAD_SYNC_SIGNAL, &sa, &old);
    unsigned sent = 0;
    for (unsigned i = 0; i < sb->n_tids; i++)
        if (syscall(SYS_tgkill, getpid(), sb->tids[i], THREAD_SYNC_SIGNAL) == 0)
            sent++; /* else gone already: nothing to restrict */
    struct timespec step = {0, 1000000};
    for (int ms = 0; atomic_load(&sync_done) < sent && ms < SYNC_WAIT_MS; ms++)
        nanosleep(&step, NULL);
    unsigned done = atomic_load(&sync_done);
    int e = atomic_load(&sync_err);
    /* later threads are started restricted: no more of these */
    signal(THREAD_SYNC_SIGNAL, SIG_IGN);
    if (done < sent)
        return err_set(err, errlen, -ETIMEDOUT, NULL,
                       "sandbox: %u of %u threads did not take the Landlock rules (a thread of "
                       "a module that blocks signal %d?)",
                       sent - done, sent, THREAD_SYNC_SIGNAL);
    if (e)
        return err_set(err, errlen, -e, NULL, "sandbox: landlock_restrict_self: %s", strerror(e));
    int r = landlock_restrict(sb->ruleset_fd);
    if (r < 0)
        return err_set(err, errlen, r, NULL, "sandbox: landlock_restrict_self: %s", strerror(-r));
    return 0;
}

int sandbox_enter(struct colibri_server *srv, char *err, size_t errlen)
{
    if (!srv->sandbox_on)
        return 0;
    struct sandbox *sb = srv->sandbox;
    int r;
    if (sb->ruleset_fd >= 0) {
        if ((r = restrict_all(sb, err, errlen)) < 0)
            return r;
        close(sb->ruleset_fd);
        sb->ruleset_fd = -1;
    }
    unsigned n_rules = 0;
    for (unsigned i = 0; i < sb->n_paths; i++) {
        n_rules += sb->paths[i].fd >= 0;
        if (sb->paths[i].fd >= 0) /* dev and ino are what reloads check */
            close(sb->paths[i].fd);
        sb->paths[i].fd = -1;
    }
    if ((r = seccomp_enter(srv->connect_families, err, errlen)) < 0)
        return r;
    sb->entered = true;
    if (sb->abi)
        log_msg(LOG_INFO,
                "sandbox: on (Landlock ABI %d: %u paths allowed, %u threads; system call filter)",
                sb->abi, n_rules, sb->n_tids + 1);
    else
        log_msg(LOG_INFO, "sandbox: on (system call filter only)");
    return 0;
}
