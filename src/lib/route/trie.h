/* trie.h - URL prefix trie: maps a path to the value registered under its
 * longest matching prefix.
 *
 * Built once at start-up (trie_add), then read by every worker thread at the
 * same time (trie_lookup is read-only and lock-free). Prefixes match bytes
 * literally, like an nginx prefix location: "/hello" matches "/hello",
 * "/hello/x" and "/hellox". The trie owns copies of the prefixes, not the
 * values.
 */
#pragma once

#include <stddef.h>

struct trie;

struct trie *trie_new(void);
void trie_free(struct trie *t);
/* Returns 0, -EEXIST if the prefix is already there, or -ENOMEM. */
int trie_add(struct trie *t, const char *prefix, size_t len, void *value);
/* The value of the longest registered prefix of path, or NULL; *matched gets
 * that prefix's length when not NULL. */
void *trie_lookup(const struct trie *t, const char *path, size_t len, size_t *matched);
