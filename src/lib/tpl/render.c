/* render.c - running a compiled template: the loop, the ops it runs
 * itself (text, variables, sections), and the render functions of tpl.h.
 *
 * One loop over the ops with three explicit stacks, all in the scratch: the
 * context stack (where names are looked up: one frame per section level),
 * the control stack (sections being iterated, calls to return from) and the
 * override scopes of the parents being rendered. Nothing recurses, so a
 * render is safe on a small coroutine stack whatever the template does, and
 * TPL_MAX_DEPTH bounds the calls however the data recurse.
 *
 * The ops that run for every variable and every item of a section stay in
 * this file, so that the compiler can inline them into the loop: in files
 * of their own they cost about 5% more instructions per render of
 * bench/micro_tpl (callgrind). The ops that call (partials, parents,
 * blocks, lambdas) are in calls.c, and lookup.c and format.c hold what
 * those ops share.
 *
 * Indentation is a stack of bytes too: the current indentation is
 * ind.buf[ind_start .. ind.len). A standalone partial appends its own; an
 * inline one starts an empty indentation on top, as the spec's textual
 * model says (its lines are not part of the indented source).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/coro.h"
#include "tpl/calls.h"
#include "tpl/format.h"
#include "tpl/lookup.h"
#include "tpl/render.h"
#include "tpl/tpl.h"
#include "tpl/tpl_internal.h"

/* ---- errors ------------------------------------------------------------ */

