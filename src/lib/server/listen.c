/* listen.c - listening addresses and sockets. */
#include "server/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"

int listener_parse(const char *spec, struct listener *l, char *err, size_t errlen)
{
    char host[256], port[16];
    const char *colon = strrchr(spec, ':');
    const char *h = spec;
    size_t hl;
    if (!colon) {
        h = "*";
        hl = 1;
        colon = spec - 1;
    } else if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close + 1 != colon)
            return err_set(err, errlen, -EINVAL, NULL, "bad listener '%s' (expected [v6addr]:port)",
                           spec);
        h = spec + 1;
        hl = (size_t)(close - h);
    } else {
        hl = (size_t)(colon - spec);
    }
    size_t pl = strlen(colon + 1);
    if (hl == 0 || hl >= sizeof(host) || pl == 0 || pl >= sizeof(port))
        return err_set(err, errlen, -EINVAL, NULL, "bad listener '%s' (expected ADDR:PORT)", spec);
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, colon + 1, pl + 1);
    char *end;
    long pn = strtol(port, &end, 10);
    if (*end || pn < 0 || pn > 65535)
        return err_set(err, errlen, -EINVAL, NULL, "bad port in listener '%s'", spec);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    bool any = !strcmp(host, "*");
    if (any)
        hints.ai_flags |= AI_PASSIVE;
    int e = getaddrinfo(any ? NULL : host, port, &hints, &res);
    if (e)
        return err_set(err, errlen, -EINVAL, NULL, "listener '%s': %s", spec, gai_strerror(e));
    /* "*" prefers the IPv6 wildcard, which also takes IPv4 (dual stack) */
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; any && a; a = a->ai_next)
        if (a->ai_family == AF_INET6)
            pick = a;
    memcpy(&l->addr, pick->ai_addr, pick->ai_addrlen);
    l->addr_len = pick->ai_addrlen;
    freeaddrinfo(res);
    snprintf(l->name, sizeof(l->name), "%s", spec);
    return 0;
}

int listener_inherit(struct listener *l, int fd, const char *name, char *err, size_t errlen)
{
    *l = (struct listener){.inherited = true, .fd = fd};
    snprintf(l->name, sizeof(l->name), "%s (fd %d)", name, fd);
    socklen_t len = sizeof(l->addr);
    if (getsockname(fd, (struct sockaddr *)&l->addr, &len) < 0)
        return err_set(err, errlen, -errno, NULL, "listener %s: %s", l->name, strerror(errno));
    l->addr_len = len;
    if (l->addr.ss_family != AF_INET && l->addr.ss_family != AF_INET6)
        return err_set(err, errlen, -EAFNOSUPPORT, NULL,
                       "listener %s: not a TCP socket (address family %d)", l->name,
                       l->addr.ss_family);
    return 0;
}

/* An inherited socket: one per process, so each worker (or the acceptor)
 * gets a dup of it to own and close; the socket stays open and listening
 * as long as systemd, or any of our dups, holds it. */
static int inherited_open(struct listener *l, unsigned defer_s, bool first, char *err,
                          size_t errlen)
{
    if (first) {
        /* as on a socket of our own; systemd's options may have set them
         * already, and they outlive us on its socket, which is harmless */
        int one = 1, defer = (int)defer_s;
        setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(l->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer));
    }
    int fd = fcntl(l->fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_set(err, errlen, -errno, NULL, "listener %s: dup: %s", l->name, strerror(errno));
    return fd;
}

int listener_open(struct listener *l, unsigned defer_s, bool first, char *err, size_t errlen)
{
    if (l->inherited)
        return inherited_open(l, defer_s, first, err, errlen);
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(err, errlen, -errno, NULL, "listener %s: socket: %s", l->name,
                       strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* one socket per worker: the kernel spreads connections, no fd ever
     * changes threads, no accept lock */
    if (!first)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    /* inherited by accepted sockets: no per-connection system call */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* accept() only once the request has arrived, so the first read works */
    int defer = (int)defer_s;
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer));
    if (l->addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (const struct sockaddr *)&l->addr, l->addr_len) < 0)
        goto out_close;
    if (first) {
        /* joins the port group after binding; a port 0 becomes the one
         * the kernel picked, for every other worker's socket */
        socklen_t len = sizeof(l->addr);
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
            getsockname(fd, (struct sockaddr *)&l->addr, &len) < 0)
            goto out_close;
        l->addr_len = len;
    }
    if (listen(fd, 4096) < 0)
        goto out_close;
    return fd;

out_close:;
    int e = errno;
    close(fd);
    return err_set(err, errlen, -e, NULL, "listener %s: %s", l->name, strerror(e));
}

void listener_url(const struct listener *l, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (l->addr.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&l->addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
        snprintf(buf, len, "%s://[%s]:%u", l->tls ? "https" : "http", host, port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&l->addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
        snprintf(buf, len, "%s://%s:%u", l->tls ? "https" : "http", host, port);
    }
}
