#include "test.h"

#include <stdbool.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/load.h"
#include "route/trie.h"

static int add(struct trie *t, const char *s, void *v)
{
    return trie_add(t, s, strlen(s), v);
}

static void *look(const struct trie *t, const char *s, size_t *matched)
{
    return trie_lookup(t, s, strlen(s), matched);
}

static int va, vb, vc, vd, ve;

TEST(longest_prefix_wins)
{
    struct trie *t = trie_new();
    CHECK(t != NULL);
    /* added out of order, so edges get split and children reordered */
    CHECK_EQ_INT(add(t, "/abc/", &vd), 0);
    CHECK_EQ_INT(add(t, "/a", &vb), 0);
    CHECK_EQ_INT(add(t, "/", &va), 0);
    CHECK_EQ_INT(add(t, "/ab", &vc), 0);

    size_t m = 99;
    CHECK(look(t, "/", &m) == &va);
    CHECK_EQ_INT(m, 1);
    CHECK(look(t, "/x/y", &m) == &va);
    CHECK_EQ_INT(m, 1);
    CHECK(look(t, "/a", &m) == &vb);
    CHECK_EQ_INT(m, 2);
    CHECK(look(t, "/aX", &m) == &vb);
    CHECK_EQ_INT(m, 2);
    CHECK(look(t, "/ab", &m) == &vc);
    CHECK_EQ_INT(m, 3);
    CHECK(look(t, "/abc", &m) == &vc); /* "/abc/" needs the slash */
    CHECK_EQ_INT(m, 3);
    CHECK(look(t, "/abd", &m) == &vc);
    CHECK_EQ_INT(m, 3);
    CHECK(look(t, "/abc/", &m) == &vd);
    CHECK_EQ_INT(m, 5);
    CHECK(look(t, "/abc/index.html", &m) == &vd);
    CHECK_EQ_INT(m, 5);
    /* matched may be NULL */
    CHECK(look(t, "/abc/z", NULL) == &vd);
    /* only len bytes of the path count */
    CHECK(trie_lookup(t, "/abc/", 4, &m) == &vc);
    CHECK_EQ_INT(m, 3);
    trie_free(t);
}

TEST(no_match_is_null)
{
    struct trie *t = trie_new();
    size_t m = 77;
    CHECK(look(t, "/anything", &m) == NULL);
    CHECK_EQ_INT(m, 77); /* untouched when nothing matched */
    CHECK(look(t, "", &m) == NULL);

    CHECK_EQ_INT(add(t, "/hello", &va), 0);
    CHECK(look(t, "/hell", &m) == NULL); /* a path shorter than the only prefix */
    CHECK(look(t, "/help", &m) == NULL); /* diverges inside an edge */
    CHECK(look(t, "hello", &m) == NULL);
    CHECK(look(t, "", &m) == NULL);
    CHECK(look(t, "/hello", &m) == &va);
    CHECK(look(t, "/hellox", &m) == &va); /* literal bytes, like nginx */
    CHECK_EQ_INT(m, 6);
    trie_free(t);
}

static void *seg(struct trie *t, const char *s, size_t *matched)
{
    return trie_lookup_segments(t, s, strlen(s), matched);
}

