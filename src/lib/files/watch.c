/* watch.c - inotify on the directories of cached entries (see watch.h).
 *
 * The watched directories are kept twice, in fixed hash tables: by key
 * ("" for the root, "a/b/" below it), for files_watch_ensure() on a miss,
 * and by watch descriptor, for the thread. One inode can be watched under
 * several keys (a directory reached through a link): the kernel gives them
 * one descriptor, and an event for it concerns every key. A mutex guards
 * both tables; it is taken on misses and by the thread, never on a hit. */
#include "files/watch.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "files/files.h"

#define BUCKETS 1024

#define WATCH_MASK                                                                                 \
    (IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |              \
     IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

struct wdir {
    struct wdir *knext; /* chain by key */
    struct wdir *wnext; /* chain by wd */
    int wd;
    size_t len;
    char key[]; /* NUL-terminated; "" or ending in '/' */
};

struct files_watch {
    int ifd, stop_fd;
    struct cache *cache;
    char *root;
    size_t root_len;
    pthread_t thread;
    pthread_mutex_t mu;
    unsigned n;
    struct wdir *by_key[BUCKETS];
    struct wdir *by_wd[BUCKETS];
};

static size_t hash(const char *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return (size_t)(h ^ h >> 32) & (BUCKETS - 1);
}

static struct wdir *find_key(struct files_watch *w, const char *key, size_t len)
{
    for (struct wdir *d = w->by_key[hash(key, len)]; d; d = d->knext)
        if (d->len == len && !memcmp(d->key, key, len))
            return d;
    return NULL;
}

static void unlink_dir(struct files_watch *w, struct wdir *d)
{
    struct wdir **pp = &w->by_key[hash(d->key, d->len)];
    while (*pp != d)
        pp = &(*pp)->knext;
    *pp = d->knext;
    pp = &w->by_wd[(unsigned)d->wd & (BUCKETS - 1)];
    while (*pp != d)
        pp = &(*pp)->wnext;
    *pp = d->wnext;
    w->n--;
    free(d);
}

/* Forgets every key watched with wd; rm: and removes the watch. */
static void drop_wd(struct files_watch *w, int wd, bool rm)
{
    struct wdir *d = w->by_wd[(unsigned)wd & (BUCKETS - 1)], *next;
    bool found = false;
    for (; d; d = next) {
        next = d->wnext;
        if (d->wd == wd) {
            unlink_dir(w, d);
            found = true;
        }
    }
    if (found && rm)
        inotify_rm_watch(w->ifd, wd);
}

/* Forgets (and unwatches) every directory whose key begins with prefix. */
static void drop_below(struct files_watch *w, const char *prefix, size_t len)
{
    for (unsigned b = 0; b < BUCKETS; b++) {
        struct wdir *d = w->by_key[b], *next;
        for (; d; d = next) {
            next = d->knext;
            if (d->len >= len && !memcmp(d->key, prefix, len)) {
                /* next may go with it when it shares the wd: start over */
                drop_wd(w, d->wd, true);
                next = w->by_key[b];
            }
        }
    }
}

/* Watches the directory key[0..len) ("" or ending in '/'); under mu. */
static bool watch_one(struct files_watch *w, const char *key, size_t len)
{
    if (find_key(w, key, len))
        return true;
    if (w->n >= WATCH_MAX || w->root_len + 1 + len >= PATH_MAX)
        return false;
    char path[PATH_MAX];
    memcpy(path, w->root, w->root_len);
    path[w->root_len] = '/';
    memcpy(path + w->root_len + 1, key, len);
    path[w->root_len + 1 + len] = '\0';
    /* the root's own links were resolved at start; below, a link to a
     * directory is followed, as the request's path was */
    int wd = inotify_add_watch(w->ifd, path, WATCH_MASK);
    if (wd < 0) {
        /* ENOENT: gone meanwhile; anything else (ENOSPC: max_user_watches):
         * this directory's files are trusted for cache_for, as without
         * inotify */
        if (errno != ENOENT)
            LOG_LIMITED(LOG_WARN,
                        "serve_files: cannot watch %s: %s (changes there are seen after cache_for)",
                        path, strerror(errno));
        return false;
    }
    struct wdir *d = malloc(sizeof(*d) + len + 1);
    if (!d) {
        /* the watch stays: its events find no key and are ignored */
        return false;
    }
    d->wd = wd;
    d->len = len;
    memcpy(d->key, key, len);
    d->key[len] = '\0';
    size_t hk = hash(key, len), hw = (unsigned)wd & (BUCKETS - 1);
    d->knext = w->by_key[hk];
    w->by_key[hk] = d;
    d->wnext = w->by_wd[hw];
    w->by_wd[hw] = d;
    w->n++;
    return true;
}

bool files_watch_ensure(struct files_watch *w, const char *key, size_t len)
{
    if (!w)
        return false;
    /* the key's directory: up to its last slash ("a/b/" is its own) */
    size_t dir = len;
    while (dir && key[dir - 1] != '/')
        dir--;
    bool ok = true;
    pthread_mutex_lock(&w->mu);
    /* the common case: the directory is watched, so are those above it */
    if (!find_key(w, key, dir)) {
        ok = watch_one(w, "", 0);
        for (size_t i = 0; ok && i < dir; i++)
            if (key[i] == '/')
                ok = watch_one(w, key, i + 1);
    }
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* --- the thread ------------------------------------------------------------ */

/* What an event for name in the directory d concerns. Under mu. */
static void on_name(struct files_watch *w, const struct wdir *d, const char *name, uint32_t mask)
{
    size_t nl = strlen(name);
    char key[PATH_MAX + 1];
    if (d->len + nl + 1 >= sizeof(key)) {
        cache_invalidate_prefix(w->cache, d->key, d->len);
        return;
    }
    memcpy(key, d->key, d->len);
    memcpy(key + d->len, name, nl);
    size_t kl = d->len + nl;
    key[kl] = '\0';
    cache_invalidate(w->cache, key, kl);
    cache_invalidate(w->cache, d->key, d->len); /* its index file or its listing */
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        const char *ext = files_sibling_ext[c];
        size_t el = ext ? strlen(ext) : 0;
        if (el && nl > el && !memcmp(name + nl - el, ext, el))
            cache_invalidate(w->cache, key, kl - el);
    }
    if (mask & IN_ISDIR) {
        key[kl++] = '/';
        key[kl] = '\0';
        cache_invalidate_prefix(w->cache, key, kl);
        if (mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE))
            drop_below(w, key, kl);
    }
}

