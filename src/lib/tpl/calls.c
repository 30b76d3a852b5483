/* calls.c - partials, parents, blocks and lambdas (calls.h). */
#include "tpl/calls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tpl/format.h"
#include "tpl/lookup.h"

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
        return tpl_render_fail(r, -ELOOP, "partials, parents or lambdas nested deeper than %d",
                               TPL_MAX_DEPTH);
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

int tpl_leave_call(struct render *r)
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
            rc = tpl_append_escaped(r->out, s->tmp.buf, s->tmp.len);
    }
    tpl_free(c.call.owned);
    return rc;
}
/* A lambda's result is compiled in the current context and called. */
int tpl_call_lambda(struct render *r, tpl_lambda_fn *fn, const void *data, const struct tpl_op *op,
                    uint32_t ret)
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
        return tpl_render_fail(r, rc, "lambda '%.*s' failed: %s", (int)name.len, t->pool + name.off,
                               strerror(-rc));
    char msg[256];
    struct tpl *lt = tpl_compile_env((struct view){t->pool + name.off, name.len},
                                     (struct view){s->tmp.buf ? s->tmp.buf : "", s->tmp.len}, &env,
                                     msg, sizeof(msg));
    if (!lt)
        return tpl_render_fail(r, -EINVAL, "result of lambda: %s", msg);
    bool escape = !section && (op->flags & OPF_ESCAPE);
    rc = push_call(r, ret, IND_NEW, (struct tpl_span){0, 0}, lt, escape ? r->out->len : SIZE_MAX);
    if (rc == 0) {
        r->t = lt;
        r->ip = 0;
    }
    return rc;
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
        return tpl_render_fail(r, rc, "cannot load partial '%.*s': %s", (int)len, name,
                               strerror(-rc));
    struct tpl *t = NULL;
    if (rc == 0) {
        char msg[256];
        struct tpl_env env = {.loader = r->root->loader};
        t = tpl_compile_env((struct view){name, len},
                            (struct view){s->tmp.buf ? s->tmp.buf : "", s->tmp.len}, &env, msg,
                            sizeof(msg));
        if (!t)
            return tpl_render_fail(r, -EINVAL, "%s", msg);
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
int tpl_call_partial(struct render *r, const struct tpl_op *op)
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
        const struct tpl_value *v = tpl_lookup(r, &t->names[call->target]);
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
int tpl_call_block(struct render *r, const struct tpl_op *op)
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
