/* micro_tpl.c - render a page with a 100-row table, with each binding.
 *
 *     build/micro_tpl [RENDERS]
 *
 * Prints, per binding, nanoseconds and heap allocations per render. Each
 * render goes into a fresh strbuf (as a response body would) with a scratch
 * kept across renders (as a worker thread would keep it). Allocations are
 * counted by wrapping malloc and friends, which only works without ASan
 * (its allocator must stay in charge): under ASan they show as "n/a".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "base/coro.h"
#include "tpl/tpl.h"

#if defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
#endif

static unsigned long allocs;

#if COUNT_ALLOCS
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);

void *malloc(size_t size)
{
    allocs++;
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    allocs++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    allocs++;
    return __libc_realloc(p, size);
}
#endif

#define ROWS 100

static const char page_src[] =
    "<!doctype html>\n"
    "<html>\n"
    "<head><title>{{title}}</title></head>\n"
    "<body>\n"
    "<h1>{{title}}</h1>\n"
    "<table>\n"
    "  <tr><th>#</th><th>Name</th><th>Price</th><th>Stock</th></tr>\n"
    "  {{#rows}}\n"
    "  <tr><td>{{id}}</td><td>{{name}}</td><td>{{price}}</td>"
    "<td>{{#in_stock}}yes{{/in_stock}}{{^in_stock}}no{{/in_stock}}</td></tr>\n"
    "  {{/rows}}\n"
    "</table>\n"
    "<p>{{footer}}</p>\n"
    "</body>\n"
    "</html>\n";

/* ---- struct binding: rows come from a generator -------------------------- */

struct row {
    int id;
    const char *name;
    double price;
    bool in_stock;
};

struct page {
    const char *title, *footer;
    const char *const *names;
};

static void gen_rows(struct coro *coro, const void *parent, void *item)
{
    const struct page *p = parent;
    struct row *r = item;
    for (int i = 0; i < ROWS; i++) {
        *r = (struct row){i, p->names[i], i * 0.25 + 1, i % 3 != 0};
        coro_yield(coro, 0);
    }
}

static const struct tpl_desc row_desc =
    TPL_DESC(struct row, TPL_FIELD(struct row, id), TPL_FIELD(struct row, name),
             TPL_FIELD(struct row, price), TPL_FIELD(struct row, in_stock));
static const struct tpl_desc page_desc =
    TPL_DESC(struct page, TPL_FIELD(struct page, title), TPL_FIELD(struct page, footer),
             TPL_SEQ("rows", gen_rows, row_desc));

/* ---- dynamic binding: the same data as a tree ----------------------------- */

static struct tpl_value *page_value(const char *const *names)
{
    struct tpl_value *page = tpl_value_object(), *rows = tpl_value_list();
    tpl_object_set(page, "title", 5, tpl_value_string("Products & prices", 17));
    tpl_object_set(page, "footer", 6, tpl_value_string("<end>", 5));
    for (int i = 0; i < ROWS; i++) {
        struct tpl_value *row = tpl_value_object();
        tpl_object_set(row, "id", 2, tpl_value_int(i));
        tpl_object_set(row, "name", 4, tpl_value_string(names[i], strlen(names[i])));
        tpl_object_set(row, "price", 5, tpl_value_double(i * 0.25 + 1));
        tpl_object_set(row, "in_stock", 8, tpl_value_bool(i % 3 != 0));
        tpl_list_push(rows, row);
    }
    tpl_object_set(page, "rows", 4, rows);
    return page;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static size_t render_once(const struct tpl *t, const void *data, bool dynamic,
                          struct tpl_scratch *scratch)
{
    char err[256];
    struct strbuf out = {0};
    int r = dynamic ? tpl_render_value(t, data, &out, scratch, err, sizeof(err))
                    : tpl_render(t, data, &out, scratch, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    size_t size = out.len;
    strbuf_free(&out);
    return size;
}

/* n renders after n/10 to warm up; returns the size of one output. */
static size_t bench(const char *label, const struct tpl *t, const void *data, bool dynamic, int n)
{
    struct tpl_scratch *scratch = tpl_scratch_new();
    size_t size = 0;
    for (int i = 0; i < n / 10; i++)
        render_once(t, data, dynamic, scratch);
    allocs = 0;
    double start = now_ns();
    for (int i = 0; i < n; i++)
        size = render_once(t, data, dynamic, scratch);
    double ns = (now_ns() - start) / n;
    unsigned long counted = allocs;
    if (COUNT_ALLOCS)
        printf("%-8s %8.0f ns/render  %6.2f allocs/render  %zu bytes\n", label, ns,
               (double)counted / n, size);
    else
        printf("%-8s %8.0f ns/render  n/a allocs/render  %zu bytes\n", label, ns, size);
    tpl_scratch_free(scratch);
    return size;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (n < 10)
        n = 10;
    static char names[ROWS][24];
    const char *name_ptrs[ROWS];
    for (int i = 0; i < ROWS; i++) {
        snprintf(names[i], sizeof(names[i]), "Product <%03d> & co", i);
        name_ptrs[i] = names[i];
    }
    char err[256];
    struct tpl *ts =
        tpl_compile("page", page_src, sizeof(page_src) - 1, &page_desc, NULL, err, sizeof(err));
    struct tpl *td =
        tpl_compile("page", page_src, sizeof(page_src) - 1, NULL, NULL, err, sizeof(err));
    if (!ts || !td) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct page page = {"Products & prices", "<end>", name_ptrs};
    struct tpl_value *value = page_value(name_ptrs);

    printf("%d renders of a %d-row table\n", n, ROWS);
    size_t a = bench("struct", ts, &page, false, n);
    size_t b = bench("dynamic", td, value, true, n);
    if (a != b)
        fprintf(stderr, "outputs differ: %zu vs %zu bytes\n", a, b);

    tpl_value_free(value);
    tpl_free(ts);
    tpl_free(td);
    return a == b ? 0 : 1;
}
