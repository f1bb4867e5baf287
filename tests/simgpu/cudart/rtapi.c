/* simgpu fake libcudart.so.13: streams, events, memory and graphs, each a thin forward to the
 * driver entry point obtained through cuGetProcAddress (the _ptsz/_ptds exports forward to the
 * per-thread variants). cudaStream_t/cudaEvent_t/cudaGraph*_t are the driver's handles. */
#include <string.h>

#include "rt.h"

/* Forward: a runtime export that is one driver call. */
#define FWD(expr)                                                                                 \
    do {                                                                                          \
        INIT_OR_RETURN();                                                                         \
        return rt_err(expr);                                                                      \
    } while (0)

/* ---- streams ---- */

RT_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    FWD(D(StreamCreateWithPriority, cuStreamCreateWithPriority)((CUstream *)pStream, flags, priority));
}

RT_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

RT_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithPriority(pStream, 0, 0); }

RT_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s) { FWD(D(StreamDestroy, cuStreamDestroy_v2)(s)); }

RT_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) { FWD(D(StreamSynchronize, cuStreamSynchronize)(s)); }
RT_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
    FWD(D(StreamSynchronize_ptsz, cuStreamSynchronize_ptsz)(s));
}

RT_EXPORT cudaError_t cudaStreamQuery(cudaStream_t s) { FWD(D(StreamQuery, cuStreamQuery)(s)); }
RT_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { FWD(D(StreamQuery_ptsz, cuStreamQuery_ptsz)(s)); }

RT_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    FWD(D(StreamWaitEvent, cuStreamWaitEvent)(s, e, flags));
}

RT_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    FWD(D(StreamWaitEvent_ptsz, cuStreamWaitEvent_ptsz)(s, e, flags));
}

/* ---- capture ---- */

RT_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    FWD(D(StreamBeginCapture, cuStreamBeginCapture_v2)(s, (CUstreamCaptureMode)mode));
}

RT_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    FWD(D(StreamBeginCapture_ptsz, cuStreamBeginCapture_v2_ptsz)(s, (CUstreamCaptureMode)mode));
}

RT_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    FWD(D(StreamEndCapture, cuStreamEndCapture)(s, (CUgraph *)g));
}

RT_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    FWD(D(StreamEndCapture_ptsz, cuStreamEndCapture_ptsz)(s, (CUgraph *)g));
}

RT_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    FWD(D(StreamIsCapturing, cuStreamIsCapturing)(s, (CUstreamCaptureStatus *)st));
}

RT_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    FWD(D(StreamIsCapturing_ptsz, cuStreamIsCapturing_ptsz)(s, (CUstreamCaptureStatus *)st));
}

RT_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                               unsigned long long *id, cudaGraph_t *g,
                                               const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                               size_t *n)
{
    FWD(D(StreamGetCaptureInfo, cuStreamGetCaptureInfo_v3)(s, (CUstreamCaptureStatus *)st, (cuuint64_t *)id, (CUgraph *)g,
                                                            (const CUgraphNode **)deps,
                                                            (const CUgraphEdgeData **)edges, n));
}

RT_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                                    unsigned long long *id, cudaGraph_t *g,
                                                    const cudaGraphNode_t **deps,
                                                    const cudaGraphEdgeData **edges, size_t *n)
{
    FWD(D(StreamGetCaptureInfo_ptsz, cuStreamGetCaptureInfo_v3_ptsz)(s, (CUstreamCaptureStatus *)st, (cuuint64_t *)id,
                                                                      (CUgraph *)g, (const CUgraphNode **)deps,
                                                                      (const CUgraphEdgeData **)edges, n));
}

/* ---- graphs ---- */

RT_EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
    FWD(D(GraphCreate, cuGraphCreate)((CUgraph *)g, flags));
}

RT_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t g) { FWD(D(GraphDestroy, cuGraphDestroy)(g)); }

