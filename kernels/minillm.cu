// minillm: a small Llama-style decoder with real CUDA kernels and cuBLAS / cuBLASLt GEMMs, shaped
// like the decode loops of vLLM, llama.cpp and HF generate() on the CUDA API side. A test target
// for tokprof: it runs unmodified on a real GPU and on tests/simgpu. See README.md.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h> // types for cuLaunchKernelEx (obtained with dlsym, as Triton does)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>

#include <map>
#include <string>
#include <vector>

#include "minillm_kernels.cuh"

#define CK(x) ck_cuda((x), #x, __FILE__, __LINE__)
#define CB(x) ck_blas((x), #x, __FILE__, __LINE__)

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "minillm: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}
static void ck_cuda(cudaError_t e, const char *what, const char *f, int l)
{
    if (e != cudaSuccess)
        die("%s:%d: %s: %s", f, l, what, cudaGetErrorString(e));
}
static void ck_blas(cublasStatus_t s, const char *what, const char *f, int l)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        die("%s:%d: %s: cuBLAS status %d", f, l, what, (int)s);
}

enum Style { STYLE_VLLM, STYLE_LLAMACPP, STYLE_HF };

struct Config {
    int layers = 4, hidden = 256, heads = 4, inter = 0, vocab = 1024, batch = 1, prefill = 16, steps = 32;
    int moe_e = 0, moe_k = 0, moe_fused = 0, graphs = 0, async = 0, driver = 0, threads = 1, exc = 0;
    int check = 0, verbose = 0, host_us = 0;
    double zipf = 0;
    unsigned seed = 1;
    Style style = STYLE_VLLM;
    const char *log = NULL;
};
static Config cfg;

// ---- what the host enqueues, for the --log records ------------------------------------------
struct Gemm {
    const char *api;
    long m, n, k, batch;
    const char *ctype;
};
struct Counts {                       // one step (or the setup, or a captured graph)
    long kernels = 0, eager = 0, graph_launches = 0, graph_kernels = 0, lib = 0, driver = 0, copies = 0;
    std::map<std::string, long> names; // minillm's own kernels only (library kernels: `lib`)
};
struct StepLog {
    int step, tokens;
    const char *kind;
    Counts c;
    std::vector<Gemm> gemms;
    std::vector<std::vector<int>> load;
    double host_ms;
    double tok_ms = 0; // CLOCK_MONOTONIC when its sampled tokens reached the host
};

static pthread_mutex_t name_mu = PTHREAD_MUTEX_INITIALIZER;
static std::map<const void *, std::string> kernel_names;

static std::string kernel_name(const void *fn)
{
    pthread_mutex_lock(&name_mu);
    auto it = kernel_names.find(fn);
    std::string n;
    if (it != kernel_names.end()) {
        n = it->second;
    } else {
        const char *s = NULL;
        n = (cudaFuncGetName(&s, fn) == cudaSuccess && s) ? s : "?";
        kernel_names[fn] = n;
    }
    pthread_mutex_unlock(&name_mu);
    return n;
}

// The split-K rule of tests/simgpu/libs (README there): the fakes launch a second kernel
// (splitKreduce_kernel) for these shapes. Used only to predict library kernel counts for --log.
static int lib_kernels_for(long m, long n, long k, long batch)
{
    (void)m;
    int split = batch == 1 && k >= 1024 && k >= 4 * m && n <= 64 && k / 256 > 1;
    return 1 + split;
}

// ---- model ----------------------------------------------------------------------------------
struct Weights {
    bf16 *emb, *lm_head;
    float *final_norm;
    std::vector<bf16 *> wq, wk, wv, wo, wgu, wdown, wrouter, wexp13, wexp2;
    std::vector<float *> norm1, norm2;
};
static Weights W;

struct Thr { // one decode loop: its own streams, handles, activations and KV cache
    int id;
    cudaStream_t s0, s1;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_size;
    int T_max, maxctx, chunks_max;
    float *x, *pm, *pl, *pacc, *logits, *tmp, *mean, *router;
    bf16 *xn, *q, *k, *v, *attn, *o, *gu, *a, *d, *xp, *yp, *s_act, *gu_moe, *a_moe;
    std::vector<bf16 *> kc, vc;
    int *ids, *pos, *sampled[2], *route, *topk_ids, *moe_counts;
    float *topk_w;
    unsigned char *unfinished, *flag;
    int *h_in[4];       // pinned input staging ring (positions, ids, routing)
    int *h_sampled[2];  // pinned destinations of the sampled-id copies
    float *h_logits;    // pinned logits row(s) (llamacpp)
    unsigned char *h_flag;
    cudaEvent_t ev_main, ev_copy[2];
    cudaGraphExec_t graph = NULL;
    Counts graph_counts;
    Counts *cur;         // where launches are being counted (a step, or the graph being captured)
    bool capturing = false;
    StepLog *step;
    std::vector<StepLog> steps;
    uint64_t rng;
    std::vector<int> generated;
    const int *host_ids;  // llamacpp: ids sampled on the CPU, next step's input
    std::vector<int> cpu_ids;
};

static Counts setup_counts;
static Counts *setup_cur = &setup_counts;

static void note_kernel(Counts *c, const void *fn, bool captured)
{
    c->kernels++;
    c->names[kernel_name(fn)]++;
    if (!captured)
        c->eager++;
}

static bool exc_kernel(const void *fn);

template <typename... P, typename... A>
static void launch(Thr *t, cudaStream_t s, void (*k)(P...), dim3 g, dim3 b, A... args)
{
    Counts *c = t ? t->cur : setup_cur;
    note_kernel(c, (const void *)k, t && t->capturing);
    if (cfg.exc && exc_kernel((const void *)k)) {
        cudaLaunchConfig_t lc = {};
        lc.gridDim = g;
        lc.blockDim = b;
        lc.dynamicSmemBytes = 0;
        lc.stream = s;
        CK(cudaLaunchKernelEx(&lc, k, args...));
    } else {
        k<<<g, b, 0, s>>>(args...);
        CK(cudaGetLastError());
    }
}

static void copy_async(Thr *t, void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s)
{
    (t ? t->cur : setup_cur)->copies++;
    CK(cudaMemcpyAsync(dst, src, n, kind, s));
}

static void memset_async(Thr *t, void *dst, int v, size_t n, cudaStream_t s)
{
    (t ? t->cur : setup_cur)->copies++;
    CK(cudaMemsetAsync(dst, v, n, s));
}

