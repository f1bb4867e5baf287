/* tokprof decoder: ELF headers (base/elfinfo.h). The file is mapped read-only and every offset is
 * checked against its size before it is followed: the file may be anything. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/elfinfo.h"

unsigned tkp_elf_glibc_num(const char *v)
{
    unsigned a = 0, b = 0;
    if (sscanf(v, "%u.%u", &a, &b) < 1) return 0;
    return a * 1000 + b;
}

const char *tkp_elf_machine_name(unsigned m)
{
    switch (m) {
    case EM_X86_64:
        return "x86-64";
    case EM_AARCH64:
        return "aarch64";
    case EM_386:
        return "i386";
    case EM_PPC64:
        return "ppc64";
    default:
        return "another architecture";
    }
}

/* The newest GLIBC_ version among the version needs (SHT_GNU_verneed) of section sh. */
static void glibc_needs(const unsigned char *p, size_t size, const Elf64_Ehdr *h,
                        const Elf64_Shdr *sh, struct tkp_elf *e)
{
    if (sh->sh_link >= h->e_shnum) return;
    const Elf64_Shdr *str = (const Elf64_Shdr *)(p + h->e_shoff) + sh->sh_link;
    if (sh->sh_offset + sh->sh_size > size || str->sh_offset + str->sh_size > size) return;
    const char *strs = (const char *)p + str->sh_offset;
    uint64_t off = sh->sh_offset, end = off + sh->sh_size;
    for (unsigned k = 0; k < 64 && off + sizeof(Elf64_Verneed) <= end; k++) {
        const Elf64_Verneed *vn = (const void *)(p + off);
        uint64_t a = off + vn->vn_aux;
        for (unsigned j = 0; j < vn->vn_cnt && a + sizeof(Elf64_Vernaux) <= end; j++) {
            const Elf64_Vernaux *va = (const void *)(p + a);
            const char *name = strs + va->vna_name;
            if (va->vna_name < str->sh_size && memchr(name, 0, str->sh_size - va->vna_name) &&
                !strncmp(name, "GLIBC_", 6)) {
                unsigned g = tkp_elf_glibc_num(name + 6);
                if (g > e->glibc) {
                    e->glibc = g;
                    snprintf(e->glibc_name, sizeof e->glibc_name, "%s", name);
                }
            }
            if (!va->vna_next) break;
            a += va->vna_next;
        }
        if (!vn->vn_next) break;
        off += vn->vn_next;
    }
}

int tkp_elf_read(const char *path, struct tkp_elf *e)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return 0; /* not ELF */
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return -1;
    const Elf64_Ehdr *h = (const void *)p;
    if (memcmp(p, ELFMAG, SELFMAG)) goto out;
    e->bits = p[EI_CLASS] == ELFCLASS64 ? 64 : 32;
    e->machine = h->e_machine; /* the same offset in both classes */
    if (e->bits != 64) goto out;
    if (h->e_phoff && h->e_phoff + (uint64_t)h->e_phnum * sizeof(Elf64_Phdr) <= size) {
        const Elf64_Phdr *ph = (const void *)(p + h->e_phoff);
        for (unsigned i = 0; i < h->e_phnum; i++)
            if (ph[i].p_type == PT_INTERP) e->interp = 1;
    }
    if (!h->e_shoff || h->e_shoff + (uint64_t)h->e_shnum * sizeof(Elf64_Shdr) > size) goto out;
    const Elf64_Shdr *sh = (const void *)(p + h->e_shoff);
    for (unsigned i = 0; i < h->e_shnum; i++)
        if (sh[i].sh_type == SHT_GNU_verneed) glibc_needs(p, size, h, &sh[i], e);
out:
    munmap((void *)p, size);
    return 0;
}
