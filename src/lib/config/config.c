#include "config/config.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/common.h"
#include "base/err.h"
#include "base/strbuf.h"

#define CONFIG_MAX_DEPTH 32
#define CONFIG_MAX_LINE  (64 * 1024)
/* A config file is a few kilobytes; anything this large is a mistake (a log
 * file named by accident), and reading it whole would only waste memory. */
#define CONFIG_MAX_FILE (64 * 1024 * 1024)

/* The blanks that start a line. Braces decide the structure, but when they
 * do not balance, the indentation tells where one went missing: in a file
 * indented as usual, a section's '}' lines up with its header and its body
 * is indented deeper. Tabs and spaces are not converted: one indentation is
 * deeper than another only when it starts with it. */
struct indent {
    const char *s;
    size_t len;
};

enum indent_cmp { IND_SAME, IND_DEEPER, IND_SHALLOWER, IND_UNRELATED };

struct level {
    struct config_node *section;
    struct config_node **tail; /* where the next child goes, to keep file order */
    struct indent ind;         /* of the header line, or of the '{' on a line of its own */
    bool body_deeper;          /* a key in it was indented deeper than the header */
    /* A plain key of this section followed by a line indented deeper than
     * it: a section header whose '{' was forgotten? Dropped by a later key
     * of this section that is not deeper than it. */
    struct config_node *no_brace;
    struct indent no_brace_ind;
};

/* Where braces and indentation first disagree; named in the message when
 * the braces turn out not to balance. */
enum brace_hint {
    HINT_NONE,
    HINT_MISSING_OPEN,  /* node: a plain key followed by an indented body */
    HINT_EXTRA_CLOSE,   /* node: the section that a '}' indented deeper closed */
    HINT_MISSING_CLOSE, /* node: a section left by a line not indented deeper */
};

struct parser {
    struct config *cfg;
    int line;
    int depth; /* sections open below the root */
    struct level stack[CONFIG_MAX_DEPTH + 1];
    struct indent ind; /* of the line being parsed */
    /* The last plain key, which a '{' alone on a later line turns into a
     * section ("site\n{"). Cleared by anything but blank and comment lines. */
    struct config_node *pending;
    struct indent pending_ind;
    enum brace_hint hint;
    const struct config_node *hint_node;
    int hint_line;       /* of the line where they disagree */
    struct strbuf value; /* the value being built, reused for every line */
    struct strbuf words; /* its words, each followed by a NUL */
    size_t n_words;
    char *err;
    size_t errlen;
};

/* "file:line: message", or "file:line: key: message" when key is not NULL. */
static int parse_error(struct parser *ps, const char *key, size_t keylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int parse_error(struct parser *ps, const char *key, size_t keylen, const char *fmt, ...)
{
    char where[PATH_MAX + 160];
    if (key)
        snprintf(where, sizeof(where), "%s:%d: %.*s", ps->cfg->file, ps->line, (int)keylen, key);
    else
        snprintf(where, sizeof(where), "%s:%d", ps->cfg->file, ps->line);
    va_list ap;
    va_start(ap, fmt);
    err_vset(ps->err, ps->errlen, -EINVAL, where, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static inline bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && is_ws(*p))
        p++;
    return p;
}

/* Nothing but blanks and perhaps a comment until the end of the line. */
static bool rest_is_empty(const char *p, const char *e)
{
    p = skip_ws(p, e);
    return p == e || *p == '#';
}

static bool is_key_char(char c)
{
    return !is_ws(c) && c != '=' && c != '{' && c != '}' && c != '"';
}

static bool is_name_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9');
}

/* Expands "${NAME}" or "${NAME:default}" at *pp (pointing at the '$') into
 * the value and moves *pp past the '}'. Inside quotes the reference may not
 * run past the closing quote. The default is used when the variable is
 * unset or empty, so an exported but blank variable does not wipe a path. */
