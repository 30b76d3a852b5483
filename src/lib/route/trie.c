#include "route/trie.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/load.h"

/* A radix trie whose edges carry at most 8 bytes (a longer run is a chain
 * of nodes), so that one word compare decides whether a child matches.
 *
 * A node keeps its children's descriptions in one array (struct trie_kid):
 * the child's whole prefix is known when it is added, and the kid entry
 * holds its last 8 bytes (or all of a shorter prefix) as a word, with the
 * mask of the bytes that count and where in the path they sit. A lookup
 * reads that word from the path with one load and compares: the edge's
 * bytes and its first byte together, whatever the edge's length, and the
 * bytes before the edge again (they matched already). A path shorter than
 * 8 bytes is read into a word once, and every load goes there, so no load
 * reads past the path. A node with many children also has an index by
 * the edge's first byte, so its lookup tries one child, not each.
 *
 * The children's array ends with an entry that matches any path (depth 0,
 * mask 0) and names no child, or KIDS_INDEXED: the scan needs no count,
 * and an indexed node starts its scan there, so the index costs nothing
 * to the others. */
struct trie_kid {
    uint64_t word; /* the child's prefix: bytes [off, depth), zero padded */
    uint64_t mask; /* the bytes of word that count: depth - off of them */
    size_t off;    /* depth - 8, or 0 for a prefix shorter than 8 bytes */
    size_t depth;  /* the child's prefix length */
    struct trie_node *node;
};

#define EDGE_MAX   8 /* bytes on an edge: a word */
#define INDEX_FROM 4 /* children from which a node has an index */

enum {
    T_VALUE = 1,     /* a value is registered here (it may be NULL) */
    T_SLASH_END = 2, /* with T_VALUE: its prefix ends in '/' (a segment boundary) */
};

struct trie_node {
    void *value;
    uint8_t flags;
    unsigned short nkids, capkids; /* the array has room for capkids + 1 */
    struct trie_kid *kids;
    const struct trie_kid *scan; /* where a lookup begins: kids, or its end */
    /* with INDEX_FROM children or more: by the byte that begins the edge,
     * the child's index in kids + 1 (0: none); else NULL */
    unsigned short *index;
};

/* The end entry of an indexed node's children: look in the index. */
#define KIDS_INDEXED ((struct trie_node *)(uintptr_t)1)

