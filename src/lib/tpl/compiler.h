/* compiler.h - the compiler's state while it compiles one template, shared
 * by tpl.c (which drives the regions) and the passes: lex.c (source to
 * tokens), resolve.c (names and partials) and emit.c (tokens to ops).
 * Nothing outside the compiler uses it; the state is gone once
 * tpl_compile_env() returns.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "tpl/tpl_internal.h"

/* The delimiters "{{" and "}}": the pool starts with "{{}}". */
#define DEFAULT_OTAG ((struct tpl_span){0, 2})
#define DEFAULT_CTAG ((struct tpl_span){2, 2})

enum tok_kind {
    TOK_TEXT,
    TOK_VAR,
    TOK_SECTION,
    TOK_INVERTED,
    TOK_CLOSE,
    TOK_PARTIAL,
    TOK_PARENT,
    TOK_BLOCK,
    TOK_COMMENT,
    TOK_DELIM,
};

struct token {
    uint8_t kind;
    bool escape;                /* TOK_VAR: {{x}}, not {{{x}}} or {{&x}} */
    bool dynamic;               /* TOK_PARTIAL, TOK_PARENT: {{>*x}} */
    bool standalone;            /* alone on its line, which is not output */
    bool keep_eol;              /* a block opened and closed alone on a line keeps the newline */
    uint32_t start, end;        /* source offsets; a text's shrink with standalone trimming */
    uint32_t name, name_len;    /* the tag's trimmed content */
    struct tpl_span indent;     /* standalone: whitespace before the tag (source) */
    struct tpl_span dedent;     /* standalone TOK_BLOCK: common indentation (source) */
    struct tpl_span otag, ctag; /* TOK_SECTION: the delimiters in effect (pool) */
    uint32_t match;             /* index of the matching open or close tag */
    struct tpl_pos pos;
};

/* A region while compiling. */
struct cregion {
    uint32_t frames, n_frames; /* struct binding: its context stack, in c->frames */
    uint32_t from;             /* the region that first asked for it ... */
    struct tpl_pos from_pos;   /* ... and where */
};

/* A section, parent or block being emitted. */
struct open {
    uint32_t tok;
    uint32_t op;            /* its first op; TPL_NONE for the override of a block */
    uint32_t n_ctx;         /* context stack depth to return to */
    struct tpl_span dedent; /* of the code around it */
    uint32_t pending;       /* TOK_PARENT: its first override in c->pending */
};

struct compiler {
    const struct tpl_env *env;
    struct strbuf pool;
    VEC(struct tpl_op) ops;
    VEC(struct tpl_pos) pos;
    VEC(struct tpl_name) names;
    VEC(const struct tpl_field *) paths;
    VEC(struct tpl_section) sections;
    VEC(struct tpl_call) calls;
    VEC(struct tpl_override) overrides;
    VEC(struct tpl_region) regions;
    VEC(struct cregion) cregions;
    VEC(struct tpl_frame) frames; /* every region's context stack, back to back */
    struct tpl_span otag0, ctag0; /* delimiters region 0 starts with */

    /* the region being compiled */
    uint32_t region;
    const char *src; /* = pool.buf + base, stable while the region compiles */
    uint32_t base, len;
    VEC(struct token) toks;
    VEC(uint32_t) stack;
    VEC(struct open) opens;
    VEC(struct tpl_frame) ctx;        /* struct binding: context stack here */
    VEC(struct tpl_override) pending; /* overrides of the parents being emitted */
    bool at_bol;                      /* the next op starts a source line */
    struct tpl_span dedent;           /* removed from the start of each line (source) */

    char *err;
    size_t errlen;
};

static inline struct view region_name(const struct compiler *c, uint32_t region)
{
    struct tpl_span s = c->regions.v[region].name;
    return (struct view){c->pool.buf + s.off, s.len};
}

/* A pass's error: "name:line:col: message" into c->err, named after the
 * region being compiled. Both evaluate to -EINVAL (oom() too: the callers
 * only tell failure from success). */
#define fail(c, pos, ...)                                                                          \
    tpl_error((c)->err, (c)->errlen, -EINVAL, region_name(c, (c)->region), pos, __VA_ARGS__)
#define oom(c) fail(c, (struct tpl_pos){0, 0}, "out of memory")
