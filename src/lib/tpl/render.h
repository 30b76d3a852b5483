/* render.h - the renderer's state, shared by render.c (the loop, which runs
 * most ops itself) and calls.c (the ops that call: partials, parents,
 * blocks, lambdas, and OP_RETURN), with lookup.c reading it. Nothing outside
 * the renderer uses it.
 *
 * The functions that run an op share one contract: they set r->ip to the
 * next op to run (and r->t when it is in another template) and return 0, or
 * < 0 when the render fails, with the message in r->err (render() writes a
 * plain strerror() when they left it empty, e.g. for -ENOMEM).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
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

/* "name:line:col: message" into r->err, at the op r->ip of r->t; returns rc. */
int tpl_render_fail(const struct render *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
