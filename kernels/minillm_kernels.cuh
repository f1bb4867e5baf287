// minillm's device code: real kernels of a Llama-style decoder (bf16 weights, fp32 residual).
// Names follow the families profilers classify (vLLM / PyTorch / llama.cpp style); some are C++
// templates (mangled names), others extern "C".
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

#define ATTN_CHUNK 256 // context positions per attention block
#define RMS_EPS 1e-5f

// Deterministic weights: host and device compute the same values, so the CPU reference of
// --check regenerates them instead of copying them back.
__host__ __device__ inline float mllm_hash_uniform(uint32_t seed, uint64_t i)
{
    uint64_t z = i * 0x9E3779B97F4A7C15ull + ((uint64_t)seed << 32) + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((z >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f; // [-1, 1)
}

template <typename T> __device__ inline T mllm_from_float(float f);
template <> __device__ inline float mllm_from_float<float>(float f) { return f; }
template <> __device__ inline bf16 mllm_from_float<bf16>(float f) { return __float2bfloat16(f); }

template <typename T>
__global__ void fill_random_kernel(T *p, uint64_t n, uint32_t seed, float scale, float offset)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = mllm_from_float<T>(offset + scale * mllm_hash_uniform(seed, i));
}

// Block-wide reductions (blockDim.x a power of two <= 1024).
__device__ inline float block_sum(float v, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__device__ inline float block_max(float v, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

template <typename T>
__global__ void embedding_kernel(float *x, const int *ids, const T *emb, int H)
{
    int t = blockIdx.x;
    const T *row = emb + (size_t)ids[t] * H;
    for (int i = threadIdx.x; i < H; i += blockDim.x)
        x[(size_t)t * H + i] = (float)row[i];
}

// out = bf16(rmsnorm(x) * w); one block per token.
template <int NT>
__global__ void rms_norm_kernel(bf16 *out, const float *x, const float *w, int H)
{
    __shared__ float red[NT];
    const float *r = x + (size_t)blockIdx.x * H;
    float ss = 0;
    for (int i = threadIdx.x; i < H; i += NT)
        ss += r[i] * r[i];
    float inv = rsqrtf(block_sum(ss, red) / H + RMS_EPS);
    for (int i = threadIdx.x; i < H; i += NT)
        out[(size_t)blockIdx.x * H + i] = __float2bfloat16(r[i] * inv * w[i]);
}

// x += delta; out = bf16(rmsnorm(x) * w)  (vLLM's residual-fused norm)
extern "C" __global__ void fused_add_rms_norm_kernel(bf16 *out, float *x, const bf16 *delta, const float *w, int H)
{
    __shared__ float red[256];
    float *r = x + (size_t)blockIdx.x * H;
    const bf16 *d = delta + (size_t)blockIdx.x * H;
    float ss = 0;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float v = r[i] + __bfloat162float(d[i]);
        r[i] = v;
        ss += v * v;
    }
    float inv = rsqrtf(block_sum(ss, red) / H + RMS_EPS);
    for (int i = threadIdx.x; i < H; i += blockDim.x)
        out[(size_t)blockIdx.x * H + i] = __float2bfloat16(r[i] * inv * w[i]);
}

// NeoX-style rotary embedding of q and k in place; one block per token.
template <typename T>
__global__ void rotary_embedding_kernel(T *q, T *k, const int *pos, int NH, int D)
{
    int t = blockIdx.x, half = D / 2;
    float p = (float)pos[t];
    for (int idx = threadIdx.x; idx < NH * half; idx += blockDim.x) {
        int h = idx / half, i = idx % half;
        float ang = p * powf(10000.0f, -2.0f * i / D), c = cosf(ang), s = sinf(ang);
        T *qs[2] = {q, k};
        for (int z = 0; z < 2; z++) {
            T *v = qs[z] + (size_t)t * NH * D + h * D;
            float x1 = (float)v[i], x2 = (float)v[i + half];
            v[i] = (T)(x1 * c - x2 * s);
            v[i + half] = (T)(x2 * c + x1 * s);
        }
    }
}

// Writes each token's k and v into the cache slot (sequence, position).
extern "C" __global__ void reshape_and_cache_kernel(bf16 *kc, bf16 *vc, const bf16 *k, const bf16 *v, const int *pos,
                                                    int H, int maxctx, int tokens_per_seq)
{
    int t = blockIdx.x, seq = t / tokens_per_seq;
    size_t slot = ((size_t)seq * maxctx + pos[t]) * H;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        kc[slot + i] = k[(size_t)t * H + i];
        vc[slot + i] = v[(size_t)t * H + i];
    }
}

// Split-context attention: block (chunk c, head h, query token t) covers ATTN_CHUNK cached
// positions; partial max / sum / weighted values go to the combine kernel. Blocks past the
// token's context length write an empty partial (graphs capture the grid for the longest context).
template <int NT>
__global__ void paged_attention_decode_kernel(float *pm, float *pl, float *pacc, const bf16 *q, const bf16 *kc,
                                              const bf16 *vc, const int *pos, int NH, int D, int maxctx,
                                              int tokens_per_seq, int chunk_stride, float scale)
{
    __shared__ float red[NT];
    __shared__ float p[ATTN_CHUNK];
    __shared__ float qs[256];
    int c = blockIdx.x, h = blockIdx.y, t = blockIdx.z, H = NH * D;
    int seq = t / tokens_per_seq, ctx = pos[t] + 1, start = c * ATTN_CHUNK;
    size_t pi = ((size_t)t * NH + h) * chunk_stride + c;
    if (start >= ctx) {
        if (threadIdx.x == 0) {
            pm[pi] = -INFINITY;
            pl[pi] = 0.0f;
        }
        for (int d = threadIdx.x; d < D; d += NT)
            pacc[pi * D + d] = 0.0f;
        return;
    }
    int n = min(ATTN_CHUNK, ctx - start);
    for (int d = threadIdx.x; d < D; d += NT)
        qs[d] = __bfloat162float(q[(size_t)t * H + h * D + d]);
    __syncthreads();
    const bf16 *kb = kc + ((size_t)seq * maxctx + start) * H + h * D;
    const bf16 *vb = vc + ((size_t)seq * maxctx + start) * H + h * D;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += NT) {
        float s = 0;
        for (int d = 0; d < D; d++)
            s += qs[d] * __bfloat162float(kb[(size_t)j * H + d]);
        p[j] = s * scale;
        mx = fmaxf(mx, p[j]);
    }
    float m = block_max(mx, red);
    float sum = 0;
    for (int j = threadIdx.x; j < n; j += NT) {
        p[j] = expf(p[j] - m);
        sum += p[j];
    }
    float l = block_sum(sum, red); // block_sum's barrier also publishes p[]
    for (int d = threadIdx.x; d < D; d += NT) {
        float acc = 0;
        for (int j = 0; j < n; j++)
            acc += p[j] * __bfloat162float(vb[(size_t)j * H + d]);
        pacc[pi * D + d] = acc;
    }
    if (threadIdx.x == 0) {
        pm[pi] = m;
        pl[pi] = l;
    }
}