TEST(segments)
{
    struct trie *t = trie_new();
    size_t m = 0;
    CHECK_EQ_INT(add(t, "/hello", &va), 0);
    CHECK_EQ_INT(add(t, "/static/", &vb), 0);
    CHECK_EQ_INT(add(t, "/", &vc), 0);
    CHECK(seg(t, "/hello", &m) == &va);
    CHECK_EQ_INT(m, 6);
    CHECK(seg(t, "/hello/", &m) == &va);
    CHECK(seg(t, "/hello/x/y", &m) == &va);
    CHECK(seg(t, "/hellothere", &m) == &vc); /* not /hello: falls back to / */
    CHECK_EQ_INT(m, 1);
    CHECK(seg(t, "/hell", &m) == &vc);
    CHECK(seg(t, "/static/a.css", &m) == &vb);
    CHECK(seg(t, "/static/", &m) == &vb);
    CHECK(seg(t, "/static", &m) == &vc); /* the slash is part of that prefix */
    CHECK(seg(t, "/staticx", &m) == &vc);
    CHECK(look(t, "/hellothere", &m) == &va); /* the literal lookup is unchanged */
    CHECK_EQ_INT(trie_remove(t, "/", 1, NULL), 0);
    CHECK(seg(t, "/hellothere", &m) == NULL);
    CHECK(seg(t, "/hello", &m) == &va);
    CHECK_EQ_INT(trie_remove(t, "/", 1, NULL), -ENOENT);
    CHECK_EQ_INT(trie_remove(t, "/hel", 4, NULL), -ENOENT);
    void *old = NULL;
    CHECK_EQ_INT(trie_remove(t, "/hello", 6, &old), 0);
    CHECK(old == &va);
    CHECK(seg(t, "/hello", &m) == NULL);
    CHECK_EQ_INT(add(t, "/hello", &vd), 0); /* a removed prefix can come back */
    CHECK(seg(t, "/hello/x", &m) == &vd);
    trie_free(t);
}

TEST(duplicate_is_eexist)
{
    struct trie *t = trie_new();
    CHECK_EQ_INT(add(t, "/a/b", &va), 0);
    CHECK_EQ_INT(add(t, "/a/b", &vb), -EEXIST);
    CHECK(look(t, "/a/b", NULL) == &va); /* the first one stays */
    /* an inner node created by a split is not a duplicate until it holds a value */
    CHECK_EQ_INT(add(t, "/a/c", &vc), 0);
    CHECK_EQ_INT(add(t, "/a/", &vd), 0);
    CHECK_EQ_INT(add(t, "/a/", &ve), -EEXIST);
    CHECK_EQ_INT(add(t, "", &va), 0);
    CHECK_EQ_INT(add(t, "", &vb), -EEXIST);
    CHECK(look(t, "/a/", NULL) == &vd);
    trie_free(t);
}

TEST(empty_prefix_matches_everything)
{
    struct trie *t = trie_new();
    CHECK_EQ_INT(add(t, "", &va), 0);
    CHECK_EQ_INT(add(t, "/api", &vb), 0);
    size_t m = 99;
    CHECK(look(t, "", &m) == &va);
    CHECK_EQ_INT(m, 0);
    CHECK(look(t, "/", &m) == &va);
    CHECK_EQ_INT(m, 0);
    CHECK(look(t, "zzz", &m) == &va);
    CHECK_EQ_INT(m, 0);
    CHECK(look(t, "/ap", &m) == &va);
    CHECK(look(t, "/api/v1", &m) == &vb);
    CHECK_EQ_INT(m, 4);
    trie_free(t);
}

TEST(null_value_is_a_value)
{
    struct trie *t = trie_new();
    CHECK_EQ_INT(add(t, "/x", NULL), 0);
    CHECK_EQ_INT(add(t, "/x", &va), -EEXIST);
    size_t m = 0;
    CHECK(look(t, "/xyz", &m) == NULL);
    CHECK_EQ_INT(m, 2);
    trie_free(t);
}

TEST(binary_safe)
{
    struct trie *t = trie_new();
    const char p1[] = {'/', '\0', 'a'};
    const char p2[] = {'/', '\0'};
    const char p3[] = {'/', (char)0xff, (char)0x80};
    const char p4[] = {'/', (char)0xff};
    CHECK_EQ_INT(trie_add(t, p1, sizeof(p1), &va), 0);
    CHECK_EQ_INT(trie_add(t, p2, sizeof(p2), &vb), 0);
    CHECK_EQ_INT(trie_add(t, p3, sizeof(p3), &vc), 0);
    CHECK_EQ_INT(trie_add(t, p4, sizeof(p4), &vd), 0);
    CHECK_EQ_INT(trie_add(t, p1, sizeof(p1), &ve), -EEXIST);

    size_t m = 0;
    const char q1[] = {'/', '\0', 'a', '\0', 'z'};
    CHECK(trie_lookup(t, q1, sizeof(q1), &m) == &va);
    CHECK_EQ_INT(m, 3);
    const char q2[] = {'/', '\0', 'b'};
    CHECK(trie_lookup(t, q2, sizeof(q2), &m) == &vb);
    CHECK_EQ_INT(m, 2);
    const char q3[] = {'/', (char)0xff, (char)0x80, (char)0xff};
    CHECK(trie_lookup(t, q3, sizeof(q3), &m) == &vc);
    CHECK_EQ_INT(m, 3);
    const char q4[] = {'/', (char)0xff, (char)0x7f};
    CHECK(trie_lookup(t, q4, sizeof(q4), &m) == &vd);
    CHECK_EQ_INT(m, 2);
    /* "/" itself was never added */
    CHECK(trie_lookup(t, "/", 1, &m) == NULL);
    CHECK(trie_lookup(t, "/a", 2, &m) == NULL);
    trie_free(t);
}

