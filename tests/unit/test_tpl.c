/* The template engine with the dynamic binding: the language itself,
 * partials (from memory and from files), inheritance, dynamic names,
 * lambdas as C callbacks, errors with their positions, limits. The struct
 * binding is in test_tpl_struct.c. */
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "tpl/tpl.h"
#include "tpl/tpl_internal.h" /* size_hint */

/* ---- data: a tiny JSON reader ('single quotes' allowed, for C strings) --- */

static struct tpl_value *parse(const char **s);

static void skip_ws(const char **s)
{
    while (**s == ' ' || **s == '\n')
        (*s)++;
}

static struct tpl_value *parse_string(const char **s)
{
    char q = *(*s)++, buf[256];
    size_t n = 0;
    while (**s && **s != q && n < sizeof(buf)) {
        char ch = *(*s)++;
        if (ch == '\\') {
            ch = *(*s)++;
            ch = ch == 'n' ? '\n' : ch == 'r' ? '\r' : ch == 't' ? '\t' : ch;
        }
        buf[n++] = ch;
    }
    (*s)++;
    return tpl_value_string(buf, n);
}

static struct tpl_value *parse(const char **s)
{
    skip_ws(s);
    char ch = **s;
    if (ch == '{' || ch == '[') {
        struct tpl_value *v = ch == '{' ? tpl_value_object() : tpl_value_list();
        (*s)++;
        for (skip_ws(s); **s != '}' && **s != ']'; skip_ws(s)) {
            if (ch == '{') {
                skip_ws(s);
                struct tpl_value *key = parse_string(s);
                skip_ws(s);
                (*s)++; /* : */
                tpl_object_set(v, key->str.p, key->str.len, parse(s));
                tpl_value_free(key);
            } else {
                tpl_list_push(v, parse(s));
            }
            skip_ws(s);
            if (**s == ',')
                (*s)++;
        }
        (*s)++;
        return v;
    }
    if (ch == '\'' || ch == '"')
        return parse_string(s);
    if (strncmp(*s, "true", 4) == 0 || strncmp(*s, "null", 4) == 0) {
        *s += 4;
        return ch == 't' ? tpl_value_bool(true) : tpl_value_null();
    }
    if (strncmp(*s, "false", 5) == 0) {
        *s += 5;
        return tpl_value_bool(false);
    }
    char *end;
    long long i = strtoll(*s, &end, 10);
    if (*end == '.' || *end == 'e') {
        double d = strtod(*s, &end);
        *s = end;
        return tpl_value_double(d);
    }
    *s = end;
    return tpl_value_int(i);
}

static struct tpl_value *data(const char *json)
{
    return parse(&json);
}

/* ---- partials from memory ---------------------------------------------- */

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

/* Renders template with data (JSON) and partials (NULL-terminated array);
 * returns the output or "ERROR <message>" (static buffer). */
static const char *render_with(const char *template, const char *json, const struct named *parts)
{
    static char result[4096];
    char err[256] = "";
    struct tpl_partials loader = {load_named, (void *)parts};
    struct tpl_value *v = data(json);
    struct strbuf out = {0};
    struct tpl *t =
        tpl_compile("test", template, strlen(template), NULL, &loader, err, sizeof(err));
    if (!t || tpl_render_value(t, v, &out, NULL, err, sizeof(err)) < 0)
        snprintf(result, sizeof(result), "ERROR %s", err);
    else
        snprintf(result, sizeof(result), "%s", out.buf ? out.buf : "");
    strbuf_free(&out);
    tpl_free(t);
    tpl_value_free(v);
    return result;
}

static const char *render(const char *template, const char *json)
{
    return render_with(template, json, NULL);
}

/* ---- the language -------------------------------------------------------- */

TEST(variables_are_escaped_unless_triple_or_ampersand)
{
    const char *d = "{'x': '& < > \" \\''}";
    CHECK_EQ_STR(render("{{x}}", d), "&amp; &lt; &gt; &quot; &#39;");
    CHECK_EQ_STR(render("{{{x}}}", d), "& < > \" '");
    CHECK_EQ_STR(render("{{&x}}", d), "& < > \" '");
    CHECK_EQ_STR(render("{{ x }}|{{{ x }}}|{{& x }}", "{'x': 'a'}"), "a|a|a");
    CHECK_EQ_STR(render("<{{missing}}>", "{}"), "<>");
    CHECK_EQ_STR(render("{{template}}", "{'template': '{{x}}', 'x': 1}"), "{{x}}");
}

