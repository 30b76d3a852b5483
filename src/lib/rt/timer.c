#include "rt/timer.h"

#include <errno.h>
#include <stdlib.h>

static void place(struct timer_heap *h, uint32_t i, struct timer *t)
{
    h->v[i] = t;
    t->idx = i;
}

static void sift_up(struct timer_heap *h, uint32_t i, struct timer *t)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (h->v[parent]->deadline <= t->deadline)
            break;
        place(h, i, h->v[parent]);
        i = parent;
    }
    place(h, i, t);
}

static void sift_down(struct timer_heap *h, uint32_t i, struct timer *t)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1]->deadline < h->v[c]->deadline)
            c++;
        if (t->deadline <= h->v[c]->deadline)
            break;
        place(h, i, h->v[c]);
        i = c;
    }
    place(h, i, t);
}

int timer_add(struct timer_heap *h, struct timer *t, uint64_t deadline)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 64;
        struct timer **v = realloc(h->v, (size_t)cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    t->deadline = deadline;
    sift_up(h, h->n++, t);
    return 0;
}

void timer_del(struct timer_heap *h, struct timer *t)
{
    uint32_t i = t->idx;
    if (i == TIMER_NONE)
        return;
    t->idx = TIMER_NONE;
    struct timer *last = h->v[--h->n];
    if (i == h->n)
        return;
    /* the last entry fills the hole, then moves whichever way it must */
    if (i > 0 && last->deadline < h->v[(i - 1) / 2]->deadline)
        sift_up(h, i, last);
    else
        sift_down(h, i, last);
}

void timer_heap_free(struct timer_heap *h)
{
    free(h->v);
    *h = (struct timer_heap){0};
}
