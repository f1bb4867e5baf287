/* tokprof decoder: the figures of a whole run (figures.h). */
#include "model/figures.h"

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
    tkp_sort_u64(v, n);
    f->nitl = n;
    f->itl[0] = tkp_pct_sorted(v, n, 0.5);
    f->itl[1] = tkp_pct_sorted(v, n, 0.9);
    f->itl[2] = tkp_pct_sorted(v, n, 0.99);
    f->itl[3] = tkp_pct_sorted(v, n, 1.0);
    free(v);
    return 0;
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
    f->verdict = !f->gpu || !span                 ? "unknown"
                 : f->idle_share > TKP_IDLE_BOUND ? "host/launch-bound"
                                                  : "gpu-bound";
    return 0;
}