static int expand_var(struct parser *ps, struct strbuf *out, const char *key, size_t keylen,
                      const char **pp, const char *e, bool quoted)
{
    const char *s = *pp + 2, *close = NULL, *colon = NULL;
    for (const char *r = s; r < e; r++) {
        if (*r == '}') {
            close = r;
            break;
        }
        if (quoted && (*r == '"' || *r == '\\'))
            break;
        if (*r == ':' && !colon)
            colon = r;
    }
    if (!close)
        return parse_error(ps, key, keylen, "unterminated '${'");
    const char *name_end = colon ? colon : close;
    size_t name_len = (size_t)(name_end - s);
    bool name_ok = name_len > 0 && is_name_start(s[0]);
    for (size_t i = 1; name_ok && i < name_len; i++)
        name_ok = is_name_char(s[i]);
    if (!name_ok)
        return parse_error(ps, key, keylen, "bad variable name '${%.*s}'", (int)(close - s), s);
    for (const char *d = colon; d && d + 1 < close; d++) {
        if (d[0] == '$' && d[1] == '{')
            return parse_error(ps, key, keylen, "nested '${' in a default is not supported");
    }

    char *name = strndup(s, name_len);
    if (!name)
        return parse_error(ps, NULL, 0, "out of memory");
    const char *env = getenv(name);
    int r = 0;
    if ((!env || !*env) && colon)
        r = strbuf_append(out, colon + 1, (size_t)(close - colon - 1));
    else if (!env)
        r = parse_error(ps, key, keylen, "environment variable '%s' is not set", name);
    else
        r = strbuf_append_str(out, env);
    free(name);
    if (r == -ENOMEM)
        return parse_error(ps, NULL, 0, "out of memory");
    *pp = close + 1;
    return r;
}

/* An unquoted value: the bytes of [p, e) with variables expanded. */
static int unquoted_value(struct parser *ps, const char *key, size_t keylen, const char *p,
                          const char *e)
{
    while (p < e) {
        if (p[0] == '$' && p + 1 < e && p[1] == '{') {
            int r = expand_var(ps, &ps->value, key, keylen, &p, e, false);
            if (r < 0)
                return r;
            continue;
        }
        const char *dollar = memchr(p + 1, '$', (size_t)(e - p - 1));
        const char *run_end = dollar ? dollar : e;
        if (strbuf_append(&ps->value, p, (size_t)(run_end - p)) < 0)
            return parse_error(ps, NULL, 0, "out of memory");
        p = run_end;
    }
    return 0;
}

/* A quoted value starting at the '"' at *pp; leaves *pp after the closing
 * quote. */
static int quoted_value(struct parser *ps, struct strbuf *out, const char *key, size_t keylen,
                        const char **pp, const char *e, bool verbatim)
{
    const char *p = *pp + 1;
    for (;;) {
        if (p == e)
            return parse_error(ps, key, keylen, "unterminated quote");
        char c = *p;
        if (c == '"') {
            *pp = p + 1;
            return 0;
        }
        if (c == '$' && p + 1 < e && p[1] == '{' && !verbatim) {
            int r = expand_var(ps, out, key, keylen, &p, e, true);
            if (r < 0)
                return r;
            continue;
        }
        if (c == '\\') {
            if (p + 1 == e)
                return parse_error(ps, key, keylen, "unterminated quote");
            switch (verbatim && p[1] != '"' && p[1] != '\\' ? 0 : p[1]) {
            case 0: /* a verbatim value keeps its other backslashes: "\\d" */
                break;
            case '"':
            case '\\':
            case '$': /* "\${X}" is a literal "${X}" */
                c = p[1];
                break;
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            default:
                if ((unsigned char)p[1] > 0x20 && (unsigned char)p[1] < 0x7f)
                    return parse_error(ps, key, keylen, "unknown escape '\\%c' in quotes", p[1]);
                return parse_error(ps, key, keylen, "backslash before byte 0x%02x in quotes",
                                   (unsigned char)p[1]);
            }
            p += verbatim && c == '\\' && p[1] != '\\' ? 1 : 2;
        } else {
            p++;
        }
        if (strbuf_append_char(out, c) < 0)
            return parse_error(ps, NULL, 0, "out of memory");
    }
}

static enum indent_cmp indent_cmp(struct indent a, struct indent b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    if (memcmp(a.s, b.s, n) != 0)
        return IND_UNRELATED;
    return a.len == b.len ? IND_SAME : a.len > b.len ? IND_DEEPER : IND_SHALLOWER;
}

static void note_hint(struct parser *ps, enum brace_hint hint, const struct config_node *n)
{
    if (ps->hint != HINT_NONE)
        return; /* the first disagreement is where things went wrong */
    ps->hint = hint;
    ps->hint_node = n;
    ps->hint_line = ps->line;
}

