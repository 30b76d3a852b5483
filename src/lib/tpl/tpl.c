/* tpl.c - the template compiler.
 *
 * Each region (the template, then each partial it asks for) goes through
 * four passes over its source:
 *   1. lex: text and tags, applying set-delimiter tags as they come;
 *   2. match: pair every section, parent and block with its closing tag;
 *   3. standalone: find the tags that have a line to themselves and trim
 *      that line from the neighbouring text (the whitespace before such a
 *      partial, parent or block becomes its indentation);
 *   4. emit: ops, resolving names (struct binding) and queuing partials.
 * Partials are compiled from a queue, not by recursion, so a chain of
 * partials cannot exhaust the stack; a partial is compiled once per name
 * (and, in the struct binding, per context stack it is used in).
 *
 * Indentation follows the textual model of the spec: a standalone partial's
 * lines are indented as if its source had been indented. The renderer
 * writes the current indentation before every op flagged OPF_BOL (the first
 * thing on a source line) and after every inner newline of a text. Blocks
 * are re-indented too (inheritance module): the common indentation of a
 * standalone block's lines is removed here (dedent) and the indentation of
 * the place it is rendered at is added by the renderer.
 */
#include "tpl/tpl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "tpl/tpl_internal.h"

#define MAX_DELIM    32          /* bytes of a delimiter */
#define MAX_REGIONS  4096        /* partial instances in one template */
#define MAX_POOL     (1u << 30)  /* bytes of source in one template */
#define MAX_FILE     (16u << 20) /* bytes of one template file */
#define DEFAULT_OTAG ((struct tpl_span){0, 2})
#define DEFAULT_CTAG ((struct tpl_span){2, 2})

/* ---- compiler state ------------------------------------------------------ */

enum tok_kind {
    TOK_TEXT,
    TOK_VAR,
    TOK_SECTION,
    TOK_INVERTED,
    TOK_CLOSE,
    TOK_PARTIAL,
    TOK_PARENT,
    TOK_BLOCK,
    TOK_COMMENT,
    TOK_DELIM,
};

struct token {
    uint8_t kind;
    bool escape;                /* TOK_VAR: {{x}}, not {{{x}}} or {{&x}} */
    bool dynamic;               /* TOK_PARTIAL, TOK_PARENT: {{>*x}} */
    bool standalone;            /* alone on its line, which is not output */
    bool keep_eol;              /* a block opened and closed alone on a line keeps the newline */
    uint32_t start, end;        /* source offsets; a text's shrink with standalone trimming */
    uint32_t name, name_len;    /* the tag's trimmed content */
    struct tpl_span indent;     /* standalone: whitespace before the tag (source) */
    struct tpl_span dedent;     /* standalone TOK_BLOCK: common indentation (source) */
    struct tpl_span otag, ctag; /* TOK_SECTION: the delimiters in effect (pool) */
    uint32_t match;             /* index of the matching open or close tag */
    struct tpl_pos pos;
};

/* A region while compiling. */
struct cregion {
    uint32_t frames, n_frames; /* struct binding: its context stack, in c->frames */
    uint32_t from;             /* the region that first asked for it ... */
    struct tpl_pos from_pos;   /* ... and where */
};

/* A section, parent or block being emitted. */
struct open {
    uint32_t tok;
    uint32_t op;            /* its first op; TPL_NONE for the override of a block */
    uint32_t n_ctx;         /* context stack depth to return to */
    struct tpl_span dedent; /* of the code around it */
    uint32_t pending;       /* TOK_PARENT: its first override in c->pending */
};

struct compiler {
    const struct tpl_env *env;
    struct strbuf pool;
    VEC(struct tpl_op) ops;
    VEC(struct tpl_pos) pos;
    VEC(struct tpl_name) names;
    VEC(const struct tpl_field *) paths;
    VEC(struct tpl_section) sections;
    VEC(struct tpl_call) calls;
    VEC(struct tpl_override) overrides;
    VEC(struct tpl_region) regions;
    VEC(struct cregion) cregions;
    VEC(struct tpl_frame) frames; /* every region's context stack, back to back */
    struct tpl_span otag0, ctag0; /* delimiters region 0 starts with */

