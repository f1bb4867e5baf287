/* simgpu core: process state, the clock, device and context queries, error strings. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static uint64_t id_counter;
static __thread struct simgpu_launch_info tl_info;
static __thread CUcontext tl_ctx;

/* One context object stands for every context: there is one device and one address space. */
static struct { uint32_t magic; } the_ctx = {MAGIC_CTX};
#define SIM_CTX ((CUcontext)(void *)&the_ctx)


static void do_init(void)
{
    cost_init();
    writes_init();
    tlog_init();
}

void sim_ensure_init(void) { pthread_once(&init_once, do_init); }

simtime_t sim_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (simtime_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Host-blocking calls wait for simulated GPU time to pass, so host-side timings (and a
 * profiler's view of them) behave like a real GPU's. ABSTIME makes the wake-up exact: when this
 * returns, CLOCK_MONOTONIC >= t, which the unit tests check. */
void sim_wait_until(simtime_t t)
{
    if (sim_zero())
        return;
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

uint64_t sim_next_id(void) { return __atomic_add_fetch(&id_counter, 1, __ATOMIC_RELAXED); }

void *sim_grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q)
        abort(); /* a test fixture: out of memory is not a case worth simulating */
    *cap = c;
    return q;
}

struct simgpu_launch_info sim_take_launch_info(void)
{
    struct simgpu_launch_info i = tl_info;
    memset(&tl_info, 0, sizeof tl_info);
    return i;
}

SIM_EXPORT CUresult simgpuSetLaunchInfo(const struct simgpu_launch_info *info)
{
    if (info)
        tl_info = *info;
    else
        memset(&tl_info, 0, sizeof tl_info);
    return CUDA_SUCCESS;
}

/* ---- init, version, device ---- */

SIM_EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    sim_ensure_init();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, "simgpu H200 (simulated)", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    static const char u[16] = "simgpu-uuid-0000";
    memcpy(uuid->bytes, u, 16);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = mem_total();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    int v;
    switch (attrib) { /* H200 SXM values */
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 3; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x19; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    /* the VMM API is simulated (extra.c): llama.cpp's pool takes it only when this says so;
     * SIMGPU_VMM=0 says no (a device without VMM: ggml's legacy pool, as a GGML_CUDA_NO_VMM build) */
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: {
        const char *e = getenv("SIMGPU_VMM");
        v = !(e && !strcmp(e, "0"));
        break;
    }
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
    default: v = 0; break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

/* ---- contexts: a single shared context; current-ness is tracked per thread ---- */

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                   CUdevice dev)
{
    (void)params;
    (void)flags;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    sim_ensure_init();
    *pctx = tl_ctx = SIM_CTX;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    if (ctx != SIM_CTX)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_ctx == ctx)
        tl_ctx = NULL;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    sim_ensure_init();
    *pctx = SIM_CTX;
    ctx_primary_retained(1);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    ctx_primary_retained(-1);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = tl_ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (ctx && ctx != SIM_CTX)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_ensure_init();
    tl_ctx = ctx;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (pctx)
        *pctx = tl_ctx;
    tl_ctx = NULL;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSynchronize(void)
{
    sim_ensure_init();
    pthread_mutex_lock(&sim_lock);
    simtime_t t = tl_all_tails();
    pthread_mutex_unlock(&sim_lock);
    tlog_flush();
    sim_wait_until(t);
    return CUDA_SUCCESS;
}

/* ---- errors ---- */

static const struct {
    CUresult r;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == error) {
            *pStr = errors[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    (void)pExportTableId;
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- observer (the fake libcupti.so.13) ---- */
static const struct simgpu_observer *_Atomic observer;

SIM_EXPORT CUresult simgpuSetObserver(const struct simgpu_observer *obs)
{
    atomic_store(&observer, obs);
    return CUDA_SUCCESS;
}

/* SIMGPU_API_NS: every launch call (kernel or graph) returns no earlier than that long after its
 * entry, as if a real driver's launch path took it (cost_api_ns): launch-bound steps then cost what
 * the knob says, not what this machine's load makes of the simulator's own bookkeeping. It sleeps
 * to API_SPIN_NS before the end and spins the rest: a wake-up's delay is hidden, and a client under
 * SCHED_FIFO that spun whole calls would run into the kernel's real-time throttling (95 % of each
 * second), a 50 ms stall a second. */
#define API_SPIN_NS 100000
static __thread simtime_t api_entry;

void sim_api(int site, const char *func)
{
    simtime_t cost = cost_api_ns();
    if (cost && site == 1) {
        simtime_t end = api_entry + cost;
        if (end - sim_now() > 2 * API_SPIN_NS)
            sim_wait_until(end - API_SPIN_NS);
        while (sim_now() < end)
            ;
    }
    const struct simgpu_observer *o = atomic_load(&observer);
    if (o && o->api)
        o->api(site, func);
    if (cost && site == 0)
        api_entry = sim_now();
}

void sim_observe(const struct sim_op *op)
{
    const struct simgpu_observer *o = atomic_load(&observer);
    if (!o || !o->op)
        return;
    struct simgpu_op_view v = {.kind = op->kind, .name = op->name, .stream_id = op->stream->id,
                               .start_ns = op->start, .end_ns = op->end,
                               .graph_node = op->graph_node, .graph_exec = op->graph_exec,
                               .bytes = (unsigned long long)op->bytes, .dir = op->dir};
    for (int i = 0; i < 3; i++) {
        v.grid[i] = op->grid[i];
        v.block[i] = op->block[i];
    }
    o->op(&v);
}
