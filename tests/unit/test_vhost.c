/* test_vhost.c - host names: the request's without its port, the config's
 * checked and made canonical, and the site table lookup. */
#include "test.h"

#include <string.h>

#include "http/vhost.h"

static struct view v(const char *s)
{
    return (struct view){.p = s, .len = strlen(s)};
}

#define CHECK_NAME(host, want)                                                                     \
    do {                                                                                           \
        struct view got_ = http_host_name(v(host));                                                \
        CHECK_EQ_MEM(got_.p, got_.len, want, strlen(want));                                        \
    } while (0)

TEST(host_name_drops_port_and_trailing_dot)
{
    CHECK_NAME("example.com", "example.com");
    CHECK_NAME("Example.COM:8080", "Example.COM");
    CHECK_NAME("example.com.", "example.com");
    CHECK_NAME("example.com.:80", "example.com");
    CHECK_NAME("example.com..", "example.com."); /* one dot only */
    CHECK_NAME("127.0.0.1:8080", "127.0.0.1");
    CHECK_NAME("[::1]:8080", "[::1]");
    CHECK_NAME("[::1]", "[::1]");
    CHECK_NAME("[2001:DB8::1]:443", "[2001:DB8::1]");
    CHECK_NAME("", "");
    CHECK_NAME(".", "");
}

static int canon(const char *name, char *out, size_t cap, const char **why)
{
    *why = NULL;
    return http_vhost_canon(name, out, cap, why);
}

#define CHECK_CANON(name, want)                                                                    \
    do {                                                                                           \
        char out_[256];                                                                            \
        const char *why_;                                                                          \
        CHECK_EQ_INT(canon(name, out_, sizeof(out_), &why_), (int)strlen(want));                   \
        CHECK_EQ_STR(out_, want);                                                                  \
    } while (0)

#define CHECK_BAD(name, word)                                                                      \
    do {                                                                                           \
        char out_[256];                                                                            \
        const char *why_;                                                                          \
        CHECK_EQ_INT(canon(name, out_, sizeof(out_), &why_), -1);                                  \
        CHECK(why_ &&strstr(why_, word));                                                          \
    } while (0)

TEST(config_names)
{
    CHECK_CANON("example.com", "example.com");
    CHECK_CANON("WWW.Example.COM", "www.example.com");
    CHECK_CANON("example.com.", "example.com");
    CHECK_CANON("localhost", "localhost");
    CHECK_CANON("a-b.c-d.e", "a-b.c-d.e");
    CHECK_CANON("127.0.0.1", "127.0.0.1");
    CHECK_CANON("[::1]", "[::1]");
    CHECK_CANON("[2001:DB8::1]", "[2001:db8::1]");

    CHECK_BAD("", "empty");
    CHECK_BAD(".", "empty");
    CHECK_BAD("exa_mple.com", "letters, digits");
    CHECK_BAD("example.com:8080", "port");
    CHECK_BAD("[::1]:8080", "port");
    CHECK_CANON("*.Example.com", "*.example.com");
    CHECK_CANON("*.a", "*.a");
    CHECK_BAD("*example.com", "wildcard");
    CHECK_BAD("a.*.example.com", "wildcard");
    CHECK_BAD("www.*", "wildcard");
    CHECK_BAD("*", "wildcard");
    CHECK_BAD("*.", "wildcard"); /* "*." less its trailing dot is "*" */
    CHECK_BAD("*..a", "empty label");
    CHECK_BAD("a..b", "empty label");
    CHECK_BAD(".a", "empty label");
    CHECK_BAD("[::1", "IPv6");
    CHECK_BAD("[]", "IPv6");
    CHECK_BAD("[1.2.3.4]", "IPv6");
    CHECK_BAD("exa%6dple.com", "letters, digits");
    char long_name[300];
    memset(long_name, 'a', 254);
    long_name[254] = '\0';
    CHECK_BAD(long_name, "253");
    long_name[253] = '\0';
    char out[256];
    const char *why;
    CHECK_EQ_INT(canon(long_name, out, sizeof(out), &why), 253);
    CHECK_EQ_INT(canon(long_name, out, 100, &why), -1); /* out too small */
}

