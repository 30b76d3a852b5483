/* systemd.h - the two systemd protocols colibri speaks, written here
 * rather than taken from libsystemd (they are a few dozen lines, stable
 * and documented in sd_listen_fds(3) and sd_notify(3); a library would
 * be one more build dependency for every user, systemd or not):
 *
 * - socket activation: LISTEN_PID (must be our pid), LISTEN_FDS (sockets
 *   from fd 3 on) and LISTEN_FDNAMES (their names, colon-separated);
 * - readiness notification: one datagram per state change to the AF_UNIX
 *   socket named by NOTIFY_SOCKET ('@' first: the abstract namespace).
 *
 * Both read their environment once per process and then unset it, as
 * sd_listen_fds(1) does, so that no child inherits it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Appends to fds (room for max) the passed sockets named name (NULL: all
 * of them), each checked to be a listening stream socket and made
 * non-blocking, and marks them taken. The count (at least 1), or -errno
 * with err set: nothing passed, no such name, not a listening socket, or
 * a socket another listener took already. The fds stay open for the life
 * of the process; the caller must not close them (sd_release gives one
 * back). */
/* owner is the config taking them (its server): a socket it took already
 * is an error. allow_taken (a reload, whose config may name the sockets
 * the running one took): sockets another owner took are no error, and
 * pass to owner. */
int sd_take_sockets(const char *name, int *fds, unsigned max, const void *owner, bool allow_taken,
                    char *err, size_t errlen);
/* Forgets that fd was taken (a listener that goes away). */
void sd_release_socket(int fd);

/* Connects to $NOTIFY_SOCKET once (call before chroot: the path is looked
 * up here). 0 also when there is none; -errno when it cannot be reached. */
int sd_notify_open(char *err, size_t errlen);
/* Sends "READY=1", "STOPPING=1"...: one datagram, nothing when no
 * NOTIFY_SOCKET. Async-signal-safe (a send() on the connected socket). */
void sd_notify_send(const char *state);
/* For a reload: "RELOADING=1" with the
 * MONOTONIC_USEC= that Type=notify-reload wants, then, once the new
 * config serves, sd_notify_send("READY=1"). */
void sd_notify_reloading(void);
