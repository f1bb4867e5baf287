/* tokprof decoder: analyses over the step model (analysis.h has the methods and their bounds). */
#include "model/analysis.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/json.h"
#include "model/libcalls.h"
#include "capture/reader.h"
#include "base/sort.h"

/* ---- the per-step accumulator ---------------------------------------------------------------- */

/* The extras live in the model's steps (model.h: one lookup per record serves both); an acc is
 * the model it reads, its caller's (tkp_acc_bind) or its own (tkp_acc_new, fed by tkp_acc_add). */
struct tkp_acc {
    struct tkp_model *m;
    struct tkp_model own; /* a standalone acc's model */
    struct tkp_classes *cl;
};

int tkp_acc_new(struct tkp_acc **out)
{
    char why[256];
    struct tkp_acc *a = calloc(1, sizeof(*a));
    if (!a || tkp_classes_new(NULL, &a->cl, why, sizeof(why))) {
        free(a);
        return TKP_ERR_NOMEM;
    }
    struct tkp_model_opts mo = {.classes = a->cl, .from = -1, .to = -1};
    tkp_model_init(&a->own, &mo);
    a->m = &a->own;
    *out = a;
    return 0;
}

int tkp_acc_bind(struct tkp_model *m, struct tkp_acc **out)
{
    struct tkp_acc *a = calloc(1, sizeof(*a));
    if (!a) return TKP_ERR_NOMEM;
    a->m = m;
    *out = a;
    return 0;
}

void tkp_acc_free(struct tkp_acc *a)
{
    if (!a) return;
    if (a->m == &a->own) tkp_model_free(&a->own);
    tkp_classes_free(a->cl);
    free(a);
}

int tkp_acc_add(struct tkp_acc *a, const struct tkp_record *r)
{
    return a->m == &a->own ? tkp_model_add(&a->own, r) : 0;
}

int tkp_acc_finish(struct tkp_acc *a)
{
    return a->m == &a->own ? tkp_model_finish(&a->own) : 0;
}

int tkp_acc_has_tokens(const struct tkp_acc *a)
{
    return a && a->m->has_tokens;
}

int tkp_acc_has_kernel_tokens(const struct tkp_acc *a)
{
    return a && a->m->has_tok_cols;
}

static int astep(const struct tkp_model *am, const struct tkp_mstep *s, struct tkp_astep *out)
{
    memset(out, 0, sizeof(*out));
    if (!s) return 0;
    out->tokens = am->token_dim_m ? s->gemm_max_m : s->gemm_max_n;
    out->seqs = am->token_dim_m ? s->gemm_last_m : s->gemm_last_n;
    out->launch_gap_ns = s->launch_gap_ns;
    out->wait_ns = s->wait_ns;
    out->kern_tokens = s->kern_many ? 0 : s->kern_tokens;
    out->kern_many = s->kern_many;
    /* analysis.h, tkp_step_tokens: unknown rather than a wrong number */
    if (s->graph_launches >= TKP_HIDDEN_GRAPHS)
        out->tokens = out->seqs = 0, out->hidden = 1;
    if (out->tokens) out->kind = out->tokens == out->seqs ? TKP_KIND_DECODE : TKP_KIND_PREFILL;
    return 1;
}

int tkp_acc_step(const struct tkp_acc *a, uint32_t thread, uint64_t seg, struct tkp_astep *out)
{
    return astep(a ? a->m : NULL, a ? tkp_model_step(a->m, thread, seg) : NULL, out);
}

int tkp_acc_step_of(const struct tkp_acc *a, const struct tkp_model *m, size_t i,
                    struct tkp_astep *out)
{
    const struct tkp_mstep *s = &m->steps[i];
    if (a && a->m == m) return astep(m, s, out);
    return tkp_acc_step(a, s->thread, s->seg, out);
}

int tkp_acc_launch_ns(const struct tkp_acc *a, uint32_t thread, uint64_t seg, uint32_t join,
                      uint32_t index, uint64_t *ns)
{
    return tkp_model_launch_ns(a->m, thread, seg, join, index, ns);
}

