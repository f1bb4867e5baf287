/* Finding the real functions behind our hooks.
 *
 * dlsym itself is interposed (dlsym.S), so the real one is found with dlvsym, which we do not
 * interpose: glibc >= 2.34 exports dlsym@@GLIBC_2.34, older ones dlsym@GLIBC_2.2.5; there is no
 * __libc_dlsym any more. Runtime symbols are looked up by version node (libcudart.so.12 and .13
 * can share a process), RTLD_NEXT first, then through a RTLD_NOLOAD handle for a runtime loaded
 * RTLD_LOCAL (Python extensions). Driver symbols come from libcuda.so.1 itself. */
#include <dlfcn.h>
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

void *tkp_real_cudart(const char *name, const char *version)
{
    return tkp_real_lib(name, strcmp(version, "libcudart.so.12") == 0 ? "libcudart.so.12"
                                                                       : "libcudart.so.13");
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
