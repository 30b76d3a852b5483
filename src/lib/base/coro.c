#include "base/coro.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/common.h"
#include "base/tsan.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define HAVE_ASAN 1
#endif

/* TSan keeps a shadow call stack and a clock per thread; each coroutine
 * stack is a fiber of its own, and a switch between the fibers of one
 * thread orders what happened before it (flags 0: synchronise). No-ops in
 * other builds. */
static inline void tsan_switch(void *fiber)
{
#ifdef COLIBRI_TSAN
    __tsan_switch_to_fiber(fiber, 0);
#else
    (void)fiber;
#endif
}

/* ASan keeps a shadow of each stack; tell it when we jump between stacks.
 * These are no-ops in normal builds. */
static inline void asan_enter(struct coro *coro)
{
#ifdef HAVE_ASAN
    __sanitizer_start_switch_fiber(&coro->asan_fake_stack, coro->stack, coro->stack_size);
#else
    (void)coro;
#endif
}

static inline void asan_entered(struct coro *coro)
{
#ifdef HAVE_ASAN
    __sanitizer_finish_switch_fiber(coro->asan_fake_stack, &coro->asan_caller_bottom,
                                    &coro->asan_caller_size);
#else
    (void)coro;
#endif
}

static inline void asan_leave(struct coro *coro, bool for_good)
{
#ifdef HAVE_ASAN
    __sanitizer_start_switch_fiber(for_good ? NULL : &coro->asan_fake_stack,
                                   coro->asan_caller_bottom, coro->asan_caller_size);
#else
    (void)coro;
    (void)for_good;
#endif
}

static inline void asan_left(struct coro *coro)
{
#ifdef HAVE_ASAN
    __sanitizer_finish_switch_fiber(coro->asan_fake_stack, NULL, NULL);
#else
    (void)coro;
#endif
}

static void switch_out(struct coro *coro, int value, bool for_good)
{
    coro->yielded = value;
    coro->running = false;
    asan_leave(coro, for_good);
    tsan_switch(coro->tsan_caller);
    coro_arch_swap(&coro->ctx, &coro->caller);
    asan_entered(coro);
}

static void coro_entry(void *p)
{
    struct coro *coro = p;
    asan_entered(coro);
    coro->fn(coro, coro->arg);
    coro_defer_run_to(coro, 0);
    coro->done = true;
    switch_out(coro, CORO_FINISHED, true);
    abort(); /* a finished coroutine is never resumed */
}

static void prepare(struct coro *coro, coro_fn fn, void *arg)
{
    coro->fn = fn;
    coro->arg = arg;
    coro->done = false;
    coro->running = false;
    coro->yielded = 0;
    coro_arch_make(&coro->ctx, coro->stack, coro->stack_size, coro_entry, coro);
}

struct coro *coro_new(size_t stack_size, coro_fn fn, void *arg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!stack_size)
        stack_size = CORO_DEFAULT_STACK;
#ifdef HAVE_ASAN
    stack_size *= 4; /* red zones around every local */
#endif
#ifdef COLIBRI_TSAN
    stack_size *= 2; /* instrumented frames are larger */
#endif
    stack_size = (stack_size + page - 1) & ~(page - 1);

    char *mem = mmap(NULL, stack_size + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    if (mprotect(mem, page, PROT_NONE) < 0)
        goto out_unmap;

    struct coro *coro = ALLOC_INIT(struct coro, {
                                                    .stack = mem + page,
                                                    .stack_size = stack_size,
                                                });
    if (!coro)
        goto out_unmap;
#ifdef HAVE_VALGRIND
    coro->valgrind_id = VALGRIND_STACK_REGISTER(coro->stack, coro->stack + stack_size);
#endif
#ifdef COLIBRI_TSAN
    coro->tsan_fiber = __tsan_create_fiber(0);
#endif
    prepare(coro, fn, arg);
    return coro;

out_unmap:
    munmap(mem, stack_size + page);
    return NULL;
}

void coro_reset(struct coro *coro, coro_fn fn, void *arg)
{
    coro_defer_run_to(coro, 0);
#ifdef HAVE_ASAN
    /* a coroutine reset while suspended leaves its frames' redzones
     * poisoned: the next run would trip over them (a false report) */
    __asan_unpoison_memory_region(coro->stack, coro->stack_size);
#endif
#ifdef COLIBRI_TSAN
    /* likewise, TSan's shadow call stack of a fiber abandoned mid-run would
     * keep its frames and grow with every reset: start a fresh one */
    __tsan_destroy_fiber(coro->tsan_fiber);
    coro->tsan_fiber = __tsan_create_fiber(0);
#endif
    prepare(coro, fn, arg);
}

void coro_shed_stack(struct coro *coro)
{
    char here;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t sp = (uintptr_t)&here, lo = (uintptr_t)coro->stack;
    /* not on its own stack (a sanitizer's fake frame): nothing to judge by */
    if (sp < lo || sp >= lo + coro->stack_size)
        return;
    uintptr_t top = (sp & ~(page - 1)) - 2 * page;
    if (top > lo)
        madvise(coro->stack, top - lo, MADV_DONTNEED);
}

void coro_free(struct coro *coro)
{
    if (!coro)
        return;
    coro_defer_run_to(coro, 0);
#ifdef HAVE_VALGRIND
    VALGRIND_STACK_DEREGISTER(coro->valgrind_id);
#endif
#ifdef COLIBRI_TSAN
    __tsan_destroy_fiber(coro->tsan_fiber);
#endif
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(coro->stack - page, coro->stack_size + page);
    free(coro->defers);
    free(coro);
}

int coro_resume(struct coro *coro)
{
    if (coro->done)
        return coro->yielded;
    coro->running = true;
    asan_enter(coro);
#ifdef COLIBRI_TSAN
    coro->tsan_caller = __tsan_get_current_fiber();
#endif
    tsan_switch(coro->tsan_fiber);
    coro_arch_swap(&coro->caller, &coro->ctx);
    asan_left(coro);
    return coro->yielded;
}

void coro_yield(struct coro *coro, int value)
{
    switch_out(coro, value, false);
}

void coro_abort(struct coro *coro)
{
    coro_defer_run_to(coro, 0);
    coro->done = true;
    switch_out(coro, CORO_ABORTED, true);
    abort();
}

/* coro_defer() with the list full */
int coro_defer_grow(struct coro *coro, void (*fn)(void *), void *arg)
{
    unsigned cap = coro->cap_defers ? coro->cap_defers * 2 : 8;
    struct coro_defer *d = realloc(coro->defers, cap * sizeof(*d));
    if (!d) {
        fn(arg);
        return -ENOMEM;
    }
    coro->defers = d;
    coro->cap_defers = cap;
    coro->defers[coro->n_defers++] = (struct coro_defer){.fn = fn, .arg = arg};
    return 0;
}
