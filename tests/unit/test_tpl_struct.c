/* The template engine with the struct binding: descriptors, generators on
 * coroutines, lambdas, partials compiled per context, and the compile-time
 * errors that make a template typo a build-time-like failure. */
#include "test.h"

#include <errno.h>
#include <stdio.h>

#include "base/strbuf.h"
#include "base/coro.h"
#include "tpl/tpl.h"

struct user {
    const char *name;
};

struct price {
    double amount;
    char currency[4];
};

struct item {
    int id;
    const char *name;
    struct price price;
    bool in_stock;
    int n_tags;
};

struct page {
    const char *title;
    char lang[8];
    struct view path;
    long count;
    unsigned short port;
    uint8_t small;
    int64_t big;
    float ratio;
    struct user *user;
    int n_items;
    int *released; /* counts generators that ran their defers */
    bool abort_items;
};

static void gen_tags(struct coro *coro, const void *parent, void *item)
{
    const struct item *it = parent;
    struct user *tag = item;
    char name[16];
    for (int i = 0; i < it->n_tags; i++) {
        snprintf(name, sizeof(name), "t%d.%d", it->id, i);
        tag->name = name; /* valid until the generator runs again */
        coro_yield(coro, 0);
    }
}

static void count_release(void *arg)
{
    ++*(int *)arg;
}

static void gen_items(struct coro *coro, const void *parent, void *item)
{
    const struct page *p = parent;
    struct item *it = item;
    char name[16];
    if (p->released)
        coro_defer(coro, count_release, p->released);
    if (p->abort_items)
        coro_abort(coro);
    for (int i = 0; i < p->n_items; i++) {
        snprintf(name, sizeof(name), "<%d>", i);
        *it = (struct item){
            .id = i,
            .name = name,
            .price = {.amount = i * 1.5, .currency = "EUR"},
            .in_stock = i % 2 == 0,
            .n_tags = i,
        };
        coro_yield(coro, 0);
    }
}

static int bold(const void *data, struct view text, struct strbuf *out)
{
    (void)data;
    int r = strbuf_append_str(out, "<b>");
    if (r == 0)
        r = strbuf_append(out, text.p, text.len);
    return r ? r : strbuf_append_str(out, "</b>");
}

static int greeting(const void *data, struct view text, struct strbuf *out)
{
    const struct page *p = data;
    (void)text;
    return strbuf_append_str(out, p->user ? "Hi {{user.name}}" : "Hi {{title}}");
}

static const struct tpl_desc user_desc = TPL_DESC(struct user, TPL_FIELD(struct user, name));
static const struct tpl_desc price_desc =
    TPL_DESC(struct price, TPL_FIELD(struct price, amount), TPL_FIELD(struct price, currency));
static const struct tpl_desc item_desc =
    TPL_DESC(struct item, TPL_FIELD(struct item, id), TPL_FIELD(struct item, name),
             TPL_STRUCT(struct item, price, price_desc), TPL_FIELD(struct item, in_stock),
             TPL_SEQ("tags", gen_tags, user_desc));
static const struct tpl_desc page_desc = TPL_DESC(
    struct page, TPL_FIELD(struct page, title), TPL_FIELD(struct page, lang),
    TPL_FIELD(struct page, path), TPL_FIELD(struct page, count), TPL_FIELD(struct page, port),
    TPL_FIELD(struct page, small), TPL_FIELD(struct page, big), TPL_FIELD(struct page, ratio),
    TPL_FIELD_AS("items_wanted", struct page, n_items),
    TPL_STRUCT_PTR(struct page, user, user_desc), TPL_SEQ("items", gen_items, item_desc),
    TPL_LAMBDA("bold", bold), TPL_LAMBDA("greeting", greeting));

struct named {
    const char *name, *src;
};

static int load_named(void *ctx, const char *name, size_t len, struct strbuf *src)
{
    (void)len;
    for (const struct named *p = ctx; p && p->name; p++)
        if (strcmp(p->name, name) == 0)
            return strbuf_append_str(src, p->src);
    return -ENOENT;
}