void tkp_tokrule_step(struct tkp_tokrule *st, const struct tkp_mstep *s, int found,
                      const struct tkp_astep *as, int shapes, int kernels, uint64_t *tok,
                      int *src)
{
    uint64_t t = 0;
    int sc = TKP_TOK_NONE;
    *tok = 0, *src = TKP_TOK_NONE;
    if (s->kind != TKP_STEP_TOKEN && s->kind != TKP_STEP_PART) return;
    if (found && as->hidden) {
        /* unknown; the next step's "previous" is the one before */
    } else if (found && as->tokens) {
        t = as->tokens, sc = TKP_TOK_SHAPES;
        st->prev_seqs = as->seqs;
    } else if (kernels && found && (as->kern_tokens || as->kern_many)) {
        if (as->kern_tokens) t = as->kern_tokens, sc = TKP_TOK_KERNELS;
    } else if (shapes && st->prev_seqs) {
        t = st->prev_seqs, sc = TKP_TOK_PREVIOUS;
    } else if (!shapes && !kernels && st->started) {
        t = 1, sc = TKP_TOK_ASSUMED;
    }
    st->started = 1;
    if (s->kind == TKP_STEP_PART) { /* its tokens are its token step's */
        if (sc == TKP_TOK_NONE) st->part_unknown = 1;
        st->part_tok += t, st->part = 1;
        return;
    }
    if (st->part) {
        if (st->part_unknown || sc == TKP_TOK_NONE) t = 0, sc = TKP_TOK_NONE;
        else t += st->part_tok;
        st->part = st->part_unknown = 0, st->part_tok = 0;
    }
    *tok = t, *src = sc;
}

void tkp_step_tokens(const struct tkp_model *m, const struct tkp_acc *a, uint64_t *tokens,
                     int *src)
{
    int shapes = tkp_acc_has_tokens(a), kernels = tkp_acc_has_kernel_tokens(a);
    struct tkp_tokrule st = {0};
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        struct tkp_astep as;
        if (i == 0 || s->thread != m->steps[i - 1].thread) memset(&st, 0, sizeof(st));
        tokens[i] = 0, src[i] = TKP_TOK_NONE;
        if (s->kind != TKP_STEP_TOKEN && s->kind != TKP_STEP_PART) continue;
        int ok = tkp_acc_step_of(a, m, i, &as);
        tkp_tokrule_step(&st, s, ok, &as, shapes, kernels, &tokens[i], &src[i]);
    }
}

const char *tkp_tok_src_str(int src)
{
    static const char *const w[] = {NULL, "shapes", "previous", "assumed", "kernels"};
    return src > 0 && src < 5 ? w[src] : NULL;
}


/* ---- change points ---------------------------------------------------------------------------- */


/* v[k] as it would be after sorting v, the smaller ones before it (Wirth's selection: linear on
 * average, where the median of a 100k-step series by sorting was not). */
static double select_d(double *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (lo < hi) {
        double x = v[kk];
        ptrdiff_t i = lo, j = hi;
        do {
            while (v[i] < x) i++;
            while (x < v[j]) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j], v[j--] = t;
            }
        } while (i <= j);
        if (j < kk) lo = i;
        if (kk < i) hi = j;
    }
    return v[kk];
}

/* The median of v (reordered); 0 when empty. */
static double median_d(double *v, size_t n)
{
    if (!n) return 0;
    double hi = select_d(v, n, n / 2);
    if (n % 2) return hi;
    double lo = v[0]; /* the largest of the lower half */
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo) lo = v[i];
    return (lo + hi) / 2;
}

struct cpctx {
    const double *s; /* smoothed series */
    const double *c1, *c2; /* prefix sums of s and s^2 */
    double pen;
    struct tkp_cp *out;
    int n, max;
};

static double sse(const struct cpctx *c, size_t a, size_t b) /* [a, b) */
{
    double n = (double)(b - a), s = c->c1[b] - c->c1[a], q = c->c2[b] - c->c2[a];
    double v = q - s * s / n;
    return v > 0 ? v : 0;
}