    /* the region being compiled */
    uint32_t region;
    const char *src; /* = pool.buf + base, stable while the region compiles */
    uint32_t base, len;
    VEC(struct token) toks;
    VEC(uint32_t) stack;
    VEC(struct open) opens;
    VEC(struct tpl_frame) ctx;        /* struct binding: context stack here */
    VEC(struct tpl_override) pending; /* overrides of the parents being emitted */
    bool at_bol;                      /* the next op starts a source line */
    struct tpl_span dedent;           /* removed from the start of each line (source) */

    char *err;
    size_t errlen;
};

static struct view region_name(const struct compiler *c, uint32_t region)
{
    struct tpl_span s = c->regions.v[region].name;
    return (struct view){c->pool.buf + s.off, s.len};
}

int tpl_verror(char *err, size_t errlen, int rc, struct view name, struct tpl_pos pos,
               const char *fmt, va_list ap)
{
    if (!errlen)
        return rc;
    int n = pos.line
                ? snprintf(err, errlen, "%.*s:%u:%u: ", (int)name.len, name.p, pos.line, pos.col)
                : snprintf(err, errlen, "%.*s: ", (int)name.len, name.p);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    return rc;
}

int tpl_error(char *err, size_t errlen, int rc, struct view name, struct tpl_pos pos,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tpl_verror(err, errlen, rc, name, pos, fmt, ap);
    va_end(ap);
    return rc;
}

#define fail(c, pos, ...)                                                                          \
    tpl_error((c)->err, (c)->errlen, -EINVAL, region_name(c, (c)->region), pos, __VA_ARGS__)
#define oom(c) fail(c, (struct tpl_pos){0, 0}, "out of memory")

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

static int lex(struct compiler *c)
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

static int match(struct compiler *c)
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

static void standalone(struct compiler *c)
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

/* ---- pass 4: emitting ---------------------------------------------------- */

static int emit(struct compiler *c, struct tpl_op op, struct tpl_pos pos)
{
    if (VEC_PUSH(c->ops, op) || VEC_PUSH(c->pos, pos))
        return oom(c);
    return 0;
}

/* Flags of a tag's op: a standalone tag is not on any output line; any
 * other takes the start of the line if nothing came before it. */
static uint8_t line_flags(struct compiler *c, const struct token *t)
{
    if (t->standalone)
        return OPF_STANDALONE;
    uint8_t f = c->at_bol ? OPF_BOL : 0;
    c->at_bol = false;
    return f;
}

/* x without the part of it that the dedent in effect already removes. */
static struct tpl_span relative(const struct compiler *c, struct tpl_span x)
{
    uint32_t k = 0;
    while (k < x.len && k < c->dedent.len && c->src[x.off + k] == c->src[c->dedent.off + k])
        k++;
    return (struct tpl_span){c->base + x.off + k, x.len - k};
}

static int emit_text(struct compiler *c, const struct token *t)
{
    const char *s = c->src;
    uint32_t a = t->start;
    while (a < t->end) {
        uint32_t e = t->end;
        if (c->dedent.len) { /* one op per line, each without the dedent */
            const char *nl = memchr(s + a, '\n', t->end - a);
            e = nl ? (uint32_t)(nl - s) + 1 : t->end;
            if (a == 0 || s[a - 1] == '\n')
                for (uint32_t k = 0; k < c->dedent.len && a < e && s[a] == s[c->dedent.off + k];
                     k++)
                    a++;
        }
        if (a < e) {
            bool blank_line = s[a] == '\n' || (s[a] == '\r' && a + 1 < e && s[a + 1] == '\n');
            struct tpl_op op = {
                .code = OP_TEXT,
                .flags = c->at_bol && !blank_line ? OPF_BOL : 0,
                .text = {c->base + a, e - a},
            };
            if (emit(c, op, t->pos) < 0)
                return -ENOMEM;
            c->at_bol = s[e - 1] == '\n';
        }
        a = e;
    }
    return 0;
}

