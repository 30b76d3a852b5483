#include "tpl/value.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct tpl_value *value_new(struct tpl_value v)
{
    return memdup(&v, sizeof(v));
}

struct tpl_value *tpl_value_null(void)
{
    return value_new((struct tpl_value){.kind = TPL_NULL});
}

struct tpl_value *tpl_value_bool(bool b)
{
    return value_new((struct tpl_value){.kind = TPL_BOOL, .b = b});
}

struct tpl_value *tpl_value_int(int64_t i)
{
    return value_new((struct tpl_value){.kind = TPL_INT, .i = i});
}

struct tpl_value *tpl_value_double(double d)
{
    return value_new((struct tpl_value){.kind = TPL_DOUBLE, .d = d});
}

static char *copy_str(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

struct tpl_value *tpl_value_string(const char *s, size_t len)
{
    char *p = copy_str(s, len);
    if (!p)
        return NULL;
    struct tpl_value *v = value_new((struct tpl_value){
        .kind = TPL_STRING,
        .str = {.p = p, .len = len},
    });
    if (!v)
        free(p);
    return v;
}

struct tpl_value *tpl_value_list(void)
{
    return value_new((struct tpl_value){.kind = TPL_LIST});
}

struct tpl_value *tpl_value_object(void)
{
    return value_new((struct tpl_value){.kind = TPL_OBJECT});
}

struct tpl_value *tpl_value_lambda(tpl_lambda_fn *fn, const void *data)
{
    return value_new((struct tpl_value){.kind = TPL_LAMBDA, .lambda = {.fn = fn, .data = data}});
}

/* Trees come from JSON documents, whose nesting the parser limits, so
 * freeing by recursion is bounded. */
void tpl_value_free(struct tpl_value *v)
{
    if (!v)
        return;
    switch (v->kind) {
    case TPL_STRING:
        free(v->str.p);
        break;
    case TPL_LIST:
        for (size_t i = 0; i < v->list.n; i++)
            tpl_value_free(v->list.items[i]);
        free(v->list.items);
        break;
    case TPL_OBJECT:
        for (size_t i = 0; i < v->obj.n; i++) {
            free(v->obj.members[i].key);
            tpl_value_free(v->obj.members[i].value);
        }
        free(v->obj.members);
        break;
    default:
        break;
    }
    free(v);
}

static int grow(void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4;
    void *p = realloc(*items, c * size);
    if (!p)
        return -ENOMEM;
    *items = p;
    *cap = c;
    return 0;
}

int tpl_list_push(struct tpl_value *list, struct tpl_value *item)
{
    int r = -ENOMEM;
    if (!item)
        return r;
    if (list->kind != TPL_LIST) {
        r = -EINVAL;
        goto out_free_item;
    }
    r = grow((void **)&list->list.items, &list->list.cap, list->list.n, sizeof(item));
    if (r < 0)
        goto out_free_item;
    list->list.items[list->list.n++] = item;
    return 0;

out_free_item:
    tpl_value_free(item);
    return r;
}

int tpl_object_set(struct tpl_value *obj, const char *key, size_t key_len, struct tpl_value *v)
{
    int r = -ENOMEM;
    if (!v)
        return r;
    if (obj->kind != TPL_OBJECT) {
        r = -EINVAL;
        goto out_free_value;
    }
    char *k = copy_str(key, key_len);
    if (!k)
        goto out_free_value;
    r = grow((void **)&obj->obj.members, &obj->obj.cap, obj->obj.n, sizeof(struct tpl_member));
    if (r < 0)
        goto out_free_key;
    obj->obj.members[obj->obj.n++] = (struct tpl_member){.key = k, .key_len = key_len, .value = v};
    return 0;

out_free_key:
    free(k);
out_free_value:
    tpl_value_free(v);
    return r;
}

const struct tpl_value *tpl_object_get(const struct tpl_value *obj, const char *key, size_t key_len)
{
    if (obj->kind != TPL_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->obj.n; i++) {
        const struct tpl_member *m = &obj->obj.members[i];
        if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0)
            return m->value;
    }
    return NULL;
}
