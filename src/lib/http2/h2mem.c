/* h2mem.c - HTTP/2's memory: each session's own small heap, a worker's
 * spare streams, and the slabs of the states connections at rest keep.
 *
 * A session's heap. nghttp2 allocates through the nghttp2_mem it is
 * given; each session gets one whose blocks come from mappings of its
 * own (HEAP_CHUNK bytes, carved by size class, a freed block kept on the
 * session's list of its class), so that the stream objects, outbound
 * items and header copies it makes and frees for every request cost no
 * malloc call (about 12 a request on h2c /hello before: bench/RESULTS.md,
 * session 9), and so that deleting the session (a rest, a close) gives
 * every page back at once: its blocks never sit between other
 * connections' in the heap, where freed they would leave holes that
 * malloc_trim cannot return (bench/RESULTS.md, session 10). Blocks above
 * the largest class are mapped alone up to MAP_MAX (the session's 16 KiB
 * frame buffer), malloc()ed beyond. A session lives on one thread: no
 * lock. Each block carries a 16-byte header: its class (HEAP | class,
 * MAPPED or BIG) and the size asked, which realloc needs. Under ASan
 * every block is malloc()ed, so that a use after free inside nghttp2 is
 * still seen. */
#include "http2/stream.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/common.h"

#define HDR        16u
#define MIN_SHIFT  6 /* classes: 64, 128, ..., 4096 bytes with the header */
#define HEAP       0x80u
#define BIG        0xffu
#define MAPPED     0xfeu
#define MAP_MAX    (64u * 1024)
#define HEAP_CHUNK (16u * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_ON 0
#else
#define HEAP_ON 1
#endif

static_assert(HDR + sizeof(void *) <= 64, "a free block holds its link");

struct hdr {
    uint32_t cls;
    uint32_t pad;
    size_t size;
};

static unsigned class_of(size_t total)
{
    for (unsigned c = 0; c < H2_HEAP_CLASSES; c++)
        if (total <= (size_t)1 << (MIN_SHIFT + c))
            return c;
    return BIG;
}

/* A block too large for a class: mapped alone, or malloc()ed. */
static struct hdr *big_alloc(size_t size)
{
    if (size > SIZE_MAX - HDR)
        return NULL;
    struct hdr *h;
    if (HEAP_ON && size <= MAP_MAX) {
        void *m =
            mmap(NULL, size + HDR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        h = m;
        h->cls = MAPPED;
    } else {
        if (!(h = malloc(size + HDR)))
            return NULL;
        h->cls = BIG;
    }
    return h;
}

static void *heap_malloc(size_t size, void *ud)
{
    struct h2_heap *hp = ud;
    unsigned c = HEAP_ON && size <= SIZE_MAX - HDR ? class_of(size + HDR) : BIG;
    struct hdr *h;
    if (c == BIG) {
        if (!(h = big_alloc(size)))
            return NULL;
    } else if (hp->free[c]) {
        h = hp->free[c];
        hp->free[c] = *(void **)((char *)h + HDR);
        h->cls = HEAP | c;
    } else {
        size_t sz = (size_t)1 << (MIN_SHIFT + c);
        if (hp->left < sz) {
            void *m =
                mmap(NULL, HEAP_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                return NULL;
            *(void **)m = hp->chunks; /* the chunk's first 16 bytes: its link */
            hp->chunks = m;
            hp->bump = (char *)m + 16;
            hp->left = HEAP_CHUNK - 16;
        }
        h = (struct hdr *)hp->bump;
        hp->bump += sz;
        hp->left -= sz;
        h->cls = HEAP | c;
    }
    h->size = size;
    return (char *)h + HDR;
}

static void heap_free(void *p, void *ud)
{
    struct h2_heap *hp = ud;
    if (!p)
        return;
    struct hdr *h = (struct hdr *)((char *)p - HDR);
    if (h->cls & HEAP && h->cls != BIG && h->cls != MAPPED) {
        unsigned c = h->cls & ~HEAP;
        *(void **)p = hp->free[c];
        hp->free[c] = h;
    } else if (h->cls == MAPPED) {
        munmap(h, h->size + HDR);
    } else {
        free(h);
    }
}

static void *heap_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = heap_malloc(n * size, ud);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *heap_realloc(void *p, size_t size, void *ud)
{
    if (!p)
        return heap_malloc(size, ud);
    struct hdr *h = (struct hdr *)((char *)p - HDR);
    if (h->cls & HEAP && h->cls != BIG && h->cls != MAPPED &&
        size + HDR <= (size_t)1 << (MIN_SHIFT + (h->cls & ~HEAP))) {
        h->size = size; /* it still fits its block */
        return p;
    }
    void *q = heap_malloc(size, ud);
    if (!q)
        return NULL;
    memcpy(q, p, MIN(h->size, size));
    heap_free(p, ud);
    return q;
}

void h2_heap_mem(struct h2_heap *hp, nghttp2_mem *mem)
{
    *mem = (nghttp2_mem){
        .mem_user_data = hp,
        .malloc = heap_malloc,
        .free = heap_free,
        .calloc = heap_calloc,
        .realloc = heap_realloc,
    };
}

void h2_heap_release(struct h2_heap *hp)
{
    for (void *m = hp->chunks, *next; m; m = next) {
        next = *(void **)m;
        munmap(m, HEAP_CHUNK);
    }
    *hp = (struct h2_heap){0};
}

#define CONN_PAGES ((sizeof(struct h2_conn) + 4095) & ~(size_t)4095)

struct h2_conn *h2_conn_alloc(void)
{
    if (!HEAP_ON)
        return calloc(1, sizeof(struct h2_conn));
    void *m = mmap(NULL, CONN_PAGES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m; /* zeroed */
}

void h2_conn_release(struct h2_conn *c)
{
    if (!HEAP_ON)
        free(c);
    else if (c)
        munmap(c, CONN_PAGES);
}

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
    if (!HEAP_ON)
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
    if (!HEAP_ON) {
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
