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
#include "http/log_format.h"

void logs_init(struct server_logs *l)
{
    *l = (struct server_logs){.access_fd = -1, .error_fd = -1, .level = LOG_INFO};
}

void logs_release_top(struct server_logs *l)
{
    if (l->access_fd > 2)
        close(l->access_fd);
    if (l->error_fd > 2)
        close(l->error_fd);
    free(l->access_path);
    free(l->error_path);
    free(l->pid_path);
    l->access_path = l->error_path = l->pid_path = NULL;
    l->access_fd = l->error_fd = -1;
}

void logs_free(struct server_logs *l)
{
    struct http_log_files *t = l->files_owned ? l->files : NULL;
    for (unsigned i = 0; t && i < t->n; i++) {
        if (t->fd[i] > 2 && t->fd[i] != l->access_fd)
            close(t->fd[i]);
        free(t->path[i]);
    }
    free(t);
    for (unsigned i = 0; i < l->n_sites; i++) {
        if (l->sites[i].fd > 2)
            close(l->sites[i].fd);
        free(l->sites[i].path);
        http_log_format_free(l->sites[i].fmt);
    }
    free(l->sites);
    http_log_format_free(l->format);
    logs_release_top(l);
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

static int take_format(const struct config_node *n, struct http_log_format **out, char *err,
                       size_t errlen)
{
    char why[1024];
    struct http_log_format *f;
    if (n->is_section || !n->value[0])
        return config_error(n, err, errlen,
                            "expected combined, json [FIELD...] or a text with $FIELD in it");
    if (http_log_format_compile(n->value, &f, why, sizeof(why)))
        return config_error(n, err, errlen, "%s", why);
    http_log_format_free(*out);
    *out = f;
    return 0;
}

static struct site_log *site_entry(struct server_logs *l, const void *site)
{
    for (unsigned i = 0; i < l->n_sites; i++)
        if (l->sites[i].site == site)
            return &l->sites[i];
    struct site_log *s = realloc(l->sites, (l->n_sites + 1) * sizeof(*s));
    if (!s)
        return NULL;
    l->sites = s;
    s[l->n_sites] = (struct site_log){.site = site, .fd = -1};
    return &s[l->n_sites++];
}

int logs_load_site(struct server_logs *l, const void *site, struct config_node *n, char *err,
                   size_t errlen)
{
    struct site_log *s = site_entry(l, site);
    if (!s)
        return config_error(n, err, errlen, "out of memory");
    bool format = !strcmp(n->name, "log_format");
    int prev = format ? s->fmt_line : s->path_line;
    if (prev)
        return config_error(n, err, errlen, "given twice for this site (first at line %d)", prev);
    if (format) {
        int r = take_format(n, &s->fmt, err, errlen);
        if (!r) {
            s->has_fmt = true;
            s->fmt_line = n->line;
        }
        return r;
    }
    if (!n->is_section && !strcmp(n->value, "off")) {
        s->off = true;
        s->path_line = n->line;
        return 0;
    }
    if (!n->is_section && !strcmp(n->value, "stderr"))
        return config_error(n, err, errlen, "expected a file, 'stdout' or 'off'");
    int r = take_file(n, &s->path, &s->fd, err, errlen);
    if (!r)
        s->path_line = n->line;
    return r;
}

/* The slot of path in t, or -1. */
static int slot_of(const struct http_log_files *t, const char *path)
{
    for (unsigned i = 0; i < t->n; i++)
        if (!strcmp(t->path[i], path))
            return (int)i;
    return -1;
}

/* path (with its fd, which the table takes, or closes when the path has
 * a slot already) into t: its slot. Room was checked. */
static unsigned add_slot(struct http_log_files *t, const char *path, int *fd, int keep_fd)
{
    int k = slot_of(t, path);
    if (k >= 0) {
        if (*fd > 2 && *fd != keep_fd && *fd != t->fd[k])
            close(*fd);
        *fd = -1;
        return (unsigned)k;
    }
    t->path[t->n] = strdup(path);
    if (!t->path[t->n]) /* the path only serves reopening and matching */
        t->path[t->n] = strdup("");
    t->fd[t->n] = *fd;
    if (*fd != keep_fd)
        *fd = -1; /* the table's now */
    return t->n++;
}

int logs_link(struct server_logs *l, struct server_logs *running, char *err, size_t errlen)
{
    if (!running->files) {
        if (!(running->files = calloc(1, sizeof(*running->files))))
            return err_set(err, errlen, -ENOMEM, NULL, "out of memory");
        running->files_owned = true;
    }
    struct http_log_files *t = running->files;
    /* room first: nothing changes when it is short */
    unsigned fresh = running->access_path && slot_of(t, running->access_path) < 0;
    for (unsigned i = 0; i < l->n_sites; i++) {
        bool dup = false;
        for (unsigned j = 0; j < i && !dup; j++)
            dup =
                l->sites[j].path && l->sites[i].path && !strcmp(l->sites[i].path, l->sites[j].path);
        fresh += l->sites[i].path && !dup && slot_of(t, l->sites[i].path) < 0 &&
                 !(running->access_path && !strcmp(running->access_path, l->sites[i].path));
    }
    if (t->n + fresh > HTTP_LOG_FILES_MAX)
        return err_set(err, errlen, -EMFILE, NULL,
                       "access_log: more than %d different files (counting those of earlier "
                       "reloads, open until a restart)",
                       HTTP_LOG_FILES_MAX);
    /* the top level's file stays the one the server started with */
    l->top_logged = running->access_path != NULL;
    if (l->top_logged) {
        int fd = running->access_fd;
        l->top =
            (struct http_log){.file = add_slot(t, running->access_path, &fd, fd), .fmt = l->format};
    }
    for (unsigned i = 0; i < l->n_sites; i++) {
        struct site_log *s = &l->sites[i];
        const struct http_log_format *fmt = s->has_fmt ? s->fmt : l->format;
        s->logged = !s->off && (s->path || l->top_logged);
        if (s->path)
            s->log = (struct http_log){.file = add_slot(t, s->path, &s->fd, -1), .fmt = fmt};
        else if (l->top_logged)
            s->log = (struct http_log){.file = l->top.file, .fmt = fmt};
    }
    return 0;
}

const struct http_log *logs_site(const struct server_logs *l, const void *site)
{
    for (unsigned i = 0; i < l->n_sites; i++)
        if (l->sites[i].site == site)
            return l->sites[i].logged ? &l->sites[i].log : NULL;
    return l->top_logged ? &l->top : NULL;
}

int logs_load(struct server_logs *l, struct config_node *root, char *err, size_t errlen)
{
    /* every key taken first: one that fails must not leave the others
     * behind to be called unknown */
    struct config_node *access = config_take(root, "access_log"),
                       *error = config_take(root, "error_log"),
                       *level = config_take(root, "error_log_level"),
                       *pid = config_take(root, "pid_file"),
                       *format = config_take(root, "log_format");
    int r;
    if (access && (r = take_file(access, &l->access_path, &l->access_fd, err, errlen)))
        return r;
    if (error && (r = take_file(error, &l->error_path, &l->error_fd, err, errlen)))
        return r;
    if (format && (r = take_format(format, &l->format, err, errlen)))
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
    /* the sites' files (the top level's was just done) */
    for (unsigned i = 0; l->files && i < l->files->n; i++)
        if (l->files->fd[i] != l->access_fd)
            ok &= reopen("access_log", l->files->path[i], l->files->fd[i]);
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
