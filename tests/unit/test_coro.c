#include "test.h"

#include <fenv.h>

#include "base/coro.h"

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

/* Many values live across each switch: the compiler keeps them in the
 * callee-saved registers, which the context switch must preserve on both
 * sides. */
static void clobber(struct coro *coro, void *arg)
{
    unsigned long a = 1, b = 2, c = 3, d = 5, e = 7, f = 11, g = 13, h = 17;
    double x = 1.5, y = 2.5, z = 3.5, t = 4.5;
    for (int i = 0; i < 100; i++) {
        coro_yield(coro, 0);
        a = a * 3 + b;
        b = b * 5 + c;
        c = c * 7 + d;
        d = d * 11 + e;
        e = e * 13 + f;
        f = f * 17 + g;
        g = g * 19 + h;
        h = h * 23 + a;
        x = x * 1.0001 + y;
        y = y * 0.9999 + z;
        z = z * 1.0002 + t;
        t = t * 0.9998 + x;
    }
    *(unsigned long *)arg = a ^ b ^ c ^ d ^ e ^ f ^ g ^ h ^ (unsigned long)(x + y + z + t);
}

static unsigned long clobber_reference(void)
{
    unsigned long a = 1, b = 2, c = 3, d = 5, e = 7, f = 11, g = 13, h = 17;
    double x = 1.5, y = 2.5, z = 3.5, t = 4.5;
    for (int i = 0; i < 100; i++) {
        a = a * 3 + b;
        b = b * 5 + c;
        c = c * 7 + d;
        d = d * 11 + e;
        e = e * 13 + f;
        f = f * 17 + g;
        g = g * 19 + h;
        h = h * 23 + a;
        x = x * 1.0001 + y;
        y = y * 0.9999 + z;
        z = z * 1.0002 + t;
        t = t * 0.9998 + x;
    }
    return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h ^ (unsigned long)(x + y + z + t);
}

TEST(callee_saved_registers_survive)
{
    unsigned long got = 0, mine = 0;
    struct coro *c1 = coro_new(0, clobber, &got);
    unsigned long m1 = 101, m2 = 103, m3 = 107, m4 = 109, m5 = 113, m6 = 127;
    while (coro_resume(c1) != CORO_FINISHED) {
        m1 = m1 * 3 + m6;
        m2 = m2 * 5 + m1;
        m3 = m3 * 7 + m2;
        m4 = m4 * 11 + m3;
        m5 = m5 * 13 + m4;
        m6 = m6 * 17 + m5;
    }
    mine = m1 ^ m2 ^ m3 ^ m4 ^ m5 ^ m6;
    unsigned long r1 = 101, r2 = 103, r3 = 107, r4 = 109, r5 = 113, r6 = 127;
    for (int i = 0; i < 100; i++) { /* one per yield */
        r1 = r1 * 3 + r6;
        r2 = r2 * 5 + r1;
        r3 = r3 * 7 + r2;
        r4 = r4 * 11 + r3;
        r5 = r5 * 13 + r4;
        r6 = r6 * 17 + r5;
    }
    CHECK(got == clobber_reference());
    CHECK(mine == (r1 ^ r2 ^ r3 ^ r4 ^ r5 ^ r6));
    coro_free(c1);
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

/* The rounding mode is part of the callee-saved FP control state (MXCSR
 * and x87 control word on x86-64, FPCR on AArch64): each side of a switch
 * keeps its own. A volatile division shows the mode really in force. */
static double third(void)
{
    volatile double one = 1.0, three = 3.0;
    return one / three;
}

static void rounds_up(struct coro *coro, void *arg)
{
    int *seen = arg;
    seen[0] = fegetround();
    fesetround(FE_UPWARD);
    double up = third();
    coro_yield(coro, 1);
    seen[1] = fegetround();
    seen[2] = third() == up;
    fesetround(FE_TONEAREST);
}

TEST(rounding_mode_is_per_coroutine)
{
    int seen[3] = {-1, -1, -1};
    CHECK_EQ_INT(fesetround(FE_DOWNWARD), 0);
    double down = third();
    struct coro *c = coro_new(0, rounds_up, seen);
    CHECK(c != NULL);
    CHECK_EQ_INT(coro_resume(c), 1);
    /* the coroutine started with its creator's mode, and its change to
     * FE_UPWARD did not leak out */
    CHECK_EQ_INT(seen[0], FE_DOWNWARD);
    CHECK_EQ_INT(fegetround(), FE_DOWNWARD);
    CHECK(third() == down);
    CHECK_EQ_INT(coro_resume(c), CORO_FINISHED);
    CHECK_EQ_INT(seen[1], FE_UPWARD);
    CHECK_EQ_INT(seen[2], 1);
    CHECK_EQ_INT(fegetround(), FE_DOWNWARD);
    fesetround(FE_TONEAREST);
    coro_free(c);
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
    RUN(callee_saved_registers_survive);
    RUN(rounding_mode_is_per_coroutine);
    return test_summary();
}
