/* tokprof decoder: the figures of a whole run, derived once from a finished model for every view
 * that shows them (figures.c): inter-token latency percentiles, the verdict, the worst steps and
 * their causes. A step's own derived figures: model.h (itl_ns), columns.h (the steps row). */
#ifndef TKP_FIGURES_H
#define TKP_FIGURES_H

#include <stddef.h>
#include <stdint.h>

#include "model/norms.h"

#define TKP_WORST_STEPS 3

/* The verdict, the one rule (summary, analyze, report, whatif's critical path, top; the Python API
 * through summary): where the token steps' time went on the host's side of the critical path.
 * A token step's time (its inter-token latency: from the previous token step's end, so that the
 * host's work between steps, a scheduler's, counts; its host duration, begin to end, when it has
 * none) is split four ways; syncs and launches count by their segment (model.h):
 *   - GPU:    the host blocked in syncs (SYNC wait_ns) while the GPU worked, at most the step's
 *             GPU time (kernels' busy time + copies): the GPU was the critical path;
 *   - idle wait: the rest of the sync waits, the GPU idle (a wake-up, another process's work);
 *   - launch: the host inside launch API calls, estimated from the gaps between consecutive
 *             launches of a step (model.h, tkp_launch_paced): a gap up to a launch call's cost
 *             (10 us, or twice the thread's fastest gap when that is more) is the call, a longer
 *             gap counts that much as launch and the excess as own code;
 *   - own:    the rest: the host's own code between calls (Python, the scheduler, sampling).
 * Summed over the token steps: "gpu-bound" when GPU is at least TKP_WAIT_BOUND of the time (a
 * faster host would mostly wait longer); else "launch-bound" when launch >= own (fewer or cheaper
 * launches help: CUDA graphs, fusion), else "host-bound" (the host's own code). "unknown" without
 * GPU records (a wait cannot be told from a wake-up) or without a token step. */
#define TKP_WAIT_BOUND 0.25

struct tkp_split {
    int gpu;           /* GPU records: busy_ns means something */
    uint64_t time_ns;  /* the token steps' times (ITL, else host duration) */
    uint64_t wait_ns;  /* blocked in syncs (per step at most its time) */
    uint64_t gpu_wait_ns; /* of which the GPU worked (per step at most its GPU time) */
    uint64_t launch_ns; /* in launch calls (per step at most its time less its waits) */
};

struct tkp_verdict {
    const char *word;  /* "gpu-bound", "launch-bound", "host-bound", "unknown" */
    const char *why;   /* why unknown, else NULL */
    /* of time_ns (0 when unknown): they add up to 1 */
    double gpu_share, idle_wait_share, launch_share, own_share;
};

/* Adds one token step: its time (ITL, else host duration), sync waits, GPU time (busy + copies)
 * and launch-call time (model.h, tkp_launch_paced). The views that keep their own steps (live.c)
 * add them here, as tkp_model_split does. */
void tkp_split_add(struct tkp_split *sp, uint64_t time_ns, uint64_t sync_ns, uint64_t gpu_ns,
                   uint64_t launch_ns);
void tkp_verdict_make(const struct tkp_split *s, struct tkp_verdict *v);
/* The verdict in words for every view, e.g. "host-bound: the host's own code 89.4% of the token
 * steps' time, launch calls 8.1%, waiting on the GPU 2.5% (on an idle GPU 0.0%)" (buf of n
 * bytes, always terminated). */
void tkp_verdict_text(const struct tkp_verdict *v, char *buf, size_t n);
/* The split of the finished model m's token steps. */
void tkp_model_split(const struct tkp_model *m, struct tkp_split *s);

struct tkp_run_figs {
    int gpu;             /* the capture has GPU records (tkp_model_gpu) */
    char why[256];       /* else why not */
    size_t nitl;         /* token steps with an ITL (model.h, tkp_itl_ns) */
    uint64_t itl[4];     /* p50, p90, p99, max (0 when nitl is 0) */
    double idle_share;   /* sum of idle / sum of GPU span over the token steps */
    struct tkp_split split;
    struct tkp_verdict v; /* the verdict (above) */
    size_t worst[TKP_WORST_STEPS], nworst; /* the slowest token steps (host duration), indices */
    const char *cause[TKP_WORST_STEPS];    /* norms.h, tkp_mstep_cause */
    int64_t cause_ns[TKP_WORST_STEPS];
};

/* The figures of the finished model m judged by its norms nr (tkp_model_norms). 0 or NOMEM. */
int tkp_run_figs_make(const struct tkp_model *m, const struct tkp_norms *nr,
                      struct tkp_run_figs *f);

#endif
