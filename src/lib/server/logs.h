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

struct colibri_server;
struct config_node;

struct server_logs {
    char *access_path; /* NULL: no access log; "stdout" */
    int access_fd;     /* -1 when none */
    char *error_path;  /* NULL: stderr */
    int error_fd;      /* -1: stderr */
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
/* Once the listeners are bound: the error log's fd and level, the pid
 * file. 0 or -errno with err. */
int logs_start(struct server_logs *l, char *err, size_t errlen);
/* The files opened again at their paths (log rotation). */
void logs_reopen(struct server_logs *l);
/* After the workers ended: removes the pid file and hands the error log
 * back to stderr. */
void logs_stop(struct server_logs *l);
