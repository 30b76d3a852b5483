/* conn.h - the connection table entry and the context of an active
 * connection.
 *
 * conns[fd] is one 32-byte entry per possible file descriptor, allocated once
 * at start-up for the raised fd limit; the fd is the index and is never
 * stored. An idle keep-alive connection owns nothing but its entry: the
 * coroutine stack and the buffers live in a struct conn_ctx taken from the
 * worker's pool when bytes arrive and given back when the connection is
 * idle again. Only the worker that accepted a connection touches its entry.
 */
#pragma once

#include <stdint.h>

#include "base/arena.h"
#include "base/common.h"
#include "base/strbuf.h"
#include "rt/coro.h"

struct worker;

enum conn_flags {
    CONN_OPEN = 1u << 0,
    CONN_IN_IDLE_Q = 1u << 1, /* waiting for a next request: keep-alive timeout */
    CONN_IN_REQ_Q = 1u << 2,  /* in the middle of a request: request timeout */
    CONN_IN_EPOLL = 1u << 3,  /* registered with the worker's epoll */
};

struct conn {
    struct conn_ctx *ctx; /* NULL while idle */
    uint32_t prev, next;  /* timeout queue links: fds, TQ_NIL for none */
    uint32_t deadline;    /* worker clock, seconds */
    uint16_t flags;
    uint16_t worker;      /* index of the owning worker */
    uint64_t activations; /* times bytes woke it from idle (statistics) */
};
static_assert(sizeof(struct conn) == 32, "two connection entries per cache line");

/* What a suspended connection coroutine waits for (the value it yields). */
enum conn_wait {
    CONN_WAIT_READ = 1,
    CONN_WAIT_WRITE = 2,
};

/* Everything an active connection needs, pooled per worker thread. */
struct conn_ctx {
    struct coro *coro;
    struct worker *worker;
    int fd;
    bool last_read_full; /* more input may wait: the last read filled the buffer,
                            or bytes arrived while we were writing */
    bool new_deadline;   /* a request finished or made progress: the next wait
                            for input gets a fresh request timeout */
    bool closing;        /* answer with Connection: close, then close */
    bool lingering;      /* close after draining the client's unread bytes */
    bool mid_request;    /* part of a request is buffered or being read (408 on timeout) */
    uint8_t waiting;     /* enum conn_wait while suspended */
    char *in;            /* request bytes: [in_pos, in_len) not consumed yet */
    size_t in_pos, in_len, in_cap;
    struct strbuf out;     /* response bytes not written yet (pipelining) */
    struct strbuf body;    /* the response body a handler fills */
    struct strbuf hdrs;    /* extra response header lines a handler adds */
    struct strbuf reqbody; /* the request body, once a handler asked for it */
    struct arena arena;    /* per-request scratch: decoded path, query values */
    struct conn_ctx *next_free;
};
