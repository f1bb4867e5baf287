/* tokprof decoder: what a program or shared object file says of itself in its ELF headers, for
 * tokprof doctor (can this host load it?). Reads the file; keeps nothing. */
#ifndef TKP_ELFINFO_H
#define TKP_ELFINFO_H

struct tkp_elf {
    int bits;         /* 32 or 64; 0: not an ELF file */
    unsigned machine; /* e_machine (EM_X86_64, EM_AARCH64, ...) */
    int interp;       /* has a PT_INTERP: a dynamically linked program, which LD_PRELOAD reaches */
    unsigned glibc;   /* the newest GLIBC_x.y symbol version it needs, as x * 1000 + y; 0: none */
    char glibc_name[32]; /* that version's name, "GLIBC_2.34"; "" when none */
};

/* Reads path's ELF headers into *e (64-bit files in full; of a 32-bit one, bits and machine).
 * Returns 0 (e->bits 0: not ELF), or -1 with errno when the file cannot be read. */
int tkp_elf_read(const char *path, struct tkp_elf *e);
/* "x86-64", "aarch64", ... for e_machine m; "another architecture" when unknown. Static. */
const char *tkp_elf_machine_name(unsigned m);
/* "2.34" (or "2.34.1") as 2034; 0 when it is not a version. */
unsigned tkp_elf_glibc_num(const char *v);

#endif