extern "C" __global__ void paged_attention_combine_kernel(bf16 *out, const float *pm, const float *pl,
                                                          const float *pacc, int NH, int D, int nchunks,
                                                          int chunk_stride)
{
    int h = blockIdx.x, t = blockIdx.y;
    size_t base = ((size_t)t * NH + h) * chunk_stride;
    float M = -INFINITY;
    for (int c = 0; c < nchunks; c++)
        M = fmaxf(M, pm[base + c]);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float L = 0, acc = 0;
        for (int c = 0; c < nchunks; c++) {
            if (pl[base + c] == 0.0f)
                continue;
            float w = expf(pm[base + c] - M);
            L += pl[base + c] * w;
            acc += pacc[(base + c) * D + d] * w;
        }
        out[(size_t)t * NH * D + h * D + d] = __float2bfloat16(acc / L);
    }
}

// gu rows are [gate(I) | up(I)] (vLLM layout); out = silu(gate) * up.
template <typename T>
__global__ void silu_and_mul_kernel(T *out, const T *gu, int I)
{
    int r = blockIdx.x;
    for (int i = threadIdx.x; i < I; i += blockDim.x) {
        float g = (float)gu[(size_t)r * 2 * I + i], u = (float)gu[(size_t)r * 2 * I + I + i];
        out[(size_t)r * I + i] = (T)(g / (1.0f + expf(-g)) * u);
    }
}

