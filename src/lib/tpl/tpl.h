/* tpl.h - Mustache templates: compiled once, rendered many times.
 *
 * Compiling turns a template (and every partial it uses) into one flat list
 * of actions: append text, append a variable, begin or end a section, call
 * a partial... The symbol tables of the compiler are gone once it returns;
 * rendering walks the list with an explicit stack (no recursion, so it is
 * safe on a small coroutine stack) and appends to a strbuf that it first
 * grows to the size of the largest output the template has produced so far.
 *
 * Two bindings share that compiled form; which one is chosen at compile time:
 *
 *  - Struct binding (root != NULL). The data are C structs described by
 *    descriptors (below). Names are resolved when compiling, so a name the
 *    descriptors do not know is a compile error, and a variable costs a few
 *    pointer additions when rendering. Sequences are generators that run in a
 *    coroutine and yield one item at a time.
 *  - Dynamic binding (root == NULL). The data are a tpl_value tree (value.h)
 *    searched at render time through the Mustache context stack; a name that
 *    is not found renders as nothing, as the spec says.
 *
 * The language is Mustache v1.4.2: variables ({{x}} is HTML-escaped: & < > "
 * ' become &amp; &lt; &gt; &quot; &#39;; {{{x}}} and {{&x}} are not), sections
 * over lists, objects and other truthy values, inverted sections, comments,
 * partials with standalone indentation, set delimiters, the standalone-line
 * rules, {{.}}, dotted names, lambdas (as C callbacks), and the optional
 * modules inheritance ({{<parent}} with {{$block}}s) and dynamic names
 * ({{>*name}}). Falsy are: false, null, NULL pointers, 0, "", and empty lists
 * and sequences.
 *
 * Where the bindings differ, because one is checked at compile time:
 *  - A partial that cannot be found renders as nothing in the dynamic binding
 *    (the spec's rule) and is a compile error in the struct binding.
 *  - Dynamic names ({{>*name}}, {{<*name}}) need the dynamic binding.
 *  - In the struct binding, names inside a block that overrides a parent's
 *    block are resolved where the override is written (the context of the
 *    {{<parent}} tag), not at the parent's block.
 *
 * Partials. tpl_compile_file() loads {{>name}} from the regular file "name",
 * else "name.mustache", in the directory of the template; a name with a '/'
 * or that is "." or ".." is never loaded, so templates cannot reach outside
 * that directory. tpl_compile() takes a loader instead.
 *
 * Errors. Every function that can fail writes "name:line:column: message"
 * to err (when errlen > 0): unclosed or mismatched sections, bad tags,
 * unknown names (struct binding), missing partials (struct binding), and,
 * while rendering, recursion deeper than TPL_MAX_DEPTH partials or blocks.
 *
 * Threads. A compiled template is read-only: any number of threads may render
 * it at once, each with its own tpl_scratch. Lambdas, generators and loaders
 * run on the rendering thread (generators on a coroutine of their own).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "tpl/value.h"

struct coro;
struct strbuf;

/* Partials, parents and blocks nested deeper than this fail the render. */
#define TPL_MAX_DEPTH 256

/* ---- struct binding: descriptors ------------------------------------- */

enum tpl_type {
    TPL_T_STR,        /* char * or const char *, NUL-terminated; NULL is "" */
    TPL_T_CHARS,      /* char[N], NUL-terminated within its N bytes */
    TPL_T_VIEW,       /* struct view */
    TPL_T_INT,        /* signed integer of `size` bytes */
    TPL_T_UINT,       /* unsigned integer of `size` bytes */
    TPL_T_FLOAT,      /* float or double */
    TPL_T_BOOL,       /* bool */
    TPL_T_STRUCT,     /* an embedded struct described by `desc` */
    TPL_T_STRUCT_PTR, /* a pointer to such a struct; NULL is falsy */
    TPL_T_SEQ,        /* a generator of `desc` items; nothing stored */
    TPL_T_LAMBDA,     /* a callback; nothing stored */
};

/* A generator fills *item (zeroed before the first item) and calls
 * coro_yield(coro, 0) once per item; returning ends the sequence. parent is
 * the struct that declares the sequence. Whatever the item points to must
 * stay valid until the generator is resumed, so pointing into the
 * generator's own locals is fine. A generator can be abandoned at a yield
 * (an inverted section only needs to know there is a first item; a render
 * can fail): release resources with coro_defer(), which runs then. It runs
 * on a CORO_DEFAULT_STACK stack. */
typedef void tpl_gen_fn(struct coro *coro, const void *parent, void *item);

struct tpl_desc;

struct tpl_field {
    const char *name;
    size_t offset;
    enum tpl_type type;
    size_t size;                 /* of the member, for integers, floats, char[N] */
    const struct tpl_desc *desc; /* _STRUCT, _STRUCT_PTR, _SEQ (the item) */
    tpl_gen_fn *gen;             /* _SEQ */
    tpl_lambda_fn *lambda;       /* _LAMBDA */
};

struct tpl_desc {
    const char *name; /* for error messages */
    size_t size;      /* sizeof the struct: sequence items are allocated */
    const struct tpl_field *fields;
    size_t n_fields;
};

/* The type of member m of struct type T, found by the compiler: a member of
 * any other type (or a bit-field) does not compile. */
