/* micro_cache.c - the cost of a cache hit (cache_get + cache_put), alone and
 * with threads hitting the same hot key, as serve_files does on every
 * request for a cached file.
 *
 *     build/micro_cache [iterations per thread]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"

struct item {
    struct cache_entry base;
    char pad[64];
};

static struct cache_entry *create(void *ctx, const char *key, size_t len,
                                  const struct cache_entry *stale, int *err)
{
    (void)ctx, (void)key, (void)len, (void)stale, (void)err;
    struct item *it = calloc(1, sizeof(*it));
    return it ? &it->base : NULL;
}

static void destroy(void *ctx, struct cache_entry *e)
{
    (void)ctx;
    free(e);
}

static const struct cache_ops ops = {.create = create, .destroy = destroy};

struct arg {
    struct cache *c;
    long n;
    const char *key;
    double ns;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *run(void *p)
{
    struct arg *a = p;
    size_t len = strlen(a->key);
    int err;
    double t0 = now_ns();
    for (long i = 0; i < a->n; i++) {
        struct cache_entry *e = cache_get(a->c, a->key, len, &err);
        cache_put(a->c, e);
    }
    a->ns = (now_ns() - t0) / (double)a->n;
    return NULL;
}

static void bench(struct cache *c, unsigned threads, long n, bool same_key)
{
    pthread_t th[8];
    struct arg args[8];
    static const char *keys[8] = {"static/css/site.css",
                                  "index.html",
                                  "img/logo.png",
                                  "a.js",
                                  "b.js",
                                  "c.js",
                                  "d.js",
                                  "e.js"};
    for (unsigned i = 0; i < threads; i++) {
        args[i] = (struct arg){.c = c, .n = n, .key = same_key ? keys[0] : keys[i]};
        pthread_create(&th[i], NULL, run, &args[i]);
    }
    double sum = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += args[i].ns;
    }
    struct cache_stats st;
    cache_get_stats(c, &st);
    printf("%u thread(s), %s key: %.1f ns per get+put (misses %llu, private %llu)\n", threads,
           same_key ? "same" : "own", sum / threads, (unsigned long long)st.misses,
           (unsigned long long)st.privates);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    struct cache *c = cache_new(&ops, NULL, &(struct cache_params){.ttl_ms = 3600 * 1000});
    if (!c)
        return 1;
    bench(c, 1, n, true);
    bench(c, 2, n, true);
    bench(c, 2, n, false);
    cache_free(c);
    return 0;
}