static const struct tpl_field *find_field(const struct tpl_desc *d, const char *s, size_t len)
{
    for (size_t i = 0; i < d->n_fields; i++) {
        const char *name = d->fields[i].name;
        if (strnlen(name, len + 1) == len && memcmp(name, s, len) == 0)
            return &d->fields[i];
    }
    return NULL;
}

enum use { USE_VAR, USE_SECTION, USE_NAME };

static bool is_struct(const struct tpl_field *f)
{
    return f->type == TPL_T_STRUCT || f->type == TPL_T_STRUCT_PTR;
}

/* Struct binding: the frame and the path of fields that name t refers to. */
static int resolve_struct(struct compiler *c, const struct token *t, enum use use,
                          struct tpl_name *n, const struct tpl_field **fieldp)
{
    const char *s = c->src + t->name;
    uint32_t len = t->name_len;
    if (use == USE_NAME)
        return fail(c, t->pos, "dynamic names need the dynamic binding");
    if (len == 1 && s[0] == '.') {
        const struct tpl_frame *top = &c->ctx.v[c->ctx.n - 1];
        if (use == USE_VAR && top->desc)
            return fail(c, t->pos, "'.' is a %s and cannot be interpolated", top->desc->name);
        n->desc = top->desc;
        n->field = top->field;
        *fieldp = top->field;
        return 0;
    }

    const char *dot = memchr(s, '.', len);
    uint32_t seg = dot ? (uint32_t)(dot - s) : len;
    const struct tpl_field *f = NULL;
    for (uint32_t i = c->ctx.n; i-- > 0 && !f;) {
        n->desc = c->ctx.v[i].desc;
        f = n->desc ? find_field(n->desc, s, seg) : NULL;
    }
    if (!f)
        return fail(c, t->pos, "unknown name '%.*s'", (int)seg, s);
    n->path = c->paths.n;
    for (;;) {
        if (VEC_PUSH(c->paths, f))
            return oom(c);
        n->n_path++;
        if (seg == len)
            break;
        uint32_t from = seg + 1;
        dot = memchr(s + from, '.', len - from);
        uint32_t next = dot ? (uint32_t)(dot - s) : len;
        if (!is_struct(f))
            return fail(c, t->pos, "'%.*s' is not a struct", (int)seg, s);
        const struct tpl_field *g = find_field(f->desc, s + from, next - from);
        if (!g)
            return fail(c, t->pos, "%s has no field '%.*s'", f->desc->name, (int)(next - from),
                        s + from);
        f = g;
        seg = next;
    }
    if (use == USE_VAR && (is_struct(f) || f->type == TPL_T_SEQ))
        return fail(c, t->pos, "'%.*s' is a %s: use it as a section", (int)len, s,
                    f->type == TPL_T_SEQ ? "sequence" : "struct");
    *fieldp = f;
    return 0;
}

/* Adds names[] entry for tag t. In the struct binding *fieldp is the field
 * it ends on (NULL: "." on a struct frame). */
static int resolve(struct compiler *c, const struct token *t, enum use use, uint32_t *idx,
                   const struct tpl_field **fieldp)
{
    struct tpl_name n = {.text = {c->base + t->name, t->name_len}};
    *fieldp = NULL;
    if (c->env->root) {
        int r = resolve_struct(c, t, use, &n, fieldp);
        if (r < 0)
            return r;
    }
    *idx = c->names.n;
    return VEC_PUSH(c->names, n) ? oom(c) : 0;
}

static bool same_frame(const struct tpl_frame *a, const struct tpl_frame *b)
{
    return a->desc == b->desc && a->field == b->field;
}

/* The region of partial t in the current context, queued if new. In the
 * struct binding a partial compiles differently in each context stack; only
 * the innermost frame of each type matters to a lookup, so the stack is
 * reduced to those (which also makes recursion through data finite). */
