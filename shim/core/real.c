/* Finding the real functions behind our hooks.
 *
 * dlsym itself is interposed (dlsym.S), so the real one is found with dlvsym, which we do not
 * interpose: glibc >= 2.34 exports dlsym@@GLIBC_2.34, older ones dlsym@GLIBC_2.2.5; there is no
 * __libc_dlsym any more. Runtime symbols are looked up by version node (libcudart.so.12 and .13
 * can share a process), RTLD_NEXT first, then through a RTLD_NOLOAD handle for a runtime loaded
 * RTLD_LOCAL (Python extensions). Driver symbols come from libcuda.so.1 itself. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "core/base.h"
#include "core/real.h"


tkp_dlsym_fn tkp_dlsym_next; /* read by dlsym.S */

TKP_EARLY void *tkp_resolve_real_dlsym(void)
{
    if (!tkp_dlsym_next) {
        tkp_dlsym_fn f = (tkp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f) f = (tkp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        tkp_dlsym_next = f;
    }
    return (void *)tkp_dlsym_next;
}

TKP_EARLY void *tkp_real_dlsym(void *handle, const char *name)
{
    tkp_dlsym_fn f = tkp_dlsym_next ? tkp_dlsym_next : (tkp_dlsym_fn)tkp_resolve_real_dlsym();
    return f ? f(handle, name) : NULL;
}

/* The definition of `name` at version node `node` in the library whose soname is also `node`
 * (true of libcudart.so.1x, libcublas(Lt).so.1x, libcudnn.so.9): RTLD_NEXT first, then through
 * a RTLD_NOLOAD handle for a library loaded RTLD_LOCAL (Python extensions). Never loads one. */
void *tkp_real_lib(const char *name, const char *node)
{
    void *p = dlvsym(RTLD_NEXT, name, node);
    if (p) return p;
    void *h = dlopen(node, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        p = dlvsym(h, name, node);
        if (!p) p = tkp_real_dlsym(h, name);
        dlclose(h);
        if (p) return p;
    }
    /* An unversioned library (some test doubles): the next definition by name. */
    return tkp_real_dlsym(RTLD_NEXT, name);
}

uintptr_t tkp_cudart_text[4] = {UINTPTR_MAX, 0, UINTPTR_MAX, 0};
static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER;

struct seg_find {
    uintptr_t p, lo, hi;
    const char *name; /* the object's path as the loader has it ("" for the program) */
};

static int find_seg(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct seg_find *f = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (f->p >= lo && f->p < hi) {
            f->lo = lo, f->hi = hi, f->name = info->dlpi_name;
            return 1;
        }
    }
    return 0;
}

static void note_seg(const struct seg_find *f);

/* Notes the executable segment holding p (a runtime function) in tkp_cudart_text, once. */
static void note_cudart_text(void *p)
{
    if (!p || tkp_from_cudart(p)) return;
    struct seg_find f = {(uintptr_t)p, 0, 0, NULL};
    if (dl_iterate_phdr(find_seg, &f)) note_seg(&f);
}

int tkp_note_cudart_caller(const void *from)
{
    if (!from) return 0;
    if (tkp_from_cudart(from)) return 1;
    struct seg_find f = {(uintptr_t)from, 0, 0, NULL};
    if (!dl_iterate_phdr(find_seg, &f) || !f.name) return 0;
    const char *base = strrchr(f.name, '/');
    base = base ? base + 1 : f.name;
    if (strncmp(base, "libcudart.so.12", 15) != 0 && strncmp(base, "libcudart.so.13", 15) != 0)
        return 0;
    note_seg(&f);
    return tkp_from_cudart(from);
}

static void note_seg(const struct seg_find *fp)
{
    struct seg_find f = *fp;
    pthread_mutex_lock(&text_lock);
    for (int i = 0; i < 4; i += 2) {
        if (__atomic_load_n(&tkp_cudart_text[i + 1], __ATOMIC_RELAXED) == 0) {
            __atomic_store_n(&tkp_cudart_text[i], f.lo, __ATOMIC_RELEASE);
            __atomic_store_n(&tkp_cudart_text[i + 1], f.hi, __ATOMIC_RELEASE);
            break;
        }
        if (__atomic_load_n(&tkp_cudart_text[i], __ATOMIC_RELAXED) == f.lo) break;
    }
    /* a third runtime: its launches are recorded by the runtime hook and the driver hook both */
    pthread_mutex_unlock(&text_lock);
}

void *tkp_real_cudart(const char *name, const char *version)
{
    void *p = tkp_real_lib(name, strcmp(version, "libcudart.so.12") == 0 ? "libcudart.so.12"
                                                                          : "libcudart.so.13");
    note_cudart_text(p);
    return p;
}

static void *driver_handle;

void *tkp_real_driver(const char *name)
{
    void *h = __atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE);
    if (!h) {
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (!h) h = dlopen("libcuda.so.1", RTLD_LAZY);
        if (!h) return NULL;
        void *expect = NULL;
        if (!__atomic_compare_exchange_n(&driver_handle, &expect, h, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            dlclose(h), h = expect;
    }
    return tkp_real_dlsym(h, name);
}