static void on_event(struct files_watch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        cache_invalidate_prefix(w->cache, "", 0);
        return;
    }
    /* on_name() may drop the directory the event came from: one key at a
     * time, found again after each */
    struct wdir *d = w->by_wd[(unsigned)ev->wd & (BUCKETS - 1)];
    for (; d && d->wd != ev->wd; d = d->wnext)
        ;
    if (!d)
        return;
    if (ev->len && ev->name[0]) {
        /* several keys may share the wd, and on_name() may drop them all:
         * count them, then find each again by its rank */
        size_t n = 0;
        for (struct wdir *e = d; e; e = e->wnext)
            n += e->wd == ev->wd;
        for (size_t i = 0; i < n; i++) {
            struct wdir *e = w->by_wd[(unsigned)ev->wd & (BUCKETS - 1)];
            size_t k = 0;
            for (; e; e = e->wnext)
                if (e->wd == ev->wd && k++ == i)
                    break;
            if (!e)
                break;
            on_name(w, e, ev->name, ev->mask);
        }
        return;
    }
    /* the directory itself: deleted, moved, its mode changed; or IN_IGNORED */
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB | IN_IGNORED)) {
        for (struct wdir *e = d; e; e = e->wnext)
            if (e->wd == ev->wd)
                cache_invalidate_prefix(w->cache, e->key, e->len);
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
            drop_wd(w, ev->wd, !(ev->mask & IN_IGNORED));
    }
}

static void *watch_main(void *arg)
{
    struct files_watch *w = arg;
    /* aligned as struct inotify_event wants; room for many events */
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    struct pollfd pf[2] = {{.fd = w->ifd, .events = POLLIN}, {.fd = w->stop_fd, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        ssize_t n = read(w->ifd, buf, sizeof(buf));
        if (n <= 0)
            continue; /* EAGAIN, EINTR */
        pthread_mutex_lock(&w->mu);
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            on_event(w, ev);
            p += sizeof(*ev) + ev->len;
        }
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

struct files_watch *files_watch_new(const char *root_abs, struct cache *cache)
{
    struct files_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->cache = cache;
    w->root = strdup(root_abs);
    w->root_len = strlen(root_abs);
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!w->root || w->ifd < 0 || w->stop_fd < 0)
        goto out_free;
    pthread_mutex_init(&w->mu, NULL);
    /* signals belong to the server's threads, not to this one */
    int r = thread_start_helper(&w->thread, watch_main, w);
    if (r) {
        pthread_mutex_destroy(&w->mu);
        goto out_free;
    }
    return w;

out_free:
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    free(w->root);
    free(w);
    return NULL;
}

void files_watch_free(struct files_watch *w)
{
    if (!w)
        return;
    uint64_t one = 1;
    if (write(w->stop_fd, &one, sizeof(one)) < 0) {
        /* cannot happen with a fresh eventfd; the join below would hang */
    }
    pthread_join(w->thread, NULL);
    for (unsigned b = 0; b < BUCKETS; b++) {
        struct wdir *d = w->by_key[b], *next;
        for (; d; d = next) {
            next = d->knext;
            free(d);
        }
    }
    pthread_mutex_destroy(&w->mu);
    close(w->ifd);
    close(w->stop_fd);
    free(w->root);
    free(w);
}
