/* h2mem.c - HTTP/2's memory kept for reuse: a worker's spare streams, and
 * the allocator colibri gives nghttp2: per-thread lists of freed
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
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

#define HDR       16u
#define CLASSES   6 /* 64, 128, 256, 512, 1024, 2048 bytes with the header */
#define MIN_SHIFT 6
#define BIG       0xffu
#define MAPPED    0xfeu
#define MAP_MIN   4000u
#define MAP_MAX   (64u * 1024)
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
    } else if (LISTS_ON && size >= MAP_MIN && size <= MAP_MAX) {
        /* a session's large buffers, kept for its life: mapped, so that
         * they go back whole when it is deleted (at a rest), rather than
         * leaving holes between the heap's live blocks */
        void *m =
            mmap(NULL, size + HDR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        h = m;
        c = MAPPED;
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
    if (c == MAPPED) {
        munmap(h, h->size + HDR);
        return;
    }
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
    if (h->cls < CLASSES && size + HDR <= (size_t)1 << (MIN_SHIFT + h->cls)) {
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

/* --- spare streams ------------------------------------------------------- */

/* A worker's spare streams: a finished stream keeps its buffers (those
 * that stayed small) for the next one, so that a request costs no
 * allocation of a stream nor of its head's buffers. Per thread, as a
 * connection and its streams belong to one worker; at most SPARE_MAX,
 * freed when the thread ends. */
#if defined(__SANITIZE_ADDRESS__)
#define SPARE_MAX 0 /* ASan sees a use after free of a stream */
#else
#define SPARE_MAX 16
#endif
#define SPARE_BUF_KEEP 2048

static __thread struct h2_stream *spare[SPARE_MAX + 1];
static __thread unsigned n_spare;
static __thread bool spare_registered; /* spare_key holds this thread's list */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(struct h2_stream *st)
{
    strbuf_free(&st->lines);
    strbuf_free(&st->cookies);
    strbuf_free(&st->pseudo);
    strbuf_free(&st->rx);
    strbuf_free(&st->tx);
    free(st);
}

static void spare_exit(void *arg)
{
    (void)arg;
    while (n_spare)
        spare_free(spare[--n_spare]);
}

static void spare_init(void)
{
    if (pthread_key_create(&spare_key, spare_exit))
        spare_key = (pthread_key_t)-1;
}

struct h2_stream *h2_stream_alloc(void)
{
    if (!n_spare)
        return calloc(1, sizeof(struct h2_stream));
    struct h2_stream *st = spare[--n_spare];
    struct strbuf lines = st->lines, cookies = st->cookies, pseudo = st->pseudo, rx = st->rx,
                  tx = st->tx;
    memset(st, 0, sizeof(*st));
    st->lines = lines;
    st->cookies = cookies;
    st->pseudo = pseudo;
    st->rx = rx;
    st->tx = tx;
    return st;
}

void h2_stream_release(struct h2_stream *st)
{
    if (n_spare + 1 <= SPARE_MAX) {
        if (unlikely(!spare_registered)) {
            pthread_once(&spare_once, spare_init);
            /* any non-NULL value makes the destructor run */
            spare_registered =
                spare_key != (pthread_key_t)-1 && !pthread_setspecific(spare_key, spare);
        }
        if (likely(spare_registered)) {
            strbuf_shrink(&st->lines, SPARE_BUF_KEEP);
            strbuf_shrink(&st->cookies, SPARE_BUF_KEEP);
            strbuf_shrink(&st->pseudo, SPARE_BUF_KEEP);
            strbuf_shrink(&st->rx, SPARE_BUF_KEEP);
            strbuf_shrink(&st->tx, SPARE_BUF_KEEP);
            spare[n_spare++] = st;
            return;
        }
    }
    spare_free(st);
}

/* --- kept states of connections at rest ----------------------------------- */

/* A slab: a mapping of SLAB_BYTES holding slots of one size, each slot a
 * pointer to its slab and a struct h2_kept. A thread's slabs with a free
 * slot are listed; one that empties is unmapped (a lone connection that
 * rests and wakes maps and unmaps one each time: two system calls a
 * second at most). A state is made and freed on its connection's worker
 * thread. */
#define SLAB_BYTES 16384

struct slab {
    struct slab *prev, *next; /* on the thread's list while it has a free slot */
    void *free;               /* freed slots */
    unsigned used, carved;    /* slots in use; slots handed out once */
    bool listed;
};

struct slot {
    struct slab *slab;
    struct h2_kept k;
};

#define SLOTS ((SLAB_BYTES - sizeof(struct slab)) / sizeof(struct slot))

static __thread struct slab *slabs;

static struct slot *slot_at(struct slab *s, unsigned i)
{
    return (struct slot *)((char *)(s + 1) + i * sizeof(struct slot));
}

static void slab_link(struct slab *s)
{
    s->prev = NULL;
    s->next = slabs;
    if (slabs)
        slabs->prev = s;
    slabs = s;
    s->listed = true;
}

static void slab_unlink(struct slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        slabs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->listed = false;
}

struct h2_kept *h2_kept_new(void)
{
    if (!LISTS_ON)
        return malloc(sizeof(struct h2_kept));
    struct slab *s = slabs;
    if (!s) {
        void *m =
            mmap(NULL, SLAB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        s = m;
        *s = (struct slab){0};
        slab_link(s);
    }
    struct slot *sl;
    if (s->free) {
        sl = s->free;
        s->free = *(void **)sl;
    } else {
        sl = slot_at(s, s->carved++);
    }
    sl->slab = s;
    if (++s->used == SLOTS)
        slab_unlink(s); /* full */
    return &sl->k;
}

void h2_kept_del(struct h2_kept *k)
{
    if (!k)
        return;
    if (!LISTS_ON) {
        free(k);
        return;
    }
    struct slot *sl = (struct slot *)((char *)k - offsetof(struct slot, k));
    struct slab *s = sl->slab;
    *(void **)sl = s->free;
    s->free = sl;
    if (!s->listed)
        slab_link(s);
    if (--s->used)
        return;
    slab_unlink(s);
    munmap(s, SLAB_BYTES);
}