/* A line with a key, about to be added to the innermost open section. */
static void note_key_indent(struct parser *ps)
{
    struct level *lv = &ps->stack[ps->depth];
    if (ps->pending && !ps->pending->is_section &&
        indent_cmp(ps->ind, ps->pending_ind) == IND_DEEPER) {
        lv->no_brace = ps->pending;
        lv->no_brace_ind = ps->pending_ind;
    } else if (lv->no_brace && indent_cmp(ps->ind, lv->no_brace_ind) != IND_DEEPER) {
        lv->no_brace = NULL;
    }
    if (ps->depth == 0)
        return;
    enum indent_cmp c = indent_cmp(ps->ind, lv->ind);
    if (c == IND_DEEPER)
        lv->body_deeper = true;
    else if (lv->body_deeper && (c == IND_SAME || c == IND_SHALLOWER))
        note_hint(ps, HINT_MISSING_CLOSE, lv->section);
}

/* A '}' line, about to close the innermost open section (if any). */
static void note_close_indent(struct parser *ps)
{
    struct level *lv = &ps->stack[ps->depth];
    /* the root has no header: a '}' there never lines up with one */
    enum indent_cmp c = ps->depth ? indent_cmp(ps->ind, lv->ind) : IND_DEEPER;
    if (c == IND_DEEPER && lv->no_brace && indent_cmp(ps->ind, lv->no_brace_ind) == IND_SAME)
        note_hint(ps, HINT_MISSING_OPEN, lv->no_brace);
    else if (c == IND_DEEPER && ps->depth)
        note_hint(ps, HINT_EXTRA_CLOSE, lv->section);
    else if (c == IND_SHALLOWER)
        note_hint(ps, HINT_MISSING_CLOSE, lv->section);
}

/* A '}' with no section open: name the line where the indentation says a
 * brace went wrong, when it says so. */
static int stray_close(struct parser *ps)
{
    int stray = ps->line;
    const struct config_node *n = ps->hint_node;
    if (ps->hint == HINT_MISSING_OPEN) {
        size_t vlen = strlen(n->value);
        ps->line = n->line;
        if (vlen && n->value[vlen - 1] == '{')
            return parse_error(ps, n->name, strlen(n->name),
                               "'{' needs a blank before it (so the '}' on line %d has no "
                               "section to close)",
                               stray);
        return parse_error(ps, n->name, strlen(n->name),
                           "missing '{' (so the '}' on line %d has no section to close)", stray);
    }
    if (ps->hint == HINT_EXTRA_CLOSE) {
        ps->line = ps->hint_line;
        return parse_error(ps, NULL, 0,
                           "unexpected '}' (it closes '%s' from line %d, so the '}' on line %d "
                           "has no section to close)",
                           n->name, n->line, stray);
    }
    return parse_error(ps, NULL, 0, "unexpected '}' (no section open)");
}

/* Sections still open at the end of the file. */
static int unclosed(struct parser *ps)
{
    if (ps->hint == HINT_MISSING_CLOSE) {
        const struct config_node *n = ps->hint_node;
        ps->line = n->line;
        return parse_error(ps, n->name, strlen(n->name),
                           "section never closed (missing '}' before line %d)", ps->hint_line);
    }
    const struct config_node *open = ps->stack[ps->depth].section;
    ps->line = open->line;
    return parse_error(ps, open->name, strlen(open->name), "section never closed (missing '}')");
}

static int open_section(struct parser *ps, struct config_node *n, struct indent ind)
{
    if (ps->depth == CONFIG_MAX_DEPTH)
        return parse_error(ps, n->name, strlen(n->name), "sections nested deeper than %d",
                           CONFIG_MAX_DEPTH);
    n->is_section = true;
    ps->depth++;
    ps->stack[ps->depth] = (struct level){.section = n, .tail = &n->children, .ind = ind};
    ps->pending = NULL;
    return 0;
}