// --driver: the RoPE kernel goes through cuLaunchKernelEx from dlsym(libcuda.so.1), with the
// CUfunction from cudaGetFuncBySymbol (how Triton-launched kernels reach the driver).
typedef CUresult (*cuLaunchKernelEx_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
static cuLaunchKernelEx_fn p_cuLaunchKernelEx;

static void launch_rope(Thr *t, int T)
{
    int NH = cfg.heads, D = cfg.hidden / cfg.heads;
    void (*k)(bf16 *, bf16 *, const int *, int, int) = rotary_embedding_kernel<bf16>;
    if (!cfg.driver) {
        launch(t, t->s0, k, dim3(T), dim3(128), t->q, t->k, (const int *)t->pos, NH, D);
        return;
    }
    note_kernel(t->cur, (const void *)k, t->capturing);
    if (!t->capturing)
        t->cur->driver++;
    cudaFunction_t f;
    CK(cudaGetFuncBySymbol(&f, (const void *)k));
    CUlaunchConfig lc = {};
    lc.gridDimX = T; lc.gridDimY = 1; lc.gridDimZ = 1;
    lc.blockDimX = 128; lc.blockDimY = 1; lc.blockDimZ = 1;
    lc.hStream = (CUstream)t->s0;
    bf16 *q = t->q, *kk = t->k;
    const int *pos = t->pos;
    void *params[] = {&q, &kk, &pos, &NH, &D};
    CUresult r = p_cuLaunchKernelEx(&lc, (CUfunction)f, params, NULL);
    if (r != CUDA_SUCCESS)
        die("cuLaunchKernelEx: CUresult %d", (int)r);
}

// Y[T, N] = X[T, K] W[N, K]^T, as PyTorch's Linear does it (column-major: C = op(W) * X).
static void gemm(Thr *t, const bf16 *X, int ldx, const bf16 *Wt, void *Y, int ldy, int T, int N, int K,
                 cudaDataType ctype = CUDA_R_16BF)
{
    float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(t->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, Wt, CUDA_R_16BF, K, X, CUDA_R_16BF, ldx, &zero,
                    Y, ctype, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    t->step->gemms.push_back({"cublasGemmEx", N, T, K, 1, ctype == CUDA_R_32F ? "f32" : "bf16"});
    long n = lib_kernels_for(N, T, K, 1);
    t->cur->kernels += n;
    t->cur->lib += n;
    if (!t->capturing)
        t->cur->eager += n;
}

// lm_head through cuBLASLt (descriptors, heuristic, matmul), fp32 logits for the sampled rows.
static void lm_head(Thr *t, const bf16 *X, int ldx, int rows)
{
    int H = cfg.hidden, V = cfg.vocab;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, H, V, H));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, H, rows, ldx));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, V, rows, V));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = t->lt_ws_size;
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(t->lt, d, la, lb, lc, lc, pref, 1, &res, &n));
    if (n < 1)
        die("cublasLtMatmulAlgoGetHeuristic: no algorithm");
    float one = 1.0f, zero = 0.0f;
    CB(cublasLtMatmul(t->lt, d, &one, W.lm_head, la, X, lb, &zero, t->logits, lc, t->logits, lc, &res.algo, t->lt_ws,
                      t->lt_ws_size, t->s0));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(d);
    t->step->gemms.push_back({"cublasLtMatmul", V, rows, H, 1, "f32"});
    long k = lib_kernels_for(V, rows, H, 1);
    t->cur->kernels += k;
    t->cur->lib += k;
    t->cur->eager += k;
}

static bool exc_kernel(const void *fn)
{
    return fn == (const void *)silu_and_mul_kernel<bf16> || fn == (const void *)fused_add_rms_norm_kernel ||
           fn == (const void *)paged_attention_combine_kernel;
}

static unsigned cdiv(long a, long b) { return (unsigned)((a + b - 1) / b); }
static unsigned ew_grid(long n) { long g = (n + 255) / 256; return (unsigned)(g > 1024 ? 1024 : g); }

// Norm before attention / MLP / lm_head; with delta, the residual add first. vLLM and llama.cpp
// styles fuse it; HF eager splits it into PyTorch's elementwise and reduction kernels.
static void norm(Thr *t, int T, const bf16 *delta, const float *w)
{
    int H = cfg.hidden;
    using namespace at::native;
    if (cfg.style != STYLE_HF) {
        if (delta)
            launch(t, t->s0, fused_add_rms_norm_kernel, dim3(T), dim3(256), t->xn, t->x, delta, w, H);
        else
            launch(t, t->s0, rms_norm_kernel<256>, dim3(T), dim3(256), t->xn, (const float *)t->x, w, H);
        return;
    }
    int n = T * H;
    if (delta)
        launch(t, t->s0, vectorized_elementwise_kernel<4, AddResidualFunctor>, dim3(ew_grid(n)), dim3(256), n,
               AddResidualFunctor{t->x, delta});
    launch(t, t->s0, vectorized_elementwise_kernel<4, PowFunctor>, dim3(ew_grid(n)), dim3(256), n,
           PowFunctor{t->tmp, t->x});
    launch(t, t->s0, reduce_kernel<MeanOps>, dim3(T), dim3(256), MeanOps{t->mean, t->tmp, H});
    launch(t, t->s0, vectorized_elementwise_kernel<4, RsqrtMulFunctor>, dim3(ew_grid(n)), dim3(256), n,
           RsqrtMulFunctor{t->tmp, t->x, t->mean, H});
    launch(t, t->s0, vectorized_elementwise_kernel<4, MulWeightCastFunctor>, dim3(ew_grid(n)), dim3(256), n,
           MulWeightCastFunctor{t->xn, t->tmp, w, H});
}

static void act(Thr *t, bf16 *out, const bf16 *gu, int rows)
{
    int I = cfg.inter;
    using namespace at::native;
    if (cfg.style == STYLE_HF) {
        int n = rows * I;
        launch(t, t->s0, vectorized_elementwise_kernel<4, SiluFunctor>, dim3(ew_grid(n)), dim3(256), n,
               SiluFunctor{t->s_act, gu, I});
        launch(t, t->s0, vectorized_elementwise_kernel<4, MulFunctor>, dim3(ew_grid(n)), dim3(256), n,
               MulFunctor{out, t->s_act, gu, I});
    } else {
        launch(t, t->s0, silu_and_mul_kernel<bf16>, dim3(rows), dim3(256), out, gu, I);
    }
}