TEST(values_print_as_json_would)
{
    CHECK_EQ_STR(
        render("{{i}} {{n}} {{d}} {{e}} {{t}} {{f}} [{{z}}]",
               "{'i': 85, 'n': -3, 'd': 1.21, 'e': 2.5, 't': true, 'f': false, 'z': null}"),
        "85 -3 1.21 2.5 true false []");
    CHECK_EQ_STR(render("[{{l}}][{{o}}]", "{'l': [1], 'o': {'a': 1}}"), "[][]");
}

/* The reference: the shortest of printf's %.15g, %.16g, %.17g that reads back. */
static void shortest(double d, char *buf, size_t size)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
}

TEST(doubles_print_shortest)
{
    const double cases[] = {0.0,
                            -0.0,
                            0.1,
                            0.5,
                            1.21,
                            2.675,
                            1e-4,
                            1.5e-5,
                            -3.75,
                            0.1 + 0.2,
                            1.0 / 3,
                            100.0,
                            123456789.125,
                            1e14 + 0.5,
                            1e15,
                            1e21,
                            9007199254740993.0,
                            0.000123456789,
                            5e-324};
    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        char want[64];
        struct tpl_value *v = tpl_value_object();
        struct strbuf out = {0};
        char err[128];
        tpl_object_set(v, "d", 1, tpl_value_double(cases[i]));
        struct tpl *t = tpl_compile("t", "{{d}}", 5, NULL, NULL, err, sizeof(err));
        tpl_render_value(t, v, &out, NULL, err, sizeof(err));
        shortest(cases[i], want, sizeof(want));
        CHECK_EQ_STR(out.buf, want);
        strbuf_free(&out);
        tpl_free(t);
        tpl_value_free(v);
    }
}

TEST(sections_iterate_lists_and_enter_objects)
{
    CHECK_EQ_STR(render("{{#l}}<{{n}}>{{/l}}", "{'l': [{'n': 1}, {'n': 2}, {'n': 3}]}"),
                 "<1><2><3>");
    CHECK_EQ_STR(render("{{#o}}{{a}}{{b}}{{/o}}", "{'o': {'a': 1}, 'b': 2}"), "12");
    CHECK_EQ_STR(render("{{#l}}({{.}}){{/l}}", "{'l': ['a', 1, 1.5]}"), "(a)(1)(1.5)");
    CHECK_EQ_STR(render("{{#l}}({{#.}}{{.}}{{/.}}){{/l}}", "{'l': [[1, 2], ['a']]}"), "(12)(a)");
    CHECK_EQ_STR(render("{{#.}}{{v}}{{/.}}", "[{'v': 'a'}, {'v': 'b'}]"), "ab");
    CHECK_EQ_STR(render("{{#s}}{{.}} is {{s}}{{/s}}", "{'s': 'x'}"), "x is x");
}

TEST(falsy_values_skip_sections_and_run_inverted_ones)
{
    const char *falsy[] = {"false", "null", "0", "0.0", "''", "[]"};
    for (size_t i = 0; i < N_ELEMENTS(falsy); i++) {
        char json[64];
        snprintf(json, sizeof(json), "{'v': %s}", falsy[i]);
        CHECK_EQ_STR(render("[{{#v}}yes{{/v}}{{^v}}no{{/v}}]", json), "[no]");
    }
    CHECK_EQ_STR(render("[{{#v}}yes{{/v}}{{^v}}no{{/v}}]", "{}"), "[no]");
    const char *truthy[] = {"true", "1", "'0'", "{}", "[0]"};
    for (size_t i = 0; i < N_ELEMENTS(truthy); i++) {
        char json[64];
        snprintf(json, sizeof(json), "{'v': %s}", truthy[i]);
        CHECK_EQ_STR(render("[{{^v}}no{{/v}}{{#v}}yes{{/v}}]", json), "[yes]");
    }
}

