/* cuBLAS, cuBLASLt and cuDNN hooks: one LIB_CALL record per library call the program makes,
 * with the GEMM's shape and types, and the call's id on every kernel launched inside it.
 *
 * Versions: cuBLAS and cuBLASLt 12 and 13 can share a process (a cu12 PyTorch and a cu13
 * library), so each hook is exported as name@libcublas.so.12 and name@@libcublas.so.13 (Lt the
 * same) and forwards to the definition of its own node (tkp_real_lib); cuDNN has one major
 * (name@@libcudnn.so.9).
 *
 * Nesting: libcublas calls the public cublasLtMatmul (and the Lt descriptor functions), so one
 * GEMM can reach two hooks. tkp_tls.lib_depth makes the outermost call the only one recorded.
 * The library's kernels reach the driver hooks (hooks_drv.c) through cuGetProcAddress pointers;
 * tkp_tls.depth is deliberately NOT raised around the real library call, so those launches are
 * recorded, and they carry tkp_tls.lib_call.
 *
 * Hot path per call: TLS, two clock reads, one ring slot, and for cuBLAS one cublasGetStream
 * (a field read inside the library); cuBLASLt shapes come from the descriptor cache (lib_desc.c),
 * which the descriptor hooks below keep exact. No lock, allocation or syscall. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include "core/real.h"
#include "hooks/hooks.h"
#include "hooks/lib_desc.h"
#include "record/libcall.h"

#define TKP_UNPACK(...) __VA_ARGS__

/* Two exports around one body hook_NAME(real, v13, args...): NAME@NODE12 and NAME@@NODE13. */
#define LIB_PAIR(node, ret, name, errval, PARAMS, ARGS)                                           \
    typedef ret(*name##_fn) PARAMS;                                                               \
    static ret hook_##name(name##_fn real, int v13, TKP_UNPACK PARAMS);                           \
    static name##_fn real12_##name, real13_##name;                                                \
    TKP_EXPORT ret tkp12_##name PARAMS                                                            \
    {                                                                                             \
        name##_fn f = TKP_REAL_LAZY(real12_##name, tkp_real_lib(#name, node "12"));           \
        if (TKP_UNLIKELY(!f)) return errval;                                                      \
        return hook_##name(f, 0, TKP_UNPACK ARGS);                                                \
    }                                                                                             \
    TKP_EXPORT ret tkp13_##name PARAMS                                                            \
    {                                                                                             \
        name##_fn f = TKP_REAL_LAZY(real13_##name, tkp_real_lib(#name, node "13"));           \
        if (TKP_UNLIKELY(!f)) return errval;                                                      \
        return hook_##name(f, 1, TKP_UNPACK ARGS);                                                \
    }                                                                                             \
    __asm__(".symver tkp12_" #name ", " #name "@" node "12");                                    \
    __asm__(".symver tkp13_" #name ", " #name "@@" node "13");

/* cuDNN: one major. */
#define LIB_ONE(node, ret, name, errval, PARAMS, ARGS)                                            \
    typedef ret(*name##_fn) PARAMS;                                                               \
    static ret hook_##name(name##_fn real, int v13, TKP_UNPACK PARAMS);                           \
    static name##_fn real_##name;                                                                 \
    TKP_EXPORT ret tkp9_##name PARAMS                                                             \
    {                                                                                             \
        name##_fn f = TKP_REAL_LAZY(real_##name, tkp_real_lib(#name, node));                      \
        if (TKP_UNLIKELY(!f)) return errval;                                                      \
        return hook_##name(f, 1, TKP_UNPACK ARGS);                                                \
    }                                                                                             \
    __asm__(".symver tkp9_" #name ", " #name "@@" node);

#define BLAS "libcublas.so."
#define BLASLT "libcublasLt.so."
#define DNN "libcudnn.so.9"
#define NOSYM CUBLAS_STATUS_NOT_INITIALIZED

/* ---- the record ------------------------------------------------------------------------------ */

struct lib_shape {
    int64_t m, n, k, batch;
    unsigned at, bt, ct, comp, ta, tb; /* TKP_LIB_UNKNOWN8 / _4 when unknown */
    const void *a;
};

struct frame {
    struct tkp_ring *r;
    uint64_t t0;
    uint32_t step, call;
    int rec;
};

/* Entering a library call: records only the outermost one of a thread, while capturing. */
static inline void lib_enter(struct frame *f)
{
    f->rec = 0;
    if (tkp_tls.lib_depth++ || tkp_tls.depth || !tkp_active()) return;
    int e = errno;
    f->r = tkp_ring_self();
    if (TKP_UNLIKELY(!f->r)) {
        atomic_fetch_add_explicit(&tkp_ringless_drops, 1, memory_order_relaxed);
        errno = e;
        return;
    }
    f->step = tkp_step_current(f->r);
    if (TKP_UNLIKELY(++tkp_tls.lib_seq == 0)) tkp_tls.lib_seq = 1; /* 0 means "none" */
    f->call = tkp_tls.lib_call = tkp_tls.lib_seq;
    f->rec = 1;
    f->t0 = tkp_stamp();
    errno = e;
}

static inline uint32_t sat32(int64_t v)
{
    return v < 0 ? 0 : v > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static inline unsigned t8(int v)
{
    return v >= 0 && v < 0xff ? (unsigned)v : TKP_LIB_UNKNOWN8;
}

static inline unsigned t4(int v)
{
    return v >= 0 && v < 0xf ? (unsigned)v : TKP_LIB_UNKNOWN4;
}

/* Leaving: one ring event for the whole call, written after it so that it has its host time. */
static inline void lib_leave(struct frame *f, int lib, int op, uint64_t stream,
                             const struct lib_shape *s, int status)
{
    tkp_tls.lib_depth--;
    if (!f->rec) return;
    int e = errno;
    uint64_t t1 = tkp_stamp();
    tkp_tls.lib_call = 0;
    unsigned flags = tkp_skip_captured(stream, 0) ? TKP_LIBF_CAPTURED : 0;
    struct tkp_ev *ev = tkp_ring_reserve(f->r);
    if (ev) {
        uint64_t dt = t1 - f->t0;
        unsigned st = status < 0 ? 0xffffu : status > 0xffff ? 0xffffu : (unsigned)status;
        ev->type = TKP_REC_LIB_CALL;
        ev->sub = (uint8_t)lib;
        ev->flags = (uint16_t)op;
        ev->step = f->step;
        ev->ts = f->t0;
        ev->a = stream;
        ev->b = (uint64_t)(uintptr_t)s->a;
        ev->u[0] = sat32(s->m), ev->u[1] = sat32(s->n), ev->u[2] = sat32(s->k);
        ev->u[3] = sat32(s->batch);
        ev->u[4] = f->call;
        ev->u[5] = s->at | s->bt << 8 | s->ct << 16 | s->comp << 24;
        ev->u[6] = s->ta | s->tb << 4 | flags << 8 | st << 16;
        ev->u[7] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
        tkp_ring_commit(f->r);
    }
    errno = e;
}

/* ---- cuBLAS ---------------------------------------------------------------------------------- */

typedef cublasStatus_t (*get_stream_fn)(cublasHandle_t, cudaStream_t *);
static get_stream_fn blas_get_stream[2];

/* The handle's stream: asked of cuBLAS (a field read) only for calls we record. */
static uint64_t blas_stream(int v13, cublasHandle_t h)
{
    get_stream_fn f = TKP_REAL_LAZY(
        blas_get_stream[v13], tkp_real_lib("cublasGetStream_v2", v13 ? BLAS "13" : BLAS "12"));
    cudaStream_t s = 0;
    if (!f || f(h, &s) != CUBLAS_STATUS_SUCCESS) return 0;
    return (uint64_t)(uintptr_t)s;
}

#define GEMM(op, call, m_, n_, k_, batch_, at_, bt_, ct_, comp_, a_)                               \
    do {                                                                                          \
        struct frame f_;                                                                          \
        lib_enter(&f_);                                                                           \
        cublasStatus_t rv_ = (call);                                                              \
        struct lib_shape s_ = {(m_), (n_), (k_), (batch_), t8(at_), t8(bt_), t8(ct_), t8(comp_),   \
                               t4(ta), t4(tb), (a_)};                                             \
        lib_leave(&f_, TKP_LIB_CUBLAS, (op), f_.rec ? blas_stream(v13, h) : 0, &s_, (int)rv_);     \
        return rv_;                                                                               \
    } while (0)

LIB_PAIR(BLAS, cublasStatus_t, cublasGemmEx, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const void *al, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
          int ldb, const void *be, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
          cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, comp, algo))
static cublasStatus_t hook_cublasGemmEx(cublasGemmEx_fn real, int v13, cublasHandle_t h,
                                        cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                        int k, const void *al, const void *A, cudaDataType at,
                                        int lda, const void *B, cudaDataType bt, int ldb,
                                        const void *be, void *C, cudaDataType ct, int ldc,
                                        cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_EX, real(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, comp,
                              algo),
         m, n, k, 1, at, bt, ct, comp, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasGemmEx_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const void *al, const void *A, cudaDataType at, int64_t lda, const void *B,
          cudaDataType bt, int64_t ldb, const void *be, void *C, cudaDataType ct, int64_t ldc,
          cublasComputeType_t comp, cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, comp, algo))
static cublasStatus_t hook_cublasGemmEx_64(cublasGemmEx_64_fn real, int v13, cublasHandle_t h,
                                           cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                           int64_t n, int64_t k, const void *al, const void *A,
                                           cudaDataType at, int64_t lda, const void *B,
                                           cudaDataType bt, int64_t ldb, const void *be, void *C,
                                           cudaDataType ct, int64_t ldc, cublasComputeType_t comp,
                                           cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_EX_64, real(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc,
                                 comp, algo),
         m, n, k, 1, at, bt, ct, comp, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasGemmStridedBatchedEx, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const void *al, const void *A, cudaDataType at, int lda, long long sa, const void *B,
          cudaDataType bt, int ldb, long long sb, const void *be, void *C, cudaDataType ct,
          int ldc, long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, sa, B, bt, ldb, sb, be, C, ct, ldc, sc, batch, comp,
          algo))
static cublasStatus_t hook_cublasGemmStridedBatchedEx(
    cublasGemmStridedBatchedEx_fn real, int v13, cublasHandle_t h, cublasOperation_t ta,
    cublasOperation_t tb, int m, int n, int k, const void *al, const void *A, cudaDataType at,
    int lda, long long sa, const void *B, cudaDataType bt, int ldb, long long sb, const void *be,
    void *C, cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t comp,
    cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_SB_EX, real(h, ta, tb, m, n, k, al, A, at, lda, sa, B, bt, ldb, sb, be, C, ct,
                                 ldc, sc, batch, comp, algo),
         m, n, k, batch, at, bt, ct, comp, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasGemmStridedBatchedEx_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const void *al, const void *A, cudaDataType at, int64_t lda, long long sa,
          const void *B, cudaDataType bt, int64_t ldb, long long sb, const void *be, void *C,
          cudaDataType ct, int64_t ldc, long long sc, int64_t batch, cublasComputeType_t comp,
          cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, sa, B, bt, ldb, sb, be, C, ct, ldc, sc, batch, comp,
          algo))
static cublasStatus_t hook_cublasGemmStridedBatchedEx_64(
    cublasGemmStridedBatchedEx_64_fn real, int v13, cublasHandle_t h, cublasOperation_t ta,
    cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const void *al, const void *A,
    cudaDataType at, int64_t lda, long long sa, const void *B, cudaDataType bt, int64_t ldb,
    long long sb, const void *be, void *C, cudaDataType ct, int64_t ldc, long long sc,
    int64_t batch, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_SB_EX_64, real(h, ta, tb, m, n, k, al, A, at, lda, sa, B, bt, ldb, sb, be, C,
                                    ct, ldc, sc, batch, comp, algo),
         m, n, k, batch, at, bt, ct, comp, A);
}

/* Pointer arrays: A is an array of device pointers in device memory; its address stands in. */
LIB_PAIR(BLAS, cublasStatus_t, cublasGemmBatchedEx, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const void *al, const void *const A[], cudaDataType at, int lda, const void *const B[],
          cudaDataType bt, int ldb, const void *be, void *const C[], cudaDataType ct, int ldc,
          int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, batch, comp, algo))
