/* Captures with GPU records on time and late (mkcapture gpu_ontime / gpu_late): the same host
 * and GPU records, written once as the shim writes them when CUPTI hands buffers over on its
 * period (a step's GPU records in the chunk after the step) and once as a CUPTI that hands them
 * over only at exit (every GPU record in the last chunk, long after every step's watermark).
 * A GPU record belongs to its launch's step however late it comes: the decoder's figures of the
 * two must be identical (tests/e2e/cli/cli_test.py gpu_late). */
#include "latecap.h"

#include "tokprof/format.h"

#define STEPS 60
#define PERIOD_NS 100000000ull /* 100 ms a step: 6 s in all, three times the 2 s watermark */
#define T0 1000000000ull

static uint64_t step_t(unsigned s)
{
    return T0 + (uint64_t)s * PERIOD_NS;
}

static void gpu_kernel(struct capw *w, uint64_t start, uint64_t end, uint64_t name,
                       uint64_t corr, unsigned step, unsigned join, unsigned index, int node)
{
    const struct capw_gpu_kernel k = {
        .start_ns = start, .end_ns = end, .name = name, .stream = 13, .correlation = corr,
        .step = step, .join = join, .index = index,
        .graph = node < 0 ? UINT64_MAX : 7, .node = node < 0 ? UINT64_MAX : (uint64_t)node,
        .grid = {4, 1, 1}, .block = {128, 1, 1}};
    capw_gpu_kernel(w, &k);
}

/* Step s's GPU work: three eager kernels (the second starts while the host still waits: a host
 * wait gap; the third after its launch: a launch gap) and the two nodes of graph 7. */
static void gpu_records(struct capw *w, unsigned s)
{
    uint64_t t = step_t(s);
    gpu_kernel(w, t + 6000, t + 9000, 1, 10 * s + 1, s, TKP_JOIN_LAUNCH, 0, -1);
    gpu_kernel(w, t + 9500, t + 12000, 2, 10 * s + 2, s, TKP_JOIN_LAUNCH, 1, -1);
    gpu_kernel(w, t + 40000, t + 41000 + 100 * s, 3, 10 * s + 3, s, TKP_JOIN_LAUNCH, 2, -1);
    gpu_kernel(w, t + 42000, t + 44000, 4, 10 * s + 4, s, TKP_JOIN_GRAPH_LAUNCH, 0, 0);
    gpu_kernel(w, t + 43000, t + 45000, 1, 10 * s + 4, s, TKP_JOIN_GRAPH_LAUNCH, 0, 1);
}

void latecap_build(struct capw *w, int late)
{
    const uint32_t g[3] = {4, 1, 1}, b[3] = {128, 1, 1};
    const struct capw_node nodes[2] = {
        {.node = 0, .type = TKP_NODE_KERNEL, .name = 4, .grid = {4, 1, 1}, .block = {128, 1, 1}},
        {.node = 1, .type = TKP_NODE_KERNEL, .name = 1, .grid = {4, 1, 1}, .block = {128, 1, 1}},
    };
    for (unsigned s = 0; s <= STEPS; s++) {
        uint64_t t = step_t(s);
        capw_chunk_begin(w, t);
        capw_name(w, 1, "gemv_kernel");
        capw_name(w, 2, "rms_norm_kernel");
        capw_name(w, 3, "flash_fwd_kernel");
        capw_name(w, 4, "graph_gemm_kernel");
        capw_thread(w, 0, 7001);
        if (s == 0) {
            capw_meta(w, "latecap", 77);
            capw_gpu_info(w, 0, "always", "", 0);
        }
        if (s > 0 && !late) gpu_records(w, s - 1); /* CUPTI's buffer of the step before */
        if (s == STEPS) {
            if (late)
                for (unsigned k = 0; k < STEPS; k++) gpu_records(w, k);
            capw_chunk_end(w);
            break;
        }
        capw_graph(w, 7, 2, nodes);
        capw_launch(w, 1000, 0, s, 1, 0, TKP_VIA_RUNTIME, g, b, 0);  /* t + 1000 */
        capw_launch(w, 1000, 0, s, 2, 0, TKP_VIA_RUNTIME, g, b, 0);  /* t + 2000 */
        capw_launch(w, 36000, 0, s, 3, 0, TKP_VIA_RUNTIME, g, b, 0); /* t + 38000 */
        capw_graph_launch(w, 2000, 0, s, 7, 0, TKP_VIA_GRAPH_RT);   /* t + 40000 */
        capw_copy(w, 6000, 0, s, TKP_COPY_MEMCPY, TKP_DIR_DTOH, 4, 0,
                  TKP_COPY_ASYNC | TKP_COPY_PINNED);                 /* t + 46000 */
        capw_sync(w, 100, 0, s, TKP_SYNC_STREAM, 0, 4000);          /* t + 46100 */
        capw_step(w, s, 0, TKP_STEP_TOKEN, t + 1000, t + 46000, t + 50100, TKP_CLOSE_STREAM_SYNC,
                  3, 1, 1);
        capw_chunk_end(w);
    }
}