#define TPL_TYPE_OF(T, m)                                                                          \
    _Generic(&((T *)0)->m,                                                                         \
        char **: TPL_T_STR,                                                                        \
        const char **: TPL_T_STR,                                                                  \
        char(*)[sizeof(((T *)0)->m)]: TPL_T_CHARS,                                                 \
        struct view *: TPL_T_VIEW,                                                                 \
        bool *: TPL_T_BOOL,                                                                        \
        signed char *: TPL_T_INT,                                                                  \
        short *: TPL_T_INT,                                                                        \
        int *: TPL_T_INT,                                                                          \
        long *: TPL_T_INT,                                                                         \
        long long *: TPL_T_INT,                                                                    \
        unsigned char *: TPL_T_UINT,                                                               \
        unsigned short *: TPL_T_UINT,                                                              \
        unsigned *: TPL_T_UINT,                                                                    \
        unsigned long *: TPL_T_UINT,                                                               \
        unsigned long long *: TPL_T_UINT,                                                          \
        float *: TPL_T_FLOAT,                                                                      \
        double *: TPL_T_FLOAT)

/* Scalar member m of T, named as in C or as name_. */
#define TPL_FIELD_AS(name_, T, m)                                                                  \
    {                                                                                              \
        .name = (name_), .offset = offsetof(T, m), .type = TPL_TYPE_OF(T, m),                      \
        .size = sizeof(((T *)0)->m),                                                               \
    }
#define TPL_FIELD(T, m) TPL_FIELD_AS(#m, T, m)
/* Member m of T is a struct described by d (TPL_STRUCT_PTR: a pointer to one). */
#define TPL_STRUCT(T, m, d)                                                                        \
    {                                                                                              \
        .name = #m, .offset = offsetof(T, m), .type = TPL_T_STRUCT, .size = sizeof(((T *)0)->m),   \
        .desc = &(d),                                                                              \
    }
#define TPL_STRUCT_PTR(T, m, d)                                                                    \
    {                                                                                              \
        .name = #m, .offset = offsetof(T, m), .type = TPL_T_STRUCT_PTR,                            \
        .size = sizeof(((T *)0)->m), .desc = &(d),                                                 \
    }
/* A sequence named name_ whose items (described by d) come from gen_. */
#define TPL_SEQ(name_, gen_, d)                                                                    \
    {                                                                                              \
        .name = (name_), .type = TPL_T_SEQ, .desc = &(d), .gen = (gen_),                           \
    }
/* A lambda named name_; it gets the struct that declares it as data. */
#define TPL_LAMBDA(name_, fn_)                                                                     \
    {                                                                                              \
        .name = (name_), .type = TPL_T_LAMBDA, .lambda = (fn_),                                    \
    }
/* The descriptor of struct type T from a list of the macros above:
 *     static const struct tpl_desc row_desc = TPL_DESC(struct row,
 *         TPL_FIELD(struct row, id), TPL_FIELD(struct row, name));       */
#define TPL_DESC(T, ...)                                                                           \
    {                                                                                              \
        .name = #T, .size = sizeof(T), .fields = (const struct tpl_field[]){__VA_ARGS__},          \
        .n_fields = sizeof((const struct tpl_field[]){__VA_ARGS__}) / sizeof(struct tpl_field),    \
    }

/* ---- compiling -------------------------------------------------------- */

struct tpl;

struct tpl_partials {
    /* Appends the source of partial name (len bytes, NUL-terminated) to src.
     * Returns 0, -ENOENT if there is no such partial, or another -errno.
     * Called while compiling, and while rendering for lambdas and dynamic
     * names, so ctx must outlive the template. */
    int (*load)(void *ctx, const char *name, size_t len, struct strbuf *src);
    void *ctx;
};

/* Compiles src (len bytes; name is for messages). root selects the binding:
 * the descriptor of the struct rendered at the top, or NULL for the dynamic
 * binding. partials may be NULL (no partial can be found). Returns NULL and
 * a message in err on failure. */
struct tpl *tpl_compile(const char *name, const char *src, size_t len, const struct tpl_desc *root,
                        const struct tpl_partials *partials, char *err, size_t errlen);
/* The same for the file at path, with partials from its directory. */
struct tpl *tpl_compile_file(const char *path, const struct tpl_desc *root, char *err,
                             size_t errlen);
void tpl_free(struct tpl *t);

/* ---- rendering -------------------------------------------------------- */

/* The memory a render works in (stacks, generator coroutines, sequence
 * items), kept from one render to the next so that a warm render does not
 * allocate. One per thread; NULL where a render wants one means "make a
 * temporary one". */
struct tpl_scratch;

struct tpl_scratch *tpl_scratch_new(void);
void tpl_scratch_free(struct tpl_scratch *s);

/* Append the rendering of t to out: tpl_render() with data pointing to the
 * root struct (struct binding), tpl_render_value() with a value tree (dynamic
 * binding). Return 0; -EINVAL when t was compiled for the other binding or a
 * lambda's result does not compile; -ELOOP past TPL_MAX_DEPTH; -ENOMEM; or a
 * lambda's error. On failure err says where, and out holds a partial
 * rendering that the caller should discard. */
int tpl_render(const struct tpl *t, const void *data, struct strbuf *out,
               struct tpl_scratch *scratch, char *err, size_t errlen);
int tpl_render_value(const struct tpl *t, const struct tpl_value *data, struct strbuf *out,
                     struct tpl_scratch *scratch, char *err, size_t errlen);
