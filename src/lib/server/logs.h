/* logs.h - what the server owns of logging: the config keys access_log,
 * error_log, error_log_level and pid_file, the files they name, their
 * reopening on request (SIGUSR1 in the colibri program) and the pid file.
 *
 * Files are opened when the config is read, so a path that cannot be
 * opened is a config error naming FILE:LINE: KEY. The pid file is written
 * once the listeners are bound and removed when the server stops. Reopening
 * runs on the server's control thread (control.c), woken through an
 * eventfd that colibri_server_reopen_logs() writes (async-signal-safe); a
 * reopened file replaces the old one under the same fd number (dup2), so
 * the workers never see a closed fd. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/log.h"
#include "http/access_log.h"

struct colibri_server;
struct config_node;
struct http_log_format;

/* A site's access_log and log_format (README, "Logs"). */
struct site_log {
    const void *site; /* the site's routes, its identity; NULL: the default site */
    char *path;       /* its own file, or NULL */
    int fd;           /* open until its slot in the files table takes it */
    bool off;         /* "access_log = off": not logged */
    int path_line, fmt_line;
    struct http_log_format *fmt;
    bool has_fmt;
    struct http_log log; /* resolved by logs_link(): what the site's requests use */
    bool logged;         /* log is to be used */
};

struct server_logs {
    char *access_path;              /* NULL: no access log; "stdout" */
    int access_fd;                  /* -1 when none */
    struct http_log_format *format; /* the top level's log_format (NULL: combined) */
    struct site_log *sites;
    unsigned n_sites;
    struct http_log top; /* resolved: requests no site took */
    bool top_logged;
    /* the access log files of the running server, shared by its reloads
     * (owned by the running server's logs) */
    struct http_log_files *files;
    bool files_owned;
    char *error_path; /* NULL: stderr */
    int error_fd;     /* -1: stderr */
    enum log_level level;
    char *pid_path;      /* NULL: no pid file */
    char pid_where[320]; /* "FILE:LINE: pid_file", for the error at start */
    bool pid_written;
    bool started;
};

void logs_init(struct server_logs *l);
void logs_free(struct server_logs *l);
/* Takes the keys above from the config's top level. 0 or -errno with err. */
int logs_load(struct server_logs *l, struct config_node *root, char *err, size_t errlen);
/* "access_log" or "log_format" inside a site (site: its routes, NULL for
 * the default site). 0 or -errno with err. */
int logs_load_site(struct server_logs *l, const void *site, struct config_node *n, char *err,
                   size_t errlen);
/* Gives every file the config l names a slot in the running server's table
 * (running == l at start; at a reload, its new files join the table) and
 * resolves what each site logs with. 0, or -EMFILE with err when the table
 * would overflow (nothing changed then). */
int logs_link(struct server_logs *l, struct server_logs *running, char *err, size_t errlen);
/* What the site's requests are logged with (NULL: not logged). */
const struct http_log *logs_site(const struct server_logs *l, const void *site);
/* The top-level files of a reload's config, which only the reload needed
 * (its sites' logs stay with its generation). */
void logs_release_top(struct server_logs *l);
/* Once the listeners are bound: the error log's fd and level, the pid
 * file. 0 or -errno with err. */
int logs_start(struct server_logs *l, char *err, size_t errlen);
/* The files opened again at their paths (log rotation). */
void logs_reopen(struct server_logs *l);
/* After the workers ended: removes the pid file and hands the error log
 * back to stderr. */
void logs_stop(struct server_logs *l);
