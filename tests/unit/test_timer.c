/* test_timer.c - the worker's timer heap: ordering, cancelling anywhere,
 * many timers against a reference. */
#include "test.h"

#include <stdlib.h>

#include "rt/timer.h"

/* Pops everything in order; checks the heap's slots along the way. */
static unsigned drain(struct timer_heap *h, uint64_t *out)
{
    unsigned n = 0;
    struct timer *t;
    while ((t = timer_first(h))) {
        for (uint32_t i = 0; i < h->n; i++)
            CHECK_EQ_INT(h->v[i]->idx, i);
        out[n++] = t->deadline;
        timer_del(h, t);
        CHECK(!timer_armed(t));
    }
    return n;
}

TEST(ordering)
{
    struct timer_heap h = {0};
    struct timer t[6];
    uint64_t d[6] = {50, 10, 30, TIMER_NEVER, 10, 20}, out[6];
    for (int i = 0; i < 6; i++) {
        timer_init(&t[i]);
        CHECK(!timer_armed(&t[i]));
        CHECK_EQ_INT(timer_add(&h, &t[i], d[i]), 0);
        CHECK(timer_armed(&t[i]));
    }
    CHECK_EQ_INT(timer_first(&h)->deadline, 10);
    CHECK_EQ_INT(drain(&h, out), 6);
    uint64_t want[6] = {10, 10, 20, 30, 50, TIMER_NEVER};
    for (int i = 0; i < 6; i++)
        CHECK(out[i] == want[i]);
    CHECK(timer_first(&h) == NULL);
    timer_heap_free(&h);
}

TEST(cancel)
{
    struct timer_heap h = {0};
    struct timer t[5];
    for (int i = 0; i < 5; i++) {
        timer_init(&t[i]);
        timer_add(&h, &t[i], (uint64_t)(100 - i * 10)); /* 100 90 80 70 60 */
    }
    timer_del(&h, &t[4]); /* the first */
    timer_del(&h, &t[1]); /* one in the middle */
    timer_del(&h, &t[1]); /* twice: nothing */
    timer_del(&h, &t[0]); /* the last */
    uint64_t out[5];
    CHECK_EQ_INT(drain(&h, out), 2);
    CHECK(out[0] == 70 && out[1] == 80);
    /* re-armed after a cancel */
    timer_add(&h, &t[1], 5);
    CHECK(timer_first(&h) == &t[1]);
    timer_heap_free(&h);
}

TEST(many_timers_against_a_reference)
{
    enum { N = 20000 };
    struct timer_heap h = {0};
    struct timer *t = calloc(N, sizeof(*t));
    bool *live = calloc(N, sizeof(bool));
    srand(7);
    for (int i = 0; i < N; i++) {
        timer_init(&t[i]);
        CHECK_EQ_INT(timer_add(&h, &t[i], (uint64_t)(rand() % 5000)), 0);
        live[i] = true;
    }
    /* cancel a third at random, re-arm some of those */
    for (int i = 0; i < N / 3; i++) {
        int k = rand() % N;
        timer_del(&h, &t[k]);
        live[k] = false;
        if (k % 2) {
            timer_add(&h, &t[k], (uint64_t)(rand() % 5000));
            live[k] = true;
        }
    }
    unsigned want = 0;
    for (int i = 0; i < N; i++)
        want += live[i];
    CHECK_EQ_INT(h.n, want);
    uint64_t prev = 0;
    unsigned n = 0;
    struct timer *f;
    while ((f = timer_first(&h))) {
        CHECK(f->deadline >= prev);
        prev = f->deadline;
        /* the first is never later than any child */
        if (h.n > 1)
            CHECK(h.v[1]->deadline >= f->deadline);
        timer_del(&h, f);
        n++;
    }
    CHECK_EQ_INT(n, want);
    free(t);
    free(live);
    timer_heap_free(&h);
}

int main(void)
{
    RUN(ordering);
    RUN(cancel);
    RUN(many_timers_against_a_reference);
    return test_summary();
}
