/* lookup.c - names to data (lookup.h): through the context stack for the
 * dynamic binding; from the frame of the name's type along the path of
 * fields the compiler resolved (resolve.c) for the struct binding.
 */
#include "tpl/lookup.h"

#include <string.h>

/* ---- dynamic binding --------------------------------------------------- */

bool tpl_truthy(const struct tpl_value *v)
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
const struct tpl_value *tpl_lookup(const struct render *r, const struct tpl_name *n)
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

/* ---- struct binding ---------------------------------------------------- */

const char *tpl_lookup_struct(const struct render *r, const struct tpl_name *n,
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

bool tpl_field_truthy(const char *base, const struct tpl_field *f)
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
        return tpl_read_int(p, f->size) != 0;
    case TPL_T_UINT:
        return tpl_read_uint(p, f->size) != 0;
    case TPL_T_FLOAT:
        return tpl_read_float(p, f->size) != 0;
    case TPL_T_BOOL:
        return *(const bool *)p;
    case TPL_T_STRUCT_PTR:
        return *(const void *const *)p != NULL;
    default:
        return true;
    }
}
