/* simgpu fake libcudart.so.13: driver loading, errors, registration, launches, device queries.
 * (Streams, events, memory and graphs: rtapi.c.) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

struct rt_driver rt_drv;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t init_result = cudaErrorInsufficientDriver;
static __thread cudaError_t last_error;

static void do_init(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return;
    rt_drv.GetProcAddress = (__typeof__(rt_drv.GetProcAddress))dlsym(h, "cuGetProcAddress_v2");
    if (!rt_drv.GetProcAddress)
        return;
    CUdriverProcAddressQueryResult q;
#define X(field, name, ver, ptsz)                                                                 \
    rt_drv.GetProcAddress(name, &rt_drv.field, ver,                                               \
                          ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &q);
    RT_DRIVER_FNS(X)
#undef X
    /* everything but simgpuSetLaunchInfo (absent on a real driver) is required */
#define X(field, name, ver, ptsz)                                                                 \
    if (!rt_drv.field && strcmp(name, SIMGPU_SET_LAUNCH_INFO_NAME)) {                             \
        fprintf(stderr, "simgpu cudart: driver lacks %s\n", name);                                \
        return;                                                                                   \
    }
    RT_DRIVER_FNS(X)
#undef X
    CUcontext ctx;
    if (D(Init, cuInit)(0) != CUDA_SUCCESS || D(PrimaryCtxRetain, cuDevicePrimaryCtxRetain)(&ctx, 0) != CUDA_SUCCESS)
        return;
    D(CtxSetCurrent, cuCtxSetCurrent)(ctx);
    init_result = cudaSuccess;
}

cudaError_t rt_init(void)
{
    pthread_once(&init_once, do_init);
    if (init_result == cudaSuccess) {
        /* the primary context is current on every thread that uses the runtime */
        static __thread int ctx_set;
        if (!ctx_set) {
            CUcontext ctx;
            D(PrimaryCtxRetain, cuDevicePrimaryCtxRetain)(&ctx, 0);
            D(CtxSetCurrent, cuCtxSetCurrent)(ctx);
            ctx_set = 1;
        }
    }
    return init_result;
}

cudaError_t rt_set(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

/* Driver and runtime codes coincide for everything the simulator returns. */
cudaError_t rt_err(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_ILLEGAL_STATE:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_NOT_READY:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: return rt_set((cudaError_t)r);
    case CUDA_ERROR_INVALID_CONTEXT: return rt_set(cudaErrorDeviceUninitialized);
    default: return rt_set(cudaErrorUnknown);
    }
}

void rt_via_runtime(void)
{
    if (rt_drv.SetLaunchInfo) {
        struct simgpu_launch_info li = {.via = SIMGPU_VIA_RUNTIME};
        ((simgpu_set_launch_info_fn)rt_drv.SetLaunchInfo)(&li);
    }
}

/* ---- errors ---- */

RT_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

RT_EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

static const struct {
    cudaError_t e;
    const char *name, *text;
} errs[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

RT_EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].e == error)
            return errs[i].name;
    return "cudaErrorUnknown";
}

RT_EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].e == error)
            return errs[i].text;
    return "unrecognized error code";
}

/* ---- registration: host stub -> device name; CUfunction created on first use ---- */

struct fatbin {
    void *image; /* the __fatBinC_Wrapper_t: never parsed, only handed to cuModuleLoadData */
    CUmodule mod;
};
struct kfunc {
    const void *host;
    char *name;
    struct fatbin *fb;
    CUfunction f;
};
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kfunc *kfuncs;
static size_t nkfuncs, capkfuncs;

RT_EXPORT void **__cudaRegisterFatBinary(void *fatCubin)
{
    struct fatbin *fb = calloc(1, sizeof *fb);
    if (!fb)
        abort();
    fb->image = fatCubin;
    return (void **)fb;
}

RT_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

/* Registered functions stay known after unregistration: the atexit handler runs while other
 * threads or destructors may still launch. */
RT_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle) { (void)fatCubinHandle; }

RT_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                                      dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)deviceFun;
    (void)thread_limit;
    (void)tid;
    (void)bid;
    (void)bDim;
    (void)gDim;
    (void)wSize;
    pthread_mutex_lock(&reg_lock);
    if (nkfuncs == capkfuncs) {
        capkfuncs = capkfuncs ? capkfuncs * 2 : 32;
        kfuncs = realloc(kfuncs, capkfuncs * sizeof *kfuncs);
        if (!kfuncs)
            abort();
    }
    kfuncs[nkfuncs++] = (struct kfunc){hostFun, strdup(deviceName), (struct fatbin *)fatCubinHandle, NULL};
    pthread_mutex_unlock(&reg_lock);
}

