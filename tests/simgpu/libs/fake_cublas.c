/* Simulated libcublas.so.13. Like the real library it has NEEDED libcublasLt.so.13 and sends
 * half / bfloat16 GEMMs through the public cublasLtMatmul (so a GemmEx can hit two profiler
 * hooks); fp32 and pointer-array GEMMs use cuBLAS's own kernels (gemv for matrix-vector shapes).
 * Kernels go to the handle's stream through the driver (see simlib.c). */
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "simlib.h"

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math;
    cublasPointerMode_t pmode;
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_size;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    if (cublasLtCreate(&h->lt) != CUBLAS_STATUS_SUCCESS) {
        free(h);
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasLtDestroy(h->lt);
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *version)
{
    (void)h;
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->math;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->pmode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t *mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->pmode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t size)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->workspace = ws;
    h->workspace_size = size;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}

static int is_half_type(cudaDataType t) { return t == CUDA_R_16F || t == CUDA_R_16BF; }

/* The Lt route: what libcublas does for most half/bf16 GEMMs on Hopper. Goes through the
 * exported cublasLtMatmul (an imported, interposable symbol), never an internal shortcut. */
static cublasStatus_t via_lt(cublasHandle_t h, const struct simlib_gemm *g, int64_t lda, int64_t ldb, int64_t ldc,
                             long long sa, long long sb, long long sc, cublasComputeType_t ct, const void *alpha,
                             const void *beta)
{
    cublasLtMatmulDesc_t d = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasStatus_t st;
    cudaDataType scale = ct == CUBLAS_COMPUTE_16F ? CUDA_R_16F : CUDA_R_32F;
    int32_t ta = g->transa, tb = g->transb, batch = (int32_t)g->batch;
    if ((st = cublasLtMatmulDescCreate(&d, ct, scale)) ||
        (st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) ||
        (st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)))
        goto out;
    if ((st = cublasLtMatrixLayoutCreate(&la, g->atype, g->transa == CUBLAS_OP_N ? g->m : g->k,
                                         g->transa == CUBLAS_OP_N ? g->k : g->m, lda)) ||
        (st = cublasLtMatrixLayoutCreate(&lb, g->btype, g->transb == CUBLAS_OP_N ? g->k : g->n,
                                         g->transb == CUBLAS_OP_N ? g->n : g->k, ldb)) ||
        (st = cublasLtMatrixLayoutCreate(&lc, g->ctype, g->m, g->n, ldc)))
        goto out;
    if (batch > 1) {
        int64_t s[3] = {sa, sb, sc};
        cublasLtMatrixLayout_t l[3] = {la, lb, lc};
        for (int i = 0; i < 3; i++)
            if ((st = cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch)) ||
                (st = cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s[i], sizeof s[i])))
                goto out;
    }
    st = cublasLtMatmul(h->lt, d, alpha, g->A, la, g->B, lb, beta, g->C, lc, g->C, lc, NULL, h->workspace,
                        h->workspace_size, h->stream);
out:
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (d) cublasLtMatmulDescDestroy(d);
    return st;
}

static cublasStatus_t gemm_common(cublasHandle_t h, int transa, int transb, int64_t m, int64_t n, int64_t k,
                                  const void *alpha, const void *A, cudaDataType at, int64_t lda, long long sa,
                                  const void *B, cudaDataType bt, int64_t ldb, long long sb, const void *beta,
                                  void *C, cudaDataType ct, int64_t ldc, long long sc, int64_t batch,
                                  cublasComputeType_t comp, int allow_lt)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || transa < 0 || transa > 2 || transb < 0 || transb > 2)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (lda < (transa == CUBLAS_OP_N ? m : k) || ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct simlib_gemm g = {m, n, k, batch, transa, transb, at, bt, ct, A, B, C};
    if (allow_lt && is_half_type(at) && batch <= INT32_MAX)
        return via_lt(h, &g, lda, ldb, ldc, sa, sb, sc, comp, alpha, beta);
    return simlib_gemm_launch(SIMLIB_PATH_CUBLAS, &g, (CUstream)h->stream) ? CUBLAS_STATUS_EXECUTION_FAILED
                                                                            : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                            cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, comp, 1);
}

cublasStatus_t cublasGemmEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A, cudaDataType at, int64_t lda,
                               const void *B, cudaDataType bt, int64_t ldb, const void *beta, void *C,
                               cudaDataType ct, int64_t ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, comp, 1);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc, long long sc,
                                          int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch,
                       comp, 1);
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                             int64_t m, int64_t n, int64_t k, const void *alpha, const void *A,
                                             cudaDataType at, int64_t lda, long long sa, const void *B,
                                             cudaDataType bt, int64_t ldb, long long sb, const void *beta, void *C,
                                             cudaDataType ct, int64_t ldc, long long sc, int64_t batch,
                                             cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch,
                       comp, 1);
}

/* Pointer arrays: cuBLAS's own batched kernels (the Lt route needs strided batches). */
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                   int k, const void *alpha, const void *const A[], cudaDataType at, int lda,
                                   const void *const B[], cudaDataType bt, int ldb, const void *beta,
                                   void *const C[], cudaDataType ct, int ldc, int batch, cublasComputeType_t comp,
                                   cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, (void *)C, ct, ldc, 0, batch,
                       comp, 0);
}

cublasStatus_t cublasGemmBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                      int64_t n, int64_t k, const void *alpha, const void *const A[],
                                      cudaDataType at, int64_t lda, const void *const B[], cudaDataType bt,
                                      int64_t ldb, const void *beta, void *const C[], cudaDataType ct, int64_t ldc,
                                      int64_t batch, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm_common(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, (void *)C, ct, ldc, 0, batch,
                       comp, 0);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C,
                       CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F, 0);
}

cublasStatus_t cublasSgemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                 int64_t n, int64_t k, const float *alpha, const float *A, int64_t lda,
                                 const float *B, int64_t ldb, const float *beta, float *C, int64_t ldc)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C,
                       CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F, 0);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C,
                                         int ldc, long long sc, int batch)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, beta, C,
                       CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F, 0);
}

/* cublas_api.h declares cublasHgemm only for C++ (it takes __half); the ABI passes pointers, so
 * const void * is the same function here. */
cublasStatus_t cublasHgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const void *alpha, const void *A, int lda, const void *B, int ldb, const void *beta,
                           void *C, int ldc);
cublasStatus_t cublasHgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const void *alpha, const void *A, int lda, const void *B, int ldb, const void *beta,
                           void *C, int ldc)
{
    return gemm_common(h, ta, tb, m, n, k, alpha, A, CUDA_R_16F, lda, 0, B, CUDA_R_16F, ldb, 0, beta, C,
                       CUDA_R_16F, ldc, 0, 1, CUBLAS_COMPUTE_16F, 1);
}
