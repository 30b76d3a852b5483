/* h2.h - HTTP/2 (RFC 9113) on libnghttp2: a connection as the HTTP layer
 * hands it over, and its streams as exchanges of the HTTP layer.
 *
 * The connection's coroutine drives an nghttp2 server session with
 * mem_recv/mem_send through colibri's own buffers (one write per turn of
 * its loop, whatever the number of frames). Each stream runs its request
 * in a sub-context of the runtime (rt/conn.h: a coroutine from the same
 * pool): the same http_dispatch(), handlers, modules and access log as
 * HTTP/1.1, with the head of its answer written as HEADERS
 * (struct http_framing) and its body bytes, both ways, framed as DATA by
 * the sub-context's I/O (struct conn_sub_ops). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "rt/conn.h"

/* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24

/* Whether the len bytes at p begin the client's connection preface (the
 * request line of it at least: what the HTTP/1.1 parser refuses with 505). */
bool h2_is_preface(const char *p, size_t len);

/* The run of an HTTP/2 connection whose first bytes (the preface, and
 * maybe more) are buffered in ctx->in from in_pos. Returns when the
 * connection ends (CONN_LINGER). Its state (struct http_conn) is the HTTP
 * layer's; its settings come from the worker's http_config. */
enum conn_verdict h2_run(struct conn_ctx *ctx);

struct http_worker;
/* A connection that rested without its context (rest.c: the runtime kept
 * its state, conn_rest_put) got bytes: its run goes on from there. And
 * one that closed at rest: its state freed. */
enum conn_verdict h2_resume(struct conn_ctx *ctx, void *state);
void h2_drop(struct http_worker *hw, void *state);

struct http_head;
/* An HTTP/1.1 request on a plain connection that asked for `Upgrade: h2c`
 * (its head in ctx->in, what follows it from in_pos): answers 101, then
 * runs the connection as HTTP/2 with the request as stream 1 (RFC 7540
 * 3.2). A bad HTTP2-Settings field gets a 400 and the connection closes. */
enum conn_verdict h2_upgrade(struct conn_ctx *ctx, const struct http_head *head);
