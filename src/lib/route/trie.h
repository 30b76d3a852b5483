/* trie.h - URL prefix trie: maps a path to the value registered under its
 * longest matching prefix.
 *
 * Built once at start-up (trie_add), then read by every worker thread at the
 * same time (lookups are read-only and lock-free). trie_lookup() matches
 * bytes literally: "/hello" matches "/hellox". trie_lookup_segments(), the
 * router's, matches whole path segments: "/hello" matches "/hello" and
 * "/hello/x" but not "/hellox"; a prefix ending in '/' ("/static/")
 * matches everything below it. The trie owns copies of the prefixes, not
 * the values.
 */
#pragma once

#include <stddef.h>

struct trie;

struct trie *trie_new(void);
void trie_free(struct trie *t);
/* Returns 0, -EEXIST if the prefix is already there, or -ENOMEM. */
int trie_add(struct trie *t, const char *prefix, size_t len, void *value);
/* The value of the longest registered prefix of path, or NULL; *matched
 * gets that prefix's length when not NULL. */
void *trie_lookup(const struct trie *t, const char *path, size_t len, size_t *matched);
/* The same among the prefixes that end at a segment boundary of path: at
 * its end, before a '/', or with a '/' of their own. */
void *trie_lookup_segments(const struct trie *t, const char *path, size_t len, size_t *matched);
/* Forgets prefix; its value goes to *value (when not NULL). 0 or -ENOENT.
 * Start-up only, like trie_add. */
int trie_remove(struct trie *t, const char *prefix, size_t len, void **value);
