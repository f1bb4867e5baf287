// A small CUDA 13 program run on the simulated GPU, built three ways (CMakeLists.txt): plain
// (__cudaLaunchKernel), legacy launch (-Xcompiler -D__NV_LEGACY_LAUNCH: cudaLaunchKernel) and
// -default-stream per-thread (_ptsz/_ptds). check_rtprog.py checks its imports and truth log.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>

#include "rt_check.h"


__global__ void scale_kernel(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

__global__ void rmsnorm_kernel(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = 0;
}

int main()
{
    int count = 0, rt = 0;
    CHECK(cudaGetDeviceCount(&count));
    CHECK(cudaRuntimeGetVersion(&rt));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("devices=%d runtime=%d name=%s sms=%d cc=%d.%d\n", count, rt, prop.name,
                prop.multiProcessorCount, prop.major, prop.minor);
    if (count != 1 || prop.multiProcessorCount != 132)
        return 1;

    const int n = 1024;
    static float h[n], back[n];
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    float *d;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));    // 1: copy, default stream
    scale_kernel<<<4, 256>>>(d, 2.f, n);                          // 2: default stream
    CHECK(cudaGetLastError());

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    rmsnorm_kernel<<<2, 128, 0, s>>>(d, n);                      // 3
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, s));
    scale_kernel<<<8, 128, 0, s>>>(d, 3.f, n);                   // 4
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    std::printf("elapsed=%.6f ms\n", ms);

    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    scale_kernel<<<1, 32, 0, s>>>(d, 1.f, n);
    rmsnorm_kernel<<<1, 32, 0, s>>>(d, n);
    CHECK(cudaStreamEndCapture(s, &g));
    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    if (nodes != 2)
        return 1;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));                                 // 5, 6
    CHECK(cudaGraphLaunch(x, s));                                 // 7, 8
    CHECK(cudaStreamSynchronize(s));

    CHECK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost)); // 9
    if (std::memcmp(h, back, sizeof h) != 0) { // kernels never run: the data round-trips unchanged
        std::fprintf(stderr, "round trip mismatch\n");
        return 1;
    }
    CHECK(cudaMemset(d, 0, sizeof h));                            // 10: memset, default stream

    // names and driver entry points through the runtime
    const char *rname = nullptr, *dname = nullptr;
    CHECK(cudaFuncGetName(&rname, (const void *)rmsnorm_kernel));
    cudaFunction_t f;
    CHECK(cudaGetFuncBySymbol(&f, (const void *)rmsnorm_kernel));
    void *pfn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuFuncGetName", &pfn, 12030, cudaEnableDefault, &q));
    if (!pfn || q != cudaDriverEntryPointSuccess)
        return 1;
    ((CUresult(*)(const char **, CUfunction))pfn)(&dname, (CUfunction)f);
    std::printf("name=%s driver_name=%s\n", rname, dname ? dname : "(null)");
    if (!dname || std::strcmp(rname, dname) != 0)
        return 1;

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d));
    std::printf("OK\n");
    return 0;
}
