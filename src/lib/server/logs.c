/* logs.c - the server's log files and pid file (see logs.h). */
#include "server/logs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/err.h"
#include "config/config.h"

void logs_init(struct server_logs *l)
{
    *l = (struct server_logs){.access_fd = -1, .error_fd = -1, .level = LOG_INFO};
}

void logs_free(struct server_logs *l)
{
    if (l->access_fd > 2)
        close(l->access_fd);
    if (l->error_fd > 2)
        close(l->error_fd);
    free(l->access_path);
    free(l->error_path);
    free(l->pid_path);
    logs_init(l);
}

static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* "stdout", "stderr" or a file, opened now. */
static int take_file(const struct config_node *n, char **path, int *fd, char *err, size_t errlen)
{
    if (n->is_section || !n->value[0])
        return config_error(n, err, errlen, "expected a file, 'stdout' or 'stderr'");
    int f;
    if (!strcmp(n->value, "stdout"))
        f = 1;
    else if (!strcmp(n->value, "stderr"))
        f = 2;
    else if ((f = open_log(n->value)) < 0)
        return config_error(n, err, errlen, "cannot open '%s': %s", n->value, strerror(errno));
    char *p = strdup(n->value);
    if (!p) {
        if (f > 2)
            close(f);
        return config_error(n, err, errlen, "out of memory");
    }
    if (*fd > 2)
        close(*fd);
    free(*path);
    *path = p;
    *fd = f;
    return 0;
}

int logs_load(struct server_logs *l, struct config_node *root, char *err, size_t errlen)
{
    /* every key taken first: one that fails must not leave the others
     * behind to be called unknown */
    struct config_node *access = config_take(root, "access_log"),
                       *error = config_take(root, "error_log"),
                       *level = config_take(root, "error_log_level"),
                       *pid = config_take(root, "pid_file");
    int r;
    if (access && (r = take_file(access, &l->access_path, &l->access_fd, err, errlen)))
        return r;
    if (error && (r = take_file(error, &l->error_path, &l->error_fd, err, errlen)))
        return r;
    if (level && log_level_parse(level->value, &l->level) < 0)
        return config_error(level, err, errlen, "expected error, warn, info or debug, not '%s'",
                            level->value);
    if (pid) {
        if (pid->is_section || !pid->value[0])
            return config_error(pid, err, errlen, "expected a file");
        char *p = strdup(pid->value);
        if (!p)
            return config_error(pid, err, errlen, "out of memory");
        free(l->pid_path);
        l->pid_path = p;
        config_where(pid, l->pid_where, sizeof(l->pid_where));
    }
    return 0;
}

static int write_pid(struct server_logs *l, char *err, size_t errlen)
{
    int fd = open(l->pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    int e = fd < 0 ? errno : -write_full(fd, buf, (size_t)n);
    if (e) {
        if (fd >= 0) {
            close(fd);
            unlink(l->pid_path);
        }
        return err_set(err, errlen, -e, l->pid_where, "cannot write '%s': %s", l->pid_path,
                       strerror(e));
    }
    close(fd);
    l->pid_written = true;
    return 0;
}

int logs_start(struct server_logs *l, char *err, size_t errlen)
{
    if (l->pid_path) {
        int r = write_pid(l, err, errlen);
        if (r)
            return r;
    }
    log_setup(l->error_fd >= 0 ? l->error_fd : 2, l->level);
    l->started = true;
    return 0;
}

/* A file that is not stdout or stderr, opened again at its path and put
 * in place of the old one under the same fd. false when that failed (the
 * old file stays in use). */
static bool reopen(const char *what, const char *path, int fd)
{
    if (!path || fd <= 2)
        return true;
    int nfd = open_log(path);
    if (nfd < 0 || dup2(nfd, fd) < 0) {
        log_msg(LOG_ERROR, "cannot reopen %s '%s': %s", what, path, strerror(errno));
        if (nfd >= 0)
            close(nfd);
        return false;
    }
    close(nfd);
    return true;
}

void logs_reopen(struct server_logs *l)
{
    bool ok = reopen("error_log", l->error_path, l->error_fd);
    ok &= reopen("access_log", l->access_path, l->access_fd);
    if (ok)
        log_msg(LOG_INFO, "logs reopened");
    else
        log_msg(LOG_WARN, "not every log was reopened: the others go on to the files open before");
}

void logs_stop(struct server_logs *l)
{
    if (l->pid_written)
        unlink(l->pid_path);
    l->pid_written = false;
    if (l->started)
        log_setup(2, LOG_INFO);
    l->started = false;
}
