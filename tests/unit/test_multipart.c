/* test_multipart.c - the multipart/form-data parser (http/multipart.c):
 * boundaries from Content-Type, parts and their headers, delimiters split
 * at every byte position, limits, and malformed bodies. */
#include <stdint.h>
#include <stdlib.h>

#include "http/multipart.h"
#include "test.h"

/* A transcript of the events: "P name|filename|type\n", the part's data,
 * "E\n" at its end, "D\n" when done, "X why\n" on error. */
struct transcript {
    char buf[1 << 16];
    size_t len;
};

static void put(struct transcript *t, const char *p, size_t n)
{
    if (t->len + n < sizeof(t->buf)) {
        memcpy(t->buf + t->len, p, n);
        t->len += n;
    }
    t->buf[t->len] = '\0';
}

static void puts_(struct transcript *t, const char *s)
{
    put(t, s, strlen(s));
}

/* Feeds body in pieces of step bytes (0: all at once), each piece a heap
 * copy of exactly its size. Returns 0 when the body was well formed. */
static int parse_steps(const char *boundary, const char *body, size_t blen, size_t step,
                       unsigned max_parts, struct transcript *t)
{
    static struct mp_parser p;
    mp_init(&p, boundary, strlen(boundary), max_parts);
    t->len = 0;
    t->buf[0] = '\0';
    bool err = false;
    for (size_t off = 0; off < blen && !err;) {
        size_t n = step && step < blen - off ? step : blen - off;
        char *piece = malloc(n);
        memcpy(piece, body + off, n);
        const char *b = piece;
        size_t left = n;
        while (left && !err) {
            struct mp_event ev;
            size_t used = mp_feed(&p, b, left, &ev);
            CHECK(used <= left);
            b += used;
            left -= used;
            switch (ev.type) {
            case MP_PART:
                puts_(t, "P ");
                puts_(t, p.name);
                puts_(t, "|");
                puts_(t, p.filename ? p.filename : "-");
                puts_(t, "|");
                puts_(t, p.content_type);
                puts_(t, "\n");
                break;
            case MP_DATA:
                CHECK(ev.len > 0);
                put(t, ev.data, ev.len);
                break;
            case MP_PART_END:
                puts_(t, "E\n");
                break;
            case MP_DONE:
                break;
            case MP_ERROR:
                puts_(t, "X ");
                puts_(t, p.error);
                puts_(t, "\n");
                err = true;
                break;
            case MP_MORE:
                CHECK(left == 0);
                break;
            }
        }
        free(piece);
        off += n;
    }
    if (!err && mp_finish(&p) != 0) {
        puts_(t, "X ");
        puts_(t, p.error);
        puts_(t, "\n");
        err = true;
    }
    if (!err)
        puts_(t, "D\n");
    return err ? -1 : 0;
}

static int parse_all(const char *boundary, const char *body, struct transcript *t)
{
    return parse_steps(boundary, body, strlen(body), 0, 100, t);
}

static struct transcript t1, t2;

#define BODY1                                                                                      \
    "preamble to ignore\r\n"                                                                       \
    "--AaB03x\r\n"                                                                                 \
    "Content-Disposition: form-data; name=\"field1\"\r\n"                                          \
    "\r\n"                                                                                         \
    "Joe Blow\r\nalmost tricked you!\r\n"                                                          \
    "--AaB03x\r\n"                                                                                 \
    "content-disposition: form-data; name=\"pics\"; filename=\"file1.txt\"\r\n"                    \
    "Content-Type: text/x-stuff\r\n"                                                               \
    "\r\n"                                                                                         \
    "... contents of file1.txt ...\r\r\n-\r\n--AaB03\r\n- --AaB03x\r\n"                            \
    "--AaB03x--\r\n"                                                                               \
    "epilogue --AaB03x garbage\r\n"

#define TRANSCRIPT1                                                                                \
    "P field1|-|text/plain\nJoe Blow\r\nalmost tricked you!E\n"                                    \
    "P pics|file1.txt|text/x-stuff\n... contents of file1.txt ...\r\r\n-\r\n--AaB03\r\n- "         \
    "--AaB03xE\nD\n"

