#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "cache/cache.h"

#define MAGIC_LIVE 0x11fe
#define MAGIC_DEAD 0xdead

struct item {
    struct cache_entry base;
    int magic;
    char name[32];
    unsigned generation; /* 1 + the stale entry's generation */
};

struct env {
    _Atomic uint64_t clock;
    _Atomic long created, destroyed;
    _Atomic long stale_seen;
    _Atomic long bad; /* callbacks saw a dead entry (checked by the main thread) */
    bool fail;
    struct cache *self;   /* for create() to call cache_invalidate (race test) */
    const char *race_key; /* create() of this key invalidates race_with */
    const char *race_with;
};

static struct cache_entry *item_create(void *ctx, const char *key, size_t len,
                                       const struct cache_entry *stale, int *err)
{
    struct env *env = ctx;
    if (env->fail || (len == 4 && !memcmp(key, "fail", 4))) {
        *err = -ENOENT;
        return NULL;
    }
    if (env->race_key && len == strlen(env->race_key) && !memcmp(key, env->race_key, len))
        cache_invalidate(env->self, env->race_with, strlen(env->race_with));
    struct item *it = calloc(1, sizeof(*it));
    if (!it)
        return NULL;
    it->magic = MAGIC_LIVE;
    memcpy(it->name, key, MIN(len, sizeof(it->name) - 1));
    if (stale) {
        const struct item *old = (const struct item *)stale;
        if (old->magic != MAGIC_LIVE)
            atomic_fetch_add(&env->bad, 1);
        it->generation = old->generation + 1;
        atomic_fetch_add(&env->stale_seen, 1);
    }
    atomic_fetch_add(&env->created, 1);
    return &it->base;
}

static void item_destroy(void *ctx, struct cache_entry *e)
{
    struct env *env = ctx;
    struct item *it = (struct item *)e;
    if (it->magic != MAGIC_LIVE)
        atomic_fetch_add(&env->bad, 1);
    it->magic = MAGIC_DEAD;
    atomic_fetch_add(&env->destroyed, 1);
    free(it);
}

static uint64_t fake_now(void *ctx)
{
    return atomic_load(&((struct env *)ctx)->clock);
}

static const struct cache_ops fake_ops = {
    .create = item_create,
    .destroy = item_destroy,
    .now_ms = fake_now,
};
static const struct cache_ops real_ops = {
    .create = item_create,
    .destroy = item_destroy,
};

static struct item *get(struct cache *c, const char *key)
{
    int err = 0;
    return (struct item *)cache_get(c, key, strlen(key), &err);
}

TEST(hit_after_miss)
{
    struct env env = {.clock = 1000};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100, .no_thread = true});
    CHECK(c != NULL);
    struct item *a = get(c, "a/b.txt");
    CHECK(a != NULL);
    CHECK_EQ_STR(a->name, "a/b.txt");
    struct item *a2 = get(c, "a/b.txt");
    CHECK(a2 == a);
    struct item *b = get(c, "a/b.tx");
    CHECK(b != a);
    CHECK_EQ_STR(b->name, "a/b.tx");
    CHECK_EQ_INT(atomic_load(&env.created), 2);
    cache_put(c, &a->base);
    cache_put(c, &a2->base);
    cache_put(c, &b->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 0); /* the table still holds them */
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.misses, 2);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 2);
}

TEST(expiry_rebuilds_with_stale)
{
    struct env env = {.clock = 1000};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100, .no_thread = true});
    struct item *a = get(c, "k");
    CHECK_EQ_INT(a->generation, 0);
    env.clock = 1099;
    struct item *same = get(c, "k");
    CHECK(same == a);
    cache_put(c, &same->base);
    env.clock = 1100; /* lives exactly ttl_ms */
    struct item *next = get(c, "k");
    CHECK(next != a);
    CHECK_EQ_INT(next->generation, 1);
    CHECK_EQ_INT(atomic_load(&env.stale_seen), 1);
    /* the old one is out of the table but still ours */
    CHECK_EQ_INT(a->magic, MAGIC_LIVE);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 0);
    cache_put(c, &a->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 1);
    struct item *again = get(c, "k");
    CHECK(again == next);
    cache_put(c, &again->base);
    cache_put(c, &next->base);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 2);
}

/* cache_get_at() goes by the caller's clock, not ops->now_ms: an entry
 * built at 5000 by the caller's clock lives until 5100 by it, whatever the
 * cache's own clock says; misses and insertions take that time too. */
