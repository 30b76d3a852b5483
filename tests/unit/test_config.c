#include "test.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

static char err[512];

static struct config *parse(const char *text)
{
    err[0] = '\0';
    return config_parse_string("t.conf", text, err, sizeof(err));
}

/* The parse fails with exactly this message. */
static void expect_error(const char *text, const char *want, int line)
{
    struct config *cfg = parse(text);
    if (cfg) {
        fprintf(stderr, "test_config.c:%d: parse succeeded, wanted \"%s\"\n", line, want);
        test_failures++;
        config_free(cfg);
        return;
    }
    if (strcmp(err, want) != 0) {
        fprintf(stderr, "test_config.c:%d: got \"%s\", wanted \"%s\"\n", line, err, want);
        test_failures++;
    }
    test_checks++;
}
#define EXPECT_ERROR(text, want) expect_error(text, want, __LINE__)

/* The n-th child of a section, used or not. */
static struct config_node *child(struct config_node *sec, int n)
{
    struct config_node *c = sec ? sec->children : NULL;
    while (c && n--)
        c = c->next;
    return c;
}

static int count(const struct config_node *sec)
{
    int n = 0;
    for (const struct config_node *c = sec->children; c; c = c->next)
        n++;
    return n;
}

static const char required[] =
    "listener 127.0.0.1:8080        # repeatable; [::1]:8080 and *:8080 too\n"
    "threads = 2                    # 0 = one per CPU\n"
    "keep_alive_timeout = 15s\n"
    "site {\n"
    "    handler /hello hello_world\n"
    "    handler /echo echo\n"
    "    serve_files / {            # the static-files issue\n"
    "        path = ./wwwroot\n"
    "    }\n"
    "}\n";

TEST(required_block)
{
    struct config *cfg = parse(required);
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ_STR(cfg->file, "t.conf");
    CHECK_EQ_INT(count(cfg->root), 4);

    struct config_node *n = config_take(cfg->root, "listener");
    CHECK(n && !n->is_section);
    CHECK_EQ_STR(n->value, "127.0.0.1:8080");
    CHECK_EQ_INT(n->line, 1);
    CHECK_EQ_STR(n->file, "t.conf");
    CHECK(config_take(cfg->root, "listener") == NULL);

    n = config_take(cfg->root, "threads");
    CHECK_EQ_STR(n->value, "2");
    CHECK_EQ_INT(n->line, 2);
    long threads = -1;
    CHECK_EQ_INT(config_int(n, 0, 1024, &threads, err, sizeof(err)), 0);
    CHECK_EQ_INT(threads, 2);

    n = config_take(cfg->root, "keep_alive_timeout");
    CHECK_EQ_STR(n->value, "15s");
    uint64_t ms = 0;
    CHECK_EQ_INT(config_duration_ms(n, &ms, err, sizeof(err)), 0);
    CHECK_EQ_INT(ms, 15000);

    struct config_node *site = config_take(cfg->root, "site");
    CHECK(site && site->is_section);
    CHECK_EQ_STR(site->value, "");
    CHECK_EQ_INT(site->line, 4);
    CHECK_EQ_INT(count(site), 3);

    n = config_take(site, "handler");
    CHECK_EQ_STR(n->value, "/hello hello_world");
    CHECK_EQ_INT(n->line, 5);
    n = config_take(site, "handler");
    CHECK_EQ_STR(n->value, "/echo echo");
    CHECK_EQ_INT(n->line, 6);
    CHECK(config_take(site, "handler") == NULL);

    /* not every key taken yet: the first leftover, depth first */
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:7: serve_files: unknown key");

    struct config_node *sf = config_take_any(site);
    CHECK(sf && sf->is_section);
    CHECK_EQ_STR(sf->name, "serve_files");
    CHECK_EQ_STR(sf->value, "/");
    CHECK_EQ_INT(sf->line, 7);
    CHECK(config_take_any(site) == NULL);

    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:8: path: unknown key");

    n = config_take(sf, "path");
    CHECK_EQ_STR(n->value, "./wwwroot");
    CHECK_EQ_INT(n->line, 8);
    CHECK(!n->is_section);
    CHECK(n->children == NULL);

    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), 0);
    config_free(cfg);
}

TEST(listener_forms)
{
    struct config *cfg = parse("listener 127.0.0.1:8080\n"
                               "listener [::1]:8080\n"
                               "listener *:8080\n"
                               "listener = [::]:80\n");
    CHECK(cfg != NULL);
    const char *want[] = {"127.0.0.1:8080", "[::1]:8080", "*:8080", "[::]:80"};
    for (int i = 0; i < 4; i++) {
        struct config_node *n = config_take(cfg->root, "listener");
        CHECK(n != NULL);
        CHECK_EQ_STR(n ? n->value : NULL, want[i]);
        CHECK_EQ_INT(n ? n->line : 0, i + 1);
    }
    CHECK(config_take(cfg->root, "listener") == NULL);
    config_free(cfg);
}

TEST(key_value_forms)
{
    struct config *cfg = parse("a value\n"
                               "b = value\n"
                               "c=value\n"
                               "d\t=\tvalue  \t \n"
                               "e   two   words  here   \n"
                               "f\n"
                               "g =\n"
                               "h = = x\n"
                               "i a=b\n"
                               "j = a#b /page#top\n"
                               "k = x # comment\n"
                               "l = x\t# comment after a tab\n"
                               "\tm\tx\ty\t\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"};
    const char *values[] = {"value", "value", "value", "value", "two   words  here",
                            "",      "",      "= x",   "a=b",   "a#b /page#top",
                            "x",     "x",     "x\ty"};
    for (int i = 0; i < 13; i++) {
        struct config_node *n = child(cfg->root, i);
        CHECK(n != NULL);
        if (!n)
            break;
        CHECK_EQ_STR(n->name, names[i]);
        CHECK_EQ_STR(n->value, values[i]);
        CHECK_EQ_INT(n->line, i + 1);
        CHECK(!n->is_section);
    }
    CHECK_EQ_INT(count(cfg->root), 13);
    config_free(cfg);
}