static cublasStatus_t hook_cublasGemmBatchedEx(cublasGemmBatchedEx_fn real, int v13,
                                               cublasHandle_t h, cublasOperation_t ta,
                                               cublasOperation_t tb, int m, int n, int k,
                                               const void *al, const void *const A[],
                                               cudaDataType at, int lda, const void *const B[],
                                               cudaDataType bt, int ldb, const void *be,
                                               void *const C[], cudaDataType ct, int ldc,
                                               int batch, cublasComputeType_t comp,
                                               cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_B_EX, real(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc,
                                batch, comp, algo),
         m, n, k, batch, at, bt, ct, comp, (const void *)A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasGemmBatchedEx_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const void *al, const void *const A[], cudaDataType at, int64_t lda,
          const void *const B[], cudaDataType bt, int64_t ldb, const void *be, void *const C[],
          cudaDataType ct, int64_t ldc, int64_t batch, cublasComputeType_t comp,
          cublasGemmAlgo_t algo),
         (h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, batch, comp, algo))
static cublasStatus_t hook_cublasGemmBatchedEx_64(
    cublasGemmBatchedEx_64_fn real, int v13, cublasHandle_t h, cublasOperation_t ta,
    cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const void *al, const void *const A[],
    cudaDataType at, int64_t lda, const void *const B[], cudaDataType bt, int64_t ldb,
    const void *be, void *const C[], cudaDataType ct, int64_t ldc, int64_t batch,
    cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    GEMM(TKP_OP_GEMM_B_EX_64, real(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc,
                                   batch, comp, algo),
         m, n, k, batch, at, bt, ct, comp, (const void *)A);
}