// Routing tables for one step, decided on the host (see README): per layer, src_token[T*k],
// slot_row[T*k], topk_ids[T*k]; rows sorted by expert.
static void route_step(Thr *t, int T, int *buf, std::vector<std::vector<int>> &load)
{
    int E = cfg.moe_e, k = cfg.moe_k, Tk = T * k;
    std::vector<double> w(E);
    double tot = 0;
    for (int e = 0; e < E; e++)
        tot += (w[e] = 1.0 / pow(e + 1.0, cfg.zipf));
    load.assign(cfg.layers, std::vector<int>(E, 0));
    for (int l = 0; l < cfg.layers; l++) {
        int *src = buf + (size_t)l * 3 * Tk, *slot = src + Tk, *ids = slot + Tk;
        for (int tok = 0; tok < T; tok++) {
            unsigned long long used = 0;
            for (int j = 0; j < k; j++) {
                int e;
                do {
                    t->rng = t->rng * 6364136223846793005ull + 1442695040888963407ull;
                    double u = (double)(t->rng >> 11) / 9007199254740992.0 * tot, acc = 0;
                    for (e = 0; e < E - 1; e++)
                        if ((acc += w[e]) > u)
                            break;
                } while (used >> e & 1);
                used |= 1ull << e;
                ids[tok * k + j] = e;
                load[l][e]++;
            }
        }
        std::vector<int> off(E + 1, 0);
        for (int e = 0; e < E; e++)
            off[e + 1] = off[e] + load[l][e];
        for (int i = 0; i < Tk; i++) {
            int row = off[ids[i]]++;
            src[row] = i / k;
            slot[i] = row;
        }
    }
}

static void moe_mlp(Thr *t, int T, int l)
{
    int H = cfg.hidden, I = cfg.inter, E = cfg.moe_e, k = cfg.moe_k, Tk = T * k;
    const int *src = t->route + (size_t)l * 3 * Tk, *slot = src + Tk, *ids = slot + Tk;
    gemm(t, t->xn, H, W.wrouter[l], t->router, E, T, E, H, CUDA_R_32F);
    launch(t, t->s0, moe_topk_softmax_kernel, dim3(T), dim3(32), t->topk_w, t->topk_ids, (const float *)t->router,
           E, k);
    if (cfg.moe_fused) {
        const int BM = 64, BN = 64;
        long EM = std::min((long)Tk + (long)E * (BM - 1), (long)Tk * BM);
        launch(t, t->s0, moe_align_block_size_kernel, dim3(1), dim3(32), t->moe_counts, ids, Tk, E);
        launch(t, t->s0, fused_moe_kernel<64, 64>, dim3(cdiv(EM, BM) * cdiv(2 * I, BN)), dim3(256), t->gu_moe,
               (const bf16 *)t->xn, (const bf16 *)W.wexp13[l], ids, Tk, 2 * I, H, k);
        launch(t, t->s0, silu_and_mul_kernel<bf16>, dim3(Tk), dim3(256), t->a_moe, (const bf16 *)t->gu_moe, I);
        launch(t, t->s0, fused_moe_kernel<64, 64>, dim3(cdiv(EM, BM) * cdiv(H, BN)), dim3(256), t->yp,
               (const bf16 *)t->a_moe, (const bf16 *)W.wexp2[l], ids, Tk, H, I, 1);
        launch(t, t->s0, moe_sum_kernel, dim3(T), dim3(256), t->d, (const bf16 *)t->yp, H, k);
        return;
    }
    // HF-eager-like: per-expert GEMMs whose M (cuBLAS n) is the expert's token count.
    launch(t, t->s0, moe_permute_kernel, dim3(Tk), dim3(256), t->xp, (const bf16 *)t->xn, src, H);
    const std::vector<int> &load = t->step->load[l];
    int off = 0;
    for (int e = 0; e < E; e++) {
        int c = load[e];
        if (!c)
            continue;
        const bf16 *w13 = W.wexp13[l] + (size_t)e * 2 * I * H;
        gemm(t, t->xp + (size_t)off * H, H, w13, t->gu_moe + (size_t)off * 2 * I, 2 * I, c, I, H);
        gemm(t, t->xp + (size_t)off * H, H, w13 + (size_t)I * H, t->gu_moe + (size_t)off * 2 * I + I, 2 * I, c, I, H);
        launch(t, t->s0, silu_and_mul_kernel<bf16>, dim3(c), dim3(256), t->a_moe + (size_t)off * I,
               (const bf16 *)(t->gu_moe + (size_t)off * 2 * I), I);
        gemm(t, t->a_moe + (size_t)off * I, I, W.wexp2[l] + (size_t)e * H * I, t->yp + (size_t)off * H, H, c, H, I);
        off += c;
    }
    launch(t, t->s0, moe_unpermute_reduce_kernel, dim3(T), dim3(256), t->d, (const bf16 *)t->yp, slot, H, k);
}

// The forward pass up to the final norm (what vLLM captures into its decode graph).
static void forward(Thr *t, int T, int tps, int nchunks)
{
    int H = cfg.hidden, NH = cfg.heads, D = H / NH, I = cfg.inter;
    float scale = 1.0f / sqrtf((float)D);
    launch(t, t->s0, embedding_kernel<bf16>, dim3(T), dim3(256), t->x, (const int *)t->ids, (const bf16 *)W.emb, H);
    for (int l = 0; l < cfg.layers; l++) {
        norm(t, T, l ? t->d : NULL, W.norm1[l]);
        gemm(t, t->xn, H, W.wq[l], t->q, H, T, H, H);
        gemm(t, t->xn, H, W.wk[l], t->k, H, T, H, H);
        gemm(t, t->xn, H, W.wv[l], t->v, H, T, H, H);
        launch_rope(t, T);
        launch(t, t->s0, reshape_and_cache_kernel, dim3(T), dim3(256), t->kc[l], t->vc[l], (const bf16 *)t->k,
               (const bf16 *)t->v, (const int *)t->pos, H, t->maxctx, tps);
        launch(t, t->s0, paged_attention_decode_kernel<128>, dim3(nchunks, NH, T), dim3(128), t->pm, t->pl, t->pacc,
               (const bf16 *)t->q, (const bf16 *)t->kc[l], (const bf16 *)t->vc[l], (const int *)t->pos, NH, D,
               t->maxctx, tps, t->chunks_max, scale);
        launch(t, t->s0, paged_attention_combine_kernel, dim3(NH, T), dim3(64), t->attn, (const float *)t->pm,
               (const float *)t->pl, (const float *)t->pacc, NH, D, nchunks, t->chunks_max);
        gemm(t, t->attn, H, W.wo[l], t->o, H, T, H, H);
        norm(t, T, t->o, W.norm2[l]);
        if (cfg.moe_e) {
            moe_mlp(t, T, l);
        } else {
            gemm(t, t->xn, H, W.wgu[l], t->gu, 2 * I, T, I, H);
            gemm(t, t->xn, H, W.wgu[l] + (size_t)I * H, t->gu + I, 2 * I, T, I, H);
            act(t, t->a, t->gu, T);
            gemm(t, t->a, I, W.wdown[l], t->d, H, T, H, I);
        }
    }
    norm(t, T, t->d, W.final_norm);
}

