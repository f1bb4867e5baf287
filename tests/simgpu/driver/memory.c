/* simgpu memory. Device memory is host memory: a CUdeviceptr is the address of a host buffer, so
 * copies really move bytes (at call time) and a program's cudaMemcpy round-trips its data. A
 * copy also occupies simulated stream time (cost.c); synchronous copies block the host until
 * their simulated end. A registry of allocations tells device from pinned from pageable memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* Device memory size: SIMGPU_MEM (bytes, or with a K/M/G suffix), default an H200's 141 GiB. */
static size_t total_mem(void)
{
    static size_t total;
    if (!total) {
        const char *e = getenv("SIMGPU_MEM");
        char *end = NULL;
        double v = e ? strtod(e, &end) : 0;
        if (end && *end)
            v *= *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' || *end == 'm' ? 1048576.0
                 : *end == 'G' || *end == 'g' ? 1073741824.0 : 1.0;
        total = v >= 1 ? (size_t)v : (141ull << 30);
    }
    return total;
}
#define SIM_TOTAL_MEM total_mem()
size_t mem_total(void) { return SIM_TOTAL_MEM; }

enum { ALLOC_DEVICE = 0, ALLOC_PINNED = 1 };
struct alloc {
    char *p;
    size_t size;
    int kind;
};
static struct alloc *allocs;
static size_t nallocs, capallocs;
static size_t device_bytes;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

static struct alloc *find_locked(const void *ptr)
{
    const char *c = ptr;
    for (size_t i = 0; i < nallocs; i++)
        if (c >= allocs[i].p && c < allocs[i].p + (allocs[i].size ? allocs[i].size : 1))
            return &allocs[i];
    return NULL;
}

static int kind_of(const void *p)
{
    pthread_mutex_lock(&mem_lock);
    struct alloc *a = find_locked(p);
    int k = a ? a->kind : -1;
    pthread_mutex_unlock(&mem_lock);
    return k;
}

int mem_is_pinned(const void *p) { return kind_of(p) == ALLOC_PINNED; }

int mem_fits(const void *p, size_t bytes)
{
    pthread_mutex_lock(&mem_lock);
    struct alloc *a = find_locked(p);
    int ok = a && bytes <= a->size && (size_t)((const char *)p - a->p) <= a->size - bytes;
    pthread_mutex_unlock(&mem_lock);
    return ok;
}
int mem_is_device(const void *p) { return kind_of(p) == ALLOC_DEVICE; }

/* Aligned as a real driver's: cuMemAlloc returns 512-byte aligned addresses (CUDA promises 256;
 * ggml's allocator aligns its first tensor from the buffer's base and sized the buffer assuming
 * the base aligned: with calloc's 16 it ran out), pinned host memory is page aligned. */
#define DEVICE_ALIGN 512
#define PINNED_ALIGN 4096

static void *do_alloc(size_t size, int kind)
{
    void *p = NULL;
    if (posix_memalign(&p, kind == ALLOC_DEVICE ? DEVICE_ALIGN : PINNED_ALIGN, size ? size : 1))
        return NULL;
    memset(p, 0, size ? size : 1);
    pthread_mutex_lock(&mem_lock);
    allocs = sim_grow(allocs, &capallocs, nallocs + 1, sizeof *allocs);
    allocs[nallocs++] = (struct alloc){p, size, kind};
    if (kind == ALLOC_DEVICE)
        device_bytes += size;
    pthread_mutex_unlock(&mem_lock);
    return p;
}

/* Memory the driver did not calloc (VMM mappings): known to the registry as device memory. */
void mem_register(void *p, size_t size)
{
    pthread_mutex_lock(&mem_lock);
    allocs = sim_grow(allocs, &capallocs, nallocs + 1, sizeof *allocs);
    allocs[nallocs++] = (struct alloc){p, size, ALLOC_DEVICE};
    device_bytes += size;
    pthread_mutex_unlock(&mem_lock);
}

void mem_unregister(void *p)
{
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].p == p && allocs[i].kind == ALLOC_DEVICE) {
            device_bytes -= allocs[i].size;
            allocs[i] = allocs[--nallocs];
            break;
        }
    pthread_mutex_unlock(&mem_lock);
}

/* Pinned registration of the caller's own memory (cuMemHostRegister). */
void mem_register_host(void *p, size_t size)
{
    pthread_mutex_lock(&mem_lock);
    allocs = sim_grow(allocs, &capallocs, nallocs + 1, sizeof *allocs);
    allocs[nallocs++] = (struct alloc){p, size, ALLOC_PINNED};
    pthread_mutex_unlock(&mem_lock);
}

int mem_unregister_host(void *p)
{
    int found = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nallocs && !found; i++)
        if (allocs[i].p == p && allocs[i].kind == ALLOC_PINNED) {
            allocs[i] = allocs[--nallocs];
            found = 1;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

static CUresult do_free(void *p, int kind)
{
    if (!p)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].p == p && allocs[i].kind == kind) {
            if (kind == ALLOC_DEVICE)
                device_bytes -= allocs[i].size;
            allocs[i] = allocs[--nallocs];
            pthread_mutex_unlock(&mem_lock);
            free(p);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr || !bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    void *p = do_alloc(bytesize, ALLOC_DEVICE);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return do_free((void *)(uintptr_t)dptr, ALLOC_DEVICE); }

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    (void)Flags;
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    *pp = do_alloc(bytesize, ALLOC_PINNED);
    return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }

