/* Drives the simulated cuBLAS / cuBLASLt / cuDNN directly (linked against the real toolkit
 * libraries' names; LD_LIBRARY_PATH selects the fakes). Prints one line per checked call; exits
 * non-zero on an unexpected status. libs_smoke_check.py then checks the truth log. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPECT(call, want)                                                         \
    do {                                                                           \
        int r_ = (int)(call);                                                      \
        if (r_ != (int)(want)) {                                                   \
            fprintf(stderr, "%s:%d: %s = %d, expected %d\n", __FILE__, __LINE__, #call, r_, (int)(want)); \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

int main(void)
{
    cudaStream_t s;
    void *a, *b, *c;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    EXPECT(cudaMalloc(&a, 1 << 22), cudaSuccess);
    EXPECT(cudaMalloc(&b, 1 << 22), cudaSuccess);
    EXPECT(cudaMalloc(&c, 1 << 22), cudaSuccess);
    float one = 1, zero = 0;

    cublasHandle_t h;
    EXPECT(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    cudaStream_t got;
    EXPECT(cublasGetStream(h, &got), CUBLAS_STATUS_SUCCESS);
    EXPECT(got == s, 1);
    /* 1: fp32 matrix-vector -> gemv2T */
    EXPECT(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 256, 1, 256, &one, a, 256, b, 256, &zero, c, 256), CUBLAS_STATUS_SUCCESS);
    /* 2: bf16 GemmEx -> cublasLtMatmul -> nvjet */
    EXPECT(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 512, 8, 256, &one, a, CUDA_R_16BF, 256, b, CUDA_R_16BF, 256, &zero, c,
                        CUDA_R_16BF, 512, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
    /* 3: split-K (k = 2048 >= 4 m) -> nvjet splitK + splitKreduce */
    EXPECT(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 256, 1, 2048, &one, a, CUDA_R_16BF, 2048, b, CUDA_R_16BF, 2048, &zero,
                        c, CUDA_R_16BF, 256, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
    /* 4: large fp32 -> sm90_xmma (cuBLAS path) */
    EXPECT(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 512, 512, 64, &one, a, 512, b, 64, &zero, c, 512), CUBLAS_STATUS_SUCCESS);
    EXPECT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, CUDA_R_16BF, 2, b, CUDA_R_16BF, 4, &zero, c,
                        CUDA_R_16BF, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_INVALID_VALUE);

    /* cuBLASLt attribute sizes are exact, size queries report them */
    cublasLtMatrixLayout_t l;
    EXPECT(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
    int32_t small = 0;
    size_t written = 0;
    EXPECT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &small, sizeof small, &written), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, NULL, 0, &written), CUBLAS_STATUS_SUCCESS);
    EXPECT(written, 8);
    uint64_t rows = 0;
    EXPECT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &written), CUBLAS_STATUS_SUCCESS);
    EXPECT(rows, 64);
    int64_t bad = 2;
    EXPECT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bad, sizeof bad), CUBLAS_STATUS_INVALID_VALUE);
    int32_t batch = 3;
    EXPECT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch), CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayoutDestroy(l);

    /* 5: cuDNN convolution, 6: backend execute */
    cudnnHandle_t dn;
    EXPECT(cudnnCreate(&dn), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnSetStream(dn, s), CUDNN_STATUS_SUCCESS);
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cv;
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&cv);
    EXPECT(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, 2, 64, 32, 32), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, 128, 64, 3, 3), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnSetConvolution2dDescriptor(cv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
    int n, ch, hh, ww;
    EXPECT(cudnnGetConvolution2dForwardOutputDim(cv, x, w, &n, &ch, &hh, &ww), CUDNN_STATUS_SUCCESS);
    EXPECT(n == 2 && ch == 128 && hh == 32 && ww == 32, 1);
    EXPECT(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, n, ch, hh, ww), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnConvolutionForward(dn, &one, x, a, w, b, cv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, NULL, 0,
                                   &zero, y, c), CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t plan, pack;
    EXPECT(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), CUDNN_STATUS_SUCCESS);
    void *ptrs[1] = {a};
    EXPECT(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 1, ptrs), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnBackendExecute(dn, plan, pack), CUDNN_STATUS_BAD_PARAM); /* not finalized */
    EXPECT(cudnnBackendFinalize(plan), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnBackendFinalize(pack), CUDNN_STATUS_SUCCESS);
    EXPECT(cudnnBackendExecute(dn, plan, pack), CUDNN_STATUS_SUCCESS);
    cudnnBackendDestroyDescriptor(plan);
    cudnnBackendDestroyDescriptor(pack);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(cv);
    EXPECT(cudnnDestroy(dn), CUDNN_STATUS_SUCCESS);
    EXPECT(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    printf("libs_smoke: all calls returned the expected status\n");
    return 0;
}
