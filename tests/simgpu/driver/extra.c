/* simgpu driver calls real clients (PyTorch, Triton, CUTLASS, vLLM's allocator) need beyond the
 * basics: primary-context state, stream queries and priorities, capture-mode exchange, module
 * loading by path, occupancy, tensor maps, host functions on streams, stream-ordered allocation
 * and pools, and the virtual memory API. Each does what a client can observe of the real one;
 * README.md's "what is not simulated" says where it stops. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

/* ---- primary context: active from the first retain until the last release ---- */

static int primary_refs;

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (flags)
        *flags = 0;
    if (active)
        *active = __atomic_load_n(&primary_refs, __ATOMIC_RELAXED) > 0;
    return CUDA_SUCCESS;
}

void ctx_primary_retained(int delta) { __atomic_add_fetch(&primary_refs, delta, __ATOMIC_RELAXED); }

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    (void)flags;
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    if (least) /* an H100/H200: priorities 0 (lowest) .. -5 (highest) */
        *least = 0;
    if (greatest)
        *greatest = -5;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    (void)ctx;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    (void)ctx;
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    *id = 1;
    return CUDA_SUCCESS;
}

static size_t limits[CU_LIMIT_MAX];

SIM_EXPORT CUresult cuCtxGetLimit(size_t *value, CUlimit limit)
{
    if (!value || (unsigned)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    static const size_t defaults[CU_LIMIT_MAX] = {[CU_LIMIT_STACK_SIZE] = 1024,
                                                  [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
                                                  [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
                                                  [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
                                                  [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64};
    *value = limits[limit] ? limits[limit] : defaults[limit];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    if ((unsigned)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    limits[limit] = value;
    return CUDA_SUCCESS;
}

/* The driver's log callbacks: nothing is ever logged. */
SIM_EXPORT CUresult cuLogsRegisterCallback(CUlogsCallback cb, void *data, CUlogsCallbackHandle *h)
{
    (void)cb;
    (void)data;
    if (h)
        *h = (CUlogsCallbackHandle)(uintptr_t)1;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle h)
{
    (void)h;
    return CUDA_SUCCESS;
}

/* ---- streams ---- */

/* The stream of h with the simulator locked, or NULL (unlocked). */
static struct sim_stream *resolve_locked(CUstream h, int ptsz)
{
    sim_ensure_init();
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s)
        pthread_mutex_unlock(&sim_lock);
    return s;
}

SIM_EXPORT CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx)
{
    (void)h;
    CUresult r = cuDevicePrimaryCtxRetain(pctx, 0);
    if (r == CUDA_SUCCESS)
        ctx_primary_retained(-1); /* a query, not a retain */
    return r;
}

/* The thread's capture interaction mode, exchanged (cudaThreadExchangeStreamCaptureMode). The
 * simulator treats every mode alike (README.md), but the value round-trips as PyTorch expects. */
static __thread int capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    int old = capture_mode;
    capture_mode = *mode;
    *mode = (CUstreamCaptureMode)old;
    return CUDA_SUCCESS;
}

/* ---- modules by path (Inductor's static launcher loads its cubins this way) ---- */

SIM_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    if (!fname)
        return CUDA_ERROR_INVALID_VALUE;
    struct stat st;
    if (stat(fname, &st) != 0 || !S_ISREG(st.st_mode))
        return CUDA_ERROR_FILE_NOT_FOUND;
    static const char image[] = "simgpu: module loaded from a file";
    return cuModuleLoadData(module, image); /* no image is parsed: any file loads */
}

SIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jo, void **jv,
                                          unsigned int nj, CUlibraryOption *lo, void **lv, unsigned int nl)
{
    (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
    return cuModuleLoad((CUmodule *)library, fileName);
}

/* ---- occupancy: an H200 SM (2048 threads, 32 blocks, 64 K registers, 227 KiB shared) ---- */

static int blocks_per_sm(int block, size_t shmem)
{
    if (block <= 0)
        return 0;
    int warps = (block + 31) / 32;
    int n = 64 / warps; /* 64 warps per SM */
    if (n > 32)
        n = 32;
    if (shmem && (int)(233472 / shmem) < n)
        n = (int)(233472 / shmem);
    return n;
}

SIM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *num, CUfunction f, int block,
                                                                         size_t shmem, unsigned int flags)
{
    (void)flags;
    if (!num || !mod_func(f))
        return CUDA_ERROR_INVALID_VALUE;
    *num = blocks_per_sm(block, shmem);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *num, CUfunction f, int block, size_t shmem)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num, f, block, shmem, 0);
}