static int region_for(struct compiler *c, const struct token *t, uint32_t *region)
{
    /* innermost first, skipping types already seen (there are few types) */
    uint32_t first = c->frames.n;
    for (uint32_t i = c->ctx.n; i-- > 0;) {
        bool seen = false;
        for (uint32_t k = first; k < c->frames.n && !seen; k++)
            seen = same_frame(&c->ctx.v[i], &c->frames.v[k]);
        if (!seen && VEC_PUSH(c->frames, c->ctx.v[i]))
            return oom(c);
    }
    for (uint32_t a = first, b = c->frames.n; a + 1 < b; a++, b--) { /* outermost first again */
        struct tpl_frame f = c->frames.v[a];
        c->frames.v[a] = c->frames.v[b - 1];
        c->frames.v[b - 1] = f;
    }
    uint32_t n_frames = c->frames.n - first;
    for (uint32_t r = 1; r < c->regions.n; r++) {
        struct tpl_span name = c->regions.v[r].name;
        const struct cregion *cr = &c->cregions.v[r];
        if (name.len == t->name_len &&
            memcmp(c->pool.buf + name.off, c->src + t->name, name.len) == 0 &&
            cr->n_frames == n_frames &&
            (!n_frames || memcmp(c->frames.v + cr->frames, c->frames.v + first,
                                 n_frames * sizeof(struct tpl_frame)) == 0)) {
            c->frames.n = first;
            *region = r;
            return 0;
        }
    }
    if (c->regions.n >= MAX_REGIONS)
        return fail(c, t->pos, "more than %u partials", MAX_REGIONS);
    *region = c->regions.n;
    struct tpl_region reg = {.name = {c->base + t->name, t->name_len}, .ip = TPL_NONE};
    struct cregion cr = {
        .frames = first, .n_frames = n_frames, .from = c->region, .from_pos = t->pos};
    if (VEC_PUSH(c->regions, reg) || VEC_PUSH(c->cregions, cr))
        return oom(c);
    return 0;
}

static int open_scope(struct compiler *c, uint32_t tok, uint32_t op)
{
    struct open o = {
        .tok = tok, .op = op, .n_ctx = c->ctx.n, .dedent = c->dedent, .pending = c->pending.n};
    return VEC_PUSH(c->opens, o) ? oom(c) : 0;
}

/* Sections and inverted sections. *i may move to the closing tag: the body
 * of a lambda (known in the struct binding) is text for the lambda. */
static int open_section(struct compiler *c, uint32_t *i)
{
    const struct token *t = &c->toks.v[*i];
    const struct tpl_field *f;
    uint32_t name, raw = TPL_NONE;
    int r = resolve(c, t, USE_SECTION, &name, &f);
    if (r < 0)
        return r;
    if (t->kind == TOK_SECTION) {
        const struct token *close = &c->toks.v[t->match];
        struct tpl_section sec = {
            .body = {c->base + t->end, close->start - t->end}, .otag = t->otag, .ctag = t->ctag};
        raw = c->sections.n;
        if (VEC_PUSH(c->sections, sec))
            return oom(c);
    }
    struct tpl_op op = {
        .code = t->kind == TOK_SECTION ? OP_SECTION : OP_INVERTED,
        .flags = line_flags(c, t) & OPF_BOL,
        .sect = {.name = name, .jump = TPL_NONE, .raw = raw},
    };
    if ((r = open_scope(c, *i, c->ops.n)) < 0 || (r = emit(c, op, t->pos)) < 0)
        return r;
    if (!c->env->root || t->kind != TOK_SECTION)
        return 0;

    struct tpl_frame frame = c->ctx.v[c->ctx.n - 1]; /* "." on a struct */
    if (f && f->type == TPL_T_LAMBDA) {
        *i = t->match - 1;
        return 0;
    }
    if (f && (is_struct(f) || f->type == TPL_T_SEQ))
        frame = (struct tpl_frame){.desc = f->desc};
    else if (f)
        frame = (struct tpl_frame){.field = f};
    return VEC_PUSH(c->ctx, frame) ? oom(c) : 0;
}