static void split(struct cpctx *c, size_t a, size_t b, int depth)
{
    if (b - a < 2 * TKP_CP_MIN_SEG || c->n >= c->max || depth > 32) return;
    double whole = sse(c, a, b), best = 0;
    size_t at = 0;
    for (size_t t = a + TKP_CP_MIN_SEG; t + TKP_CP_MIN_SEG <= b; t++) {
        double gain = whole - sse(c, a, t) - sse(c, t, b);
        if (gain > best) best = gain, at = t;
    }
    if (!at || best <= c->pen) return;
    double m1 = (c->c1[at] - c->c1[a]) / (double)(at - a);
    double m2 = (c->c1[b] - c->c1[at]) / (double)(b - at);
    double lo = fabs(m1 < m2 ? m1 : m2);
    if (fabs(m2 - m1) < TKP_CP_MIN_REL * lo) return;
    /* and the shift stands out of the segments' own spread (Welch t on the smoothed values):
     * host noise is heavy-tailed, so the MAD-based penalty alone splits noise */
    double v1 = sse(c, a, at) / (double)(at - a), v2 = sse(c, at, b) / (double)(b - at);
    double se = sqrt(v1 / (double)(at - a) + v2 / (double)(b - at));
    if (se > 0 && fabs(m2 - m1) < TKP_CP_MIN_T * se) return;
    split(c, a, at, depth + 1);
    if (c->n < c->max) c->out[c->n++] = (struct tkp_cp){at, m1, m2};
    split(c, at, b, depth + 1);
}

static int cmp_cp(const void *x, const void *y)
{
    const struct tkp_cp *a = x, *b = y;
    return a->at < b->at ? -1 : a->at > b->at;
}

int tkp_cp_find(const double *v, size_t n, struct tkp_cp *out, int max)
{
    if (n < 2 * TKP_CP_MIN_SEG) return 0;
    double *s = malloc(n * sizeof(*s)), *c1 = malloc((n + 1) * sizeof(*c1));
    double *c2 = malloc((n + 1) * sizeof(*c2)), *tmp = malloc(n * sizeof(*tmp));
    if (!s || !c1 || !c2 || !tmp) {
        free(s), free(c1), free(c2), free(tmp);
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) { /* 5-point running median, shrinking at the ends */
        size_t lo = i >= 2 ? i - 2 : 0, hi = i + 3 < n ? i + 3 : n, k = 0;
        double w[5];
        for (size_t j = lo; j < hi; j++) { /* insertion: w sorted */
            size_t q = k++;
            for (; q > 0 && w[q - 1] > v[j]; q--)
                w[q] = w[q - 1];
            w[q] = v[j];
        }
        s[i] = k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2; /* as median_d() */
    }
    for (size_t i = 0; i + 1 < n; i++)
        tmp[i] = fabs(v[i + 1] - v[i]);
    double sigma = 1.4826 * median_d(tmp, n - 1) / sqrt(2.0);
    memcpy(tmp, v, n * sizeof(*tmp));
    double med = fabs(median_d(tmp, n));
    if (sigma < 1e-3 * med) sigma = 1e-3 * med;
    if (sigma <= 0) sigma = 1;
    c1[0] = c2[0] = 0;
    for (size_t i = 0; i < n; i++)
        c1[i + 1] = c1[i] + s[i], c2[i + 1] = c2[i] + s[i] * s[i];
    struct cpctx c = {s, c1, c2, 2 * sigma * sigma * log((double)n), out, 0, max};
    split(&c, 0, n, 0);
    tkp_sort(out, (size_t)c.n, sizeof(*out), cmp_cp);
    /* each split was tested against the segment it cut; once all are made, a change point's
     * neighbours are nearer, and one whose two segments (smoothed) now differ by less than
     * TKP_CP_MIN_REL is no change: the weakest such goes, until none is left */
    for (;;) {
        int weak = -1;
        double least = TKP_CP_MIN_REL;
        for (int i = 0; i < c.n; i++) {
            size_t a = i ? out[i - 1].at : 0, m = out[i].at, b = i + 1 < c.n ? out[i + 1].at : n;
            double m1 = (c1[m] - c1[a]) / (double)(m - a), m2 = (c1[b] - c1[m]) / (double)(b - m);
            double lo = fabs(m1 < m2 ? m1 : m2), rel = lo > 0 ? fabs(m2 - m1) / lo : HUGE_VAL;
            if (rel < least) least = rel, weak = i;
        }
        if (weak < 0) break;
        memmove(out + weak, out + weak + 1, (size_t)(c.n - weak - 1) * sizeof(*out));
        c.n--;
    }
    /* report the means of the smoothed series between neighbouring change points: what was
     * tested, the typical step (a raw mean follows the stalls: a step of 10 ms among steps of
     * 0.1 ms moves it by 1 %, and host durations are heavy-tailed) */
    for (int i = 0; i < c.n; i++) {
        size_t a = i ? out[i - 1].at : 0, m = out[i].at, b = i + 1 < c.n ? out[i + 1].at : n;
        out[i].before = (c1[m] - c1[a]) / (double)(m - a);
        out[i].after = (c1[b] - c1[m]) / (double)(b - m);
    }
    free(s), free(c1), free(c2), free(tmp);
    return c.n;
}

