/* sandbox.h - "sandbox = true": once the server has started (listeners
 * bound, modules loaded, logs open, root given up), Landlock rules limit
 * which files every thread may open, and a seccomp filter which system
 * calls it may make. See README, "Sandbox".
 *
 * The paths the server needs later are collected while the config loads
 * (colibri_server_allow_path(), which serve_files, "module", temp_dir and
 * error_template call); the log files, the pid file and the config file
 * are added by sandbox_prepare(). */
#pragma once

/* An AddressSanitizer build: LeakSanitizer's tracer at exit needs /proc,
 * ptrace and more, which the sandbox then allows (README, "Sandbox"). */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct colibri_server;

/* What a path is allowed for, beyond COLIBRI_PATH_READ/WRITE: the log
 * files' folders (write and create files, no reading), and the pid
 * file's folder (remove a file). */
#define SANDBOX_LOG_DIR    0x100u
#define SANDBOX_REMOVE_DIR 0x200u
#define SANDBOX_RMDIR      0x400u /* remove a folder: the private temp_dir at exit */

/* One path and what it may be used for. */
struct sandbox_path {
    char *path;
    unsigned how;
    int fd;    /* O_PATH, from sandbox_prepare() on */
    dev_t dev; /* of fd: what a reload's paths are checked against */
    ino_t ino;
    bool is_dir;
    bool known; /* dev and ino are set */
};

struct sandbox {
    struct sandbox_path *paths;
    unsigned n_paths;
    int ruleset_fd; /* Landlock; -1: none (absent, or not yet made) */
    int abi;        /* the Landlock ABI used; 0: none */
    pid_t *tids;    /* the threads that exist before the sandbox closes */
    unsigned n_tids;
    bool entered; /* the sandbox is closed: paths can only be checked */
    /* temp_dir was shared (/tmp): a folder of colibri's own inside it */
    char *shared_tmp, *private_tmp;
};

/* Records path for how (COLIBRI_PATH_* or SANDBOX_*). Once the sandbox of
 * the running server is closed (srv is a reload's server), checks instead
 * that what was allowed at start-up covers it: 0, or -EACCES with err
 * set. Without "sandbox = true" it only records. */
int sandbox_allow(struct colibri_server *srv, const char *path, unsigned how, char *err,
                  size_t errlen);
/* Before privileges are dropped (paths still as the config names them,
 * /proc still there): the Landlock ruleset, the list of threads. 0 or
 * -errno with err set. Does nothing without "sandbox = true". */
int sandbox_prepare(struct colibri_server *srv, char *err, size_t errlen);
/* After: every thread restricted (Landlock), then the seccomp filter on
 * all of them. Threads started later inherit both. 0 or -errno with err
 * set; Landlock missing is a warning, not an error. */
int sandbox_enter(struct colibri_server *srv, char *err, size_t errlen);
/* A reload's server whose temp_dir is the shared folder the start-up
 * replaced: the same private folder. */
void sandbox_reload_temp_dir(struct colibri_server *next);
/* Whether the running server (or, for a reload's server, the one it
 * reloads) is sandboxed. */
bool sandbox_closed(const struct colibri_server *srv);
void sandbox_free(struct sandbox *sb);

/* landlock.c: the ABI this kernel offers (0: none), lowered by
 * COLIBRI_SANDBOX_LANDLOCK_ABI, read here (tests use it to stand for a
 * kernel without Landlock); why says why it is 0. */
int landlock_abi(char *why, size_t len);
/* A ruleset for sb->paths under abi, and from ABI 4 on TCP connects to
 * ports (a gateway's upstreams) and no other: its fd, or -errno with err
 * set. */
int landlock_ruleset(const struct sandbox *sb, int abi, const uint16_t *ports, unsigned n_ports,
                     char *err, size_t errlen);
/* This thread: no new privileges, then the ruleset. 0 or -errno.
 * Async-signal-safe. */
int landlock_restrict(int ruleset_fd);

/* seccomp.c: the filter, on every thread of the process (TSYNC). 0 or
 * -errno with err set. */
/* connect_families: bits 1 << AF_* that socket() and connect() are
 * allowed for (a gateway's upstreams; 0: none). */
int seccomp_enter(unsigned connect_families, char *err, size_t errlen);
