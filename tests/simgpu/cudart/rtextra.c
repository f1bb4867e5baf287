/* simgpu fake libcudart.so.13: the runtime calls real clients (PyTorch's caching allocator, CUDA
 * graphs, its stream pool, Inductor) need beyond the basics in rtapi.c. Each forwards to a driver
 * entry point looked up once through cuGetProcAddress, as the real runtime does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void *driver_proc(const char *name, int ptsz)
{
    void *p = NULL;
    if (rt_drv.GetProcAddress(name, &p, 13000, ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0,
                              NULL) != CUDA_SUCCESS)
        p = NULL;
    return p;
}

/* The driver function NAME (a base name, as the runtime asks for it), typed like PROTO, looked up
 * at the first call of each site. */
#define DRV(proto, name, ptsz)                                                                    \
    ({                                                                                            \
        static void *p_;                                                                          \
        void *q_ = __atomic_load_n(&p_, __ATOMIC_RELAXED);                                        \
        if (!q_) {                                                                                \
            q_ = driver_proc(name, ptsz);                                                         \
            __atomic_store_n(&p_, q_, __ATOMIC_RELAXED);                                          \
        }                                                                                         \
        (__typeof__(&proto))q_;                                                                   \
    })

/* Forward: one driver call (the function must exist in the fake driver). */
#define FWD(proto, name, ptsz, ...)                                                               \
    do {                                                                                          \
        INIT_OR_RETURN();                                                                         \
        return rt_err(DRV(proto, name, ptsz)(__VA_ARGS__));                                       \
    } while (0)

/* ---- device, peers, profiler ---- */

RT_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    FWD(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 0, least, greatest);
}

RT_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer)
{
    if (!can)
        return rt_set(cudaErrorInvalidValue);
    if (dev != 0 || peer != 0)
        return rt_set(cudaErrorInvalidDevice);
    *can = 0; /* one device */
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    (void)flags;
    return rt_set(peer == 0 ? cudaErrorInvalidDevice : cudaErrorInvalidDevice);
}

RT_EXPORT cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int dev)
{
    if (!id || len <= 0)
        return rt_set(cudaErrorInvalidValue);
    if (dev != 0)
        return rt_set(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:19:00.0");
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
RT_EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

RT_EXPORT cudaError_t cudaDeviceGetGraphMemAttribute(int dev, enum cudaGraphMemAttributeType attr, void *value)
{
    (void)attr;
    if (dev != 0)
        return rt_set(cudaErrorInvalidDevice);
    if (!value)
        return rt_set(cudaErrorInvalidValue);
    *(unsigned long long *)value = 0; /* no graph memory nodes are simulated */
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaDeviceSetGraphMemAttribute(int dev, enum cudaGraphMemAttributeType attr, void *value)
{
    (void)attr;
    (void)value;
    return dev == 0 ? cudaSuccess : rt_set(cudaErrorInvalidDevice);
}

RT_EXPORT cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t k, enum cudaFuncAttribute attr, int value, int dev)
{
    if (dev != 0)
        return rt_set(cudaErrorInvalidDevice);
    FWD(cuFuncSetAttribute, "cuFuncSetAttribute", 0, (CUfunction)k, (CUfunction_attribute)attr, value);
}

/* ---- streams and capture ---- */

RT_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t s, int *p) { FWD(cuStreamGetPriority, "cuStreamGetPriority", 0, s, p); }
RT_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *p)
{
    FWD(cuStreamGetPriority_ptsz, "cuStreamGetPriority", 1, s, p);
}

RT_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    FWD(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 0, (CUstreamCaptureMode *)mode);
}

RT_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    FWD(cuLaunchHostFunc, "cuLaunchHostFunc", 0, s, fn, data);
}
RT_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *data)
{
    FWD(cuLaunchHostFunc_ptsz, "cuLaunchHostFunc", 1, s, fn, data);
}

/* A runtime callback gets a cudaError_t where the driver's gets a CUresult: same values here. */
RT_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned int flags)
{
    FWD(cuStreamAddCallback, "cuStreamAddCallback", 0, s, (CUstreamCallback)cb, data, flags);
}
RT_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *data,
                                                 unsigned int flags)
{
    FWD(cuStreamAddCallback_ptsz, "cuStreamAddCallback", 1, s, (CUstreamCallback)cb, data, flags);
}

/* ---- graphs: user objects (PyTorch ties graph-owned memory to them) ---- */

struct user_object {
    void *ptr;
    cudaHostFn_t destroy;
    int refs;
};

RT_EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *obj, void *ptr, cudaHostFn_t destroy,
                                           unsigned int count, unsigned int flags)
{
    (void)flags;
    if (!obj || !destroy || !count)
        return rt_set(cudaErrorInvalidValue);
    struct user_object *u = calloc(1, sizeof *u);
    if (!u)
        return rt_set(cudaErrorMemoryAllocation);
    *u = (struct user_object){ptr, destroy, (int)count};
    *obj = (cudaUserObject_t)u;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaUserObjectRetain(cudaUserObject_t obj, unsigned int count)
{
    struct user_object *u = (struct user_object *)obj;
    if (!u)
        return rt_set(cudaErrorInvalidValue);
    __atomic_add_fetch(&u->refs, (int)count, __ATOMIC_RELAXED);
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaUserObjectRelease(cudaUserObject_t obj, unsigned int count)
{
    struct user_object *u = (struct user_object *)obj;
    if (!u)
        return rt_set(cudaErrorInvalidValue);
    if (__atomic_sub_fetch(&u->refs, (int)count, __ATOMIC_ACQ_REL) == 0) {
        u->destroy(u->ptr);
        free(u);
    }
    return cudaSuccess;
}

/* The graph keeps its reference until it is destroyed; graphs here never release user objects
 * (they are few, and outlive nothing that matters in a test): README.md. */
RT_EXPORT cudaError_t cudaGraphRetainUserObject(cudaGraph_t g, cudaUserObject_t obj, unsigned int count,
                                                unsigned int flags)
{
    (void)g;
    if (flags & cudaGraphUserObjectMove)
        return obj ? cudaSuccess : rt_set(cudaErrorInvalidValue);
    return cudaUserObjectRetain(obj, count);
}

/* ---- memory: stream-ordered allocation, pools, registration, 2D and peer copies ---- */

RT_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s)
{
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    if (!size) {
        *p = NULL;
        return cudaSuccess;
    }
    FWD(cuMemAllocAsync, "cuMemAllocAsync", 0, (CUdeviceptr *)p, size, s);
}
RT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s)
{
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    FWD(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 1, (CUdeviceptr *)p, size, s);
}

