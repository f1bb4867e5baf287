/* dlsym interposer entry.
 *
 * glibc resolves dlsym(RTLD_NEXT, ...) relative to the *caller's* object, found from the return
 * address. A C wrapper would make the shim the caller and break every library that uses
 * RTLD_NEXT itself (LD_PRELOAD allocators, other interposers). So RTLD_NEXT is forwarded here by
 * a tail jump, which keeps the caller's return address; every other handle goes to the C hook
 * (tkp_dlsym_hook in hooks_drv.c), where the caller's identity does not matter.
 *
 * Exported twice, for both version nodes glibc defines (GLIBC_2.34 default, GLIBC_2.2.5). */
    .text
    .p2align 4
    .type tkp_dlsym_entry, @function
tkp_dlsym_entry:
    .cfi_startproc
    cmpq $-1, %rdi                  /* RTLD_NEXT == (void *)-1 */
    jne tkp_dlsym_hook
    movq tkp_dlsym_next(%rip), %rax
    testq %rax, %rax
    jz 1f
    jmp *%rax
1:  /* first use before the constructor ran: resolve, keeping the arguments */
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp                   /* 16-byte alignment for the call */
    .cfi_adjust_cfa_offset 8
    call tkp_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 2f
    jmp *%rax
2:  xorl %eax, %eax
    ret
    .cfi_endproc
    .size tkp_dlsym_entry, .-tkp_dlsym_entry

    .globl tkp_dlsym_234
    .type tkp_dlsym_234, @function
    .set tkp_dlsym_234, tkp_dlsym_entry
    .globl tkp_dlsym_225
    .type tkp_dlsym_225, @function
    .set tkp_dlsym_225, tkp_dlsym_entry
    .symver tkp_dlsym_234, dlsym@@GLIBC_2.34
    .symver tkp_dlsym_225, dlsym@GLIBC_2.2.5

    .section .note.GNU-stack,"",@progbits
