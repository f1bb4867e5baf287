/* tokprof decoder: the figures of a whole run (figures.h). */
#include "model/figures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/sort.h"
#include "model/model.h"
#include "tokprof/format.h"

static int itl_pcts(const struct tkp_model *m, struct tkp_run_figs *f)
{
    uint64_t *v = malloc((m->nsteps ? m->nsteps : 1) * sizeof(*v));
    if (!v) return TKP_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->nsteps; i++)
        if (m->steps[i].itl_ns) v[n++] = m->steps[i].itl_ns;
    static const double q[4] = {0.5, 0.9, 0.99, 1.0};
    f->nitl = n;
    tkp_pcts_u64(v, n, q, 4, f->itl);
    free(v);
    return 0;
}

void tkp_split_add(struct tkp_split *sp, uint64_t time_ns, uint64_t sync_ns, uint64_t gpu_ns,
                   uint64_t launch_ns)
{
    uint64_t wait = sync_ns < time_ns ? sync_ns : time_ns;
    sp->time_ns += time_ns;
    sp->wait_ns += wait;
    sp->gpu_wait_ns += wait < gpu_ns ? wait : gpu_ns;
    sp->launch_ns += launch_ns < time_ns - wait ? launch_ns : time_ns - wait;
}

void tkp_verdict_make(const struct tkp_split *s, struct tkp_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->word = "unknown";
    v->why = !s->gpu ? "GPU-bound or host-bound needs GPU records" : "no token step with a duration";
    if (!s->gpu || !s->time_ns) return;
    v->why = NULL;
    double t = (double)s->time_ns, wait = (double)s->wait_ns, gw = (double)s->gpu_wait_ns;
    double launch = (double)s->launch_ns;
    v->gpu_share = gw / t, v->idle_wait_share = (wait - gw) / t, v->launch_share = launch / t;
    v->own_share = (t - wait - launch) / t;
    v->word = v->gpu_share >= TKP_WAIT_BOUND        ? "gpu-bound"
              : v->launch_share >= v->own_share ? "launch-bound"
                                                : "host-bound";
}

void tkp_verdict_text(const struct tkp_verdict *v, char *buf, size_t n)
{
    if (v->why)
        snprintf(buf, n, "%s: %s", v->word, v->why);
    else
        snprintf(buf, n,
                 "%s: the host's own code %.1f%% of the token steps' time, launch calls %.1f%%, "
                 "waiting on the GPU %.1f%% (on an idle GPU %.1f%%)",
                 v->word, 100 * v->own_share, 100 * v->launch_share, 100 * v->gpu_share,
                 100 * v->idle_wait_share);
}

void tkp_model_split(const struct tkp_model *m, struct tkp_split *sp)
{
    char why[8];
    memset(sp, 0, sizeof(*sp));
    sp->gpu = tkp_model_gpu(m, why, sizeof(why));
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        /* with GPU records, a step not timed (TOKPROF_GPU=window:N/M) is left out: its waits
         * would read as waits on an idle GPU (model.h, tkp_mstep_timed) */
        if (s->kind == TKP_STEP_TOKEN && (!sp->gpu || tkp_mstep_timed(s)))
            tkp_split_add(sp, s->itl_ns ? s->itl_ns : tkp_mstep_host_ns(s), s->sync_ns,
                          s->busy_ns + s->copy_ns, s->launch_ns);
    }
}

int tkp_run_figs_make(const struct tkp_model *m, const struct tkp_norms *nr, struct tkp_run_figs *f)
{
    memset(f, 0, sizeof(*f));
    f->gpu = tkp_model_gpu(m, f->why, sizeof(f->why));
    if (itl_pcts(m, f)) return TKP_ERR_NOMEM;
    uint64_t span = 0, idle = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (s->kind != TKP_STEP_TOKEN) continue;
        span += tkp_mstep_span_ns(s);
        idle += tkp_mstep_span_ns(s) - s->busy_ns;
        /* insertion into the slowest TKP_WORST_STEPS */
        uint64_t h = tkp_mstep_host_ns(s);
        size_t k;
        if (f->nworst < TKP_WORST_STEPS)
            k = f->nworst++;
        else if (tkp_mstep_host_ns(&m->steps[f->worst[TKP_WORST_STEPS - 1]]) >= h)
            continue;
        else
            k = TKP_WORST_STEPS - 1;
        f->worst[k] = i;
        for (; k > 0 && tkp_mstep_host_ns(&m->steps[f->worst[k - 1]]) < h; k--) {
            size_t t = f->worst[k - 1];
            f->worst[k - 1] = f->worst[k];
            f->worst[k] = t;
        }
    }
    for (size_t w = 0; w < f->nworst; w++)
        f->cause[w] = tkp_mstep_cause(m, nr, f->gpu, &m->steps[f->worst[w]], &f->cause_ns[w]);
    f->idle_share = span ? (double)idle / (double)span : 0;
    tkp_model_split(m, &f->split);
    tkp_verdict_make(&f->split, &f->v);
    return 0;
}
