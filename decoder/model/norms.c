/* tokprof decoder: what a normal step is (medians over the token steps) and which steps are not. */
#include "model/norms.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/sort.h"
#include "tokprof/format.h"

int tkp_model_norms(const struct tkp_model *m, struct tkp_norms *nr)
{
    memset(nr, 0, sizeof(*nr));
    size_t n = 0, ng = 0;
    for (size_t i = 0; i < m->nsteps; i++)
        if (m->steps[i].kind == TKP_STEP_TOKEN) n++;
    uint64_t *v = malloc((n ? n : 1) * sizeof(*v));
    const struct tkp_mstep **g = malloc((n ? n : 1) * sizeof(*g)); /* those with GPU kernels */
    if (!v || !g || !(nr->class_p50 = calloc((size_t)m->nclasses, sizeof(*nr->class_p50)))) {
        free(v), free(g);
        return TKP_ERR_NOMEM;
    }
    nr->token_steps = n;
    n = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (s->kind != TKP_STEP_TOKEN) continue;
        v[n++] = tkp_mstep_host_ns(s);
        if (s->gpu_kernels) g[ng++] = s;
    }
    static const double half = 0.5;
    tkp_pcts_u64(v, n, &half, 1, &nr->host_p50);
    /* the other figures one at a time through the same scratch array: O(steps) memory */
    for (int f = -4; f < m->nclasses && ng; f++) {
        for (size_t i = 0; i < ng; i++) {
            const struct tkp_mstep *s = g[i];
            uint64_t span = tkp_mstep_span_ns(s), host = tkp_mstep_host_ns(s);
            v[i] = f == -4   ? s->busy_ns
                   : f == -3 ? span
                   : f == -2 ? span - s->busy_ns
                   : f == -1 ? (host > span ? host - span : 0)
                             : s->class_ns[f];
        }
        uint64_t p50;
        tkp_pcts_u64(v, ng, &half, 1, &p50);
        if (f == -4) nr->busy_p50 = p50;
        else if (f == -3) nr->span_p50 = p50;
        else if (f == -2) nr->idle_p50 = p50;
        else if (f == -1) nr->hostonly_p50 = p50;
        else nr->class_p50[f] = p50;
    }
    nr->gpu_steps = ng;
    free(v), free(g);
    return 0;
}

void tkp_norms_free(struct tkp_norms *nr)
{
    free(nr->class_p50);
    nr->class_p50 = NULL;
}

const char *tkp_mstep_anomaly(const struct tkp_norms *nr, const struct tkp_mstep *s)
{
    if (s->kind != TKP_STEP_TOKEN) return NULL;
    int host = nr->host_p50 && tkp_mstep_host_ns(s) > TKP_ANOMALY_FACTOR * nr->host_p50;
    int gpu = s->gpu_kernels && nr->busy_p50 && s->busy_ns > TKP_ANOMALY_FACTOR * nr->busy_p50;
    return host && gpu ? "host,gpu" : host ? "host" : gpu ? "gpu" : NULL;
}

/* a - b, held to int64's range where it would overflow (a hostile capture's times can be
 * anything); otherwise the plain difference. */
static int64_t excess(int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d)) return a < 0 ? INT64_MIN : INT64_MAX;
    return d;
}

const char *tkp_mstep_cause(const struct tkp_model *m, const struct tkp_norms *nr, int gpu,
                            const struct tkp_mstep *s, int64_t *by)
{
    const char *why = "none";
    int64_t best = 0;
    if (!gpu || !s->gpu_kernels) {
        *by = excess((int64_t)tkp_mstep_host_ns(s), (int64_t)nr->host_p50);
        /* a step that launched work and has no GPU record was not timed: host or GPU unknown */
        if (gpu && !tkp_mstep_timed(s)) return *by > 0 ? "unknown (GPU not timed)" : "none";
        return *by > 0 ? "host" : "none";
    }
    uint64_t span = tkp_mstep_span_ns(s), host = tkp_mstep_host_ns(s);
    int64_t d = excess((int64_t)(span - s->busy_ns), (int64_t)nr->idle_p50);
    if (d > best) best = d, why = "GPU idle";
    d = excess((int64_t)(host > span ? host - span : 0), (int64_t)nr->hostonly_p50);
    if (d > best) best = d, why = "host";
    for (int c = 0; c < m->nclasses; c++) {
        d = excess((int64_t)s->class_ns[c], (int64_t)nr->class_p50[c]);
        if (d > best) best = d, why = tkp_classes_name(m->opts.classes, c);
    }
    *by = best;
    return why;
}
