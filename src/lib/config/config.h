/* config.h - the configuration file: a small, forgiving text format parsed
 * into a tree that the server and its modules read.
 *
 *     # comment
 *     listener 127.0.0.1:8080          # "key value" ...
 *     threads = 2                      # ... and "key = value" are the same
 *     name = "quoted # not a comment"  # double quotes, with \" \\ \n \t escapes
 *     set X-A = "a; b"                 # any word may be quoted: words X-A, =, "a; b"
 *     rewrite ^/(.*)$ /x/${1}          # rewrite: verbatim (no ${} expansion; in quotes
 *                                      # only \" and \\ are escapes)
 *     root = ${WWW_ROOT:./wwwroot}     # environment, with a default
 *     site {                           # a section; it may carry arguments:
 *         serve_files / {              #   name = "serve_files", value = "/"
 *             path = ./wwwroot
 *         }
 *     }
 *
 * A '#' starts a comment at the start of a word (so "/page#top" keeps its
 * '#'); quote a value that needs " #". Inside quotes "\$" is a literal '$'.
 * A variable's default applies when it is unset or empty.
 *
 * Readers take nodes with config_take*(), which marks them used; once every
 * module has read its part, config_check_unused() reports the first key
 * nobody took, so a typo or a key given twice is an error, not a silently
 * ignored line. Every error message names the file, the line and the key:
 *     "colibri.conf:12: keep_alive_timeout: bad duration 'abc'"
 *
 * Not thread-safe; read at start-up.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config_node {
    const char *file; /* owned by the struct config */
    char *name;
    char *value; /* after expansion and unquoting; "" when none */
    /* the value's words (a double-quoted word is one, wherever it is),
     * NULL-terminated; one allocation */
    char **words;
    size_t n_words;
    int line;
    bool is_section;
    bool used;
    struct config_node *children; /* sections only */
    struct config_node *next;
};

struct config {
    struct config_node *root; /* a section holding the top-level nodes */
    char *file;
};

/* Return NULL and a message in err ("file:line: ...") on failure.
 *
 * Braces that do not balance are reported where the indentation shows the
 * mistake was made (a section's '}' lined up with its header, its body
 * indented deeper), not where the parser ran out:
 *     "colibri.conf:4: serve_files: missing '{' (so the '}' on line 8 has
 *      no section to close)"
 *     "colibri.conf:5: unexpected '}' (it closes 'site' from line 1, so the
 *      '}' on line 6 has no section to close)"
 *     "colibri.conf:4: serve_files: section never closed (missing '}'
 *      before line 6)"
 * and, when the indentation says nothing (or mixes tabs and spaces), at the
 * brace itself: "colibri.conf:7: unexpected '}' (no section open)", or
 * "colibri.conf:2: site: section never closed (missing '}')" for the
 * innermost section still open at the end. Indentation alone is never an
 * error. */
struct config *config_parse_file(const char *path, char *err, size_t errlen);
struct config *config_parse_string(const char *name, const char *text, char *err, size_t errlen);
/* The same over len bytes that need not end in a NUL; a NUL byte inside is
 * an error, as in a file. name is used in messages (NULL: "<string>"). */
struct config *config_parse_buffer(const char *name, const char *text, size_t len, char *err,
                                   size_t errlen);
void config_free(struct config *cfg);

/* The first not-yet-used child of section named name, marked used; NULL if
 * none. Call repeatedly for repeatable keys. */
struct config_node *config_take(struct config_node *section, const char *name);
/* The next not-yet-used child, whatever its name (for sections whose keys
 * are open-ended, like "site"); marked used. */
struct config_node *config_take_any(struct config_node *section);

/* Value conversions; each returns 0, or -EINVAL with err set. */
int config_duration_ms(const struct config_node *n, uint64_t *ms, char *err, size_t errlen);
int config_size(const struct config_node *n, uint64_t *bytes, char *err, size_t errlen);
int config_bool(const struct config_node *n, bool *out, char *err, size_t errlen);
int config_int(const struct config_node *n, long min, long max, long *out, char *err,
               size_t errlen);

/* "file:line: name" of n: where config_error() says a message is. */
void config_where(const struct config_node *n, char *buf, size_t len);
/* Formats "file:line: name: message" into err and returns -EINVAL. */
int config_error(const struct config_node *n, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int config_verror(const struct config_node *n, char *err, size_t errlen, const char *fmt,
                  va_list ap);

/* 0 when every node was used; otherwise -EINVAL and a message about the
 * first node (depth first) that nobody took:
 *     "file:5: threads: duplicate key (first at line 3)"
 * when an earlier node of the same name in the same section was taken (a
 * reader that wants the key once took the first copy only; keys read in a
 * loop, like "listener", leave no copy behind), else
 *     "file:5: thradds: unknown key" */
int config_check_unused(const struct config *cfg, char *err, size_t errlen);
/* The same, and the node reported (with what it holds) is marked used, so
 * that calling again reports the next one: for listing every mistake. */
int config_take_unused(struct config *cfg, char *err, size_t errlen);
/* Marks n and everything below it used (a section skipped after an error). */
void config_mark_used(struct config_node *n);