static int add_node(struct parser *ps, const char *key, size_t keylen, bool is_section)
{
    char *name = strndup(key, keylen);
    char *value = memdup(ps->value.buf ? ps->value.buf : "", ps->value.len + 1);
    struct config_node *n = NULL;
    if (!name || !value)
        goto out_free_strings;
    /* the words: an array of pointers, then their bytes, in one block */
    size_t wbytes = (ps->n_words + 1) * sizeof(char *);
    char **words = malloc(wbytes + ps->words.len + 1);
    if (!words)
        goto out_free_strings;
    char *wp = (char *)words + wbytes;
    if (ps->words.len)
        memcpy(wp, ps->words.buf, ps->words.len);
    for (size_t i = 0; i < ps->n_words; i++) {
        words[i] = wp;
        wp += strlen(wp) + 1;
    }
    words[ps->n_words] = NULL;
    n = ALLOC_INIT(struct config_node, {.file = ps->cfg->file,
                                        .name = name,
                                        .value = value,
                                        .words = words,
                                        .n_words = ps->n_words,
                                        .line = ps->line});
    if (!n) {
        free(words);
        goto out_free_strings;
    }
    note_key_indent(ps);
    struct level *lv = &ps->stack[ps->depth];
    *lv->tail = n;
    lv->tail = &n->next;
    ps->pending = n;
    ps->pending_ind = ps->ind;
    return is_section ? open_section(ps, n, ps->ind) : 0;

out_free_strings:
    free(name);
    free(value);
    return parse_error(ps, NULL, 0, "out of memory");
}

/* Keys whose values are taken as written: no "${NAME}" expansion (in a
 * rewrite line, ${name} is a capture of the pattern), and inside quotes
 * only \" and \\ are escapes (a pattern's "\d" stays). */
static bool verbatim_key(const char *key, size_t keylen)
{
    return keylen == 7 && !memcmp(key, "rewrite", 7);
}

/* An unquoted word at *pp into ps->words (variables expanded unless
 * verbatim); stops at a blank, or at a '#' that starts a word. */
static int plain_word(struct parser *ps, const char *key, size_t keylen, const char **pp,
                      const char *e, bool verbatim)
{
    const char *p = *pp;
    while (p < e && !is_ws(*p)) {
        if (*p == '"')
            return parse_error(ps, key, keylen,
                               "quote inside an unquoted value (quote the whole value)");
        if (!verbatim && p[0] == '$' && p + 1 < e && p[1] == '{') {
            int r = expand_var(ps, &ps->words, key, keylen, &p, e, false);
            if (r < 0)
                return r;
            continue;
        }
        if (strbuf_append_char(&ps->words, *p) < 0)
            return parse_error(ps, NULL, 0, "out of memory");
        p++;
    }
    *pp = p;
    return 0;
}

/* The value at p: its words into ps->words (a double-quoted word is one,
 * at any place), its text into ps->value (as written, variables
 * expanded, when nothing is quoted; the one quoted word's content; or the
 * words joined by a blank), and whether a '{' ends it. */
/* The closing '"' of the quoted text that opens at q (a backslash escapes
 * the next byte), or e when it is missing. */
static const char *closing_quote(const char *q, const char *e)
{
    for (q++; q < e && *q != '"'; q++)
        if (*q == '\\' && q + 1 < e)
            q++;
    return q;
}

/* "KEY VALUE { k = v; k2 = v2 }   # comment": where the '{' at p opens a
 * section that ends on its line, the text between the braces into
 * *body..*body_end; false when the line does not end with " }". */
static bool one_line_body(const char *p, const char *e, const char **body, const char **body_end)
{
    const char *end = e;
    for (const char *q = p + 1; q < e; q++) {
        if (*q == '"') { /* a quoted '#' is no comment */
            if ((q = closing_quote(q, e)) == e)
                break;
        } else if (*q == '#' && is_ws(q[-1])) {
            end = q;
            break;
        }
    }
    while (end > p + 1 && is_ws(end[-1]))
        end--;
    if (end - p < 3 || end[-1] != '}' || !is_ws(end[-2]))
        return false;
    *body = p + 1;
    *body_end = end - 1;
    return true;
}