/* Partials and parents: static names become regions, dynamic ones names. */
static int open_call(struct compiler *c, uint32_t i)
{
    const struct token *t = &c->toks.v[i];
    const struct tpl_field *f;
    struct tpl_call call = {.indent = relative(c, t->indent), .next = TPL_NONE};
    int r = t->dynamic ? resolve(c, t, USE_NAME, &call.target, &f) : region_for(c, t, &call.target);
    if (r < 0)
        return r;
    bool parent = t->kind == TOK_PARENT;
    struct tpl_op op = {
        .code = parent ? (t->dynamic ? OP_DYN_PARENT : OP_PARENT)
                       : (t->dynamic ? OP_DYN_PARTIAL : OP_PARTIAL),
        .flags = line_flags(c, t),
        .call = c->calls.n,
    };
    if (VEC_PUSH(c->calls, call))
        return oom(c);
    if (parent && (r = open_scope(c, i, c->ops.n)) < 0)
        return r;
    return emit(c, op, t->pos);
}

/* A block inside a parent overrides the parent's block: its body is
 * emitted here and run from the parent. Elsewhere a block is a place that
 * can be overridden, with its default body. */
static int open_block(struct compiler *c, uint32_t i, bool override)
{
    const struct token *t = &c->toks.v[i];
    int r;
    if (override) {
        struct tpl_override ov = {.block = {c->base + t->name, t->name_len}, .ip = c->ops.n};
        if ((r = open_scope(c, i, TPL_NONE)) < 0)
            return r;
        if (VEC_PUSH(c->pending, ov))
            return oom(c);
        c->at_bol = true; /* an override is rendered as a template of its own */
    } else {
        struct tpl_span site = t->dedent.len ? t->dedent : t->indent;
        struct tpl_call call = {
            .block = {c->base + t->name, t->name_len},
            .indent = relative(c, site),
            .next = TPL_NONE,
        };
        struct tpl_op op = {.code = OP_BLOCK, .flags = line_flags(c, t), .call = c->calls.n};
        if (VEC_PUSH(c->calls, call))
            return oom(c);
        if ((r = open_scope(c, i, c->ops.n)) < 0 || (r = emit(c, op, t->pos)) < 0)
            return r;
    }
    if (t->standalone)
        c->dedent = t->dedent;
    return 0;
}

static int close_scope(struct compiler *c, uint32_t i)
{
    const struct token *t = &c->toks.v[i];
    struct open o = c->opens.v[--c->opens.n];
    uint8_t kind = c->toks.v[o.tok].kind;
    int r;
    /* "{{/x}}" first on a line: the indentation belongs inside the scope */
    if (!t->standalone && c->at_bol && kind != TOK_PARENT) {
        struct tpl_op mark = {.code = OP_TEXT, .flags = OPF_BOL, .text = {0, 0}};
        if ((r = emit(c, mark, t->pos)) < 0)
            return r;
    }
    c->dedent = o.dedent;
    c->ctx.n = o.n_ctx;
    if (!t->standalone || t->keep_eol)
        c->at_bol = false;

    switch (kind) {
    case TOK_SECTION:
        c->ops.v[o.op].sect.jump = c->ops.n;
        return emit(c, (struct tpl_op){.code = OP_END, .sect = {.jump = o.op}}, t->pos);
    case TOK_INVERTED:
        c->ops.v[o.op].sect.jump = c->ops.n;
        return 0;
    case TOK_BLOCK:
        if (o.op != TPL_NONE)
            c->calls.v[c->ops.v[o.op].call].next = c->ops.n + 1;
        return emit(c, (struct tpl_op){.code = OP_RETURN}, t->pos);
    default: { /* TOK_PARENT: its overrides, in one run */
        struct tpl_call *call = &c->calls.v[c->ops.v[o.op].call];
        call->overrides = c->overrides.n;
        call->n_overrides = c->pending.n - o.pending;
        call->next = c->ops.n;
        for (uint32_t k = o.pending; k < c->pending.n; k++)
            if (VEC_PUSH(c->overrides, c->pending.v[k]))
                return oom(c);
        c->pending.n = o.pending;
        return 0;
    }
    }
}

