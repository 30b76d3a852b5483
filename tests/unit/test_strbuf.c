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

/* The inline paths of strbuf_append()/strbuf_reserve() (room already
 * there) against the grow paths and a plain model of the bytes: every
 * length from 0 to 40 at every fill level of small buffers, so both sides
 * of "exactly full" are taken. */
TEST(inline_paths_match_grow_paths)
{
    char src[64], model[4096];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (char)('a' + i % 26);
    for (size_t start_cap = 0; start_cap <= 40; start_cap += 8) {
        for (size_t len = 0; len <= 40; len++) {
            struct strbuf a = {0}, b = {0};
            size_t mlen = 0;
            if (start_cap) {
                CHECK_EQ_INT(strbuf_init(&a, start_cap), 0);
                CHECK_EQ_INT(strbuf_init(&b, start_cap), 0);
            }
            for (int round = 0; round < 12; round++) {
                size_t room = a.cap - a.len, cap0 = a.cap;
                const char *buf0 = a.buf;
                CHECK_EQ_INT(strbuf_append(&a, len ? src : NULL, len), 0);
                CHECK_EQ_INT(strbuf_append_grow(&b, len ? src : NULL, len), 0);
                memcpy(model + mlen, src, len);
                mlen += len;
                CHECK_EQ_INT(a.len, mlen);
                CHECK_EQ_INT(b.len, mlen);
                if (a.len) {
                    CHECK(memcmp(a.buf, model, mlen) == 0 && a.buf[a.len] == '\0');
                    CHECK(memcmp(b.buf, model, mlen) == 0 && b.buf[b.len] == '\0');
                }
                /* the inline path never reallocates when the room was there */
                if (len && len <= room)
                    CHECK(a.cap == cap0 && a.buf == buf0);
                CHECK_EQ_INT(a.cap, b.cap);
                /* a reservation leaves room for exactly what was asked */
                CHECK_EQ_INT(strbuf_reserve(&a, len), 0);
                CHECK_EQ_INT(strbuf_grow(&b, len), 0);
                CHECK(a.buf && a.cap - a.len >= len);
                CHECK_EQ_INT(a.cap, b.cap);
            }
            strbuf_free(&a);
            strbuf_free(&b);
        }
    }
    /* an empty buffer: reserving nothing still allocates, appending nothing does not */
    struct strbuf e = {0};
    CHECK_EQ_INT(strbuf_append(&e, NULL, 0), 0);
    CHECK(e.buf == NULL);
    CHECK_EQ_INT(strbuf_reserve(&e, 0), 0);
    CHECK(e.buf != NULL && e.buf[0] == '\0');
    strbuf_free(&e);
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
    RUN(inline_paths_match_grow_paths);
    RUN(formatting);
    RUN(itoa_matches_printf);
    return test_summary();
}