SIM_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *grid, int *block, CUfunction f,
                                                              CUoccupancyB2DSize b2d, size_t shmem,
                                                              int limit, unsigned int flags)
{
    (void)flags;
    if (!grid || !block || !mod_func(f))
        return CUDA_ERROR_INVALID_VALUE;
    int best = 1024;
    if (limit > 0 && limit < best)
        best = limit;
    size_t sh = b2d ? b2d(best) : shmem;
    *block = best;
    *grid = 132 * (blocks_per_sm(best, sh) > 0 ? blocks_per_sm(best, sh) : 1);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *block, CUfunction f, CUoccupancyB2DSize b2d,
                                                     size_t shmem, int limit)
{
    return cuOccupancyMaxPotentialBlockSizeWithFlags(grid, block, f, b2d, shmem, limit, 0);
}

/* ---- tensor maps (CUTLASS TMA kernels): the descriptor is opaque, device code never reads it ---- */

static CUresult tensor_map(CUtensorMap *map, cuuint32_t rank, void *addr)
{
    if (!map || rank == 0 || rank > 5 || !addr)
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    memcpy(map, &addr, sizeof addr);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank, void *addr,
                                           const cuuint64_t *dims, const cuuint64_t *strides,
                                           const cuuint32_t *box, const cuuint32_t *estrides,
                                           CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                           CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    (void)dt, (void)dims, (void)strides, (void)box, (void)estrides, (void)il, (void)sw, (void)l2, (void)oob;
    return tensor_map(map, rank, addr);
}

SIM_EXPORT CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank, void *addr,
                                            const cuuint64_t *dims, const cuuint64_t *strides, const int *lo,
                                            const int *hi, cuuint32_t ch, cuuint32_t px,
                                            const cuuint32_t *estrides, CUtensorMapInterleave il,
                                            CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                            CUtensorMapFloatOOBfill oob)
{
    (void)dt, (void)dims, (void)strides, (void)lo, (void)hi, (void)ch, (void)px, (void)estrides, (void)il;
    (void)sw, (void)l2, (void)oob;
    return tensor_map(map, rank, addr);
}

SIM_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr)
{
    if (!map)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(map, &addr, sizeof addr);
    return CUDA_SUCCESS;
}

/* ---- host functions on streams ----
 * One driver thread calls them in order, each at the simulated time its stream reaches it (the
 * stream's tail when it was enqueued). It occupies no stream time, and work enqueued after it is
 * not held back until it returns (the timeline is fixed at enqueue time): README.md. */

struct hostfn {
    simtime_t at;
    CUhostFn fn;
    CUstreamCallback cb;
    CUstream stream;
    void *data;
    struct hostfn *next;
};
static struct hostfn *hf_head, **hf_tail = &hf_head;
static pthread_mutex_t hf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hf_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t hf_once = PTHREAD_ONCE_INIT;

static void *hostfn_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&hf_lock);
        while (!hf_head)
            pthread_cond_wait(&hf_cond, &hf_lock);
        struct hostfn *h = hf_head;
        hf_head = h->next;
        if (!hf_head)
            hf_tail = &hf_head;
        pthread_mutex_unlock(&hf_lock);
        sim_wait_until(h->at);
        if (h->fn)
            h->fn(h->data);
        else
            h->cb(h->stream, CUDA_SUCCESS, h->data);
        free(h);
    }
    return NULL;
}

static void hostfn_start(void)
{
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the driver's thread takes no signals */
    pthread_create(&t, &a, hostfn_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

static CUresult host_enqueue(CUstream h, int ptsz, CUhostFn fn, CUstreamCallback cb, void *data)
{
    if (!fn && !cb)
        return CUDA_ERROR_INVALID_VALUE;
    struct hostfn *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_stream *s = resolve_locked(h, ptsz);
    if (!s) {
        free(e);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->cap) {
        pthread_mutex_unlock(&sim_lock);
        free(e);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* no host nodes in simulated graphs */
    }
    e->at = tl_ready(s, sim_now());
    pthread_mutex_unlock(&sim_lock);
    *e = (struct hostfn){e->at, fn, cb, h, data, NULL};
    pthread_once(&hf_once, hostfn_start);
    pthread_mutex_lock(&hf_lock);
    *hf_tail = e;
    hf_tail = &e->next;
    pthread_cond_signal(&hf_cond);
    pthread_mutex_unlock(&hf_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *data) { return host_enqueue(h, 0, fn, NULL, data); }
SIM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *data)
{
    return host_enqueue(h, 1, fn, NULL, data);
}
SIM_EXPORT CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *data, unsigned int flags)
{
    return flags ? CUDA_ERROR_INVALID_VALUE : host_enqueue(h, 0, NULL, cb, data);
}
SIM_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void *data, unsigned int flags)
{
    return flags ? CUDA_ERROR_INVALID_VALUE : host_enqueue(h, 1, NULL, cb, data);
}

/* ---- stream-ordered allocation and pools ----
 * The memory is allocated at the call and freed at the call: device code never runs and copies
 * move bytes at enqueue time, so nothing can touch it "later" on the stream. A pool keeps its
 * attributes (release threshold, reuse flags) and counts what it handed out. */

