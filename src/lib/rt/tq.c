#include "rt/tq.h"

void tq_init(struct tq *q, struct conn *conns, uint16_t flag, uint32_t timeout)
{
    *q = (struct tq){
        .conns = conns, .head = TQ_NIL, .tail = TQ_NIL, .flag = flag, .timeout = timeout};
}

void tq_remove(struct tq *q, uint32_t fd)
{
    struct conn *c = &q->conns[fd];
    if (!(c->flags & q->flag))
        return;
    if (c->prev != TQ_NIL)
        q->conns[c->prev].next = c->next;
    else
        q->head = c->next;
    if (c->next != TQ_NIL)
        q->conns[c->next].prev = c->prev;
    else
        q->tail = c->prev;
    c->prev = c->next = TQ_NIL;
    c->flags &= (uint16_t)~q->flag;
    q->count--;
}

void tq_push(struct tq *q, uint32_t fd, uint32_t now)
{
    struct conn *c = &q->conns[fd];
    tq_remove(q, fd);
    c->deadline = now + q->timeout;
    c->prev = q->tail;
    c->next = TQ_NIL;
    if (q->tail != TQ_NIL)
        q->conns[q->tail].next = fd;
    else
        q->head = fd;
    q->tail = fd;
    c->flags |= q->flag;
    q->count++;
}
