/* lex.c - passes 1 to 3 of the compiler (lex.h): lexing, matching the tags
 * that open and close scopes, and the spec's standalone-line rules.
 */
#include "tpl/lex.h"

#include <string.h>

#define MAX_DELIM 32 /* bytes of a delimiter */

/* ---- pass 1: lexing ------------------------------------------------------ */

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Line and column of source offsets, asked for in increasing order. */
struct lines {
    uint32_t at, line, line_start;
};

static struct tpl_pos pos_at(struct lines *l, const char *src, uint32_t off)
{
    for (; l->at < off; l->at++) {
        if (src[l->at] == '\n') {
            l->line++;
            l->line_start = l->at + 1;
        }
    }
    return (struct tpl_pos){l->line, off - l->line_start + 1};
}

/* "a.b.c" or "."; every part non-empty. */
static bool valid_name(const char *s, uint32_t len)
{
    if (len == 1 && s[0] == '.')
        return true;
    if (len == 0 || s[0] == '.' || s[len - 1] == '.')
        return false;
    for (uint32_t i = 1; i < len; i++)
        if (s[i] == '.' && s[i - 1] == '.')
            return false;
    return true;
}

static int set_delimiters(struct compiler *c, struct token *t, struct tpl_span *otag,
                          struct tpl_span *ctag)
{
    const char *s = c->src;
    uint32_t a = t->name, end = t->name + t->name_len, b = a;
    while (b < end && !is_space(s[b]))
        b++;
    uint32_t c2 = b;
    while (c2 < end && is_space(s[c2]))
        c2++;
    uint32_t d = c2;
    while (d < end && !is_space(s[d]))
        d++;
    if (b == a || c2 == b || d == c2 || d != end || b - a > MAX_DELIM || d - c2 > MAX_DELIM ||
        memchr(s + a, '=', b - a) || memchr(s + c2, '=', d - c2))
        return fail(c, t->pos, "bad delimiters '%.*s'", (int)t->name_len, s + t->name);
    *otag = (struct tpl_span){c->base + a, b - a};
    *ctag = (struct tpl_span){c->base + c2, d - c2};
    return 0;
}

/* Checks the content of tag t and sets its name. */
static int tag_name(struct compiler *c, struct token *t)
{
    const char *s = c->src;
    uint32_t a = t->name, b = t->name + t->name_len;
    if ((t->kind == TOK_PARTIAL || t->kind == TOK_PARENT) && a < b && s[a] == '*') {
        t->dynamic = true;
        for (a++; a < b && is_space(s[a]); a++)
            ;
    }
    t->name = a;
    t->name_len = b - a;
    for (uint32_t i = a; i < b; i++)
        if (is_space(s[i]))
            return fail(c, t->pos, "bad tag name '%.*s'", (int)(b - a), s + a);
    if (a == b)
        return fail(c, t->pos, "empty tag");
    bool dotted =
        t->kind == TOK_VAR || t->kind == TOK_SECTION || t->kind == TOK_INVERTED || t->dynamic;
    if (dotted && !valid_name(s + a, b - a))
        return fail(c, t->pos, "bad name '%.*s'", (int)(b - a), s + a);
    return 0;
}

/* What the character after the opening delimiter makes of a tag; any other
 * starts the name of an escaped variable. */
static const char sigils[] = "#^/><$!=&{";
static const uint8_t sigil_kinds[] = {
    TOK_SECTION, TOK_INVERTED, TOK_CLOSE, TOK_PARTIAL, TOK_PARENT,
    TOK_BLOCK,   TOK_COMMENT,  TOK_DELIM, TOK_VAR,     TOK_VAR,
};