int tkp_fit_line(const double *x, const double *y, size_t n, double *a, double *b, double *r2)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
    if (n < 2) return -1;
    for (size_t i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx <= 0) return -1;
    *b = sxy / sxx;
    *a = my - *b * mx;
    *r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 1;
    return 0;
}

/* ---- the analyses ----------------------------------------------------------------------------- */

/* The median of class c's GPU time per step over series positions [a, b) of `idx`. */
static double class_median(const struct tkp_model *m, const size_t *idx, size_t a, size_t b, int c,
                           double *scratch)
{
    uint64_t any = 0;
    for (size_t i = a; i < b; i++)
        any |= m->steps[idx[i]].class_ns[c];
    if (!any) return 0; /* a class that never ran (every class, without GPU records) */
    for (size_t i = a; i < b; i++)
        scratch[i - a] = (double)m->steps[idx[i]].class_ns[c];
    return median_d(scratch, b - a);
}

/* The classes whose per-step medians moved most between steps [a, m) and [m, b) of `idx`. */
static int name_classes(const struct tkp_model *m, const size_t *idx, size_t a, size_t at,
                        size_t b, struct tkp_acp *cp, double *scratch)
{
    double d[TKP_CLASSES_MAX], be[TKP_CLASSES_MAX], af[TKP_CLASSES_MAX], tot = 0;
    for (int c = 0; c < m->nclasses && c < TKP_CLASSES_MAX; c++) {
        be[c] = class_median(m, idx, a, at, c, scratch);
        af[c] = class_median(m, idx, at, b, c, scratch);
        d[c] = af[c] - be[c];
        tot += fabs(d[c]);
    }
    cp->ncls = 0;
    for (int pick = 0; pick < 3; pick++) {
        int best = -1;
        for (int c = 0; c < m->nclasses && c < TKP_CLASSES_MAX; c++) {
            int used = 0;
            for (int j = 0; j < cp->ncls; j++)
                used |= cp->cls[j] == c;
            if (!used && (best < 0 || fabs(d[c]) > fabs(d[best]))) best = c;
        }
        /* a class is named when it carries a fifth of the movement */
        if (best < 0 || fabs(d[best]) <= 0 || fabs(d[best]) < 0.2 * tot) break;
        cp->cls[cp->ncls] = best;
        cp->cls_before[cp->ncls] = be[best];
        cp->cls_after[cp->ncls++] = af[best];
    }
    return 0;
}

static int series_cps(const struct tkp_model *m, struct tkp_analysis *an, const size_t *idx,
                      size_t n, int busy, double *v, double *scratch)
{
    struct tkp_cp cp[TKP_CP_MAX];
    for (size_t i = 0; i < n; i++) {
        const struct tkp_mstep *s = &m->steps[idx[i]];
        v[i] = busy ? (double)s->busy_ns : (double)tkp_mstep_host_ns(s);
    }
    int k = tkp_cp_find(v, n, cp, TKP_CP_MAX);
    if (k < 0) return k;
    for (int i = 0; i < k; i++) {
        struct tkp_acp *o = &an->cps[an->ncps++];
        size_t a = i ? cp[i - 1].at : 0, b = i + 1 < k ? cp[i + 1].at : n;
        o->series = busy ? "busy" : "host";
        o->step = m->steps[idx[cp[i].at]].index;
        o->a = a, o->at = cp[i].at, o->b = b;
        o->before_ns = cp[i].before;
        o->after_ns = cp[i].after;
        name_classes(m, idx, a, cp[i].at, b, o, scratch);
    }
    return 0;
}