RT_EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps,
                                             size_t ndeps, const struct cudaKernelNodeParams *p)
{
    INIT_OR_RETURN();
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    CUfunction f = rt_func_of(p->func);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    CUDA_KERNEL_NODE_PARAMS kp = {
        .func = f, .gridDimX = p->gridDim.x, .gridDimY = p->gridDim.y, .gridDimZ = p->gridDim.z,
        .blockDimX = p->blockDim.x, .blockDimY = p->blockDim.y, .blockDimZ = p->blockDim.z,
        .sharedMemBytes = p->sharedMemBytes, .kernelParams = p->kernelParams, .extra = p->extra};
    return rt_err(D(GraphAddKernelNode, cuGraphAddKernelNode_v2)((CUgraphNode *)node, g,
                                                                 (const CUgraphNode *)deps, ndeps, &kp));
}

/* func comes back as the host stub for runtime kernels (as the real runtime does), and as the
 * CUfunction for kernels the runtime does not know (library or driver-loaded ones). */
RT_EXPORT cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, struct cudaKernelNodeParams *p)
{
    INIT_OR_RETURN();
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    CUDA_KERNEL_NODE_PARAMS kp;
    CUresult r = D(GraphKernelNodeGetParams, cuGraphKernelNodeGetParams_v2)(node, &kp);
    if (r != CUDA_SUCCESS)
        return rt_err(r);
    const void *host = rt_host_of(kp.func);
    p->func = (void *)(host ? host : (const void *)kp.func);
    p->gridDim = (dim3){kp.gridDimX, kp.gridDimY, kp.gridDimZ};
    p->blockDim = (dim3){kp.blockDimX, kp.blockDimY, kp.blockDimZ};
    p->sharedMemBytes = kp.sharedMemBytes;
    p->kernelParams = kp.kernelParams;
    p->extra = kp.extra;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    FWD(D(GraphGetNodes, cuGraphGetNodes)(g, (CUgraphNode *)nodes, n));
}

RT_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
    FWD(D(GraphInstantiate, cuGraphInstantiateWithFlags)((CUgraphExec *)x, g, flags));
}

RT_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
    return cudaGraphInstantiate(x, g, flags);
}

RT_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { FWD(D(GraphExecDestroy, cuGraphExecDestroy)(x)); }

RT_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) { FWD(D(GraphLaunch, cuGraphLaunch)(x, s)); }

RT_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s)
{
    FWD(D(GraphLaunch_ptsz, cuGraphLaunch_ptsz)(x, s));
}

/* ---- events ---- */

RT_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    FWD(D(EventCreate, cuEventCreate)((CUevent *)e, flags)); /* flag bits equal the driver's */
}

RT_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

RT_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { FWD(D(EventRecord, cuEventRecord)(e, s)); }

RT_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s)
{
    FWD(D(EventRecord_ptsz, cuEventRecord_ptsz)(e, s));
}

RT_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags)
{
    FWD(D(EventRecordWithFlags, cuEventRecordWithFlags)(e, s, flags));
}

RT_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags)
{
    FWD(D(EventRecordWithFlags_ptsz, cuEventRecordWithFlags_ptsz)(e, s, flags));
}

RT_EXPORT cudaError_t cudaEventQuery(cudaEvent_t e) { FWD(D(EventQuery, cuEventQuery)(e)); }
RT_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) { FWD(D(EventSynchronize, cuEventSynchronize)(e)); }
RT_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e) { FWD(D(EventDestroy, cuEventDestroy_v2)(e)); }

RT_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    FWD(D(EventElapsedTime, cuEventElapsedTime_v2)(ms, a, b));
}

/* ---- memory ---- */

RT_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    INIT_OR_RETURN();
    if (!p)
        return rt_set(cudaErrorInvalidValue);
    if (!size) { /* like CUDA: a zero-size allocation succeeds with NULL */
        *p = NULL;
        return cudaSuccess;
    }
    CUdeviceptr d = 0;
    CUresult r = D(MemAlloc, cuMemAlloc_v2)(&d, size);
    *p = (void *)(uintptr_t)d;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? rt_set(cudaErrorMemoryAllocation) : rt_err(r);
}