TEST(boundary_from_content_type)
{
    char b[MP_BOUNDARY_MAX + 1];
    size_t n;
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=AaB03x"), b, &n), 0);
    CHECK_EQ_STR(b, "AaB03x");
    CHECK_EQ_INT(n, 6);
    CHECK_EQ_INT(
        mp_boundary(VIEW_LIT("Multipart/Form-Data;charset=utf-8;BOUNDARY=\"a b:c\""), b, &n), 0);
    CHECK_EQ_STR(b, "a b:c");
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=\"q\\\"x\""), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=\"\\q\""), b, &n), 0);
    CHECK_EQ_STR(b, "q");
    /* 70 characters at most, 1 at least, no trailing space, bchars only */
    char ct[200];
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%.*s", 70,
             "0123456789012345678901234567890123456789012345678901234567890123456789xx");
    CHECK_EQ_INT(mp_boundary((struct view){ct, strlen(ct)}, b, &n), 0);
    CHECK_EQ_INT(n, 70);
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%.*s", 71,
             "0123456789012345678901234567890123456789012345678901234567890123456789xx");
    CHECK_EQ_INT(mp_boundary((struct view){ct, strlen(ct)}, b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=\"\""), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=\"ab \""), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=\"a;b\""), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data"), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=a; boundary=b"), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary=a b"), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-data; boundary"), b, &n), -2);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/mixed; boundary=a"), b, &n), -1);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("multipart/form-datax; boundary=a"), b, &n), -1);
    CHECK_EQ_INT(mp_boundary(VIEW_LIT("text/plain"), b, &n), -1);
}

TEST(parts_and_headers)
{
    CHECK_EQ_INT(parse_all("AaB03x", BODY1, &t1), 0);
    CHECK_EQ_STR(t1.buf, TRANSCRIPT1);
    /* no preamble, empty parts, no headers at all is an error (no name) */
    CHECK_EQ_INT(parse_all("b",
                           "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n"
                           "--b \t\r\nContent-Disposition: form-data; name=\"\"\r\n\r\n\r\n--b--",
                           &t1),
                 0);
    CHECK_EQ_STR(t1.buf, "P a|-|text/plain\nE\nP |-|text/plain\nE\nD\n");
    /* quoted-string escapes and other parameters */
    CHECK_EQ_INT(
        parse_all("b",
                  "--b\r\nX-Other: y\r\nContent-Disposition: form-data ; "
                  "filename*=utf-8''x; name=\"a\\\"b\\\\c\" ;filename=\"C:\\\\f \\\"1\\\".txt\""
                  "\r\nContent-Type:image/png  \r\n\r\nPNG\r\n--b--\r\n",
                  &t1),
        0);
    CHECK_EQ_STR(t1.buf, "P a\"b\\c|C:\\f \"1\".txt|image/png\nPNGE\nD\n");
    /* zero parts: the close delimiter alone */
    CHECK_EQ_INT(parse_all("b", "--b--", &t1), 0);
    CHECK_EQ_STR(t1.buf, "D\n");
    /* a boundary that is a prefix of a line in the content is content only
     * if the line differs before the boundary ends */
    CHECK_EQ_INT(parse_all("xyz",
                           "--xyz\r\nContent-Disposition: form-data; name=f\r\n\r\n"
                           "\r\n--xy\r\n-\r\r\n\n\r\n--xyz--",
                           &t1),
                 0);
    CHECK_EQ_STR(t1.buf, "P f|-|text/plain\n\r\n--xy\r\n-\r\r\n\nE\nD\n");
}

/* Every split of the body into two pieces, and every piece size, gives the
 * same transcript as the whole body at once. */