/* The median over series positions [a, b) of the steps' launches (eager + graph) or tokens. */
static double seg_median(const struct tkp_model *m, const struct tkp_acc *acc, const size_t *idx,
                         size_t a, size_t b, int tokens, double *scratch)
{
    for (size_t i = a; i < b; i++) {
        const struct tkp_mstep *s = &m->steps[idx[i]];
        struct tkp_astep as;
        if (tokens) scratch[i - a] = tkp_acc_step_of(acc, m, idx[i], &as) ? (double)as.tokens : 0;
        else scratch[i - a] = (double)(s->launches + s->graph_launches);
    }
    return median_d(scratch, b - a);
}

/* With GPU records: keeps the host change points that a GPU busy change point or a change of the
 * steps' shape explains, and moves the others to an->host_only (analysis.h). */
static void host_explained(const struct tkp_model *m, const struct tkp_acc *acc,
                           struct tkp_analysis *an, const size_t *idx, double *scratch)
{
    int w = 0;
    for (int i = 0; i < an->ncps; i++) {
        struct tkp_acp *c = &an->cps[i];
        int keep = c->series[0] != 'h';
        for (int j = 0; !keep && j < an->ncps; j++)
            keep = an->cps[j].series[0] == 'b' && llabs(an->cps[j].step - c->step) <= TKP_CP_NEAR;
        if (!keep) {
            double l1 = seg_median(m, acc, idx, c->a, c->at, 0, scratch);
            double l2 = seg_median(m, acc, idx, c->at, c->b, 0, scratch);
            double t1 = seg_median(m, acc, idx, c->a, c->at, 1, scratch);
            double t2 = seg_median(m, acc, idx, c->at, c->b, 1, scratch);
            keep = fabs(l2 - l1) >= TKP_CP_MIN_REL * (l1 < l2 ? l1 : l2) || t1 != t2;
        }
        if (keep) an->cps[w++] = *c;
        else if (an->nhost_only < TKP_CP_MAX) an->host_only[an->nhost_only++] = *c;
    }
    an->ncps = w;
}

static void slopes(const struct tkp_model *m, const struct tkp_acc *acc, struct tkp_analysis *an,
                   const size_t *idx, size_t n, double *x, double *y)
{
    struct tkp_astep as;
    uint64_t prompt = 0, seqs = 1;
    size_t k = 0, first_decode = 0;
    int have_prefill = 0;
    /* the prompt: the first token step whose tokens exceed its sequences (the prefill) */
    for (size_t i = 0; i < n; i++) {
        if (!tkp_acc_step_of(acc, m, idx[i], &as) || !as.tokens)
            continue;
        an->tokens_known = 1;
        if (as.kind == TKP_KIND_PREFILL && !have_prefill && as.seqs) {
            prompt = as.tokens / as.seqs, seqs = as.seqs, have_prefill = 1, first_decode = i + 1;
            break;
        }
    }
    an->prompt_tokens = prompt;
    /* attention against KV tokens, decode steps after the prefill */
    for (size_t i = first_decode; i < n; i++) {
        const struct tkp_mstep *s = &m->steps[idx[i]];
        int known = tkp_acc_step_of(acc, m, idx[i], &as) && as.tokens;
        if (known && as.kind != TKP_KIND_DECODE) continue;
        if (!s->gpu_kernels) continue;
        uint64_t sq = known && as.seqs ? as.seqs : seqs;
        x[k] = (double)(sq * (prompt + (uint64_t)(i - first_decode) + 1));
        y[k++] = (double)s->class_ns[TKP_CLASS_ATTENTION];
    }
    double a, b, r2;
    if (k >= 3 && !tkp_fit_line(x, y, k, &a, &b, &r2))
        an->attn = (struct tkp_slope){1, k, b * 1000, a, r2};
    /* gemm against tokens per step */
    k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tkp_mstep *s = &m->steps[idx[i]];
        if (!s->gpu_kernels || !tkp_acc_step_of(acc, m, idx[i], &as) || !as.tokens) continue;
        x[k] = (double)as.tokens;
        y[k++] = (double)s->class_ns[TKP_CLASS_GEMM];
    }
    if (k >= 2 && !tkp_fit_line(x, y, k, &a, &b, &r2))
        an->mlp = (struct tkp_slope){1, k, b, a, r2};
}

