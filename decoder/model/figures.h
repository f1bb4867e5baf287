/* tokprof decoder: the figures of a whole run, derived once from a finished model for every view
 * that shows them (figures.c): inter-token latency percentiles, the verdict, the worst steps and
 * their causes. A step's own derived figures: model.h (itl_ns), columns.h (the steps row). */
#ifndef TKP_FIGURES_H
#define TKP_FIGURES_H

#include <stddef.h>
#include <stdint.h>

#include "model/norms.h"

/* Idle share of the token steps' GPU span above which the host (launches or waits) is the limit
 * rather than the GPU: the run's verdict here, analysis.h's split of it and live.h's window. */
#define TKP_IDLE_BOUND 0.30
#define TKP_WORST_STEPS 3

struct tkp_run_figs {
    int gpu;             /* the capture has GPU records (tkp_model_gpu) */
    char why[256];       /* else why not */
    size_t nitl;         /* token steps with an ITL (model.h, tkp_itl_ns) */
    uint64_t itl[4];     /* p50, p90, p99, max (0 when nitl is 0) */
    double idle_share;   /* sum of idle / sum of GPU span over the token steps */
    const char *verdict; /* "gpu-bound", "host/launch-bound" or "unknown" (no GPU records) */
    size_t worst[TKP_WORST_STEPS], nworst; /* the slowest token steps (host duration), indices */
    const char *cause[TKP_WORST_STEPS];    /* norms.h, tkp_mstep_cause */
    int64_t cause_ns[TKP_WORST_STEPS];
};

/* The figures of the finished model m judged by its norms nr (tkp_model_norms). 0 or NOMEM. */
int tkp_run_figs_make(const struct tkp_model *m, const struct tkp_norms *nr,
                      struct tkp_run_figs *f);

#endif