TEST(get_at_uses_the_callers_clock)
{
    struct env env = {.clock = 1000000}; /* far from the caller's clock */
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100, .no_thread = true});
    int err = 0;
    struct item *a = (struct item *)cache_get_at(c, "k", 1, 5000, &err);
    CHECK(a != NULL);
    CHECK_EQ_INT(a->base.expires_ms, 5100);
    struct item *same = (struct item *)cache_get_at(c, "k", 1, 5099, &err);
    CHECK(same == a);
    cache_put(c, &same->base);
    struct item *next = (struct item *)cache_get_at(c, "k", 1, 5100, &err);
    CHECK(next != a);
    CHECK_EQ_INT(next->generation, 1); /* built from the expired one */
    CHECK_EQ_INT(next->base.expires_ms, 5200);
    /* cache_get() reads the cache's clock: 1000000 is past 5200 */
    struct item *own = get(c, "k");
    CHECK(own != next);
    CHECK_EQ_INT(own->generation, 2);
    CHECK_EQ_INT(atomic_load(&env.created), 3);
    cache_put(c, &a->base);
    cache_put(c, &next->base);
    cache_put(c, &own->base);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 3);
}

TEST(prune_removes_only_expired)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 50, .no_thread = true});
    cache_put(c, &get(c, "old1")->base);
    cache_put(c, &get(c, "old2")->base);
    struct item *held = get(c, "old3");
    env.clock = 30;
    cache_put(c, &get(c, "young")->base);
    env.clock = 60;
    CHECK_EQ_INT(cache_prune(c), 3);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 2); /* old3 is still held */
    CHECK_EQ_INT(held->magic, MAGIC_LIVE);
    cache_put(c, &held->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 3);
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 1);
    CHECK_EQ_INT(st.pruned, 3);
    /* the pruned key is built anew, without a stale entry */
    struct item *o = get(c, "old1");
    CHECK_EQ_INT(o->generation, 0);
    cache_put(c, &o->base);
    CHECK_EQ_INT(cache_prune(c), 0);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

TEST(ttl_zero_gives_private_entries)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 0, .no_thread = true});
    struct item *a = get(c, "x"), *b = get(c, "x");
    CHECK(a && b && a != b);
    cache_put(c, &a->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 1);
    cache_put(c, &b->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 2);
    cache_free(c);
}

TEST(max_entries_overflow_is_private)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env,
                  &(struct cache_params){.ttl_ms = 1000, .max_entries = 2, .no_thread = true});
    cache_put(c, &get(c, "a")->base);
    cache_put(c, &get(c, "b")->base);
    struct item *x = get(c, "c");
    cache_put(c, &x->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 1); /* not kept */
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.privates, 1);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 3);
}

TEST(create_error_reaches_caller)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 1000, .no_thread = true});
    int err = 0;
    CHECK(cache_get(c, "fail", 4, &err) == NULL);
    CHECK_EQ_INT(err, -ENOENT);
    /* a failed rebuild keeps nothing and leaks nothing */
    cache_put(c, &get(c, "k")->base);
    env.clock = 5000;
    env.fail = true;
    err = 0;
    CHECK(cache_get(c, "k", 1, &err) == NULL);
    CHECK_EQ_INT(err, -ENOENT);
    env.fail = false;
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

TEST(keys_with_any_bytes)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 1000, .no_thread = true});
    int err;
    /* same prefix, lengths around the 8-byte hashing step, embedded NULs */
    const char k1[] = "abcdefgh", k2[] = "abcdefgh\0", k3[] = "abcdefg";
    struct cache_entry *a = cache_get(c, k1, 8, &err), *b = cache_get(c, k2, 9, &err),
                       *d = cache_get(c, k3, 7, &err), *e = cache_get(c, "", 0, &err);
    CHECK(a != b && a != d && b != d && e && e != a);
    struct cache_entry *a2 = cache_get(c, k1, 8, &err), *b2 = cache_get(c, k2, 9, &err);
    CHECK(a2 == a && b2 == b);
    struct cache_entry *all[] = {a, b, d, e, a2, b2};
    for (size_t i = 0; i < N_ELEMENTS(all); i++)
        cache_put(c, all[i]);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), 4);
}

TEST(many_keys_grow_table)
{
    struct env env = {.clock = 0};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 1000, .no_thread = true});
    char key[32];
    struct item *first[2000];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "dir/file-%d.html", i);
        first[i] = get(c, key);
    }
    int same = 0;
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "dir/file-%d.html", i);
        struct item *it = get(c, key);
        same += it == first[i] && !strcmp(it->name, key);
        cache_put(c, &it->base);
        cache_put(c, &first[i]->base);
    }
    CHECK_EQ_INT(same, 2000);
    CHECK_EQ_INT(atomic_load(&env.created), 2000);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 2000);
}

