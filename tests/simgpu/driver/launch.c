/* simgpu kernel launches. No device code runs: a launch is a span of simulated time on its
 * stream (cost.c), a line in the truth log, or, on a capturing stream, a graph node; a kernel a
 * SIMGPU_WRITES rule names also writes its rule's values (writes.c). */
#include <string.h>

#include "sim.h"

static CUresult launch_body(CUfunction hf, const unsigned grid[3], const unsigned block[3],
                            unsigned shmem, CUstream h, int ptsz, void **params)
{
    struct sim_func *f = mod_func(hf);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2])
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    struct simgpu_launch_info li = sim_take_launch_info();
    struct sim_write wr[SIM_MAX_WRITES];
    int nwr = writes_resolve(f->name, params, grid, wr);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->cap) {
        struct sim_node *n = graph_capture_node(s, CU_GRAPH_NODE_TYPE_KERNEL);
        n->func = f;
        memcpy(n->writes, wr, sizeof wr);
        n->nwrites = nwr;
        for (int i = 0; i < 3; i++) {
            n->grid[i] = grid[i];
            n->block[i] = block[i];
        }
        n->shmem = shmem;
        n->info = li;
        pthread_mutex_unlock(&sim_lock);
        return CUDA_SUCCESS;
    }
    writes_apply(wr, nwr);
    struct sim_op op = {.kind = 0, .name = f->name, .stream = s, .handle = h, .via = li.via,
                        .flops = li.flops, .bytes = li.bytes};
    for (int i = 0; i < 3; i++) {
        op.grid[i] = grid[i];
        op.block[i] = block[i];
    }
    op.end = cost_kernel(f, grid, &li, &op.start, &op.faulted);
    tl_exec(&op);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* The observer (fake CUPTI) sees the call around the work: cuLaunchKernel[_ptsz] for the classic
 * forms, cuLaunchKernelEx[_ptsz] for launch_ex. */
static CUresult launch_named(const char *api, CUfunction hf, const unsigned grid[3],
                             const unsigned block[3], unsigned shmem, CUstream h, int ptsz, void **params)
{
    sim_api(0, api);
    CUresult r = launch_body(hf, grid, block, shmem, h, ptsz, params);
    sim_api(1, api);
    return r;
}
#define launch(hf, grid, block, shmem, h, ptsz)                                                   \
    launch_named((ptsz) ? "cuLaunchKernel_ptsz" : "cuLaunchKernel", hf, grid, block, shmem, h, ptsz, \
                 kernelParams)

#define DIMS                                                                                      \
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};                                      \
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};                                  \
    (void)extra

SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams, void **extra)
{
    DIMS;
    return launch(f, grid, block, sharedMemBytes, hStream, 0);
}

SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams, void **extra)
{
    DIMS;
    return launch(f, grid, block, sharedMemBytes, hStream, 1);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, int ptsz, void **kernelParams)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    return launch_named(ptsz ? "cuLaunchKernelEx_ptsz" : "cuLaunchKernelEx", f, grid, block,
                        c->sharedMemBytes, c->hStream, ptsz, kernelParams);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                     void **extra)
{
    (void)extra;
    return launch_ex(config, f, 0, kernelParams);
}

SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **kernelParams, void **extra)
{
    (void)extra;
    return launch_ex(config, f, 1, kernelParams);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                              unsigned int gridDimZ, unsigned int blockDimX,
                                              unsigned int blockDimY, unsigned int blockDimZ,
                                              unsigned int sharedMemBytes, CUstream hStream,
                                              void **kernelParams)
{
    void **extra = NULL;
    DIMS;
    return launch(f, grid, block, sharedMemBytes, hStream, 0);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                   unsigned int gridDimY, unsigned int gridDimZ,
                                                   unsigned int blockDimX, unsigned int blockDimY,
                                                   unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                   CUstream hStream, void **kernelParams)
{
    void **extra = NULL;
    DIMS;
    return launch(f, grid, block, sharedMemBytes, hStream, 1);
}