TEST(comments_blank_lines_crlf)
{
    struct config *cfg = parse("# a comment\r\n"
                               "\r\n"
                               "   \t  \r\n"
                               "   # indented comment = with { braces }\r\n"
                               "a = 1\r\n"
                               "sec {\r\n"
                               "  b = \"q\"\r\n"
                               "}\r\n"
                               "c = last"); /* no final newline */
    CHECK(cfg != NULL);
    if (!cfg)
        return;
    CHECK_EQ_INT(count(cfg->root), 3);
    struct config_node *a = child(cfg->root, 0);
    CHECK_EQ_STR(a->name, "a");
    CHECK_EQ_STR(a->value, "1");
    CHECK_EQ_INT(a->line, 5);
    struct config_node *sec = child(cfg->root, 1);
    CHECK(sec->is_section);
    CHECK_EQ_INT(sec->line, 6);
    CHECK_EQ_STR(child(sec, 0)->value, "q");
    CHECK_EQ_INT(child(sec, 0)->line, 7);
    CHECK_EQ_STR(child(cfg->root, 2)->value, "last");
    CHECK_EQ_INT(child(cfg->root, 2)->line, 9);
    config_free(cfg);

    /* empty input and comment-only input are valid, empty configs */
    cfg = parse("");
    CHECK(cfg && cfg->root->children == NULL);
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), 0);
    config_free(cfg);
    cfg = parse("# nothing\n\n");
    CHECK(cfg && cfg->root->children == NULL);
    config_free(cfg);

    /* a UTF-8 byte order mark is skipped */
    cfg = parse("\xEF\xBB\xBFkey = v\n");
    CHECK(cfg && strcmp(child(cfg->root, 0)->name, "key") == 0);
    config_free(cfg);
}

