/* The C half of the assembly context switch: laying out a new stack so that
 * the first coro_arch_swap() to it "returns" into coro_arch_trampoline. */
#include <stdint.h>

#include "base/arch/coro_arch.h"

void coro_arch_trampoline(void);

void coro_arch_make(struct coro_arch *ctx, void *stack, size_t size, void (*entry)(void *),
                    void *arg)
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;

#if defined(__x86_64__)
    /* loaded by coro_arch_swap: MXCSR and x87 control word, r15 r14 r13 r12
     * rbx rbp, then ret */
    *--sp = (void *)coro_arch_trampoline; /* at top-8: rsp is aligned after ret */
    *--sp = 0;                            /* rbp */
    *--sp = 0;                            /* rbx */
    *--sp = arg;                          /* r12 */
    *--sp = (void *)entry;                /* r13 */
    *--sp = 0;                            /* r14 */
    *--sp = 0;                            /* r15 */
    *--sp = 0;
    /* a new coroutine starts with its creator's floating-point control
     * state, as a new thread does */
    __asm__ volatile("stmxcsr (%0)\n\tfnstcw 4(%0)" : : "r"(sp) : "memory");
#elif defined(__aarch64__)
    sp -= 176 / sizeof(void *);
    for (int i = 0; i < 22; i++)
        sp[i] = 0;
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    sp[20] = (void *)(uintptr_t)fpcr;      /* the creator's FPCR */
    sp[0] = arg;                           /* x19 */
    sp[1] = (void *)entry;                 /* x20 */
    sp[11] = (void *)coro_arch_trampoline; /* x30 */
#else
#error "no assembly context switch for this architecture: build with -DCOLIBRI_CORO=ucontext"
#endif
    ctx->sp = sp;
}