static const struct named partials[] = {
    {"label", "[{{name}}]"},
    {"layout", "<title>{{$t}}{{title}}{{/t}}</title>{{$body}}{{/body}}"},
    {0},
};

static struct page sample(void)
{
    static struct user ann = {"Ann & Bob"};
    return (struct page){
        .title = "Home",
        .lang = "en",
        .path = {"/a/b", 4},
        .count = -12,
        .port = 8080,
        .small = 255,
        .big = INT64_MIN,
        .ratio = 0.5f,
        .user = &ann,
        .n_items = 3,
    };
}

/* Output, or "ERROR <message>" (static buffer). */
static const char *render_page(const char *template, const struct page *p,
                               struct tpl_scratch *scratch)
{
    static char result[2048];
    char err[256] = "";
    struct tpl_partials loader = {load_named, (void *)partials};
    struct strbuf out = {0};
    struct tpl *t =
        tpl_compile("t", template, strlen(template), &page_desc, &loader, err, sizeof(err));
    if (!t || tpl_render(t, p, &out, scratch, err, sizeof(err)) < 0)
        snprintf(result, sizeof(result), "ERROR %s", err);
    else
        snprintf(result, sizeof(result), "%s", out.buf ? out.buf : "");
    strbuf_free(&out);
    tpl_free(t);
    return result;
}

TEST(scalar_members_of_every_type)
{
    struct page p = sample();
    CHECK_EQ_STR(render_page("{{title}}|{{lang}}|{{path}}|{{count}}|{{port}}|{{small}}|{{big}}|"
                             "{{ratio}}|{{items_wanted}}",
                             &p, NULL),
                 "Home|en|/a/b|-12|8080|255|-9223372036854775808|0.5|3");
    CHECK_EQ_STR(render_page("{{user.name}}|{{{user.name}}}", &p, NULL), "Ann &amp; Bob|Ann & Bob");
    p.title = NULL;
    CHECK_EQ_STR(render_page("[{{title}}]", &p, NULL), "[]");
}

TEST(sections_over_members)
{
    struct page p = sample();
    CHECK_EQ_STR(render_page("{{#user}}{{name}} on {{title}}{{/user}}", &p, NULL),
                 "Ann &amp; Bob on Home");
    CHECK_EQ_STR(render_page("{{#title}}[{{.}}]{{/title}}{{#count}}{{.}}{{/count}}", &p, NULL),
                 "[Home]-12");
    p.user = NULL;
    p.count = 0;
    p.lang[0] = '\0';
    p.path.len = 0;
    CHECK_EQ_STR(render_page("{{^user}}anon{{/user}}{{#user}}x{{/user}}{{^count}}0{{/count}}"
                             "{{^lang}}-{{/lang}}{{^path}}-{{/path}}{{user.name}}",
                             &p, NULL),
                 "anon0--");
}

TEST(sequences_come_from_generators)
{
    struct page p = sample();
    const char *row =
        "{{#items}}{{id}}:{{name}}:{{price.amount}}{{price.currency}}"
        "{{#in_stock}}+{{/in_stock}}({{#tags}}{{name}},{{/tags}}){{title}};{{/items}}";
    CHECK_EQ_STR(render_page(row, &p, NULL),
                 "0:&lt;0&gt;:0EUR+()Home;1:&lt;1&gt;:1.5EUR(t1.0,)Home;"
                 "2:&lt;2&gt;:3EUR+(t2.0,t2.1,)Home;");
    p.n_items = 0;
    CHECK_EQ_STR(render_page("{{#items}}x{{/items}}{{^items}}none{{/items}}", &p, NULL), "none");
}

