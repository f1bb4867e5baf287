/* simgpu modules, libraries and functions. No image is parsed: any image loads, and any name
 * asked of a module yields a function object carrying that name (kernel names are all the cost
 * model and the truth log need). CUkernel and CUfunction are the same object. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_func *mod_func(CUfunction f)
{
    struct sim_func *fn = (struct sim_func *)f;
    return fn && fn->magic == MAGIC_FUNC ? fn : NULL;
}

static struct sim_module *mod_of(CUmodule m)
{
    struct sim_module *mod = (struct sim_module *)m;
    return mod && mod->magic == MAGIC_MODULE ? mod : NULL;
}

static CUresult new_module(CUmodule *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    struct sim_module *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = MAGIC_MODULE;
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    if (!image)
        return CUDA_ERROR_INVALID_VALUE;
    return new_module(module);
}

SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return cuModuleLoadData(module, fatCubin);
}

SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                       CUjit_option *options, void **optionValues)
{
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return cuModuleLoadData(module, image);
}

static CUresult get_function(struct sim_module *m, const char *name, struct sim_func **out)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_func *f;
    for (f = m->funcs; f; f = f->next)
        if (!strcmp(f->name, name))
            break;
    if (!f) {
        f = calloc(1, sizeof *f);
        if (f)
            f->name = strdup(name);
        if (!f || !f->name) {
            free(f);
            pthread_mutex_unlock(&sim_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        f->magic = MAGIC_FUNC;
        f->mod = m;
        f->family = -1;
        f->next = m->funcs;
        m->funcs = f;
    }
    pthread_mutex_unlock(&sim_lock);
    *out = f;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct sim_module *m = mod_of(hmod);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    return get_function(m, name, (struct sim_func **)hfunc);
}

/* Function objects outlive their module: a profiler may still ask a function's name after the
 * program unloaded it (the real driver would answer INVALID_HANDLE; leaking is kinder here). */
SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    struct sim_module *m = mod_of(hmod);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    m->magic = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    struct sim_func *f = mod_func(hfunc);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    return cuFuncGetName(name, (CUfunction)hfunc);
}

SIM_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    if (!mod_func((CUfunction)kernel))
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = (CUfunction)kernel;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    struct sim_func *f = mod_func(hfunc);
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *hmod = (CUmodule)f->mod;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    struct sim_func *f = mod_func(hfunc);
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dyn_shmem; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct sim_func *f = mod_func(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        f->max_dyn_shmem = value;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    (void)config;
    return mod_func(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- libraries (CUDA 12 context-independent loading): a library is a module ---- */

SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                      void **jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                      unsigned int numLibraryOptions)
{
    (void)jitOptions;
    (void)jitOptionsValues;
    (void)numJitOptions;
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions;
    if (!code)
        return CUDA_ERROR_INVALID_VALUE;
    return new_module((CUmodule *)library);
}

SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    return cuModuleGetFunction((CUfunction *)pKernel, (CUmodule)library, name);
}

SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) { return cuModuleUnload((CUmodule)library); }