TEST(all_first_bytes)
{
    /* 256 children under one node: the child array's largest size */
    struct trie *t = trie_new();
    static char vals[256];
    for (int c = 0; c < 256; c++) {
        char p[2] = {'/', (char)c};
        CHECK_EQ_INT(trie_add(t, p, 2, &vals[c]), 0);
    }
    for (int c = 0; c < 256; c++) {
        char p[3] = {'/', (char)c, 'x'};
        size_t m = 0;
        CHECK(trie_lookup(t, p, 3, &m) == &vals[c]);
        CHECK_EQ_INT(m, 2);
    }
    trie_free(t);
}

/* A deterministic generator, so a failure reproduces. */
static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

#define NPREFIX   1000
#define MAXLEN    10
#define ENTRY_MAX 48 /* generated_route_sets' longer prefixes */

struct entry {
    char s[ENTRY_MAX];
    size_t len;
};

/* A small alphabet, including a NUL, so prefixes overlap and nest a lot. */
static void random_string(char *s, size_t *len, size_t maxlen)
{
    static const char alphabet[] = {'/', 'a', 'b', 'c', '\0', (char)0xfe};
    *len = rnd() % (maxlen + 1);
    for (size_t i = 0; i < *len; i++)
        s[i] = alphabet[rnd() % sizeof(alphabet)];
}

static long brute_force_by(const struct entry *e, size_t n, const char *path, size_t len,
                           bool segments)
{
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        size_t l = e[i].len;
        if (l > len || memcmp(e[i].s, path, l) != 0)
            continue;
        bool boundary = l == len || path[l] == '/' || (l > 0 && e[i].s[l - 1] == '/');
        if ((!segments || boundary) && (best < 0 || l > e[best].len))
            best = (long)i;
    }
    return best;
}

static long brute_force(const struct entry *e, size_t n, const char *path, size_t len)
{
    return brute_force_by(e, n, path, len, false);
}

TEST(random_against_brute_force)
{
    static struct entry entries[NPREFIX];
    size_t n = 0;
    struct trie *t = trie_new();
    int dups = 0;

    for (int i = 0; i < NPREFIX; i++) {
        struct entry e;
        random_string(e.s, &e.len, MAXLEN);
        long same = -1;
        for (size_t j = 0; j < n; j++) {
            if (entries[j].len == e.len && memcmp(entries[j].s, e.s, e.len) == 0)
                same = (long)j;
        }
        int r = trie_add(t, e.s, e.len, &entries[n]);
        if (same >= 0) {
            CHECK_EQ_INT(r, -EEXIST);
            dups++;
        } else {
            CHECK_EQ_INT(r, 0);
            entries[n++] = e;
        }
    }
    CHECK(dups > 0); /* the alphabet is small enough to repeat */
    CHECK(n > 500);  /* and large enough not to repeat everything */

    int hits = 0;
    for (int i = 0; i < 20000; i++) {
        char path[MAXLEN + 4];
        size_t len;
        random_string(path, &len, sizeof(path));
        long want = brute_force(entries, n, path, len);
        size_t m = SIZE_MAX;
        void *got = trie_lookup(t, path, len, &m);
        if (want < 0) {
            CHECK(got == NULL);
            CHECK(m == SIZE_MAX);
        } else {
            hits++;
            CHECK(got == &entries[want]);
            CHECK_EQ_INT(m, entries[want].len);
        }
    }
    CHECK(hits > 1000);
    /* the same paths by whole segments */
    hits = 0;
    for (int i = 0; i < 20000; i++) {
        char path[MAXLEN + 4];
        size_t len;
        random_string(path, &len, sizeof(path));
        long want = brute_force_by(entries, n, path, len, true);
        size_t m = SIZE_MAX;
        void *got = trie_lookup_segments(t, path, len, &m);
        if (want < 0) {
            CHECK(got == NULL);
        } else {
            hits++;
            CHECK(got == &entries[want]);
            CHECK_EQ_INT(m, entries[want].len);
        }
    }
    CHECK(hits > 500);
    /* every registered prefix finds itself */
    for (size_t i = 0; i < n; i++) {
        size_t m = 0;
        CHECK(trie_lookup(t, entries[i].s, entries[i].len, &m) == &entries[i]);
        CHECK_EQ_INT(m, entries[i].len);
    }
    trie_free(t);
}

