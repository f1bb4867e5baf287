/* Cost of the library-call hooks: N calls of cublasLtMatmul (descriptors made once, so the shim's
 * descriptor cache hits) and N of cublasGemmEx (bf16: cuBLAS creates Lt descriptors and calls
 * cublasLtMatmul inside, so the nested hooks and cache updates are included). Run on simgpu with
 * SIMGPU_ZERO=1, with and without LD_PRELOAD=libtokprof.so (scripts/bench.sh libcall).
 * Prints "<ns per Lt matmul> <ns per GemmEx>". */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#define OK(call)                                                                                  \
    do {                                                                                          \
        if ((int)(call)) {                                                                        \
            fprintf(stderr, "%s failed\n", #call);                                                \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    void *a, *b, *c, *ws;
    cudaStream_t s;
    float one = 1, zero = 0;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    OK(cudaMalloc(&a, 1 << 22));
    OK(cudaMalloc(&b, 1 << 22));
    OK(cudaMalloc(&c, 1 << 22));
    OK(cudaMalloc(&ws, 1 << 22));
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    int32_t t = CUBLAS_OP_T;
    OK(cublasLtCreate(&lt));
    OK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    OK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, 256, 1024, 256));
    OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, 256, 4, 256));
    OK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 1024, 4, 1024));
    cublasHandle_t h;
    OK(cublasCreate(&h));
    OK(cublasSetStream(h, s));
    double t0 = now();
    for (long i = 0; i < n; i++)
        OK(cublasLtMatmul(lt, d, &one, a, la, b, lb, &zero, c, lc, c, lc, NULL, ws, 1 << 22, s));
    double t1 = now();
    for (long i = 0; i < n; i++)
        OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 256, 4, 256, &one, a, CUDA_R_16BF, 256, b,
                        CUDA_R_16BF, 256, &zero, c, CUDA_R_16BF, 256, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    double t2 = now();
    OK(cudaStreamSynchronize(s));
    printf("%.1f %.1f\n", (t1 - t0) / n, (t2 - t1) / n);
    OK(cublasDestroy(h));
    OK(cublasLtMatrixLayoutDestroy(lc));
    OK(cublasLtMatrixLayoutDestroy(lb));
    OK(cublasLtMatrixLayoutDestroy(la));
    OK(cublasLtMatmulDescDestroy(d));
    OK(cublasLtDestroy(lt));
    return 0;
}