RT_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    FWD(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, (CUdeviceptr *)p, size, (CUmemoryPool)pool, s);
}

RT_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    if (!p)
        return cudaSuccess;
    FWD(cuMemFreeAsync, "cuMemFreeAsync", 0, (CUdeviceptr)(uintptr_t)p, s);
}
RT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    if (!p)
        return cudaSuccess;
    FWD(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 1, (CUdeviceptr)(uintptr_t)p, s);
}

RT_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev)
{
    FWD(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 0, (CUmemoryPool *)pool, dev);
}
RT_EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int dev)
{
    FWD(cuDeviceGetMemPool, "cuDeviceGetMemPool", 0, (CUmemoryPool *)pool, dev);
}
RT_EXPORT cudaError_t cudaDeviceSetMemPool(int dev, cudaMemPool_t pool)
{
    FWD(cuDeviceSetMemPool, "cuDeviceSetMemPool", 0, dev, (CUmemoryPool)pool);
}
RT_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    FWD(cuMemPoolCreate, "cuMemPoolCreate", 0, (CUmemoryPool *)pool, (const CUmemPoolProps *)props);
}
RT_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) { FWD(cuMemPoolDestroy, "cuMemPoolDestroy", 0, (CUmemoryPool)pool); }
RT_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    FWD(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 0, (CUmemoryPool)pool, (CUmemPool_attribute)attr, value);
}
RT_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    FWD(cuMemPoolGetAttribute, "cuMemPoolGetAttribute", 0, (CUmemoryPool)pool, (CUmemPool_attribute)attr, value);
}
RT_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    FWD(cuMemPoolTrimTo, "cuMemPoolTrimTo", 0, (CUmemoryPool)pool, keep);
}
RT_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *map, size_t count)
{
    FWD(cuMemPoolSetAccess, "cuMemPoolSetAccess", 0, (CUmemoryPool)pool, (const CUmemAccessDesc *)map, count);
}

RT_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
    FWD(cuMemHostRegister_v2, "cuMemHostRegister", 0, p, size, flags);
}
RT_EXPORT cudaError_t cudaHostUnregister(void *p) { FWD(cuMemHostUnregister, "cuMemHostUnregister", 0, p); }

RT_EXPORT cudaError_t cudaHostGetDevicePointer(void **pdev, void *host, unsigned int flags)
{
    FWD(cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer", 0, (CUdeviceptr *)pdev, host, flags);
}

/* The kind is ignored as in every copy here (README.md): the driver's registry knows device from
 * host memory, so CU_MEMORYTYPE_UNIFIED on both sides lets it decide. */
static CUDA_MEMCPY2D copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    CUDA_MEMCPY2D c = {0};
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.srcHost = src;
    c.srcPitch = spitch;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.dstHost = dst;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    return c;
}

RT_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind)
{
    (void)kind;
    CUDA_MEMCPY2D c = copy2d(dst, dpitch, src, spitch, width, height);
    rt_via_runtime();
    FWD(cuMemcpy2D_v2, "cuMemcpy2D", 0, &c);
}

RT_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    CUDA_MEMCPY2D c = copy2d(dst, dpitch, src, spitch, width, height);
    rt_via_runtime();
    FWD(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", 0, &c, s);
}
RT_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                             size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    CUDA_MEMCPY2D c = copy2d(dst, dpitch, src, spitch, width, height);
    rt_via_runtime();
    FWD(cuMemcpy2DAsync_v2_ptsz, "cuMemcpy2DAsync", 1, &c, s);
}

/* One device: a peer copy is a device-to-device copy. */
RT_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n, cudaStream_t s)
{
    if (ddev != 0 || sdev != 0)
        return rt_set(cudaErrorInvalidDevice);
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}

RT_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int ddev, const void *src, int sdev, size_t n)
{
    if (ddev != 0 || sdev != 0)
        return rt_set(cudaErrorInvalidDevice);
    return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}

/* ---- occupancy ---- */

RT_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *num, const void *fn, int block,
                                                                             size_t shmem, unsigned int flags)
{
    INIT_OR_RETURN();
    CUfunction f = rt_func_of(fn);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    return rt_err(DRV(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                      "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 0)(num, f, block, shmem, flags));
}

RT_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *num, const void *fn, int block, size_t shmem)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num, fn, block, shmem, 0);
}

/* ---- graph exec update (llama.cpp: a re-captured decode graph updates the exec it has) ---- */

RT_EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info)
{
    FWD(cuGraphExecUpdate_v2, "cuGraphExecUpdate", 0, (CUgraphExec)x, (CUgraph)g,
        (CUgraphExecUpdateResultInfo *)info);
}
