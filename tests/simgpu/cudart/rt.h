/* simgpu fake libcudart.so.13 internals.
 *
 * Like the real runtime, the fake reaches the driver only through
 * dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2"), then asks cuGetProcAddress for every
 * entry point: the plain variant for the normal exports, the per-thread one
 * (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) for the _ptsz/_ptds exports. So a profiler
 * that wraps cuGetProcAddress sees the same requests it would see from the real libcudart. */
#ifndef SIMGPU_RT_H
#define SIMGPU_RT_H

#define __CUDA_API_VERSION_INTERNAL 1 /* declare every exported name literally */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu_ext.h"

#define RT_EXPORT __attribute__((visibility("default")))

/* Driver entry points: X(field, name asked of cuGetProcAddress, version, ptsz?) */
#define RT_DRIVER_FNS(X)                                                                          \
    X(Init, "cuInit", 2000, 0)                                                                    \
    X(DriverGetVersion, "cuDriverGetVersion", 2020, 0)                                            \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", 2000, 0)                                        \
    X(DeviceGetName, "cuDeviceGetName", 2000, 0)                                                  \
    X(DeviceTotalMem, "cuDeviceTotalMem", 3020, 0)                                                \
    X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0)                                      \
    X(CtxSetCurrent, "cuCtxSetCurrent", 4000, 0)                                                  \
    X(CtxSynchronize, "cuCtxSynchronize", 2000, 0)                                                \
    X(ModuleLoadData, "cuModuleLoadData", 2000, 0)                                                \
    X(ModuleGetFunction, "cuModuleGetFunction", 2000, 0)                                          \
    X(FuncGetName, "cuFuncGetName", 12030, 0)                                                     \
    X(FuncSetAttribute, "cuFuncSetAttribute", 9000, 0)                                            \
    X(FuncGetAttribute, "cuFuncGetAttribute", 2020, 0)                                            \
    X(LaunchKernel, "cuLaunchKernel", 4000, 0)                                                    \
    X(LaunchKernel_ptsz, "cuLaunchKernel", 7000, 1)                                               \
    X(StreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, 0)                            \
    X(StreamDestroy, "cuStreamDestroy", 4000, 0)                                                  \
    X(StreamSynchronize, "cuStreamSynchronize", 2000, 0)                                          \
    X(StreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 1)                                     \
    X(StreamQuery, "cuStreamQuery", 2000, 0)                                                      \
    X(StreamQuery_ptsz, "cuStreamQuery", 7000, 1)                                                 \
    X(StreamWaitEvent, "cuStreamWaitEvent", 3020, 0)                                              \
    X(StreamWaitEvent_ptsz, "cuStreamWaitEvent", 7000, 1)                                         \
    X(EventCreate, "cuEventCreate", 2000, 0)                                                      \
    X(EventRecord, "cuEventRecord", 2000, 0)                                                      \
    X(EventRecord_ptsz, "cuEventRecord", 7000, 1)                                                 \
    X(EventRecordWithFlags, "cuEventRecordWithFlags", 11010, 0)                                   \
    X(EventRecordWithFlags_ptsz, "cuEventRecordWithFlags", 11010, 1)                              \
    X(EventQuery, "cuEventQuery", 2000, 0)                                                        \
    X(EventSynchronize, "cuEventSynchronize", 2000, 0)                                            \
    X(EventElapsedTime, "cuEventElapsedTime", 12080, 0)                                           \
    X(EventDestroy, "cuEventDestroy", 4000, 0)                                                    \
    X(MemAlloc, "cuMemAlloc", 3020, 0)                                                            \
    X(MemFree, "cuMemFree", 3020, 0)                                                              \
    X(MemHostAlloc, "cuMemHostAlloc", 2020, 0)                                                    \
    X(MemFreeHost, "cuMemFreeHost", 2000, 0)                                                      \
    X(MemGetInfo, "cuMemGetInfo", 3020, 0)                                                        \
    X(PointerGetAttribute, "cuPointerGetAttribute", 4000, 0)                                      \
    X(Memcpy, "cuMemcpy", 4000, 0)                                                                \
    X(Memcpy_ptds, "cuMemcpy", 7000, 1)                                                           \
    X(MemcpyAsync, "cuMemcpyAsync", 4000, 0)                                                      \
    X(MemcpyAsync_ptsz, "cuMemcpyAsync", 7000, 1)                                                 \
    X(MemsetD8, "cuMemsetD8", 3020, 0)                                                            \
    X(MemsetD8_ptds, "cuMemsetD8", 7000, 1)                                                       \
    X(MemsetD8Async, "cuMemsetD8Async", 3020, 0)                                                  \
    X(MemsetD8Async_ptsz, "cuMemsetD8Async", 7000, 1)                                             \
    X(StreamBeginCapture, "cuStreamBeginCapture", 10010, 0)                                       \
    X(StreamBeginCapture_ptsz, "cuStreamBeginCapture", 10010, 1)                                  \
    X(StreamEndCapture, "cuStreamEndCapture", 10000, 0)                                           \
    X(StreamEndCapture_ptsz, "cuStreamEndCapture", 10000, 1)                                      \
    X(StreamIsCapturing, "cuStreamIsCapturing", 10000, 0)                                         \
    X(StreamIsCapturing_ptsz, "cuStreamIsCapturing", 10000, 1)                                    \
    X(StreamGetCaptureInfo, "cuStreamGetCaptureInfo", 12030, 0)                                   \
    X(StreamGetCaptureInfo_ptsz, "cuStreamGetCaptureInfo", 12030, 1)                              \
    X(GraphCreate, "cuGraphCreate", 10000, 0)                                                     \
    X(GraphDestroy, "cuGraphDestroy", 10000, 0)                                                   \
    X(GraphAddKernelNode, "cuGraphAddKernelNode", 12000, 0)                                       \
    X(GraphGetNodes, "cuGraphGetNodes", 10000, 0)                                                 \
    X(GraphKernelNodeGetParams, "cuGraphKernelNodeGetParams", 12000, 0)                           \
    X(GraphInstantiate, "cuGraphInstantiate", 12000, 0)                                           \
    X(GraphExecDestroy, "cuGraphExecDestroy", 10000, 0)                                           \
    X(GraphLaunch, "cuGraphLaunch", 10000, 0)                                                     \
    X(GraphLaunch_ptsz, "cuGraphLaunch", 10000, 1)                                                \
    X(SetLaunchInfo, SIMGPU_SET_LAUNCH_INFO_NAME, 13000, 0)

