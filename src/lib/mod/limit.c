/* limit.c - the limit module: request rates per key, a filter of the
 * access phase.
 *
 *     limit /api {
 *         rate = 10/s      # per key: N/s, N/m or N/h
 *         burst = 20       # requests allowed at once above the rate [0]
 *         key = client     # the client address (the PROXY header's when on),
 *     }                    # or header:NAME (its value; absent: one key for all)
 *
 * GCRA, the token bucket kept as one time per key: a key's "theoretical
 * arrival time" moves T = 1/rate ahead with every request let in; a
 * request that finds it more than burst * T ahead of now gets 429 with
 * Retry-After (the seconds until it would pass). One table per section
 * holds every worker's keys: SLOTS entries in sets of WAYS, each set
 * under a spinlock, so the rate holds across all workers together. The
 * table never grows: a new key takes the entry of its set whose time is
 * the earliest (an idle key's, which loses nothing: its bucket is full),
 * so a flood of distinct keys costs no memory; under such a flood a busy
 * key may lose its entry and start again with a full bucket. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "http/request.h"
#include "mod/cidr.h"
#include "rt/conn.h"
#include "server/builtin.h"

#define SLOTS 16384u
#define WAYS  4u
#define SETS  (SLOTS / WAYS)

struct entry {
    uint64_t key; /* 0: empty */
    uint64_t tat; /* ns on CLOCK_MONOTONIC */
};

struct set {
    pthread_spinlock_t lock;
    struct entry e[WAYS];
};

struct limit {
    uint64_t t_ns;   /* 1/rate */
    uint64_t tau_ns; /* burst * t_ns */
    char *header;    /* key = header:NAME; NULL: the client */
    uint64_t seed[2];
    struct set sets[SETS];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A keyed 64-bit hash of the key's bytes (never 0: 0 marks an empty
 * entry). Keyed with a secret seed, so a client cannot aim its keys at
 * one set. */
static uint64_t hash(const struct limit *l, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = l->seed[0] ^ (n * 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    h ^= l->seed[1];
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h ? h : 1;
}

static int check(struct colibri_request *req, struct colibri_response *resp, void *data)
{
    struct limit *l = data;
    uint64_t key;
    if (l->header) {
        struct colibri_str v = {"", 0};
        colibri_req_header(req, l->header, &v);
        key = hash(l, v.p, v.len);
    } else {
        const struct conn_peer *peer = conn_peer_of(req->ctx);
        uint8_t a[16] = {0};
        cidr_addr(peer->family, peer->addr, a);
        key = hash(l, a, sizeof(a));
    }
    struct set *s = &l->sets[(key >> 32) % SETS];
    uint64_t now = now_ns(), wait = 0;
    pthread_spin_lock(&s->lock);
    struct entry *e = NULL, *oldest = &s->e[0];
    for (unsigned i = 0; i < WAYS && !e; i++) {
        if (s->e[i].key == key)
            e = &s->e[i];
        else if (s->e[i].tat < oldest->tat)
            oldest = &s->e[i];
    }
    if (!e) { /* a new key: the set's idlest entry */
        e = oldest;
        e->key = key;
        e->tat = now;
    }
    uint64_t tat = e->tat > now ? e->tat : now;
    if (tat - now > l->tau_ns)
        wait = tat - now - l->tau_ns;
    else
        e->tat = tat + l->t_ns;
    pthread_spin_unlock(&s->lock);
    if (!wait)
        return 0;
    char v[24];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)((wait + 999999999u) / 1000000000u));
    colibri_resp_header(resp, "Retry-After", v);
    return 429;
}

static void limit_free(void *p)
{
    struct limit *l = p;
    for (unsigned i = 0; i < SETS; i++)
        pthread_spin_destroy(&l->sets[i].lock);
    free(l->header);
    free(l);
}

static const struct colibri_filter limit_filter = {
    .name = "limit",
    .phase = COLIBRI_PHASE_ACCESS,
    .fn = check,
};

/* "N/s", "N/m", "N/h" into ns between requests. */
static int parse_rate(struct colibri_conf *k, uint64_t *t_ns, char *err, size_t errlen)
{
    const char *v = colibri_conf_value(k);
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    uint64_t per = end[0] == '/' && !end[2] ? (end[1] == 's'   ? 1000000000ull
                                               : end[1] == 'm' ? 60000000000ull
                                               : end[1] == 'h' ? 3600000000000ull
                                                               : 0)
                                            : 0;
    if (v[0] < '1' || v[0] > '9' || !per || n > 1000000000ul)
        return colibri_conf_error(
            k, err, errlen, "'%s' is not a rate (N/s, N/m or N/h, N from 1 to 1000000000)", v);
    *t_ns = per / n;
    return 0;
}

static int from_config(struct colibri_server *srv, struct colibri_conf *sec, char *err,
                       size_t errlen)
{
    const char *prefix = colibri_conf_value(sec);
    if (prefix[0] != '/' || strchr(prefix, ' '))
        return colibri_conf_error(
            sec, err, errlen, "expected 'limit PREFIX { rate = N/s  burst = N  key = client }'");
    struct colibri_conf *rate = colibri_conf_take(sec, "rate"),
                        *burst = colibri_conf_take(sec, "burst"),
                        *key = colibri_conf_take(sec, "key");
    if (!rate)
        return colibri_conf_error(sec, err, errlen, "needs 'rate = N/s' (or N/m, N/h)");
    uint64_t t_ns = 0;
    long b = 0;
    int r = parse_rate(rate, &t_ns, err, errlen);
    if (!r && burst)
        r = colibri_conf_int(burst, 0, 1000000, &b, err, errlen);
    const char *kv = key ? colibri_conf_value(key) : "client";
    const char *header = NULL;
    if (!r && !strncmp(kv, "header:", 7) && kv[7])
        header = kv + 7;
    else if (!r && strcmp(kv, "client"))
        return colibri_conf_error(key, err, errlen, "'%s': expected client or header:NAME", kv);
    if (r)
        return r;
    struct limit *l = calloc(1, sizeof(*l));
    if (!l || (header && !(l->header = strdup(header))) ||
        getrandom(l->seed, sizeof(l->seed), 0) != sizeof(l->seed)) {
        if (l)
            free(l->header);
        free(l);
        return colibri_conf_error(sec, err, errlen, "out of memory");
    }
    for (unsigned i = 0; i < SETS; i++)
        pthread_spin_init(&l->sets[i].lock, PTHREAD_PROCESS_PRIVATE);
    l->t_ns = t_ns;
    l->tau_ns = (uint64_t)b * t_ns;
    char why[256];
    if (colibri_server_add_filter(srv, prefix, &limit_filter, l, limit_free, why, sizeof(why)))
        return colibri_conf_error(sec, err, errlen, "%s", why);
    return 0;
}

BUILTIN_MODULE(limit) = {.name = "limit", .from_config = from_config};