int tpl_render_fail(const struct render *r, int rc, const char *fmt, ...)
{
    const struct tpl *t = r->t;
    uint32_t region = 0;
    for (uint32_t i = 1; i < t->n_regions; i++)
        if (t->regions[i].ip <= r->ip)
            region = i;
    struct tpl_span name = t->regions[region].name;
    va_list ap;
    va_start(ap, fmt);
    tpl_verror(r->err, r->errlen, rc, (struct view){t->pool + name.off, name.len}, t->pos[r->ip],
               fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- output ------------------------------------------------------------ */

static int append_str(struct render *r, const char *p, size_t n, bool escape)
{
    return escape ? tpl_append_escaped(r->out, p, n) : tpl_put(r->out, p, n);
}

static int append_indent(struct render *r)
{
    const struct strbuf *ind = &r->s->ind;
    return tpl_put(r->out, ind->buf + r->ind_start, ind->len - r->ind_start);
}

/* Text, indented after each inner newline that starts a non-empty line. */
static int append_text(struct render *r, const char *p, size_t n)
{
    if (likely(r->s->ind.len == r->ind_start))
        return tpl_put(r->out, p, n);
    int rc = 0;
    while (n && rc == 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) + 1 : n;
        rc = tpl_put(r->out, p, k);
        p += k;
        n -= k;
        if (rc == 0 && nl && n && p[0] != '\n' && !(p[0] == '\r' && n > 1 && p[1] == '\n'))
            rc = append_indent(r);
    }
    return rc;
}

static int append_value(struct render *r, const struct tpl_value *v, bool escape)
{
    switch (v->kind) {
    case TPL_STRING:
        return append_str(r, v->str.p, v->str.len, escape);
    case TPL_INT:
        return strbuf_append_i64(r->out, v->i);
    case TPL_DOUBLE:
        return tpl_append_double(r->out, v->d);
    case TPL_BOOL:
        return strbuf_append_str(r->out, v->b ? "true" : "false");
    default:
        return 0; /* null, lists and objects print nothing */
    }
}

static int append_field(struct render *r, const char *base, const struct tpl_field *f, bool escape)
{
    const char *p = base + f->offset;
    switch (f->type) {
    case TPL_T_STR: {
        const char *s = *(const char *const *)p;
        return s ? append_str(r, s, strlen(s), escape) : 0;
    }
    case TPL_T_CHARS:
        return append_str(r, p, strnlen(p, f->size), escape);
    case TPL_T_VIEW: {
        const struct view *v = (const struct view *)p;
        return append_str(r, v->p, v->len, escape);
    }
    case TPL_T_INT:
        return strbuf_append_i64(r->out, tpl_read_int(p, f->size));
    case TPL_T_UINT:
        return strbuf_append_u64(r->out, tpl_read_uint(p, f->size));
    case TPL_T_FLOAT:
        return tpl_append_double(r->out, tpl_read_float(p, f->size));
    case TPL_T_BOOL:
        return strbuf_append_str(r->out, *(const bool *)p ? "true" : "false");
    default:
        return 0;
    }
}

/* ---- sequences --------------------------------------------------------- */

static void gen_main(struct coro *coro, void *arg)
{
    struct gen *g = arg;
    g->fn(coro, g->parent, g->item);
}

/* Starts the generator of f; the caller then asks for items with gen_next
 * and gives it back with gen_stop, last started first stopped. */
static struct gen *gen_start(struct tpl_scratch *s, const struct tpl_field *f, const void *parent)
{
    if (s->busy == s->gens.n) {
        struct gen *g = calloc(1, sizeof(*g));
        if (!g || VEC_PUSH(s->gens, g)) {
            free(g);
            return NULL;
        }
    }
    struct gen *g = s->gens.v[s->busy];
    size_t size = f->desc->size ? f->desc->size : 1;
    if (!g->coro && !(g->coro = coro_new(0, gen_main, g)))
        return NULL;
    if (g->item_cap < size) {
        void *item = realloc(g->item, size);
        if (!item)
            return NULL;
        g->item = item;
        g->item_cap = size;
    }
    memset(g->item, 0, size);
    g->fn = f->gen;
    g->parent = parent;
    coro_reset(g->coro, gen_main, g);
    s->busy++;
    return g;
}

/* 1: an item is ready; 0: the sequence is over; <0: it aborted. */
static int gen_next(struct gen *g)
{
    int y = coro_resume(g->coro);
    return y >= 0 ? 1 : y == CORO_FINISHED ? 0 : -ECANCELED;
}

/* An abandoned generator is reset now, so its defers run now. */
static void gen_stop(struct tpl_scratch *s)
{
    struct gen *g = s->gens.v[--s->busy];
    if (!g->coro->done)
        coro_reset(g->coro, gen_main, g);
}

/* ---- sections ----------------------------------------------------------- */

static int push_section(struct render *r, struct ctl c, struct tpl_frame frame)
{
    if (VEC_PUSH(r->s->ctl, c) || VEC_PUSH(r->s->ctx, frame))
        return -ENOMEM;
    r->ip++;
    return 0;
}

/* OP_SECTION, dynamic binding. */
static int enter_value(struct render *r, const struct tpl_op *op)
{
    const struct tpl_value *v = tpl_lookup(r, &r->t->names[op->sect.name]);
    uint32_t after = op->sect.jump + 1;
    if (v && v->kind == TPL_LAMBDA)
        return tpl_call_lambda(r, v->lambda.fn, v->lambda.data, op, after);
    if (!tpl_truthy(v)) {
        r->ip = after;
        return 0;
    }
    struct ctl c = {.kind = CTL_ONCE, .ip = r->ip};
    if (v->kind == TPL_LIST) {
        c = (struct ctl){.kind = CTL_LIST, .ip = r->ip, .list = {v, 1}};
        v = v->list.items[0];
    }
    return push_section(r, c, (struct tpl_frame){.ptr = v});
}

/* OP_SECTION, struct binding. */
static int enter_struct(struct render *r, const struct tpl_op *op)
{
    const struct tpl_name *n = &r->t->names[op->sect.name];
    const struct tpl_field *f = NULL;
    const char *base = tpl_lookup_struct(r, n, &f);
    uint32_t after = op->sect.jump + 1;
    struct ctl once = {.kind = CTL_ONCE, .ip = r->ip};
    if (!base || (f && !tpl_field_truthy(base, f))) {
        r->ip = after;
        return 0;
    }
    if (!f) /* "." on a struct */
        return push_section(r, once, (struct tpl_frame){.ptr = base, .desc = n->desc});
    const char *p = base + f->offset;
    switch (f->type) {
    case TPL_T_LAMBDA:
        return tpl_call_lambda(r, f->lambda, base, op, after);
    case TPL_T_STRUCT:
        return push_section(r, once, (struct tpl_frame){.ptr = p, .desc = f->desc});
    case TPL_T_STRUCT_PTR:
        return push_section(r, once,
                            (struct tpl_frame){.ptr = *(const void *const *)p, .desc = f->desc});
    case TPL_T_SEQ: {
        struct gen *g = gen_start(r->s, f, base);
        int more = g ? gen_next(g) : -ENOMEM;
        if (more <= 0) {
            if (g)
                gen_stop(r->s);
            if (more == -ECANCELED)
                return tpl_render_fail(r, more, "generator '%s' aborted", f->name);
            r->ip = after;
            return more;
        }
        struct ctl c = {.kind = CTL_GEN, .ip = r->ip, .gen = g};
        return push_section(r, c, (struct tpl_frame){.ptr = g->item, .desc = f->desc});
    }
    default:
        return push_section(r, once, (struct tpl_frame){.ptr = base, .field = f});
    }
}

/* OP_INVERTED: is the name falsy? */
static int inverted(struct render *r, const struct tpl_op *op, bool *falsy)
{
    const struct tpl_name *n = &r->t->names[op->sect.name];
    if (!r->root->root) {
        const struct tpl_value *v = tpl_lookup(r, n);
        *falsy = !tpl_truthy(v) && !(v && v->kind == TPL_LAMBDA);
        return 0;
    }
    const struct tpl_field *f = NULL;
    const char *base = tpl_lookup_struct(r, n, &f);
    *falsy = !base || (f && !tpl_field_truthy(base, f));
    if (*falsy || !f || f->type != TPL_T_SEQ)
        return 0;
    struct gen *g = gen_start(r->s, f, base);
    int more = g ? gen_next(g) : -ENOMEM;
    if (g)
        gen_stop(r->s);
    *falsy = more == 0;
    if (more == -ECANCELED)
        return tpl_render_fail(r, more, "generator '%s' aborted", f->name);
    return more < 0 ? more : 0;
}

/* OP_END: the next item, or out of the section. */
static int next_item(struct render *r)
{
    struct tpl_scratch *s = r->s;
    struct ctl *c = &s->ctl.v[s->ctl.n - 1];
    if (c->kind == CTL_LIST && c->list.next < c->list.list->list.n) {
        s->ctx.v[s->ctx.n - 1].ptr = c->list.list->list.items[c->list.next++];
        r->ip = c->ip + 1;
        return 0;
    }
    if (c->kind == CTL_GEN) {
        int more = gen_next(c->gen);
        if (more > 0) {
            r->ip = c->ip + 1;
            return 0;
        }
        gen_stop(s);
        if (more < 0) {
            s->ctl.n--;
            return tpl_render_fail(r, more, "generator aborted");
        }
    }
    s->ctl.n--;
    s->ctx.n--;
    r->ip++;
    return 0;
}

/* ---- the loop ---------------------------------------------------------- */

static int var(struct render *r, const struct tpl_op *op)
{
    const struct tpl_name *n = &r->t->names[op->sect.name];
    bool escape = op->flags & OPF_ESCAPE;
    uint32_t ip = r->ip++;
    if (!r->root->root) {
        const struct tpl_value *v = tpl_lookup(r, n);
        if (v && v->kind == TPL_LAMBDA) {
            r->ip = ip;
            return tpl_call_lambda(r, v->lambda.fn, v->lambda.data, op, ip + 1);
        }
        return v ? append_value(r, v, escape) : 0;
    }
    const struct tpl_field *f = NULL;
    const char *base = tpl_lookup_struct(r, n, &f);
    if (!base || !f)
        return 0;
    if (f->type == TPL_T_LAMBDA) {
        r->ip = ip;
        return tpl_call_lambda(r, f->lambda, base, op, ip + 1);
    }
    return append_field(r, base, f, escape);
}

static int run(struct render *r)
{
    for (;;) {
        const struct tpl_op *op = &r->t->ops[r->ip];
        int rc = 0;
        if ((op->flags & OPF_BOL) && r->s->ind.len > r->ind_start && (rc = append_indent(r)))
            return rc;
        switch (op->code) {
        case OP_TEXT:
            rc = append_text(r, r->t->pool + op->text.off, op->text.len);
            r->ip++;
            break;
        case OP_VAR:
            rc = var(r, op);
            break;
        case OP_SECTION:
            rc = r->root->root ? enter_struct(r, op) : enter_value(r, op);
            break;
        case OP_END:
            rc = next_item(r);
            break;
        case OP_INVERTED: {
            bool falsy;
            rc = inverted(r, op, &falsy);
            r->ip = falsy ? r->ip + 1 : op->sect.jump;
            break;
        }
        case OP_PARTIAL:
        case OP_DYN_PARTIAL:
        case OP_PARENT:
        case OP_DYN_PARENT:
            rc = tpl_call_partial(r, op);
            break;
        case OP_BLOCK:
            rc = tpl_call_block(r, op);
            break;
        case OP_RETURN:
            if (!r->depth)
                return 0;
            rc = tpl_leave_call(r);
            break;
        }
        if (rc < 0)
            return rc;
    }
}

/* After a failure: stop the generators, free what calls compiled. */
static void unwind(struct tpl_scratch *s)
{
    while (s->ctl.n) {
        struct ctl *c = &s->ctl.v[--s->ctl.n];
        if (c->kind == CTL_GEN)
            gen_stop(s);
        else if (c->kind == CTL_CALL)
            tpl_free(c->call.owned);
    }
}

static struct view template_name(const struct tpl *t)
{
    return (struct view){t->pool + t->regions[0].name.off, t->regions[0].name.len};
}

static int render(const struct tpl *t, struct tpl_frame root, struct strbuf *out,
                  struct tpl_scratch *scratch, char *err, size_t errlen)
{
    struct tpl_scratch *s = scratch ? scratch : tpl_scratch_new();
    struct render r = {.s = s, .out = out, .root = t, .t = t, .err = err, .errlen = errlen};
    size_t start = out->len;
    size_t *hint = (size_t *)&t->size_hint; /* the one field renders write */
    int rc = -ENOMEM;
    if (errlen)
        err[0] = '\0';
    if (!s)
        goto out_error;
    s->ctx.n = s->scopes.n = 0;
    s->ind.len = 0;
    if (strbuf_reserve(out, __atomic_load_n(hint, __ATOMIC_RELAXED)) < 0 ||
        VEC_PUSH(s->ctx, root) < 0)
        goto out_error;

    rc = run(&r);
    out->buf[out->len] = '\0'; /* tpl_put() leaves that to the end */
    unwind(s);
    for (uint32_t i = 0; i < s->dyn.n; i++) {
        free(s->dyn.v[i].name);
        tpl_free(s->dyn.v[i].t);
    }
    s->dyn.n = 0;
    if (rc == 0) {
        size_t used = out->len - start, old = __atomic_load_n(hint, __ATOMIC_RELAXED);
        while (used > old && !__atomic_compare_exchange_n(hint, &old, used, true, __ATOMIC_RELAXED,
                                                          __ATOMIC_RELAXED))
            ;
    }
out_error:
    if (rc < 0 && errlen && !err[0])
        tpl_error(err, errlen, rc, template_name(t), (struct tpl_pos){0, 0}, "%s", strerror(-rc));
    if (!scratch)
        tpl_scratch_free(s);
    return rc;
}

int tpl_render(const struct tpl *t, const void *data, struct strbuf *out,
               struct tpl_scratch *scratch, char *err, size_t errlen)
{
    if (!t->root || !data)
        return tpl_error(err, errlen, -EINVAL, template_name(t), (struct tpl_pos){0, 0},
                         "tpl_render() needs a template compiled with a struct, and data");
    return render(t, (struct tpl_frame){.ptr = data, .desc = t->root}, out, scratch, err, errlen);
}

int tpl_render_value(const struct tpl *t, const struct tpl_value *data, struct strbuf *out,
                     struct tpl_scratch *scratch, char *err, size_t errlen)
{
    if (t->root || !data)
        return tpl_error(err, errlen, -EINVAL, template_name(t), (struct tpl_pos){0, 0},
                         "tpl_render_value() needs a template compiled without a struct, and data");
    return render(t, (struct tpl_frame){.ptr = data}, out, scratch, err, errlen);
}

struct tpl_scratch *tpl_scratch_new(void)
{
    return calloc(1, sizeof(struct tpl_scratch));
}

void tpl_scratch_free(struct tpl_scratch *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->gens.n; i++) {
        coro_free(s->gens.v[i]->coro);
        free(s->gens.v[i]->item);
        free(s->gens.v[i]);
    }
    free(s->gens.v);
    free(s->ctx.v);
    free(s->ctl.v);
    free(s->scopes.v);
    free(s->dyn.v);
    strbuf_free(&s->ind);
    strbuf_free(&s->tmp);
    free(s);
}