/* Route-like strings: most begin with a slash; segments of a few letters (some sharing beginnings,
 * some longer than a trie edge), slashes, now and then a NUL or a high
 * byte; up to maxlen bytes. */
static size_t route_string(char *s, size_t maxlen)
{
    static const char *const parts[] = {"/",
                                        "a",
                                        "ab",
                                        "abc",
                                        "hello",
                                        "hello.txt",
                                        "x.y",
                                        "4k.bin",
                                        "ab/",
                                        "static",
                                        "staticx",
                                        "v1",
                                        "a-very-long-segment-name",
                                        "\xfe",
                                        ""};
    size_t len = 0, target = rnd() % (maxlen + 1);
    if (target && rnd() % 4) /* mostly a path's leading slash */
        s[len++] = '/';
    while (len < target) {
        const char *part = parts[rnd() % N_ELEMENTS(parts)];
        size_t n = part[0] ? strlen(part) : 1; /* "": a NUL byte */
        if (len + n > maxlen)
            n = maxlen - len;
        memcpy(s + len, part, n);
        len += n;
    }
    return len;
}

/* Compares both lookups with the brute force on one path, held in a
 * buffer of exactly its length (so a read past it is caught under ASan).
 * Returns the number of disagreements; counts the matches in hits. */
static int compare_one(const struct trie *t, const struct entry *e, size_t n, const char *s,
                       size_t len, int hits[2])
{
    char *path = malloc(len ? len : 1);
    memcpy(path, s, len);
    int bad = 0;
    for (int segments = 0; segments < 2; segments++) {
        long want = brute_force_by(e, n, path, len, segments);
        size_t m = SIZE_MAX;
        void *got =
            segments ? trie_lookup_segments(t, path, len, &m) : trie_lookup(t, path, len, &m);
        bool ok = want < 0 ? got == NULL && m == SIZE_MAX : got == &e[want] && m == e[want].len;
        if (want >= 0)
            hits[segments]++;
        if (!ok && !bad++)
            fprintf(stderr, "lookup%s of \"%.*s\" (%zu bytes, %zu prefixes): want %ld, got %p\n",
                    segments ? "_segments" : "", (int)len, path, len, n, want, got);
    }
    free(path);
    return bad;
}

/* Many route sets, small (the flat table) and large (the trie walk), with
 * prefixes longer than an edge, removals, and paths that follow, cut or
 * extend the prefixes: every answer as the brute force gives it. */