static double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static std::vector<float> check_logits; // step 0 logits (real GPU, --check)

static int prompt_token(int thread, int i)
{
    int V = cfg.vocab;
    return (int)((mllm_hash_uniform(cfg.seed * 7919u + 17u * thread, (uint64_t)i) + 1.0f) * 0.5f * V) % V;
}

static void consume_sampled(Thr *t, int slot)
{
    for (int b = 0; b < cfg.batch; b++)
        t->generated.push_back(t->h_sampled[slot][b]);
}

// One generate-loop iteration: inputs, forward (eager or graph), lm_head, sampling, end-of-step.
static void run_step(Thr *t, int s)
{
    int B = cfg.batch, P = cfg.prefill, H = cfg.hidden, V = cfg.vocab;
    int T = s == 0 ? B * P : B, tps = s == 0 ? P : 1, ctx = s == 0 ? P : P + s;
    t->steps.push_back(StepLog());
    StepLog *st = &t->steps.back();
    st->step = s;
    st->tokens = T;
    st->kind = s == 0 ? "prefill" : "decode";
    t->step = st;
    t->cur = &st->c;
    double t0 = now_ms();
    if (cfg.host_us) { // --host-us: the scheduler's time, to a deadline (a fixed host cost)
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = ts.tv_nsec + cfg.host_us * 1000LL;
        ts.tv_sec += (time_t)(ns / 1000000000LL), ts.tv_nsec = (long)(ns % 1000000000LL);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }

    int *hin = t->h_in[s % 4];
    for (int i = 0; i < T; i++)
        hin[i] = s == 0 ? i % P : P + s - 1;
    copy_async(t, t->pos, hin, T * sizeof(int), cudaMemcpyHostToDevice, t->s0);
    if (s == 0 || cfg.style == STYLE_LLAMACPP) {
        int *hids = hin + t->T_max;
        for (int i = 0; i < T; i++)
            hids[i] = s == 0 ? prompt_token(t->id, i) : t->cpu_ids[i];
        copy_async(t, t->ids, hids, T * sizeof(int), cudaMemcpyHostToDevice, t->s0);
    }
    if (cfg.moe_e) {
        int *hr = t->h_in[s % 4] + 2 * t->T_max;
        route_step(t, T, hr, st->load);
        copy_async(t, t->route, hr, (size_t)cfg.layers * 3 * T * cfg.moe_k * sizeof(int), cudaMemcpyHostToDevice, t->s0);
    }

    if (s > 0 && cfg.graphs) {
        if (!t->graph) { // capture once per shape (decode: T = batch), then replay
            cudaGraph_t g;
            t->graph_counts = Counts();
            t->cur = &t->graph_counts;
            t->capturing = true;
            CK(cudaStreamBeginCapture(t->s0, cudaStreamCaptureModeThreadLocal));
            forward(t, T, 1, t->chunks_max);
            CK(cudaStreamEndCapture(t->s0, &g));
            t->capturing = false;
            t->cur = &st->c;
            CK(cudaGraphInstantiate(&t->graph, g, 0));
            CK(cudaGraphDestroy(g));
        }
        CK(cudaGraphLaunch(t->graph, t->s0));
        st->c.graph_launches++;
        st->c.kernels += t->graph_counts.kernels;
        st->c.graph_kernels += t->graph_counts.kernels;
        st->c.lib += t->graph_counts.lib;
        for (auto &kv : t->graph_counts.names)
            st->c.names[kv.first] += kv.second;
    } else {
        forward(t, T, tps, cdiv(ctx, ATTN_CHUNK));
    }

    // Logits for each sequence's last token only (rows tps-1, 2 tps-1, ... of xn).
    lm_head(t, t->xn + (size_t)(tps - 1) * H, tps * H, B);
    int slot = s % 2;
    if (cfg.style == STYLE_VLLM) {
        launch(t, t->s0, argmax_sampling_kernel, dim3(B), dim3(256), t->ids, t->sampled[slot], (const float *)t->logits, V);
        if (cfg.async) {
            CK(cudaEventRecord(t->ev_main, t->s0));
            CK(cudaStreamWaitEvent(t->s1, t->ev_main, 0));
            copy_async(t, t->h_sampled[slot], t->sampled[slot], B * sizeof(int), cudaMemcpyDeviceToHost, t->s1);
            CK(cudaEventRecord(t->ev_copy[slot], t->s1));
            if (s > 0) { // step s-1's tokens, waited for only now that step s is enqueued
                CK(cudaEventSynchronize(t->ev_copy[slot ^ 1]));
                consume_sampled(t, slot ^ 1);
                t->steps[s - 1].tok_ms = now_ms();
            }
        } else {
            copy_async(t, t->h_sampled[slot], t->sampled[slot], B * sizeof(int), cudaMemcpyDeviceToHost, t->s0);
            CK(cudaEventRecord(t->ev_copy[slot], t->s0));
            CK(cudaEventSynchronize(t->ev_copy[slot]));
            consume_sampled(t, slot);
            st->tok_ms = now_ms();
        }
    } else if (cfg.style == STYLE_LLAMACPP) {
        copy_async(t, t->h_logits, t->logits, (size_t)B * V * sizeof(float), cudaMemcpyDeviceToHost, t->s0);
        CK(cudaStreamSynchronize(t->s0));
        st->tok_ms = now_ms();
        t->cpu_ids.resize(B);
        for (int b = 0; b < B; b++) { // sampling on the CPU
            int arg = 0;
            for (int i = 1; i < V; i++)
                if (t->h_logits[(size_t)b * V + i] > t->h_logits[(size_t)b * V + arg])
                    arg = i;
            t->cpu_ids[b] = arg;
            t->generated.push_back(arg);
        }
    } else {
        using namespace at::native;
        launch(t, t->s0, reduce_kernel<ArgMaxOps>, dim3(B), dim3(256), ArgMaxOps{t->ids, t->sampled[slot], t->logits, V});
        launch(t, t->s0, vectorized_elementwise_kernel<4, UnfinishedFunctor>, dim3(1), dim3(256), B,
               UnfinishedFunctor{t->unfinished, t->sampled[slot], -1});
        launch(t, t->s0, reduce_kernel<MaxOps>, dim3(1), dim3(256), MaxOps{t->flag, t->unfinished, B});
        copy_async(t, t->h_flag, t->flag, 1, cudaMemcpyDeviceToHost, t->s0);
        CK(cudaStreamSynchronize(t->s0)); // `while unfinished.max() != 0` -> .item()
        st->tok_ms = now_ms();
    }
    if (s == 0 && cfg.check) { // real GPU only (simgpu exits before); not counted in the log
        CK(cudaStreamSynchronize(t->s0));
        check_logits.resize((size_t)B * V);
        CK(cudaMemcpy(check_logits.data(), t->logits, check_logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
    st->host_ms = now_ms() - t0;
}

static void thread_init(Thr *t)
{
    CK(cudaStreamCreateWithFlags(&t->s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&t->s1, cudaStreamNonBlocking));
    CB(cublasCreate(&t->blas));
    CB(cublasSetStream(t->blas, t->s0));
    CB(cublasLtCreate(&t->lt));
    CK(cudaEventCreateWithFlags(&t->ev_main, cudaEventDisableTiming));
    for (int i = 0; i < 2; i++) // vLLM: torch.cuda.Event(blocking=True)
        CK(cudaEventCreateWithFlags(&t->ev_copy[i], cudaEventBlockingSync | cudaEventDisableTiming));
}

static void thread_fini(Thr *t)
{
    if (t->graph)
        CK(cudaGraphExecDestroy(t->graph));
    CB(cublasDestroy(t->blas));
    CB(cublasLtDestroy(t->lt));
    CK(cudaEventDestroy(t->ev_main));
    CK(cudaEventDestroy(t->ev_copy[0]));
    CK(cudaEventDestroy(t->ev_copy[1]));
    CK(cudaStreamDestroy(t->s0));
    CK(cudaStreamDestroy(t->s1));
}

static void *thread_main(void *arg)
{
    Thr *t = (Thr *)arg;
    thread_init(t);
    for (int s = 0; s <= cfg.steps; s++)
        run_step(t, s);
    if (cfg.style == STYLE_VLLM && cfg.async) {
        CK(cudaEventSynchronize(t->ev_copy[cfg.steps % 2]));
        consume_sampled(t, cfg.steps % 2);
        t->steps[cfg.steps].tok_ms = now_ms();
    }
    CK(cudaStreamSynchronize(t->s0));
    CK(cudaStreamSynchronize(t->s1));
    thread_fini(t);
    return NULL;
}

// ---- setup: weights and per-thread buffers --------------------------------------------------
enum { W_EMB, W_LM, W_FNORM, W_Q, W_K, W_V, W_O, W_GU, W_DOWN, W_N1, W_N2, W_ROUTER, W_EXP13, W_EXP2 };
static uint32_t wseed(int kind, int layer) { return (cfg.seed * 131u + kind) * 1024u + layer; }

template <typename T> static T *dalloc(size_t n)
{
    void *p;
    CK(cudaMalloc(&p, n * sizeof(T)));
    return (T *)p;
}

template <typename T> static T *init_tensor(size_t n, int kind, int layer, float scale, float offset)
{
    T *p = dalloc<T>(n);
    launch(NULL, (cudaStream_t)0, fill_random_kernel<T>, dim3(ew_grid(n)), dim3(256), p, (uint64_t)n, wseed(kind, layer),
           scale, offset);
    return p;
}

static void setup_weights()
{
    size_t H = cfg.hidden, I = cfg.inter, V = cfg.vocab, E = cfg.moe_e;
    float sh = 1.0f / sqrtf((float)H), si = 1.0f / sqrtf((float)I);
    W.emb = init_tensor<bf16>(V * H, W_EMB, 0, 1.0f, 0);
    W.lm_head = init_tensor<bf16>(V * H, W_LM, 0, sh, 0);
    W.final_norm = init_tensor<float>(H, W_FNORM, 0, 0.1f, 1.0f);
    for (int l = 0; l < cfg.layers; l++) {
        W.norm1.push_back(init_tensor<float>(H, W_N1, l, 0.1f, 1.0f));
        W.norm2.push_back(init_tensor<float>(H, W_N2, l, 0.1f, 1.0f));
        W.wq.push_back(init_tensor<bf16>(H * H, W_Q, l, sh, 0));
        W.wk.push_back(init_tensor<bf16>(H * H, W_K, l, sh, 0));
        W.wv.push_back(init_tensor<bf16>(H * H, W_V, l, sh, 0));
        W.wo.push_back(init_tensor<bf16>(H * H, W_O, l, sh, 0));
        if (E) {
            W.wrouter.push_back(init_tensor<bf16>(E * H, W_ROUTER, l, sh, 0));
            W.wexp13.push_back(init_tensor<bf16>(E * 2 * I * H, W_EXP13, l, sh, 0));
            W.wexp2.push_back(init_tensor<bf16>(E * H * I, W_EXP2, l, si, 0));
        } else {
            W.wgu.push_back(init_tensor<bf16>(2 * I * H, W_GU, l, sh, 0));
            W.wdown.push_back(init_tensor<bf16>(H * I, W_DOWN, l, si, 0));
        }
    }
}

static void setup_thread(Thr *t, int id)
{
    size_t B = cfg.batch, H = cfg.hidden, I = cfg.inter, NH = cfg.heads, D = H / NH, V = cfg.vocab;
    size_t Tm = B * cfg.prefill, k = cfg.moe_k ? cfg.moe_k : 1, Tk = Tm * k;
    t->id = id;
    t->T_max = (int)Tm;
    t->maxctx = cfg.prefill + cfg.steps;
    t->chunks_max = cdiv(t->maxctx, ATTN_CHUNK);
    t->rng = 0x853c49e6748fea9bull ^ ((uint64_t)cfg.seed << 8) ^ (uint64_t)id;
    size_t parts = Tm * NH * t->chunks_max;
    t->x = dalloc<float>(Tm * H);
    t->tmp = dalloc<float>(Tm * H);
    t->mean = dalloc<float>(Tm);
    t->pm = dalloc<float>(parts);
    t->pl = dalloc<float>(parts);
    t->pacc = dalloc<float>(parts * D);
    t->logits = dalloc<float>(B * V);
    t->xn = dalloc<bf16>(Tm * H);
    t->q = dalloc<bf16>(Tm * H);
    t->k = dalloc<bf16>(Tm * H);
    t->v = dalloc<bf16>(Tm * H);
    t->attn = dalloc<bf16>(Tm * H);
    t->o = dalloc<bf16>(Tm * H);
    t->d = dalloc<bf16>(Tm * H);
    t->gu = dalloc<bf16>(Tm * 2 * I);
    t->a = dalloc<bf16>(Tm * I);
    t->s_act = dalloc<bf16>(Tm * I);
    t->ids = dalloc<int>(Tm);
    t->pos = dalloc<int>(Tm);
    t->sampled[0] = dalloc<int>(B);
    t->sampled[1] = dalloc<int>(B);
    t->unfinished = dalloc<unsigned char>(B);
    t->flag = dalloc<unsigned char>(1);
    if (cfg.moe_e) {
        t->router = dalloc<float>(Tm * cfg.moe_e);
        t->topk_w = dalloc<float>(Tk);
        t->topk_ids = dalloc<int>(Tk);
        t->moe_counts = dalloc<int>(cfg.moe_e);
        t->route = dalloc<int>((size_t)cfg.layers * 3 * Tk);
        t->xp = dalloc<bf16>(Tk * H);
        t->yp = dalloc<bf16>(Tk * H);
        t->gu_moe = dalloc<bf16>(Tk * 2 * I);
        t->a_moe = dalloc<bf16>(Tk * I);
    }
    for (int l = 0; l < cfg.layers; l++) {
        t->kc.push_back(dalloc<bf16>(B * t->maxctx * H));
        t->vc.push_back(dalloc<bf16>(B * t->maxctx * H));
        memset_async(NULL, t->kc[l], 0, B * t->maxctx * H * sizeof(bf16), 0);
        memset_async(NULL, t->vc[l], 0, B * t->maxctx * H * sizeof(bf16), 0);
    }
    memset_async(NULL, t->unfinished, 1, B, 0);
    size_t in_ints = 2 * Tm + (size_t)cfg.layers * 3 * Tk;
    for (int i = 0; i < 4; i++)
        CK(cudaMallocHost((void **)&t->h_in[i], in_ints * sizeof(int)));
    for (int i = 0; i < 2; i++)
        CK(cudaMallocHost((void **)&t->h_sampled[i], B * sizeof(int)));
    CK(cudaHostAlloc((void **)&t->h_logits, B * V * sizeof(float), cudaHostAllocDefault));
    CK(cudaMallocHost((void **)&t->h_flag, 1));
    t->lt_ws_size = 4 << 20;
    t->lt_ws = dalloc<char>(t->lt_ws_size);
}

// ---- --check: CPU reference of step 0 (prefill) logits, dense model ------------------------
static float bfr(float f) // round to bf16 (nearest even), as __float2bfloat16 does
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000) != 0x7f800000)
        u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static std::vector<float> host_tensor(size_t n, int kind, int layer, float scale, float offset, bool bf)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        float f = offset + scale * mllm_hash_uniform(wseed(kind, layer), i);
        v[i] = bf ? bfr(f) : f;
    }
    return v;
}

