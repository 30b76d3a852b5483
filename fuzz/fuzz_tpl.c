/* fuzz_tpl.c - the template compiler and renderer on arbitrary input.
 *
 * The input is cut at 0xff bytes (never in UTF-8 text, while NULs are fair
 * game inside a template): the first piece is the template, the next ones
 * are the partials "a", "b", "c"... It is compiled with the dynamic
 * binding and rendered against a fixed tree holding every kind of value (a
 * lambda too), then compiled and rendered with the struct binding. Compile
 * and render errors are fine; crashes, leaks and hangs are not. The data
 * are shallow on purpose: recursion through data ends with the data, and a
 * deep tree times a template full of partial calls is slow, not wrong. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/coro.h"
#include "tpl/tpl.h"

struct pieces {
    const char *p[27];
    size_t len[27];
    int n;
};

static int load_piece(void *ctx, const char *name, size_t len, struct strbuf *src)
{
    const struct pieces *pc = ctx;
    if (len != 1 || name[0] < 'a' || name[0] - 'a' + 1 >= pc->n)
        return -ENOENT;
    int i = name[0] - 'a' + 1;
    return strbuf_append(src, pc->p[i], pc->len[i]);
}

static int wrap(const void *data, struct view text, struct strbuf *out)
{
    (void)data;
    int r = strbuf_append_str(out, "<{{s}}|");
    if (r == 0)
        r = strbuf_append(out, text.p, text.len);
    return r ? r : strbuf_append_str(out, ">");
}

static struct tpl_value *make_data(void)
{
    struct tpl_value *root = tpl_value_object(), *o = tpl_value_object();
    struct tpl_value *deep = tpl_value_object(), *l = tpl_value_list(), *item = tpl_value_object();
    tpl_object_set(deep, "k", 1, tpl_value_string("deep", 4));
    tpl_object_set(o, "s", 1, tpl_value_string("inner", 5));
    tpl_object_set(o, "o", 1, deep);
    tpl_object_set(item, "s", 1, tpl_value_string("one", 3));
    tpl_object_set(item, "t", 1, tpl_value_bool(false));
    tpl_list_push(l, item);
    tpl_list_push(l, tpl_value_int(7));
    tpl_list_push(l, tpl_value_string("str", 3));
    tpl_object_set(root, "s", 1, tpl_value_string("<b>&'\"", 6));
    tpl_object_set(root, "n", 1, tpl_value_int(42));
    tpl_object_set(root, "d", 1, tpl_value_double(2.5));
    tpl_object_set(root, "t", 1, tpl_value_bool(true));
    tpl_object_set(root, "f", 1, tpl_value_bool(false));
    tpl_object_set(root, "z", 1, tpl_value_null());
    tpl_object_set(root, "o", 1, o);
    tpl_object_set(root, "l", 1, l);
    tpl_object_set(root, "e", 1, tpl_value_list());
    tpl_object_set(root, "p", 1, tpl_value_string("a", 1));
    tpl_object_set(root, "lam", 3, tpl_value_lambda(wrap, NULL));
    return root;
}

struct row {
    const char *s;
    int n;
};

struct page {
    const char *s;
    int n;
    bool t;
    struct row one;
    struct row *none;
};

static void gen_rows(struct coro *coro, const void *parent, void *item)
{
    (void)parent;
    for (int i = 0; i < 2; i++) {
        *(struct row *)item = (struct row){"row", i};
        coro_yield(coro, 0);
    }
}

static const struct tpl_desc row_desc =
    TPL_DESC(struct row, TPL_FIELD(struct row, s), TPL_FIELD(struct row, n));
static const struct tpl_desc page_desc = TPL_DESC(
    struct page, TPL_FIELD(struct page, s), TPL_FIELD(struct page, n), TPL_FIELD(struct page, t),
    TPL_STRUCT(struct page, one, row_desc), TPL_STRUCT_PTR(struct page, none, row_desc),
    TPL_SEQ("l", gen_rows, row_desc), TPL_LAMBDA("lam", wrap));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pieces pc = {.n = 0};
    const char *p = (const char *)data, *end = p + size;
    while (pc.n < 27) {
        const char *cut = memchr(p, 0xff, (size_t)(end - p));
        pc.p[pc.n] = p;
        pc.len[pc.n++] = cut ? (size_t)(cut - p) : (size_t)(end - p);
        if (!cut)
            break;
        p = cut + 1;
    }
    struct tpl_partials loader = {load_piece, &pc};
    struct tpl_scratch *scratch = tpl_scratch_new();
    struct strbuf out = {0};
    char err[256];

    struct tpl_value *v = make_data();
    struct tpl *t = tpl_compile("fuzz", pc.p[0], pc.len[0], NULL, &loader, err, sizeof(err));
    if (t)
        tpl_render_value(t, v, &out, scratch, err, sizeof(err));
    tpl_free(t);
    tpl_value_free(v);

    struct page page = {.s = "<s>", .n = 1, .t = true, .one = {"one", 1}};
    t = tpl_compile("fuzz", pc.p[0], pc.len[0], &page_desc, &loader, err, sizeof(err));
    strbuf_reset(&out);
    if (t)
        tpl_render(t, &page, &out, scratch, err, sizeof(err));
    tpl_free(t);

    strbuf_free(&out);
    tpl_scratch_free(scratch);
    return 0;
}