// Greedy sampling: one block per sequence; ids go to the next step's input and to the copy slot.
extern "C" __global__ void argmax_sampling_kernel(int *next_ids, int *sampled, const float *logits, int V)
{
    __shared__ float bv[256];
    __shared__ int bi[256];
    const float *l = logits + (size_t)blockIdx.x * V;
    float best = -INFINITY;
    int arg = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (l[i] > best) {
            best = l[i];
            arg = i;
        }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = arg;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float ov = bv[threadIdx.x + s];
            int oi = bi[threadIdx.x + s];
            if (ov > bv[threadIdx.x] || (ov == bv[threadIdx.x] && oi < bi[threadIdx.x])) {
                bv[threadIdx.x] = ov;
                bi[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        next_ids[blockIdx.x] = bi[0];
        sampled[blockIdx.x] = bi[0];
    }
}

// ---- MoE ----------------------------------------------------------------------------------
// Router softmax + top-k (runs for realism; the assignment the experts use is decided on the host
// from a seeded PRNG, since on the simulated GPU device code does not execute).
extern "C" __global__ void moe_topk_softmax_kernel(float *topk_w, int *topk_ids, const float *router_logits, int E, int k)
{
    int t = blockIdx.x;
    if (threadIdx.x != 0)
        return;
    const float *l = router_logits + (size_t)t * E;
    float mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++)
        mx = fmaxf(mx, l[e]);
    for (int e = 0; e < E; e++)
        sum += expf(l[e] - mx);
    unsigned long long used = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E && e < 64; e++)
            if (!(used >> e & 1) && (best < 0 || l[e] > l[best]))
                best = e;
        used |= 1ull << best;
        topk_ids[t * k + j] = best;
        topk_w[t * k + j] = expf(l[best] - mx) / sum;
    }
}

// Gathers token rows into expert-sorted order: xp[row] = xn[src_token[row]].
extern "C" __global__ void moe_permute_kernel(bf16 *xp, const bf16 *xn, const int *src_token, int H)
{
    int r = blockIdx.x;
    const bf16 *s = xn + (size_t)src_token[r] * H;
    for (int i = threadIdx.x; i < H; i += blockDim.x)
        xp[(size_t)r * H + i] = s[i];
}

// y[t] = (1/k) * sum_j yp[slot_row[t*k + j]]
extern "C" __global__ void moe_unpermute_reduce_kernel(bf16 *y, const bf16 *yp, const int *slot_row, int H, int k)
{
    int t = blockIdx.x;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float s = 0;
        for (int j = 0; j < k; j++)
            s += __bfloat162float(yp[(size_t)slot_row[t * k + j] * H + i]);
        y[(size_t)t * H + i] = __float2bfloat16(s / k);
    }
}

// Counts tokens per expert (vLLM's moe_align_block_size; the counts are not used further here).
extern "C" __global__ void moe_align_block_size_kernel(int *counts, const int *topk_ids, int n_slots, int E)
{
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int c = 0;
        for (int i = 0; i < n_slots; i++)
            c += topk_ids[i] == e;
        counts[e] = c;
    }
}

// Fused expert GEMM over all (token, slot) rows: out[r][n] = sum_k in[r / in_div][k] * W[expert(r)][n][k].
// Grid = cdiv(EM, BM) * cdiv(N, BN) with EM as in vLLM's Triton kernel, so it depends only on
// tokens * k, E and the tile, never on the per-expert load; blocks past the rows exit early.
template <int BM, int BN>
__global__ void fused_moe_kernel(bf16 *out, const bf16 *in, const bf16 *W, const int *topk_ids, int n_slots, int N,
                                 int K, int in_div)
{
    int nN = (N + BN - 1) / BN;
    int pid_m = blockIdx.x / nN, pid_n = blockIdx.x % nN;
    for (int idx = threadIdx.x; idx < BM * BN; idx += blockDim.x) {
        int r = pid_m * BM + idx / BN, n = pid_n * BN + idx % BN;
        if (r >= n_slots || n >= N)
            continue;
        const bf16 *a = in + (size_t)(r / in_div) * K;
        const bf16 *w = W + ((size_t)topk_ids[r] * N + n) * K;
        float s = 0;
        for (int kk = 0; kk < K; kk++)
            s += __bfloat162float(a[kk]) * __bfloat162float(w[kk]);
        out[(size_t)r * N + n] = __float2bfloat16(s);
    }
}

extern "C" __global__ void moe_sum_kernel(bf16 *y, const bf16 *yp, int H, int k)
{
    int t = blockIdx.x;
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        float s = 0;
        for (int j = 0; j < k; j++)
            s += __bfloat162float(yp[((size_t)t * k + j) * H + i]);
        y[(size_t)t * H + i] = __float2bfloat16(s / k);
    }
}

