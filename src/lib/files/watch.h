/* watch.h - serve_files learning that files changed, without a stat per
 * request: inotify on the directories that have cached entries.
 *
 * Before an entry is built (a cache miss, on a worker), files_watch_ensure()
 * puts a watch on the directory of its key and on every directory above it
 * up to the root, each once. A thread per serve_files instance blocks in
 * read() on the inotify fd and, as soon as an event arrives, removes the
 * entries it concerns from the cache (cache_invalidate*):
 *   - a name changed in directory D (written, closed after writing,
 *     attributes, created, deleted, moved in or out): the key D/NAME, the
 *     directory's own entry D/ (its index file or listing), and for a
 *     precompressed sibling (NAME.gz, .br, .zst) the key D/NAME without it;
 *   - a subdirectory created, deleted or moved: every key below it, and
 *     the watches below it (added again on the next miss);
 *   - the directory itself deleted or moved: every key below it;
 *   - the event queue overflowed: every entry.
 * The watch is in place before the entry reads the file, and the cache
 * does not keep an entry whose building overlapped an invalidation, so a
 * change is never hidden by a request racing it.
 *
 * Without inotify (no instance left, or an error), or for a directory that
 * cannot be watched (max_user_watches reached, more than WATCH_MAX
 * directories), entries are refreshed after cache_for as before: nothing
 * else changes. What is not seen: a file reached through a symbolic link
 * is watched under its link's name only (a change to the target under
 * another name waits for cache_for), and changes on network file systems
 * made by other machines (inotify does not see them). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cache/cache.h"

#define WATCH_MAX 16384 /* directories watched per serve_files instance */

struct files_watch;

/* A watcher for the tree at root_abs whose entries live in cache; NULL
 * when inotify or the thread is not available (then cache_for alone
 * refreshes entries). */
struct files_watch *files_watch_new(const char *root_abs, struct cache *cache);
/* Stops and joins the thread; before cache_free(). NULL is fine. */
void files_watch_free(struct files_watch *w);

/* Watches the directories key's entry depends on. False when one could not
 * be watched (the entry then lives for cache_for). Any thread. */
bool files_watch_ensure(struct files_watch *w, const char *key, size_t len);