TEST(generated_route_sets)
{
    static struct entry e[64];
    int bad = 0, hits[2] = {0, 0}, small_sets = 0, large_sets = 0;
    for (int set = 0; set < 400; set++) {
        struct trie *t = trie_new();
        size_t n = 0, want_n = rnd() % 40;
        while (n < want_n) {
            struct entry x = {.len = route_string(x.s, ENTRY_MAX)};
            bool dup = false;
            for (size_t j = 0; j < n; j++)
                dup |= e[j].len == x.len && !memcmp(e[j].s, x.s, x.len);
            e[n] = x; /* the value's address: where it stays if added */
            int r = trie_add(t, x.s, x.len, &e[n]);
            CHECK_EQ_INT(r, dup ? -EEXIST : 0);
            if (!dup)
                n++;
        }
        if (set % 3 == 0 && n) { /* remove some, from anywhere in the order */
            for (size_t k = rnd() % (n + 1); k > 0 && n; k--) {
                size_t i = rnd() % n;
                void *old = NULL;
                CHECK_EQ_INT(trie_remove(t, e[i].s, e[i].len, &old), 0);
                CHECK(old == &e[i]);
                CHECK_EQ_INT(trie_remove(t, e[i].s, e[i].len, NULL), -ENOENT);
                /* the last one moves into the hole: give it back its value */
                if (i != n - 1) {
                    CHECK_EQ_INT(trie_remove(t, e[n - 1].s, e[n - 1].len, NULL), 0);
                    e[i] = e[n - 1];
                    CHECK_EQ_INT(trie_add(t, e[i].s, e[i].len, &e[i]), 0);
                }
                n--;
            }
        }
        if (n <= 8)
            small_sets++;
        else
            large_sets++;
        for (int i = 0; i < 300; i++) {
            char path[ENTRY_MAX + 16];
            size_t len;
            if (n && i % 3 == 0) { /* a prefix, cut short or followed by more */
                const struct entry *x = &e[rnd() % n];
                len = rnd() % 2 ? rnd() % (x->len + 1) : x->len;
                memcpy(path, x->s, len);
                len += route_string(path + len, sizeof(path) - len);
            } else {
                len = route_string(path, sizeof(path));
            }
            bad += compare_one(t, e, n, path, len, hits);
        }
        for (size_t i = 0; i < n; i++) /* every prefix finds itself */
            bad += compare_one(t, e, n, e[i].s, e[i].len, hits);
        trie_free(t);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(small_sets > 50 && large_sets > 50);
    CHECK(hits[0] > 30000 && hits[1] > 25000);
}

/* load_upto8(), which the trie reads short paths and labels with: the
 * bytes, in order, zero above them, for every length and many contents,
 * from buffers of exactly that length (a read past them fails under ASan). */
TEST(load_upto8_is_the_bytes)
{
    for (size_t n = 0; n <= 8; n++) {
        for (int round = 0; round < 500; round++) {
            char *b = malloc(n ? n : 1);
            uint64_t want = 0;
            for (size_t i = 0; i < n; i++) {
                b[i] = (char)(round < 256 ? round + (int)i : (int)rnd());
                want |= (uint64_t)(unsigned char)b[i] << (8 * i);
            }
            CHECK(load_upto8(b, n) == want);
            if (n == 8)
                CHECK(load64(b) == want);
            free(b);
        }
    }
}

TEST(deep_nesting_frees)
{
    /* "a", "aa", "aaa", ...: a long chain of nodes, freed without recursion */
    enum { N = 3000 };
    char *s = malloc(N);
    memset(s, 'a', N);
    struct trie *t = trie_new();
    for (size_t i = 1; i <= N; i++)
        CHECK_EQ_INT(trie_add(t, s, i, (void *)(uintptr_t)i), 0);
    size_t m = 0;
    CHECK(trie_lookup(t, s, N, &m) == (void *)(uintptr_t)N);
    CHECK_EQ_INT(m, N);
    CHECK(trie_lookup(t, s, 1234, &m) == (void *)(uintptr_t)1234);
    trie_free(t);
    free(s);
    trie_free(NULL);
}

int main(void)
{
    RUN(longest_prefix_wins);
    RUN(no_match_is_null);
    RUN(segments);
    RUN(duplicate_is_eexist);
    RUN(empty_prefix_matches_everything);
    RUN(null_value_is_a_value);
    RUN(binary_safe);
    RUN(all_first_bytes);
    RUN(random_against_brute_force);
    RUN(generated_route_sets);
    RUN(load_upto8_is_the_bytes);
    RUN(deep_nesting_frees);
    return test_summary();
}