TEST(quoted_values)
{
    struct config *cfg = parse("a = \"quoted # not a comment\"  # a comment\n"
                               "b \"esc \\\" \\\\ \\n \\t end\"\n"
                               "c = \"  keeps spaces  \"\n"
                               "d = \"\"\n"
                               "e = \"{ } = 'x'\"\n"
                               "f = \"a\"#comment right after\n"
                               "g = \"cost \\$5 \\${HOME}\"\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ_STR(child(cfg->root, 0)->value, "quoted # not a comment");
    CHECK_EQ_STR(child(cfg->root, 1)->value, "esc \" \\ \n \t end");
    CHECK_EQ_STR(child(cfg->root, 2)->value, "  keeps spaces  ");
    CHECK_EQ_STR(child(cfg->root, 3)->value, "");
    CHECK_EQ_STR(child(cfg->root, 4)->value, "{ } = 'x'");
    CHECK_EQ_STR(child(cfg->root, 5)->value, "a");
    CHECK_EQ_STR(child(cfg->root, 6)->value, "cost $5 ${HOME}");
    CHECK_EQ_INT(count(cfg->root), 7);
    CHECK_EQ_INT(child(cfg->root, 0)->n_words, 1);
    CHECK_EQ_STR(child(cfg->root, 0)->words[0], "quoted # not a comment");
    config_free(cfg);
}

/* issue 21: a quoted word anywhere in a value ("set NAME = VALUE") */
TEST(quoted_words)
{
    setenv("COLIBRI_TEST_W", "env", 1);
    struct config *cfg = parse("set X-A = \"a; with = and <brackets>\"  # c\n"
                               "add  Link   =  \"</s.css>; rel=preload\" \"x \\\" y\"\n"
                               "plain a   b ${COLIBRI_TEST_W}\n"
                               "rewrite ^/(?<n>[a-z]+)$ /x/${n}\n"
                               "rewrite \"^/a b\\d+$\" \"/c\\\"d\"\n"
                               "s \"a b\" {\n}\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    const struct config_node *n = child(cfg->root, 0);
    CHECK_EQ_INT(n->n_words, 3);
    CHECK_EQ_STR(n->words[0], "X-A");
    CHECK_EQ_STR(n->words[1], "=");
    CHECK_EQ_STR(n->words[2], "a; with = and <brackets>");
    CHECK(n->words[3] == NULL);
    CHECK_EQ_STR(n->value, "X-A = a; with = and <brackets>");
    n = child(cfg->root, 1);
    CHECK_EQ_INT(n->n_words, 4);
    CHECK_EQ_STR(n->words[2], "</s.css>; rel=preload");
    CHECK_EQ_STR(n->words[3], "x \" y");
    n = child(cfg->root, 2);
    CHECK_EQ_STR(n->value, "a   b env"); /* unquoted: as written */
    CHECK_EQ_INT(n->n_words, 3);
    CHECK_EQ_STR(n->words[2], "env");
    n = child(cfg->root, 3); /* verbatim: ${n} is the pattern's */
    CHECK_EQ_STR(n->value, "^/(?<n>[a-z]+)$ /x/${n}");
    CHECK_EQ_STR(n->words[1], "/x/${n}");
    n = child(cfg->root, 4); /* verbatim quotes keep \d, take \" */
    CHECK_EQ_STR(n->words[0], "^/a b\\d+$");
    CHECK_EQ_STR(n->words[1], "/c\"d");
    n = child(cfg->root, 5);
    CHECK(n->is_section);
    CHECK_EQ_STR(n->value, "a b");
    config_free(cfg);
    EXPECT_ERROR("set X = \"a\"b\n", "t.conf:1: set: unexpected text after the closing quote");
    EXPECT_ERROR("set X = \"a\n", "t.conf:1: set: unterminated quote");
    EXPECT_ERROR("set X = a\"b\"\n",
                 "t.conf:1: set: quote inside an unquoted value (quote the whole value)");
}

TEST(sections)
{
    struct config *cfg = parse("serve_files \"/my dir\" {\n"
                               "  path = x\n"
                               "}\n"
                               "site\n"
                               "{\n"
                               "  inner a b\n"
                               "\n"
                               "  # a comment between the name and its brace\n"
                               "  {\n"
                               "    deep = 1\n"
                               "  }  # closing comment\n"
                               "}\n"
                               "tight{\n"
                               "}\n"
                               "eq = {\n"
                               "}\n"
                               "empty {\n"
                               "}\n"
                               "after = 1\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    struct config_node *sf = child(cfg->root, 0);
    CHECK(sf->is_section);
    CHECK_EQ_STR(sf->name, "serve_files");
    CHECK_EQ_STR(sf->value, "/my dir");
    CHECK_EQ_STR(child(sf, 0)->value, "x");

    struct config_node *site = child(cfg->root, 1);
    CHECK_EQ_STR(site->name, "site");
    CHECK(site->is_section);
    CHECK_EQ_INT(site->line, 4);
    CHECK_EQ_INT(count(site), 1);
    struct config_node *inner = child(site, 0);
    CHECK_EQ_STR(inner->name, "inner");
    CHECK_EQ_STR(inner->value, "a b");
    CHECK(inner->is_section);
    CHECK_EQ_STR(child(inner, 0)->name, "deep");
    CHECK_EQ_INT(child(inner, 0)->line, 10);

    struct config_node *tight = child(cfg->root, 2);
    CHECK_EQ_STR(tight->name, "tight");
    CHECK(tight->is_section && tight->children == NULL);
    CHECK_EQ_STR(tight->value, "");
    struct config_node *eq = child(cfg->root, 3);
    CHECK_EQ_STR(eq->name, "eq");
    CHECK(eq->is_section);
    CHECK(child(cfg->root, 4)->is_section);
    struct config_node *after = child(cfg->root, 5);
    CHECK_EQ_STR(after->name, "after");
    CHECK(!after->is_section);
    CHECK_EQ_INT(count(cfg->root), 6);
    config_free(cfg);
}

/* n nested sections "s {", each with a key, closed again. */
static char *nested(int n)
{
    size_t cap = (size_t)n * 32 + 16;
    char *s = malloc(cap), *p = s;
    for (int i = 0; i < n; i++)
        p += sprintf(p, "s%d {\nk = %d\n", i, i);
    for (int i = 0; i < n; i++)
        p += sprintf(p, "}\n");
    *p = '\0';
    return s;
}

TEST(nesting_limit)
{
    char *s = nested(32);
    struct config *cfg = parse(s);
    CHECK(cfg != NULL);
    struct config_node *n = cfg ? cfg->root : NULL;
    int depth = 0;
    while (n && (n = config_take_any(n)) && n->is_section) {
        depth++;
        CHECK_EQ_STR(config_take(n, "k") ? "k" : NULL, "k");
    }
    CHECK_EQ_INT(depth, 32);
    if (cfg)
        CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), 0);
    config_free(cfg);
    free(s);

    s = nested(33);
    EXPECT_ERROR(s, "t.conf:65: s32: sections nested deeper than 32");
    free(s);
    /* the same limit for a brace on its own line */
    s = nested(32);
    char *deeper = malloc(strlen(s) + 32);
    char *mid = strstr(s, "}\n");
    sprintf(deeper, "%.*sx\n{\n%s", (int)(mid - s), s, mid);
    EXPECT_ERROR(deeper, "t.conf:66: x: sections nested deeper than 32");
    free(deeper);
    free(s);
}

TEST(syntax_errors)
{
    EXPECT_ERROR("a = 1\nsite {\n  b = 2\n", "t.conf:2: site: section never closed (missing '}')");
    EXPECT_ERROR("a {\n}\nc\n{\n  d = 1\n", "t.conf:3: c: section never closed (missing '}')");
    /* without indentation to go by, the innermost section still open at
     * the end is the one named (see brace_mismatch for the indented case) */
    EXPECT_ERROR("a {\nb {\n}\nc {\n}\nd {\n}\n",
                 "t.conf:1: a: section never closed (missing '}')");
    EXPECT_ERROR("a = 1\n}\n", "t.conf:2: unexpected '}' (no section open)");
    EXPECT_ERROR("a {\n}\n}\n", "t.conf:3: unexpected '}' (no section open)");
    EXPECT_ERROR("a {\n} x\n}\n", "t.conf:2: unexpected text after '}'");
    EXPECT_ERROR("a\n{ b = 1\n}\n", "t.conf:2: unexpected text after '{'");
    EXPECT_ERROR("x = 1\nname = \"abc\n", "t.conf:2: name: unterminated quote");
    EXPECT_ERROR("name = \"abc\\\"\n", "t.conf:1: name: unterminated quote");
    EXPECT_ERROR("name = \"abc\\", "t.conf:1: name: unterminated quote");
    EXPECT_ERROR("name = \"abc\"\"def\"\n",
                 "t.conf:1: name: unexpected text after the closing quote");
    EXPECT_ERROR("name = \"abc\" { x\n", "t.conf:1: name: '{' must end the line");
    EXPECT_ERROR("name = abc d\"ef\"\n",
                 "t.conf:1: name: quote inside an unquoted value (quote the whole value)");
    EXPECT_ERROR("name = \"a\\qb\"\n", "t.conf:1: name: unknown escape '\\q' in quotes");
    EXPECT_ERROR("name = \"a\\\tb\"\n", "t.conf:1: name: backslash before byte 0x09 in quotes");
    EXPECT_ERROR("a = 1\n= 2\n", "t.conf:2: key with no name before '='");
    EXPECT_ERROR("  =\n", "t.conf:1: key with no name before '='");
    EXPECT_ERROR("\"k\" = 2\n", "t.conf:1: a key name cannot be quoted");
    EXPECT_ERROR("k\"v\"\n", "t.conf:1: k: unexpected '\"' after the key");
    EXPECT_ERROR("k}\n", "t.conf:1: k: unexpected '}' after the key");
    EXPECT_ERROR("{\n}\n", "t.conf:1: section without a name");
    EXPECT_ERROR("a {\n}\n{\n}\n", "t.conf:3: section without a name");
    EXPECT_ERROR("a {\n  b {\n  }\n  {\n  }\n}\n", "t.conf:4: section without a name");
    /* a section on one line ("server ADDR { weight = 2 }") is fine; text
     * after its '}', or a '{' inside, is not */
    EXPECT_ERROR("a { b = 1 } c\n", "t.conf:1: a: '{' must end the line");
    EXPECT_ERROR("a x { b = { }\n", "t.conf:1: b: '{' must end the line");
    EXPECT_ERROR("a { = 1 }\n", "t.conf:1: a: expected 'KEY = VALUE' inside '{ }'");
    EXPECT_ERROR("a b }\n", "t.conf:1: a: '}' must be on a line of its own");
    /* sections opened and closed properly, then one left open: its line */
    EXPECT_ERROR("a {\n}\nb {\n}\n\nc {\n", "t.conf:6: c: section never closed (missing '}')");
    /* no err buffer at all is fine */
    CHECK(config_parse_string("t.conf", "}", NULL, 0) == NULL);
    /* a tiny buffer is truncated, not overrun */
    char small[8];
    memset(small, 'Z', sizeof(small));
    CHECK(config_parse_string("t.conf", "}", small, 5) == NULL);
    CHECK_EQ_STR(small, "t.co");
    CHECK_EQ_INT(small[5], 'Z');
    /* no name: a generic one */
    CHECK(config_parse_string(NULL, "a\n}", err, sizeof(err)) == NULL);
    CHECK_EQ_STR(err, "<string>:2: unexpected '}' (no section open)");
}

/* Braces that do not balance: the error names the line where the
 * indentation shows the mistake was made, not where the parser ran out. */
TEST(brace_mismatch)
{
    /* a section header without its '{': its '}' is left over at the end */
    EXPECT_ERROR("listener 127.0.0.1:8080\n"
                 "site\n"
                 "    handler /hello hello_world\n"
                 "    serve_files / {\n"
                 "        path = ./wwwroot\n"
                 "    }\n"
                 "}\n",
                 "t.conf:2: site: missing '{' (so the '}' on line 7 has no section to close)");
    /* the same one level down: its '}' closes "site" instead */
    EXPECT_ERROR("listener 127.0.0.1:8080\n"
                 "site {\n"
                 "    handler /hello hello_world\n"
                 "    serve_files /\n"
                 "        path = ./wwwroot\n"
                 "        index = index.html\n"
                 "    }\n"
                 "}\n",
                 "t.conf:4: serve_files: missing '{' (so the '}' on line 8 has no section to "
                 "close)");
    /* and two levels down, with a '{' on a line of its own above it */
    EXPECT_ERROR("a\n{\n    b {\n        c\n            k = 1\n        }\n    }\n}\n",
                 "t.conf:4: c: missing '{' (so the '}' on line 8 has no section to close)");
    /* "/{" is a value, not a value and a brace */
    EXPECT_ERROR("site {\n    serve_files /{\n        path = x\n    }\n}\n",
                 "t.conf:2: serve_files: '{' needs a blank before it (so the '}' on line 5 has "
                 "no section to close)");
    /* tabs work as well as spaces */
    EXPECT_ERROR("site {\n\thandler /a echo\n\tserve_files /\n\t\tpath = x\n\t}\n}\n",
                 "t.conf:3: serve_files: missing '{' (so the '}' on line 6 has no section to "
                 "close)");

    /* a '}' too many: the one indented deeper than the section it closes */
    EXPECT_ERROR("site {\n"
                 "    serve_files / {\n"
                 "        path = ./wwwroot\n"
                 "    }\n"
                 "    }\n"
                 "}\n"
                 "threads = 2\n",
                 "t.conf:5: unexpected '}' (it closes 'site' from line 1, so the '}' on line 6 "
                 "has no section to close)");
    /* at the end, or with nothing indented: the '}' itself */
    EXPECT_ERROR("site {\n    handler /x echo\n}\n}\n",
                 "t.conf:4: unexpected '}' (no section open)");
    EXPECT_ERROR("site\nhandler /a echo\n}\n", "t.conf:3: unexpected '}' (no section open)");
    /* a key indented oddly earlier is no missing '{' once a key at its
     * level follows */
    EXPECT_ERROR("listener a\n    threads = 2\nsite {\n    handler /x echo\n}\n}\n",
                 "t.conf:6: unexpected '}' (no section open)");
    /* a '{' on a line of its own is what the '}' lines up with */
    EXPECT_ERROR("site\n  {\n    handler /x echo\n  }\nlistener a\n}\n",
                 "t.conf:6: unexpected '}' (no section open)");
    EXPECT_ERROR("site\n  {\n    serve_files /\n      {\n        path = x\n  }\n",
                 "t.conf:3: serve_files: section never closed (missing '}' before line 6)");
    /* tabs against spaces say nothing */
    EXPECT_ERROR("\tsite {\n    serve_files /\n        path = x\n    }\n}\n",
                 "t.conf:5: unexpected '}' (no section open)");

    /* a '}' missing: the section whose body ends early, named where it opens */
    EXPECT_ERROR("listener 127.0.0.1:8080\n"
                 "site {\n"
                 "    handler /hello hello_world\n"
                 "    serve_files / {\n"
                 "        path = ./wwwroot\n"
                 "}\n",
                 "t.conf:4: serve_files: section never closed (missing '}' before line 6)");
    EXPECT_ERROR("site {\n"
                 "    serve_files / {\n"
                 "        path = ./wwwroot\n"
                 "    handler /x echo\n"
                 "}\n"
                 "threads = 2\n",
                 "t.conf:2: serve_files: section never closed (missing '}' before line 4)");
    EXPECT_ERROR("site {\n    serve_files / {\n        path = x\n    }\nthreads = 2\n",
                 "t.conf:1: site: section never closed (missing '}' before line 5)");
    EXPECT_ERROR("a {\n  b {\n  }\n  c {\n  }\n  d {\n}\n",
                 "t.conf:6: d: section never closed (missing '}' before line 7)");
    /* the last '}' of the file missing: nothing earlier is wrong */
    EXPECT_ERROR("listener 127.0.0.1:8080\n"
                 "site {\n"
                 "    handler /hello hello_world\n"
                 "    serve_files / {\n"
                 "        path = ./wwwroot\n"
                 "    }\n",
                 "t.conf:2: site: section never closed (missing '}')");
    /* nothing indented: the innermost section open at the end */
    EXPECT_ERROR("site {\nhandler /a echo\nserve_files / {\npath = x\n}\n",
                 "t.conf:1: site: section never closed (missing '}')");

    /* indentation alone is never an error: odd but balanced files parse */
    struct config *cfg = parse("site {\n"
                               "handler /a echo\n"
                               "        serve_files / {\n"
                               "    path = x\n"
                               "  }\n"
                               "       }\n"
                               "listener a\n"
                               "    threads 2\n"
                               "\tx {\n"
                               "    }\n");
    CHECK(cfg != NULL);
    if (!cfg)
        fprintf(stderr, "  %s\n", err);
    config_free(cfg);
}

TEST(long_lines_and_nul)
{
    size_t n = 64 * 1024;
    char *s = malloc(n + 64);
    /* exactly 64 KiB on a line is allowed */
    memcpy(s, "a = 1\nk ", 8);
    memset(s + 8, 'v', n - 2);
    strcpy(s + 8 + n - 2, "\nb = 2\n");
    struct config *cfg = parse(s);
    CHECK(cfg != NULL);
    if (cfg) {
        CHECK_EQ_INT(strlen(child(cfg->root, 1)->value), n - 2);
        CHECK_EQ_INT(child(cfg->root, 2)->line, 3);
    }
    config_free(cfg);
    /* one byte more is not */
    memcpy(s, "a = 1\nk ", 8);
    memset(s + 8, 'v', n - 1);
    strcpy(s + 8 + n - 1, "\nb = 2\n");
    EXPECT_ERROR(s, "t.conf:2: line longer than 65536 bytes");
    /* also on the last line, without a newline */
    memset(s + 8, 'v', n - 1);
    s[8 + n - 1] = '\0';
    EXPECT_ERROR(s, "t.conf:2: line longer than 65536 bytes");
    free(s);

    const char text[] = "a = 1\nb = x\0y\nc = 3\n";
    cfg = config_parse_buffer("b.conf", text, sizeof(text) - 1, err, sizeof(err));
    CHECK(cfg == NULL);
    CHECK_EQ_STR(err, "b.conf:2: NUL byte in the file");
    /* parse_buffer needs no terminating NUL: len bounds it */
    cfg = config_parse_buffer("b.conf", "a = 1\nb = 2XXX", 11, err, sizeof(err));
    CHECK(cfg != NULL);
    if (cfg)
        CHECK_EQ_STR(child(cfg->root, 1)->value, "2");
    config_free(cfg);
}

TEST(environment)
{
    setenv("COLIBRI_TEST_ROOT", "/srv/www", 1);
    setenv("COLIBRI_TEST_PORT", "8081", 1);
    setenv("COLIBRI_TEST_EMPTY", "", 1);
    setenv("COLIBRI_TEST_TRICKY", "a \"b\" # ${c}", 1);
    unsetenv("COLIBRI_TEST_UNSET");
    struct config *cfg = parse("root = ${COLIBRI_TEST_ROOT}\n"
                               "listen = 127.0.0.1:${COLIBRI_TEST_PORT}\n"
                               "d = ${COLIBRI_TEST_UNSET:./wwwroot}\n"
                               "e = ${COLIBRI_TEST_EMPTY:fallback}\n"
                               "f = ${COLIBRI_TEST_EMPTY}\n"
                               "g = [${COLIBRI_TEST_UNSET:}]\n"
                               "h = \"${COLIBRI_TEST_ROOT}/x y\"\n"
                               "i = ${COLIBRI_TEST_TRICKY}\n"
                               "j = ${COLIBRI_TEST_PORT}${COLIBRI_TEST_PORT} $HOME $ {x} $\n"
                               "k = ${COLIBRI_TEST_UNSET:a b:c}\n"
                               "serve_files ${COLIBRI_TEST_ROOT} {\n"
                               "}\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    const char *want[] = {"/srv/www",
                          "127.0.0.1:8081",
                          "./wwwroot",
                          "fallback",
                          "",
                          "[]",
                          "/srv/www/x y",
                          "a \"b\" # ${c}", /* expanded text is not parsed again */
                          "80818081 $HOME $ {x} $",
                          "a b:c",
                          "/srv/www"};
    for (int i = 0; i < 11; i++)
        CHECK_EQ_STR(child(cfg->root, i)->value, want[i]);
    config_free(cfg);

    EXPECT_ERROR("a = 1\nroot = ${COLIBRI_TEST_UNSET}\n",
                 "t.conf:2: root: environment variable 'COLIBRI_TEST_UNSET' is not set");
    EXPECT_ERROR("s {\n  x = \"in ${COLIBRI_TEST_UNSET} quotes\"\n}\n",
                 "t.conf:2: x: environment variable 'COLIBRI_TEST_UNSET' is not set");
    EXPECT_ERROR("root = ${COLIBRI_TEST_ROOT\n", "t.conf:1: root: unterminated '${'");
    EXPECT_ERROR("root = \"${COLIBRI_TEST_ROOT\"}\n", "t.conf:1: root: unterminated '${'");
    EXPECT_ERROR("root = ${}\n", "t.conf:1: root: bad variable name '${}'");
    EXPECT_ERROR("root = ${:x}\n", "t.conf:1: root: bad variable name '${:x}'");
    EXPECT_ERROR("root = ${1A}\n", "t.conf:1: root: bad variable name '${1A}'");
    EXPECT_ERROR("root = ${A-B}\n", "t.conf:1: root: bad variable name '${A-B}'");
    EXPECT_ERROR("root = ${A:${B}}\n", "t.conf:1: root: nested '${' in a default is not "
                                       "supported");
    unsetenv("COLIBRI_TEST_ROOT");
    unsetenv("COLIBRI_TEST_PORT");
    unsetenv("COLIBRI_TEST_EMPTY");
    unsetenv("COLIBRI_TEST_TRICKY");
}

static struct config_node node_with(const char *value)
{
    return (struct config_node){
        .file = "c.conf", .name = "key", .value = (char *)value, .line = 12};
}

static int dur(const char *v, uint64_t *ms)
{
    struct config_node n = node_with(v);
    err[0] = '\0';
    return config_duration_ms(&n, ms, err, sizeof(err));
}

TEST(durations)
{
    struct {
        const char *in;
        uint64_t ms;
    } ok[] = {{"15s", 15000},
              {"500ms", 500},
              {"2m", 120000},
              {"1h", 3600000},
              {"1d", 86400000},
              {"15", 15000},
              {"0", 0},
              {"0ms", 0},
              {"007s", 7000},
              {"18446744073709551615ms", UINT64_MAX},
              {"18446744073709551s", 18446744073709551000ULL},
              {"213503982334d", 18446744073657600000ULL}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t ms = 42;
        CHECK_EQ_INT(dur(ok[i].in, &ms), 0);
        CHECK(ms == ok[i].ms);
    }
    uint64_t ms = 42;
    CHECK_EQ_INT(dur("abc", &ms), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: bad duration 'abc'");
    CHECK_EQ_INT(ms, 42); /* untouched on error */
    const char *bad[] = {"",     "-5s", "+5s", "5x",   "5 s",  " 5s", "5s ",
                         "1.5s", "s",   "5S",  "5sec", "5mss", "0x10"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(dur(bad[i], &ms), -EINVAL);
        CHECK(strncmp(err, "c.conf:12: key: bad duration '", 30) == 0);
    }
    CHECK_EQ_INT(dur("18446744073709551616ms", &ms), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: duration '18446744073709551616ms' is too large");
    CHECK_EQ_INT(dur("18446744073709552s", &ms), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: duration '18446744073709552s' is too large");
    CHECK_EQ_INT(dur("99999999999999999999999999", &ms), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: duration '99999999999999999999999999' is too large");
    CHECK_EQ_INT(dur("213503982335d", &ms), -EINVAL);
    CHECK_EQ_INT(ms, 42);
}

static int size(const char *v, uint64_t *b)
{
    struct config_node n = node_with(v);
    err[0] = '\0';
    return config_size(&n, b, err, sizeof(err));
}

TEST(sizes)
{
    struct {
        const char *in;
        uint64_t bytes;
    } ok[] = {{"8192", 8192},
              {"0", 0},
              {"8k", 8192},
              {"8K", 8192},
              {"8KiB", 8192},
              {"8kib", 8192},
              {"8kb", 8192},
              {"8KB", 8192},
              {"1M", 1 << 20},
              {"1m", 1 << 20},
              {"2MiB", 2 << 20},
              {"1G", 1ULL << 30},
              {"3gb", 3ULL << 30},
              {"1T", 1ULL << 40},
              {"100b", 100},
              {"100B", 100},
              {"16777215T", 16777215ULL << 40},
              {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t b = 42;
        CHECK_EQ_INT(size(ok[i].in, &b), 0);
        CHECK(b == ok[i].bytes);
    }
    uint64_t b = 42;
    CHECK_EQ_INT(size("lots", &b), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: bad size 'lots'");
    const char *bad[] = {"", "-1", "8x", "8 k", "8kbb", "8ib", "8KiBs", "k", "1.5M", "8i", "8kI"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(size(bad[i], &b), -EINVAL);
        CHECK(strncmp(err, "c.conf:12: key: bad size '", 26) == 0);
    }
    CHECK_EQ_INT(size("16777216T", &b), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: size '16777216T' is too large");
    CHECK_EQ_INT(size("18446744073709551616", &b), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: size '18446744073709551616' is too large");
    CHECK_EQ_INT(size("17179869184G", &b), -EINVAL);
    CHECK_EQ_INT(b, 42);
}

TEST(bools)
{
    const char *yes[] = {"true", "yes", "on", "1", "TRUE", "Yes", "ON"};
    const char *no[] = {"false", "no", "off", "0", "False", "NO", "Off"};
    for (size_t i = 0; i < 7; i++) {
        struct config_node n = node_with(yes[i]);
        bool v = false;
        CHECK_EQ_INT(config_bool(&n, &v, err, sizeof(err)), 0);
        CHECK(v == true);
        n = node_with(no[i]);
        CHECK_EQ_INT(config_bool(&n, &v, err, sizeof(err)), 0);
        CHECK(v == false);
    }
    const char *bad[] = {"", "maybe", "2", "tru", "yess", " on", "01"};
    for (size_t i = 0; i < 7; i++) {
        struct config_node n = node_with(bad[i]);
        bool v = true;
        CHECK_EQ_INT(config_bool(&n, &v, err, sizeof(err)), -EINVAL);
        CHECK(v == true);
    }
    struct config_node n = node_with("maybe");
    bool v;
    config_bool(&n, &v, err, sizeof(err));
    CHECK_EQ_STR(err, "c.conf:12: key: bad boolean 'maybe' (use true or false)");
}

static int integer(const char *s, long min, long max, long *out)
{
    struct config_node n = node_with(s);
    err[0] = '\0';
    return config_int(&n, min, max, out, err, sizeof(err));
}

TEST(ints)
{
    long v = 0;
    CHECK_EQ_INT(integer("42", 0, 100, &v), 0);
    CHECK_EQ_INT(v, 42);
    CHECK_EQ_INT(integer("-7", -10, 10, &v), 0);
    CHECK_EQ_INT(v, -7);
    CHECK_EQ_INT(integer("+7", -10, 10, &v), 0);
    CHECK_EQ_INT(v, 7);
    CHECK_EQ_INT(integer("-0", 0, 10, &v), 0);
    CHECK_EQ_INT(v, 0);
    CHECK_EQ_INT(integer("0", 0, 0, &v), 0);
    CHECK_EQ_INT(integer("100", 0, 100, &v), 0);
    CHECK_EQ_INT(v, 100);
    CHECK_EQ_INT(integer("9223372036854775807", LONG_MIN, LONG_MAX, &v), 0);
    CHECK(v == LONG_MAX);
    CHECK_EQ_INT(integer("-9223372036854775808", LONG_MIN, LONG_MAX, &v), 0);
    CHECK(v == LONG_MIN);

    v = 5;
    CHECK_EQ_INT(integer("101", 0, 100, &v), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: 101 is out of range [0, 100]");
    CHECK_EQ_INT(integer("-1", 0, 100, &v), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: -1 is out of range [0, 100]");
    CHECK_EQ_INT(integer("5", 10, 20, &v), -EINVAL);
    CHECK_EQ_INT(integer("9223372036854775808", LONG_MIN, LONG_MAX, &v), -EINVAL);
    CHECK_EQ_INT(integer("-9223372036854775809", LONG_MIN, LONG_MAX, &v), -EINVAL);
    CHECK_EQ_INT(integer("99999999999999999999999", LONG_MIN, LONG_MAX, &v), -EINVAL);
    CHECK_EQ_INT(v, 5);
    const char *bad[] = {"", "-", "+", "abc", "1x", " 1", "1 ", "0x10", "1e3", "--1", "1.0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(integer(bad[i], LONG_MIN, LONG_MAX, &v), -EINVAL);
        CHECK(strncmp(err, "c.conf:12: key: bad integer '", 29) == 0);
    }
    CHECK_EQ_INT(v, 5);
}

TEST(config_error_format)
{
    struct config_node n = node_with("abc");
    CHECK_EQ_INT(config_error(&n, err, sizeof(err), "bad %s '%s'", "duration", n.value), -EINVAL);
    CHECK_EQ_STR(err, "c.conf:12: key: bad duration 'abc'");
    CHECK_EQ_INT(config_error(&n, NULL, 0, "x"), -EINVAL);
    char small[10];
    config_error(&n, small, sizeof(small), "long message");
    CHECK_EQ_STR(small, "c.conf:12");
}

TEST(take_and_unused)
{
    struct config *cfg = parse("a 1\nb 2\na 3\ns {\n  x 1\n  y 2\n}\nt {\n}\n");
    CHECK(cfg != NULL);
    CHECK(config_take(NULL, "a") == NULL);
    CHECK(config_take_any(NULL) == NULL);
    CHECK(config_take(cfg->root, "nope") == NULL);

    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:1: a: unknown key");
    struct config_node *a1 = config_take(cfg->root, "a");
    CHECK_EQ_STR(a1->value, "1");
    CHECK(a1->used);
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:2: b: unknown key");
    /* take_any skips what was taken and keeps file order */
    struct config_node *b = config_take_any(cfg->root);
    CHECK_EQ_STR(b->name, "b");
    struct config_node *a3 = config_take(cfg->root, "a");
    CHECK_EQ_STR(a3->value, "3");
    CHECK(config_take(cfg->root, "a") == NULL);
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:4: s: unknown key");
    /* a taken section still reports its untaken children, depth first,
     * before a later sibling section */
    struct config_node *s = config_take(cfg->root, "s");
    config_take(s, "y");
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:5: x: unknown key");
    config_take(s, "x");
    CHECK(config_take_any(s) == NULL);
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:8: t: unknown key");
    CHECK(config_take_any(cfg->root) != NULL);
    CHECK(config_take_any(cfg->root) == NULL);
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), 0);
    config_free(cfg);
    config_free(NULL);
}

/* Reads like the server does: "threads" once, "listener" in a loop, each
 * "site" whole, and in a "serve_files" section "path" once. */
static int read_like_server(struct config *cfg)
{
    struct config_node *n, *site, *sf;
    while (config_take(cfg->root, "listener"))
        ;
    config_take(cfg->root, "threads");
    while ((site = config_take(cfg->root, "site"))) {
        while ((n = config_take_any(site))) {
            if (n->is_section)
                config_take(n, "path");
        }
    }
    while ((sf = config_take(cfg->root, "serve_files")))
        config_take(sf, "path");
    return config_check_unused(cfg, err, sizeof(err));
}

/* The message of read_like_server() over text, or "" when it passes. */
static const char *unused_after_reading(const char *text)
{
    struct config *cfg = parse(text);
    if (!cfg)
        return err;
    if (read_like_server(cfg) == 0)
        err[0] = '\0';
    config_free(cfg);
    return err;
}

TEST(duplicate_keys)
{
    /* a key read once, given twice: both lines named */
    CHECK_EQ_STR(unused_after_reading("listener a\n"
                                      "# comment\n"
                                      "threads = 2\n"
                                      "\n"
                                      "threads = 3\n"),
                 "t.conf:5: threads: duplicate key (first at line 3)");
    CHECK_EQ_STR(unused_after_reading("site {\n"
                                      "    handler /hello hello_world\n"
                                      "    serve_files / {\n"
                                      "        path = ./wwwroot\n"
                                      "        index = index.html\n"
                                      "        path = ./other\n"
                                      "    }\n"
                                      "}\n"),
                 "t.conf:5: index: unknown key"); /* the first leftover comes first */
    CHECK_EQ_STR(unused_after_reading("site {\n"
                                      "    serve_files / {\n"
                                      "        path = ./wwwroot\n"
                                      "        path = ./other\n"
                                      "    }\n"
                                      "}\n"),
                 "t.conf:4: path: duplicate key (first at line 3)");
    /* a third copy is reported too, still against the first */
    CHECK_EQ_STR(unused_after_reading("threads 1\nthreads 2\nthreads 3\n"),
                 "t.conf:2: threads: duplicate key (first at line 1)");
    /* keys read in a loop may repeat, at any level */
    CHECK_EQ_STR(unused_after_reading("listener a\nlistener b\nthreads 1\nlistener c\n"
                                      "site {\n  handler /a x\n  handler /b y\n}\n"
                                      "site {\n  handler /c z\n}\n"),
                 "");
    /* sections with arguments: each one read is fine */
    CHECK_EQ_STR(unused_after_reading("serve_files /a {\n  path = x\n}\n"
                                      "serve_files /b {\n  path = y\n}\n"),
                 "");
    /* the same key in two sections is no duplicate */
    CHECK_EQ_STR(unused_after_reading("serve_files /a {\n  path = x\n}\n"
                                      "serve_files /b {\n  path = y\n  path = z\n}\n"),
                 "t.conf:6: path: duplicate key (first at line 5)");
    CHECK_EQ_STR(unused_after_reading("serve_files /a {\n  path = x\n}\n"
                                      "serve_files /b {\n  index = y\n}\n"),
                 "t.conf:5: index: unknown key");
    /* a key of the same name in an enclosing section does not count */
    struct config *cfg = parse("path x\ns {\n  path y\n}\n");
    config_take(cfg->root, "path");
    config_take(cfg->root, "s");
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:3: path: unknown key");
    config_free(cfg);
    /* nobody took either copy: unknown, at the first */
    CHECK_EQ_STR(unused_after_reading("bogus 1\nbogus 2\n"), "t.conf:1: bogus: unknown key");
    /* a copy taken after an untaken one: the untaken one is no duplicate
     * of something that comes later */
    cfg = parse("k 1\nk 2\n");
    child(cfg->root, 1)->used = true;
    CHECK_EQ_INT(config_check_unused(cfg, err, sizeof(err)), -EINVAL);
    CHECK_EQ_STR(err, "t.conf:1: k: unknown key");
    config_free(cfg);
}

TEST(parse_file)
{
    char path[] = "/tmp/colibri-test-config-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK(write(fd, required, sizeof(required) - 1) == (ssize_t)(sizeof(required) - 1));
    struct config *cfg = config_parse_file(path, err, sizeof(err));
    CHECK(cfg != NULL);
    if (cfg) {
        CHECK_EQ_STR(cfg->file, path);
        struct config_node *site = config_take(cfg->root, "site");
        CHECK(site && site->is_section);
        CHECK_EQ_STR(site ? site->file : NULL, path);
        struct config_node *t = config_take(cfg->root, "keep_alive_timeout");
        CHECK_EQ_INT(config_int(t, 0, 100, &(long){0}, err, sizeof(err)), -EINVAL);
        char want[600];
        snprintf(want, sizeof(want), "%s:3: keep_alive_timeout: bad integer '15s'", path);
        CHECK_EQ_STR(err, want);
    }
    config_free(cfg);

    /* errors in a file name the file */
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, "a = 1\nb = x\0y\n", 14, 0) == 14);
    CHECK(config_parse_file(path, err, sizeof(err)) == NULL);
    char want[600];
    snprintf(want, sizeof(want), "%s:2: NUL byte in the file", path);
    CHECK_EQ_STR(err, want);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, "site {\n", 7, 0) == 7);
    CHECK(config_parse_file(path, err, sizeof(err)) == NULL);
    snprintf(want, sizeof(want), "%s:1: site: section never closed (missing '}')", path);
    CHECK_EQ_STR(err, want);
    /* a file larger than one read */
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    for (int i = 0; i < 5000; i++)
        CHECK(write(fd, "key = some value\n", 17) == 17);
    cfg = config_parse_file(path, err, sizeof(err));
    CHECK(cfg != NULL);
    int n = 0;
    while (cfg && config_take(cfg->root, "key"))
        n++;
    CHECK_EQ_INT(n, 5000);
    config_free(cfg);
    /* a huge file (sparse: cheap to make) is refused, not swallowed */
    CHECK(ftruncate(fd, 65 * 1024 * 1024) == 0);
    CHECK(config_parse_file(path, err, sizeof(err)) == NULL);
    snprintf(want, sizeof(want), "%s: larger than 67108864 bytes", path);
    CHECK_EQ_STR(err, want);
    close(fd);
    unlink(path);

    CHECK(config_parse_file(path, err, sizeof(err)) == NULL);
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
    CHECK_EQ_STR(err, want);
    CHECK(config_parse_file("/tmp", err, sizeof(err)) == NULL);
    CHECK_EQ_STR(err, "/tmp: cannot read: Is a directory");
}

/* Garbage never crashes the parser (the fuzzer does this at length). */
TEST(garbage_does_not_crash)
{
    static const char pieces[][8] = {"{", "}",  "\"",  "\\", "=", "#",  " ",   "\n",   "\r\n",
                                     "a", "${", "${A", ":",  "$", "\t", "k v", "\\\"", "\xff"};
    uint32_t x = 2463534242u;
    char buf[256];
    int parsed = 0;
    for (int round = 0; round < 5000; round++) {
        size_t len = 0;
        int n = (int)(x % 40);
        for (int i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const char *p = pieces[x % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t pl = strlen(p);
            if (len + pl >= sizeof(buf))
                break;
            memcpy(buf + len, p, pl);
            len += pl;
        }
        buf[len] = '\0';
        x ^= x << 13;
        struct config *cfg = parse(buf);
        if (cfg) {
            parsed++;
            config_free(cfg);
        } else {
            /* every failure says where */
            CHECK(strncmp(err, "t.conf:", 7) == 0);
        }
    }
    CHECK(parsed > 0);
}

/* The gateway issue's contract: "server 127.0.0.1:9001 { weight = 2 }". */
TEST(one_line_sections)
{
    struct config *cfg = parse("upstream app {\n"
                               "    server 127.0.0.1:9001 { weight = 2 }\n"
                               "    server 127.0.0.1:9002 { backup = true }    # only when\n"
                               "    server unix:/x { weight 3; backup = false }\n"
                               "    keepalive = 4\n"
                               "}\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    struct config_node *up = config_take(cfg->root, "upstream");
    CHECK(up && up->is_section && count(up) == 4);
    struct config_node *s = config_take(up, "server");
    CHECK(s && s->is_section && count(s) == 1);
    CHECK_EQ_STR(s->value, "127.0.0.1:9001");
    CHECK_EQ_STR(s->children->name, "weight");
    CHECK_EQ_STR(s->children->value, "2");
    s = config_take(up, "server");
    CHECK_EQ_STR(s->value, "127.0.0.1:9002");
    CHECK_EQ_STR(s->children->value, "true");
    s = config_take(up, "server");
    CHECK(count(s) == 2);
    CHECK_EQ_STR(s->children->next->name, "backup");
    CHECK_EQ_STR(config_take(up, "keepalive")->value, "4");
    config_free(cfg);
    /* a quoted ';' or '#' inside is the value's, not a separator or a
     * comment */
    cfg = parse("headers / { set X-A = \"a; b # c\"; set X-B = 2 }  # note\n");
    CHECK(cfg != NULL);
    if (!cfg) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    struct config_node *h = config_take(cfg->root, "headers");
    CHECK(h && h->is_section && count(h) == 2);
    if (h && count(h) == 2) {
        CHECK_EQ_STR(h->children->name, "set");
        CHECK_EQ_STR(h->children->value, "X-A = a; b # c");
        CHECK_EQ_STR(h->children->next->value, "X-B = 2");
    }
    config_free(cfg);
}

int main(void)
{
    RUN(one_line_sections);
    RUN(required_block);
    RUN(listener_forms);
    RUN(key_value_forms);
    RUN(comments_blank_lines_crlf);
    RUN(quoted_values);
    RUN(quoted_words);
    RUN(sections);
    RUN(nesting_limit);
    RUN(syntax_errors);
    RUN(brace_mismatch);
    RUN(long_lines_and_nul);
    RUN(environment);
    RUN(durations);
    RUN(sizes);
    RUN(bools);
    RUN(ints);
    RUN(config_error_format);
    RUN(take_and_unused);
    RUN(duplicate_keys);
    RUN(parse_file);
    RUN(garbage_does_not_crash);
    return test_summary();
}