/* --- many threads ---------------------------------------------------------- */

#define N_THREADS 8
#define N_KEYS    24
#define N_ROUNDS  20000

struct worker_arg {
    struct cache *c;
    struct env *env;
    unsigned seed;
    bool tick; /* this thread moves the fake clock */
    long bad;
};

static void *hammer(void *p)
{
    struct worker_arg *a = p;
    char key[16];
    struct item *held[4] = {0};
    for (int i = 0; i < N_ROUNDS; i++) {
        int k = (int)(rand_r(&a->seed) % N_KEYS);
        snprintf(key, sizeof(key), "key%d", k);
        int err = 0;
        struct item *it = (struct item *)cache_get(a->c, key, strlen(key), &err);
        if (!it || it->magic != MAGIC_LIVE || strcmp(it->name, key))
            a->bad++;
        /* keep a few references across other gets, as a slow send would */
        unsigned slot = (unsigned)i % N_ELEMENTS(held);
        if (held[slot]) {
            if (held[slot]->magic != MAGIC_LIVE)
                a->bad++;
            cache_put(a->c, &held[slot]->base);
        }
        held[slot] = it;
        if (a->tick && i % 64 == 0)
            atomic_fetch_add(&a->env->clock, 1);
        if (a->tick && i % 1000 == 0)
            cache_prune(a->c);
    }
    for (size_t i = 0; i < N_ELEMENTS(held); i++)
        if (held[i])
            cache_put(a->c, &held[i]->base);
    return NULL;
}

static void run_threads(struct cache *c, struct env *env, bool fake)
{
    pthread_t th[N_THREADS];
    struct worker_arg args[N_THREADS];
    for (unsigned i = 0; i < N_THREADS; i++) {
        args[i] = (struct worker_arg){.c = c, .env = env, .seed = i * 7919 + 1, .tick = fake && !i};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    long bad = 0;
    for (unsigned i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(atomic_load(&env->bad), 0);
}

TEST(threads_fake_clock)
{
    struct env env = {.clock = 0};
    struct cache *c = cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 20});
    CHECK(c != NULL);
    run_threads(c, &env, true);
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK(st.entries <= N_KEYS);
    /* the clock moved N_ROUNDS / 64 ms: every key expired many times */
    CHECK(atomic_load(&env.stale_seen) > N_KEYS);
    CHECK(atomic_load(&env.created) < (long)N_THREADS * N_ROUNDS / 4);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

TEST(threads_real_clock_with_pruner)
{
    struct env env = {0};
    struct cache *c = cache_new(&real_ops, &env, &(struct cache_params){.ttl_ms = 5});
    CHECK(c != NULL);
    run_threads(c, &env, false);
    /* the pruner empties the table once nothing asks for it (bounded wait) */
    struct cache_stats st;
    for (int i = 0; i < 200; i++) {
        cache_get_stats(c, &st);
        if (!st.entries)
            break;
        usleep(10 * 1000);
    }
    CHECK_EQ_INT(st.entries, 0);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
    /* and takes up new work after sleeping on an empty table */
    cache_put(c, &get(c, "late")->base);
    for (int i = 0; i < 200; i++) {
        cache_get_stats(c, &st);
        if (!st.entries)
            break;
        usleep(10 * 1000);
    }
    CHECK_EQ_INT(st.entries, 0);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

TEST(free_with_thread_right_away)
{
    struct env env = {0};
    for (int i = 0; i < 20; i++) {
        struct cache *c = cache_new(&real_ops, &env, &(struct cache_params){.ttl_ms = 5000});
        CHECK(c != NULL);
        if (i % 2)
            cache_put(c, &get(c, "x")->base);
        cache_free(c);
    }
    CHECK_EQ_INT(atomic_load(&env.created), 10);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 10);
}

TEST(invalidate_exact)
{
    struct env env = {.clock = 1000};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100000, .no_thread = true});
    struct item *a = get(c, "d/a"), *b = get(c, "d/ab");
    cache_invalidate(c, "d/a", 3);
    CHECK_EQ_INT(a->magic, MAGIC_LIVE); /* still held */
    CHECK_EQ_INT(atomic_load(&env.destroyed), 0);
    cache_put(c, &a->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 1);
    struct item *a2 = get(c, "d/a"), *b2 = get(c, "d/ab");
    CHECK(b2 == b);                  /* a longer key is not touched */
    CHECK_EQ_INT(a2->generation, 0); /* rebuilt without a stale entry */
    CHECK_EQ_INT(atomic_load(&env.created), 3);
    cache_invalidate(c, "nothing", 7); /* absent: no effect */
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.invalidated, 1);
    cache_put(c, &a2->base);
    cache_put(c, &b->base);
    cache_put(c, &b2->base);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