TEST(abandoned_generators_run_their_defers)
{
    int released = 0;
    struct page p = sample();
    p.released = &released;
    CHECK_EQ_STR(render_page("{{^items}}none{{/items}}", &p, NULL), "");
    CHECK_EQ_INT(released, 1); /* stopped after its first item */
    CHECK_EQ_STR(render_page("{{#items}}{{id}}{{/items}}", &p, NULL), "012");
    CHECK_EQ_INT(released, 2);
    p.abort_items = true;
    CHECK_EQ_STR(render_page("a\n{{#items}}x{{/items}}", &p, NULL),
                 "ERROR t:2:1: generator 'items' aborted");
    CHECK_EQ_INT(released, 3);
}

TEST(scratch_keeps_coroutines_between_renders)
{
    struct tpl_scratch *s = tpl_scratch_new();
    struct page p = sample();
    for (int i = 0; i < 3; i++)
        CHECK_EQ_STR(render_page("{{#items}}{{#tags}}{{name}}{{/tags}}{{/items}}", &p, s),
                     "t1.0t2.0t2.1");
    tpl_scratch_free(s);
}

TEST(lambdas_get_their_struct)
{
    struct page p = sample();
    CHECK_EQ_STR(render_page("{{#bold}}{{title}} {{#user}}{{name}}{{/user}}{{/bold}}", &p, NULL),
                 "<b>Home Ann &amp; Bob</b>");
    CHECK_EQ_STR(render_page("{{greeting}}", &p, NULL), "Hi Ann &amp;amp; Bob");
    CHECK_EQ_STR(
        render_page("{{{greeting}}}|{{#items}}{{#bold}}{{id}}{{/bold}}{{/items}}", &p, NULL),
        "Hi Ann &amp; Bob|<b>0</b><b>1</b><b>2</b>");
    p.user = NULL;
    CHECK_EQ_STR(render_page("{{greeting}}", &p, NULL), "Hi Home");
}

TEST(partials_compile_per_context)
{
    struct page p = sample();
    CHECK_EQ_STR(
        render_page("{{#user}}{{>label}}{{/user}}{{#items}}{{>label}}{{/items}}", &p, NULL),
        "[Ann &amp; Bob][&lt;0&gt;][&lt;1&gt;][&lt;2&gt;]");
    CHECK_EQ_STR(
        render_page("{{<layout}}{{$body}}{{#items}}{{id}}{{/items}}{{/body}}{{/layout}}", &p, NULL),
        "<title>Home</title>012");
    CHECK_EQ_STR(render_page("{{>label}}", &p, NULL), "ERROR label:1:2: unknown name 'name'");
    /* the same partial, from the same types stacked in another order */
    CHECK_EQ_STR(render_page("{{#items}}{{#tags}}{{#user}}{{>label}}{{/user}}{{/tags}}{{/items}}|"
                             "{{#user}}{{#items}}{{#tags}}{{>label}}{{/tags}}{{/items}}{{/user}}",
                             &p, NULL),
                 "[Ann &amp; Bob][Ann &amp; Bob][Ann &amp; Bob]|[t1.0][t2.0][t2.1]");
}

/* a tree: each node's children come from a generator */
struct node {
    const char *name;
    const struct node *kids;
    int n_kids;
};

static void gen_kids(struct coro *coro, const void *parent, void *item)
{
    const struct node *n = parent;
    for (int i = 0; i < n->n_kids; i++) {
        *(struct node *)item = n->kids[i];
        coro_yield(coro, 0);
    }
}

static const struct tpl_desc node_desc;
static const struct tpl_desc node_desc =
    TPL_DESC(struct node, TPL_FIELD(struct node, name), TPL_SEQ("kids", gen_kids, node_desc));

