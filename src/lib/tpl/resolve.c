/* resolve.c - names and partials, resolved at compile time (resolve.h). In
 * the struct binding a name becomes a context frame's type and a path of
 * fields from it, so rendering it costs a few pointer additions.
 */
#include "tpl/resolve.h"

#include <string.h>

#define MAX_REGIONS 4096 /* partial instances in one template */

static const struct tpl_field *find_field(const struct tpl_desc *d, const char *s, size_t len)
{
    for (size_t i = 0; i < d->n_fields; i++) {
        const char *name = d->fields[i].name;
        if (strnlen(name, len + 1) == len && memcmp(name, s, len) == 0)
            return &d->fields[i];
    }
    return NULL;
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
        if (!tpl_is_struct(f))
            return fail(c, t->pos, "'%.*s' is not a struct", (int)seg, s);
        const struct tpl_field *g = find_field(f->desc, s + from, next - from);
        if (!g)
            return fail(c, t->pos, "%s has no field '%.*s'", f->desc->name, (int)(next - from),
                        s + from);
        f = g;
        seg = next;
    }
    if (use == USE_VAR && (tpl_is_struct(f) || f->type == TPL_T_SEQ))
        return fail(c, t->pos, "'%.*s' is a %s: use it as a section", (int)len, s,
                    f->type == TPL_T_SEQ ? "sequence" : "struct");
    *fieldp = f;
    return 0;
}

/* Adds names[] entry for tag t. In the struct binding *fieldp is the field
 * it ends on (NULL: "." on a struct frame). */
int tpl_resolve(struct compiler *c, const struct token *t, enum use use, uint32_t *idx,
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
int tpl_region_for(struct compiler *c, const struct token *t, uint32_t *region)
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