struct sim_pool {
    CUmemPoolProps props;
    cuuint64_t threshold;
    int reuse[3];
    size_t used, high;
};
static struct sim_pool default_pool = {.reuse = {1, 1, 1}};

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&default_pool;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) { return cuDeviceGetDefaultMemPool(pool, dev); }

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    return dev == 0 && pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!pool || !props)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->props = *props;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if ((struct sim_pool *)pool != &default_pool)
        free(pool);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct sim_pool *p = (struct sim_pool *)pool;
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->reuse[0] = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->reuse[1] = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse[2] = *(int *)value; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: p->high = (size_t)*(cuuint64_t *)value; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct sim_pool *p = (struct sim_pool *)pool;
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = p->reuse[0]; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = p->reuse[1]; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = p->reuse[2]; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    (void)keep;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    (void)map;
    (void)count;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, struct sim_pool *p, CUstream h, int ptsz)
{
    struct sim_stream *s = resolve_locked(h, ptsz);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    int capturing = s->cap != NULL;
    pthread_mutex_unlock(&sim_lock);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* no memory-alloc graph nodes here */
    CUresult r = cuMemAlloc_v2(dptr, bytes);
    if (r == CUDA_SUCCESS) {
        __atomic_add_fetch(&p->used, bytes, __ATOMIC_RELAXED);
        if (p->used > p->high)
            p->high = p->used;
    }
    return r;
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream h)
{
    return alloc_async(dptr, bytes, &default_pool, h, 0);
}
SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream h)
{
    return alloc_async(dptr, bytes, &default_pool, h, 1);
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h)
{
    return pool ? alloc_async(dptr, bytes, (struct sim_pool *)pool, h, 0) : CUDA_ERROR_INVALID_VALUE;
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h)
{
    return pool ? alloc_async(dptr, bytes, (struct sim_pool *)pool, h, 1) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_async(CUdeviceptr d, CUstream h, int ptsz)
{
    struct sim_stream *s = resolve_locked(h, ptsz);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&sim_lock);
    size_t size = 0;
    if (cuMemGetAddressRange_v2(NULL, &size, d) == CUDA_SUCCESS)
        __atomic_sub_fetch(&default_pool.used, size <= default_pool.used ? size : default_pool.used,
                           __ATOMIC_RELAXED);
    return cuMemFree_v2(d);
}
SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream h) { return free_async(d, h, 0); }
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream h) { return free_async(d, h, 1); }

/* ---- pinned registration of the caller's memory ---- */

SIM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)
{
    (void)flags;
    if (!p || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    mem_register_host(p, bytes);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p)
{
    return mem_unregister_host(p) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ---- the virtual memory API (PyTorch's expandable_segments, vLLM's allocator) ----
 * A physical allocation is a memfd; mapping it puts its pages at the reserved address (MAP_SHARED,
 * so two mappings of one handle see the same bytes, as on a GPU); a reservation is PROT_NONE
 * address space. Mapped ranges are device memory to the registry (copy directions). */

#define VMM_GRANULARITY (2u << 20)

struct sim_vmm {
    int fd;
    size_t size;
};

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    (void)option;
    if (!g || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *g = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags)
{
    (void)flags;
    if (!ptr || !size || size % VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    /* over-reserve, then trim to the alignment */
    char *p = mmap((void *)(uintptr_t)addr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + size < p + size + align)
        munmap(a + size, (size_t)(p + size + align - (a + size)));
    *ptr = (CUdeviceptr)(uintptr_t)a;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)flags;
    if (!handle || !prop || !size || size % VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_vmm *v = calloc(1, sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    v->fd = memfd_create("simgpu-vmm", MFD_CLOEXEC);
    if (v->fd < 0 || ftruncate(v->fd, (off_t)size) != 0) {
        if (v->fd >= 0)
            close(v->fd);
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    v->size = size;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct sim_vmm *v = (struct sim_vmm *)(uintptr_t)handle;
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    close(v->fd); /* mappings keep their pages, as CUDA keeps a mapped allocation alive */
    free(v);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags)
{
    (void)flags;
    struct sim_vmm *v = (struct sim_vmm *)(uintptr_t)handle;
    if (!v || !ptr || !size || offset + size > v->size)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v->fd,
                   (off_t)offset);
    if (p == MAP_FAILED)
        return CUDA_ERROR_INVALID_VALUE;
    mem_register(p, size);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    void *p = (void *)(uintptr_t)ptr;
    mem_unregister(p);
    if (mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    (void)desc;
    (void)count;
    return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle)
{
    if (!prop || !handle)
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType type, unsigned long long flags)
{
    (void)flags;
    struct sim_vmm *v = (struct sim_vmm *)(uintptr_t)handle;
    if (!shareable || !v || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int fd = dup(v->fd);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)shareable = fd;
    return CUDA_SUCCESS;
}