int tkp_analysis_make(const struct tkp_model *m, const struct tkp_acc *acc, struct tkp_analysis *an)
{
    char why[256];
    memset(an, 0, sizeof(*an));
    an->gpu = tkp_model_gpu(m, why, sizeof(why));
    /* the series' thread: the most token steps */
    size_t best = 0, cur = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (i && s->thread != m->steps[i - 1].thread) cur = 0;
        if (s->kind != TKP_STEP_TOKEN) continue;
        if (++cur > best) best = cur, an->thread = s->thread, an->tid = s->tid;
        an->span_ns += tkp_mstep_span_ns(s);
        an->busy_ns += s->busy_ns;
        struct tkp_astep as;
        if (tkp_acc_step_of(acc, m, i, &as))
            an->launch_gap_ns += as.launch_gap_ns, an->wait_ns += as.wait_ns;
    }
    size_t n = 0, *idx = malloc((best ? best : 1) * sizeof(*idx));
    double *v = malloc((best ? best : 1) * sizeof(*v)), *w = malloc((best ? best : 1) * sizeof(*w));
    if (!idx || !v || !w) {
        free(idx), free(v), free(w);
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->nsteps; i++)
        if (m->steps[i].kind == TKP_STEP_TOKEN && m->steps[i].thread == an->thread) idx[n++] = i;
    an->nseries = n;
    int err = series_cps(m, an, idx, n, 0, v, w);
    if (!err && an->gpu) { /* GPU busy over the steps with GPU records: one not timed
                              (TOKPROF_GPU=window:N/M) is unknown, not a drop to 0 */
        size_t *tidx = malloc((n ? n : 1) * sizeof(*tidx)), nt = 0;
        if (!tidx) err = TKP_ERR_NOMEM;
        for (size_t i = 0; tidx && i < n; i++)
            if (m->steps[idx[i]].gpu_kernels) tidx[nt++] = idx[i];
        if (tidx) err = series_cps(m, an, tidx, nt, 1, v, w);
        free(tidx);
    }
    if (!err && an->gpu) host_explained(m, acc, an, idx, w);
    if (!err) slopes(m, acc, an, idx, n, v, w);
    free(idx), free(v), free(w);
    uint64_t idle = an->span_ns > an->busy_ns ? an->span_ns - an->busy_ns : 0;
    an->idle_share = an->span_ns ? (double)idle / (double)an->span_ns : 0;
    uint64_t split = an->launch_gap_ns + an->wait_ns;
    an->gap_share = split ? (double)an->launch_gap_ns / (double)split : 0;
    struct tkp_split sp;
    tkp_model_split(m, &sp);
    tkp_verdict_make(&sp, &an->v); /* figures.h: the one rule */
    an->verdict = an->v.word;
    return err;
}

void tkp_analysis_free(struct tkp_analysis *an)
{
    memset(an, 0, sizeof(*an));
}

/* ---- views ------------------------------------------------------------------------------------ */

