/* tokprof decoder: MoE experts of a library-call model (moe.c). */
#ifndef TKP_MOE_H
#define TKP_MOE_H

#include <stdint.h>

#include "model/libcalls.h"

/* MoE experts from per-expert GEMMs (HF-eager-style MoE, minillm --moe), for `tokprof moe` and
 * `tokprof heatmap --kind expert`. How experts are found, per thread (all from LIB_CALL records;
 * the weight is operand A, the row-major-framework convention above; nothing when the vote says
 * tokens are m, since the weight is then operand B, which the capture does not record):
 *   1. An expert weight is one that, in some step, is absent while another weight of its shape
 *      class (m, k, type) is called, or is called with fewer tokens than the step has. Dense
 *      projections see every token of every forward; lm_head (the step's last GEMM) is excluded.
 *   2. In a step, each maximal run of consecutive expert-weight calls is one MoE layer; the run's
 *      ordinal is the layer index.
 *   3. In a layer, the shape class with the fewest distinct weights holds one weight per expert
 *      (e.g. the down projection, where gate and up share a class). Its expert index is
 *      (address - lowest) / stride, stride = the gcd of the address differences: experts
 *      stored as one [E, ...] tensor (vLLM, recent HF, minillm) come out exactly; an expert never
 *      active in the whole capture below the lowest seen one shifts the indices.
 *   4. An expert's GEMMs in a layer are its expert-class call and the run's other calls up to
 *      the previous expert-class call (gate, up, down: the down call ends each expert's group),
 *      or up to the next one when the run starts with an expert-class call. Their count and GPU
 *      time (tkp_call.gpu_ns) are the expert's calls and ns.
 * Fused MoE kernels (vLLM's fused_moe_kernel, grouped GEMMs) hide the load from the host. */
#define TKP_MOE_MAX_EXPERTS 1024
struct tkp_moe {
    uint32_t thread, s0, s1; /* the thread's libmodel steps [s0, s1) */
    uint32_t layers, width;  /* MoE layers, experts per layer (0, 0: no MoE data) */
    uint64_t *load;  /* [((step - s0) * layers + layer) * width + expert]: the expert-class call's
                      * tokens (the expert's token count in that layer) */
    uint64_t *calls; /* [(step - s0) * width + expert]: the expert's GEMM calls, all layers */
    uint64_t *ns;    /* [(step - s0) * width + expert]: their GPU time, all layers */
    int has_gpu;     /* some expert call has GPU time */
};
/* Finds the experts of steps [s0, s1) of one thread; width at least min_width (padding). Returns
 * 0 (out->layers == 0 when there is no MoE data) or NOMEM. */
int tkp_moe_find(const struct tkp_libmodel *m, uint32_t s0, uint32_t s1, uint32_t min_width,
                 struct tkp_moe *out);
void tkp_moe_free(struct tkp_moe *e); /* accepts a zeroed one */

/* tkp_moe_find in parts, for a thread's steps loaded a window at a time (libcalls.h:
 * tkp_libmodel_load_window): the experts (rule 1) need every step, then the layers' expert
 * classes and strides (rules 2, 3) every step again, before any step's figures. So:
 *     tkp_moe_scan_new(&sc);
 *     for each window: tkp_moe_scan_add(sc, &window, 0, window.nsteps);   tkp_moe_scan_end(sc, w);
 *     for each window: tkp_moe_scan_add(sc, &window, 0, window.nsteps);   tkp_moe_scan_end(sc, w);
 *     for each window: tkp_moe_scan_rows(sc, &window, 0, window.nsteps, &x); ... tkp_moe_free(&x);
 *     tkp_moe_scan_free(sc);
 * Windows in step order, the same ones each time; the result is tkp_moe_find's over all of them.
 * Memory: O(distinct weights + layers x experts), whatever the number of steps. */
struct tkp_moe_scan;
int tkp_moe_scan_new(struct tkp_moe_scan **sc); /* 0 or NOMEM */
int tkp_moe_scan_add(struct tkp_moe_scan *sc, const struct tkp_libmodel *m, uint32_t s0,
                     uint32_t s1); /* 0 or NOMEM */
void tkp_moe_scan_end(struct tkp_moe_scan *sc, uint32_t min_width);
/* The figures of steps [s0, s1) of m (out as tkp_moe_find's: layers 0 when no MoE data). */
int tkp_moe_scan_rows(struct tkp_moe_scan *sc, const struct tkp_libmodel *m, uint32_t s0,
                      uint32_t s1, struct tkp_moe *out);
void tkp_moe_scan_free(struct tkp_moe_scan *sc); /* accepts NULL */

#endif
