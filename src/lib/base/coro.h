/* coro.h - stackful coroutines with a defer list.
 *
 * A coroutine runs fn(coro, arg) on its own small stack. coro_resume() runs
 * it until it calls coro_yield() (or returns, or aborts) and hands back the
 * yielded value. Only the thread that created a coroutine may resume it.
 *
 * The defer list holds cleanups. They run, newest first, when the coroutine
 * returns or aborts, or up to a mark with coro_defer_run_to(). A coroutine
 * that is reset or freed while suspended runs its defers first, so whatever
 * a handler registered is released however the connection ends.
 *
 * Stacks are mmap()ed with a PROT_NONE guard page below them; a stack
 * overflow faults instead of corrupting a neighbour.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/arch/coro_arch.h"

struct coro;
typedef void (*coro_fn)(struct coro *coro, void *arg);

/* Values coro_resume() returns besides what the coroutine yields. Yield only
 * values >= 0. */
enum {
    CORO_FINISHED = -1, /* fn returned */
    CORO_ABORTED = -2,  /* coro_abort() was called */
};

struct coro_defer {
    void (*fn)(void *);
    void *arg;
};

struct coro {
    struct coro_arch ctx;    /* the coroutine's registers while suspended */
    struct coro_arch caller; /* the resumer's registers while running */
    coro_fn fn;
    void *arg;
    struct coro_defer *defers;
    unsigned n_defers, cap_defers;
    int yielded;
    bool running; /* between coro_resume() and the next switch out */
    bool done;    /* finished or aborted: must be reset before resuming */
    char *stack;  /* usable stack (the guard page sits just below) */
    size_t stack_size;
    unsigned valgrind_id;
    void *asan_fake_stack;
    const void *asan_caller_bottom;
    size_t asan_caller_size;
    void *tsan_fiber;  /* ThreadSanitizer's context for this stack */
    void *tsan_caller; /* and the resumer's, while running */
};

#define CORO_DEFAULT_STACK (32 * 1024)

/* Allocates the stack; the coroutine starts at the first coro_resume().
 * Returns NULL on failure. */
struct coro *coro_new(size_t stack_size, coro_fn fn, void *arg);
/* Reuses the stack for a new run of fn (runs pending defers first). */
void coro_reset(struct coro *coro, coro_fn fn, void *arg);
void coro_free(struct coro *coro);
/* From inside the coroutine, before a long wait: the stack's pages well
 * below the caller's frame (two pages of margin) go back to the system;
 * touched again, they come back zeroed. */
void coro_shed_stack(struct coro *coro);

/* Runs the coroutine until it yields, returns or aborts. */
int coro_resume(struct coro *coro);

/* From inside the coroutine: switch back to the resumer, which gets value
 * (>= 0) from coro_resume(). Returns when resumed again. */
void coro_yield(struct coro *coro, int value);

/* From inside: run the defers and leave for good. Never returns. */
__attribute__((noreturn)) void coro_abort(struct coro *coro);

/* Registers a cleanup. Returns 0, or -ENOMEM (the cleanup is then run at
 * once, so the caller's resource is never leaked). Inline, like
 * coro_defer_run_to(): a request registers one or none (serve_files'
 * cache entry), so the usual case is a store, or a compare. */
int coro_defer_grow(struct coro *coro, void (*fn)(void *), void *arg);
static inline int coro_defer(struct coro *coro, void (*fn)(void *), void *arg)
{
    if (__builtin_expect(coro->n_defers == coro->cap_defers, 0))
        return coro_defer_grow(coro, fn, arg);
    coro->defers[coro->n_defers++] = (struct coro_defer){.fn = fn, .arg = arg};
    return 0;
}
static inline unsigned coro_defer_mark(const struct coro *coro)
{
    return coro->n_defers;
}
/* Runs, newest first, the defers registered since mark. */
static inline void coro_defer_run_to(struct coro *coro, unsigned mark)
{
    while (coro->n_defers > mark) {
        struct coro_defer d = coro->defers[--coro->n_defers];
        d.fn(d.arg);
    }
}