/* Typed GEMMs: the types are implied (S: fp32 with 32F compute; H: fp16 with 16F compute).
 * __half is C++-only in cuda_fp16.h: its pointers are void * here (same ABI). */
LIB_PAIR(BLAS, cublasStatus_t, cublasSgemm_v2, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const float *al, const float *A, int lda, const float *B, int ldb, const float *be,
          float *C, int ldc),
         (h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc))
static cublasStatus_t hook_cublasSgemm_v2(cublasSgemm_v2_fn real, int v13, cublasHandle_t h,
                                          cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const float *al, const float *A, int lda,
                                          const float *B, int ldb, const float *be, float *C,
                                          int ldc)
{
    GEMM(TKP_OP_SGEMM, real(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc), m, n, k, 1,
         CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasSgemm_v2_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const float *al, const float *A, int64_t lda, const float *B, int64_t ldb,
          const float *be, float *C, int64_t ldc),
         (h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc))
static cublasStatus_t hook_cublasSgemm_v2_64(cublasSgemm_v2_64_fn real, int v13,
                                             cublasHandle_t h, cublasOperation_t ta,
                                             cublasOperation_t tb, int64_t m, int64_t n,
                                             int64_t k, const float *al, const float *A,
                                             int64_t lda, const float *B, int64_t ldb,
                                             const float *be, float *C, int64_t ldc)
{
    GEMM(TKP_OP_SGEMM_64, real(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc), m, n, k, 1,
         CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasHgemm, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const void *al, const void *A, int lda, const void *B, int ldb, const void *be,
          void *C, int ldc),
         (h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc))