TEST(split_at_every_position)
{
    size_t len = strlen(BODY1);
    for (size_t step = 1; step <= len; step++) {
        parse_steps("AaB03x", BODY1, len, step, 100, &t2);
        if (strcmp(t2.buf, TRANSCRIPT1)) {
            CHECK(!"pieces of one size give another transcript");
            fprintf(stderr, "  step %zu: %s\n", step, t2.buf);
            break;
        }
    }
    static struct mp_parser p;
    for (size_t cut = 0; cut <= len; cut++) {
        mp_init(&p, "AaB03x", 6, 100);
        t2.len = 0;
        const char *pieces[2] = {BODY1, BODY1 + cut};
        size_t lens[2] = {cut, len - cut};
        for (int k = 0; k < 2; k++) {
            const char *b = pieces[k];
            size_t left = lens[k];
            while (left) {
                struct mp_event ev;
                size_t used = mp_feed(&p, b, left, &ev);
                b += used;
                left -= used;
                if (ev.type == MP_PART) {
                    puts_(&t2, "P ");
                    puts_(&t2, p.name);
                    puts_(&t2, "|");
                    puts_(&t2, p.filename ? p.filename : "-");
                    puts_(&t2, "|");
                    puts_(&t2, p.content_type);
                    puts_(&t2, "\n");
                } else if (ev.type == MP_DATA) {
                    put(&t2, ev.data, ev.len);
                } else if (ev.type == MP_PART_END) {
                    puts_(&t2, "E\n");
                }
            }
        }
        if (mp_finish(&p) == 0)
            puts_(&t2, "D\n");
        if (strcmp(t2.buf, TRANSCRIPT1)) {
            CHECK(!"a split gives another transcript");
            fprintf(stderr, "  cut at %zu: %s\n", cut, t2.buf);
            break;
        }
    }
}

TEST(limits)
{
    /* parts */
    const char *three = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
                        "--b\r\nContent-Disposition: form-data; name=b\r\n\r\n2\r\n"
                        "--b\r\nContent-Disposition: form-data; name=c\r\n\r\n3\r\n--b--";
    CHECK_EQ_INT(parse_steps("b", three, strlen(three), 0, 3, &t1), 0);
    CHECK_EQ_INT(parse_steps("b", three, strlen(three), 0, 2, &t1), -1);
    CHECK(strstr(t1.buf, "X too many parts") != NULL);
    /* header block size: MP_HEADER_MAX including its CRLFs */
    static char body[2 * MP_HEADER_MAX];
    static const char cd[] = "Content-Disposition: form-data; name=a\r\nX: ";
    for (size_t total = MP_HEADER_MAX - 2; total <= MP_HEADER_MAX + 2; total++) {
        /* the block: cd, filler, "\r\n\r\n" = total bytes */
        size_t fill = total - (sizeof(cd) - 1) - 4;
        static char filler[MP_HEADER_MAX];
        memset(filler, 'y', sizeof(filler));
        snprintf(body, sizeof(body), "--b\r\n%s%.*s\r\n\r\nx\r\n--b--", cd, (int)fill, filler);
        int r = parse_steps("b", body, strlen(body), 7, 10, &t1);
        CHECK_EQ_INT(r, total <= MP_HEADER_MAX ? 0 : -1);
    }
}

