/* The C half of the assembly context switch: laying out a new stack so that
 * the first coro_arch_swap() to it "returns" into coro_arch_trampoline. */
#include <stdint.h>

#include "coro_arch.h"

void coro_arch_trampoline(void);

void coro_arch_make(struct coro_arch *ctx, void *stack, size_t size, void (*entry)(void *),
                    void *arg)
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;

#if defined(__x86_64__)
    /* popped by coro_arch_swap: r15 r14 r13 r12 rbx rbp, then ret */
    *--sp = (void *)coro_arch_trampoline; /* at top-8: rsp is aligned after ret */
    *--sp = 0;                            /* rbp */
    *--sp = 0;                            /* rbx */
    *--sp = arg;                          /* r12 */
    *--sp = (void *)entry;                /* r13 */
    *--sp = 0;                            /* r14 */
    *--sp = 0;                            /* r15 */
#elif defined(__aarch64__)
    sp -= 160 / sizeof(void *);
    for (int i = 0; i < 20; i++)
        sp[i] = 0;
    sp[0] = arg;                           /* x19 */
    sp[1] = (void *)entry;                 /* x20 */
    sp[11] = (void *)coro_arch_trampoline; /* x30 */
#else
#error "no assembly context switch for this architecture: build with -DCOLIBRI_CORO=ucontext"
#endif
    ctx->sp = sp;
}
