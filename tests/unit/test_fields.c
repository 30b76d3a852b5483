/* test_fields.c - the ';'-parameter reader of http/fields.c that media
 * types, Content-Disposition (multipart.c) and WebSocket extension offers
 * (ws_deflate.c) share: what it reads, what it refuses, and unquoting. */
#include "test.h"

#include "http/fields.h"

/* The parameters of s as "name=value|name|..." (values unquoted), or
 * "ERROR" when the reader refuses. */
static const char *params(const char *s, unsigned flags)
{
    static char out[512];
    const char *p = s, *end = s + strlen(s);
    size_t o = 0;
    struct http_param prm;
    int r;
    out[0] = '\0';
    while ((r = http_param_next(&p, end, flags, &prm)) > 0) {
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%.*s", o ? "|" : "", (int)prm.name.len,
                              prm.name.p);
        if (prm.has_value) {
            char v[128];
            ssize_t n = http_param_value(prm.value, v, sizeof(v));
            if (n < 0)
                return "TOO LONG";
            o += (size_t)snprintf(out + o, sizeof(out) - o, "=%s", v);
        }
    }
    return r < 0 ? "ERROR" : out;
}

TEST(strict_parameters)
{
    /* as in media types and Content-Disposition: name=value, no spaces around '=' */
    CHECK_EQ_STR(params("", 0), "");
    CHECK_EQ_STR(params("  ", 0), "");
    CHECK_EQ_STR(params("; a=1", 0), "a=1");
    CHECK_EQ_STR(params(";a=1;b=two", 0), "a=1|b=two");
    CHECK_EQ_STR(params(" ;\ta=1 ;; ; b=\"x y\" ;", 0), "a=1|b=x y");
    CHECK_EQ_STR(params("; q=\"a\\\"b\\\\c\"", 0), "q=a\"b\\c");
    CHECK_EQ_STR(params("; e=\"\"", 0), "e=");
    CHECK_EQ_STR(params("; s=\"a;b,c\"; t=1", 0), "s=a;b,c|t=1");
    CHECK_EQ_STR(params("; u=\"\xc3\xa9\"", 0), "u=\xc3\xa9"); /* obs-text */
    CHECK_EQ_STR(params("a=1", 0), "ERROR");                   /* no ';' first */
    CHECK_EQ_STR(params("; a", 0), "ERROR");                   /* no value */
    CHECK_EQ_STR(params("; a =1", 0), "ERROR");
    CHECK_EQ_STR(params("; a= 1", 0), "ERROR");
    CHECK_EQ_STR(params("; a=", 0), "ERROR");
    CHECK_EQ_STR(params("; =1", 0), "ERROR");
    CHECK_EQ_STR(params("; a=1 2", 0), "ERROR");
    CHECK_EQ_STR(params("; a=\"open", 0), "ERROR");
    CHECK_EQ_STR(params("; a=\"x\\", 0), "ERROR");
    CHECK_EQ_STR(params("; a=\"x\x01y\"", 0), "ERROR"); /* a control character */
    CHECK_EQ_STR(params("; a=\"x\"y", 0), "ERROR");
    CHECK_EQ_STR(params("; a@b=1", 0), "ERROR");
}

TEST(extension_parameters)
{
    unsigned f = HTTP_PARAM_BARE | HTTP_PARAM_BWS;
    CHECK_EQ_STR(params("; a; b=1; c = \"2\"", f), "a|b=1|c=2");
    CHECK_EQ_STR(params(";a;b", f), "a|b");
    CHECK_EQ_STR(params("; a b", f), "ERROR");
    CHECK_EQ_STR(params("; a =", f), "ERROR");
    CHECK_EQ_STR(params("; a=1", HTTP_PARAM_BARE), "a=1");
    CHECK_EQ_STR(params("; a = 1", HTTP_PARAM_BARE), "ERROR");
}

TEST(unquoting_limits)
{
    char v[4];
    CHECK_EQ_INT(http_param_value((struct view){"abc", 3}, v, sizeof(v)), 3);
    CHECK_EQ_INT(http_param_value((struct view){"abcd", 4}, v, sizeof(v)), -1);
    CHECK_EQ_INT(http_param_value((struct view){"\"a\\bc\"", 6}, v, sizeof(v)), 3);
    CHECK_EQ_STR(v, "abc");
    CHECK_EQ_INT(http_param_value((struct view){"\"abcd\"", 6}, v, sizeof(v)), -1);
}

int main(void)
{
    RUN(strict_parameters);
    RUN(extension_parameters);
    RUN(unquoting_limits);
    return test_summary();
}
