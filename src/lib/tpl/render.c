/* render.c - running a compiled template.
 *
 * One loop over the ops with three explicit stacks, all in the scratch: the
 * context stack (where names are looked up: one frame per section level),
 * the control stack (sections being iterated, calls to return from) and the
 * override scopes of the parents being rendered. Nothing recurses, so a
 * render is safe on a small coroutine stack whatever the template does, and
 * TPL_MAX_DEPTH bounds the calls however the data recurse.
 *
 * Indentation is a stack of bytes too: the current indentation is
 * ind.buf[ind_start .. ind.len). A standalone partial appends its own; an
 * inline one starts an empty indentation on top, as the spec's textual
 * model says (its lines are not part of the indented source).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/itoa.h"
#include "base/strbuf.h"
#include "rt/coro.h"
#include "tpl/tpl.h"
#include "tpl/tpl_internal.h"

/* A sequence's generator and the item it fills, reused across renders. */
struct gen {
    struct coro *coro;
    tpl_gen_fn *fn;
    const void *parent;
    void *item;
    size_t item_cap;
};

enum ctl_kind { CTL_ONCE, CTL_LIST, CTL_GEN, CTL_CALL };

struct ctl {
    uint8_t kind;
    uint32_t ip;         /* sections: their OP_SECTION; calls: where to return */
    const struct tpl *t; /* calls: the template to return to */
    union {
        struct {
            const struct tpl_value *list;
            size_t next;
        } list;
        struct gen *gen;
        struct {
            uint32_t ind_start, ind_end, n_scopes;
            size_t escape_from; /* SIZE_MAX: the call's output is not escaped */
            struct tpl *owned;  /* compiled for this call (a lambda's result) */
        } call;
    };
};

/* The overrides of a parent being rendered. */
struct scope {
    const struct tpl *t;
    uint32_t first, n;
};

/* A partial named by the data, compiled for the length of one render. */
struct dyn_partial {
    char *name;
    size_t len;
    struct tpl *t; /* NULL: there is no such partial */
};

struct tpl_scratch {
    VEC(struct tpl_frame) ctx;
    VEC(struct ctl) ctl;
    VEC(struct scope) scopes;
    VEC(struct gen *) gens; /* gens.v[0 .. busy) are iterating */
    uint32_t busy;
    VEC(struct dyn_partial) dyn;
    struct strbuf ind;
    struct strbuf tmp; /* a lambda's result; output to escape */
};

struct render {
    struct tpl_scratch *s;
    struct strbuf *out;
    const struct tpl *root; /* the template being rendered */
    const struct tpl *t;    /* the template whose ops run now */
    uint32_t ip;
    uint32_t ind_start;
    uint32_t depth; /* calls on the control stack */
    char *err;
    size_t errlen;
};

/* ---- errors ------------------------------------------------------------ */

static int fail(const struct render *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(const struct render *r, int rc, const char *fmt, ...)
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

/* strbuf_append() minus the call and the NUL in the common case: a render
 * reserves its output up front and terminates the buffer when it ends. */
static inline int put(struct strbuf *out, const char *p, size_t n)
{
    if (!n)
        return 0; /* p may be NULL: an empty view */
    if (unlikely(out->cap - out->len < n))
        return strbuf_append(out, p, n);
    memcpy(out->buf + out->len, p, n);
    out->len += n;
    return 0;
}

static const struct view html_entity[256] = {
    ['&'] = VIEW_LIT("&amp;"),  ['<'] = VIEW_LIT("&lt;"),   ['>'] = VIEW_LIT("&gt;"),
    ['"'] = VIEW_LIT("&quot;"), ['\''] = VIEW_LIT("&#39;"),
};

static int append_escaped(struct strbuf *out, const char *p, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        struct view e = html_entity[(unsigned char)p[i]];
        if (likely(!e.len))
            continue;
        if (put(out, p + run, i - run) || put(out, e.p, e.len))
            return -ENOMEM;
        run = i + 1;
    }
    return put(out, p + run, n - run);
}

static int append_str(struct render *r, const char *p, size_t n, bool escape)
{
    return escape ? append_escaped(r->out, p, n) : put(r->out, p, n);
}

/* The shortest of printf's %.15g, %.16g, %.17g that reads back as d: 1.21,
 * not 1.2099999999999999. Most numbers in pages (prices, ratios) are
 * n / 10^k with few digits: that is checked exactly (dividing two exact
 * doubles rounds correctly, as reading the decimal back does) and printed
 * with integer arithmetic. Up to 15 digits at most one decimal of each
 * length reads back as d, so this is what %.15g prints; the rest go to
 * printf. */