TEST(wildcard_matches_one_label_or_more_and_exact_names_win)
{
    static const struct trie *const w = (const struct trie *)"w",
                                    *const e = (const struct trie *)"e",
                                    *const d = (const struct trie *)"d";
    const struct http_vhost sites[] = {
        {.name = "*.example.com", .len = 13, .routes = w},
        {.name = "www.example.com", .len = 15, .routes = e},
        {.name = "*.deep.example.com", .len = 18, .routes = d},
    };
    unsigned n = sizeof(sites) / sizeof(sites[0]);
    const struct http_vhost *f;
#define ROUTES(host) ((f = http_vhost_find(sites, n, v(host))) ? f->routes : NULL)
    CHECK(ROUTES("a.example.com") == w);
    CHECK(ROUTES("A.B.Example.COM:8443") == w);
    CHECK(ROUTES("www.example.com") == e);    /* exact beats the wildcard */
    CHECK(ROUTES("x.deep.example.com") == d); /* the longer wildcard */
    CHECK(ROUTES("deep.example.com") == w);   /* "*.deep" needs a label more */
    CHECK(ROUTES("example.com") == NULL);     /* not the suffix alone */
    CHECK(ROUTES(".example.com") == NULL);    /* no empty label */
    CHECK(ROUTES("aexample.com") == NULL);
    CHECK(ROUTES("a.example.com.evil") == NULL);
#undef ROUTES
    CHECK_EQ_INT((int)host_name_match("*.a.b", 5, "x.a.b", 5), 4);
    CHECK(host_name_match("a.b", 3, "A.B", 3) == SIZE_MAX);
    CHECK(host_name_match("a.b", 3, "a.c", 3) == 0);
}

static const struct trie *routes_of(const struct http_vhost *v)
{
    return v ? v->routes : NULL;
}

TEST(find_is_case_insensitive_and_ignores_port)
{
    static const struct trie *const a = (const struct trie *)"a", *const b =
                                                                      (const struct trie *)"b";
    const struct http_vhost sites[] = {
        {.name = "example.com", .len = 11, .routes = a},
        {.name = "www.example.com", .len = 15, .routes = a},
        {.name = "[::1]", .len = 5, .routes = b},
        {.name = "example.co", .len = 10, .routes = b},
    };
    unsigned n = sizeof(sites) / sizeof(sites[0]);
#define http_vhost_find(s, n, h) routes_of(http_vhost_find(s, n, h))
    CHECK(http_vhost_find(sites, n, v("example.com")) == a);
    CHECK(http_vhost_find(sites, n, v("EXAMPLE.com:8080")) == a);
    CHECK(http_vhost_find(sites, n, v("example.com.")) == a);
    CHECK(http_vhost_find(sites, n, v("Www.Example.Com.:1")) == a);
    CHECK(http_vhost_find(sites, n, v("example.co")) == b);
    CHECK(http_vhost_find(sites, n, v("[::1]:8080")) == b);
    CHECK(http_vhost_find(sites, n, v("example.comm")) == NULL);
    CHECK(http_vhost_find(sites, n, v("xample.com")) == NULL);
    CHECK(http_vhost_find(sites, n, v("")) == NULL);
    CHECK(http_vhost_find(sites, n, v("example.com..")) == NULL);
    CHECK(http_vhost_find(sites, 0, v("example.com")) == NULL);
#undef http_vhost_find
}

int main(void)
{
    RUN(host_name_drops_port_and_trailing_dot);
    RUN(config_names);
    RUN(find_is_case_insensitive_and_ignores_port);
    RUN(wildcard_matches_one_label_or_more_and_exact_names_win);
    return test_summary();
}