/* The scan of a node without children: the end entry alone. */
static const struct trie_kid no_kids;

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
 * instead of walking the trie: a compare each, where a walk costs a node
 * per edge (and a path reaches its handler's prefix in two or three). */
#define FLAT_MAX 8

struct trie {
    struct trie_node *root; /* depth 0: holds the value of "" */
    /* every registered prefix, longest first (the same prefixes as the
     * trie's values); lookups use it while n_flat <= FLAT_MAX */
    struct trie_flat *flat;
    size_t n_flat, cap_flat;
};

/* The byte at j of kid's prefix, for j on its edge (j >= kid->off). */
static unsigned char kid_byte(const struct trie_kid *k, size_t j)
{
    return (unsigned char)(k->word >> (8 * (j - k->off)));
}

/* The mask of a word's n (<= 8) low bytes. */
static uint64_t low_bytes(size_t n)
{
    return n == 8 ? ~0ull : (1ull << (8 * n)) - 1;
}

static struct trie_kid kid_for(struct trie_node *node, const char *prefix, size_t depth)
{
    size_t off = depth > EDGE_MAX ? depth - EDGE_MAX : 0;
    return (struct trie_kid){
        .word = load_upto8(prefix + off, depth - off),
        .mask = low_bytes(depth - off),
        .off = off,
        .depth = depth,
        .node = node,
    };
}

/* The child whose edge begins with c, at depth d (its parent's), or NULL;
 * its position goes to *idx. Start-up only. */
static struct trie_kid *kid_by_byte(const struct trie_node *n, size_t d, unsigned char c,
                                    size_t *idx)
{
    for (unsigned i = 0; i < n->nkids; i++) {
        if (kid_byte(&n->kids[i], d) == c) {
            *idx = i;
            return &n->kids[i];
        }
    }
    return NULL;
}

static int node_add_kid(struct trie_node *n, size_t d, struct trie_kid kid)
{
    if (n->nkids == n->capkids) {
        /* at most 256 children: one per possible first byte */
        unsigned cap = n->capkids ? n->capkids * 2u : 1u;
        if (cap > 256)
            cap = 256;
        struct trie_kid *kids = realloc(n->kids, (cap + 1) * sizeof(*kids));
        if (!kids)
            return -ENOMEM;
        n->kids = kids;
        n->capkids = (unsigned short)cap;
        n->scan = n->index ? &kids[n->nkids] : kids; /* valid if the rest fails */
    }
    if (n->nkids + 1 >= INDEX_FROM && !n->index) {
        if (!(n->index = calloc(256, sizeof(*n->index))))
            return -ENOMEM;
        for (unsigned i = 0; i < n->nkids; i++)
            n->index[kid_byte(&n->kids[i], d)] = (unsigned short)(i + 1);
    }
    n->kids[n->nkids] = kid;
    n->nkids++;
    if (n->index)
        n->index[kid_byte(&kid, d)] = n->nkids;
    n->kids[n->nkids] = (struct trie_kid){.node = n->index ? KIDS_INDEXED : NULL};
    n->scan = n->index ? &n->kids[n->nkids] : n->kids;
    return 0;
}

static struct trie_node *node_new(void)
{
    return ALLOC_INIT(struct trie_node, {.scan = &no_kids});
}

struct trie *trie_new(void)
{
    struct trie_node *root = node_new();
    if (!root)
        return NULL;
    struct trie *t = ALLOC_INIT(struct trie, {.root = root});
    if (!t)
        free(root);
    return t;
}

/* Frees n and everything below it. Iterative, because a chain of nested
 * prefixes can be deeper than the stack: values are no longer needed, so
 * each node's value field links the nodes still to be freed. */
static void free_below(struct trie_node *n)
{
    struct trie_node *todo = n;
    todo->value = NULL;
    while (todo) {
        n = todo;
        todo = n->value;
        for (unsigned i = 0; i < n->nkids; i++) {
            n->kids[i].node->value = todo;
            todo = n->kids[i].node;
        }
        free(n->kids);
        free(n->index);
        free(n);
    }
}

void trie_free(struct trie *t)
{
    if (!t)
        return;
    free_below(t->root);
    for (size_t i = 0; i < t->n_flat; i++)
        free(t->flat[i].copy);
    free(t->flat);
    free(t);
}

static void set_value(struct trie_node *n, const char *prefix, size_t len, void *value)
{
    n->value = value;
    n->flags = T_VALUE | (len && prefix[len - 1] == '/' ? T_SLASH_END : 0);
}

/* The nodes from depth d (exclusive) to len, each edge EDGE_MAX bytes but
 * the last, the value at the end: the kid entry of the first, for a node
 * at depth d. Nothing is linked to the trie yet. */
static int make_chain(const char *prefix, size_t d, size_t len, void *value, struct trie_kid *first)
{
    struct trie_node *top = NULL, *last = NULL;
    for (size_t at = d; at < len;) {
        size_t next = len - at > EDGE_MAX ? at + EDGE_MAX : len;
        struct trie_node *n = node_new();
        if (!n || (last && node_add_kid(last, at, kid_for(n, prefix, next)) < 0)) {
            free(n);
            if (top)
                free_below(top);
            return -ENOMEM;
        }
        if (!top)
            *first = kid_for(n, prefix, next), top = n;
        last = n;
        at = next;
    }
    set_value(last, prefix, len, value);
    return 0;
}

static int node_insert(struct trie *t, const char *prefix, size_t len, void *value)
{
    struct trie_node *n = t->root;
    size_t d = 0;

    for (;;) {
        if (d == len) {
            if (n->flags)
                return -EEXIST;
            set_value(n, prefix, len, value);
            return 0;
        }
        size_t idx;
        struct trie_kid *k = kid_by_byte(n, d, (unsigned char)prefix[d], &idx);
        if (!k) {
            struct trie_kid first;
            int r = make_chain(prefix, d, len, value, &first);
            if (r == 0 && (r = node_add_kid(n, d, first)) < 0)
                free_below(first.node);
            return r;
        }
        size_t end = MIN(k->depth, len), common = d + 1; /* the first byte matched */
        while (common < end && kid_byte(k, common) == (unsigned char)prefix[common])
            common++;
        if (common < k->depth) {
            /* Split the edge: a new node at depth common takes the shared
             * part, the old child hangs below it with the entry it had (an
             * entry depends only on the child's prefix). The first byte is
             * the same, so n's index is too. */
            struct trie_node *mid = node_new();
            if (!mid)
                return -ENOMEM;
            if (node_add_kid(mid, common, *k) < 0) {
                free_below(mid); /* nothing below it yet */
                return -ENOMEM;
            }
            n->kids[idx] = kid_for(mid, prefix, common);
            k = &n->kids[idx];
        }
        n = k->node;
        d = k->depth;
    }
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

/* Whether the path continues with k's edge. p is the path, or the word
 * holding a path shorter than 8 bytes: depth <= len keeps the load inside
 * it (off + 8 = depth when depth >= 8; else off = 0, and 8 <= len or p is
 * the word). The end entry of a children's array always matches. */
static inline bool kid_matches(const struct trie_kid *k, const char *p, size_t len)
{
    return k->depth <= len && (load64(p + k->off) & k->mask) == k->word;
}

/* The child of n (at depth d) whose edge the path continues with, or
 * NULL. */
static inline const struct trie_kid *next_kid(const struct trie_node *n, const char *p, size_t d,
                                              size_t len)
{
    const struct trie_kid *k = n->scan;
    while (!kid_matches(k, p, len))
        k++;
    if (likely((uintptr_t)k->node > (uintptr_t)KIDS_INDEXED))
        return k;
    if (!k->node)
        return NULL;
    unsigned i = d < len ? n->index[(unsigned char)p[d]] : 0;
    if (!i)
        return NULL;
    k = &n->kids[i - 1];
    return kid_matches(k, p, len) ? k : NULL;
}

/* The walk down the trie, for more than FLAT_MAX prefixes. */
static inline __attribute__((always_inline)) void *walk(const struct trie *t, const char *path,
                                                        size_t len, size_t *matched, bool segments)
{
    uint64_t small;
    const char *p = path;
    if (len < 8) {
        small = load_upto8(path, len);
        p = (const char *)&small;
    }
    const struct trie_node *n = t->root, *best = NULL;
    size_t d = 0, best_len = 0;
    for (;;) {
        /* a prefix counts at a segment boundary: one ending in '/', the
         * whole path, or one followed by '/' */
        if (n->flags && (!segments || (n->flags & T_SLASH_END) || d == len || p[d] == '/')) {
            best = n;
            best_len = d;
        }
        const struct trie_kid *k = next_kid(n, p, d, len);
        if (!k)
            break;
        n = k->node;
        d = k->depth;
    }
    if (!best)
        return NULL;
    if (matched)
        *matched = best_len;
    return best->value;
}

/* Out of line, so that the flat scan saves no register for it. */
static __attribute__((noinline)) void *walk_bytes(const struct trie *t, const char *path,
                                                  size_t len, size_t *matched)
{
    return walk(t, path, len, matched, false);
}

static __attribute__((noinline)) void *walk_segments(const struct trie *t, const char *path,
                                                     size_t len, size_t *matched)
{
    return walk(t, path, len, matched, true);
}

static inline __attribute__((always_inline)) void *
lookup(const struct trie *t, const char *path, size_t len, size_t *matched, bool segments)
{
    if (t->n_flat > FLAT_MAX)
        return segments ? walk_segments(t, path, len, matched) : walk_bytes(t, path, len, matched);
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
    uint64_t small;
    const char *p = prefix;
    if (len < 8) {
        small = load_upto8(prefix, len);
        p = (const char *)&small;
    }
    struct trie_node *n = t->root;
    size_t d = 0;
    while (d < len) {
        const struct trie_kid *k = next_kid(n, p, d, len);
        if (!k)
            return -ENOENT;
        n = k->node;
        d = k->depth;
    }
    if (!n->flags)
        return -ENOENT;
    if (value)
        *value = n->value;
    n->value = NULL;
    n->flags = 0;
    size_t at = 0;
    while (t->flat[at].len != len || (len && memcmp(t->flat[at].copy, prefix, len)))
        at++; /* it is there: the trie had it */
    free(t->flat[at].copy);
    t->n_flat--;
    memmove(&t->flat[at], &t->flat[at + 1], (t->n_flat - at) * sizeof(*t->flat));
    return 0;
}