static int append_double(struct strbuf *out, double d)
{
    static const double pow10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    bool neg = signbit(d);
    double a = neg ? -d : d;
    char buf[40];
    if (a == 0 || (a >= 1e-4 && a < 1e15)) {
        for (size_t k = 0; k < N_ELEMENTS(pow10) && a * pow10[k] < 1e15; k++) {
            uint64_t n = (uint64_t)(a * pow10[k] + 0.5);
            if ((double)n / pow10[k] != a)
                continue;
            char digits[U64_STR_MAX];
            size_t nd = u64_to_str(n, digits), at = 0;
            if (neg)
                buf[at++] = '-';
            if (nd <= k) { /* 0.0001 */
                memcpy(buf + at, "0.", 2);
                memset(buf + at + 2, '0', k - nd);
                at += 2 + k - nd;
            } else {
                memcpy(buf + at, digits, nd - k);
                at += nd - k;
                if (k)
                    buf[at++] = '.';
            }
            memcpy(buf + at, digits + nd - MIN(nd, k), MIN(nd, k));
            at += MIN(nd, k);
            return put(out, buf, at);
        }
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return strbuf_append_str(out, buf);
}

static int append_indent(struct render *r)
{
    const struct strbuf *ind = &r->s->ind;
    return put(r->out, ind->buf + r->ind_start, ind->len - r->ind_start);
}

/* Text, indented after each inner newline that starts a non-empty line. */
static int append_text(struct render *r, const char *p, size_t n)
{
    if (likely(r->s->ind.len == r->ind_start))
        return put(r->out, p, n);
    int rc = 0;
    while (n && rc == 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) + 1 : n;
        rc = put(r->out, p, k);
        p += k;
        n -= k;
        if (rc == 0 && nl && n && p[0] != '\n' && !(p[0] == '\r' && n > 1 && p[1] == '\n'))
            rc = append_indent(r);
    }
    return rc;
}

/* ---- dynamic binding --------------------------------------------------- */

static bool truthy(const struct tpl_value *v)
{
    if (!v)
        return false;
    switch (v->kind) {
    case TPL_NULL:
        return false;
    case TPL_BOOL:
        return v->b;
    case TPL_INT:
        return v->i != 0;
    case TPL_DOUBLE:
        return v->d != 0;
    case TPL_STRING:
        return v->str.len != 0;
    case TPL_LIST:
        return v->list.n != 0;
    default:
        return true;
    }
}

/* The first part of a dotted name is searched through the context stack,
 * innermost first; the other parts only in what the first one found. */
static const struct tpl_value *lookup(const struct render *r, const struct tpl_name *n)
{
    const char *s = r->t->pool + n->text.off;
    size_t len = n->text.len;
    const struct tpl_frame *ctx = r->s->ctx.v;
    uint32_t depth = r->s->ctx.n;
    if (len == 1 && s[0] == '.')
        return ctx[depth - 1].ptr;

    const char *dot = memchr(s, '.', len);
    size_t seg = dot ? (size_t)(dot - s) : len;
    const struct tpl_value *v = NULL;
    while (depth-- > 0 && !v)
        v = tpl_object_get(ctx[depth].ptr, s, seg);
    while (v && seg < len) {
        s += seg + 1;
        len -= seg + 1;
        dot = memchr(s, '.', len);
        seg = dot ? (size_t)(dot - s) : len;
        v = tpl_object_get(v, s, seg);
    }
    return v;
}

static int append_value(struct render *r, const struct tpl_value *v, bool escape)
{
    switch (v->kind) {
    case TPL_STRING:
        return append_str(r, v->str.p, v->str.len, escape);
    case TPL_INT:
        return strbuf_append_i64(r->out, v->i);
    case TPL_DOUBLE:
        return append_double(r->out, v->d);
    case TPL_BOOL:
        return strbuf_append_str(r->out, v->b ? "true" : "false");
    default:
        return 0; /* null, lists and objects print nothing */
    }
}

/* ---- struct binding ---------------------------------------------------- */

/* The struct that holds the value of n, with *f set to its field; for "."
 * on a struct, the struct itself and *f NULL. NULL when a pointer on the
 * way is NULL, or no frame of n's type is on the stack (a block override
 * rendered outside the context it was written in). */