static cublasStatus_t hook_cublasHgemm(cublasHgemm_fn real, int v13, cublasHandle_t h,
                                       cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                       int k, const void *al, const void *A, int lda,
                                       const void *B, int ldb, const void *be, void *C,
                                       int ldc)
{
    GEMM(TKP_OP_HGEMM, real(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc), m, n, k, 1,
         CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasHgemm_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const void *al, const void *A, int64_t lda, const void *B, int64_t ldb,
          const void *be, void *C, int64_t ldc),
         (h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc))
static cublasStatus_t hook_cublasHgemm_64(cublasHgemm_64_fn real, int v13, cublasHandle_t h,
                                          cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                          int64_t n, int64_t k, const void *al, const void *A,
                                          int64_t lda, const void *B, int64_t ldb,
                                          const void *be, void *C, int64_t ldc)
{
    GEMM(TKP_OP_HGEMM_64, real(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc), m, n, k, 1,
         CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasSgemmStridedBatched, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
          const float *al, const float *A, int lda, long long sa, const float *B, int ldb,
          long long sb, const float *be, float *C, int ldc, long long sc, int batch),
         (h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, batch))
static cublasStatus_t hook_cublasSgemmStridedBatched(
    cublasSgemmStridedBatched_fn real, int v13, cublasHandle_t h, cublasOperation_t ta,
    cublasOperation_t tb, int m, int n, int k, const float *al, const float *A, int lda,
    long long sa, const float *B, int ldb, long long sb, const float *be, float *C, int ldc,
    long long sc, int batch)
{
    GEMM(TKP_OP_SGEMM_SB, real(h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc,
                               batch),
         m, n, k, batch, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A);
}