RT_EXPORT cudaError_t cudaFree(void *p)
{
    INIT_OR_RETURN();
    if (!p)
        return cudaSuccess;
    return rt_err(D(MemFree, cuMemFree_v2)((CUdeviceptr)(uintptr_t)p));
}

RT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    FWD(D(MemHostAlloc, cuMemHostAlloc)(p, size, flags));
}

RT_EXPORT cudaError_t cudaMallocHost(void **p, size_t size) { return cudaHostAlloc(p, size, 0); }

RT_EXPORT cudaError_t cudaFreeHost(void *p) { FWD(D(MemFreeHost, cuMemFreeHost)(p)); }

RT_EXPORT cudaError_t cudaMemGetInfo(size_t *free_, size_t *total) { FWD(D(MemGetInfo, cuMemGetInfo_v2)(free_, total)); }

RT_EXPORT cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
    INIT_OR_RETURN();
    if (!a)
        return rt_set(cudaErrorInvalidValue);
    unsigned int type = 0;
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    a->hostPointer = (void *)ptr;
    if (D(PointerGetAttribute, cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                      (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return cudaSuccess;
    a->type = type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    a->device = 0;
    a->devicePointer = (void *)ptr;
    a->hostPointer = type == CU_MEMORYTYPE_DEVICE ? NULL : (void *)ptr;
    return cudaSuccess;
}

#define DP(p) ((CUdeviceptr)(uintptr_t)(p))

/* The driver's unified cuMemcpy infers the direction from its allocation registry, as UVA's
 * cudaMemcpyDefault does; the kind argument is not needed. */
static cudaError_t memcpy_rt(void *dst, const void *src, size_t n, cudaStream_t s, int async, int ptsz)
{
    INIT_OR_RETURN();
    rt_via_runtime();
    if (async)
        return rt_err(ptsz ? D(MemcpyAsync_ptsz, cuMemcpyAsync_ptsz)(DP(dst), DP(src), n, s)
                           : D(MemcpyAsync, cuMemcpyAsync)(DP(dst), DP(src), n, s));
    return rt_err(ptsz ? D(Memcpy_ptds, cuMemcpy_ptds)(DP(dst), DP(src), n) : D(Memcpy, cuMemcpy)(DP(dst), DP(src), n));
}

RT_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    return memcpy_rt(dst, src, n, NULL, 0, 0);
}

RT_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    return memcpy_rt(dst, src, n, NULL, 0, 1);
}

RT_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    return memcpy_rt(dst, src, n, s, 1, 0);
}

RT_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                           cudaStream_t s)
{
    (void)kind;
    return memcpy_rt(dst, src, n, s, 1, 1);
}

static cudaError_t memset_rt(void *dst, int value, size_t n, cudaStream_t s, int async, int ptsz)
{
    INIT_OR_RETURN();
    rt_via_runtime();
    unsigned char v = (unsigned char)value;
    if (async)
        return rt_err(ptsz ? D(MemsetD8Async_ptsz, cuMemsetD8Async_ptsz)(DP(dst), v, n, s)
                           : D(MemsetD8Async, cuMemsetD8Async)(DP(dst), v, n, s));
    return rt_err(ptsz ? D(MemsetD8_ptds, cuMemsetD8_v2_ptds)(DP(dst), v, n) : D(MemsetD8, cuMemsetD8_v2)(DP(dst), v, n));
}

RT_EXPORT cudaError_t cudaMemset(void *p, int v, size_t n) { return memset_rt(p, v, n, NULL, 0, 0); }
RT_EXPORT cudaError_t cudaMemset_ptds(void *p, int v, size_t n) { return memset_rt(p, v, n, NULL, 0, 1); }
RT_EXPORT cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) { return memset_rt(p, v, n, s, 1, 0); }
RT_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s) { return memset_rt(p, v, n, s, 1, 1); }

/* Returned through memory (a 20-byte struct), so no generated stub can stand in for it. */
RT_EXPORT struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}
