/* cache.c - sharded hash table of reference-counted entries with a TTL.
 *
 * Each shard has a reader-writer lock: hits take it shared, so workers
 * asking for the same hot entry do not exclude each other; only inserting,
 * replacing, invalidating and pruning take it exclusively. The hot path only
 * ever tries the locks; on failure it builds a private entry rather than
 * wait. The lock is a word of our own (see struct shard), not a
 * pthread_rwlock_t: a hit takes and releases it with two atomic additions
 * instead of two library calls (about 50 instructions less a hit). */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/load.h"
#include "base/thread.h"

#define N_SHARDS         16
#define INITIAL_BUCKETS  16
#define DEFAULT_MAX      65536
#define PRUNE_MIN_MS     20
#define PRUNE_MAX_MS     1000
#define CACHE_LINE_BYTES 64

/* The shard lock: the number of readers, plus WRITER while a writer holds
 * it. A reader adds one and backs out if WRITER was set; a writer that
 * only tries swaps 0 for WRITER, one that waits sets WRITER and waits for
 * the count to drop to 0. Every holder keeps it for a few pointer moves, so the calls
 * that must wait (invalidation, cache_prune, cache_free: never a worker's
 * hot path) spin with sched_yield() rather than sleep on a futex. */
#define WRITER (1u << 31)

struct shard {
    _Atomic uint32_t lock;
    struct cache_entry **buckets;
    uint32_t mask; /* buckets - 1 */
    uint32_t n;
} __attribute__((aligned(CACHE_LINE_BYTES)));

struct cache {
    struct shard shards[N_SHARDS];
    const struct cache_ops *ops;
    void *ctx;
    uint64_t seed;
    uint32_t ttl_ms;
    uint32_t max_entries;
    _Atomic uint32_t entries;
    _Atomic uint64_t misses, privates, pruned, invalidated;
    /* bumped by every invalidation, before it removes anything: an entry
     * whose create() saw another value is not kept (insert) */
    _Atomic uint64_t gen;

    /* the pruning thread */
    bool has_thread;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;             /* under mu */
    _Atomic bool sleeping; /* the thread waits without a deadline (empty table) */
    uint32_t prune_every_ms;
};

static bool rd_trylock(struct shard *s)
{
    if (!(atomic_fetch_add_explicit(&s->lock, 1, memory_order_acquire) & WRITER))
        return true;
    atomic_fetch_sub_explicit(&s->lock, 1, memory_order_relaxed);
    return false;
}

static void rd_lock(struct shard *s)
{
    while (!rd_trylock(s))
        sched_yield();
}

static void rd_unlock(struct shard *s)
{
    atomic_fetch_sub_explicit(&s->lock, 1, memory_order_release);
}

static bool wr_trylock(struct shard *s)
{
    uint32_t free_ = 0;
    return atomic_compare_exchange_strong_explicit(&s->lock, &free_, WRITER, memory_order_acquire,
                                                   memory_order_relaxed);
}

/* Takes WRITER first, which turns new readers away, then waits for the
 * readers inside to leave: a writer waiting for a moment with no reader at
 * all could wait for ever on a busy shard. */
static void wr_lock(struct shard *s)
{
    while (atomic_fetch_or_explicit(&s->lock, WRITER, memory_order_acquire) & WRITER)
        sched_yield(); /* another writer has it */
    while (atomic_load_explicit(&s->lock, memory_order_acquire) != WRITER)
        sched_yield();
}

/* a subtraction, not a store of 0: readers that are backing out may have
 * added their one meanwhile */
