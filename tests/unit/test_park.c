/* test_park.c - the list of parked contexts (rt/park.h): which context
 * is taken back when the pool is empty, by the second-chance rule. */
#include "test.h"

#include "rt/park.h"

static struct worker w;
static struct conn_ctx ctxs[6];

static void reset(void)
{
    w = (struct worker){0};
    for (size_t i = 0; i < N_ELEMENTS(ctxs); i++)
        ctxs[i] = (struct conn_ctx){.fd = (int)i};
}

/* the list's contexts, head to tail, as their fds; checks both links */
static int listed(int *out)
{
    int n = 0;
    const struct conn_ctx *prev = NULL;
    for (const struct conn_ctx *c = w.parked_head; c; prev = c, c = c->park_next) {
        CHECK(c->park_prev == prev);
        CHECK(c->park_listed);
        out[n++] = c->fd;
    }
    CHECK(w.parked_tail == prev);
    return n;
}

TEST(untouched_contexts_go_oldest_first)
{
    reset();
    for (int i = 0; i < 4; i++)
        parked_enter(&w, &ctxs[i]);
    for (int i = 0; i < 4; i++)
        CHECK(parked_victim(&w) == &ctxs[i]);
    CHECK(parked_victim(&w) == NULL);
    CHECK(w.parked_head == NULL && w.parked_tail == NULL);
}

TEST(a_used_context_gets_a_second_chance)
{
    reset();
    for (int i = 0; i < 3; i++)
        parked_enter(&w, &ctxs[i]);
    /* 0 serves a request and parks again: it stays in place, marked */
    parked_leave(&ctxs[0]);
    parked_enter(&w, &ctxs[0]);
    int order[8];
    CHECK_EQ_INT(listed(order), 3);
    CHECK_EQ_INT(order[0], 0);
    /* the walk passes over 0 (moving it to the tail), takes 1 */
    CHECK(parked_victim(&w) == &ctxs[1]);
    CHECK_EQ_INT(listed(order), 2);
    CHECK_EQ_INT(order[0], 2);
    CHECK_EQ_INT(order[1], 0);
    CHECK(!ctxs[0].park_used);
    CHECK(parked_victim(&w) == &ctxs[2]);
    CHECK(parked_victim(&w) == &ctxs[0]);
    CHECK(parked_victim(&w) == NULL);
}

TEST(running_contexts_leave_the_list_and_rejoin_at_the_tail)
{
    reset();
    for (int i = 0; i < 3; i++)
        parked_enter(&w, &ctxs[i]);
    parked_leave(&ctxs[0]); /* running now */
    parked_leave(&ctxs[1]);
    CHECK(parked_victim(&w) == &ctxs[2]);
    int order[8];
    CHECK_EQ_INT(listed(order), 0); /* the running ones were dropped */
    CHECK(!ctxs[0].park_listed && !ctxs[1].park_listed);
    /* they park again: listed anew, in the order they parked */
    parked_enter(&w, &ctxs[1]);
    parked_enter(&w, &ctxs[0]);
    CHECK_EQ_INT(listed(order), 2);
    CHECK_EQ_INT(order[0], 1);
    CHECK_EQ_INT(order[1], 0);
    /* both still carry the mark of their last request: one pass clears it */
    CHECK(parked_victim(&w) == &ctxs[1]);
    CHECK(parked_victim(&w) == &ctxs[0]);
}

TEST(all_running_gives_none)
{
    reset();
    for (int i = 0; i < 4; i++)
        parked_enter(&w, &ctxs[i]);
    for (int i = 0; i < 4; i++)
        parked_leave(&ctxs[i]);
    CHECK(parked_victim(&w) == NULL);
    CHECK(w.parked_head == NULL && w.parked_tail == NULL);
}

TEST(unlink_from_the_middle)
{
    reset();
    for (int i = 0; i < 5; i++)
        parked_enter(&w, &ctxs[i]);
    parked_unlink(&w, &ctxs[2]); /* what ctx_put() does for a closed one */
    parked_unlink(&w, &ctxs[4]);
    parked_unlink(&w, &ctxs[0]);
    int order[8];
    CHECK_EQ_INT(listed(order), 2);
    CHECK_EQ_INT(order[0], 1);
    CHECK_EQ_INT(order[1], 3);
}

int main(void)
{
    RUN(untouched_contexts_go_oldest_first);
    RUN(a_used_context_gets_a_second_chance);
    RUN(running_contexts_leave_the_list_and_rejoin_at_the_tail);
    RUN(all_running_gives_none);
    RUN(unlink_from_the_middle);
    return test_summary();
}
