/* h2mem.c - the allocator colibri gives nghttp2: per-thread lists of freed
 * small blocks by size class, so that the stream objects, outbound items
 * and header copies nghttp2 makes and frees for every request come back
 * from a list instead of from malloc (about 12 malloc/free calls a
 * request on h2c /hello: bench/RESULTS.md, session 9).
 *
 * Each block carries a 16-byte header: its class (or BIG) and the size
 * asked, which realloc needs. A session and its streams live on one
 * worker thread, so the lists need no lock; a block freed on another
 * thread (a server freed from the main thread) joins that thread's lists,
 * which is as good. A list keeps at most LIST_MAX blocks; a thread's lists
 * are freed when it ends. Under ASan every call goes to malloc and free, so
 * that a use after free inside nghttp2 is still seen. */
#include "http2/stream.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

#define HDR       16u
#define CLASSES   6 /* 64, 128, 256, 512, 1024, 2048 bytes with the header */
#define MIN_SHIFT 6
#define BIG       0xffu
#define LIST_MAX  64

#if defined(__SANITIZE_ADDRESS__)
#define LISTS_ON 0
#else
#define LISTS_ON 1
#endif

struct hdr {
    uint32_t cls;
    uint32_t pad;
    size_t size;
};

struct free_block {
    struct free_block *next;
};

struct lists {
    struct free_block *head[CLASSES];
    unsigned n[CLASSES];
};

static __thread struct lists lists;
static __thread bool registered;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void lists_free(void *arg)
{
    struct lists *l = arg;
    for (unsigned c = 0; c < CLASSES; c++)
        while (l->head[c]) {
            struct free_block *b = l->head[c];
            l->head[c] = b->next;
            free(b);
        }
    memset(l, 0, sizeof(*l));
}

static void key_init(void)
{
    if (pthread_key_create(&key, lists_free))
        key = (pthread_key_t)-1;
}

static unsigned class_of(size_t size)
{
    size_t total = size + HDR;
    for (unsigned c = 0; c < CLASSES; c++)
        if (total <= (size_t)1 << (MIN_SHIFT + c))
            return c;
    return BIG;
}

static void *block_malloc(size_t size, void *ud)
{
    (void)ud;
    unsigned c = LISTS_ON ? class_of(size) : BIG;
    struct hdr *h;
    if (c != BIG && lists.head[c]) {
        struct free_block *b = lists.head[c];
        lists.head[c] = b->next;
        lists.n[c]--;
        h = (struct hdr *)b;
    } else {
        if (size > SIZE_MAX - HDR)
            return NULL;
        h = malloc(c == BIG ? size + HDR : (size_t)1 << (MIN_SHIFT + c));
        if (!h)
            return NULL;
    }
    h->cls = c;
    h->size = size;
    return (char *)h + HDR;
}

static void block_free(void *p, void *ud)
{
    (void)ud;
    if (!p)
        return;
    struct hdr *h = (struct hdr *)((char *)p - HDR);
    unsigned c = h->cls;
    if (c != BIG && lists.n[c] < LIST_MAX) {
        if (unlikely(!registered)) {
            pthread_once(&once, key_init);
            registered = key != (pthread_key_t)-1 && !pthread_setspecific(key, &lists);
        }
        if (likely(registered)) {
            struct free_block *b = (struct free_block *)h;
            b->next = lists.head[c];
            lists.head[c] = b;
            lists.n[c]++;
            return;
        }
    }
    free(h);
}

static void *block_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = block_malloc(n * size, ud);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *block_realloc(void *p, size_t size, void *ud)
{
    if (!p)
        return block_malloc(size, ud);
    struct hdr *h = (struct hdr *)((char *)p - HDR);
    if (h->cls != BIG && size + HDR <= (size_t)1 << (MIN_SHIFT + h->cls)) {
        h->size = size; /* it still fits its block */
        return p;
    }
    void *q = block_malloc(size, ud);
    if (!q)
        return NULL;
    memcpy(q, p, MIN(h->size, size));
    block_free(p, ud);
    return q;
}

nghttp2_mem h2_mem = {
    .malloc = block_malloc,
    .free = block_free,
    .calloc = block_calloc,
    .realloc = block_realloc,
};