static const char *lookup_struct(const struct render *r, const struct tpl_name *n,
                                 const struct tpl_field **f)
{
    const struct tpl_frame *ctx = r->s->ctx.v;
    uint32_t i = r->s->ctx.n;
    while (i-- > 0 && !(ctx[i].desc == n->desc && ctx[i].field == n->field))
        ;
    if (i == UINT32_MAX)
        return NULL;
    const char *p = ctx[i].ptr;
    const struct tpl_field *const *path = r->t->paths + n->path;
    *f = n->field;
    for (uint32_t k = 0; k < n->n_path; k++) {
        *f = path[k];
        if (k + 1 == n->n_path)
            break;
        p += path[k]->offset;
        if (path[k]->type == TPL_T_STRUCT_PTR && !(p = *(const char *const *)p))
            return NULL;
    }
    return p;
}

static int64_t read_int(const char *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const int8_t *)p;
    case 2:
        return *(const int16_t *)p;
    case 4:
        return *(const int32_t *)p;
    default:
        return *(const int64_t *)p;
    }
}

static uint64_t read_uint(const char *p, size_t size)
{
    switch (size) {
    case 1:
        return *(const uint8_t *)p;
    case 2:
        return *(const uint16_t *)p;
    case 4:
        return *(const uint32_t *)p;
    default:
        return *(const uint64_t *)p;
    }
}

static double read_float(const char *p, size_t size)
{
    return size == sizeof(float) ? *(const float *)p : *(const double *)p;
}