TEST(names_resolve_through_the_context_stack)
{
    CHECK_EQ_STR(render("{{#a}}{{#b}}{{x}}{{y}}{{z}}{{/b}}{{/a}}",
                        "{'a': {'b': {'x': 1}, 'y': 2}, 'z': 3, 'x': 'no', 'y': 'no'}"),
                 "123");
    CHECK_EQ_STR(render("{{a.b.c}}", "{'a': {'b': {'c': 'deep'}}}"), "deep");
    /* the first part is found through the stack, the rest only below it */
    CHECK_EQ_STR(render("[{{#a}}{{b.c}}{{/a}}]", "{'a': {'b': {}}, 'b': {'c': 'wrong'}}"), "[]");
    CHECK_EQ_STR(render("[{{a.b}}]", "{'a.b': 'never a key'}"), "[]");
    CHECK_EQ_STR(render("{{#a.b}}{{c}}{{/a.b}}", "{'a': {'b': {'c': 'x'}}}"), "x");
    CHECK_EQ_STR(render("[{{a.b.c}}]", "{'a': 'string'}"), "[]");
}

TEST(comments_and_standalone_lines)
{
    CHECK_EQ_STR(render("a{{! one\ntwo }}b", "{}"), "ab");
    CHECK_EQ_STR(render("a\n  {{! c }}\nb\n", "{}"), "a\nb\n");
    CHECK_EQ_STR(render("| a\n{{#t}}\n| b\n{{/t}}\n| c\n", "{'t': true}"), "| a\n| b\n| c\n");
    CHECK_EQ_STR(render("|\r\n{{#t}}\r\n{{/t}}\r\n|", "{'t': true}"), "|\r\n|");
    CHECK_EQ_STR(render("  {{#t}}\n#{{/t}}\n/", "{'t': true}"), "#\n/");
    CHECK_EQ_STR(render(" {{#t}}Y{{/t}}\n", "{'t': true}"), " Y\n");
    /* a variable never makes a line standalone */
    CHECK_EQ_STR(render("  {{x}}\n", "{'x': 'v'}"), "  v\n");
}

TEST(set_delimiters)
{
    CHECK_EQ_STR(render("{{=<% %>=}}(<%x%>)<%={{ }}=%>{{x}}", "{'x': 1}"), "(1)1");
    CHECK_EQ_STR(render("{{=| |=}}|#s||{x}||/s|", "{'s': true, 'x': '<'}"), "<");
    CHECK_EQ_STR(render("a\n  {{=@ @=}}\nb@x@\n", "{'x': 2}"), "a\nb2\n");
    /* the delimiters of a template do not reach its partials */
    struct named p[] = {{"p", "{{x}}|x|"}, {0}};
    CHECK_EQ_STR(render_with("{{=| |=}}|>p|", "{'x': 3}", p), "3|x|");
}

TEST(partials)
{
    struct named p[] = {{"row", "<{{n}}>"},
                        {"tree", "{{n}}({{#kids}}{{>tree}}{{/kids}})"},
                        {"lines", "a\n{{x}}\nb\n"},
                        {"outer", "[\n  {{>lines}}\n]\n"},
                        {0}};
    CHECK_EQ_STR(render_with("{{#l}}{{>row}}{{/l}}", "{'l': [{'n': 1}, {'n': 2}]}", p), "<1><2>");
    CHECK_EQ_STR(render_with("[{{>nope}}]", "{}", p), "[]");
    CHECK_EQ_STR(
        render_with("{{>tree}}", "{'n': 1, 'kids': [{'n': 2, 'kids': [{'n': 3, 'kids': []}]}]}", p),
        "1(2(3()))");
    /* standalone: every line of the partial is indented; the data are not */
    CHECK_EQ_STR(render_with("x\n  {{>lines}}\ny", "{'x': '1\\n2'}", p), "x\n  a\n  1\n2\n  b\ny");
    CHECK_EQ_STR(render_with("  {{>outer}}", "{'x': 'v'}", p), "  [\n    a\n    v\n    b\n  ]\n");
    /* inline: not indented */
    CHECK_EQ_STR(render_with("  - {{>lines}}", "{'x': 'v'}", p), "  - a\nv\nb\n");
}

