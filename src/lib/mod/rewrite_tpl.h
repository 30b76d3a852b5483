/* rewrite_tpl.h - a rewrite line's replacement: literal text and
 * references to the pattern's captures ($1..$9, ${N}, ${name}; $$ is a
 * '$'), compiled once, expanded per request. Pure: no I/O, no PCRE2 (the
 * caller resolves names to group numbers), so it is fuzzed alone
 * (fuzz/fuzz_rewrite.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Resolves ${name} to a group number (> 0), or returns -1: the caller's
 * pattern knows its names. */
typedef int (*rw_name_fn)(void *arg, const char *name, size_t len);

struct rw_part {
    uint32_t group; /* 0: literal text */
    uint32_t off, len;
};

struct rw_tpl {
    char *text; /* the literal bytes of all parts */
    struct rw_part *parts;
    unsigned n_parts;
    uint32_t max_group; /* the highest group referenced */
};

/* Compiles s; groups is the pattern's capture count. 0, or -EINVAL with a
 * message in why (unknown $N, a '$' followed by something else, a group
 * name the pattern lacks, a byte that cannot be in a URL), or -ENOMEM. */
int rw_tpl_compile(struct rw_tpl *t, const char *s, uint32_t groups, rw_name_fn names, void *arg,
                   char *why, size_t whylen);
void rw_tpl_free(struct rw_tpl *t);

/* Expands t against subject and PCRE2's ovector (pairs of offsets,
 * n_pairs of them; an unset group, ~0, is empty) into out (cap bytes, NUL
 * added). Captured bytes are percent-encoded unless unreserved, a
 * sub-delim, ':', '@' or '/', so the result is always a valid target.
 * Returns its length, or -ENOSPC. */
long rw_tpl_expand(const struct rw_tpl *t, const char *subject, size_t subject_len,
                   const size_t *ovector, uint32_t n_pairs, char *out, size_t cap);