int tpl_lex(struct compiler *c)
{
    const char *s = c->src;
    uint32_t n = c->len, at = 0;
    struct tpl_span otag = c->region ? DEFAULT_OTAG : c->otag0;
    struct tpl_span ctag = c->region ? DEFAULT_CTAG : c->ctag0;
    struct lines lines = {.line = 1};
    c->toks.n = 0;

    while (at < n) {
        const char *o = memmem(s + at, n - at, c->pool.buf + otag.off, otag.len);
        uint32_t tag = o ? (uint32_t)(o - s) : n;
        if (tag > at) {
            struct token text = {
                .kind = TOK_TEXT, .start = at, .end = tag, .pos = pos_at(&lines, s, at)};
            if (VEC_PUSH(c->toks, text))
                return oom(c);
        }
        if (!o)
            break;

        struct token t = {.start = tag, .pos = pos_at(&lines, s, tag), .otag = otag, .ctag = ctag};
        uint32_t p = tag + otag.len;
        char sigil = p < n ? s[p] : '\0';
        char needle[MAX_DELIM + 1];
        size_t nlen = 0;
        if (sigil == '{' || sigil == '=')
            needle[nlen++] = sigil == '{' ? '}' : '=';
        memcpy(needle + nlen, c->pool.buf + ctag.off, ctag.len);
        nlen += ctag.len;
        const char *sg = sigil ? strchr(sigils, sigil) : NULL;
        t.kind = sg ? sigil_kinds[sg - sigils] : TOK_VAR;
        t.escape = !sg;
        uint32_t body = p + (sg != NULL);
        const char *e = body <= n ? memmem(s + body, n - body, needle, nlen) : NULL;
        if (!e)
            return fail(c, t.pos, "unclosed tag");
        t.end = (uint32_t)(e - s) + (uint32_t)nlen;

        uint32_t a = body, b = (uint32_t)(e - s);
        while (a < b && is_space(s[a]))
            a++;
        while (b > a && is_space(s[b - 1]))
            b--;
        t.name = a;
        t.name_len = b - a;

        int r = 0;
        if (t.kind == TOK_DELIM)
            r = set_delimiters(c, &t, &otag, &ctag);
        else if (t.kind != TOK_COMMENT)
            r = tag_name(c, &t);
        if (r < 0)
            return r;
        if (VEC_PUSH(c->toks, t))
            return oom(c);
        at = t.end;
    }
    return 0;
}

/* ---- pass 2: matching ---------------------------------------------------- */

static bool opens_scope(uint8_t kind)
{
    return kind == TOK_SECTION || kind == TOK_INVERTED || kind == TOK_PARENT || kind == TOK_BLOCK;
}

/* Does close end open? A dynamic parent {{<*x}} is closed by the name *x. */
static bool closes(const struct compiler *c, const struct token *open, const struct token *close)
{
    const char *s = c->src + close->name;
    uint32_t len = close->name_len;
    if (open->dynamic) {
        if (*s != '*')
            return false;
        s++;
        len--;
    }
    return len == open->name_len && memcmp(s, c->src + open->name, len) == 0;
}

int tpl_match(struct compiler *c)
{
    c->stack.n = 0;
    for (uint32_t i = 0; i < c->toks.n; i++) {
        struct token *t = &c->toks.v[i];
        const struct token *in = c->stack.n ? &c->toks.v[c->stack.v[c->stack.n - 1]] : NULL;
        if (in && in->kind == TOK_PARENT && t->kind != TOK_TEXT && t->kind != TOK_COMMENT &&
            t->kind != TOK_DELIM && t->kind != TOK_BLOCK && t->kind != TOK_CLOSE)
            return fail(c, t->pos, "only blocks can be inside parent '%.*s'", (int)in->name_len,
                        c->src + in->name);
        if (opens_scope(t->kind)) {
            if (VEC_PUSH(c->stack, i))
                return oom(c);
        } else if (t->kind == TOK_CLOSE) {
            if (!in)
                return fail(c, t->pos, "closing '%.*s', which is not open", (int)t->name_len,
                            c->src + t->name);
            if (!closes(c, in, t))
                return fail(c, t->pos, "closing '%.*s' but '%.*s' (line %u) is open",
                            (int)t->name_len, c->src + t->name, (int)in->name_len,
                            c->src + in->name, in->pos.line);
            uint32_t o = c->stack.v[--c->stack.n];
            c->toks.v[o].match = i;
            t->match = o;
        }
    }
    if (c->stack.n) {
        const struct token *t = &c->toks.v[c->stack.v[c->stack.n - 1]];
        return fail(c, t->pos, "'%.*s' is never closed", (int)t->name_len, c->src + t->name);
    }
    return 0;
}

/* ---- pass 3: standalone lines -------------------------------------------- */

static bool can_stand_alone(uint8_t kind)
{
    return kind != TOK_TEXT && kind != TOK_VAR;
}

/* Only spaces and tabs between the start of tag i's line and the tag? */
static bool clear_before(const struct compiler *c, uint32_t i)
{
    if (i == 0)
        return true;
    const struct token *p = &c->toks.v[i - 1];
    if (p->kind != TOK_TEXT)
        return false;
    for (uint32_t k = p->end; k > p->start; k--) {
        if (c->src[k - 1] == '\n')
            return true;
        if (!is_blank(c->src[k - 1]))
            return false;
    }
    return i == 1; /* the text starts the template */
}

