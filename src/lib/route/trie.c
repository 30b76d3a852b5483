#include "route/trie.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/load.h"

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

/* A registered prefix as the flat table holds it: its first 8 bytes as a
 * word (with the mask of those that count), the rest compared from a
 * copy. */
struct trie_flat {
    uint64_t word, mask;
    size_t len;
    char *copy; /* the whole prefix (NULL for ""), for the bytes past 8 */
    void *value;
    bool slash_end;
};

/* With at most FLAT_MAX prefixes, a lookup scans them, longest first,
 * instead of walking the trie: one masked word compare each, where the
 * walk costs a node per edge (about 20 instructions each, and a path
 * reaches its handler's prefix in two or three). */
#define FLAT_MAX 8

struct trie {
    struct trie_node *root; /* empty label; holds the value of "" */
    /* every registered prefix, longest first (the same prefixes as the
     * trie's values); lookups use it while n_flat <= FLAT_MAX */
    struct trie_flat *flat;
    size_t n_flat, cap_flat;
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
    for (size_t i = 0; i < t->n_flat; i++)
        free(t->flat[i].copy);
    free(t->flat);
    free(t);
}

static size_t common_prefix(const char *a, const char *b, size_t len)
{
    size_t i = 0;
    while (i < len && a[i] == b[i])
        i++;
    return i;
}

static int node_insert(struct trie *t, const char *prefix, size_t len, void *value)
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

/* The mask of a word's n (<= 8) low bytes. */
static uint64_t low_bytes(size_t n)
{
    return n == 8 ? ~0ull : (1ull << (8 * n)) - 1;
}

int trie_add(struct trie *t, const char *prefix, size_t len, void *value)
{
    if (t->n_flat == t->cap_flat) {
        size_t cap = t->cap_flat ? t->cap_flat * 2 : 8;
        struct trie_flat *flat = realloc(t->flat, cap * sizeof(*flat));
        if (!flat)
            return -ENOMEM;
        t->flat = flat;
        t->cap_flat = cap;
    }
    char *copy = NULL;
    if (len && !(copy = memdup(prefix, len)))
        return -ENOMEM;
    int r = node_insert(t, prefix, len, value);
    if (r < 0) {
        free(copy);
        return r;
    }
    size_t at = 0; /* before the first shorter one */
    while (at < t->n_flat && t->flat[at].len >= len)
        at++;
    memmove(&t->flat[at + 1], &t->flat[at], (t->n_flat - at) * sizeof(*t->flat));
    size_t head = MIN(len, 8);
    t->flat[at] = (struct trie_flat){
        .word = load_upto8(prefix, head),
        .mask = low_bytes(head),
        .len = len,
        .copy = copy,
        .value = value,
        .slash_end = len && prefix[len - 1] == '/',
    };
    t->n_flat++;
    return 0;
}

/* Whether n's prefix, which matched path up to pos, ends at a segment
 * boundary: a prefix ending in '/', the whole path, or a prefix followed
 * by '/'. */
static inline bool at_boundary(const struct trie_node *n, const char *path, size_t len, size_t pos)
{
    return n->slash_end || pos == len || path[pos] == '/';
}

/* The walk down the trie, for more than FLAT_MAX prefixes. Out of line,
 * so that the flat scan saves no register for it. */
static __attribute__((noinline)) void *walk(const struct trie *t, const char *path, size_t len,
                                            size_t *matched, bool segments)
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

/* The longest prefix in the flat table that path starts with (and at a
 * segment boundary of it, for segments), or NULL. w0: the path's first
 * bytes, as many as it has up to 8. */
static inline const struct trie_flat *flat_find(const struct trie *t, const char *path, size_t len,
                                                uint64_t w0, bool segments)
{
    for (size_t i = 0; i < t->n_flat; i++) {
        const struct trie_flat *f = &t->flat[i];
        if (f->len > len || (w0 & f->mask) != f->word)
            continue;
        if (unlikely(f->len > 8) && !eq_words(path, f->copy, f->len))
            continue;
        if (segments && !(f->slash_end || f->len == len || path[f->len] == '/'))
            continue;
        return f;
    }
    return NULL;
}

static inline __attribute__((always_inline)) void *
lookup(const struct trie *t, const char *path, size_t len, size_t *matched, bool segments)
{
    if (t->n_flat > FLAT_MAX)
        return walk(t, path, len, matched, segments);
    uint64_t w0 = len >= 8 ? load64(path) : load_upto8(path, len);
    const struct trie_flat *f = flat_find(t, path, len, w0, segments);
    if (!f)
        return NULL;
    if (matched)
        *matched = f->len;
    return f->value;
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
    size_t at = 0;
    while (t->flat[at].len != len || (len && memcmp(t->flat[at].copy, prefix, len)))
        at++; /* it is there: the trie had it */
    free(t->flat[at].copy);
    t->n_flat--;
    memmove(&t->flat[at], &t->flat[at + 1], (t->n_flat - at) * sizeof(*t->flat));
    return 0;
}