// ---- PyTorch-eager style kernels (--style hf) -------------------------------------------------
namespace at {
namespace native {
struct AddResidualFunctor { // x(f32) += d(bf16)
    float *x; const bf16 *d;
    __device__ void operator()(int i) const { x[i] += __bfloat162float(d[i]); }
};
struct PowFunctor { // tmp = x^2
    float *tmp; const float *x;
    __device__ void operator()(int i) const { tmp[i] = x[i] * x[i]; }
};
struct RsqrtMulFunctor { // tmp = x * rsqrt(mean[row] + eps)
    float *tmp; const float *x; const float *mean; int H;
    __device__ void operator()(int i) const { tmp[i] = x[i] * rsqrtf(mean[i / H] + RMS_EPS); }
};
struct MulWeightCastFunctor { // out = bf16(tmp * w)
    bf16 *out; const float *tmp; const float *w; int H;
    __device__ void operator()(int i) const { out[i] = __float2bfloat16(tmp[i] * w[i % H]); }
};
struct SiluFunctor { // s = silu(gate) as bf16, gate from [gate|up] rows
    bf16 *s; const bf16 *gu; int I;
    __device__ void operator()(int i) const {
        float g = __bfloat162float(gu[(size_t)(i / I) * 2 * I + i % I]);
        s[i] = __float2bfloat16(g / (1.0f + expf(-g)));
    }
};
struct MulFunctor { // a = s * up
    bf16 *a; const bf16 *s; const bf16 *gu; int I;
    __device__ void operator()(int i) const {
        a[i] = __float2bfloat16(__bfloat162float(s[i]) * __bfloat162float(gu[(size_t)(i / I) * 2 * I + I + i % I]));
    }
};
struct UnfinishedFunctor { // unfinished[b] &= ids[b] != eos
    unsigned char *unfinished; const int *ids; int eos;
    __device__ void operator()(int i) const { unfinished[i] = unfinished[i] && ids[i] != eos; }
};

template <int vec_size, typename func_t>
__global__ void vectorized_elementwise_kernel(int N, func_t f)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        f(i);
}

struct MeanOps { // out[row] = mean(in[row, :])
    float *out; const float *in; int H;
};
struct ArgMaxOps { // ids[row] = argmax(logits[row, :]) (first maximum)
    int *ids; int *sampled; const float *logits; int V;
};
struct MaxOps { // flag = max(unfinished[0..n))
    unsigned char *flag; const unsigned char *unfinished; int n;
};

template <typename ops_t> __device__ void reduce_row(const ops_t &ops, float *red, int *redi);

template <> __device__ inline void reduce_row<MeanOps>(const MeanOps &o, float *red, int *)
{
    float s = 0;
    for (int i = threadIdx.x; i < o.H; i += blockDim.x)
        s += o.in[(size_t)blockIdx.x * o.H + i];
    s = block_sum(s, red);
    if (threadIdx.x == 0)
        o.out[blockIdx.x] = s / o.H;
}

template <> __device__ inline void reduce_row<ArgMaxOps>(const ArgMaxOps &o, float *red, int *redi)
{
    const float *l = o.logits + (size_t)blockIdx.x * o.V;
    float best = -INFINITY;
    int arg = 0;
    for (int i = threadIdx.x; i < o.V; i += blockDim.x)
        if (l[i] > best) {
            best = l[i];
            arg = i;
        }
    red[threadIdx.x] = best;
    redi[threadIdx.x] = arg;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float ov = red[threadIdx.x + s];
            int oi = redi[threadIdx.x + s];
            if (ov > red[threadIdx.x] || (ov == red[threadIdx.x] && oi < redi[threadIdx.x])) {
                red[threadIdx.x] = ov;
                redi[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        o.ids[blockIdx.x] = redi[0];
        o.sampled[blockIdx.x] = redi[0];
    }
}

template <> __device__ inline void reduce_row<MaxOps>(const MaxOps &o, float *red, int *)
{
    float m = 0;
    for (int i = threadIdx.x; i < o.n; i += blockDim.x)
        m = fmaxf(m, (float)o.unfinished[i]);
    m = block_max(m, red);
    if (threadIdx.x == 0)
        *o.flag = m > 0;
}

template <typename ops_t>
__global__ void reduce_kernel(ops_t ops) // blockDim.x == 256
{
    __shared__ float red[256];
    __shared__ int redi[256];
    reduce_row(ops, red, redi);
}
} // namespace native
} // namespace at
