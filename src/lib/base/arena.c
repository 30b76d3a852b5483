#include "base/arena.h"

#include <stdlib.h>

#define ARENA_BLOCK 4096

struct arena_block {
    struct arena_block *next;
    size_t size;
    char data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n > a->left) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        struct arena_block *b = malloc(sizeof(*b) + size);
        if (!b)
            return NULL;
        b->next = a->blocks;
        b->size = size;
        a->blocks = b;
        a->cur = b->data;
        a->left = size;
    }
    void *p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

void arena_reset_blocks(struct arena *a)
{
    struct arena_block *b = a->blocks;
    while (b->next) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->blocks = b;
    a->cur = b->data;
    a->left = b->size;
}

void arena_free(struct arena *a)
{
    while (a->blocks) {
        struct arena_block *next = a->blocks->next;
        free(a->blocks);
        a->blocks = next;
    }
    a->cur = NULL;
    a->left = 0;
}
