/* x86-64 System V context switch: only rbx, rbp, r12-r15, the stack
 * pointer and the control bits of MXCSR and the x87 control word survive a
 * call, so only they are saved. Frame, from the saved rsp up: MXCSR (4
 * bytes), x87 control word (2, then 2 unused), r15 r14 r13 r12 rbx rbp,
 * return address. */
        .text
        .globl  coro_arch_swap
        .hidden coro_arch_swap
        .type   coro_arch_swap, @function
/* void coro_arch_swap(struct coro_arch *from, struct coro_arch *to) */
coro_arch_swap:
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movq    %rsp, (%rdi)
        movq    (%rsi), %rsp
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
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
        .hidden coro_arch_trampoline
        .type   coro_arch_trampoline, @function
coro_arch_trampoline:
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .size   coro_arch_trampoline, .-coro_arch_trampoline

        .section .note.GNU-stack,"",@progbits
