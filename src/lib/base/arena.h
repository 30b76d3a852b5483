/* arena.h - a bump allocator for per-request scratch memory (decoded paths
 * and query values). Allocations live until arena_reset(); the first block
 * is kept across resets, so a request that fits in it allocates nothing.
 * One owner, no locking. */
#pragma once

#include <stddef.h>

struct arena_block;

struct arena {
    struct arena_block *blocks; /* newest first; the last one is kept */
    char *cur;
    size_t left;
};

/* Returns NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t n);
void arena_reset_blocks(struct arena *a);
/* Empties the arena (inline: most requests never allocated from it). */
static inline void arena_reset(struct arena *a)
{
    if (a->blocks)
        arena_reset_blocks(a);
}
void arena_free(struct arena *a);
