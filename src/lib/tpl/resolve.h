/* resolve.h - what the name in a tag refers to, decided while emitting (the
 * compiler's pass 4, emit.c): a names[] entry for a variable or a section
 * (in the struct binding, also the field it reaches from a context frame),
 * and a region for a partial or a parent. They read the context stack in
 * c->ctx; they return 0 or -EINVAL, with the message in c->err.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "tpl/compiler.h"

/* What a name is used for, which decides what it may be (struct binding). */
enum use {
    USE_VAR,     /* {{x}}: not a struct or a sequence */
    USE_SECTION, /* {{#x}}, {{^x}} */
    USE_NAME,    /* {{>*x}}: needs the dynamic binding */
};

static inline bool tpl_is_struct(const struct tpl_field *f)
{
    return f->type == TPL_T_STRUCT || f->type == TPL_T_STRUCT_PTR;
}

/* Adds the names[] entry of tag t; *idx is its index. In the struct binding
 * the name must resolve (else an error) and *fieldp is the field it ends on
 * (NULL: "." on a struct frame); in the dynamic binding *fieldp is NULL. */
int tpl_resolve(struct compiler *c, const struct token *t, enum use use, uint32_t *idx,
                const struct tpl_field **fieldp);

/* The region of partial (or parent) t in the current context, queued for
 * compiling if new; at most MAX_REGIONS per template. */
int tpl_region_for(struct compiler *c, const struct token *t, uint32_t *region);