TEST(invalidate_prefix_and_all)
{
    struct env env = {.clock = 1000};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100000, .no_thread = true});
    const char *keys[] = {"d/", "d/a", "d/e/f", "d", "dx/a", "x"};
    for (size_t i = 0; i < N_ELEMENTS(keys); i++)
        cache_put(c, &get(c, keys[i])->base);
    cache_invalidate_prefix(c, "d/", 2);
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 3); /* "d", "dx/a", "x" stay */
    CHECK_EQ_INT(st.invalidated, 3);
    long created = atomic_load(&env.created);
    cache_put(c, &get(c, "dx/a")->base);
    cache_put(c, &get(c, "d")->base);
    CHECK_EQ_INT(atomic_load(&env.created), created);
    cache_put(c, &get(c, "d/a")->base);
    CHECK_EQ_INT(atomic_load(&env.created), created + 1);
    cache_invalidate_prefix(c, "", 0);
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 0);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
    cache_free(c);
}

/* An entry whose building overlaps an invalidation is handed out, not kept. */
TEST(invalidate_during_create_is_not_kept)
{
    struct env env = {.clock = 1000, .race_key = "slow", .race_with = "other"};
    struct cache *c =
        cache_new(&fake_ops, &env, &(struct cache_params){.ttl_ms = 100000, .no_thread = true});
    env.self = c;
    struct item *a = get(c, "slow");
    CHECK(a != NULL);
    struct cache_stats st;
    cache_get_stats(c, &st);
    CHECK_EQ_INT(st.entries, 0);
    CHECK_EQ_INT(st.privates, 1);
    cache_put(c, &a->base);
    CHECK_EQ_INT(atomic_load(&env.destroyed), 1);
    env.race_key = NULL;
    struct item *b = get(c, "slow"), *b2 = get(c, "slow");
    CHECK(b == b2); /* kept once nothing overlaps */
    cache_put(c, &b->base);
    cache_put(c, &b2->base);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

static _Atomic bool stop_invalidating;

static void *invalidator(void *p)
{
    struct cache *c = p;
    char key[16];
    for (unsigned i = 0; !atomic_load(&stop_invalidating); i++) {
        if (i % 16 == 0) {
            cache_invalidate_prefix(c, "key1", 4);
        } else {
            snprintf(key, sizeof(key), "key%u", i % N_KEYS);
            cache_invalidate(c, key, strlen(key));
        }
    }
    return NULL;
}

TEST(threads_with_invalidator)
{
    struct env env = {0};
    struct cache *c = cache_new(&real_ops, &env, &(struct cache_params){.ttl_ms = 100000});
    pthread_t inv;
    atomic_store(&stop_invalidating, false);
    CHECK_EQ_INT(pthread_create(&inv, NULL, invalidator, c), 0);
    /* the invalidator may get no CPU while the hammers run (2 loaded
     * cores): run them again until it has removed something, a bounded
     * number of times */
    struct cache_stats st;
    for (int round = 0; round < 20; round++) {
        run_threads(c, &env, false);
        cache_get_stats(c, &st);
        if (st.invalidated > 0)
            break;
    }
    atomic_store(&stop_invalidating, true);
    pthread_join(inv, NULL);
    CHECK(st.invalidated > 0);
    cache_free(c);
    CHECK_EQ_INT(atomic_load(&env.created), atomic_load(&env.destroyed));
}

int main(void)
{
    RUN(hit_after_miss);
    RUN(invalidate_exact);
    RUN(invalidate_prefix_and_all);
    RUN(invalidate_during_create_is_not_kept);
    RUN(threads_with_invalidator);
    RUN(expiry_rebuilds_with_stale);
    RUN(get_at_uses_the_callers_clock);
    RUN(prune_removes_only_expired);
    RUN(ttl_zero_gives_private_entries);
    RUN(max_entries_overflow_is_private);
    RUN(create_error_reaches_caller);
    RUN(keys_with_any_bytes);
    RUN(many_keys_grow_table);
    RUN(threads_fake_clock);
    RUN(threads_real_clock_with_pruner);
    RUN(free_with_thread_right_away);
    return test_summary();
}