// y[t][n] = bf16(sum_k x[t][k] w[n][k])
static void ref_linear(std::vector<float> &y, int ystride, int yoff, const std::vector<float> &x, int xs, const float *w,
                       int T, int N, int K)
{
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)x[(size_t)t * xs + k] * w[(size_t)n * K + k];
            y[(size_t)t * ystride + yoff + n] = bfr((float)s);
        }
}

static void ref_norm(std::vector<float> &xn, const std::vector<float> &x, const std::vector<float> &w, int T, int H)
{
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < H; i++)
            ss += (double)x[(size_t)t * H + i] * x[(size_t)t * H + i];
        float inv = 1.0f / sqrtf((float)(ss / H) + RMS_EPS);
        for (int i = 0; i < H; i++)
            xn[(size_t)t * H + i] = bfr(x[(size_t)t * H + i] * inv * w[i]);
    }
}

static int run_check(const std::vector<int> &prompt)
{
    int B = cfg.batch, P = cfg.prefill, T = B * P, H = cfg.hidden, NH = cfg.heads, D = H / NH, I = cfg.inter,
        V = cfg.vocab;
    float sh = 1.0f / sqrtf((float)H), si = 1.0f / sqrtf((float)I);
    std::vector<float> emb = host_tensor((size_t)V * H, W_EMB, 0, 1.0f, 0, true);
    std::vector<float> x((size_t)T * H), xn((size_t)T * H), q(xn), k(xn), v(xn), att(xn), o(xn), gu((size_t)T * 2 * I),
        a((size_t)T * I), d(xn);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H; i++)
            x[(size_t)t * H + i] = emb[(size_t)prompt[t] * H + i];
    for (int l = 0; l < cfg.layers; l++) {
        if (l)
            for (size_t i = 0; i < x.size(); i++)
                x[i] += d[i];
        ref_norm(xn, x, host_tensor(H, W_N1, l, 0.1f, 1.0f, false), T, H);
        ref_linear(q, H, 0, xn, H, host_tensor((size_t)H * H, W_Q, l, sh, 0, true).data(), T, H, H);
        ref_linear(k, H, 0, xn, H, host_tensor((size_t)H * H, W_K, l, sh, 0, true).data(), T, H, H);
        ref_linear(v, H, 0, xn, H, host_tensor((size_t)H * H, W_V, l, sh, 0, true).data(), T, H, H);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < D / 2; i++) {
                    float ang = (float)(t % P) * powf(10000.0f, -2.0f * i / D), c = cosf(ang), s = sinf(ang);
                    for (std::vector<float> *z : {&q, &k}) {
                        float *r = z->data() + (size_t)t * H + h * D;
                        float x1 = r[i], x2 = r[i + D / 2];
                        r[i] = bfr(x1 * c - x2 * s);
                        r[i + D / 2] = bfr(x2 * c + x1 * s);
                    }
                }
        for (int t = 0; t < T; t++) {
            int seq = t / P, p = t % P;
            for (int h = 0; h < NH; h++) {
                std::vector<float> sc(p + 1);
                float m = -INFINITY, l = 0;
                for (int j = 0; j <= p; j++) {
                    float s = 0;
                    for (int dd = 0; dd < D; dd++)
                        s += q[(size_t)t * H + h * D + dd] * k[(size_t)(seq * P + j) * H + h * D + dd];
                    sc[j] = s / sqrtf((float)D);
                    m = fmaxf(m, sc[j]);
                }
                for (int j = 0; j <= p; j++)
                    l += (sc[j] = expf(sc[j] - m));
                for (int dd = 0; dd < D; dd++) {
                    float acc = 0;
                    for (int j = 0; j <= p; j++)
                        acc += sc[j] * v[(size_t)(seq * P + j) * H + h * D + dd];
                    att[(size_t)t * H + h * D + dd] = bfr(acc / l);
                }
            }
        }
        ref_linear(o, H, 0, att, H, host_tensor((size_t)H * H, W_O, l, sh, 0, true).data(), T, H, H);
        for (size_t i = 0; i < x.size(); i++)
            x[i] += o[i];
        ref_norm(xn, x, host_tensor(H, W_N2, l, 0.1f, 1.0f, false), T, H);
        std::vector<float> wgu = host_tensor((size_t)2 * I * H, W_GU, l, sh, 0, true);
        ref_linear(gu, 2 * I, 0, xn, H, wgu.data(), T, I, H);
        ref_linear(gu, 2 * I, I, xn, H, wgu.data() + (size_t)I * H, T, I, H);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < I; i++) {
                float g = gu[(size_t)t * 2 * I + i], u = gu[(size_t)t * 2 * I + I + i];
                float sg = g / (1.0f + expf(-g));
                a[(size_t)t * I + i] = cfg.style == STYLE_HF ? bfr(bfr(sg) * u) : bfr(sg * u);
            }
        ref_linear(d, H, 0, a, I, host_tensor((size_t)H * I, W_DOWN, l, si, 0, true).data(), T, H, I);
    }
    for (size_t i = 0; i < x.size(); i++)
        x[i] += d[i];
    ref_norm(xn, x, host_tensor(H, W_FNORM, 0, 0.1f, 1.0f, false), T, H);
    std::vector<float> lm = host_tensor((size_t)V * H, W_LM, 0, sh, 0, true);
    double maxdiff = 0, maxref = 0;
    int bad_tokens = 0;
    for (int b = 0; b < B; b++) {
        const float *r = xn.data() + (size_t)(b * P + P - 1) * H;
        std::vector<float> ref(V);
        int arg = 0, garg = 0;
        for (int n = 0; n < V; n++) {
            double s = 0;
            for (int i = 0; i < H; i++)
                s += (double)r[i] * lm[(size_t)n * H + i];
            ref[n] = (float)s;
            maxref = fmax(maxref, fabs(s));
            maxdiff = fmax(maxdiff, fabs(s - check_logits[(size_t)b * V + n]));
            if (ref[n] > ref[arg])
                arg = n;
            if (check_logits[(size_t)b * V + n] > check_logits[(size_t)b * V + garg])
                garg = n;
        }
        // A different token is only an error if the reference's choice was not a near tie.
        if (garg != arg && ref[arg] - ref[garg] > 0.05f * fmax(1.0, maxref))
            bad_tokens++;
    }
    double tol = 0.03 * fmax(1.0, maxref);
    bool ok = maxdiff <= tol && bad_tokens == 0;
    printf("check: step 0 logits max |gpu - cpu| = %.4g (tolerance %.4g), token mismatches %d: %s\n", maxdiff, tol,
           bad_tokens, ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}

