/* stats.c - serve_files' cache counted for the metrics: hits, misses, and
 * the bytes it holds in memory.
 *
 * A miss builds an entry (entry_create, off the hot path): counted there
 * with an atomic add. A hit costs nothing extra while metrics are off:
 * every request that gets an entry defers files_release, a function
 * pointer read where the address of release() was loaded before (the same
 * instruction count), which metrics turn into counted(): a plain increment
 * of the thread's own counter, summed at a scrape. Hits are then the
 * entries handed out less the misses. */
#include <pthread.h>
#include <stdlib.h>

#include "files/files.h"
#include "http/metrics.h"

struct served {
    _Atomic uint64_t n;
    struct served *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct served *all; /* every thread's, never freed (they are counts) */
static __thread struct served *mine;
static _Atomic uint64_t misses;
_Atomic uint64_t files_cache_bytes;

void (*_Atomic files_release)(void *e) = files_release_entry;

static __attribute__((noinline)) struct served *join(void)
{
    struct served *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    pthread_mutex_lock(&lock);
    s->next = all;
    all = s;
    pthread_mutex_unlock(&lock);
    return mine = s;
}

static void counted(void *e)
{
    struct served *s = mine;
    if (s || (s = join()))
        http_metrics_bump(&s->n, 1);
    files_release_entry(e);
}

void files_count_miss(void)
{
    if (atomic_load_explicit(&http_metrics_on, memory_order_relaxed))
        atomic_fetch_add_explicit(&misses, 1, memory_order_relaxed);
}

static void on(void)
{
    atomic_store_explicit(&files_release, counted, memory_order_relaxed);
}

static int render(struct strbuf *out)
{
    uint64_t served = 0;
    pthread_mutex_lock(&lock);
    for (const struct served *s = all; s; s = s->next)
        served += atomic_load_explicit(&s->n, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    uint64_t miss = atomic_load_explicit(&misses, memory_order_relaxed);
    /* a miss is counted when its entry is built, its use when it is
     * released: a request at work may have the one and not yet the other */
    uint64_t hits = served > miss ? served - miss : 0;
    uint64_t held = atomic_load_explicit(&files_cache_bytes, memory_order_relaxed);
    return http_metrics_one(out, "colibri_files_cache_hits_total", "counter",
                            "serve_files lookups answered from the cache.", hits) |
           http_metrics_one(out, "colibri_files_cache_misses_total", "counter",
                            "serve_files lookups that opened the file (or directory) anew.", miss) |
           http_metrics_one(out, "colibri_files_cache_bytes", "gauge",
                            "Bytes of files serve_files holds in memory (bodies, their "
                            "compressed forms, listings).",
                            held);
}

void files_stats_register(void)
{
    http_metrics_source(render, on);
}
