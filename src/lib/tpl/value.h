/* value.h - the dynamic binding's data: a JSON-like tree of values.
 *
 * A value is null, a bool, a number (integer or double), a string, a list, an
 * object (keys in insertion order) or a lambda. Every value owns its children
 * and its string bytes; tpl_value_free() releases a whole tree.
 *
 * Constructors return NULL when out of memory. The functions that add a child
 * take ownership of it even when they fail (they free it then), and accept a
 * NULL child as an earlier allocation failure, so a tree can be built
 * without checking every step:
 *
 *     struct tpl_value *v = tpl_value_object();
 *     int r = tpl_object_set(v, "name", 4, tpl_value_string("Ann", 3));
 *
 * A tree is read-only while it is rendered; any number of threads may render
 * the same tree at once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

struct strbuf;

/* A lambda appends template source to out, which is then compiled and
 * rendered in place of the tag: for {{name}} text is empty (the result is
 * parsed with the default delimiters, rendered and HTML-escaped); for
 * {{#name}}...{{/name}} text is the raw section body (the result is parsed
 * with the section's delimiters and rendered unescaped). data is the lambda
 * value's data (dynamic binding) or the struct that holds the lambda (struct
 * binding). Returns 0 or -errno, which aborts the render. */
typedef int tpl_lambda_fn(const void *data, struct view text, struct strbuf *out);

enum tpl_kind {
    TPL_NULL,
    TPL_BOOL,
    TPL_INT,
    TPL_DOUBLE,
    TPL_STRING,
    TPL_LIST,
    TPL_OBJECT,
    TPL_LAMBDA,
};

struct tpl_value;

struct tpl_member {
    char *key; /* owned, NUL-terminated (keys may also contain NULs) */
    size_t key_len;
    struct tpl_value *value;
};

struct tpl_value {
    enum tpl_kind kind;
    union {
        bool b;
        int64_t i;
        double d;
        struct {
            char *p; /* owned, NUL-terminated */
            size_t len;
        } str;
        struct {
            struct tpl_value **items;
            size_t n, cap;
        } list;
        struct {
            struct tpl_member *members;
            size_t n, cap;
        } obj;
        struct {
            tpl_lambda_fn *fn;
            const void *data;
        } lambda;
    };
};

struct tpl_value *tpl_value_null(void);
struct tpl_value *tpl_value_bool(bool b);
struct tpl_value *tpl_value_int(int64_t i);
struct tpl_value *tpl_value_double(double d);
struct tpl_value *tpl_value_string(const char *s, size_t len);
struct tpl_value *tpl_value_list(void);
struct tpl_value *tpl_value_object(void);
struct tpl_value *tpl_value_lambda(tpl_lambda_fn *fn, const void *data);
void tpl_value_free(struct tpl_value *v);

/* Return 0, -EINVAL if the container has the wrong kind, or -ENOMEM. */
int tpl_list_push(struct tpl_value *list, struct tpl_value *item);
/* Adds a member; a key that is already there is not replaced (lookups find
 * the first one). */
int tpl_object_set(struct tpl_value *obj, const char *key, size_t key_len, struct tpl_value *v);

/* The member named key; NULL if there is none or obj is not an object. */
const struct tpl_value *tpl_object_get(const struct tpl_value *obj, const char *key,
                                       size_t key_len);