RT_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
    (void)ext, (void)size, (void)constant, (void)global;
}

RT_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
    (void)ext, (void)size, (void)constant, (void)global;
}

RT_EXPORT char __cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

CUfunction rt_func_of(const void *hostFun)
{
    if (rt_init() != cudaSuccess)
        return NULL;
    CUfunction f = NULL;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nkfuncs; i++) {
        struct kfunc *k = &kfuncs[i];
        if (k->host != hostFun)
            continue;
        if (!k->f) {
            if (!k->fb->mod)
                D(ModuleLoadData, cuModuleLoadData)(&k->fb->mod, k->fb->image);
            if (k->fb->mod)
                D(ModuleGetFunction, cuModuleGetFunction)(&k->f, k->fb->mod, k->name);
        }
        f = k->f;
        break;
    }
    pthread_mutex_unlock(&reg_lock);
    return f;
}

const void *rt_host_of(CUfunction f)
{
    const void *h = NULL;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nkfuncs && !h; i++)
        if (kfuncs[i].f == f)
            h = kfuncs[i].host;
    pthread_mutex_unlock(&reg_lock);
    return h;
}

static const char *name_of_host(const void *hostFun)
{
    const char *n = NULL;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nkfuncs && !n; i++)
        if (kfuncs[i].host == hostFun)
            n = kfuncs[i].name;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

/* ---- launch configuration (<<<>>>): a per-thread stack ---- */

struct callcfg {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};
static __thread struct callcfg cfg_stack[16];
static __thread int cfg_depth;

RT_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream)
{
    if (cfg_depth >= 16)
        return 1;
    cfg_stack[cfg_depth++] = (struct callcfg){gridDim, blockDim, sharedMem, stream};
    return 0;
}

RT_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (cfg_depth <= 0)
        return rt_set(cudaErrorInvalidConfiguration);
    struct callcfg c = cfg_stack[--cfg_depth];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.shmem;
    *(cudaStream_t *)stream = c.stream;
    return cudaSuccess;
}

/* ---- launches ---- */

static cudaError_t launch(CUfunction f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s, int ptsz)
{
    INIT_OR_RETURN();
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    rt_via_runtime();
    CUresult r = ptsz ? D(LaunchKernel_ptsz, cuLaunchKernel_ptsz)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shm,
                                                                  (CUstream)s, args, NULL)
                      : D(LaunchKernel, cuLaunchKernel)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shm,
                                                        (CUstream)s, args, NULL);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return rt_set(cudaErrorInvalidConfiguration);
    return rt_err(r);
}

RT_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    if (!kernelPtr)
        return rt_set(cudaErrorInvalidValue);
    CUfunction f = rt_func_of(entryFuncAddr);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    *kernelPtr = (cudaKernel_t)f;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    return __cudaGetKernel(kernelPtr, entryFuncAddr);
}

RT_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    return launch((CUfunction)kernel, g, b, args, shm, s, 0);
}

RT_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t shm,
                                              cudaStream_t s)
{
    return launch((CUfunction)kernel, g, b, args, shm, s, 1);
}

RT_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s)
{
    return launch(rt_func_of(func), g, b, args, shm, s, 0);
}

RT_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t shm,
                                            cudaStream_t s)
{
    return launch(rt_func_of(func), g, b, args, shm, s, 1);
}

RT_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    if (!config)
        return rt_set(cudaErrorInvalidValue);
    return launch(rt_func_of(func), config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                  config->stream, 0);
}

RT_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    if (!config)
        return rt_set(cudaErrorInvalidValue);
    return launch(rt_func_of(func), config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                  config->stream, 1);
}

RT_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm,
                                                  cudaStream_t s)
{
    return launch(rt_func_of(func), g, b, args, shm, s, 0);
}

RT_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 g, dim3 b, void **args,
                                                       size_t shm, cudaStream_t s)
{
    return launch(rt_func_of(func), g, b, args, shm, s, 1);
}

/* ---- functions ---- */

