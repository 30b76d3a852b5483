/* x86-64 System V context switch: only rbx, rbp, r12-r15 and the stack
 * pointer survive a call, so only they are saved. */
        .text
        .globl  coro_arch_swap
        .type   coro_arch_swap, @function
/* void coro_arch_swap(struct coro_arch *from, struct coro_arch *to) */
coro_arch_swap:
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        movq    %rsp, (%rdi)
        movq    (%rsi), %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        ret
        .size   coro_arch_swap, .-coro_arch_swap

/* First code run on a new stack: coro_arch_make() left entry in r13 and
 * its argument in r12. The stack is 16-byte aligned here, as a call wants. */
        .globl  coro_arch_trampoline
        .type   coro_arch_trampoline, @function
coro_arch_trampoline:
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .size   coro_arch_trampoline, .-coro_arch_trampoline

        .section .note.GNU-stack,"",@progbits
