#include "test.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>

#include "base/itoa.h"
#include "base/strbuf.h"

TEST(append_grows_and_terminates)
{
    struct strbuf sb = {0};
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_INT(strbuf_append(&sb, "abc", 3), 0);
    CHECK_EQ_INT(sb.len, 3000);
    CHECK(sb.cap >= 3000);
    CHECK_EQ_INT(sb.buf[3000], 0);
    CHECK(memcmp(sb.buf + 2997, "abc", 3) == 0);
    strbuf_reset(&sb);
    CHECK_EQ_INT(sb.len, 0);
    CHECK_EQ_STR(sb.buf, "");
    strbuf_free(&sb);
}

TEST(formatting)
{
    struct strbuf sb;
    CHECK_EQ_INT(strbuf_init(&sb, 4), 0);
    strbuf_append_str(&sb, "n=");
    strbuf_append_u64(&sb, 1234567890123ULL);
    strbuf_append_char(&sb, ' ');
    strbuf_append_i64(&sb, INT64_MIN);
    strbuf_printf(&sb, " %s-%d", "x", 42);
    CHECK_EQ_STR(sb.buf, "n=1234567890123 -9223372036854775808 x-42");
    char *s = strbuf_steal(&sb);
    CHECK_EQ_STR(s, "n=1234567890123 -9223372036854775808 x-42");
    CHECK(sb.buf == NULL);
    free(s);
}

TEST(itoa_matches_printf)
{
    char mine[24], ref[24];
    uint64_t v = 0;
    /* every power-of-ten boundary, and a sweep of small values */
    for (int i = 0; i < 20; i++) {
        uint64_t p = 1;
        for (int j = 0; j < i; j++)
            p *= 10;
        uint64_t vals[] = {p - 1, p, p + 1};
        for (int k = 0; k < 3; k++) {
            size_t n = u64_to_str(vals[k], mine);
            snprintf(ref, sizeof(ref), "%" PRIu64, vals[k]);
            CHECK_EQ_MEM(mine, n, ref, strlen(ref));
        }
    }
    for (v = 0; v < 100000; v += 7) {
        size_t n = u64_to_str(v, mine);
        snprintf(ref, sizeof(ref), "%" PRIu64, v);
        if (n != strlen(ref) || memcmp(mine, ref, n) != 0) {
            CHECK_EQ_MEM(mine, n, ref, strlen(ref));
            break;
        }
    }
    size_t n = u64_to_str(UINT64_MAX, mine);
    CHECK_EQ_MEM(mine, n, "18446744073709551615", 20);
    n = i64_to_str(-5, mine);
    CHECK_EQ_MEM(mine, n, "-5", 2);
    CHECK_EQ_INT(u64_digits(0), 1);
    CHECK_EQ_INT(u64_digits(99999), 5);
}

int main(void)
{
    RUN(append_grows_and_terminates);
    RUN(formatting);
    RUN(itoa_matches_printf);
    return test_summary();
}