TEST(partials_without_a_loader_render_empty)
{
    char err[128];
    struct tpl *t = tpl_compile("t", "[{{>p}}]", 8, NULL, NULL, err, sizeof(err));
    struct tpl_value *v = tpl_value_object();
    struct strbuf out = {0};
    CHECK(t != NULL);
    CHECK_EQ_INT(tpl_render_value(t, v, &out, NULL, err, sizeof(err)), 0);
    CHECK_EQ_STR(out.buf, "[]");
    strbuf_free(&out);
    tpl_value_free(v);
    tpl_free(t);
}

TEST(dynamic_names)
{
    struct named p[] = {{"a", "A{{x}}"}, {"b", "B"}, {"node", "{{n}}<{{#c}}{{>*t}}{{/c}}>"}, {0}};
    CHECK_EQ_STR(render_with("{{#l}}{{>*k}}{{/l}}", "{'l': [{'k': 'a', 'x': 1}, {'k': 'b'}]}", p),
                 "A1B");
    CHECK_EQ_STR(render_with("[{{>*k}}][{{>*nope}}][{{>*n}}]", "{'k': 'zzz', 'n': 5}", p),
                 "[][][]");
    CHECK_EQ_STR(render_with("{{>*t}}", "{'t': 'node', 'n': 1, 'c': [{'n': 2, 'c': []}]}", p),
                 "1<2<>>");
    CHECK_EQ_STR(render_with("|{{> * k }}|", "{'k': 'b'}", p), "|B|");
}

TEST(inheritance)
{
    struct named p[] = {
        {"page", "<h1>{{$title}}Default{{/title}}</h1>\n{{$body}}\n  none\n{{/body}}\n"},
        {"mid", "{{<page}}{{$title}}Mid{{/title}}{{/page}}"},
        {"list", "<ul>\n  {{$items}}{{/items}}\n</ul>\n"},
        {0},
    };
    CHECK_EQ_STR(render_with("{{<page}}{{/page}}", "{}", p), "<h1>Default</h1>\n  none\n");
    CHECK_EQ_STR(render_with("{{<page}}{{$title}}T {{x}}{{/title}}ignored{{/page}}", "{'x': 1}", p),
                 "<h1>T 1</h1>\n  none\n");
    /* the outermost override wins */
    CHECK_EQ_STR(render_with("{{<mid}}{{$title}}Top{{/title}}{{/mid}}", "{}", p),
                 "<h1>Top</h1>\n  none\n");
    CHECK_EQ_STR(render_with("{{<mid}}{{/mid}}", "{}", p), "<h1>Mid</h1>\n  none\n");
    /* a block is re-indented where it is rendered */
    CHECK_EQ_STR(
        render_with("{{<page}}\n{{$body}}\nline 1\nline 2\n{{/body}}\n{{/page}}\n", "{}", p),
        "<h1>Default</h1>\n  line 1\n  line 2\n");
    CHECK_EQ_STR(
        render_with("{{<list}}{{$items}}\n<li>a</li>\n<li>b</li>{{/items}}\n{{/list}}\n", "{}", p),
        "<ul>\n  <li>a</li>\n  <li>b</li>\n</ul>\n");
    /* a block outside any parent is its default */
    CHECK_EQ_STR(render("{{$b}}default {{x}}{{/b}}", "{'x': 1}"), "default 1");
}

TEST(output_size_hint_grows_to_the_largest_output)
{
    char err[128];
    const char *src = "{{#l}}0123456789{{/l}}";
    struct tpl *t = tpl_compile("t", src, strlen(src), NULL, NULL, err, sizeof(err));
    struct tpl_value *v = data("{'l': [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]}");
    struct strbuf out = {0};
    CHECK(t->size_hint < 200);
    CHECK_EQ_INT(tpl_render_value(t, v, &out, NULL, err, sizeof(err)), 0);
    CHECK_EQ_INT(out.len, 200);
    CHECK_EQ_INT(t->size_hint, 200);
    strbuf_free(&out);
    tpl_value_free(v);
    tpl_free(t);
}

