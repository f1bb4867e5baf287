/* The real functions behind our hooks (real.c). */
#ifndef TKP_CORE_REAL_H
#define TKP_CORE_REAL_H

#include <stdint.h>

typedef void *(*tkp_dlsym_fn)(void *, const char *);
/* glibc's dlsym, read by hooks/dlsym.S's fast path; NULL until resolved. */
extern tkp_dlsym_fn tkp_dlsym_next;
/* Resolves tkp_dlsym_next (dlvsym of GLIBC_2.34, else GLIBC_2.2.5) once; returns it. */
void *tkp_resolve_real_dlsym(void);
void *tkp_real_dlsym(void *handle, const char *name);
/* The next definition of a runtime symbol for a given major (12 or 13), cached by the caller.
 * It also notes the executable segment holding it (tkp_cudart_text), before returning it. */
void *tkp_real_cudart(const char *name, const char *version);

/* Where libcudart's code is (issue 32): up to two runtimes (cu12, cu13), each [lo, hi), noted
 * when a runtime function is resolved, so before any runtime launch hook calls one. The driver's
 * launch entries (hooks_drv.c) pass a launch called from there straight through: the runtime
 * hook recorded it. Empty ranges are [UINTPTR_MAX, 0), so that a reader that sees one bound
 * updated and not the other finds no address inside (read lo, then hi). Read by assembly. */
extern uintptr_t tkp_cudart_text[4]; /* lo0, hi0, lo1, hi1 */
/* 1 when from (a return address) lies in a shared libcudart.so.12 or .13 (its soname's file;
 * not a runtime linked statically into cuBLAS or a program), whose code is then noted in
 * tkp_cudart_text as tkp_real_cudart does. For cudart filling its driver table before any hooked
 * runtime function was called (hooks_drv.c). Takes the loader's lock: not on a hot path. */
int tkp_note_cudart_caller(const void *from);
static inline int tkp_from_cudart(const void *ret)
{
    uintptr_t a = (uintptr_t)ret;
    for (int i = 0; i < 4; i += 2)
        if (a >= __atomic_load_n(&tkp_cudart_text[i], __ATOMIC_RELAXED) &&
            a < __atomic_load_n(&tkp_cudart_text[i + 1], __ATOMIC_RELAXED))
            return 1;
    return 0;
}
/* The definition of name@node in the library whose soname is node ("libcublas.so.13"), found
 * through RTLD_NEXT or a RTLD_NOLOAD handle, else unversioned; NULL when absent. */
void *tkp_real_lib(const char *name, const char *node);
/* The real libcuda's export (dlopen'ed RTLD_NOLOAD first, then loaded), or NULL. */
void *tkp_real_driver(const char *name);

/* The real function in `var`, a static pointer resolved at its first use by `resolve`. Many
 * threads' first calls may resolve it at once, each storing the same value: a relaxed atomic load
 * and store make that no data race in C11 (nor to ThreadSanitizer), and compile to the plain movs
 * of a plain pointer on x86-64, so the launch path pays nothing for them (issue 33). */
#define TKP_REAL_LAZY(var, resolve)                                                               \
    ({                                                                                            \
        __typeof__(var) f_ = __atomic_load_n(&(var), __ATOMIC_RELAXED);                           \
        if (__builtin_expect(!f_, 0)) {                                                           \
            f_ = (__typeof__(var))(resolve);                                                      \
            __atomic_store_n(&(var), f_, __ATOMIC_RELAXED);                                       \
        }                                                                                         \
        f_;                                                                                       \
    })

#endif
