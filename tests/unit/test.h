/* test.h - the smallest test harness that reports well.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ_INT(a, b); CHECK_EQ_STR(s, "x"); }
 *   int main(void) { RUN(name); return test_summary(); }
 *
 * A failed CHECK prints file:line and the expression and goes on; the
 * program's exit status is the number of failed checks (capped at 1).
 */
#pragma once

#include <stdio.h>
#include <string.h>

static int test_failures, test_checks;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        test_checks++;                                                                             \
        if (a_ != b_) {                                                                            \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
                    a_, b_);                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        test_checks++;                                                                             \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a,  \
                    #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_MEM(a, alen, b, blen)                                                             \
    do {                                                                                           \
        size_t al_ = (alen), bl_ = (blen);                                                         \
        test_checks++;                                                                             \
        if (al_ != bl_ || memcmp((a), (b), al_) != 0) {                                            \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%.*s\" != \"%.*s\"\n", __FILE__, __LINE__,  \
                    #a, #b, (int)al_, (const char *)(a), (int)bl_, (const char *)(b));             \
        }                                                                                          \
    } while (0)

#define RUN(name)                                                                                  \
    do {                                                                                           \
        int before_ = test_failures;                                                               \
        name();                                                                                    \
        fprintf(stderr, "%s %s\n", test_failures == before_ ? "ok  " : "FAIL", #name);             \
    } while (0)

static inline int test_summary(void)
{
    fprintf(stderr, "%d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}