static bool field_truthy(const char *base, const struct tpl_field *f)
{
    const char *p = base + f->offset;
    switch (f->type) {
    case TPL_T_STR:
        return *(const char *const *)p && **(const char *const *)p;
    case TPL_T_CHARS:
        return f->size && p[0];
    case TPL_T_VIEW:
        return ((const struct view *)p)->len != 0;
    case TPL_T_INT:
        return read_int(p, f->size) != 0;
    case TPL_T_UINT:
        return read_uint(p, f->size) != 0;
    case TPL_T_FLOAT:
        return read_float(p, f->size) != 0;
    case TPL_T_BOOL:
        return *(const bool *)p;
    case TPL_T_STRUCT_PTR:
        return *(const void *const *)p != NULL;
    default:
        return true;
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
        return strbuf_append_i64(r->out, read_int(p, f->size));
    case TPL_T_UINT:
        return strbuf_append_u64(r->out, read_uint(p, f->size));
    case TPL_T_FLOAT:
        return append_double(r->out, read_float(p, f->size));
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

/* ---- control ----------------------------------------------------------- */

enum indent { IND_KEEP, IND_ADD, IND_NEW };

/* Calls something that returns to ret with OP_RETURN; owned is freed then. */
static int push_call(struct render *r, uint32_t ret, enum indent mode, struct tpl_span indent,
                     struct tpl *owned, size_t escape_from)
{
    struct tpl_scratch *s = r->s;
    struct ctl c = {
        .kind = CTL_CALL,
        .ip = ret,
        .t = r->t,
        .call = {r->ind_start, (uint32_t)s->ind.len, s->scopes.n, escape_from, owned},
    };
    if (r->depth >= TPL_MAX_DEPTH) {
        tpl_free(owned);
        return fail(r, -ELOOP, "partials, parents or lambdas nested deeper than %d", TPL_MAX_DEPTH);
    }
    if (VEC_PUSH(s->ctl, c)) {
        tpl_free(owned);
        return -ENOMEM;
    }
    r->depth++; /* from here on, unwinding frees owned */
    if (mode == IND_ADD)
        return strbuf_append(&s->ind, r->t->pool + indent.off, indent.len);
    if (mode == IND_NEW)
        r->ind_start = (uint32_t)s->ind.len;
    return 0;
}

static int leave_call(struct render *r)
{
    struct tpl_scratch *s = r->s;
    struct ctl c = s->ctl.v[--s->ctl.n];
    int rc = 0;
    r->depth--;
    r->t = c.t;
    r->ip = c.ip;
    r->ind_start = c.call.ind_start;
    s->ind.len = c.call.ind_end;
    s->scopes.n = c.call.n_scopes;
    if (c.call.escape_from != SIZE_MAX) {
        size_t from = c.call.escape_from;
        strbuf_reset(&s->tmp);
        rc = strbuf_append(&s->tmp, r->out->buf + from, r->out->len - from);
        r->out->len = from;
        if (rc == 0)
            rc = append_escaped(r->out, s->tmp.buf, s->tmp.len);
    }
    tpl_free(c.call.owned);
    return rc;
}

static int push_section(struct render *r, struct ctl c, struct tpl_frame frame)
{
    if (VEC_PUSH(r->s->ctl, c) || VEC_PUSH(r->s->ctx, frame))
        return -ENOMEM;
    r->ip++;
    return 0;
}

/* A lambda's result is compiled in the current context and called. */
static int call_lambda(struct render *r, tpl_lambda_fn *fn, const void *data,
                       const struct tpl_op *op, uint32_t ret)
{
    struct tpl_scratch *s = r->s;
    const struct tpl *t = r->t;
    bool section = op->code == OP_SECTION;
    struct tpl_env env = {.root = r->root->root, .loader = r->root->loader};
    struct view text = {"", 0};
    if (section) {
        const struct tpl_section *sec = &t->sections[op->sect.raw];
        text = (struct view){t->pool + sec->body.off, sec->body.len};
        env.otag = (struct view){t->pool + sec->otag.off, sec->otag.len};
        env.ctag = (struct view){t->pool + sec->ctag.off, sec->ctag.len};
    }
    if (env.root) {
        env.frames = s->ctx.v;
        env.n_frames = s->ctx.n;
    }
    struct tpl_span name = t->names[op->sect.name].text;
    strbuf_reset(&s->tmp);
    int rc = fn(data, text, &s->tmp);
    if (rc < 0)
        return fail(r, rc, "lambda '%.*s' failed: %s", (int)name.len, t->pool + name.off,
                    strerror(-rc));
    char msg[256];
    struct tpl *lt = tpl_compile_env((struct view){t->pool + name.off, name.len},
                                     (struct view){s->tmp.buf ? s->tmp.buf : "", s->tmp.len}, &env,
                                     msg, sizeof(msg));
    if (!lt)
        return fail(r, -EINVAL, "result of lambda: %s", msg);
    bool escape = !section && (op->flags & OPF_ESCAPE);
    rc = push_call(r, ret, IND_NEW, (struct tpl_span){0, 0}, lt, escape ? r->out->len : SIZE_MAX);
    if (rc == 0) {
        r->t = lt;
        r->ip = 0;
    }
    return rc;
}

/* OP_SECTION, dynamic binding. */
static int enter_value(struct render *r, const struct tpl_op *op)
{
    const struct tpl_value *v = lookup(r, &r->t->names[op->sect.name]);
    uint32_t after = op->sect.jump + 1;
    if (v && v->kind == TPL_LAMBDA)
        return call_lambda(r, v->lambda.fn, v->lambda.data, op, after);
    if (!truthy(v)) {
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
    const char *base = lookup_struct(r, n, &f);
    uint32_t after = op->sect.jump + 1;
    struct ctl once = {.kind = CTL_ONCE, .ip = r->ip};
    if (!base || (f && !field_truthy(base, f))) {
        r->ip = after;
        return 0;
    }
    if (!f) /* "." on a struct */
        return push_section(r, once, (struct tpl_frame){.ptr = base, .desc = n->desc});
    const char *p = base + f->offset;
    switch (f->type) {
    case TPL_T_LAMBDA:
        return call_lambda(r, f->lambda, base, op, after);
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
                return fail(r, more, "generator '%s' aborted", f->name);
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
        const struct tpl_value *v = lookup(r, n);
        *falsy = !truthy(v) && !(v && v->kind == TPL_LAMBDA);
        return 0;
    }
    const struct tpl_field *f = NULL;
    const char *base = lookup_struct(r, n, &f);
    *falsy = !base || (f && !field_truthy(base, f));
    if (*falsy || !f || f->type != TPL_T_SEQ)
        return 0;
    struct gen *g = gen_start(r->s, f, base);
    int more = g ? gen_next(g) : -ENOMEM;
    if (g)
        gen_stop(r->s);
    *falsy = more == 0;
    if (more == -ECANCELED)
        return fail(r, more, "generator '%s' aborted", f->name);
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
            return fail(r, more, "generator aborted");
        }
    }
    s->ctl.n--;
    s->ctx.n--;
    r->ip++;
    return 0;
}

/* ---- partials, parents, blocks ------------------------------------------ */

/* A partial named by the data: loaded and compiled once per render. */
static int dyn_partial(struct render *r, const char *name, size_t len, struct tpl **out)
{
    struct tpl_scratch *s = r->s;
    for (uint32_t i = 0; i < s->dyn.n; i++) {
        if (s->dyn.v[i].len == len && memcmp(s->dyn.v[i].name, name, len) == 0) {
            *out = s->dyn.v[i].t;
            return 0;
        }
    }
    const struct tpl_partials *loader = &r->root->loader;
    strbuf_reset(&s->tmp);
    int rc = loader->load ? loader->load(loader->ctx, name, len, &s->tmp) : -ENOENT;
    if (rc < 0 && rc != -ENOENT)
        return fail(r, rc, "cannot load partial '%.*s': %s", (int)len, name, strerror(-rc));
    struct tpl *t = NULL;
    if (rc == 0) {
        char msg[256];
        struct tpl_env env = {.loader = r->root->loader};
        t = tpl_compile_env((struct view){name, len},
                            (struct view){s->tmp.buf ? s->tmp.buf : "", s->tmp.len}, &env, msg,
                            sizeof(msg));
        if (!t)
            return fail(r, -EINVAL, "%s", msg);
    }
    char *copy = memdup(name, len ? len : 1);
    if (!copy || VEC_PUSH(s->dyn, (struct dyn_partial){copy, len, t})) {
        free(copy);
        tpl_free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

/* OP_PARTIAL, OP_PARENT and their dynamic forms. */
static int call_partial(struct render *r, const struct tpl_op *op)
{
    const struct tpl *t = r->t;
    const struct tpl_call *call = &t->calls[op->call];
    bool parent = op->code == OP_PARENT || op->code == OP_DYN_PARENT;
    uint32_t ret = parent ? call->next : r->ip + 1;
    const struct tpl *to = t;
    uint32_t ip = 0;
    if (op->code == OP_PARTIAL || op->code == OP_PARENT) {
        ip = t->regions[call->target].ip;
    } else {
        const struct tpl_value *v = lookup(r, &t->names[call->target]);
        struct tpl *dyn = NULL;
        int rc = v && v->kind == TPL_STRING ? dyn_partial(r, v->str.p, v->str.len, &dyn) : 0;
        if (rc < 0)
            return rc;
        if (!dyn) {
            r->ip = ret;
            return 0;
        }
        to = dyn;
    }
    enum indent mode = op->flags & OPF_STANDALONE ? IND_ADD : IND_NEW;
    int rc = push_call(r, ret, mode, call->indent, NULL, SIZE_MAX);
    if (rc == 0 && parent)
        rc = VEC_PUSH(r->s->scopes, (struct scope){t, call->overrides, call->n_overrides});
    if (rc < 0)
        return rc;
    r->t = to;
    r->ip = ip;
    return 0;
}

/* OP_BLOCK: the outermost override wins (the spec's "top-level
 * substitutions take precedence"), else the default body that follows. */
static int call_block(struct render *r, const struct tpl_op *op)
{
    const struct tpl_call *call = &r->t->calls[op->call];
    const char *name = r->t->pool + call->block.off;
    const struct scope *sc = r->s->scopes.v;
    for (uint32_t i = 0; i < r->s->scopes.n; i++) {
        for (uint32_t k = 0; k < sc[i].n; k++) {
            const struct tpl_override *ov = &sc[i].t->overrides[sc[i].first + k];
            if (ov->block.len == call->block.len &&
                memcmp(sc[i].t->pool + ov->block.off, name, ov->block.len) == 0) {
                enum indent mode = op->flags & OPF_STANDALONE ? IND_ADD : IND_NEW;
                int rc = push_call(r, call->next, mode, call->indent, NULL, SIZE_MAX);
                if (rc == 0) {
                    r->t = sc[i].t;
                    r->ip = ov->ip;
                }
                return rc;
            }
        }
    }
    enum indent mode = op->flags & OPF_STANDALONE ? IND_ADD : IND_KEEP;
    int rc = push_call(r, call->next, mode, call->indent, NULL, SIZE_MAX);
    r->ip++;
    return rc;
}

/* ---- the loop ---------------------------------------------------------- */

static int var(struct render *r, const struct tpl_op *op)
{
    const struct tpl_name *n = &r->t->names[op->sect.name];
    bool escape = op->flags & OPF_ESCAPE;
    uint32_t ip = r->ip++;
    if (!r->root->root) {
        const struct tpl_value *v = lookup(r, n);
        if (v && v->kind == TPL_LAMBDA) {
            r->ip = ip;
            return call_lambda(r, v->lambda.fn, v->lambda.data, op, ip + 1);
        }
        return v ? append_value(r, v, escape) : 0;
    }
    const struct tpl_field *f = NULL;
    const char *base = lookup_struct(r, n, &f);
    if (!base || !f)
        return 0;
    if (f->type == TPL_T_LAMBDA) {
        r->ip = ip;
        return call_lambda(r, f->lambda, base, op, ip + 1);
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
            rc = call_partial(r, op);
            break;
        case OP_BLOCK:
            rc = call_block(r, op);
            break;
        case OP_RETURN:
            if (!r->depth)
                return 0;
            rc = leave_call(r);
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
    out->buf[out->len] = '\0'; /* put() leaves that to the end */
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
