/* uptls.h - TLS to an upstream (proxy "to = https://HOST:PORT"): an
 * OpenSSL client context per upstream made at config loading (the
 * upstream's certificate verified by default against the system's CA
 * store or tls_ca, for its host name or tls_server_name, SNI and ALPN
 * http/1.1), and the session of a connected socket found by its fd, so
 * that upio.c's calls (gw_read, gw_writev, gw_idle_alive, gw_close) speak
 * TLS on such an fd and plain bytes on any other. A socket with a session
 * must be closed with gw_close(). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "colibri.h"
#include "rt/conn.h"

struct gw_tls;

/* The client context for an upstream whose host is host: verify (the
 * certificate and its name), ca (a CA bundle file, or NULL: the system's),
 * name (the SNI and verified name, or NULL: host). 0 or -EINVAL with why. */
int gw_tls_new(struct gw_tls **out, const char *host, bool verify, const char *ca, const char *name,
               char *why, size_t whylen);
void gw_tls_free(struct gw_tls *t);
/* The system's CA file and folder (OpenSSL's defaults; NULL without
 * OpenSSL): what the sandbox must let a verifying context read. */
void gw_tls_default_paths(const char **file, const char **dir);

/* The handshake on the connected socket fd (text names the server in the
 * error log): fd, or a negative errno with fd closed (-EPROTO: the
 * handshake or the verification failed, logged with why). */
int gw_tls_connect(struct conn_ctx *ctx, struct gw_tls *t, const char *text, int fd,
                   int timeout_ms);

/* The active health check's exchange on fd, a socket connecting without
 * blocking (upstream.c): the handshake, the n bytes of req sent, then the
 * answer read into buf until it holds a status line (12 bytes) or cap;
 * each step waits with poll() until deadline_ms (CLOCK_MONOTONIC) or until
 * stop_fd is readable. The bytes read, or -1 with why. fd stays open. */
ssize_t gw_tls_check(struct gw_tls *t, int fd, int stop_fd, uint64_t deadline_ms, const char *req,
                     size_t n, char *buf, size_t cap, char *why, size_t whylen);

/* Whether fd has a TLS session (gw_tls_connect), and its I/O; the
 * waits as upio.h's. */
bool gw_tls_on(int fd);
int gw_tls_writev(struct conn_ctx *ctx, int fd, struct iovec *iov, int iovcnt, int timeout_ms);
ssize_t gw_tls_read(struct conn_ctx *ctx, int fd, void *buf, size_t cap, int timeout_ms);
/* A read that does not wait: > 0, 0 at the end, -EAGAIN, or -errno. */
ssize_t gw_tls_read_now(int fd, void *buf, size_t cap);
bool gw_tls_idle_alive(int fd);
/* Bytes the session holds already decrypted. */
bool gw_tls_pending(int fd);
/* Frees fd's session (if any). */
void gw_tls_drop(int fd);
