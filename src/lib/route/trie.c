#include "route/trie.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* A radix trie: each edge carries a run of bytes, so a lookup touches one
 * node per branch point rather than one per byte. A node keeps the first
 * bytes of its children's labels in one small array, scanned in a loop,
 * so choosing a child reads a single cache line before following a pointer. */
struct trie_node {
    void *value;
    bool has_value; /* a registered value may itself be NULL */
    bool slash_end; /* with a value: its prefix ends in '/' (a segment boundary) */
    unsigned short nkids, capkids;
    unsigned char *first;    /* first byte of each child's label */
    struct trie_node **kids; /* same order as first */
    size_t len;              /* label length */
    char label[];            /* the bytes on the edge into this node */
};

struct trie {
    struct trie_node *root; /* empty label; holds the value of "" */
};

static struct trie_node *node_new(const char *label, size_t len)
{
    if (len > SIZE_MAX - sizeof(struct trie_node))
        return NULL;
    struct trie_node *n = calloc(1, sizeof(*n) + len);
    if (!n)
        return NULL;
    n->len = len;
    if (len)
        memcpy(n->label, label, len);
    return n;
}

static int node_add_kid(struct trie_node *n, struct trie_node *kid)
{
    if (n->nkids == n->capkids) {
        /* at most 256 children: one per possible first byte */
        unsigned cap = n->capkids ? n->capkids * 2u : 2u;
        if (cap > 256)
            cap = 256;
        unsigned char *first = realloc(n->first, cap);
        if (!first)
            return -ENOMEM;
        n->first = first;
        struct trie_node **kids = realloc(n->kids, cap * sizeof(*kids));
        if (!kids)
            return -ENOMEM;
        n->kids = kids;
        n->capkids = (unsigned short)cap;
    }
    n->first[n->nkids] = (unsigned char)kid->label[0];
    n->kids[n->nkids] = kid;
    n->nkids++;
    return 0;
}

/* A plain loop, not memchr() and memcmp(): a node has a few children and
 * a label a few bytes, fewer than a library call costs to set up. */
static inline struct trie_node *node_kid(const struct trie_node *n, unsigned char c, size_t *idx)
{
    for (unsigned i = 0; i < n->nkids; i++) {
        if (n->first[i] == c) {
            if (idx)
                *idx = i;
            return n->kids[i];
        }
    }
    return NULL;
}

/* Whether path, from pos on, starts with kid's label. */
static inline bool label_matches(const struct trie_node *kid, const char *path, size_t len,
                                 size_t pos)
{
    if (kid->len > len - pos)
        return false;
    for (size_t i = 0; i < kid->len; i++)
        if (kid->label[i] != path[pos + i])
            return false;
    return true;
}

struct trie *trie_new(void)
{
    struct trie_node *root = node_new(NULL, 0);
    if (!root)
        return NULL;
    struct trie *t = ALLOC_INIT(struct trie, {.root = root});
    if (!t)
        free(root);
    return t;
}

void trie_free(struct trie *t)
{
    if (!t)
        return;
    /* Iterative, because a chain of nested prefixes can be deeper than the
     * stack: values are no longer needed, so each node's value field links
     * the nodes still to be freed. */
    struct trie_node *todo = t->root;
    todo->value = NULL;
    while (todo) {
        struct trie_node *n = todo;
        todo = n->value;
        for (unsigned i = 0; i < n->nkids; i++) {
            n->kids[i]->value = todo;
            todo = n->kids[i];
        }
        free(n->first);
        free(n->kids);
        free(n);
    }
    free(t);
}

static size_t common_prefix(const char *a, const char *b, size_t len)
{
    size_t i = 0;
    while (i < len && a[i] == b[i])
        i++;
    return i;
}

int trie_add(struct trie *t, const char *prefix, size_t len, void *value)
{
    struct trie_node *n = t->root;
    size_t pos = 0;

    for (;;) {
        if (pos == len) {
            if (n->has_value)
                return -EEXIST;
            n->value = value;
            n->has_value = true;
            n->slash_end = len && prefix[len - 1] == '/';
            return 0;
        }
        size_t idx;
        struct trie_node *kid = node_kid(n, (unsigned char)prefix[pos], &idx);
        if (!kid) {
            struct trie_node *leaf = node_new(prefix + pos, len - pos);
            if (!leaf)
                return -ENOMEM;
            leaf->value = value;
            leaf->has_value = true;
            leaf->slash_end = prefix[len - 1] == '/';
            if (node_add_kid(n, leaf) < 0) {
                free(leaf);
                return -ENOMEM;
            }
            return 0;
        }
        size_t common = common_prefix(kid->label, prefix + pos, MIN(kid->len, len - pos));
        if (common < kid->len) {
            /* Split the edge: a new node takes the shared part and the old
             * child keeps the rest. The trie stays valid if a later step
             * runs out of memory. */
            struct trie_node *mid = node_new(kid->label, common);
            if (!mid)
                return -ENOMEM;
            memmove(kid->label, kid->label + common, kid->len - common);
            kid->len -= common;
            if (node_add_kid(mid, kid) < 0) {
                memmove(kid->label + common, kid->label, kid->len);
                memcpy(kid->label, mid->label, common);
                kid->len += common;
                free(mid);
                return -ENOMEM;
            }
            n->kids[idx] = mid; /* same first byte: n->first[idx] is unchanged */
            kid = mid;
        }
        n = kid;
        pos += common;
    }
}

/* Whether n's prefix, which matched path up to pos, ends at a segment
 * boundary: a prefix ending in '/', the whole path, or a prefix followed
 * by '/'. */
static inline bool at_boundary(const struct trie_node *n, const char *path, size_t len, size_t pos)
{
    return n->slash_end || pos == len || path[pos] == '/';
}

static inline void *lookup(const struct trie *t, const char *path, size_t len, size_t *matched,
                           bool segments)
{
    const struct trie_node *n = t->root;
    const struct trie_node *best = NULL;
    size_t pos = 0, best_len = 0;

    for (;;) {
        if (n->has_value && (!segments || at_boundary(n, path, len, pos))) {
            best = n;
            best_len = pos;
        }
        if (pos == len)
            break;
        const struct trie_node *kid = node_kid(n, (unsigned char)path[pos], NULL);
        if (!kid || !label_matches(kid, path, len, pos))
            break;
        pos += kid->len;
        n = kid;
    }
    if (!best)
        return NULL;
    if (matched)
        *matched = best_len;
    return best->value;
}

void *trie_lookup(const struct trie *t, const char *path, size_t len, size_t *matched)
{
    return lookup(t, path, len, matched, false);
}

void *trie_lookup_segments(const struct trie *t, const char *path, size_t len, size_t *matched)
{
    return lookup(t, path, len, matched, true);
}

int trie_remove(struct trie *t, const char *prefix, size_t len, void **value)
{
    struct trie_node *n = t->root;
    size_t pos = 0;
    while (pos < len) {
        struct trie_node *kid = node_kid(n, (unsigned char)prefix[pos], NULL);
        if (!kid || !label_matches(kid, prefix, len, pos))
            return -ENOENT;
        pos += kid->len;
        n = kid;
    }
    if (!n->has_value)
        return -ENOENT;
    if (value)
        *value = n->value;
    n->value = NULL;
    n->has_value = false;
    return 0;
}
