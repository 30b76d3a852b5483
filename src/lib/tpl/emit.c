/* emit.c - pass 4 of the compiler (emit.h): ops from tokens. A section,
 * parent or block opens a scope (c->opens) that its closing tag ends, which
 * sets where the opening op jumps or its call goes on; the overrides of a
 * parent are gathered in c->pending until the parent closes. Indentation
 * follows the textual model described in tpl.c.
 */
#include "tpl/emit.h"

#include <string.h>

#include "tpl/resolve.h"

int tpl_emit(struct compiler *c, struct tpl_op op, struct tpl_pos pos)
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
            if (tpl_emit(c, op, t->pos) < 0)
                return -ENOMEM;
            c->at_bol = s[e - 1] == '\n';
        }
        a = e;
    }
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
    int r = tpl_resolve(c, t, USE_SECTION, &name, &f);
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
    if ((r = open_scope(c, *i, c->ops.n)) < 0 || (r = tpl_emit(c, op, t->pos)) < 0)
        return r;
    if (!c->env->root || t->kind != TOK_SECTION)
        return 0;

    struct tpl_frame frame = c->ctx.v[c->ctx.n - 1]; /* "." on a struct */
    if (f && f->type == TPL_T_LAMBDA) {
        *i = t->match - 1;
        return 0;
    }
    if (f && (tpl_is_struct(f) || f->type == TPL_T_SEQ))
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
    int r = t->dynamic ? tpl_resolve(c, t, USE_NAME, &call.target, &f)
                       : tpl_region_for(c, t, &call.target);
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
    return tpl_emit(c, op, t->pos);
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
        if ((r = open_scope(c, i, c->ops.n)) < 0 || (r = tpl_emit(c, op, t->pos)) < 0)
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
        if ((r = tpl_emit(c, mark, t->pos)) < 0)
            return r;
    }
    c->dedent = o.dedent;
    c->ctx.n = o.n_ctx;
    if (!t->standalone || t->keep_eol)
        c->at_bol = false;

    switch (kind) {
    case TOK_SECTION:
        c->ops.v[o.op].sect.jump = c->ops.n;
        return tpl_emit(c, (struct tpl_op){.code = OP_END, .sect = {.jump = o.op}}, t->pos);
    case TOK_INVERTED:
        c->ops.v[o.op].sect.jump = c->ops.n;
        return 0;
    case TOK_BLOCK:
        if (o.op != TPL_NONE)
            c->calls.v[c->ops.v[o.op].call].next = c->ops.n + 1;
        return tpl_emit(c, (struct tpl_op){.code = OP_RETURN}, t->pos);
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

int tpl_emit_region(struct compiler *c)
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
            if ((r = tpl_resolve(c, t, USE_VAR, &name, &f)) == 0) {
                uint8_t flags = (line_flags(c, t) & OPF_BOL) | (t->escape ? OPF_ESCAPE : 0);
                r = tpl_emit(
                    c, (struct tpl_op){.code = OP_VAR, .flags = flags, .sect = {.name = name}},
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
    return tpl_emit(c, (struct tpl_op){.code = OP_RETURN}, (struct tpl_pos){0, 0});
}
