/* coro_arch.h - the machine part of a coroutine: saved registers, making a
 * fresh context on a stack, and switching.
 *
 * Three implementations, one chosen at build time (CMake option COLIBRI_CORO):
 * coro_x86_64.S and coro_aarch64.S save only the callee-saved registers and
 * make no system call; coro_ucontext.c is the portable fallback.
 *
 * The floating-point control state is callee-saved in both ABIs and is
 * switched too (x86-64 MXCSR and x87 control word, AArch64 FPCR): a handler
 * that changes the rounding mode or exception masks keeps it across a
 * suspension, and the change never leaks to other connections. A new
 * coroutine starts with the state of the code that made it.
 */
#pragma once

#include <stddef.h>

#if defined(COLIBRI_CORO_UCONTEXT)
#include <ucontext.h>
struct coro_arch {
    ucontext_t uc;
};
#else
struct coro_arch {
    void *sp; /* the callee-saved registers are pushed on the stack */
};
#endif

/* Prepare ctx so that switching to it calls entry(arg) on the given stack.
 * entry must never return. */
void coro_arch_make(struct coro_arch *ctx, void *stack, size_t size, void (*entry)(void *),
                    void *arg);
/* Save the current registers into from, load to's. */
void coro_arch_swap(struct coro_arch *from, struct coro_arch *to);