LIB_PAIR(BLAS, cublasStatus_t, cublasSgemmStridedBatched_64, NOSYM,
         (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const float *al, const float *A, int64_t lda, long long sa, const float *B,
          int64_t ldb, long long sb, const float *be, float *C, int64_t ldc, long long sc,
          int64_t batch),
         (h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, batch))
static cublasStatus_t hook_cublasSgemmStridedBatched_64(
    cublasSgemmStridedBatched_64_fn real, int v13, cublasHandle_t h, cublasOperation_t ta,
    cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const float *al, const float *A,
    int64_t lda, long long sa, const float *B, int64_t ldb, long long sb, const float *be,
    float *C, int64_t ldc, long long sc, int64_t batch)
{
    GEMM(TKP_OP_SGEMM_SB_64, real(h, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc,
                                  batch),
         m, n, k, batch, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, A);
}

/* ---- cuBLASLt: descriptors ------------------------------------------------------------------
 * These keep the descriptor cache exact; they run whatever the nesting or capture state (a
 * descriptor made before capture started is used after). */

#define LT_NOSYM CUBLAS_STATUS_NOT_INITIALIZED

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatrixLayoutCreate, LT_NOSYM,
         (cublasLtMatrixLayout_t * l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
         (l, type, rows, cols, ld))
static cublasStatus_t hook_cublasLtMatrixLayoutCreate(cublasLtMatrixLayoutCreate_fn real, int v13,
                                                      cublasLtMatrixLayout_t *l, cudaDataType type,
                                                      uint64_t rows, uint64_t cols, int64_t ld)
{
    (void)v13;
    cublasStatus_t rv = real(l, type, rows, cols, ld);
    if (rv == CUBLAS_STATUS_SUCCESS && l && *l) {
        int e = errno;
        uint64_t v[4] = {(uint64_t)type, rows, cols, 1};
        tkp_desc_put(*l, TKP_DESC_LAYOUT, v);
        errno = e;
    }
    return rv;
}

/* cublasLtMatrixLayoutInit (header inline) for descriptors in the caller's memory. */
LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatrixLayoutInit_internal, LT_NOSYM,
         (cublasLtMatrixLayout_t l, size_t size, cudaDataType type, uint64_t rows, uint64_t cols,
          int64_t ld),
         (l, size, type, rows, cols, ld))
static cublasStatus_t hook_cublasLtMatrixLayoutInit_internal(
    cublasLtMatrixLayoutInit_internal_fn real, int v13, cublasLtMatrixLayout_t l, size_t size,
    cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld)
{
    (void)v13;
    int e = errno;
    tkp_desc_drop(l, TKP_DESC_LAYOUT);
    errno = e;
    cublasStatus_t rv = real(l, size, type, rows, cols, ld);
    if (rv == CUBLAS_STATUS_SUCCESS) {
        e = errno;
        uint64_t v[4] = {(uint64_t)type, rows, cols, 1};
        tkp_desc_put(l, TKP_DESC_LAYOUT, v);
        errno = e;
    }
    return rv;
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatrixLayoutSetAttribute, LT_NOSYM,
         (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const void *buf,
          size_t size),
         (l, attr, buf, size))
