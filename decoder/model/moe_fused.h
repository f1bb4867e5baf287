/* tokprof decoder: fused and grouped MoE expert kernels — one kernel launch runs the GEMMs of
 * every expert of a layer (vLLM's fused_moe_kernel, CUTLASS/PyTorch grouped GEMMs such as
 * torch._grouped_mm, TensorRT-LLM's MoE GEMMs). The routing (which tokens went to which expert)
 * happens on the GPU inside them, so per-expert load is not observable from the host there; what
 * is, and what `tokprof moe` reports instead: the grouped kernels' launches and GPU time per step
 * and the trend of that time over the run.
 *
 * A name is a fused expert kernel when it matches TKP_MOE_FUSED_RE and not TKP_MOE_FUSED_NOT_RE
 * (POSIX ERE, case-insensitive, anywhere in the name): PyTorch 2.15's grouped GEMM is
 * `cutlass::device_kernel<...GemmUniversal<cutlass::gemm::GroupProblemShape<...>...>>`. Memory: O(steps that launched such a kernel) + O(distinct names). */
#ifndef TKP_MOE_FUSED_H
#define TKP_MOE_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include "base/map.h"

struct tkp_reader;

#define TKP_MOE_FUSED_RE                                                                          \
    "fused_moe|moe_gemm|moe_mm|moegemm|grouped_?mm|grouped_?gemm|group_?gemm|gemm_?grouped|"     \
    "moe_?ggemm|group_?problem_?shape"
/* ... but not the set-up kernels around them (PyTorch's prepare_grouped_gemm_data) */
#define TKP_MOE_FUSED_NOT_RE "prepare_"
#define TKP_MOE_FUSED_NAMES 8 /* distinct kernel names kept for the report */

struct tkp_fused_step {
    uint32_t thread;
    uint64_t step;        /* segment on its thread */
    uint64_t launches;    /* host launches of fused kernels (eager, and graph kernel nodes) */
    uint64_t kernels;     /* GPU records of fused kernels joined to the step */
    uint64_t gpu_ns;      /* their GPU time */
};

struct tkp_fused {
    struct tkp_fused_step *steps; /* ordered by (thread, step) after tkp_fused_load */
    size_t nsteps, cap;
    const char *names[TKP_MOE_FUSED_NAMES]; /* matching names seen (the reader's strings) */
    size_t nnames;
    uint64_t launches, kernels, gpu_ns; /* over the capture */
    /* internal */
    struct tkp_map ix;      /* steps by (thread, step) */
    const void **seen;      /* name strings classified, and their verdicts */
    unsigned char *seen_ok;
    size_t nseen, seen_cap;
    struct tkp_fgraph *graphs;
    size_t ngraphs, cap_graphs;
};

/* The name to show for a fused kernel: its base name (tkp_kernel_base_name) when that still says
 * what it is, else the full name cut to n - 1 bytes (CUTLASS's generic `device_kernel<...>`
 * wrapper names the grouped GEMM only in its template arguments). Returns buf. */
char *tkp_fused_display_name(const char *name, char *buf, size_t n);

/* Reads the whole capture and fills *f (zeroed by the call). Names stay valid while the reader
 * is open. Returns 0, a negative tkp_err, or the reader's error. */
int tkp_fused_load(struct tkp_reader *r, struct tkp_fused *f);
void tkp_fused_free(struct tkp_fused *f); /* accepts a zeroed one */

#endif