static int emit_region(struct compiler *c)
{
    c->at_bol = true;
    c->dedent = (struct tpl_span){0, 0};
    c->opens.n = c->pending.n = 0;
    for (uint32_t i = 0; i < c->toks.n; i++) {
        const struct token *t = &c->toks.v[i];
        bool in_parent = c->opens.n && c->toks.v[c->opens.v[c->opens.n - 1].tok].kind == TOK_PARENT;
        const struct tpl_field *f;
        uint32_t name;
        int r = 0;
        switch (t->kind) {
        case TOK_TEXT:
            if (!in_parent)
                r = emit_text(c, t);
            break;
        case TOK_VAR:
            if ((r = resolve(c, t, USE_VAR, &name, &f)) == 0) {
                uint8_t flags = (line_flags(c, t) & OPF_BOL) | (t->escape ? OPF_ESCAPE : 0);
                r = emit(c, (struct tpl_op){.code = OP_VAR, .flags = flags, .sect = {.name = name}},
                         t->pos);
            }
            break;
        case TOK_SECTION:
        case TOK_INVERTED:
            r = open_section(c, &i);
            break;
        case TOK_CLOSE:
            r = close_scope(c, i);
            break;
        case TOK_PARTIAL:
        case TOK_PARENT:
            r = open_call(c, i);
            break;
        case TOK_BLOCK:
            r = open_block(c, i, in_parent);
            break;
        default:
            break; /* comments and delimiters leave nothing */
        }
        if (r < 0)
            return r;
    }
    return emit(c, (struct tpl_op){.code = OP_RETURN}, (struct tpl_pos){0, 0});
}

/* ---- regions ------------------------------------------------------------- */

static int compile_region(struct compiler *c, uint32_t region, struct view src0)
{
    const struct cregion cr = c->cregions.v[region]; /* the queue may grow */
    size_t base = c->pool.len;
    int r;
    c->region = region;
    c->regions.v[region].ip = c->ops.n;
    if (region == 0) {
        r = strbuf_append(&c->pool, src0.p, src0.len);
    } else {
        struct tpl_span name = c->regions.v[region].name;
        char *copy = malloc(name.len + 1); /* the pool may move */
        if (!copy)
            return oom(c);
        memcpy(copy, c->pool.buf + name.off, name.len);
        copy[name.len] = '\0';
        r = c->env->loader.load ? c->env->loader.load(c->env->loader.ctx, copy, name.len, &c->pool)
                                : -ENOENT;
        free(copy);
        if (r < 0) {
            c->pool.len = base;
            c->pool.buf[base] = '\0';
        }
        if (r == -ENOENT && !c->env->root)
            return emit(c, (struct tpl_op){.code = OP_RETURN}, (struct tpl_pos){0, 0});
        if (r < 0) {
            struct view from = region_name(c, cr.from), me = region_name(c, region);
            return tpl_error(c->err, c->errlen, -EINVAL, from, cr.from_pos,
                             "cannot load partial '%.*s': %s", (int)me.len, me.p, strerror(-r));
        }
    }
    if (r < 0 || c->pool.len >= MAX_POOL)
        return fail(c, (struct tpl_pos){1, 1}, r < 0 ? "out of memory" : "templates too large");
    c->base = (uint32_t)base;
    c->len = (uint32_t)(c->pool.len - base);
    c->src = c->pool.buf + base;

    c->ctx.n = 0;
    for (uint32_t k = 0; k < cr.n_frames; k++)
        if (VEC_PUSH(c->ctx, c->frames.v[cr.frames + k]))
            return oom(c);
    if ((r = lex(c)) < 0 || (r = match(c)) < 0)
        return r;
    standalone(c);
    return emit_region(c);
}

