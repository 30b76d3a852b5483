/* tpl.c - the template compiler: its driver, which compiles the regions of
 * a template one after the other, and what templates own.
 *
 * Each region (the template, then each partial it asks for) goes through
 * four passes over its source:
 *   1. lex: text and tags, applying set-delimiter tags as they come;
 *   2. match: pair every section, parent and block with its closing tag;
 *   3. standalone: find the tags that have a line to themselves and trim
 *      that line from the neighbouring text (the whitespace before such a
 *      partial, parent or block becomes its indentation);
 *   4. emit: ops, resolving names (struct binding) and queuing partials.
 * Passes 1 to 3 are in lex.c, pass 4 in emit.c and resolve.c; the state
 * they share is in compiler.h. Partials are compiled from a queue, not by
 * recursion, so a chain of partials cannot exhaust the stack; a partial is
 * compiled once per name (and, in the struct binding, per context stack it
 * is used in).
 *
 * Indentation follows the textual model of the spec: a standalone partial's
 * lines are indented as if its source had been indented. The renderer
 * writes the current indentation before every op flagged OPF_BOL (the first
 * thing on a source line) and after every inner newline of a text. Blocks
 * are re-indented too (inheritance module): the common indentation of a
 * standalone block's lines is removed when emitting (dedent) and the
 * indentation of the place it is rendered at is added by the renderer.
 */
#include "tpl/tpl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "tpl/compiler.h"
#include "base/err.h"
#include "tpl/emit.h"
#include "tpl/lex.h"
#include "tpl/tpl_internal.h"

#define MAX_POOL (1u << 30) /* bytes of source in one template */

int tpl_verror(char *err, size_t errlen, int rc, struct view name, struct tpl_pos pos,
               const char *fmt, va_list ap)
{
    char where[4096 + 32];
    if (pos.line)
        snprintf(where, sizeof(where), "%.*s:%u:%u", (int)name.len, name.p, pos.line, pos.col);
    else
        snprintf(where, sizeof(where), "%.*s", (int)name.len, name.p);
    return err_vset(err, errlen, rc, where, fmt, ap);
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
            return tpl_emit(c, (struct tpl_op){.code = OP_RETURN}, (struct tpl_pos){0, 0});
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
    if ((r = tpl_lex(c)) < 0 || (r = tpl_match(c)) < 0)
        return r;
    tpl_standalone(c);
    return tpl_emit_region(c);
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
