/* The word-at-a-time path tests of uri.h against byte loops: every string
 * of a few significant bytes up to a length, and random longer ones. Each
 * string is the last bytes of its own allocation, so a read past its end
 * is a sanitizer report. */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

#include "http/uri.h"

static bool ref_needs_decoding(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] == '%' || (p[i] == '/' && i + 1 < len && (p[i + 1] == '/' || p[i + 1] == '.')))
            return true;
    return false;
}

static bool ref_nul_or_backslash(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] == '\\' || p[i] == '\0')
            return true;
    return false;
}

static long wrong_decoding, wrong_nul, extra_decoding;

/* Both tests on s (len bytes), copied to the end of an allocation. */
static void check_one(const char *s, size_t len)
{
    char *p = malloc(len ? len : 1);
    if (!p)
        abort();
    memcpy(p, s, len);
    bool got = http_path_needs_decoding(p, len), want = ref_needs_decoding(p, len);
    /* 4 to 7 bytes may say yes where the loop says no (uri.h), never no
     * where it says yes */
    if (got != want && !(got && len >= 4 && len < 8))
        wrong_decoding++;
    if (got && !want)
        extra_decoding++;
    if (http_path_has_nul_or_backslash(p, len) != ref_nul_or_backslash(p, len))
        wrong_nul++;
    free(p);
}

/* Every string of `len` bytes over `alphabet` (n letters). */
static void all_strings(const char *alphabet, size_t n, size_t len)
{
    char s[16] = {0};
    size_t idx[16] = {0};
    for (;;) {
        for (size_t i = 0; i < len; i++)
            s[i] = alphabet[idx[i]];
        check_one(s, len);
        size_t i = 0;
        while (i < len && ++idx[i] == n)
            idx[i++] = 0;
        if (i == len)
            return;
    }
}

TEST(every_short_string)
{
    wrong_decoding = wrong_nul = 0;
    for (size_t len = 0; len <= 9; len++)
        all_strings("/.%a", 4, len);
    for (size_t len = 0; len <= 11; len++)
        all_strings("a\\", 2, len), all_strings((const char[]){'b', '\0', '/'}, 3, len);
    CHECK_EQ_INT(wrong_decoding, 0);
    CHECK_EQ_INT(wrong_nul, 0);
}

TEST(random_longer_strings)
{
    static const char letters[] = {'/',  '.',  '%',        'a',        'Z',
                                   '\\', '\0', (char)0xff, (char)0x80, '0'};
    unsigned seed = 12345;
    char s[64];
    wrong_decoding = wrong_nul = extra_decoding = 0;
    for (int round = 0; round < 200000; round++) {
        size_t len = (size_t)rand_r(&seed) % sizeof(s);
        /* mostly plain letters, so that a path without any of the bytes
         * looked for is common */
        for (size_t i = 0; i < len; i++)
            s[i] = rand_r(&seed) % 8 ? "abc-_~xy"[rand_r(&seed) % 8]
                                     : letters[(size_t)rand_r(&seed) % sizeof(letters)];
        check_one(s, len);
    }
    CHECK_EQ_INT(wrong_decoding, 0);
    CHECK_EQ_INT(wrong_nul, 0);
}

TEST(examples)
{
    CHECK(!http_path_needs_decoding("/hello", 6));
    CHECK(!http_path_needs_decoding("/static/app.min.js", 18));
    CHECK(http_path_needs_decoding("/static/../etc/pass", 19));
    CHECK(http_path_needs_decoding("/a//b", 5));
    CHECK(http_path_needs_decoding("/a/b/c/d/e/f/g/.x", 17));
    CHECK(http_path_needs_decoding("/%41", 4));
    CHECK(!http_path_has_nul_or_backslash("4k.bin", 6));
    CHECK(http_path_has_nul_or_backslash("a\\b", 3));
    CHECK(http_path_has_nul_or_backslash("abcdefgh\\", 9));
    CHECK(http_path_has_nul_or_backslash("abc\0defgh", 9));
}

static const char *query_escaped(const char *q)
{
    static char out[256];
    out[http_query_escape(out, q, strlen(q))] = '\0';
    return out;
}

TEST(query_escape)
{
    CHECK_EQ_STR(query_escaped("a=1&b=x+y"), "a=1&b=x+y");
    CHECK_EQ_STR(query_escaped("p=/a?b:c@d!$'()*,;=-._~"), "p=/a?b:c@d!$'()*,;=-._~");
    CHECK_EQ_STR(query_escaped("q=\"<>"), "q=%22%3C%3E");
    CHECK_EQ_STR(query_escaped("{}|\\^`[]# "), "%7B%7D%7C%5C%5E%60%5B%5D%23%20");
    CHECK_EQ_STR(query_escaped("%41%4a%zz%4%"), "%41%4a%25zz%254%25");
    CHECK_EQ_STR(query_escaped("\x7f\xc3\xa9"), "%7F%C3%A9");
    char *loc = http_location("/new", 4, "/a b", 4, false, "x=\"", 3);
    CHECK_EQ_STR(loc, "/new/a%20b?x=%22");
    free(loc);
}

int main(void)
{
    RUN(every_short_string);
    RUN(random_longer_strings);
    RUN(examples);
    RUN(query_escape);
    return test_summary();
}