/* The first guess of the output size: the text of the template itself
 * and a little per variable; renders raise it to what they produce. */
static size_t estimate(const struct compiler *c)
{
    uint32_t end = c->regions.n > 1 ? c->regions.v[1].ip : c->ops.n;
    size_t n = 64;
    for (uint32_t i = 0; i < end && i < c->ops.n; i++)
        n += c->ops.v[i].code == OP_TEXT ? c->ops.v[i].text.len : 16;
    return n;
}

static void compiler_free(struct compiler *c)
{
    strbuf_free(&c->pool);
    free(c->ops.v);
    free(c->pos.v);
    free(c->names.v);
    free(c->paths.v);
    free(c->sections.v);
    free(c->calls.v);
    free(c->overrides.v);
    free(c->regions.v);
    free(c->cregions.v);
    free(c->frames.v);
    free(c->toks.v);
    free(c->stack.v);
    free(c->opens.v);
    free(c->ctx.v);
    free(c->pending.v);
}

static int delimiter(struct compiler *c, struct view d, struct tpl_span dflt, struct tpl_span *out)
{
    *out = dflt;
    if (!d.p)
        return 0;
    *out = (struct tpl_span){(uint32_t)c->pool.len, (uint32_t)d.len};
    return strbuf_append(&c->pool, d.p, d.len);
}

struct tpl *tpl_compile_env(struct view name, struct view src, const struct tpl_env *env, char *err,
                            size_t errlen)
{
    struct compiler c = {.env = env, .err = err, .errlen = errlen};
    struct tpl *t = NULL;
    struct tpl_frame root = {.desc = env->root};
    if (errlen)
        err[0] = '\0';
    if (src.len >= MAX_POOL || name.len >= MAX_POOL) {
        tpl_error(err, errlen, -EINVAL, name, (struct tpl_pos){1, 1}, "template too large");
        goto out;
    }
    /* the pool starts with the default delimiters and the template's name */
    struct tpl_region r0 = {.name = {4, (uint32_t)name.len}, .ip = 0};
    struct cregion cr0 = {.frames = 0};
    bool nomem = strbuf_append(&c.pool, "{{}}", 4) || strbuf_append(&c.pool, name.p, name.len) ||
                 delimiter(&c, env->otag, DEFAULT_OTAG, &c.otag0) ||
                 delimiter(&c, env->ctag, DEFAULT_CTAG, &c.ctag0) || VEC_PUSH(c.regions, r0);
    /* struct binding: region 0 starts in the context given, else at the root */
    for (size_t k = 0; env->root && k < env->n_frames && !nomem; k++) /* types only */
        nomem = VEC_PUSH(c.frames, (struct tpl_frame){.desc = env->frames[k].desc,
                                                      .field = env->frames[k].field});
    if (env->root && !env->n_frames && !nomem)
        nomem = VEC_PUSH(c.frames, root);
    cr0.n_frames = c.frames.n;
    if (nomem || VEC_PUSH(c.cregions, cr0)) {
        tpl_error(err, errlen, -ENOMEM, name, (struct tpl_pos){0, 0}, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < c.regions.n; k++) /* the queue grows as partials are found */
        if (compile_region(&c, k, src) < 0)
            goto out;

    t = ALLOC_INIT(struct tpl, {
                                   .ops = c.ops.v,
                                   .pos = c.pos.v,
                                   .n_ops = c.ops.n,
                                   .pool = c.pool.buf,
                                   .names = c.names.v,
                                   .paths = c.paths.v,
                                   .sections = c.sections.v,
                                   .calls = c.calls.v,
                                   .overrides = c.overrides.v,
                                   .regions = c.regions.v,
                                   .n_regions = c.regions.n,
                                   .root = env->root,
                                   .loader = env->loader,
                                   .size_hint = estimate(&c),
                               });
    if (!t) {
        tpl_error(err, errlen, -ENOMEM, name, (struct tpl_pos){0, 0}, "out of memory");
        goto out;
    }
    /* the template owns these now; the compiler's own tables go */
    c.pool = (struct strbuf){0};
    c.ops.v = NULL;
    c.pos.v = NULL;
    c.names.v = NULL;
    c.paths.v = NULL;
    c.sections.v = NULL;
    c.calls.v = NULL;
    c.overrides.v = NULL;
    c.regions.v = NULL;
out:
    compiler_free(&c);
    return t;
}

struct tpl *tpl_compile(const char *name, const char *src, size_t len, const struct tpl_desc *root,
                        const struct tpl_partials *partials, char *err, size_t errlen)
{
    struct tpl_env env = {.root = root};
    if (partials)
        env.loader = *partials;
    return tpl_compile_env((struct view){name, strlen(name)}, (struct view){src, len}, &env, err,
                           errlen);
}

/* ---- files --------------------------------------------------------------- */

/* Appends the regular file at path; -EISDIR for anything else (O_NONBLOCK:
 * a FIFO must not block the compile). */
static int read_file(const char *path, struct strbuf *sb)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    size_t start = sb->len;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode))
        r = -EISDIR;
    else if (st.st_size > MAX_FILE)
        r = -EFBIG;
    else
        r = strbuf_reserve(sb, (size_t)st.st_size);
    while (r == 0) {
        ssize_t n = read(fd, sb->buf + sb->len, sb->cap - sb->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        sb->len += (size_t)n;
        if (sb->len == sb->cap && sb->len - start >= MAX_FILE)
            r = -EFBIG;
        else if (sb->len == sb->cap)
            r = strbuf_reserve(sb, 4096);
    }
    if (sb->buf)
        sb->buf[sb->len] = '\0';
    close(fd);
    return r;
}

