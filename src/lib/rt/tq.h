/* tq.h - timeout queue ("death queue"): connections ordered by deadline.
 *
 * Intrusive and doubly linked through the connection table by fd (ints, not
 * pointers), so it costs no allocation and every operation is O(1). Every
 * connection in one queue has the same timeout, so appending at the tail
 * with now + timeout keeps the queue sorted and the expired ones are always
 * at the head. One queue per timeout kind per worker thread; only that
 * thread touches it.
 */
#pragma once

#include <stdint.h>

#include "rt/conn.h"

#define TQ_NIL UINT32_MAX

struct tq {
    struct conn *conns;
    uint32_t head, tail;
    uint32_t count;
    uint16_t flag;    /* the conn flag that marks membership */
    uint32_t timeout; /* seconds */
};

void tq_init(struct tq *q, struct conn *conns, uint16_t flag, uint32_t timeout);
/* Appends fd with deadline now + timeout (removing it from q first). */
void tq_push(struct tq *q, uint32_t fd, uint32_t now);
void tq_remove(struct tq *q, uint32_t fd);
/* The fd at the head if its deadline has passed, else TQ_NIL. The clock
 * ticks in whole seconds, so "passed" means strictly before now: a
 * connection never times out early. */
static inline uint32_t tq_expired(const struct tq *q, uint32_t now)
{
    if (q->head == TQ_NIL || q->conns[q->head].deadline >= now)
        return TQ_NIL;
    return q->head;
}
