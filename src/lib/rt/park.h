/* park.h - the worker's list of parked connection contexts.
 *
 * A keep-alive connection that answered everything it was sent parks its
 * coroutine in conn_park() instead of ending it: the next request continues
 * that coroutine, with no context to take from the pool, no stack to
 * prepare and none of run()'s set-up (the cost of ending and restarting
 * was about a tenth of a small request's instructions). An idle connection
 * must still own no more than its table entry, so a parked context is only
 * borrowed: when a connection needs a context and the pool is empty, a
 * parked one is taken back (its coroutine reset, as for a close) before a
 * new one is allocated. So parking never adds a context: the worker has as
 * many as it had running at once, as before.
 *
 * Which one is taken back: the least recently used, approximately, by the
 * second-chance rule. A context joins the list the first time it parks and
 * stays on it while its connection goes on with requests; a resume only
 * sets its `park_used` mark (moving it in the list on every request cost
 * about 30 instructions). Taking back walks from the head: a context that
 * is running leaves the list (it joins again at the tail when it parks), a
 * marked one loses its mark and goes to the tail, the first unmarked
 * parked one is taken. worker.c parks, resumes and takes back; these keep
 * the list. */
#pragma once

#include "rt/internal.h"

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
    ctx->park_listed = false;
}

static inline void parked_append(struct worker *w, struct conn_ctx *ctx)
{
    ctx->park_listed = true;
    ctx->park_prev = w->parked_tail;
    ctx->park_next = NULL;
    if (w->parked_tail)
        w->parked_tail->park_next = ctx;
    else
        w->parked_head = ctx;
    w->parked_tail = ctx;
}

/* The context parks: listed at the tail the first time. */
static inline void parked_enter(struct worker *w, struct conn_ctx *ctx)
{
    ctx->parked = true;
    if (!ctx->park_listed)
        parked_append(w, ctx);
}

/* The context resumes: marked as used, left where it is. */
static inline void parked_leave(struct conn_ctx *ctx)
{
    ctx->parked = false;
    ctx->park_used = true;
}

/* The parked context to take back, unlinked, or NULL when none is parked. */
static inline struct conn_ctx *parked_victim(struct worker *w)
{
    struct conn_ctx *ctx;
    while ((ctx = w->parked_head)) {
        parked_unlink(w, ctx);
        if (!ctx->parked)
            continue; /* running: it joins again when it parks */
        if (!ctx->park_used)
            return ctx;
        ctx->park_used = false; /* a second chance */
        parked_append(w, ctx);
    }
    return NULL;
}
