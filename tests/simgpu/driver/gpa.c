/* simgpu cuGetProcAddress: every entry point the fake implements, in one table.
 *
 * Callers ask for base names ("cuMemAlloc", "cuLaunchKernel") and a CUDA version; the answer is
 * the newest variant not newer than that version (cuMemAlloc -> cuMemAlloc_v2,
 * cuStreamGetCaptureInfo at 12030 -> _v3, at 11030 -> _v2). With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the _ptsz/_ptds variant is returned where one
 * exists. As a convenience (the real driver does not promise it) an exact exported name
 * ("cuMemAlloc_v2", "cuLaunchKernel_ptsz") also resolves, to itself. */
#include <string.h>

#include "sim.h"
#include "unimpl.h"

/* cuda.h (with __CUDA_API_VERSION_INTERNAL) declares every exported name; sim.h the simgpu ones. */
#define E(name, ver, sym) {name, ver, (void *)sym, NULL, #sym, NULL},
#define EP(name, ver, sym, psym) {name, ver, (void *)sym, (void *)psym, #sym, #psym},

static const struct simgpu_proc_entry table[] = {
#include "gpa_table.h"
};
#define NTABLE (sizeof table / sizeof table[0])

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (!symbol)
        return CUDA_ERROR_INVALID_VALUE;
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int seen = 0;
    for (size_t i = 0; i < NTABLE; i++) {
        if (strcmp(table[i].name, symbol))
            continue;
        seen = 1;
        if (table[i].version > cudaVersion)
            continue; /* entries of one name are listed newest first */
        *pfn = ptsz && table[i].fn_ptsz ? table[i].fn_ptsz : table[i].fn;
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (seen) {
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    /* Not simulated by name: every name cuda.h declares still resolves (its base name to the
     * symbol cuda.h's #defines give it), to an export that reports itself as unimplemented. */
    const char *want = symbol;
    for (const struct simgpu_base_proc *b = simgpu_base_procs; b->base; b++)
        if (!strcmp(b->base, symbol)) {
            want = ptsz ? b->sym_ptsz : b->sym;
            break;
        }
    for (const struct simgpu_named_proc *p = simgpu_all_procs; p->name; p++)
        if (!strcmp(p->name, want)) {
            *pfn = p->fn;
            if (symbolStatus)
                *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    for (size_t i = 0; i < NTABLE; i++) {
        void *fn = !strcmp(table[i].sym, symbol) ? table[i].fn
                   : table[i].sym_ptsz && !strcmp(table[i].sym_ptsz, symbol) ? table[i].fn_ptsz
                                                                             : NULL;
        if (fn) {
            *pfn = fn;
            if (symbolStatus)
                *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* Test hook (simgpu only, resolved through cuGetProcAddress like everything else): the table,
 * so a unit test can check that every entry resolves and matches its exported symbol. */
SIM_EXPORT CUresult simgpuGetProcTable(const struct simgpu_proc_entry **t, size_t *n)
{
    *t = table;
    *n = NTABLE;
    return CUDA_SUCCESS;
}
