// The runtime calls llama.cpp's ggml-cuda makes that minillm does not, in llama.cpp's order, on
// the simulated GPU (check_rtggml.py runs it and reads its truth log):
//   cudaFuncGetAttributes().ptxVersion (>= 90 enables programmatic dependent launch), a
//   cudaLaunchKernelExC with launch attributes, a cooperative launch (soft_max's parallel
//   columns), relaxed stream capture with an allocation during the capture, a graph replayed,
//   re-captured with new grids and updated in place with cudaGraphExecUpdate -- or, when the
//   update is refused (SIMGPU_GRAPH_UPDATE=fail), destroyed and instantiated again, as
//   ggml_cuda_graph_update_executable does -- and a DtoH copy of the "logits" + a stream sync per
//   token. Prints "update=in-place" or "update=reinstantiated", then OK. RT_GGML_DRIVER_UPDATE=1
//   updates through the driver's cuGraphExecUpdate (from cudaGetDriverEntryPointByVersion)
//   instead of the runtime's. RT_GGML_PAUSE=1 prints "paused" after the first token and reads a
//   line from stdin before the update (a test makes the shim's writer encode the first replay's
//   GPU records meanwhile: graph_update_check.py).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#include "rt_check.h"


__global__ void rms_norm_f32(float *x, int n)
{
    if (threadIdx.x < n)
        x[threadIdx.x] = 0;
}

__global__ void mul_mat_vec_q(float *x, int n)
{
    if (threadIdx.x < n)
        x[threadIdx.x] += 1;
}

__global__ void soft_max_f32_parallelize_cols(float *x, int n)
{
    if (threadIdx.x < n)
        x[threadIdx.x] *= 2;
}

static cudaGraph_t capture(cudaStream_t s, float *d, unsigned g1, unsigned g2, void **scratch)
{
    cudaGraph_t g = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) != cudaSuccess)
        return nullptr;
    // relaxed mode: an allocation (ggml's pool growing) is legal while the stream captures
    if (scratch && cudaMalloc(scratch, 1 << 20) != cudaSuccess)
        return nullptr;
    rms_norm_f32<<<g1, 256, 0, s>>>(d, 64);
    mul_mat_vec_q<<<g2, 128, 0, s>>>(d, 64);
    if (cudaStreamEndCapture(s, &g) != cudaSuccess)
        return nullptr;
    return g;
}

static cudaError_t exec_update(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info)
{
    if (!std::getenv("RT_GGML_DRIVER_UPDATE"))
        return cudaGraphExecUpdate(x, g, info);
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuGraphExecUpdate", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || !fn)
        return cudaErrorSymbolNotFound;
    CUresult r = ((CUresult(*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))fn)(
        (CUgraphExec)x, (CUgraph)g, (CUgraphExecUpdateResultInfo *)info);
    return r == CUDA_SUCCESS ? cudaSuccess
           : r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? cudaErrorGraphExecUpdateFailure : cudaErrorUnknown;
}

int main()
{
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, (const void *)mul_mat_vec_q));
    std::printf("ptxVersion=%d\n", attr.ptxVersion);
    if (attr.ptxVersion < 90)
        return 1;
    CHECK(cudaFuncSetAttribute((const void *)mul_mat_vec_q, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));

    float *d, logits[256];
    CHECK(cudaMalloc(&d, sizeof logits));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // 1: programmatic dependent launch through cudaLaunchKernelExC (ggml's launch helper)
    cudaLaunchAttribute la[1];
    la[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    la[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(7, 1, 1);
    cfg.blockDim = dim3(128, 1, 1);
    cfg.stream = s;
    cfg.attrs = la;
    cfg.numAttrs = 1;
    int n = 64;
    void *args[] = {&d, &n};
    CHECK(cudaLaunchKernelExC(&cfg, (const void *)mul_mat_vec_q, args));
    // 2: cooperative launch
    CHECK(cudaLaunchCooperativeKernel((const void *)soft_max_f32_parallelize_cols, dim3(3), dim3(256), args, 0, s));

    // 3, 4: the first capture, replayed once
    void *scratch = nullptr;
    cudaGraph_t g = capture(s, d, 1, 2, &scratch);
    if (!g || !scratch)
        return 1;
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaMemcpyAsync(logits, d, sizeof logits, cudaMemcpyDeviceToHost, s)); // 5
    CHECK(cudaStreamSynchronize(s));
    if (std::getenv("RT_GGML_PAUSE")) {
        char line[16];
        std::printf("paused\n");
        std::fflush(stdout);
        if (!std::fgets(line, sizeof line, stdin))
            return 1;
    }

    // 6, 7: re-captured with new grids, the exec updated (or made again), replayed
    cudaGraph_t g2 = capture(s, d, 3, 5, nullptr);
    if (!g2)
        return 1;
    cudaGraphExecUpdateResultInfo info;
    cudaError_t st = exec_update(x, g2, &info);
    if (st == cudaErrorGraphExecUpdateFailure) {
        (void)cudaGetLastError();
        CHECK(cudaGraphExecDestroy(x));
        CHECK(cudaGraphInstantiate(&x, g2, 0));
        std::printf("update=reinstantiated result=%d\n", (int)info.result);
    } else {
        CHECK(st);
        std::printf("update=in-place\n");
    }
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaMemcpyAsync(logits, d, sizeof logits, cudaMemcpyDeviceToHost, s)); // 8
    CHECK(cudaStreamSynchronize(s));

    CHECK(cudaFree(scratch)); // the allocation made during the capture is an ordinary one
    CHECK(cudaGraphExecDestroy(x)); // (the sanitizer build's leak check)
    CHECK(cudaGraphDestroy(g2));
    CHECK(cudaGraphDestroy(g));
    std::printf("OK\n");
    return 0;
}