RT_EXPORT cudaError_t cudaFuncGetName(const char **name, const void *func)
{
    if (!name)
        return rt_set(cudaErrorInvalidValue);
    const char *n = name_of_host(func);
    if (!n)
        return rt_set(cudaErrorInvalidDeviceFunction);
    *name = n;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    if (!functionPtr)
        return rt_set(cudaErrorInvalidValue);
    CUfunction f = rt_func_of(symbolPtr);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    *functionPtr = (cudaFunction_t)f;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    if (!attr)
        return rt_set(cudaErrorInvalidValue);
    CUfunction f = rt_func_of(func);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    int v = 0;
    D(FuncGetAttribute, cuFuncGetAttribute)(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
    attr->maxDynamicSharedSizeBytes = v;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    CUfunction f = rt_func_of(func);
    if (!f)
        return rt_set(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
        return rt_err(D(FuncSetAttribute, cuFuncSetAttribute)(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value));
    return cudaSuccess;
}

/* ---- driver entry points ---- */

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int ver, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status, int ptsz)
{
    INIT_OR_RETURN();
    if (!funcPtr || !symbol)
        return rt_set(cudaErrorInvalidValue);
    cuuint64_t f = 0;
    if (flags & cudaEnablePerThreadDefaultStream)
        f = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    else if (flags & cudaEnableLegacyStream)
        f = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    else if (ptsz) /* cudaEnableDefault from a per-thread-default-stream program */
        f = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = rt_drv.GetProcAddress(symbol, funcPtr, (int)ver, f, &q);
    if (status)
        *status = (enum cudaDriverEntryPointQueryResult)q;
    return r == CUDA_SUCCESS ? cudaSuccess : r == CUDA_ERROR_NOT_FOUND ? cudaSuccess : rt_err(r);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, 13000, flags, driverStatus, 0);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, 13000, flags, driverStatus, 1);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 0);
}

RT_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                            unsigned int cudaVersion, unsigned long long flags,
                                                            enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, 1);
}

/* ---- device ---- */

RT_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return rt_set(cudaErrorInvalidValue);
    *count = rt_init() == cudaSuccess ? 1 : 0;
    return *count ? cudaSuccess : rt_set(cudaErrorNoDevice);
}

RT_EXPORT cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return rt_set(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaSetDevice(int device)
{
    INIT_OR_RETURN();
    return device == 0 ? cudaSuccess : rt_set(cudaErrorInvalidDevice);
}

RT_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    INIT_OR_RETURN();
    if (device != 0)
        return rt_set(cudaErrorInvalidDevice);
    /* the runtime's enum values equal the driver's */
    return rt_err(D(DeviceGetAttribute, cuDeviceGetAttribute)(value, (CUdevice_attribute)attr, 0));
}

RT_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    INIT_OR_RETURN();
    if (!prop)
        return rt_set(cudaErrorInvalidValue);
    if (device != 0)
        return rt_set(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    D(DeviceGetName, cuDeviceGetName)(prop->name, sizeof prop->name, 0);
    D(DeviceTotalMem, cuDeviceTotalMem_v2)(&prop->totalGlobalMem, 0);
    int v;
#define A(field, attr)                                                                            \
    D(DeviceGetAttribute, cuDeviceGetAttribute)(&v, attr, 0);                                     \
    prop->field = v;
    A(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    A(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    A(multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    A(warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE)
    A(maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    A(maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
    A(regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)
    A(sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
    A(sharedMemPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    A(sharedMemPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
    A(totalConstMem, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY)
    A(l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
    A(memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
    A(maxThreadsDim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)
    A(maxThreadsDim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)
    A(maxThreadsDim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)
    A(maxGridSize[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)
    A(maxGridSize[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)
    A(maxGridSize[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)
    A(concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)
    A(unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)
    A(asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)
#undef A
    return cudaSuccess;
}

RT_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    INIT_OR_RETURN();
    return rt_err(D(CtxSynchronize, cuCtxSynchronize)());
}

RT_EXPORT cudaError_t cudaDeviceReset(void)
{
    INIT_OR_RETURN();
    return rt_err(D(CtxSynchronize, cuCtxSynchronize)());
}

RT_EXPORT cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return rt_set(cudaErrorInvalidValue);
    if (rt_init() != cudaSuccess) {
        *driverVersion = 0;
        return cudaSuccess;
    }
    return rt_err(D(DriverGetVersion, cuDriverGetVersion)(driverVersion));
}

RT_EXPORT cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return rt_set(cudaErrorInvalidValue);
    *runtimeVersion = 13000;
    return cudaSuccess;
}