/* ---- partials from files -------------------------------------------------- */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(files_and_partials_beside_them)
{
    char dir[] = "/tmp/test_tpl.XXXXXX", sub[64], path[128], err[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    mkdir(sub, 0700);
    write_file(sub, "main", "[{{>a}}|{{>b}}|{{>../secret}}|{{>.}}|{{>..}}|{{>fifo}}|{{>d}}]");
    write_file(sub, "a", "A");
    write_file(sub, "b.mustache", "B{{>a}}");
    write_file(dir, "secret", "S");
    snprintf(path, sizeof(path), "%s/fifo", sub);
    CHECK(mkfifo(path, 0600) == 0); /* must not block the compile */
    snprintf(path, sizeof(path), "%s/d", sub);
    mkdir(path, 0700);
    write_file(sub, "d.mustache", "D"); /* "d" is a directory, not a partial */
    snprintf(path, sizeof(path), "%s/main", sub);

    struct tpl *t = tpl_compile_file(path, NULL, err, sizeof(err));
    struct tpl_value *v = tpl_value_object();
    struct strbuf out = {0};
    CHECK(t != NULL);
    CHECK_EQ_INT(tpl_render_value(t, v, &out, NULL, err, sizeof(err)), 0);
    CHECK_EQ_STR(out.buf, "[A|BA|||||D]"); /* nothing outside the directory */

    /* the struct binding reports a partial it cannot find */
    static const struct tpl_desc none = {.name = "struct none"};
    write_file(sub, "bad", "x\n  {{>missing}}");
    snprintf(path, sizeof(path), "%s/bad", sub);
    CHECK(tpl_compile_file(path, &none, err, sizeof(err)) == NULL);
    char want[256];
    snprintf(want, sizeof(want), "%s:2:3: cannot load partial 'missing': No such file or directory",
             path);
    CHECK_EQ_STR(err, want);
    snprintf(path, sizeof(path), "%s/nope", sub);
    CHECK(tpl_compile_file(path, NULL, err, sizeof(err)) == NULL);

    strbuf_free(&out);
    tpl_value_free(v);
    tpl_free(t);
    const char *files[] = {"sub/main", "sub/a",          "sub/b.mustache", "sub/bad", "sub/fifo",
                           "sub/d",    "sub/d.mustache", "secret",         "sub",     ""};
    for (size_t i = 0; i < N_ELEMENTS(files); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        remove(path);
    }
}

/* ---- lambdas (the spec's ~lambdas cases, as C callbacks) ------------------ */

static int lambda_text(const void *data, struct view text, struct strbuf *out)
{
    (void)text;
    return strbuf_append_str(out, data);
}

static int lambda_count(const void *data, struct view text, struct strbuf *out)
{
    (void)text;
    int *calls = (int *)data;
    return strbuf_append_i64(out, ++*calls);
}

static int lambda_is_x(const void *data, struct view text, struct strbuf *out)
{
    (void)data;
    return strbuf_append_str(out, view_eq(text, "{{x}}", 5) ? "yes" : "no");
}

static int lambda_wrap(const void *data, struct view text, struct strbuf *out)
{
    const char *mid = data;
    int r = strbuf_append(out, text.p, text.len);
    if (r == 0)
        r = strbuf_append_str(out, mid);
    return r ? r : strbuf_append(out, text.p, text.len);
}

static int lambda_fail(const void *data, struct view text, struct strbuf *out)
{
    (void)data;
    (void)text;
    (void)out;
    return -EPERM;
}

static const char *render_lambda(const char *template, tpl_lambda_fn *fn, const void *ctx)
{
    static char result[512];
    char err[256] = "";
    struct tpl_value *v = data("{'planet': 'world', 'x': 'Error!', 'static': 'static'}");
    tpl_object_set(v, "lambda", 6, tpl_value_lambda(fn, ctx));
    struct strbuf out = {0};
    struct tpl *t = tpl_compile("t", template, strlen(template), NULL, NULL, err, sizeof(err));
    if (!t || tpl_render_value(t, v, &out, NULL, err, sizeof(err)) < 0)
        snprintf(result, sizeof(result), "ERROR %s", err);
    else
        snprintf(result, sizeof(result), "%s", out.buf ? out.buf : "");
    strbuf_free(&out);
    tpl_free(t);
    tpl_value_free(v);
    return result;
}

TEST(lambdas)
{
    int calls = 0;
    CHECK_EQ_STR(render_lambda("Hello, {{lambda}}!", lambda_text, "world"), "Hello, world!");
    CHECK_EQ_STR(render_lambda("Hello, {{lambda}}!", lambda_text, "{{planet}}"), "Hello, world!");
    CHECK_EQ_STR(
        render_lambda("{{= | | =}}\nHello, (|&lambda|)!", lambda_text, "|planet| => {{planet}}"),
        "Hello, (|planet| => world)!");
    CHECK_EQ_STR(render_lambda("{{lambda}} == {{{lambda}}} == {{lambda}}", lambda_count, &calls),
                 "1 == 2 == 3");
    CHECK_EQ_STR(render_lambda("<{{lambda}}{{{lambda}}}", lambda_text, ">"), "<&gt;>");
    CHECK_EQ_STR(render_lambda("<{{#lambda}}{{x}}{{/lambda}}>", lambda_is_x, NULL), "<yes>");
    CHECK_EQ_STR(render_lambda("<{{#lambda}}-{{/lambda}}>", lambda_wrap, "{{planet}}"),
                 "<-world->");
    CHECK_EQ_STR(
        render_lambda("{{= | | =}}<|#lambda|-|/lambda|>", lambda_wrap, "{{planet}} => |planet|"),
        "<-{{planet}} => world->");
    CHECK_EQ_STR(render_lambda("{{#lambda}}FILE{{/lambda}} != {{#lambda}}LINE{{/lambda}}",
                               lambda_wrap, "__"),
                 "FILE__FILE != LINE__LINE");
    CHECK_EQ_STR(render_lambda("<{{^lambda}}{{static}}{{/lambda}}>", lambda_text, ""), "<>");
    CHECK_EQ_STR(render_lambda("ab\n{{lambda}}", lambda_fail, NULL),
                 "ERROR t:2:1: lambda 'lambda' failed: Operation not permitted");
    CHECK_EQ_STR(render_lambda("{{lambda}}", lambda_text, "{{#x}}"),
                 "ERROR t:1:1: result of lambda: lambda:1:1: 'x' is never closed");
}

/* ---- errors --------------------------------------------------------------- */

static const char *compile_error(const char *template)
{
    static char err[256];
    struct named p[] = {{"broken", "ok\n {{#x}}"}, {0}};
    struct tpl_partials loader = {load_named, p};
    struct tpl *t =
        tpl_compile("page", template, strlen(template), NULL, &loader, err, sizeof(err));
    if (t) {
        tpl_free(t);
        return "compiled";
    }
    return err;
}

TEST(compile_errors_name_the_line_and_column)
{
    CHECK_EQ_STR(compile_error("a\nb {{#s}}\n"), "page:2:3: 's' is never closed");
    CHECK_EQ_STR(compile_error("{{#a}}{{#b}}{{/a}}{{/b}}"),
                 "page:1:13: closing 'a' but 'b' (line 1) is open");
    CHECK_EQ_STR(compile_error("x {{/a}}"), "page:1:3: closing 'a', which is not open");
    CHECK_EQ_STR(compile_error("ab {{x"), "page:1:4: unclosed tag");
    CHECK_EQ_STR(compile_error("{{{x}}"), "page:1:1: unclosed tag");
    CHECK_EQ_STR(compile_error("{{ }}"), "page:1:1: empty tag");
    CHECK_EQ_STR(compile_error("{{a b}}"), "page:1:1: bad tag name 'a b'");
    CHECK_EQ_STR(compile_error("{{a..b}}"), "page:1:1: bad name 'a..b'");
    CHECK_EQ_STR(compile_error("{{=<%%>=}}"), "page:1:1: bad delimiters '<%%>'");
    CHECK_EQ_STR(compile_error("{{= a b c =}}"), "page:1:1: bad delimiters 'a b c'");
    CHECK_EQ_STR(compile_error("{{<p}}{{x}}{{/p}}"),
                 "page:1:7: only blocks can be inside parent 'p'");
    CHECK_EQ_STR(compile_error("{{>broken}}"), "broken:2:2: 'x' is never closed");
    CHECK_EQ_STR(compile_error("{{<*p}}{{/*p}}"), "compiled");
}

TEST(recursion_stops_at_the_depth_limit)
{
    struct named p[] = {{"loop", "x\n {{>loop}}"}, {"a", "{{#.}}{{>a}}{{/.}}"}, {0}};
    CHECK_EQ_STR(render_with("{{>loop}}", "{}", p),
                 "ERROR loop:2:2: partials, parents or lambdas nested deeper than 256");
    CHECK_EQ_STR(render_with("{{>a}}", "{'x': 1}", p),
                 "ERROR a:1:7: partials, parents or lambdas nested deeper than 256");
    /* parents that inherit from themselves */
    struct named q[] = {{"p", "{{<p}}{{/p}}"}, {0}};
    CHECK_EQ_STR(render_with("{{<p}}{{/p}}", "{}", q),
                 "ERROR p:1:1: partials, parents or lambdas nested deeper than 256");
}

TEST(scratch_is_reusable_and_bindings_are_checked)
{
    char err[128];
    const char *src = "{{#l}}{{.}}{{/l}}";
    struct tpl *t = tpl_compile("t", src, strlen(src), NULL, NULL, err, sizeof(err));
    struct tpl_scratch *s = tpl_scratch_new();
    struct tpl_value *v = data("{'l': [1, 2, 3]}");
    struct strbuf out = {0};
    for (int i = 0; i < 3; i++) {
        strbuf_reset(&out);
        CHECK_EQ_INT(tpl_render_value(t, v, &out, s, err, sizeof(err)), 0);
        CHECK_EQ_STR(out.buf, "123");
    }
    int x = 0;
    CHECK_EQ_INT(tpl_render(t, &x, &out, s, err, sizeof(err)), -EINVAL);
    strbuf_free(&out);
    tpl_value_free(v);
    tpl_scratch_free(s);
    tpl_free(t);
}

TEST(values)
{
    struct tpl_value *o = tpl_value_object(), *l = tpl_value_list();
    CHECK_EQ_INT(tpl_object_set(o, "a", 1, tpl_value_int(1)), 0);
    CHECK_EQ_INT(tpl_object_set(o, "a", 1, tpl_value_int(2)), 0);
    CHECK_EQ_INT(tpl_object_get(o, "a", 1)->i, 1); /* the first one wins */
    CHECK(tpl_object_get(o, "b", 1) == NULL);
    CHECK(tpl_object_get(l, "a", 1) == NULL);
    CHECK_EQ_INT(tpl_list_push(o, tpl_value_null()), -EINVAL); /* and frees the item */
    CHECK_EQ_INT(tpl_object_set(l, "k", 1, tpl_value_null()), -EINVAL);
    CHECK_EQ_INT(tpl_list_push(l, NULL), -ENOMEM);
    CHECK_EQ_INT(tpl_list_push(l, tpl_value_string("s\0t", 3)), 0);
    CHECK_EQ_INT(l->list.items[0]->str.len, 3);
    tpl_value_free(o);
    tpl_value_free(l);
}

int main(void)
{
    RUN(variables_are_escaped_unless_triple_or_ampersand);
    RUN(values_print_as_json_would);
    RUN(doubles_print_shortest);
    RUN(sections_iterate_lists_and_enter_objects);
    RUN(falsy_values_skip_sections_and_run_inverted_ones);
    RUN(names_resolve_through_the_context_stack);
    RUN(comments_and_standalone_lines);
    RUN(set_delimiters);
    RUN(partials);
    RUN(partials_without_a_loader_render_empty);
    RUN(dynamic_names);
    RUN(inheritance);
    RUN(output_size_hint_grows_to_the_largest_output);
    RUN(files_and_partials_beside_them);
    RUN(lambdas);
    RUN(compile_errors_name_the_line_and_column);
    RUN(recursion_stops_at_the_depth_limit);
    RUN(scratch_is_reusable_and_bindings_are_checked);
    RUN(values);
    return test_summary();
}
