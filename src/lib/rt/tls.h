/* tls.h - TLS as a transport under the protocol (OpenSSL 3; without it,
 * built when COLIBRI_WITH_OPENSSL is not defined, every call that would
 * need it fails with -ENOTSUP).
 *
 * The server builds one struct tls_server per configuration generation: a
 * set of sites, each with its certificate/key pairs in one SSL_CTX (built
 * once, here, never per connection), the first one added with is_default
 * answering a ClientHello without SNI or with an unknown name. A protocol
 * names it for a connection (conn_proto.tls_for); the runtime then runs the
 * handshake in the connection's coroutine (non-blocking: a handshake that
 * needs bytes suspends the connection, under the request timeout) and
 * every read and write of the connection goes through it.
 *
 * The first part is the server's; the rest is the runtime's own (conn.c,
 * worker.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn_ctx;
struct tls_server;

/* tls_protocols: bits of the versions allowed */
#define TLS_PROTO_V12 1u
#define TLS_PROTO_V13 2u

/* Whether this build has TLS (OpenSSL). */
bool tls_available(void);
/* The OpenSSL version string, or NULL without it. */
const char *tls_library(void);

/* A server for the given versions and TLS 1.2 cipher list (NULL: Mozilla
 * "intermediate"). NULL with err set (a bad cipher list, no OpenSSL,
 * out of memory). */
struct tls_server *tls_server_new(unsigned protocols, const char *ciphers, char *err,
                                  size_t errlen);
void tls_server_free(struct tls_server *ts);
/* Session tickets (stateless resumption, TLS 1.2 and 1.3; on by
 * default): for the sites added after the call. */
void tls_server_tickets(struct tls_server *ts, bool on);
/* Starts a site: names (n of them, lower case; the site chosen by SNI),
 * and whether it is the default (no SNI, an unknown name). Returns its
 * index or -errno with err set. Pairs follow with tls_server_add_pair(). */
int tls_server_add_site(struct tls_server *ts, const char *const *names, unsigned n,
                        bool is_default, char *err, size_t errlen);
/* A certificate chain file (PEM, leaf first) and its private key for the
 * site: 0, or -errno with err saying what is wrong (unreadable, not a
 * certificate, a key that does not match). *expired is set when the leaf
 * has expired (still loaded: the caller warns). */
int tls_server_add_pair(struct tls_server *ts, int site, const char *cert, const char *key,
                        bool *expired, char *err, size_t errlen);
/* The keys of session tickets: key80 (80 bytes of a tls_ticket_key_file:
 * name 16, HMAC 32, AES 32), or NULL for the process's own, rotated every
 * rotate_s seconds (0: an hour), the previous one still decrypting.
 * Before any site is added (-EBUSY after); -ENOMEM. */
int tls_server_ticket_keys(struct tls_server *ts, unsigned rotate_s, const unsigned char *key80);
/* A DER OCSP response stapled as is to the site's handshakes when the
 * client asks (status_request): 0, or -errno with err set (unreadable,
 * larger than 64 KiB, not an OCSP response). */
int tls_server_add_staple(struct tls_server *ts, int site, const char *der, char *err,
                          size_t errlen);
/* Kernel TLS: whether the kernel offers the "tls" upper layer protocol,
 * read from ulp_list (NULL: /proc/sys/net/ipv4/tcp_available_ulp, the
 * space-separated list). */
bool tls_ktls_probe(const char *ulp_list);
/* ktls = auto: hand the record layer to the kernel after the handshake
 * where it can take it (SSL_OP_ENABLE_KTLS; files then leave with
 * SSL_sendfile); off: user space only. For the sites added after the
 * call; off by default. */
void tls_server_ktls(struct tls_server *ts, bool on);
/* Whether any site has a certificate. */
bool tls_server_ready(const struct tls_server *ts);
/* The OpenSSL context a connection starts with (an SSL_CTX *), for tests
 * and the fuzz target that drive it on memory BIOs; NULL without one. */
void *tls_server_start_ctx(const struct tls_server *ts);

/* --- the runtime's ----------------------------------------------------- */

/* tls_ticket.c: ticket keys, and their callback on an SSL_CTX */
struct tls_tickets;
struct tls_tickets *tls_tickets_new(unsigned rotate_s, const unsigned char *file_key);
void tls_tickets_free(struct tls_tickets *t);
void tls_tickets_install(void *ssl_ctx, struct tls_tickets *t);

/* The handshake, in the connection's coroutine: 0, -1 (the connection
 * closes), or TLS_NOT_TLS when the first byte cannot begin a TLS
 * handshake (nothing of it consumed). Bytes already in ctx->in (behind a
 * PROXY header) are the start of the TLS stream. */
#define TLS_NOT_TLS (-2)
int tls_accept(struct conn_ctx *ctx, struct tls_server *ts);
/* Like read()/writev(): n, 0 at the end of the stream, or -1 with errno
 * (EAGAIN: ctx->tls_want says which readiness to wait for). */
ssize_t tls_read(struct conn_ctx *ctx, void *buf, size_t len);
ssize_t tls_writev(struct conn_ctx *ctx, const struct iovec *iov, int iovcnt);
/* len bytes of file_fd from offset, through the connection's TLS. */
void tls_sendfile(struct conn_ctx *ctx, int file_fd, off_t offset, size_t len);
/* The connection goes idle: the record buffers go back. */
void tls_idle(struct conn_ctx *ctx);
/* Decrypted bytes held that no readiness event will announce. */
bool tls_pending(const struct conn_ctx *ctx);
/* Best effort, without waiting. */
void tls_try_write(struct conn_ctx *ctx, const void *p, size_t len);
void tls_close_notify(struct conn_ctx *ctx);
/* Frees a connection's TLS state (conns[fd].tls) at its close. */
void tls_free(void *tls);
/* TLS handshakes since the start, every worker together: completed as
 * full handshakes, completed by resuming a session (a ticket), and
 * failed (an alert, a reset, bytes that are not TLS after a handshake
 * record began; one cut off by request_timeout is not counted). */
void tls_handshake_counts(uint64_t *full, uint64_t *resumed, uint64_t *failed);