/* Only spaces and tabs between tag i and the end of its line? */
static bool clear_after(const struct compiler *c, uint32_t i)
{
    if (i + 1 == c->toks.n)
        return true;
    const struct token *nx = &c->toks.v[i + 1];
    if (nx->kind != TOK_TEXT)
        return false;
    for (uint32_t k = nx->start; k < nx->end; k++) {
        char ch = c->src[k];
        if (ch == '\n' || (ch == '\r' && k + 1 < nx->end && c->src[k + 1] == '\n'))
            return true;
        if (!is_blank(ch))
            return false;
    }
    return i + 2 == c->toks.n; /* the text ends the template */
}

/* Two tags of the inheritance module that stand alone as a pair:
 * "{{$b}}{{/b}}", "{{<p}}{{/p}}", "{{<p}}{{$b}}" and "{{/b}}{{/p}}". */
static bool pair(const struct compiler *c, uint32_t i)
{
    const struct token *a = &c->toks.v[i], *b = &c->toks.v[i + 1];
    if ((a->kind == TOK_BLOCK || a->kind == TOK_PARENT) && a->match == i + 1)
        return true;
    if (a->kind == TOK_PARENT && b->kind == TOK_BLOCK)
        return true;
    return a->kind == TOK_CLOSE && b->kind == TOK_CLOSE && c->toks.v[a->match].kind == TOK_BLOCK &&
           c->toks.v[b->match].kind == TOK_PARENT;
}

/* The whitespace before tag i becomes its indentation; the newline after
 * tag j ends the line (unless keep_eol). */
static void trim_line(struct compiler *c, uint32_t i, uint32_t j, bool keep_eol)
{
    struct token *t = &c->toks.v[i];
    if (i > 0 && c->toks.v[i - 1].kind == TOK_TEXT) {
        struct token *p = &c->toks.v[i - 1];
        uint32_t ls = p->end;
        while (ls > p->start && c->src[ls - 1] != '\n')
            ls--;
        t->indent = (struct tpl_span){ls, p->end - ls};
        p->end = ls;
    }
    if (j + 1 < c->toks.n && c->toks.v[j + 1].kind == TOK_TEXT) {
        struct token *nx = &c->toks.v[j + 1];
        uint32_t k = nx->start;
        while (k < nx->end && is_blank(c->src[k]))
            k++;
        if (!keep_eol) {
            if (k < nx->end && c->src[k] == '\r')
                k++;
            if (k < nx->end && c->src[k] == '\n')
                k++;
        }
        nx->start = k;
    }
}

/* Common indentation of the non-blank lines of source [a, b). */
static struct tpl_span common_indent(const char *s, uint32_t a, uint32_t b)
{
    struct tpl_span d = {0, 0};
    bool first = true;
    while (a < b) {
        const char *nl = memchr(s + a, '\n', b - a);
        uint32_t e = nl ? (uint32_t)(nl - s) : b, w = a;
        while (w < e && is_blank(s[w]))
            w++;
        bool blank = w == e || (s[w] == '\r' && w + 1 == e);
        if (!blank && first) {
            d = (struct tpl_span){a, w - a};
            first = false;
        } else if (!blank) {
            uint32_t k = 0;
            while (k < d.len && k < w - a && s[a + k] == s[d.off + k])
                k++;
            d.len = k;
        }
        a = e + 1;
    }
    return d;
}

void tpl_standalone(struct compiler *c)
{
    struct token *t = c->toks.v;
    uint32_t n = c->toks.n;
    /* decide first, from the untrimmed text, then trim */
    for (uint32_t i = 0; i < n; i++) {
        if (!can_stand_alone(t[i].kind))
            continue;
        if (i + 1 < n && pair(c, i) && clear_before(c, i) && clear_after(c, i + 1)) {
            t[i].standalone = t[i + 1].standalone = true;
            t[i + 1].keep_eol = t[i].kind == TOK_BLOCK;
            i++;
        } else if (clear_before(c, i) && clear_after(c, i)) {
            t[i].standalone = true;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!t[i].standalone)
            continue;
        bool first_of_pair = i + 1 < n && t[i + 1].standalone && t[i + 1].start == t[i].end;
        uint32_t j = first_of_pair ? i + 1 : i;
        trim_line(c, i, j, t[j].keep_eol);
        i = j;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (t[i].kind != TOK_BLOCK || !t[i].standalone || t[t[i].match].keep_eol)
            continue;
        uint32_t m = t[i].match;
        uint32_t a = t[i + 1].kind == TOK_TEXT ? t[i + 1].start : t[i].end;
        uint32_t b = t[m - 1].kind == TOK_TEXT ? t[m - 1].end : t[m].start;
        t[i].dedent = common_indent(c->src, a, a < b ? b : a);
    }
}
