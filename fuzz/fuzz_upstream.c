/* fuzz_upstream.c - the gateway's parser of upstream answer heads
 * (gateway/uphead.h) and the chunked decoder it relays bodies with, on
 * arbitrary bytes: what an upstream could send.
 *
 * What must hold:
 *  - the result is -EBADMSG, -EMSGSIZE, 0 (more) or a length within the
 *    input and the limit;
 *  - a head is self-delimiting: its bytes alone give the same length, and
 *    every shorter prefix needs more or is invalid;
 *  - a parsed head has a status of 100-599, a minor version of 0 or 1, a
 *    Content-Length only without Transfer-Encoding, its fields inside it;
 *  - the fields passed on to a client never hold a hop-by-hop field,
 *    Content-Length or Transfer-Encoding, and each line ends in CRLF;
 *  - the bytes after the head, decoded as a chunked body, never yield more
 *    payload than they hold. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/uphead.h"
#include "http/chunked.h"

#define HEAD_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ssize_t parse_copy(const uint8_t *data, size_t n, struct gw_resp_head *h)
{
    uint8_t *p = malloc(n ? n : 1); /* exactly n bytes: ASan catches any over-read */
    if (!p)
        abort();
    memcpy(p, data, n);
    ssize_t r = gw_parse_response((const char *)p, n, HEAD_MAX, h);
    free(p);
    return r;
}

static int check(const uint8_t *data, size_t size, const char *whole, ssize_t r,
                 struct gw_resp_head *hp);

static bool bad_out(struct view name, struct view value, void *arg)
{
    (void)value;
    bool *bad = arg;
    static const char *const never[] = {"connection",     "keep-alive", "transfer-encoding",
                                        "content-length", "te",         "trailer"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (name.len == strlen(never[i]) && mem_case_eq(name.p, never[i], name.len))
            *bad = true;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_resp_head h;
    /* the views of h point into this copy of exactly size bytes */
    char *whole = malloc(size ? size : 1);
    if (!whole)
        abort();
    memcpy(whole, data, size);
    ssize_t r = gw_parse_response(whole, size, HEAD_MAX, &h);
    int ret = check(data, size, whole, r, &h);
    free(whole);
    return ret;
}

static int check(const uint8_t *data, size_t size, const char *whole, ssize_t r,
                 struct gw_resp_head *hp)
{
    struct gw_resp_head h = *hp;
    (void)whole; /* h's views point into it */
    if (r != -EBADMSG && r != -EMSGSIZE && r != 0 && !(r > 0 && (size_t)r <= size && r <= HEAD_MAX))
        abort();
    if (r <= 0)
        return 0;
    if (h.status < 100 || h.status > 599 || h.minor > 1 || (h.te && h.content_length >= 0))
        abort();
    /* the head's own bytes give the same answer; a shorter prefix never a head */
    struct gw_resp_head h2;
    if (parse_copy(data, (size_t)r, &h2) != r || h2.status != h.status)
        abort();
    for (size_t k = 1; k < (size_t)r; k += 1 + k / 8)
        if (parse_copy(data, k, &h2) > 0)
            abort();
    /* the fields a client gets */
    if (h.status != 101) {
        struct strbuf out = {0};
        if (gw_answer_fields(&out, &h) == 0) {
            bool bad = false;
            gw_fields_each((struct view){out.buf, out.len}, bad_out, &bad);
            if (bad || (out.len && (out.len < 2 || memcmp(out.buf + out.len - 2, "\r\n", 2))))
                abort();
        }
        strbuf_free(&out);
    }
    /* the rest as a chunked body */
    size_t rest = size - (size_t)r;
    char *b = malloc(rest ? rest : 1);
    if (!b)
        abort();
    memcpy(b, data + r, rest);
    struct http_chunked st = {0};
    size_t pos = 0, total = 0;
    while (pos < rest && !st.done) {
        size_t payload;
        ssize_t used = http_chunked_decode(&st, b + pos, rest - pos, &payload);
        if (used <= 0)
            break;
        if (payload > (size_t)used)
            abort();
        total += payload;
        pos += (size_t)used;
    }
    if (total > rest)
        abort();
    free(b);
    return 0;
}
