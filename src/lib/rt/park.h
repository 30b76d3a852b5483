/* park.h - the worker's list of parked connection contexts, oldest first.
 *
 * A keep-alive connection that answered everything it was sent parks its
 * coroutine in conn_park() instead of ending it: the next request continues
 * that coroutine, with no context to take from the pool, no stack to
 * prepare and none of run()'s set-up (the cost of ending and restarting
 * was about a tenth of a small request's instructions). An idle connection
 * must still own no more than its table entry, so a parked context is only
 * borrowed: when a connection needs a context and the pool is empty, the
 * oldest parked one is taken back (its coroutine reset, as for a close)
 * before a new one is allocated. So parking never adds a context: the
 * worker has as many as it had running at once, as before. worker.c
 * parks, resumes and takes back; these keep the list. */
#pragma once

#include "rt/worker.h"

static inline void parked_unlink(struct worker *w, struct conn_ctx *ctx)
{
    if (ctx->park_prev)
        ctx->park_prev->park_next = ctx->park_next;
    else
        w->parked_head = ctx->park_next;
    if (ctx->park_next)
        ctx->park_next->park_prev = ctx->park_prev;
    else
        w->parked_tail = ctx->park_prev;
    ctx->park_prev = ctx->park_next = NULL;
    ctx->parked = false;
}

static inline void parked_append(struct worker *w, struct conn_ctx *ctx)
{
    ctx->parked = true;
    ctx->park_prev = w->parked_tail;
    ctx->park_next = NULL;
    if (w->parked_tail)
        w->parked_tail->park_next = ctx;
    else
        w->parked_head = ctx;
    w->parked_tail = ctx;
}
