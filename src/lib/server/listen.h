/* listen.h - listening addresses: parsing "127.0.0.1:8080", "[::1]:80",
 * "*:80" or "8080", and opening one socket per worker on each; or a
 * socket passed by systemd, which every worker shares. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>

struct listener {
    struct sockaddr_storage addr; /* after the first open: the port really bound */
    socklen_t addr_len;
    char name[80];           /* as written */
    bool proxy_protocol;     /* connections begin with a PROXY header */
    bool tls;                /* tls = true: connections speak TLS */
    uint16_t redirect_https; /* redirect_to_https = PORT: every request gets a 308 */
    bool no_http2;           /* http2 = false: the HTTP/2 preface gets 505 */
    bool h2c_upgrade;        /* h2c_upgrade = true: `Upgrade: h2c` switches to HTTP/2 */
    bool inherited;          /* fd: a socket passed by systemd (not ours to close) */
    bool retired;            /* removed by a reload: its index is not reused */
    int fd;
};

/* 0, or -EINVAL with err set. */
int listener_parse(const char *spec, struct listener *l, char *err, size_t errlen);
/* A non-blocking listening socket, or -errno with err set. The first
 * socket of a listener binds alone, so a port somebody already listens on
 * is an error; later ones join it with SO_REUSEPORT. defer_s: how long
 * accept() may wait for the first bytes (TCP_DEFER_ACCEPT). */
int listener_open(struct listener *l, unsigned defer_s, bool first, char *err, size_t errlen);
/* A listener for fd, a listening socket passed by systemd (named name):
 * its address read back, for listener_url(). 0 or -errno with err set
 * (a socket that is not TCP over IPv4 or IPv6). listener_open() then
 * gives each caller a dup of fd: one socket shared by every worker. */
int listener_inherit(struct listener *l, int fd, const char *name, char *err, size_t errlen);
/* "http://127.0.0.1:8080" or "http://[::1]:8080" for the bound address. */
void listener_url(const struct listener *l, char *buf, size_t len);