static cublasStatus_t hook_cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayoutSetAttribute_fn real, int v13, cublasLtMatrixLayout_t l,
    cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t size)
{
    (void)v13;
    cublasStatus_t rv = real(l, attr, buf, size);
    if (rv != CUBLAS_STATUS_SUCCESS || !buf) return rv;
    int e = errno;
    /* sizes are exact or the library refused above (notes/cuda-hooks.md 4.3) */
    if (attr == CUBLASLT_MATRIX_LAYOUT_TYPE && size == 4)
        tkp_desc_set(l, TKP_DESC_LAYOUT, 0, *(const uint32_t *)buf);
    else if (attr == CUBLASLT_MATRIX_LAYOUT_ROWS && size == 8)
        tkp_desc_set(l, TKP_DESC_LAYOUT, 1, *(const uint64_t *)buf);
    else if (attr == CUBLASLT_MATRIX_LAYOUT_COLS && size == 8)
        tkp_desc_set(l, TKP_DESC_LAYOUT, 2, *(const uint64_t *)buf);
    else if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4)
        tkp_desc_set(l, TKP_DESC_LAYOUT, 3, (uint64_t)(uint32_t)*(const int32_t *)buf);
    errno = e;
    return rv;
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatrixLayoutDestroy, LT_NOSYM,
         (const cublasLtMatrixLayout_t l), (l))
static cublasStatus_t hook_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayoutDestroy_fn real,
                                                       int v13, const cublasLtMatrixLayout_t l)
{
    (void)v13;
    int e = errno;
    tkp_desc_drop(l, TKP_DESC_LAYOUT); /* before: once freed, the address may be reused */
    errno = e;
    return real(l);
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatmulDescCreate, LT_NOSYM,
         (cublasLtMatmulDesc_t * d, cublasComputeType_t comp, cudaDataType_t scale),
         (d, comp, scale))
static cublasStatus_t hook_cublasLtMatmulDescCreate(cublasLtMatmulDescCreate_fn real, int v13,
                                                    cublasLtMatmulDesc_t *d,
                                                    cublasComputeType_t comp, cudaDataType_t scale)
{
    (void)v13;
    cublasStatus_t rv = real(d, comp, scale);
    if (rv == CUBLAS_STATUS_SUCCESS && d && *d) {
        int e = errno;
        uint64_t v[4] = {(uint64_t)comp, CUBLAS_OP_N, CUBLAS_OP_N, 0};
        tkp_desc_put(*d, TKP_DESC_MATMUL, v);
        errno = e;
    }
    return rv;
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatmulDescInit_internal, LT_NOSYM,
         (cublasLtMatmulDesc_t d, size_t size, cublasComputeType_t comp, cudaDataType_t scale),
         (d, size, comp, scale))
static cublasStatus_t hook_cublasLtMatmulDescInit_internal(cublasLtMatmulDescInit_internal_fn real,
                                                           int v13, cublasLtMatmulDesc_t d,
                                                           size_t size, cublasComputeType_t comp,
                                                           cudaDataType_t scale)
{
    (void)v13;
    int e = errno;
    tkp_desc_drop(d, TKP_DESC_MATMUL);
    errno = e;
    cublasStatus_t rv = real(d, size, comp, scale);
    if (rv == CUBLAS_STATUS_SUCCESS) {
        e = errno;
        uint64_t v[4] = {(uint64_t)comp, CUBLAS_OP_N, CUBLAS_OP_N, 0};
        tkp_desc_put(d, TKP_DESC_MATMUL, v);
        errno = e;
    }
    return rv;
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatmulDescSetAttribute, LT_NOSYM,
         (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *buf,
          size_t size),
         (d, attr, buf, size))
static cublasStatus_t hook_cublasLtMatmulDescSetAttribute(cublasLtMatmulDescSetAttribute_fn real,
                                                          int v13, cublasLtMatmulDesc_t d,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          const void *buf, size_t size)
{
    (void)v13;
    cublasStatus_t rv = real(d, attr, buf, size);
    if (rv != CUBLAS_STATUS_SUCCESS || !buf || size != 4) return rv;
    int e = errno;
    uint64_t v = (uint64_t)(uint32_t)*(const int32_t *)buf;
    if (attr == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) tkp_desc_set(d, TKP_DESC_MATMUL, 0, v);
    else if (attr == CUBLASLT_MATMUL_DESC_TRANSA) tkp_desc_set(d, TKP_DESC_MATMUL, 1, v);
    else if (attr == CUBLASLT_MATMUL_DESC_TRANSB) tkp_desc_set(d, TKP_DESC_MATMUL, 2, v);
    errno = e;
    return rv;
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatmulDescDestroy, LT_NOSYM,
         (const cublasLtMatmulDesc_t d), (d))
