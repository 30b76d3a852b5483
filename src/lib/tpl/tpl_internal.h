/* tpl_internal.h - the compiled form of a template, shared by the compiler
 * (tpl.c and its passes, compiler.h) and the renderer (render.c and
 * calls.c, render.h). Only src/lib/tpl uses it, and test_tpl.c for
 * size_hint.
 *
 * A template is one array of ops. Region 0 is the template itself; every
 * partial (and parent) it uses is another region of the same array, compiled
 * once (per context stack, in the struct binding). Each region, each block
 * body and each override of a parent's block ends with OP_RETURN. Strings
 * (text, names, indentation, delimiters) are spans of one pool that holds the
 * sources of all regions.
 */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tpl/tpl.h"

#define TPL_NONE UINT32_MAX

/* Growable arrays of uint32_t-indexed elements. */

#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        uint32_t n, cap;                                                                           \
    }

static inline int tpl_vec_grow(void **v, uint32_t *cap, uint32_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    if (want > UINT32_MAX / 2)
        return -ENOMEM;
    uint32_t c = *cap ? *cap : 8;
    while (c < want)
        c *= 2;
    void *p = realloc(*v, (size_t)c * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* Appends one element; evaluates to 0 or -ENOMEM. */
#define VEC_PUSH(vec, ...)                                                                         \
    (tpl_vec_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v))                    \
         ? -ENOMEM                                                                                 \
         : ((vec).v[(vec).n++] = (__VA_ARGS__), 0))

struct tpl_span {
    uint32_t off, len; /* bytes of the pool */
};

struct tpl_pos {
    uint32_t line, col;
};

enum tpl_opcode {
    OP_TEXT,        /* append text */
    OP_VAR,         /* append the value of sect.name */
    OP_SECTION,     /* enter a section; sect.jump is its OP_END */
    OP_END,         /* next item of the section at sect.jump, or leave it */
    OP_INVERTED,    /* go to sect.jump unless sect.name is falsy */
    OP_PARTIAL,     /* call region calls[call].target */
    OP_DYN_PARTIAL, /* call the partial named by the value of names[calls[call].target] */
    OP_PARENT,      /* like OP_PARTIAL, with calls[call]'s overrides in scope */
    OP_DYN_PARENT,
    OP_BLOCK,  /* call the outermost override in scope of this block, or run the default */
    OP_RETURN, /* back to the caller */
};

enum {
    OPF_BOL = 1,        /* first on a line: write the indentation first */
    OPF_ESCAPE = 2,     /* OP_VAR: HTML-escape */
    OPF_STANDALONE = 4, /* calls: the tag had its own line; indent by calls[].indent */
};

struct tpl_op {
    uint8_t code, flags;
    union {
        struct {
            uint32_t off, len;
        } text;
        struct {
            uint32_t name; /* names[] */
            uint32_t jump;
            uint32_t raw; /* OP_SECTION: sections[], for lambdas */
        } sect;
        uint32_t call; /* calls[] */
    };
};

/* A name in the struct binding is resolved at compile time: the innermost
 * context frame of type (desc, field), then a path of fields from there. */
struct tpl_name {
    struct tpl_span text; /* as written; "." is the implicit iterator */
    const struct tpl_desc *desc;
    const struct tpl_field *field;
    uint32_t path, n_path; /* paths[path ..+ n_path] */
};

struct tpl_section {
    struct tpl_span body;       /* raw, as a section lambda gets it */
    struct tpl_span otag, ctag; /* the delimiters it was written with */
};

struct tpl_call {
    uint32_t target;                 /* region (TPL_NONE: not found), or for OP_DYN_*: name */
    struct tpl_span block;           /* OP_BLOCK: the block's name */
    struct tpl_span indent;          /* OPF_STANDALONE: added to the indentation */
    uint32_t overrides, n_overrides; /* parents: overrides[overrides ..+ n_overrides] */
    uint32_t next;                   /* where rendering goes on after the call */
};

struct tpl_override {
    struct tpl_span block;
    uint32_t ip; /* its body */
};

struct tpl_region {
    struct tpl_span name;
    uint32_t ip;
};

/* One frame of the context stack. Dynamic binding: ptr is a tpl_value.
 * Struct binding: a struct (ptr, desc), or a scalar member (ptr is the
 * struct that holds it, field). Compile-time frames leave ptr NULL. */
struct tpl_frame {
    const void *ptr;
    const struct tpl_desc *desc;
    const struct tpl_field *field;
};

struct tpl {
    struct tpl_op *ops;
    struct tpl_pos *pos; /* of each op, for render errors */
    uint32_t n_ops;
    char *pool;
    struct tpl_name *names;
    const struct tpl_field **paths;
    struct tpl_section *sections;
    struct tpl_call *calls;
    struct tpl_override *overrides;
    struct tpl_region *regions;
    uint32_t n_regions;
    const struct tpl_desc *root; /* NULL: dynamic binding */
    struct tpl_partials loader;
    char *dir;        /* owned by templates from tpl_compile_file() */
    size_t size_hint; /* largest output so far (atomic) */
};

/* What a compile needs besides the source. Renders compile the results of
 * lambdas and dynamically named partials with the template's env. */
struct tpl_env {
    const struct tpl_desc *root;
    struct tpl_partials loader;
    const struct tpl_frame *frames; /* struct binding: the context stack at the start */
    size_t n_frames;
    struct view otag, ctag; /* delimiters at the start; {NULL, 0}: {{ }} */
};

struct tpl *tpl_compile_env(struct view name, struct view src, const struct tpl_env *env, char *err,
                            size_t errlen);

/* "name:line:col: " (or "name: " when pos.line is 0) + message into err;
 * return rc. */
int tpl_error(char *err, size_t errlen, int rc, struct view name, struct tpl_pos pos,
              const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int tpl_verror(char *err, size_t errlen, int rc, struct view name, struct tpl_pos pos,
               const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