// ---- --log ------------------------------------------------------------------------------------
static void json_counts(FILE *f, const Counts &c)
{
    fprintf(f, "\"kernel_counts\":{");
    bool first = true;
    for (auto &kv : c.names) {
        fprintf(f, "%s\"", first ? "" : ",");
        for (const char *p = kv.first.c_str(); *p; p++)
            fprintf(f, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
        fprintf(f, "\":%ld", kv.second);
        first = false;
    }
    fprintf(f, "}");
}

static void write_log(const std::vector<Thr *> &thr)
{
    FILE *f = fopen(cfg.log, "w");
    if (!f)
        die("cannot write %s", cfg.log);
    static const char *styles[] = {"vllm", "llamacpp", "hf"};
    fprintf(f,
            "{\"type\":\"setup\",\"kernels\":%ld,\"copies\":%ld,\"eager_launches\":%ld,\"library_kernels\":0,"
            "\"threads\":%d,\"style\":\"%s\",\"sched\":\"%s\",\"graphs\":%s,\"layers\":%d,\"hidden\":%d,"
            "\"heads\":%d,\"inter\":%d,\"vocab\":%d,\"batch\":%d,\"prefill\":%d,\"steps\":%d,\"moe\":[%d,%d],"
            "\"moe_fused\":%s,\"driver\":%s,\"exc\":%s,",
            setup_counts.kernels, setup_counts.copies, setup_counts.eager, cfg.threads, styles[cfg.style],
            cfg.async ? "async" : "sync", cfg.graphs ? "true" : "false", cfg.layers, cfg.hidden, cfg.heads,
            cfg.inter, cfg.vocab, cfg.batch, cfg.prefill, cfg.steps, cfg.moe_e, cfg.moe_k,
            cfg.moe_fused ? "true" : "false", cfg.driver ? "true" : "false", cfg.exc ? "true" : "false");
    json_counts(f, setup_counts);
    fprintf(f, "}\n");
    for (Thr *t : thr)
        for (const StepLog &s : t->steps) {
            const Counts &c = s.c;
            fprintf(f,
                    "{\"type\":\"step\",\"thread\":%d,\"step\":%d,\"kind\":\"%s\",\"tokens\":%d,\"kernels\":%ld,"
                    "\"eager_launches\":%ld,\"graph_launches\":%ld,\"graph_kernels\":%ld,\"library_kernels\":%ld,"
                    "\"driver_launches\":%ld,\"copies\":%ld,\"host_ms\":%.3f,\"tok_ms\":%.6f,",
                    t->id, s.step, s.kind, s.tokens, c.kernels, c.eager, c.graph_launches, c.graph_kernels, c.lib,
                    c.driver, c.copies, s.host_ms, s.tok_ms);
            json_counts(f, c);
            fprintf(f, ",\"gemms\":[");
            for (size_t i = 0; i < s.gemms.size(); i++) {
                const Gemm &g = s.gemms[i];
                fprintf(f,
                        "%s{\"api\":\"%s\",\"m\":%ld,\"n\":%ld,\"k\":%ld,\"batch\":%ld,\"atype\":\"bf16\","
                        "\"ctype\":\"%s\",\"compute\":\"32F\",\"transa\":\"T\",\"transb\":\"N\"}",
                        i ? "," : "", g.api, g.m, g.n, g.k, g.batch, g.ctype);
            }
            fprintf(f, "]");
            if (cfg.moe_e) {
                fprintf(f, ",\"expert_load\":[");
                for (size_t l = 0; l < s.load.size(); l++) {
                    fprintf(f, "%s[", l ? "," : "");
                    for (size_t e = 0; e < s.load[l].size(); e++)
                        fprintf(f, "%s%d", e ? "," : "", s.load[l][e]);
                    fprintf(f, "]");
                }
                fprintf(f, "]");
            }
            fprintf(f, "}\n");
        }
    fclose(f);
}

// ---- main -------------------------------------------------------------------------------------
static void usage()
{
    fprintf(stderr,
            "usage: minillm [--layers N] [--hidden N] [--heads N] [--inter N] [--vocab N] [--batch N]\n"
            "               [--prefill N] [--steps N] [--seed N] [--moe E,k] [--moe-fused] [--zipf S]\n"
            "               [--graphs] [--sched sync|async] [--style vllm|llamacpp|hf] [--driver] [--exc]\n"
            "               [--threads N] [--host-us N] [--log FILE] [--check] [--verbose]\n");
    exit(2);
}

static int int_arg(const char *s, int lo, int hi, const char *opt)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi)
        die("%s: expected an integer in [%d, %d], got '%s'", opt, lo, hi, s);
    return (int)v;
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && (v || (usage(), 0)) && ++i)
        if (OPT("--layers")) cfg.layers = int_arg(v, 1, 1024, a);
        else if (OPT("--hidden")) cfg.hidden = int_arg(v, 8, 65536, a);
        else if (OPT("--heads")) cfg.heads = int_arg(v, 1, 1024, a);
        else if (OPT("--inter")) cfg.inter = int_arg(v, 8, 1 << 20, a);
        else if (OPT("--vocab")) cfg.vocab = int_arg(v, 2, 1 << 24, a);
        else if (OPT("--batch")) cfg.batch = int_arg(v, 1, 1024, a);
        else if (OPT("--prefill")) cfg.prefill = int_arg(v, 1, 1 << 20, a);
        else if (OPT("--steps")) cfg.steps = int_arg(v, 0, 1 << 20, a);
        else if (OPT("--seed")) cfg.seed = (unsigned)int_arg(v, 0, 1 << 30, a);
        else if (OPT("--threads")) cfg.threads = int_arg(v, 1, 64, a);
        else if (OPT("--host-us")) cfg.host_us = int_arg(v, 0, 1 << 24, a);
        else if (OPT("--log")) cfg.log = v;
        else if (OPT("--zipf")) cfg.zipf = atof(v);
        else if (OPT("--moe")) {
            if (sscanf(v, "%d,%d", &cfg.moe_e, &cfg.moe_k) != 2 || cfg.moe_e < 1 || cfg.moe_e > 64 || cfg.moe_k < 1 ||
                cfg.moe_k > cfg.moe_e)
                die("--moe: expected E,k with 1 <= k <= E <= 64, got '%s'", v);
        } else if (OPT("--sched")) {
            if (strcmp(v, "sync") && strcmp(v, "async"))
                die("--sched: sync or async");
            cfg.async = strcmp(v, "async") == 0;
        } else if (OPT("--style")) {
            if (!strcmp(v, "vllm")) cfg.style = STYLE_VLLM;
            else if (!strcmp(v, "llamacpp")) cfg.style = STYLE_LLAMACPP;
            else if (!strcmp(v, "hf")) cfg.style = STYLE_HF;
            else die("--style: vllm, llamacpp or hf");
        }
        else if (!strcmp(a, "--moe-fused")) cfg.moe_fused = 1;
        else if (!strcmp(a, "--graphs")) cfg.graphs = 1;
        else if (!strcmp(a, "--driver")) cfg.driver = 1;
        else if (!strcmp(a, "--exc")) cfg.exc = 1;
        else if (!strcmp(a, "--check")) cfg.check = 1;
        else if (!strcmp(a, "--verbose")) cfg.verbose = 1;
        else usage();
