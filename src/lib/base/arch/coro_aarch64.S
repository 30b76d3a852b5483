/* AArch64 AAPCS64 context switch: x19-x29, the link register x30, the low
 * halves of v8-v15 (d8-d15), sp and the FPCR are callee-saved; nothing
 * else is. Frame (176 bytes, 16-aligned): x19-x30 at 0-95, d8-d15 at
 * 96-159, FPCR at 160, 168 unused. */
        .text
        .globl  coro_arch_swap
        .hidden coro_arch_swap
        .type   coro_arch_swap, %function
/* void coro_arch_swap(struct coro_arch *from, struct coro_arch *to) */
coro_arch_swap:
        sub     sp, sp, #176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        stp     d8, d9, [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        mrs     x2, fpcr
        str     x2, [sp, #160]
        mov     x2, sp
        str     x2, [x0]
        ldr     x2, [x1]
        mov     sp, x2
        ldr     x2, [sp, #160]
        msr     fpcr, x2
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8, d9, [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #176
        ret
        .size   coro_arch_swap, .-coro_arch_swap

/* coro_arch_make() left the argument in x19 and entry in x20. */
        .globl  coro_arch_trampoline
        .hidden coro_arch_trampoline
        .type   coro_arch_trampoline, %function
coro_arch_trampoline:
        mov     x0, x19
        blr     x20
        brk     #0
        .size   coro_arch_trampoline, .-coro_arch_trampoline

        .section .note.GNU-stack,"",%progbits