static void wr_unlock(struct shard *s)
{
    atomic_fetch_sub_explicit(&s->lock, WRITER, memory_order_release);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ms(const struct cache *c)
{
    return c->ops->now_ms ? c->ops->now_ms(c->ctx) : mono_ms();
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Eight bytes at a time; keys are paths, a few dozen bytes. The last (< 8)
 * bytes are read with fixed-size loads, not a memcpy() of a variable
 * length (a loop of its own): the last 8 bytes of the key again when it
 * has that many, else two 4-byte loads that may overlap, else three single
 * bytes that may repeat. The length is in h, so different keys still give
 * different words. Inlined into cache_get() as when it was its only caller
 * (invalidate is the other). */
static inline __attribute__((always_inline)) uint64_t hash_key(uint64_t seed, const char *p,
                                                               size_t len)
{
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ull);
    const char *key = p;
    size_t n = len;
    while (n >= 8) {
        h = mix(h ^ load64(p));
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n) {
        if (len >= 8)
            w = load64(key + len - 8);
        else if (len >= 4)
            w = load32(key) | load32(key + len - 4) << 32;
        else
            w = (uint64_t)(unsigned char)key[0] | (uint64_t)(unsigned char)key[len / 2] << 8 |
                (uint64_t)(unsigned char)key[len - 1] << 16;
    }
    return mix(h ^ w ^ 0x5bd1e995);
}

static struct shard *shard_of(struct cache *c, uint64_t h)
{
    return &c->shards[h >> 60 & (N_SHARDS - 1)];
}

/* The same fixed-size loads as hash_key(), not a memcmp() call: keys are
 * a few dozen bytes, and they match (the hash did) nearly every time. */
static inline bool key_eq(const char *a, const char *b, size_t len)
{
    if (len >= 8)
        return eq_words(a, b, len);
    if (len >= 4)
        return load32(a) == load32(b) && load32(a + len - 4) == load32(b + len - 4);
    for (size_t i = 0; i < len; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static inline struct cache_entry **slot_of(struct shard *s, uint64_t h, const char *key, size_t len)
{
    struct cache_entry **pp = &s->buckets[h & s->mask];
    for (; *pp; pp = &(*pp)->next) {
        struct cache_entry *e = *pp;
        if (e->hash == h && e->key_len == len && key_eq(e->key, key, len))
            break;
    }
    return pp;
}

static void ref(struct cache_entry *e)
{
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

static void destroy(struct cache *c, struct cache_entry *e)
{
    free(e->key);
    e->key = NULL;
    c->ops->destroy(c->ctx, e);
}

/* cache_put() of the last reference */
void cache_put_last(struct cache *c, struct cache_entry *e)
{
    destroy(c, e);
}

/* Doubles the bucket array; on allocation failure the chains just get
 * longer. Called with the shard locked exclusively. */
static void grow(struct shard *s)
{
    uint32_t n = (s->mask + 1) * 2;
    struct cache_entry **b = calloc(n, sizeof(*b));
    if (!b)
        return;
    for (uint32_t i = 0; i <= s->mask; i++) {
        struct cache_entry *e = s->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(s->buckets);
    s->buckets = b;
    s->mask = n - 1;
}

static void wake_pruner(struct cache *c)
{
    if (!c->has_thread || !atomic_load(&c->sleeping))
        return;
    pthread_mutex_lock(&c->mu);
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

static struct cache_entry *make_private(struct cache *c, struct cache_entry *e)
{
    atomic_fetch_add_explicit(&c->privates, 1, memory_order_relaxed);
    free(e->key);
    e->key = NULL;
    return e;
}

/* Puts fresh (one reference: the caller's) into the table if the shard is
 * free, replacing an expired entry. Returns the entry for the caller: fresh,
 * or one somebody else inserted meanwhile. */
static struct cache_entry *insert(struct cache *c, struct shard *s, struct cache_entry *fresh,
                                  uint64_t now, uint64_t gen)
{
    struct cache_entry *old = NULL, *theirs = NULL;
    char *key = malloc(fresh->key_len + 1);
    if (key) {
        memcpy(key, fresh->key, fresh->key_len);
        key[fresh->key_len] = '\0';
    }
    fresh->key = key;
    if (!key || !wr_trylock(s))
        return make_private(c, fresh);
    /* under the lock: an invalidation bumps gen before it takes the lock to
     * remove, so either it sees this entry or this sees its gen */
    if (atomic_load_explicit(&c->gen, memory_order_relaxed) != gen) {
        wr_unlock(s);
        return make_private(c, fresh);
    }

    struct cache_entry **pp = slot_of(s, fresh->hash, fresh->key, fresh->key_len);
    if (*pp && now < (*pp)->expires_ms) {
        theirs = *pp;
        ref(theirs);
    } else if (!*pp && atomic_load_explicit(&c->entries, memory_order_relaxed) >= c->max_entries) {
        wr_unlock(s);
        return make_private(c, fresh);
    } else {
        old = *pp;
        fresh->next = old ? old->next : NULL;
        *pp = fresh;
        ref(fresh); /* the table's */
        if (!old) {
            /* seq_cst: pairs with the pruner's sleeping flag (wake_pruner) */
            atomic_fetch_add(&c->entries, 1);
            if (++s->n > s->mask + 1)
                grow(s);
        }
    }
    wr_unlock(s);

    if (theirs) {
        cache_put(c, fresh);
        return theirs;
    }
    if (old)
        cache_put(c, old);
    else
        wake_pruner(c);
    return fresh;
}

/* The entry for key, with a reference for the caller, or NULL. Called
 * with s read-locked. */
static inline struct cache_entry *find_ref(struct shard *s, uint64_t h, const char *key, size_t len)
{
    struct cache_entry *e = *slot_of(s, h, key, len);
    if (e)
        ref(e);
    return e;
}

/* Everything but a hit at the first try: the other tries of a busy shard
 * (busy), the miss (stale: the expired entry found, or NULL), the
 * insertion. Out of line, so that the hit stays short. */
static __attribute__((noinline)) struct cache_entry *
get_slow(struct cache *c, struct shard *s, uint64_t h, const char *key, size_t key_len,
         uint64_t now, struct cache_entry *stale, bool busy, int *err)
{
    /* A writer holds a shard only for a few pointer moves: a few tries
     * without sleeping nearly always get in, and only then does a busy
     * shard cost a private entry (which may mean compressing a file). */
    for (int tries = busy && c->ttl_ms ? 7 : 0; tries > 0; tries--) {
        if (!rd_trylock(s)) {
            __asm__ __volatile__("" ::: "memory");
            continue;
        }
        busy = false;
        struct cache_entry *e = find_ref(s, h, key, key_len);
        rd_unlock(s);
        if (e && now < e->expires_ms)
            return e;
        stale = e;
        break;
    }

    atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
    uint64_t gen = atomic_load(&c->gen);
    int r = -ENOMEM;
    struct cache_entry *fresh = c->ops->create(c->ctx, key, key_len, stale, &r);
    if (stale)
        cache_put(c, stale);
    if (!fresh) {
        *err = r < 0 ? r : -EIO;
        return NULL;
    }
    fresh->next = NULL;
    fresh->hash = h;
    fresh->key = (char *)key; /* borrowed until insert() copies it */
    fresh->key_len = key_len;
    fresh->expires_ms = now + c->ttl_ms;
    atomic_store_explicit(&fresh->refs, 1, memory_order_relaxed);
    if (busy || !c->ttl_ms) {
        fresh->key = NULL;
        if (c->ttl_ms)
            atomic_fetch_add_explicit(&c->privates, 1, memory_order_relaxed);
        return fresh;
    }
    return insert(c, s, fresh, now, gen);
}

/* get_slow() for a busy shard (or a cache that keeps nothing) and for a
 * miss: with few enough arguments to go in registers, so that
 * cache_get_at() reaches them with a jump and saves no register on a hit.
 * The hash is computed again: a miss builds an entry. */
static __attribute__((noinline)) struct cache_entry *
get_busy(struct cache *c, const char *key, size_t key_len, uint64_t now, int *err)
{
    uint64_t h = hash_key(c->seed, key, key_len);
    return get_slow(c, shard_of(c, h), h, key, key_len, now, NULL, true, err);
}

static __attribute__((noinline)) struct cache_entry *get_miss(struct cache *c, const char *key,
                                                              size_t key_len, uint64_t now,
                                                              struct cache_entry *stale, int *err)
{
    uint64_t h = hash_key(c->seed, key, key_len);
    return get_slow(c, shard_of(c, h), h, key, key_len, now, stale, false, err);
}

struct cache_entry *cache_get_at(struct cache *c, const char *key, size_t key_len, uint64_t now,
                                 int *err)
{
    uint64_t h = hash_key(c->seed, key, key_len);
    struct shard *s = shard_of(c, h);

    /* the first try (of 8, see get_slow) */
    if (unlikely(!c->ttl_ms) || unlikely(!rd_trylock(s)))
        return get_busy(c, key, key_len, now, err);
    struct cache_entry *e = find_ref(s, h, key, key_len);
    rd_unlock(s);
    if (likely(e && now < e->expires_ms))
        return e;
    return get_miss(c, key, key_len, now, e, err);
}

struct cache_entry *cache_get(struct cache *c, const char *key, size_t key_len, int *err)
{
    return cache_get_at(c, key, key_len, now_ms(c), err);
}

/* Which entries to remove: one key, every key beginning with a prefix, or
 * every entry expired at now. */
struct sel {
    enum { SEL_KEY, SEL_PREFIX, SEL_EXPIRED } kind;
    const char *key;
    size_t len;
    uint64_t h; /* SEL_KEY */
    uint64_t now;
};

static bool selected(const struct cache_entry *e, const struct sel *m)
{
    switch (m->kind) {
    case SEL_KEY:
        return e->hash == m->h && e->key_len == m->len && !memcmp(e->key, m->key, m->len);
    case SEL_PREFIX:
        return e->key_len >= m->len && !memcmp(e->key, m->key, m->len);
    default:
        return m->now >= e->expires_ms;
    }
}

/* Unlinks the entries of s that m selects onto *dead; returns how many.
 * Called with s locked exclusively. */
static size_t unlink_selected(struct shard *s, const struct sel *m, struct cache_entry **dead)
{
    size_t n = 0;
    uint32_t b = m->kind == SEL_KEY ? (uint32_t)(m->h & s->mask) : 0;
    uint32_t last = m->kind == SEL_KEY ? b : s->mask;
    for (; b <= last; b++) {
        struct cache_entry **pp = &s->buckets[b];
        while (*pp) {
            struct cache_entry *e = *pp;
            if (!selected(e, m)) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            e->next = *dead;
            *dead = e;
            n++;
        }
    }
    s->n -= (uint32_t)n;
    return n;
}

/* Gives back the table's references to n unlinked entries: after the
 * shard's lock is released, as destroying may be slow (munmap, close). */
static void put_unlinked(struct cache *c, struct cache_entry *dead, size_t n)
{
    atomic_fetch_sub_explicit(&c->entries, (uint32_t)n, memory_order_relaxed);
    while (dead) {
        struct cache_entry *next = dead->next;
        cache_put(c, dead);
        dead = next;
    }
}

static void invalidate(struct cache *c, const char *key, size_t len, bool prefix)
{
    atomic_fetch_add(&c->gen, 1); /* first: see insert() */
    struct sel m = {.kind = prefix ? SEL_PREFIX : SEL_KEY, .key = key, .len = len};
    if (!prefix)
        m.h = hash_key(c->seed, key, len);
    struct cache_entry *dead = NULL;
    size_t n = 0;
    for (unsigned i = 0; i < N_SHARDS; i++) {
        struct shard *s = &c->shards[i];
        if (!prefix && s != shard_of(c, m.h))
            continue;
        wr_lock(s);
        n += unlink_selected(s, &m, &dead);
        wr_unlock(s);
    }
    put_unlinked(c, dead, n);
    atomic_fetch_add_explicit(&c->invalidated, n, memory_order_relaxed);
}

void cache_invalidate(struct cache *c, const char *key, size_t key_len)
{
    invalidate(c, key, key_len, false);
}

void cache_invalidate_prefix(struct cache *c, const char *prefix, size_t len)
{
    invalidate(c, prefix, len, true);
}

static bool any_expired(const struct shard *s, uint64_t now)
{
    for (uint32_t b = 0; b <= s->mask; b++)
        for (const struct cache_entry *e = s->buckets[b]; e; e = e->next)
            if (now >= e->expires_ms)
                return true;
    return false;
}

/* Removes the expired entries of one shard. The pruning thread passes
 * wait = false and only ever tries the locks: at idle priority, a writer
 * that waited would spin behind every worker, and once holding the lock it
 * may lose the CPU for long; only the try keeps that rare. A
 * first look under the shared lock keeps the exclusive one for shards that
 * have something to remove. */
static size_t prune_shard(struct cache *c, struct shard *s, uint64_t now, bool wait)
{
    if (wait)
        rd_lock(s);
    else if (!rd_trylock(s))
        return 0;
    bool any = any_expired(s, now);
    rd_unlock(s);
    if (!any)
        return 0;
    if (wait)
        wr_lock(s);
    else if (!wr_trylock(s))
        return 0;
    struct cache_entry *dead = NULL;
    size_t n = unlink_selected(s, &(struct sel){.kind = SEL_EXPIRED, .now = now}, &dead);
    wr_unlock(s);
    put_unlinked(c, dead, n);
    atomic_fetch_add_explicit(&c->pruned, n, memory_order_relaxed);
    return n;
}

static size_t prune(struct cache *c, bool wait)
{
    size_t n = 0;
    uint64_t now = now_ms(c);
    for (unsigned i = 0; i < N_SHARDS; i++)
        n += prune_shard(c, &c->shards[i], now, wait);
    return n;
}

size_t cache_prune(struct cache *c)
{
    return prune(c, true);
}

void cache_get_stats(struct cache *c, struct cache_stats *out)
{
    *out = (struct cache_stats){
        .misses = atomic_load(&c->misses),
        .privates = atomic_load(&c->privates),
        .pruned = atomic_load(&c->pruned),
        .invalidated = atomic_load(&c->invalidated),
        .entries = atomic_load(&c->entries),
    };
}

/* --- the pruning thread --------------------------------------------------- */

static void lower_priority(void)
{
    struct sched_param sp = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &sp) < 0)
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
}

static void *pruner_main(void *arg)
{
    struct cache *c = arg;
    lower_priority();
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        bool empty = atomic_load(&c->entries) == 0;
        if (empty) {
            atomic_store(&c->sleeping, true);
            /* an insert between the check and the wait signals under mu */
            if (atomic_load(&c->entries) == 0)
                pthread_cond_wait(&c->cond, &c->mu);
            atomic_store(&c->sleeping, false);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)c->prune_every_ms * 1000000;
            ts.tv_sec += (time_t)(ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&c->cond, &c->mu, &ts);
        }
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        prune(c, false); /* a busy shard waits for the next round */
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int start_thread(struct cache *c)
{
    pthread_condattr_t ca;
    int r = pthread_condattr_init(&ca);
    if (r)
        return -r;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    r = pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (r)
        return -r;
    pthread_mutex_init(&c->mu, NULL);

    /* signals belong to the server's threads, not to this one */
    r = thread_start_helper(&c->thread, pruner_main, c);
    if (r) {
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
        return -r;
    }
    c->has_thread = true;
    return 0;
}

struct cache *cache_new(const struct cache_ops *ops, void *ctx, const struct cache_params *p)
{
    struct cache *c = aligned_alloc(CACHE_LINE_BYTES, sizeof(*c));
    if (!c)
        return NULL;
    memset(c, 0, sizeof(*c));
    c->ops = ops;
    c->ctx = ctx;
    c->ttl_ms = p->ttl_ms;
    c->max_entries = p->max_entries ? p->max_entries : DEFAULT_MAX;
    c->prune_every_ms = MAX(PRUNE_MIN_MS, MIN(PRUNE_MAX_MS, c->ttl_ms / 2));
    if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != sizeof(c->seed))
        c->seed = (uint64_t)(uintptr_t)c ^ mono_ms();

    unsigned i;
    for (i = 0; i < N_SHARDS; i++) {
        struct shard *s = &c->shards[i];
        s->buckets = calloc(INITIAL_BUCKETS, sizeof(*s->buckets));
        if (!s->buckets)
            goto out_free_shards;
        s->mask = INITIAL_BUCKETS - 1;
    }
    if (c->ttl_ms && !p->no_thread && start_thread(c) < 0)
        goto out_free_shards;
    return c;

out_free_shards:
    while (i-- > 0)
        free(c->shards[i].buckets);
    free(c);
    return NULL;
}

void cache_free(struct cache *c)
{
    if (!c)
        return;
    if (c->has_thread) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
    }
    for (unsigned i = 0; i < N_SHARDS; i++) {
        struct shard *s = &c->shards[i];
        for (uint32_t b = 0; b <= s->mask; b++) {
            struct cache_entry *e = s->buckets[b], *next;
            for (; e; e = next) {
                next = e->next;
                cache_put(c, e);
            }
        }
        free(s->buckets);
    }
    free(c);
}