/* An MoE whose expert GEMMs are one grouped kernel per layer (as torch._grouped_mm launches
 * them), beside cuBLAS calls that are not experts: the router and a shared expert, whose weights
 * alternate between two tensors of one shape from step to step (as a caching allocator or a
 * double-buffered weight can make them), which per-expert GEMM detection alone would take for
 * two experts. 40 steps, 2 layers; the grouped kernel's GPU time grows by 100 ns a step. */
void moecap_build(struct capw *w)
{
    const uint32_t g[3] = {64, 1, 1}, b[3] = {128, 1, 1};
    for (unsigned s = 0; s < 40; s++) {
        uint64_t t = step_t(s);
        capw_chunk_begin(w, t);
        capw_name(w, 1, "void cutlass::device_kernel<at::cuda::detail::GroupedGemmKernel<bf16>>");
        capw_name(w, 2, "nvjet_tst_128x8_64x8_2x1_v_bz_TNT");
        capw_name(w, 3, "cublasLtMatmul");
        capw_thread(w, 0, 7001);
        if (s == 0) {
            capw_meta(w, "moecap", 78);
            capw_gpu_info(w, 0, "always", "", 0);
        }
        for (unsigned l = 0; l < 2; l++) {
            /* the router (every step one weight) and the shared expert (alternating weights) */
            uint64_t tok = s ? 4 : 16; /* a prefill of 16 tokens, then decode steps of 4 */
            const struct capw_lib router = {TKP_LIB_CUBLASLT, 3, 8, tok, 256, 1, 14, 14, 14, 68, 1,
                                            0, 0, 0x10000ull + l * 0x1000, 0, 0};
            const struct capw_lib shared = {TKP_LIB_CUBLASLT, 3, 512, tok, 128, 1, 14, 14, 14, 68,
                                            1, 0, 0, 0x80000ull + l * 0x100000 + (s % 2) * 0x40000,
                                            0, 0};
            capw_lib_tmpl(w, 2 * l, 0, &router);
            capw_lib_tmpl(w, 2 * l + 1, 0, &shared);
            capw_lib_call_t(w, l ? 3800 : 1000, s, 4 * l + 1, 2 * l, 500); /* t + 1000, 11000 */
            capw_launch(w, 100, 0, s, 2, 0, TKP_VIA_DRIVER, g, b, 0);
            capw_launch(w, 1000, 0, s, 1, 0, TKP_VIA_DRIVER, g, b, 0); /* the grouped GEMM */
            capw_lib_call_t(w, 1000, s, 4 * l + 2, 2 * l + 1, 500);
            capw_launch(w, 100, 0, s, 2, 0, TKP_VIA_DRIVER, g, b, 0);
        }
        const struct capw_lib lm_head = {TKP_LIB_CUBLASLT, 3, 1000, s ? 4 : 16, 128, 1, 14, 14, 14,
                                         68, 1, 0, 0, 0x900000ull, 0, 0};
        capw_lib_tmpl(w, 4, 0, &lm_head);
        capw_lib_call_t(w, 900, s, 9, 4, 500); /* t + 15000 */
        capw_copy(w, 1000, 0, s, TKP_COPY_MEMCPY, TKP_DIR_DTOH, 16, 0, TKP_COPY_PINNED);
        capw_step(w, s, 0, TKP_STEP_TOKEN, t + 1000, t + 16000, t + 20000, TKP_CLOSE_STREAM_SYNC,
                  6, 0, 1);
        for (unsigned k = 0; k < 6; k++) {
            uint64_t st = t + 3000 + 2000 * k, du = k % 3 == 1 ? 1000 + 100 * s : 300;
            const struct capw_gpu_kernel gk = {
                .start_ns = st, .end_ns = st + du, .name = k % 3 == 1 ? 1 : 2, .stream = 13,
                .correlation = 100 * s + k, .step = s, .join = TKP_JOIN_LAUNCH, .index = k,
                .graph = UINT64_MAX, .node = UINT64_MAX, .grid = {64, 1, 1},
                .block = {128, 1, 1}};
            capw_gpu_kernel(w, &gk);
        }
        capw_chunk_end(w);
    }
}