void tkp_analysis_print_lines(FILE *f, const struct tkp_model *m, const struct tkp_analysis *an)
{
    if (!an->ncps && an->nseries >= 2 * TKP_CP_MIN_SEG)
        fprintf(f, "change    none in %zu token steps (tid %u)\n", an->nseries, an->tid);
    for (int i = 0; i < an->ncps; i++) {
        const struct tkp_acp *c = &an->cps[i];
        fprintf(f, "change    step %" PRId64 ": %s %.3f -> %.3f ms (%+.1f%%)", c->step,
                c->series[0] == 'h' ? "host duration" : "GPU busy", c->before_ns / 1e6,
                c->after_ns / 1e6,
                c->before_ns > 0 ? 100.0 * (c->after_ns - c->before_ns) / c->before_ns : 0.0);
        for (int j = 0; j < c->ncls; j++)
            fprintf(f, "%s %s %+.3f ms", j ? "," : "; moved:",
                    tkp_classes_name(m->opts.classes, c->cls[j]),
                    (c->cls_after[j] - c->cls_before[j]) / 1e6);
        fputc('\n', f);
    }
    /* host shifts without GPU backing: one line, the first few of them */
    for (int i = 0; i < an->nhost_only && i < 4; i++) {
        const struct tkp_acp *c = &an->host_only[i];
        if (!i) fprintf(f, "host-only host duration shift%s at step%s", an->nhost_only > 1 ? "s" : "",
                        an->nhost_only > 1 ? "s" : "");
        fprintf(f, "%s %" PRId64 " (%+.0f%%)", i ? "," : "", c->step,
                c->before_ns > 0 ? 100.0 * (c->after_ns - c->before_ns) / c->before_ns : 0.0);
    }
    if (an->nhost_only > 4) fprintf(f, " and %d more", an->nhost_only - 4);
    if (an->nhost_only)
        fprintf(f, ": GPU busy and launches unchanged (machine load?), not %s\n",
                an->nhost_only > 1 ? "change points" : "a change point");
    if (an->attn.ok)
        fprintf(f, "scaling   attention %+.1f us per 1k KV tokens (r2 %.2f, %zu decode steps%s)\n",
                an->attn.per1k_ns / 1e3, an->attn.r2, an->attn.n,
                an->prompt_tokens ? "" : "; prompt length unknown");
    if (an->mlp.ok)
        fprintf(f, "scaling   gemm %+.3f us per token in the step (r2 %.2f, %zu steps)\n",
                an->mlp.per1k_ns / 1e3, an->mlp.r2, an->mlp.n);
    if (an->gpu && an->span_ns)
        fprintf(f, "idle      %.1f%% of GPU span: launch gaps %.3f ms, host waits %.3f ms\n",
                100.0 * an->idle_share, an->launch_gap_ns / 1e6, an->wait_ns / 1e6);
}

static void json_slope(FILE *f, const char *k, const struct tkp_slope *s, const char *unit)
{
    fprintf(f, "\"%s\":", k);
    if (!s->ok) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"%s\":%.3f,\"intercept_ns\":%.3f,\"r2\":%.6f,\"steps\":%zu}", unit, s->per1k_ns,
            s->intercept_ns, s->r2, s->n);
}

void tkp_analysis_print_json(FILE *f, const struct tkp_model *m, const struct tkp_analysis *an)
{
    fprintf(f, "\"series_tid\":%u,\"change_points\":[", an->tid);
    for (int i = 0; i < an->ncps; i++) {
        const struct tkp_acp *c = &an->cps[i];
        fprintf(f, "%s{\"series\":\"%s\",\"step\":%" PRId64 ",\"before_ns\":%.1f,\"after_ns\":%.1f,"
                   "\"classes\":[",
                i ? "," : "", c->series, c->step, c->before_ns, c->after_ns);
        for (int j = 0; j < c->ncls; j++) {
            fputs(j ? ",{\"class\":" : "{\"class\":", f);
            tkp_json_str(f, tkp_classes_name(m->opts.classes, c->cls[j]));
            fprintf(f, ",\"before_ns\":%.1f,\"after_ns\":%.1f}", c->cls_before[j], c->cls_after[j]);
        }
        fputs("]}", f);
    }
    fputs("],\"host_only_shifts\":[", f);
    for (int i = 0; i < an->nhost_only; i++) {
        const struct tkp_acp *c = &an->host_only[i];
        fprintf(f, "%s{\"step\":%" PRId64 ",\"before_ns\":%.1f,\"after_ns\":%.1f}", i ? "," : "",
                c->step, c->before_ns, c->after_ns);
    }
    fputs("],\"slopes\":{", f);
    json_slope(f, "attention_per_1k_kv_tokens", &an->attn, "ns_per_1k");
    putc(',', f);
    json_slope(f, "gemm_per_token", &an->mlp, "ns_per_token");
    fprintf(f, ",\"prompt_tokens\":%" PRIu64 "}", an->prompt_tokens);
    fprintf(f, ",\"idle\":{\"span_ns\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"launch_gap_ns\":%" PRIu64
               ",\"host_wait_ns\":%" PRIu64 ",\"idle_share\":%.6f,\"launch_gap_share\":%.6f}",
            an->span_ns, an->busy_ns, an->launch_gap_ns, an->wait_ns, an->idle_share, an->gap_share);
}
