#include "test.h"

#include "rt/coro.h"

static void counter(struct coro *coro, void *arg)
{
    int *n = arg;
    for (int i = 0; i < 3; i++) {
        (*n)++;
        coro_yield(coro, i + 10);
    }
}

TEST(switch_and_yield)
{
    int n = 0;
    struct coro *c = coro_new(0, counter, &n);
    CHECK(c != NULL);
    CHECK_EQ_INT(coro_resume(c), 10);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(coro_resume(c), 11);
    CHECK_EQ_INT(coro_resume(c), 12);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(coro_resume(c), CORO_FINISHED);
    CHECK(c->done);
    /* resuming a finished coroutine is harmless */
    CHECK_EQ_INT(coro_resume(c), CORO_FINISHED);
    coro_free(c);
}

static int log_buf[16], log_n;
static void log_it(void *arg)
{
    if (log_n < 16)
        log_buf[log_n] = (int)(long)arg;
    log_n++;
}

static void with_defers(struct coro *coro, void *arg)
{
    coro_defer(coro, log_it, (void *)1L);
    coro_defer(coro, log_it, (void *)2L);
    coro_yield(coro, 0);
    if (arg)
        coro_abort(coro);
    coro_defer(coro, log_it, (void *)3L);
}

TEST(defers_run_newest_first_on_return)
{
    log_n = 0;
    struct coro *c = coro_new(0, with_defers, NULL);
    CHECK_EQ_INT(coro_resume(c), 0);
    CHECK_EQ_INT(log_n, 0);
    CHECK_EQ_INT(coro_resume(c), CORO_FINISHED);
    CHECK_EQ_INT(log_n, 3);
    CHECK_EQ_INT(log_buf[0], 3);
    CHECK_EQ_INT(log_buf[1], 2);
    CHECK_EQ_INT(log_buf[2], 1);
    coro_free(c);
}

TEST(abort_runs_defers_and_never_returns)
{
    log_n = 0;
    struct coro *c = coro_new(0, with_defers, (void *)1);
    CHECK_EQ_INT(coro_resume(c), 0);
    CHECK_EQ_INT(coro_resume(c), CORO_ABORTED);
    CHECK_EQ_INT(log_n, 2);
    CHECK_EQ_INT(log_buf[0], 2);
    CHECK_EQ_INT(log_buf[1], 1);
    CHECK(c->done);
    coro_free(c);
}

TEST(free_while_suspended_runs_defers)
{
    log_n = 0;
    struct coro *c = coro_new(0, with_defers, NULL);
    CHECK_EQ_INT(coro_resume(c), 0);
    coro_free(c);
    CHECK_EQ_INT(log_n, 2);
}

static void marks(struct coro *coro, void *arg)
{
    (void)arg;
    coro_defer(coro, log_it, (void *)1L);
    unsigned m = coro_defer_mark(coro);
    for (long i = 0; i < 20; i++) /* beyond the first allocation */
        coro_defer(coro, log_it, (void *)(100 + i));
    coro_defer_run_to(coro, m);
    coro_yield(coro, 5);
}

TEST(defer_marks)
{
    log_n = 0;
    struct coro *c = coro_new(0, marks, NULL);
    CHECK_EQ_INT(coro_resume(c), 5);
    CHECK_EQ_INT(log_n, 20);
    CHECK_EQ_INT(log_buf[0], 119);
    CHECK_EQ_INT(c->n_defers, 1);
    coro_free(c);
}

static void reuse_fn(struct coro *coro, void *arg)
{
    *(int *)arg += 1;
    coro_yield(coro, *(int *)arg);
}

TEST(reset_reuses_the_stack)
{
    int n = 0;
    struct coro *c = coro_new(0, reuse_fn, &n);
    char *stack = c->stack;
    for (int i = 1; i <= 1000; i++) {
        CHECK_EQ_INT(coro_resume(c), i);
        coro_reset(c, reuse_fn, &n);
    }
    CHECK(c->stack == stack);
    coro_free(c);
}

static double fp_fn_result;
static void fp_fn(struct coro *coro, void *arg)
{
    double x = *(double *)arg;
    coro_yield(coro, 0);
    fp_fn_result = x * 2.5;
}

TEST(floating_point_survives_switches)
{
    double in = 3.0;
    struct coro *c = coro_new(0, fp_fn, &in);
    double mine = 1.25;
    coro_resume(c);
    mine *= 2;
    coro_resume(c);
    CHECK(fp_fn_result == 7.5);
    CHECK(mine == 2.5);
    coro_free(c);
}

static void nested_inner(struct coro *coro, void *arg)
{
    (void)arg;
    coro_yield(coro, 1);
    coro_yield(coro, 2);
}

static void nested_outer(struct coro *coro, void *arg)
{
    struct coro *inner = arg;
    int v;
    while ((v = coro_resume(inner)) >= 0)
        coro_yield(coro, v * 10);
}

TEST(coroutine_resumes_another)
{
    struct coro *inner = coro_new(0, nested_inner, NULL);
    struct coro *outer = coro_new(0, nested_outer, inner);
    CHECK_EQ_INT(coro_resume(outer), 10);
    CHECK_EQ_INT(coro_resume(outer), 20);
    CHECK_EQ_INT(coro_resume(outer), CORO_FINISHED);
    coro_free(outer);
    coro_free(inner);
}

int main(void)
{
    RUN(switch_and_yield);
    RUN(defers_run_newest_first_on_return);
    RUN(abort_runs_defers_and_never_returns);
    RUN(free_while_suspended_runs_defers);
    RUN(defer_marks);
    RUN(reset_reuses_the_stack);
    RUN(floating_point_survives_switches);
    RUN(coroutine_resumes_another);
    return test_summary();
}