TEST(recursive_partials_over_recursive_structs)
{
    struct named p[] = {{"node", "{{name}}({{#kids}}{{>node}}{{/kids}})"}, {0}};
    struct tpl_partials loader = {load_named, p};
    const struct node leaves[] = {{"c", NULL, 0}, {"d", NULL, 0}};
    const struct node mid[] = {{"b", leaves, 2}};
    const struct node root = {"a", mid, 1};
    char err[256];
    struct strbuf out = {0};
    struct tpl *t = tpl_compile("t", "{{>node}}", 9, &node_desc, &loader, err, sizeof(err));
    CHECK(t != NULL);
    CHECK_EQ_INT(tpl_render(t, &root, &out, NULL, err, sizeof(err)), 0);
    CHECK_EQ_STR(out.buf, "a(b(c()d()))");

    /* a cycle in the data stops at the depth limit */
    struct node loop = {"x", NULL, 1};
    loop.kids = &loop;
    strbuf_reset(&out);
    CHECK_EQ_INT(tpl_render(t, &loop, &out, NULL, err, sizeof(err)), -ELOOP);
    CHECK_EQ_STR(err, "node:1:19: partials, parents or lambdas nested deeper than 256");
    strbuf_free(&out);
    tpl_free(t);
}

static const char *compile_error(const char *template)
{
    static char err[256];
    struct tpl *t =
        tpl_compile("t", template, strlen(template), &page_desc, NULL, err, sizeof(err));
    if (t) {
        tpl_free(t);
        return "compiled";
    }
    return err;
}

TEST(unknown_names_are_compile_errors)
{
    CHECK_EQ_STR(compile_error("a\n  {{nope}}"), "t:2:3: unknown name 'nope'");
    CHECK_EQ_STR(compile_error("{{#user}}{{nme}}{{/user}}"), "t:1:10: unknown name 'nme'");
    CHECK_EQ_STR(compile_error("{{user.nme}}"), "t:1:1: struct user has no field 'nme'");
    CHECK_EQ_STR(compile_error("{{title.x}}"), "t:1:1: 'title' is not a struct");
    CHECK_EQ_STR(compile_error("{{user}}"), "t:1:1: 'user' is a struct: use it as a section");
    CHECK_EQ_STR(compile_error("{{items}}"), "t:1:1: 'items' is a sequence: use it as a section");
    CHECK_EQ_STR(compile_error("{{#items}}{{.}}{{/items}}"),
                 "t:1:11: '.' is a struct item and cannot be interpolated");
    CHECK_EQ_STR(compile_error("{{>*title}}"), "t:1:1: dynamic names need the dynamic binding");
    CHECK_EQ_STR(compile_error("{{>label}}"),
                 "t:1:1: cannot load partial 'label': No such file or directory");
    /* names inside a lambda's section are the lambda's business */
    CHECK_EQ_STR(compile_error("{{#bold}}{{anything}}{{/bold}}"), "compiled");
    /* and the outer names stay visible in sections */
    CHECK_EQ_STR(compile_error("{{#items}}{{title}}{{#tags}}{{id}}{{/tags}}{{/items}}"),
                 "compiled");
}

TEST(bindings_are_checked_at_render)
{
    char err[256];
    struct tpl *t = tpl_compile("t", "x", 1, &page_desc, NULL, err, sizeof(err));
    struct tpl_value *v = tpl_value_object();
    struct strbuf out = {0};
    CHECK_EQ_INT(tpl_render_value(t, v, &out, NULL, err, sizeof(err)), -EINVAL);
    CHECK_EQ_INT(tpl_render(t, NULL, &out, NULL, err, sizeof(err)), -EINVAL);
    strbuf_free(&out);
    tpl_value_free(v);
    tpl_free(t);
}

int main(void)
{
    RUN(scalar_members_of_every_type);
    RUN(sections_over_members);
    RUN(sequences_come_from_generators);
    RUN(abandoned_generators_run_their_defers);
    RUN(scratch_keeps_coroutines_between_renders);
    RUN(lambdas_get_their_struct);
    RUN(partials_compile_per_context);
    RUN(recursive_partials_over_recursive_structs);
    RUN(unknown_names_are_compile_errors);
    RUN(bindings_are_checked_at_render);
    return test_summary();
}