/* Partials live beside the template: "name", else "name.mustache". */
static int load_file(void *ctx, const char *name, size_t len, struct strbuf *src)
{
    const char *dir = ctx;
    if (memchr(name, '/', len) || memchr(name, '\0', len) || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return -ENOENT;
    struct strbuf path = {0};
    size_t before = src->len;
    int r = strbuf_printf(&path, "%s/%s", dir, name);
    if (r == 0) {
        r = read_file(path.buf, src);
        if ((r == -ENOENT || r == -EISDIR) && (r = strbuf_append_str(&path, ".mustache")) == 0) {
            src->len = before;
            r = read_file(path.buf, src);
        }
    }
    if (r < 0)
        src->len = before;
    if (r == -EISDIR) /* only files are partials */
        r = -ENOENT;
    strbuf_free(&path);
    return r;
}

struct tpl *tpl_compile_file(const char *path, const struct tpl_desc *root, char *err,
                             size_t errlen)
{
    struct view name = {path, strlen(path)};
    struct strbuf src = {0};
    struct tpl *t = NULL;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) {
        tpl_error(err, errlen, -ENOMEM, name, (struct tpl_pos){0, 0}, "out of memory");
        goto out_free_src;
    }
    int r = read_file(path, &src);
    if (r < 0) {
        tpl_error(err, errlen, r, name, (struct tpl_pos){0, 0}, "%s", strerror(-r));
        goto out_free_dir;
    }
    struct tpl_env env = {.root = root, .loader = {.load = load_file, .ctx = dir}};
    t = tpl_compile_env(name, (struct view){src.buf, src.len}, &env, err, errlen);
    if (t) {
        t->dir = dir;
        goto out_free_src;
    }
out_free_dir:
    free(dir);
out_free_src:
    strbuf_free(&src);
    return t;
}

void tpl_free(struct tpl *t)
{
    if (!t)
        return;
    free(t->ops);
    free(t->pos);
    free(t->pool);
    free(t->names);
    free(t->paths);
    free(t->sections);
    free(t->calls);
    free(t->overrides);
    free(t->regions);
    free(t->dir);
    free(t);
}
