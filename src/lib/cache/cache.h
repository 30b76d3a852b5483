/* cache.h - a generic time-to-live cache: ask for a key, get an entry.
 *
 * The user embeds struct cache_entry at the start of its own entries and
 * gives two callbacks: create (called on a miss, outside every lock) and
 * destroy (called when the last reference goes, on whichever thread drops
 * it: a worker, the pruning thread, or cache_free()).
 *
 * Every entry handed out by cache_get() carries one reference for the
 * caller, who gives it back with cache_put(). An entry lives in the table
 * for ttl_ms after its creation; then the next cache_get() for its key
 * builds a new one (handing the expired one to create, so that unchanged
 * parts can be shared), and a low-priority thread removes expired entries
 * nobody asks for.
 *
 * An entry can also be dropped before its time (cache_invalidate*), when
 * its owner learns that what it was built from changed: the next
 * cache_get() for its key builds a new one without a stale entry to share
 * from, and an entry whose building overlapped an invalidation is handed
 * to its caller but not kept (see cache_invalidate).
 *
 * Threads: cache_get() and cache_put() may be called from any number of
 * threads at once. They never wait for a lock: when a shard is busy the
 * caller gets a private entry that is built for it alone and destroyed at
 * its cache_put(). cache_new() and cache_free() belong to one thread, and
 * cache_free() requires every entry to have been put back.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cache;

struct cache_entry {
    struct cache_entry *next; /* hash chain: the cache's */
    char *key;                /* the cache's copy; NULL for a private entry */
    size_t key_len;
    uint64_t hash;
    uint64_t expires_ms; /* on the cache's clock */
    _Atomic uint32_t refs;
};

struct cache_ops {
    /* Builds the entry for key (the bytes given to cache_get). stale is the
     * expired entry for the same key, or NULL: it stays the cache's, so
     * create takes its own references to whatever it shares with it.
     * Returns NULL and sets *err to -errno on failure; the error reaches
     * the caller of cache_get(). */
    struct cache_entry *(*create)(void *ctx, const char *key, size_t key_len,
                                  const struct cache_entry *stale, int *err);
    void (*destroy)(void *ctx, struct cache_entry *e);
    /* The clock in milliseconds; NULL means CLOCK_MONOTONIC_COARSE (no
     * system call). Tests pass their own. */
    uint64_t (*now_ms)(void *ctx);
};

struct cache_params {
    uint32_t ttl_ms;      /* 0: nothing is kept, every entry is private */
    uint32_t max_entries; /* beyond this, misses get private entries; 0: 65536 */
    bool no_thread;       /* no pruning thread (tests prune by hand) */
};

struct cache_stats {
    uint64_t misses;      /* create calls */
    uint64_t privates;    /* entries handed out without being kept */
    uint64_t pruned;      /* expired entries removed by cache_prune */
    uint64_t invalidated; /* entries removed by cache_invalidate* */
    uint32_t entries;     /* in the table now */
};

/* NULL on failure (out of memory, or the thread could not start). ops and
 * ctx must outlive the cache. */
struct cache *cache_new(const struct cache_ops *ops, void *ctx, const struct cache_params *p);
/* Stops and joins the pruning thread, then destroys every entry. */
void cache_free(struct cache *c);

/* The entry for key, with a reference for the caller; NULL with *err set
 * when create failed. */
struct cache_entry *cache_get(struct cache *c, const char *key, size_t key_len, int *err);
/* The same at now_ms on the cache's clock (ops->now_ms, else
 * CLOCK_MONOTONIC_COARSE in milliseconds), for a caller that has a recent
 * reading already: a lagging one only moves expiry by its lag. */
struct cache_entry *cache_get_at(struct cache *c, const char *key, size_t key_len, uint64_t now_ms,
                                 int *err);
/* Inline: a request puts back what it got; the last reference's destroy
 * is out of line. */
void cache_put_last(struct cache *c, struct cache_entry *e);
static inline void cache_put(struct cache *c, struct cache_entry *e)
{
    /* acq_rel rather than release + fence: same code on x86, and TSan
     * understands it */
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        cache_put_last(c, e);
}

/* Removes the expired entries now (what the pruning thread does); returns
 * how many. Waits for the shard locks: not for the hot path. */
size_t cache_prune(struct cache *c);
/* Removes the entry for key now, whichever its age; entries handed out
 * stay valid until put back. Any thread; waits for one shard's lock (held
 * by others for a few pointer moves), so not for a worker's hot path.
 *
 * An entry whose create() began before an invalidation (of any key) and
 * whose insertion comes after it is not kept: it may have been built from
 * what was just changed. So a cache_get() that begins after
 * cache_invalidate*() has returned is never handed an entry for a removed
 * key whose create() began before the call did. */
void cache_invalidate(struct cache *c, const char *key, size_t key_len);
/* The same for every key that begins with prefix (len 0: every entry). */
void cache_invalidate_prefix(struct cache *c, const char *prefix, size_t len);

/* Approximate, for tests and diagnostics. */
void cache_get_stats(struct cache *c, struct cache_stats *out);