SIM_EXPORT CUresult cuMemFreeHost(void *p) { return do_free(p, ALLOC_PINNED); }

SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    (void)Flags;
    if (!pdptr || !mem_is_pinned(p))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
    pthread_mutex_lock(&mem_lock);
    if (free_)
        *free_ = SIM_TOTAL_MEM - device_bytes;
    if (total)
        *total = SIM_TOTAL_MEM;
    pthread_mutex_unlock(&mem_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    pthread_mutex_lock(&mem_lock);
    struct alloc *a = find_locked((void *)(uintptr_t)dptr);
    if (a && a->kind == ALLOC_DEVICE) {
        if (pbase)
            *pbase = (CUdeviceptr)(uintptr_t)a->p;
        if (psize)
            *psize = a->size;
    }
    pthread_mutex_unlock(&mem_lock);
    return a && a->kind == ALLOC_DEVICE ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    int k = kind_of((void *)(uintptr_t)ptr);
    if (k < 0)
        return CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know */
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = k == ALLOC_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = (void *)(uintptr_t)ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT: return cuCtxGetCurrent((CUcontext *)data);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

void mem_do_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

void mem_do_set(void *dst, unsigned value, unsigned elemsize, size_t count)
{
    if (elemsize == 1) {
        memset(dst, (int)(value & 0xff), count);
        return;
    }
    unsigned char *d = dst;
    for (size_t i = 0; i < count; i++)
        memcpy(d + i * elemsize, &value, elemsize); /* little-endian: low bytes first */
}

static int copy_dir(const void *dst, const void *src)
{
    int dd = mem_is_device(dst), sd = mem_is_device(src);
    return sd ? (dd ? DIR_DTOD : DIR_DTOH) : (dd ? DIR_HTOD : DIR_HTOH);
}

static int copy_pinned(int dir, const void *dst, const void *src)
{
    switch (dir) {
    case DIR_HTOD: return mem_is_pinned(src);
    case DIR_DTOH: return mem_is_pinned(dst);
    case DIR_HTOH: return mem_is_pinned(src) && mem_is_pinned(dst);
    default: return 0;
    }
}

/* sync: the host waits for the copy's simulated end (cuMemcpy*, non-Async). */
static CUresult copy_body(void *dst, const void *src, size_t bytes, int dir, CUstream h, int ptsz,
                          int sync, int moved)
{
    if ((!dst || !src) && bytes)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    if (dir < 0)
        dir = copy_dir(dst, src);
    int pinned = copy_pinned(dir, dst, src);
    struct simgpu_launch_info li = sim_take_launch_info();
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->cap) {
        if (sync || moved) {
            pthread_mutex_unlock(&sim_lock);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        struct sim_node *n = graph_capture_node(s, CU_GRAPH_NODE_TYPE_MEMCPY);
        n->dst = dst;
        n->src = src;
        n->bytes = bytes;
        n->dir = dir;
        n->pinned = pinned;
        pthread_mutex_unlock(&sim_lock);
        return CUDA_SUCCESS;
    }
    if (!moved)
        mem_do_copy(dst, src, bytes);
    struct sim_op op = {.kind = 1, .name = "memcpy", .stream = s, .handle = h, .via = li.via,
                        .bytes = (double)bytes, .dir = dir, .pinned = pinned};
    op.end = cost_copy(bytes, dir, pinned);
    tl_exec(&op);
    pthread_mutex_unlock(&sim_lock);
    if (sync) {
        tlog_flush();
        sim_wait_until(op.end);
    }
    return CUDA_SUCCESS;
}

static CUresult memset_body(CUdeviceptr d, unsigned value, unsigned elemsize, size_t n, CUstream h,
                            int ptsz, int sync)
{
    void *dst = (void *)(uintptr_t)d;
    if (!dst && n)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    struct simgpu_launch_info li = sim_take_launch_info();
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->cap) {
        if (sync) {
            pthread_mutex_unlock(&sim_lock);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        struct sim_node *node = graph_capture_node(s, CU_GRAPH_NODE_TYPE_MEMSET);
        node->dst = dst;
        node->value = value;
        node->elemsize = elemsize;
        node->bytes = n * elemsize;
        pthread_mutex_unlock(&sim_lock);
        return CUDA_SUCCESS;
    }
    mem_do_set(dst, value, elemsize, n);
    struct sim_op op = {.kind = 2, .name = "memset", .stream = s, .handle = h, .via = li.via,
                        .bytes = (double)(n * elemsize)};
    op.end = cost_memset(n * elemsize);
    tl_exec(&op);
    pthread_mutex_unlock(&sim_lock);
    if (sync) {
        tlog_flush();
        sim_wait_until(op.end);
    }
    return CUDA_SUCCESS;
}

/* The observer (fake CUPTI) sees each copy/memset call by its exported name. */
static CUresult copy(void *dst, const void *src, size_t bytes, int dir, CUstream h, int ptsz, int sync)
{
    static const char *const names[2][5] = {
        {"cuMemcpyAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", ""},
        {"cuMemcpy", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", ""}};
    char api[64];
    snprintf(api, sizeof api, "%s%s", names[sync][dir + 1], ptsz ? (sync ? "_ptds" : "_ptsz") : "");
    sim_api(0, api);
    CUresult r = copy_body(dst, src, bytes, dir, h, ptsz, sync, 0);
    sim_api(1, api);
    return r;
}

static CUresult memset_op(CUdeviceptr d, unsigned value, unsigned elemsize, size_t n, CUstream h, int ptsz,
                          int sync)
{
    char api[64];
    snprintf(api, sizeof api, "cuMemsetD%u%s%s", elemsize * 8, sync ? "_v2" : "Async",
             ptsz ? (sync ? "_ptds" : "_ptsz") : "");
    sim_api(0, api);
    CUresult r = memset_body(d, value, elemsize, n, h, ptsz, sync);
    sim_api(1, api);
    return r;
}

#define P(x) ((void *)(uintptr_t)(x))

/* The unified copies: direction from the registry. */
SIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(P(dst), P(src), n, -1, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(P(dst), P(src), n, -1, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { return copy(P(dst), P(src), n, -1, h, 0, 0); }
SIM_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { return copy(P(dst), P(src), n, -1, h, 1, 0); }

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return copy(P(dst), src, n, DIR_HTOD, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) { return copy(P(dst), src, n, DIR_HTOD, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return copy(dst, P(src), n, DIR_DTOH, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) { return copy(dst, P(src), n, DIR_DTOH, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(P(dst), P(src), n, DIR_DTOD, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(P(dst), P(src), n, DIR_DTOD, NULL, 1, 1); }

SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) { return copy(P(dst), src, n, DIR_HTOD, h, 0, 0); }
SIM_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h) { return copy(P(dst), src, n, DIR_HTOD, h, 1, 0); }
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) { return copy(dst, P(src), n, DIR_DTOH, h, 0, 0); }
SIM_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h) { return copy(dst, P(src), n, DIR_DTOH, h, 1, 0); }
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { return copy(P(dst), P(src), n, DIR_DTOD, h, 0, 0); }
SIM_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { return copy(P(dst), P(src), n, DIR_DTOD, h, 1, 0); }

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_op(d, v, 1, n, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { return memset_op(d, v, 1, n, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return memset_op(d, v, 4, n, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { return memset_op(d, v, 4, n, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { return memset_op(d, v, 1, n, h, 0, 0); }
SIM_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { return memset_op(d, v, 1, n, h, 1, 0); }
SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { return memset_op(d, v, 4, n, h, 0, 0); }
SIM_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { return memset_op(d, v, 4, n, h, 1, 0); }

/* 2D copies (cuMemcpy2D[Async]): the rows are moved at call time like any copy; the stream sees
 * one copy of WidthInBytes x Height bytes. Not capturable here (graphs keep 1D copies only). */
static char *addr2d(CUmemorytype t, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t pitch)
{
    const char *base = t == CU_MEMORYTYPE_HOST ? host : (const char *)(uintptr_t)dev;
    if (t == CU_MEMORYTYPE_UNIFIED && !base)
        base = host;
    return base ? (char *)base + y * pitch + x : NULL;
}

CUresult mem_copy2d(const CUDA_MEMCPY2D *c, CUstream h, int ptsz, int sync)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    char *dst = addr2d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstPitch);
    const char *src = addr2d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcPitch);
    if ((!dst || !src) && c->WidthInBytes && c->Height)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->srcArray || c->dstArray)
        return CUDA_ERROR_NOT_SUPPORTED;
    const char *api = sync ? (ptsz ? "cuMemcpy2D_v2_ptds" : "cuMemcpy2D_v2")
                           : (ptsz ? "cuMemcpy2DAsync_v2_ptsz" : "cuMemcpy2DAsync_v2");
    sim_api(0, api);
    CUresult r = CUDA_SUCCESS;
    {
        pthread_mutex_lock(&sim_lock);
        struct sim_stream *s = tl_resolve(h, ptsz);
        int capturing = s && s->cap;
        pthread_mutex_unlock(&sim_lock);
        if (capturing)
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (r == CUDA_SUCCESS) {
        for (size_t y = 0; y < c->Height; y++)
            mem_do_copy(dst + y * c->dstPitch, src + y * c->srcPitch, c->WidthInBytes);
        r = copy_body(dst, src, c->WidthInBytes * c->Height, -1, h, ptsz, sync, 1);
    }
    sim_api(1, api);
    return r;
}

SIM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) { return mem_copy2d(c, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c) { return mem_copy2d(c, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c) { return mem_copy2d(c, NULL, 0, 1); }
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c) { return mem_copy2d(c, NULL, 1, 1); }
SIM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream h) { return mem_copy2d(c, h, 0, 0); }
SIM_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream h) { return mem_copy2d(c, h, 1, 0); }
