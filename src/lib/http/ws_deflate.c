/* ws_deflate.c - permessage-deflate (RFC 7692 §7) on zlib's raw deflate. */
#include "http/ws_deflate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "http/chars.h"
#include "http/fields.h"
#include "http/ws_frame.h"

/* Output is made in steps of this much. */
#define ZSTEP (16 * 1024)

static struct view trim(const char *p, size_t len)
{
    while (len && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    return (struct view){p, len};
}

static bool named(struct view v, const char *s)
{
    return v.len == strlen(s) && !strncasecmp(v.p, s, v.len);
}

/* A window size parameter's value (token or quoted-string): 8..15; -1
 * if bad. */
static int bits(struct view v)
{
    char b[4];
    ssize_t n = http_param_value(v, b, sizeof(b));
    if (n == 1 && b[0] >= '8' && b[0] <= '9')
        return b[0] - '0';
    if (n == 2 && b[0] == '1' && b[1] >= '0' && b[1] <= '5')
        return 10 + b[1] - '0';
    return -1;
}

/* One offer ("permessage-deflate; a; b=1"): whether it can be accepted. */
static bool offer(struct view o, struct ws_deflate *d, char *resp)
{
    const char *end = o.p + o.len, *p = o.p;
    while (p < end && is(*p, C_TCHAR))
        p++;
    if (!named(mkview(o.p, p), "permessage-deflate"))
        return false;
    bool seen_snc = false, seen_cnc = false, seen_smw = false, seen_cmw = false;
    struct ws_deflate t = {.server_bits = 15};
    struct http_param prm;
    int r;
    /* parameters as RFC 6455 §9.1 writes them: a value is optional, and
     * may be quoted, with whitespace around '=' */
    while ((r = http_param_next(&p, end, HTTP_PARAM_BARE | HTTP_PARAM_BWS, &prm)) > 0) {
        struct view name = prm.name;
        bool eq = prm.has_value;
        if (named(name, "server_no_context_takeover") && !eq && !seen_snc) {
            seen_snc = t.server_no_context_takeover = true;
        } else if (named(name, "client_no_context_takeover") && !eq && !seen_cnc) {
            seen_cnc = t.client_no_context_takeover = true;
        } else if (named(name, "server_max_window_bits") && eq && !seen_smw) {
            seen_smw = true;
            if ((t.server_bits = bits(prm.value)) < 9)
                return false; /* bad, or 8: raw deflate cannot do 256 bytes */
        } else if (named(name, "client_max_window_bits") && !seen_cmw) {
            seen_cmw = true; /* our inflater takes any window: nothing to answer */
            if (eq && bits(prm.value) < 0)
                return false;
        } else {
            return false;
        }
    }
    if (r < 0)
        return false;
    *d = t;
    int n = snprintf(resp, WS_DEFLATE_RESPONSE_MAX, "permessage-deflate%s%s",
                     t.server_no_context_takeover ? "; server_no_context_takeover" : "",
                     t.client_no_context_takeover ? "; client_no_context_takeover" : "");
    if (seen_smw)
        snprintf(resp + n, (size_t)(WS_DEFLATE_RESPONSE_MAX - n), "; server_max_window_bits=%d",
                 t.server_bits);
    return true;
}

bool ws_deflate_negotiate(const char *p, size_t len, struct ws_deflate *d, char *resp)
{
    const char *end = p + len;
    while (p < end) {
        /* offers are separated by commas outside quoted strings */
        const char *q = p;
        bool quoted = false;
        while (q < end && (quoted || *q != ',')) {
            if (*q == '"')
                quoted = !quoted;
            q++;
        }
        if (offer(trim(p, (size_t)(q - p)), d, resp))
            return true;
        p = q + 1;
    }
    return false;
}

int ws_deflate_compress(struct ws_deflate *d, const void *p, size_t len, struct strbuf *out)
{
    if (!d->def_ready) {
        if (deflateInit2(&d->def, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -d->server_bits, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK)
            return -ENOMEM;
        d->def_ready = true;
    }
    strbuf_reset(out);
    d->def.next_in = (Bytef *)p;
    d->def.avail_in = (uInt)len; /* messages larger than 4 GiB are not sent */
    do {
        if (strbuf_reserve(out, ZSTEP) < 0)
            return -ENOMEM;
        d->def.next_out = (Bytef *)out->buf + out->len;
        d->def.avail_out = ZSTEP;
        int r = deflate(&d->def, Z_SYNC_FLUSH);
        if (r != Z_OK && r != Z_BUF_ERROR)
            return -ENOMEM;
        out->len += ZSTEP - d->def.avail_out;
    } while (d->def.avail_out == 0 || d->def.avail_in);
    if (out->len >= 4 && !memcmp(out->buf + out->len - 4, "\0\0\xff\xff", 4))
        out->len -= 4;
    out->buf[out->len] = '\0';
    if (d->server_no_context_takeover)
        deflateReset(&d->def);
    return 0;
}

/* Feeds n bytes to the inflater, appending to out up to max. */
static int inflate_some(struct ws_deflate *d, const void *p, size_t n, size_t max,
                        struct strbuf *out)
{
    d->inf.next_in = (Bytef *)p;
    d->inf.avail_in = (uInt)n;
    for (;;) {
        size_t room = max - out->len + 1; /* one more byte tells "too big" */
        size_t step = MIN((size_t)ZSTEP, room);
        int g = d->reserve ? d->reserve(out, step, d->reserve_arg) : strbuf_reserve(out, step);
        if (g < 0)
            return g;
        d->inf.next_out = (Bytef *)out->buf + out->len;
        d->inf.avail_out = (uInt)step;
        int r = inflate(&d->inf, Z_SYNC_FLUSH);
        out->len += step - d->inf.avail_out;
        out->buf[out->len] = '\0';
        if (out->len > max)
            return -WS_CLOSE_TOO_BIG;
        if (r == Z_STREAM_END) {
            /* a final block: whatever follows starts a new stream */
            inflateReset(&d->inf);
            if (!d->inf.avail_in)
                return 0;
            continue;
        }
        if (r == Z_BUF_ERROR || (r == Z_OK && d->inf.avail_out)) {
            if (!d->inf.avail_in)
                return 0;
            if (r == Z_BUF_ERROR)
                return -WS_CLOSE_BAD_DATA;
            continue;
        }
        if (r != Z_OK)
            return r == Z_MEM_ERROR ? -ENOMEM : -WS_CLOSE_BAD_DATA;
    }
}

int ws_deflate_inflate_piece(struct ws_deflate *d, const void *p, size_t len, size_t max,
                             struct strbuf *out)
{
    if (!d->inf_ready) {
        if (inflateInit2(&d->inf, -15) != Z_OK)
            return -ENOMEM;
        d->inf_ready = true;
    }
    if (len > UINT32_MAX)
        return -WS_CLOSE_TOO_BIG;
    if (out->len > max)
        return -WS_CLOSE_TOO_BIG;
    int r = len ? inflate_some(d, p, len, max, out) : 0;
    if (r)
        inflateReset(&d->inf);
    return r;
}

int ws_deflate_inflate_end(struct ws_deflate *d, size_t max, struct strbuf *out)
{
    int r = ws_deflate_inflate_piece(d, "\0\0\xff\xff", 4, max, out);
    if (!r && d->client_no_context_takeover)
        inflateReset(&d->inf);
    return r;
}

int ws_deflate_inflate(struct ws_deflate *d, const void *p, size_t len, size_t max,
                       struct strbuf *out)
{
    int r = ws_deflate_inflate_piece(d, p, len, max, out);
    return r ? r : ws_deflate_inflate_end(d, max, out);
}

void ws_deflate_free(struct ws_deflate *d)
{
    if (d->def_ready)
        deflateEnd(&d->def);
    if (d->inf_ready)
        inflateEnd(&d->inf);
    d->def_ready = d->inf_ready = false;
}