static cublasStatus_t hook_cublasLtMatmulDescDestroy(cublasLtMatmulDescDestroy_fn real, int v13,
                                                     const cublasLtMatmulDesc_t d)
{
    (void)v13;
    int e = errno;
    tkp_desc_drop(d, TKP_DESC_MATMUL);
    errno = e;
    return real(d);
}

/* ---- cuBLASLt: matmul ------------------------------------------------------------------------- */

typedef cublasStatus_t (*layout_get_fn)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                        void *, size_t, size_t *);
typedef cublasStatus_t (*desc_get_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void *,
                                      size_t, size_t *);
static layout_get_fn layout_get[2];
static desc_get_fn desc_get[2];

/* A descriptor the cache does not hold (evicted, or the cache is off): asked of the library
 * once, then cached. Returns 0 when it cannot be read. */
static int layout_of(int v13, cublasLtMatrixLayout_t l, uint64_t v[4])
{
    if (!l) return 0;
    if (TKP_LIKELY(tkp_desc_get(l, TKP_DESC_LAYOUT, v))) return 1;
    layout_get_fn f = TKP_REAL_LAZY(layout_get[v13],
                                    tkp_real_lib("cublasLtMatrixLayoutGetAttribute",
                                                 v13 ? BLASLT "13" : BLASLT "12"));
    uint32_t type;
    uint64_t rows, cols;
    int32_t batch = 1;
    size_t w;
    if (!f || f(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, &w) ||
        f(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &w) ||
        f(l, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols, &w))
        return 0;
    if (f(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, &w)) batch = 1;
    v[0] = type, v[1] = rows, v[2] = cols, v[3] = (uint64_t)(uint32_t)batch;
    tkp_desc_put(l, TKP_DESC_LAYOUT, v);
    return 1;
}

static int matmul_of(int v13, cublasLtMatmulDesc_t d, uint64_t v[4])
{
    if (!d) return 0;
    if (TKP_LIKELY(tkp_desc_get(d, TKP_DESC_MATMUL, v))) return 1;
    desc_get_fn f = TKP_REAL_LAZY(desc_get[v13], tkp_real_lib("cublasLtMatmulDescGetAttribute",
                                                              v13 ? BLASLT "13" : BLASLT "12"));
    int32_t comp, ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    size_t w;
    if (!f || f(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &comp, sizeof comp, &w)) return 0;
    if (f(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &w)) ta = CUBLAS_OP_N;
    if (f(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb, &w)) tb = CUBLAS_OP_N;
    v[0] = (uint32_t)comp, v[1] = (uint32_t)ta, v[2] = (uint32_t)tb, v[3] = 0;
    tkp_desc_put(d, TKP_DESC_MATMUL, v);
    return 1;
}

/* D is m x n; k from A and TRANSA (notes/cuda-hooks.md 4.3). Unknown parts stay unknown. */
static void lt_shape(int v13, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, struct lib_shape *s)
{
    uint64_t dv[4], a[4], b[4], o[4];
    int ta = CUBLAS_OP_N;
    if (matmul_of(v13, d, dv)) {
        s->comp = t8((int)dv[0]), s->ta = t4((int)dv[1]), s->tb = t4((int)dv[2]);
        ta = (int)dv[1];
    }
    if (layout_of(v13, ld, o)) {
        s->m = (int64_t)o[1], s->n = (int64_t)o[2], s->batch = (int64_t)o[3];
        s->ct = t8((int)o[0]);
    }
    if (layout_of(v13, la, a)) {
        s->k = (int64_t)(ta == CUBLAS_OP_N ? a[2] : a[1]);
        s->at = t8((int)a[0]);
    }
    if (layout_of(v13, lb, b)) s->bt = t8((int)b[0]);
}

LIB_PAIR(BLASLT, cublasStatus_t, cublasLtMatmul, LT_NOSYM,
         (cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *al, const void *A,
          cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb, const void *be,
          const void *C, cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
          const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss, cudaStream_t st),
         (h, d, al, A, la, B, lb, be, C, lc, D, ld, algo, ws, wss, st))
