/* tokprof decoder: the medians of a finished model's token steps, and the anomaly flags they give
 * (norms.c). */
#ifndef TKP_NORMS_H
#define TKP_NORMS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Medians over the token steps (GPU figures over the token steps that have kernels): what
 * "normal" is, for anomaly flags and for explaining the worst steps. */
struct tkp_norms {
    size_t token_steps, gpu_steps;
    uint64_t host_p50, busy_p50, span_p50, idle_p50;
    uint64_t hostonly_p50; /* host duration not covered by the GPU span */
    uint64_t *class_p50;   /* per class id; owned, tkp_norms_free() */
};
#define TKP_ANOMALY_FACTOR 3 /* a step is flagged past 3x the median (host duration or busy) */
int tkp_model_norms(const struct tkp_model *m, struct tkp_norms *nr); /* 0 or NOMEM */
void tkp_norms_free(struct tkp_norms *nr);
/* NULL for a normal step, else "host", "gpu" or "host,gpu": which figure passed 3x its median. */
const char *tkp_mstep_anomaly(const struct tkp_norms *nr, const struct tkp_mstep *s);

/* Why step s was slow: the figure that grew most over its median across token steps — a kernel
 * class's GPU time (its name), "GPU idle" (idle inside the span) or "host" (host duration not
 * covered by the span); "none" when nothing grew; "host" or "none" without GPU records (gpu 0)
 * or kernels; "unknown (GPU not timed)" for a grown step not timed (model.h, tkp_mstep_timed). *by gets the growth in ns. (summary's worst steps, table steps' cause.) */
const char *tkp_mstep_cause(const struct tkp_model *m, const struct tkp_norms *nr, int gpu,
                            const struct tkp_mstep *s, int64_t *by);

#endif