static int value_words(struct parser *ps, const char *key, size_t keylen, const char *line,
                       const char *p, const char *e, bool *is_section, const char **body,
                       const char **body_end)
{
    bool verbatim = verbatim_key(key, keylen), quoted = false;
    const char *v = p, *ve = p;
    strbuf_reset(&ps->words);
    ps->n_words = 0;
    for (;;) {
        p = skip_ws(p, e);
        if (p == e || (*p == '#' && (p == line || is_ws(p[-1]) || p[-1] == '"')))
            break;
        if (*p == '{' && rest_is_empty(p + 1, e)) {
            *is_section = true;
            break;
        }
        if (*p == '{' && body && (p + 1 == e || is_ws(p[1])) &&
            one_line_body(p, e, body, body_end)) {
            *is_section = true;
            break;
        }
        if ((*p == '{' || *p == '}') && (p + 1 == e || is_ws(p[1])))
            return parse_error(ps, key, keylen,
                               *p == '{' ? "'{' must end the line"
                                         : "'}' must be on a line of its own");
        int r;
        if (*p == '"') {
            quoted = true;
            r = quoted_value(ps, &ps->words, key, keylen, &p, e, verbatim);
            if (r == 0 && p < e && !is_ws(*p) && *p != '#')
                r = parse_error(ps, key, keylen, "unexpected text after the closing quote");
        } else {
            r = plain_word(ps, key, keylen, &p, e, verbatim);
        }
        if (r < 0)
            return r;
        if (strbuf_append_char(&ps->words, '\0') < 0)
            return parse_error(ps, NULL, 0, "out of memory");
        ps->n_words++;
        ve = p;
    }
    if (!quoted) {
        if (verbatim)
            return strbuf_append(&ps->value, v, (size_t)(ve - v)) < 0
                       ? parse_error(ps, NULL, 0, "out of memory")
                       : 0;
        return unquoted_value(ps, key, keylen, v, ve);
    }
    const char *w = ps->words.buf;
    for (size_t i = 0; i < ps->n_words; i++) {
        size_t len = strlen(w);
        if ((i && strbuf_append_char(&ps->value, ' ') < 0) || strbuf_append(&ps->value, w, len) < 0)
            return parse_error(ps, NULL, 0, "out of memory");
        w += len + 1;
    }
    return 0;
}

/* The section KEY (its value already in ps->value) written on one line:
 * its keys are "k = v" items between body and body_end, separated by ';'
 * (the contract's "server 127.0.0.1:9001 { weight = 2 }"). */
static int one_line_section(struct parser *ps, const char *key, size_t keylen, const char *line,
                            const char *body, const char *body_end)
{
    int r = add_node(ps, key, keylen, true);
    if (r < 0)
        return r;
    for (const char *p = body; p < body_end;) {
        const char *semi = NULL; /* the next ';' outside quotes */
        for (const char *q = p; q < body_end && !semi; q++) {
            if (*q == '"')
                q = closing_quote(q, body_end);
            else if (*q == ';')
                semi = q;
        }
        const char *ie = semi ? semi : body_end;
        const char *k = skip_ws(p, ie);
        p = semi ? semi + 1 : body_end;
        if (k == ie)
            continue;
        const char *q = k;
        while (q < ie && is_key_char(*q))
            q++;
        size_t kl = (size_t)(q - k);
        if (!kl)
            return parse_error(ps, key, keylen, "expected 'KEY = VALUE' inside '{ }'");
        q = skip_ws(q, ie);
        if (q < ie && *q == '=')
            q = skip_ws(q + 1, ie);
        strbuf_reset(&ps->value);
        bool sub_section = false;
        if ((r = value_words(ps, k, kl, line, q, ie, &sub_section, NULL, NULL)) < 0)
            return r;
        if (sub_section)
            return parse_error(ps, k, kl, "'{' must end the line");
        if ((r = add_node(ps, k, kl, false)) < 0)
            return r;
    }
    ps->depth--;
    ps->pending = NULL;
    return 0;
}

static int parse_line(struct parser *ps, const char *line, const char *e)
{
    const char *p = skip_ws(line, e);
    if (p == e || *p == '#')
        return 0;
    ps->ind = (struct indent){.s = line, .len = (size_t)(p - line)};

    if (*p == '}') {
        if (!rest_is_empty(p + 1, e))
            return parse_error(ps, NULL, 0, "unexpected text after '}'");
        note_close_indent(ps);
        if (ps->depth == 0)
            return stray_close(ps);
        ps->depth--;
        ps->pending = NULL;
        return 0;
    }
    if (*p == '{') {
        if (!rest_is_empty(p + 1, e))
            return parse_error(ps, NULL, 0, "unexpected text after '{'");
        if (!ps->pending)
            return parse_error(ps, NULL, 0, "section without a name");
        /* its '}' lines up with this '{' (at the name's indentation or not) */
        return open_section(ps, ps->pending, ps->ind);
    }
    if (*p == '=')
        return parse_error(ps, NULL, 0, "key with no name before '='");
    if (*p == '"')
        return parse_error(ps, NULL, 0, "a key name cannot be quoted");

    const char *key = p;
    while (p < e && is_key_char(*p))
        p++;
    size_t keylen = (size_t)(p - key);
    if (p < e && (*p == '"' || *p == '}'))
        return parse_error(ps, key, keylen, "unexpected '%c' after the key", *p);
    p = skip_ws(p, e);
    if (p < e && *p == '=')
        p = skip_ws(p + 1, e);

    strbuf_reset(&ps->value);
    bool is_section = false;
    const char *body = NULL, *body_end = NULL;
    int r = value_words(ps, key, keylen, line, p, e, &is_section, &body, &body_end);
    if (r < 0)
        return r;
    if (!body)
        return add_node(ps, key, keylen, is_section);
    return one_line_section(ps, key, keylen, line, body, body_end);
}