#undef OPT
    }
    if (!cfg.inter)
        cfg.inter = 4 * cfg.hidden;
    if (cfg.hidden % cfg.heads || (cfg.hidden / cfg.heads) % 2 || cfg.hidden / cfg.heads > 256)
        die("--hidden / --heads must be an even head size <= 256");
    if (cfg.moe_fused && !cfg.moe_e)
        cfg.moe_e = 8, cfg.moe_k = 2;
    if (cfg.moe_e && !cfg.moe_fused && cfg.graphs)
        die("--moe with per-expert GEMMs has data-dependent shapes: use --moe-fused with --graphs");
    if (cfg.async && cfg.style != STYLE_VLLM)
        fprintf(stderr, "minillm: note: --sched async applies to --style vllm only; running sync\n"), cfg.async = 0;
    if (cfg.check && (cfg.moe_e || cfg.threads > 1))
        die("--check covers the dense model with one thread");
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    cudaDeviceProp prop;
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(&prop, 0));
    if (cfg.check && strstr(prop.name, "simgpu")) {
        printf("check skipped: simulated GPU (%s)\n", prop.name);
        return 0;
    }
    if (cfg.driver) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY);
        p_cuLaunchKernelEx = h ? (cuLaunchKernelEx_fn)dlsym(h, "cuLaunchKernelEx") : NULL;
        if (!p_cuLaunchKernelEx)
            die("--driver: cuLaunchKernelEx not found in libcuda.so.1");
    }
    setup_weights();
    std::vector<Thr *> thr;
    for (int i = 0; i < cfg.threads; i++) {
        thr.push_back(new Thr());
        setup_thread(thr.back(), i);
    }
    CK(cudaDeviceSynchronize());

    double t0 = now_ms();
    if (cfg.threads == 1) {
        thread_main(thr[0]);
    } else {
        std::vector<pthread_t> tid(cfg.threads);
        for (int i = 0; i < cfg.threads; i++)
            if (pthread_create(&tid[i], NULL, thread_main, thr[i]))
                die("pthread_create failed");
        for (int i = 0; i < cfg.threads; i++)
            pthread_join(tid[i], NULL);
    }
    double total = now_ms() - t0;

    long decode_tokens = (long)cfg.threads * cfg.batch * cfg.steps;
    double decode_ms = 0, prefill_ms = 0;
    unsigned long sum = 0;
    for (Thr *t : thr) {
        for (const StepLog &s : t->steps) {
            (s.step ? decode_ms : prefill_ms) += s.host_ms;
            if (cfg.verbose)
                printf("thread %d step %3d %-7s tokens %5d kernels %6ld copies %3ld host %8.3f ms\n", t->id, s.step,
                       s.kind, s.tokens, s.c.kernels, s.c.copies, s.host_ms);
        }
        for (int id : t->generated)
            sum = sum * 31 + (unsigned)id;
    }
    printf("prefill: %d x %d tokens, host %.3f ms; decode: %d steps, host %.3f ms/step (mean over threads)\n",
           cfg.batch, cfg.prefill, prefill_ms / cfg.threads, cfg.steps,
           cfg.steps ? decode_ms / cfg.threads / cfg.steps : 0.0);
    if (cfg.log)
        write_log(thr);
    int rc = 0;
    if (cfg.check) {
        std::vector<int> prompt((size_t)cfg.batch * cfg.prefill);
        for (size_t i = 0; i < prompt.size(); i++)
            prompt[i] = prompt_token(0, (int)i);
        rc = run_check(prompt);
    }
    printf("minillm: %d thread(s), %d step(s) each, %ld decode tokens in %.3f ms wall = %.1f tokens/s, "
           "token checksum %08lx\n",
           cfg.threads, cfg.steps + 1, decode_tokens, total, total > 0 ? decode_tokens / (total / 1e3) : 0.0,
           sum & 0xffffffffUL);
    for (Thr *t : thr)
        delete t; // host bookkeeping only (a leak check runs at exit in the sanitizer build)
    return rc;
}
