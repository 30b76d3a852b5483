/* timer.h - a binary min-heap of millisecond deadlines (the worker's timers).
 *
 * A struct timer is embedded in whatever waits (a connection's active
 * context) and remembers its slot in the heap, so cancelling is O(log n)
 * with no search; the heap holds pointers and grows by doubling. The
 * timeout queues (tq.h) stay for the fixed per-kind timeouts in seconds:
 * timers are for deadlines each waiter chooses. One heap per worker
 * thread; only that thread touches it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMER_NONE  UINT32_MAX /* not in a heap */
#define TIMER_NEVER UINT64_MAX /* a deadline that never comes (still in the heap) */

struct timer {
    uint64_t deadline; /* milliseconds, CLOCK_MONOTONIC(_COARSE) */
    uint32_t idx;      /* slot in the heap, or TIMER_NONE */
};

struct timer_heap {
    struct timer **v;
    uint32_t n, cap;
};

static inline void timer_init(struct timer *t)
{
    t->idx = TIMER_NONE;
}
static inline bool timer_armed(const struct timer *t)
{
    return t->idx != TIMER_NONE;
}
/* Arms t (which must not be armed) for deadline. 0 or -ENOMEM. */
int timer_add(struct timer_heap *h, struct timer *t, uint64_t deadline);
/* Disarms t; nothing if it is not armed. */
void timer_del(struct timer_heap *h, struct timer *t);
/* The earliest timer, or NULL. */
static inline struct timer *timer_first(const struct timer_heap *h)
{
    return h->n ? h->v[0] : NULL;
}
void timer_heap_free(struct timer_heap *h);