static void node_free(struct config_node *n)
{
    while (n) {
        struct config_node *next = n->next;
        node_free(n->children); /* recursion is bounded by CONFIG_MAX_DEPTH */
        free(n->name);
        free(n->value);
        free(n->words);
        free(n);
        n = next;
    }
}

void config_free(struct config *cfg)
{
    if (!cfg)
        return;
    node_free(cfg->root);
    free(cfg->file);
    free(cfg);
}

static struct config *config_new(const char *name)
{
    char *file = strdup(name ? name : "<string>");
    if (!file)
        return NULL;
    char *rname = strdup(""), *rvalue = strdup("");
    struct config_node *root = NULL;
    if (rname && rvalue)
        root = ALLOC_INIT(
            struct config_node,
            {.file = file, .name = rname, .value = rvalue, .is_section = true, .used = true});
    if (!root)
        goto out_free_strings;
    struct config *cfg = ALLOC_INIT(struct config, {.root = root, .file = file});
    if (!cfg)
        goto out_free_root;
    return cfg;

out_free_root:
    free(root);
out_free_strings:
    free(rname);
    free(rvalue);
    free(file);
    return NULL;
}

struct config *config_parse_buffer(const char *name, const char *text, size_t len, char *err,
                                   size_t errlen)
{
    struct config *cfg = config_new(name);
    if (!cfg) {
        err_set(err, errlen, 0, NULL, "%s: out of memory", name ? name : "<string>");
        return NULL;
    }
    struct parser ps = {.cfg = cfg, .err = err, .errlen = errlen};
    ps.stack[0] = (struct level){.section = cfg->root, .tail = &cfg->root->children};

    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* a UTF-8 byte order mark, as some editors write */
    int r = 0;
    while (p < end && r == 0) {
        if (ps.line == INT_MAX) {
            r = parse_error(&ps, NULL, 0, "too many lines");
            break;
        }
        ps.line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le - p > CONFIG_MAX_LINE)
            r = parse_error(&ps, NULL, 0, "line longer than %d bytes", CONFIG_MAX_LINE);
        else if (memchr(p, '\0', (size_t)(le - p)))
            r = parse_error(&ps, NULL, 0, "NUL byte in the file");
        else
            r = parse_line(&ps, p, le);
        p = nl ? nl + 1 : end;
    }
    if (r == 0 && ps.depth > 0)
        r = unclosed(&ps);
    strbuf_free(&ps.value);
    strbuf_free(&ps.words);
    if (r < 0) {
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

struct config *config_parse_string(const char *name, const char *text, char *err, size_t errlen)
{
    return config_parse_buffer(name, text, strlen(text), err, errlen);
}

struct config *config_parse_file(const char *path, char *err, size_t errlen)
{
    struct config *cfg = NULL;
    struct strbuf sb = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errlen, 0, NULL, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (sb.len > CONFIG_MAX_FILE) {
            err_set(err, errlen, 0, NULL, "%s: larger than %d bytes", path, CONFIG_MAX_FILE);
            goto out_free_buf;
        }
        if (strbuf_reserve(&sb, 16384) < 0) {
            err_set(err, errlen, 0, NULL, "%s: out of memory", path);
            goto out_free_buf;
        }
        ssize_t n = read(fd, sb.buf + sb.len, sb.cap - sb.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, errlen, 0, NULL, "%s: cannot read: %s", path, strerror(errno));
            goto out_free_buf;
        }
        if (n == 0)
            break;
        sb.len += (size_t)n;
    }
    cfg = config_parse_buffer(path, sb.buf, sb.len, err, errlen);

out_free_buf:
    strbuf_free(&sb);
    close(fd);
    return cfg;
}
