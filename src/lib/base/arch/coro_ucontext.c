/* Portable fallback: makecontext/swapcontext. Slower, since glibc saves the
 * signal mask with a system call on every switch. */
#include <stdint.h>
#include <stdlib.h>

#include "base/arch/coro_arch.h"

/* makecontext() passes int arguments only: split the pointers in halves. */
static void trampoline(unsigned fn_hi, unsigned fn_lo, unsigned arg_hi, unsigned arg_lo)
{
    void (*entry)(void *) = (void (*)(void *))(((uintptr_t)fn_hi << 16 << 16) | (uintptr_t)fn_lo);
    void *arg = (void *)(((uintptr_t)arg_hi << 16 << 16) | (uintptr_t)arg_lo);
    entry(arg);
    abort();
}

void coro_arch_make(struct coro_arch *ctx, void *stack, size_t size, void (*entry)(void *),
                    void *arg)
{
    getcontext(&ctx->uc);
    ctx->uc.uc_stack.ss_sp = stack;
    ctx->uc.uc_stack.ss_size = size;
    ctx->uc.uc_link = NULL;
    uintptr_t f = (uintptr_t)entry, a = (uintptr_t)arg;
    makecontext(&ctx->uc, (void (*)(void))trampoline, 4, (unsigned)(f >> 16 >> 16), (unsigned)f,
                (unsigned)(a >> 16 >> 16), (unsigned)a);
}

void coro_arch_swap(struct coro_arch *from, struct coro_arch *to)
{
    swapcontext(&from->uc, &to->uc);
}
