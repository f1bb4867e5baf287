/* Simulated libcublasLt.so.13: descriptors with the real attribute sizes, a one-result heuristic,
 * and cublasLtMatmul launching an nvjet_* / sm90_xmma_gemm_* kernel (plus splitKreduce_kernel
 * when split) on the given stream through the driver. */
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "simlib.h"

#define MAX_ATTR 40

/* Attribute storage: every attribute's value lives in a small slot; `size` tables give the exact
 * byte count the real library insists on (0 = attribute unknown here). */
struct attrs {
    unsigned char val[MAX_ATTR][8];
};

static const unsigned char layout_size[MAX_ATTR] = {
    [CUBLASLT_MATRIX_LAYOUT_TYPE] = 4, [CUBLASLT_MATRIX_LAYOUT_ORDER] = 4,
    [CUBLASLT_MATRIX_LAYOUT_ROWS] = 8, [CUBLASLT_MATRIX_LAYOUT_COLS] = 8,
    [CUBLASLT_MATRIX_LAYOUT_LD] = 8, [CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT] = 4,
    [CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET] = 8, [CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET] = 8,
    [CUBLASLT_MATRIX_LAYOUT_BATCH_MODE] = 4,
};
static const unsigned char desc_size[MAX_ATTR] = {
    [CUBLASLT_MATMUL_DESC_COMPUTE_TYPE] = 4, [CUBLASLT_MATMUL_DESC_SCALE_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_POINTER_MODE] = 4, [CUBLASLT_MATMUL_DESC_TRANSA] = 4,
    [CUBLASLT_MATMUL_DESC_TRANSB] = 4, [CUBLASLT_MATMUL_DESC_TRANSC] = 4,
    [CUBLASLT_MATMUL_DESC_FILL_MODE] = 4, [CUBLASLT_MATMUL_DESC_EPILOGUE] = 4,
    [CUBLASLT_MATMUL_DESC_BIAS_POINTER] = 8, [CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE] = 8,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER] = 8, [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD] = 8,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE] = 8,
    [CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE] = 8, [CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET] = 4,
    [CUBLASLT_MATMUL_DESC_A_SCALE_POINTER] = 8, [CUBLASLT_MATMUL_DESC_B_SCALE_POINTER] = 8,
    [CUBLASLT_MATMUL_DESC_C_SCALE_POINTER] = 8, [CUBLASLT_MATMUL_DESC_D_SCALE_POINTER] = 8,
    [CUBLASLT_MATMUL_DESC_AMAX_D_POINTER] = 8, [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE] = 4,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER] = 8,
    [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER] = 8, [CUBLASLT_MATMUL_DESC_FAST_ACCUM] = 1,
    [CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE] = 4, [CUBLASLT_MATMUL_DESC_A_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_B_SCALE_MODE] = 4, [CUBLASLT_MATMUL_DESC_C_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_D_SCALE_MODE] = 4, [CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER] = 8, [CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE] = 4,
    [CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR] = 8,
};
static const unsigned char pref_size[MAX_ATTR] = {
    [CUBLASLT_MATMUL_PREF_SEARCH_MODE] = 4, [CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES] = 8,
    [CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK] = 4, [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES] = 4, [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES] = 4,
    [CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES] = 4, [CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT] = 4,
    [CUBLASLT_MATMUL_PREF_IMPL_MASK] = 8,
};

static cublasStatus_t attr_set(struct attrs *a, const unsigned char *sizes, int attr, const void *buf, size_t n)
{
    if (!a || attr < 0 || attr >= MAX_ATTR || !sizes[attr] || !buf || n != sizes[attr])
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(a->val[attr], buf, n);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t attr_get(const struct attrs *a, const unsigned char *sizes, int attr, void *buf, size_t n,
                               size_t *written)
{
    if (!a || attr < 0 || attr >= MAX_ATTR || !sizes[attr])
        return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0 && written) { /* size query */
        *written = sizes[attr];
        return CUBLAS_STATUS_SUCCESS;
    }
    if (n != sizes[attr] || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, a->val[attr], n);
    if (written)
        *written = n;
    return CUBLAS_STATUS_SUCCESS;
}

#define A32(a, i) (*(int32_t *)(a)->val[i])
#define A64(a, i) (*(int64_t *)(a)->val[i])
#define AU64(a, i) (*(uint64_t *)(a)->val[i])