struct rt_driver {
#define X(field, name, ver, ptsz) void *field;
    RT_DRIVER_FNS(X)
#undef X
    CUresult (*GetProcAddress)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
};

/* Typed call through the table, typed by the real prototype of the driver symbol the entry
 * resolves to: D(MemAlloc, cuMemAlloc_v2)(&p, n). __typeof__ creates no link dependency. */
extern struct rt_driver rt_drv;
#define D(field, proto) ((__typeof__(&proto))rt_drv.field)

/* Loads the driver once (cuInit + primary context); cudaErrorInsufficientDriver if it fails. */
cudaError_t rt_init(void);
/* Records a failure as the thread's sticky last error and returns it. */
cudaError_t rt_err(CUresult r);
cudaError_t rt_set(cudaError_t e);
void rt_via_runtime(void);
/* The CUfunction of a registered host stub (lazy module load), or NULL. */
CUfunction rt_func_of(const void *hostFun);
const void *rt_host_of(CUfunction f);

/* Returns the init failure from a runtime export. */
#define INIT_OR_RETURN()                                                                          \
    do {                                                                                          \
        cudaError_t e_ = rt_init();                                                               \
        if (e_ != cudaSuccess)                                                                    \
            return rt_set(e_);                                                                    \
    } while (0)

#endif
