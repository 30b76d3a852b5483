#include "test.h"

#include "rt/tq.h"

static struct conn conns[64];

static uint32_t drain(struct tq *q, uint32_t now, uint32_t *out)
{
    uint32_t n = 0, fd;
    while ((fd = tq_expired(q, now)) != TQ_NIL) {
        tq_remove(q, fd);
        out[n++] = fd;
    }
    return n;
}

TEST(fifo_order_and_expiry)
{
    struct tq q;
    uint32_t out[64];
    tq_init(&q, conns, CONN_IN_IDLE_Q, 10);
    tq_push(&q, 5, 100);
    tq_push(&q, 7, 101);
    tq_push(&q, 3, 102);
    CHECK_EQ_INT(q.count, 3);
    CHECK_EQ_INT(drain(&q, 110, out), 0);
    CHECK_EQ_INT(drain(&q, 112, out), 2);
    CHECK_EQ_INT(out[0], 5);
    CHECK_EQ_INT(out[1], 7);
    CHECK_EQ_INT(q.count, 1);
    CHECK_EQ_INT(drain(&q, 1000, out), 1);
    CHECK_EQ_INT(out[0], 3);
    CHECK(q.head == TQ_NIL && q.tail == TQ_NIL);
}

TEST(push_moves_to_tail_with_new_deadline)
{
    struct tq q;
    uint32_t out[64];
    tq_init(&q, conns, CONN_IN_IDLE_Q, 10);
    tq_push(&q, 1, 0);
    tq_push(&q, 2, 0);
    tq_push(&q, 3, 0);
    tq_push(&q, 1, 5); /* resumed: now last, deadline 15 */
    CHECK_EQ_INT(q.count, 3);
    CHECK_EQ_INT(drain(&q, 11, out), 2);
    CHECK_EQ_INT(out[0], 2);
    CHECK_EQ_INT(out[1], 3);
    CHECK_EQ_INT(drain(&q, 15, out), 0);
    CHECK_EQ_INT(drain(&q, 16, out), 1);
    CHECK_EQ_INT(out[0], 1);
}

TEST(remove_from_middle_and_ends)
{
    struct tq q;
    uint32_t out[64];
    tq_init(&q, conns, CONN_IN_REQ_Q, 1);
    for (uint32_t fd = 10; fd < 20; fd++)
        tq_push(&q, fd, 0);
    tq_remove(&q, 10);
    tq_remove(&q, 15);
    tq_remove(&q, 19);
    tq_remove(&q, 19); /* not a member any more: no-op */
    CHECK_EQ_INT(q.count, 7);
    CHECK(!(conns[15].flags & CONN_IN_REQ_Q));
    CHECK_EQ_INT(drain(&q, 1, out), 0);
    CHECK_EQ_INT(drain(&q, 2, out), 7);
    uint32_t want[] = {11, 12, 13, 14, 16, 17, 18};
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(out[i], want[i]);
}

TEST(two_queues_share_the_table)
{
    struct tq idle, req;
    uint32_t out[64];
    tq_init(&idle, conns, CONN_IN_IDLE_Q, 15);
    tq_init(&req, conns, CONN_IN_REQ_Q, 5);
    tq_push(&idle, 30, 0);
    tq_push(&req, 31, 0);
    tq_push(&idle, 32, 0);
    tq_remove(&idle, 32);
    tq_push(&req, 32, 1);
    CHECK_EQ_INT(drain(&req, 7, out), 2);
    CHECK_EQ_INT(out[0], 31);
    CHECK_EQ_INT(out[1], 32);
    CHECK_EQ_INT(drain(&idle, 15, out), 0);
    CHECK_EQ_INT(drain(&idle, 16, out), 1);
}

int main(void)
{
    for (size_t i = 0; i < N_ELEMENTS(conns); i++)
        conns[i] = (struct conn){.prev = TQ_NIL, .next = TQ_NIL};
    RUN(fifo_order_and_expiry);
    RUN(push_moves_to_tail_with_new_deadline);
    RUN(remove_from_middle_and_ends);
    RUN(two_queues_share_the_table);
    return test_summary();
}