static cublasStatus_t hook_cublasLtMatmul(cublasLtMatmul_fn real, int v13, cublasLtHandle_t h,
                                          cublasLtMatmulDesc_t d, const void *al, const void *A,
                                          cublasLtMatrixLayout_t la, const void *B,
                                          cublasLtMatrixLayout_t lb, const void *be, const void *C,
                                          cublasLtMatrixLayout_t lc, void *D,
                                          cublasLtMatrixLayout_t ld,
                                          const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss,
                                          cudaStream_t st)
{
    struct frame f;
    struct lib_shape s = {0, 0, 0, 0, TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN8,
                          TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN4, TKP_LIB_UNKNOWN4, A};
    lib_enter(&f);
    if (f.rec) {
        /* before the call, so that the call's host time is the library's alone */
        int e = errno;
        lt_shape(v13, d, la, lb, ld, &s);
        errno = e;
        f.t0 = tkp_stamp();
    }
    cublasStatus_t rv = real(h, d, al, A, la, B, lb, be, C, lc, D, ld, algo, ws, wss, st);
    lib_leave(&f, TKP_LIB_CUBLASLT, TKP_OP_LT_MATMUL, (uint64_t)(uintptr_t)st, &s, (int)rv);
    return rv;
}

/* ---- cuDNN --------------------------------------------------------------------------------------
 * Calls and their kernels only: shapes of backend graphs need cudnnBackendGetAttribute walks of
 * the plan (not done), and a legacy convolution's need the tensor descriptors' getters. */

typedef cudnnStatus_t (*dnn_get_stream_fn)(cudnnHandle_t, cudaStream_t *);
static dnn_get_stream_fn dnn_get_stream;

static uint64_t dnn_stream(cudnnHandle_t h)
{
    dnn_get_stream_fn f = TKP_REAL_LAZY(dnn_get_stream, tkp_real_lib("cudnnGetStream", DNN));
    cudaStream_t s = 0;
    if (!f || f(h, &s) != CUDNN_STATUS_SUCCESS) return 0;
    return (uint64_t)(uintptr_t)s;
}

static const struct lib_shape dnn_unknown = {0, 0, 0, 0, TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN8,
                                             TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN8, TKP_LIB_UNKNOWN4,
                                             TKP_LIB_UNKNOWN4, NULL};

LIB_ONE(DNN, cudnnStatus_t, cudnnBackendExecute, CUDNN_STATUS_NOT_INITIALIZED,
        (cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack),
        (h, plan, pack))
static cudnnStatus_t hook_cudnnBackendExecute(cudnnBackendExecute_fn real, int v13,
                                              cudnnHandle_t h, cudnnBackendDescriptor_t plan,
                                              cudnnBackendDescriptor_t pack)
{
    (void)v13;
    struct frame f;
    lib_enter(&f);
    cudnnStatus_t rv = real(h, plan, pack);
    lib_leave(&f, TKP_LIB_CUDNN, TKP_OP_CUDNN_BACKEND_EXECUTE, f.rec ? dnn_stream(h) : 0,
              &dnn_unknown, (int)rv);
    return rv;
}

LIB_ONE(DNN, cudnnStatus_t, cudnnConvolutionForward, CUDNN_STATUS_NOT_INITIALIZED,
        (cudnnHandle_t h, const void *al, const cudnnTensorDescriptor_t xd, const void *x,
         const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
         cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wss, const void *be,
         const cudnnTensorDescriptor_t yd, void *y),
        (h, al, xd, x, wd, w, cd, algo, ws, wss, be, yd, y))
static cudnnStatus_t hook_cudnnConvolutionForward(
    cudnnConvolutionForward_fn real, int v13, cudnnHandle_t h, const void *al,
    const cudnnTensorDescriptor_t xd, const void *x, const cudnnFilterDescriptor_t wd,
    const void *w, const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, void *ws,
    size_t wss, const void *be, const cudnnTensorDescriptor_t yd, void *y)
{
    (void)v13;
    struct frame f;
    lib_enter(&f);
    cudnnStatus_t rv = real(h, al, xd, x, wd, w, cd, algo, ws, wss, be, yd, y);
    struct lib_shape s = dnn_unknown;
    s.a = w;
    lib_leave(&f, TKP_LIB_CUDNN, TKP_OP_CUDNN_CONV_FWD, f.rec ? dnn_stream(h) : 0, &s, (int)rv);
    return rv;
}