TEST(malformed)
{
    static const struct {
        const char *body, *why;
    } bad[] = {
        {"", "no close delimiter"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxx", "no close delimiter"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxx\r\n--b", "no close delimiter"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxx\r\n--b-", "no close delimiter"},
        {"no delimiter at all", "no close delimiter"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--bc\r\n",
         "the boundary inside"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b-x", "malformed close"},
        {"--b\rx", "a delimiter line without CRLF"},
        {"--b\r\r", "a delimiter line without CRLF"},
        {"--b\r\n\r\nx\r\n--b--", "a part without Content-Disposition"},
        {"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--", "a part without a name"},
        {"--b\r\nContent-Disposition: attachment; name=a\r\n\r\n--b--", "not form-data"},
        {"--b\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\n--b--", "repeated"},
        {"--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\n--b--", "malformed Content-Disp"},
        {"--b\r\nContent-Disposition: form-data; name=a b\r\n\r\n--b--", "malformed Content-Disp"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\nContent-Disposition: form-data; "
         "name=a\r\n\r\n--b--",
         "a repeated Content-Disposition"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\nContent-Type: a\r\nContent-Type: b"
         "\r\n\r\n--b--",
         "a repeated Content-Type"},
        {"--b\r\nContent-Disposition: form-data; name=a\r\nContent-Type:\r\n\r\n--b--",
         "an empty Content-Type"},
        {"--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\n--b--", "folded"},
        {"--b\r\n Content-Disposition: form-data; name=a\r\n\r\n--b--", "folded"},
        {"--b\r\nContent-Disposition : form-data; name=a\r\n\r\n--b--", "malformed part header"},
        {"--b\r\nContent-Disposition form-data\r\n\r\n--b--", "malformed part header"},
        {"--b\r\nContent-Disposition: form-data; name=a\n\r\n--b--", "bare LF"},
        {"--b\r\nContent-Disposition: form-data; name=a\rx\r\n\r\n--b--", "bare CR"},
        {"--b\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\n--b--", "control"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = strlen(bad[i].body);
        for (size_t step = 0; step <= 3; step++) {
            int r = parse_steps("b", bad[i].body, len, step, 10, &t1);
            if (r != -1 || !strstr(t1.buf, bad[i].why)) {
                CHECK(!"a malformed body");
                fprintf(stderr, "  #%zu step %zu: %s\n", i, step, t1.buf);
            }
        }
    }
    /* after an error, every call is an error */
    static struct mp_parser p;
    mp_init(&p, "b", 1, 10);
    struct mp_event ev;
    mp_feed(&p, "--b\r\r", 5, &ev);
    CHECK_EQ_INT(ev.type, MP_ERROR);
    CHECK_EQ_INT(mp_feed(&p, "--b--", 5, &ev), 5);
    CHECK_EQ_INT(ev.type, MP_ERROR);
    CHECK_EQ_INT(mp_finish(&p), -1);
}

/* Feeds b[0..left) whole, adding the data events' lengths and byte sums;
 * returns the set (1u << type) of the other events' types. */
static unsigned feed_all(struct mp_parser *p, const char *b, size_t left, uint64_t *total,
                         uint64_t *sum)
{
    unsigned seen = 0;
    while (left) {
        struct mp_event ev;
        size_t used = mp_feed(p, b, left, &ev);
        b += used;
        left -= used;
        if (ev.type != MP_DATA) {
            seen |= 1u << ev.type;
            continue;
        }
        *total += ev.len;
        for (size_t i = 0; i < ev.len; i++)
            *sum += (unsigned char)ev.data[i];
    }
    return seen;
}

/* A large part in small pieces: data comes out as it goes in, never held. */
TEST(large_part_streams)
{
    static struct mp_parser p;
    mp_init(&p, "----x", 5, 10);
    static const char head[] = "------x\r\nContent-Disposition: form-data; name=f; "
                               "filename=big\r\n\r\n";
    struct mp_event ev;
    size_t used = mp_feed(&p, head, sizeof(head) - 1, &ev);
    CHECK_EQ_INT(used, sizeof(head) - 1);
    CHECK_EQ_INT(ev.type, MP_PART);
    char chunk[1000];
    for (size_t i = 0; i < sizeof(chunk); i++)
        chunk[i] = (char)(i * 7 % 251); /* CRs and LFs among them */
    uint64_t total = 0, sum = 0, want = 0;
    for (int k = 0; k < 5000; k++) {
        for (size_t i = 0; i < sizeof(chunk); i++)
            want += (unsigned char)chunk[i];
        /* nothing but data, and the parser asking for more */
        CHECK_EQ_INT(feed_all(&p, chunk, sizeof(chunk), &total, &sum) & ~(1u << MP_MORE), 0);
        /* at most a delimiter's worth is held back */
        CHECK(total + p.dlen >= (uint64_t)(k + 1) * sizeof(chunk));
    }
    static const char tail[] = "\r\n------x--";
    CHECK(feed_all(&p, tail, sizeof(tail) - 1, &total, &sum) & (1u << MP_PART_END));
    CHECK_EQ_INT(total, 5000 * sizeof(chunk));
    CHECK_EQ_INT(sum, want);
    CHECK_EQ_INT(mp_finish(&p), 0);
}

int main(void)
{
    RUN(boundary_from_content_type);
    RUN(parts_and_headers);
    RUN(split_at_every_position);
    RUN(limits);
    RUN(malformed);
    RUN(large_part_streams);
    return test_summary();
}