struct cublasLtContext { int magic; };
/* The public opaque types are fixed-size structs the caller may own; we allocate our own and
 * hand out pointers, as the real Create functions do. */
#define DESC(d) ((struct attrs *)(d))

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasLtContext *c = calloc(1, sizeof *c);
    if (!c)
        return CUBLAS_STATUS_ALLOC_FAILED;
    c->magic = 0x4c74;
    *h = c;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t st)
{
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct attrs *a = calloc(1, sizeof *a);
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    A32(a, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) = ct;
    A32(a, CUBLASLT_MATMUL_DESC_SCALE_TYPE) = st;
    A32(a, CUBLASLT_MATMUL_DESC_FILL_MODE) = CUBLAS_FILL_MODE_FULL;
    A32(a, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE) = -1;
    A32(a, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) = -1;
    *d = (cublasLtMatmulDesc_t)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t n)
{
    return attr_set(DESC(d), desc_size, attr, buf, n);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              void *buf, size_t n, size_t *written)
{
    return attr_get(DESC(d), desc_size, attr, buf, n, written);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct attrs *a = calloc(1, sizeof *a);
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    A32(a, CUBLASLT_MATRIX_LAYOUT_TYPE) = type;
    A32(a, CUBLASLT_MATRIX_LAYOUT_ORDER) = CUBLASLT_ORDER_COL;
    AU64(a, CUBLASLT_MATRIX_LAYOUT_ROWS) = rows;
    AU64(a, CUBLASLT_MATRIX_LAYOUT_COLS) = cols;
    A64(a, CUBLASLT_MATRIX_LAYOUT_LD) = ld;
    A32(a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) = 1;
    *l = (cublasLtMatrixLayout_t)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t n)
{
    return attr_set(DESC(l), layout_size, attr, buf, n);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t n, size_t *written)
{
    return attr_get(DESC(l), layout_size, attr, buf, n, written);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct attrs *a = calloc(1, sizeof *a);
    if (!a)
        return CUBLAS_STATUS_ALLOC_FAILED;
    AU64(a, CUBLASLT_MATMUL_PREF_IMPL_MASK) = UINT64_MAX;
    *p = (cublasLtMatmulPreference_t)a;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t n)
{
    return attr_set(DESC(p), pref_size, attr, buf, n);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t n, size_t *written)
{
    return attr_get(DESC(p), pref_size, attr, buf, n, written);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A,
                                              cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                              cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    (void)pref;
    if (!h || !d || !A || !B || !C || !D || requested <= 0 || !results || !returned)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = 1; /* "algo id" */
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *ws,
                              size_t wsSize, cudaStream_t stream)
{
    (void)alpha; (void)beta; (void)C; (void)Cdesc; (void)algo; (void)ws; (void)wsSize;
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!d || !Adesc || !Bdesc || !Ddesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct attrs *md = DESC(d), *la = DESC(Adesc), *lb = DESC(Bdesc), *ld = DESC(Ddesc);
    struct simlib_gemm g;
    g.transa = A32(md, CUBLASLT_MATMUL_DESC_TRANSA);
    g.transb = A32(md, CUBLASLT_MATMUL_DESC_TRANSB);
    g.m = (int64_t)AU64(ld, CUBLASLT_MATRIX_LAYOUT_ROWS);
    g.n = (int64_t)AU64(ld, CUBLASLT_MATRIX_LAYOUT_COLS);
    g.k = (int64_t)(g.transa == CUBLAS_OP_N ? AU64(la, CUBLASLT_MATRIX_LAYOUT_COLS)
                                            : AU64(la, CUBLASLT_MATRIX_LAYOUT_ROWS));
    g.batch = A32(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    if (g.batch < 1)
        g.batch = 1;
    g.atype = (cudaDataType)A32(la, CUBLASLT_MATRIX_LAYOUT_TYPE);
    g.btype = (cudaDataType)A32(lb, CUBLASLT_MATRIX_LAYOUT_TYPE);
    g.ctype = (cudaDataType)A32(ld, CUBLASLT_MATRIX_LAYOUT_TYPE);
    g.A = A;
    g.B = B;
    g.C = D;
    if (g.m <= 0 || g.n <= 0 || g.k <= 0)
        return g.m == 0 || g.n == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    return simlib_gemm_launch(SIMLIB_PATH_LT, &g, (CUstream)stream) ? CUBLAS_STATUS_EXECUTION_FAILED
                                                                     : CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}
