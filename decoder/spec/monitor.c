/* tokprof check: one streaming pass over the reader's records.
 *
 * Steps close in two phases. The host phase is the STEP record (the shim writes it after the
 * step's records): the step's host records are in the thread's open-step buffer, per-step
 * aggregates fold over them and host assertions get their verdict. GPU records come later, in
 * CUPTI's batches, so assertions that read GPU time wait for the GPU phase: a step is done on
 * the GPU when a GPU record of a step at least two later on the same thread arrives (one step
 * of reordering slack) or at the end. Between the phases a step is a constant-size summary
 * (struct pend) plus the GPU records that have arrived for it. */
#include "monitor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sort.h"

#define OPEN_MAX 4        /* open steps per thread before the oldest is closed without STEP */
#define PEND_MAX 65536    /* steps awaiting GPU records per thread; beyond, the oldest closes */
#define GAPS_TOP 3

struct vec {
    struct tkp_srec *v;
    uint32_t n, cap;
};

static int vpush(struct vec *v, const struct tkp_srec *r)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 256;
        struct tkp_srec *p = realloc(v->v, cap * sizeof(*p));
        if (!p) return TKP_ERR_NOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *r;
    return 0;
}

struct open {
    int used;
    uint64_t seg;
    struct vec host, gpu;
    uint64_t tok_max, tok_last; /* GEMM token dimension: phase of the step */
};

struct pend {
    struct tkp_sstep s;
    struct tkp_val *aggs;
    struct vec gpu;
    struct tkp_srec first, last;
};

struct thr {
    struct open open[OPEN_MAX];
    struct tkp_tstate *ts;
    uint64_t tokens, outside, recs, last_closed;
    int had_decode, seen;
    uint32_t tid;
    uint32_t call; /* the thread's latest LIB_CALL */
    struct tkp_srec lib;
    struct pend *pend;
    uint32_t npend, pend_head, pend_cap;
    uint64_t gpu_hi; /* highest step a GPU record named */
};

/* One step aggregate being folded over a step's records. */
struct fold {
    double acc, cnt;
    struct tkp_val first, last;
    int unknown;
    uint64_t np, cap; /* pNN: the values, in pv */
    double *pv;
};

struct tkp_mon {
    const struct tkp_spec *sp;
    struct thr *t;
    uint32_t nt;
    struct tkp_ares *res;
    int *agg_node, *run_node, *run_owner;
    struct tkp_val *aggs;          /* scratch: the step aggregates */
    struct tkp_val *runs;          /* run aggregates (finalised at the end) */
    double *run_acc;               /* per run slot: sum, count, min, max (4 each) */
    double **run_vals;             /* pNN: every value (8 B per step) */
    uint64_t *run_nvals, *run_capvals;
    struct tkp_witem **run_top;    /* the top-k steps per run slot */
    int *run_ntop;
    const struct tkp_val *base;
    const double *figures;
    uint64_t *memo;
    uint64_t memo_len;
    int need_gpu;
    struct fold *fold; /* per step aggregate slot: fold_step_aggs's accumulators */
    int *fold_act;
    struct tkp_mon_stats st;
    uint64_t next_id;
};

static struct thr *thread(struct tkp_mon *m, uint32_t t)
{
    if (t >= TKP_THREADS_MAX) return NULL;
    if (t >= m->nt) {
        uint32_t n = m->nt ? m->nt : 4;
        while (n <= t) n *= 2;
        struct thr *p = realloc(m->t, n * sizeof(*p));
        if (!p) return NULL;
        memset(p + m->nt, 0, (n - m->nt) * sizeof(*p));
        m->t = p;
        m->nt = n;
    }
    struct thr *h = &m->t[t];
    if (!h->seen) {
        h->seen = 1;
        m->st.threads++;
        h->ts = calloc((size_t)m->sp->nslots_temporal + 1, sizeof(*h->ts));
        if (!h->ts) return NULL;
    }
    return h;
}

static void walk_owner(struct tkp_mon *m, int n, int as)
{
    if (n < 0) return;
    const struct tkp_node *x = &m->sp->n[n];
    if (x->op == OP_AGG && x->src == SRC_STEP) m->agg_node[x->slot] = n;
    if (x->op == OP_AGG && x->src == SRC_RUN) m->run_node[x->slot] = n, m->run_owner[x->slot] = as;
    walk_owner(m, x->a, as);
    walk_owner(m, x->b, as);
    walk_owner(m, x->c, as);
}

int tkp_mon_new(const struct tkp_spec *sp, struct tkp_mon **out)
{
    struct tkp_mon *m = calloc(1, sizeof(*m));
    *out = m;
    if (!m) return TKP_ERR_NOMEM;
    m->sp = sp;
    int na = sp->nslots_agg + 1, nr = sp->nslots_run + 1;
    m->res = calloc((size_t)sp->nas, sizeof(*m->res));
    m->agg_node = calloc((size_t)na, sizeof(int));
    m->run_node = calloc((size_t)nr, sizeof(int));
    m->run_owner = calloc((size_t)nr, sizeof(int));
    m->aggs = calloc((size_t)na, sizeof(*m->aggs));
    m->fold = calloc((size_t)na, sizeof(*m->fold));
    m->fold_act = calloc((size_t)na, sizeof(int));
    m->runs = calloc((size_t)nr, sizeof(*m->runs));
    m->run_acc = calloc((size_t)nr * 4, sizeof(double));
    m->run_vals = calloc((size_t)nr, sizeof(double *));
    m->run_nvals = calloc((size_t)nr, sizeof(uint64_t));
    m->run_capvals = calloc((size_t)nr, sizeof(uint64_t));
    m->run_top = calloc((size_t)nr, sizeof(*m->run_top));
    m->run_ntop = calloc((size_t)nr, sizeof(int));
    if (!m->res || !m->agg_node || !m->run_node || !m->run_owner || !m->aggs || !m->runs ||
        !m->fold || !m->fold_act ||
        !m->run_acc || !m->run_vals || !m->run_nvals || !m->run_capvals || !m->run_top ||
        !m->run_ntop)
        return TKP_ERR_NOMEM;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        walk_owner(m, a->body, i);
        walk_owner(m, a->when, i);
        if (a->gpu && a->level != LV_RECORD) m->need_gpu = 1;
        m->res[i].first = calloc((size_t)a->witness + 1, sizeof(struct tkp_viol));
        m->res[i].worst = calloc((size_t)a->witness + 1, sizeof(struct tkp_viol));
        if (!m->res[i].first || !m->res[i].worst) return TKP_ERR_NOMEM;
        m->st.state_bytes += a->state_bytes;
    }
    for (int s = 0; s < sp->nslots_run; s++) {
        m->run_acc[4 * s + 2] = INFINITY;
        m->run_acc[4 * s + 3] = -INFINITY;
        int k = sp->as[m->run_owner[s]].witness;
        m->run_top[s] = calloc((size_t)k + 1, sizeof(struct tkp_witem));
        if (!m->run_top[s]) return TKP_ERR_NOMEM;
    }
    for (int s = 0; s < sp->nslots_agg; s++)
        if (sp->n[m->agg_node[s]].gpu) m->need_gpu = 1;
    for (int s = 0; s < sp->nslots_run; s++)
        if (sp->n[m->run_node[s]].gpu) m->need_gpu = 1;
    return 0;
}

void tkp_mon_set_baseline(struct tkp_mon *m, const struct tkp_val *runs, const double *figures)
{
    m->base = runs;
    m->figures = figures;
}

/* ---- verdicts and witnesses ---- */

/* The comparison that bounds the formula (through guards), for observed/bound/margin. */
static int bound_cmp(const struct tkp_spec *sp, int n)
{
    while (n >= 0 && sp->n[n].op == OP_IMPLIES)
        n = sp->n[n].b;
    if (n < 0) return -1;
    int op = sp->n[n].op;
    return op >= OP_EQ && op <= OP_GE ? n : -1;
}

static void fill_margin(struct tkp_eval *E, int as, struct tkp_viol *v)
{
    const struct tkp_spec *sp = E->sp;
    int c = bound_cmp(sp, sp->as[as].body);
    if (c < 0) return;
    int save = E->update;
    E->update = 0; /* re-reading the operands must not advance temporal state */
    struct tkp_val o = tkp_eval(E, sp->n[c].a), b = tkp_eval(E, sp->n[c].b);
    E->update = save;
    if (o.t != VT_NUM || b.t != VT_NUM) return;
    v->has_val = 1;
    v->observed = o.n;
    v->bound = b.n;
    switch (sp->n[c].op) {
    case OP_LT: case OP_LE: v->margin = b.n - o.n; break;
    case OP_GT: case OP_GE: v->margin = o.n - b.n; break;
    case OP_EQ: v->margin = -fabs(o.n - b.n); break;
    default: v->margin = 0;
    }
}

static void add_w(struct tkp_viol *v, const char *role, const struct tkp_srec *r)
{
    if (v->nw >= TKP_WIT_MAX) return;
    struct tkp_witem *w = &v->w[v->nw++];
    memset(w, 0, sizeof(*w));
    snprintf(w->role, sizeof(w->role), "%s", role);
    if (r) w->r = *r;
}

static int agg_of(const struct tkp_spec *sp, int n)
{
    /* the step aggregate the bound's left side is (count(...) == 32 -> that count) */
    int c = bound_cmp(sp, n);
    if (c < 0) return -1;
    int l = sp->n[c].a;
    return sp->n[l].op == OP_AGG && sp->n[l].src == SRC_STEP ? l : -1;
}

static int attr_of(const struct tkp_spec *sp, int n)
{
    int c = bound_cmp(sp, n);
    if (c < 0) return -1;
    int l = sp->n[c].a;
    while (sp->n[l].op == OP_SUB || sp->n[l].op == OP_ADD || sp->n[l].op == OP_MUL ||
           sp->n[l].op == OP_DIV)
        l = sp->n[l].a;
    return sp->n[l].op == OP_ATTR ? sp->n[l].attr : -1;
}

struct wctx {
    const struct vec *host, *gpu;
    const struct tkp_srec *first, *last;
};

static void witness_step(struct tkp_mon *m, struct tkp_eval *E, int as, struct tkp_viol *v,
                         const struct wctx *W)
{
    const struct tkp_spec *sp = m->sp;
    int ag = agg_of(sp, sp->as[as].body);
    if (ag >= 0) {
        const struct tkp_node *x = &sp->n[ag];
        const struct vec *dom = x->gpu ? W->gpu : W->host;
        struct tkp_val lim = {0};
        int c = bound_cmp(sp, sp->as[as].body);
        int save = E->update;
        E->update = 0;
        lim = tkp_eval(E, sp->n[c].b);
        /* too many: bound+1 records certify it; too few: all of them, absence has no smaller
         * certificate */
        uint64_t want = lim.t == VT_NUM && v->observed > lim.n ? (uint64_t)lim.n + 1 : UINT64_MAX;
        for (uint32_t i = 0; dom && i < dom->n; i++) {
            E->r = &dom->v[i];
            int hit = x->b < 0 || tkp_eval_bool(E, x->b) == 1;
            if (hit && x->a >= 0 && (x->agg == AG_COUNT || x->agg == AG_EXISTS))
                hit = tkp_eval_bool(E, x->a) == 1;
            if (!hit) continue;
            v->matched++;
            if (v->matched <= want) add_w(v, "match", &dom->v[i]);
        }
        E->r = NULL;
        E->update = save;
        if (v->matched > TKP_WIT_MAX)
            snprintf(v->note, sizeof(v->note), "%llu records matched; the first %d are listed",
                     (unsigned long long)v->matched, v->nw);
        return;
    }
    int at = attr_of(sp, sp->as[as].body);
    if (W->first) add_w(v, "first", W->first);
    if (W->last) add_w(v, "last", W->last);
    if (!W->gpu || !W->gpu->n) return;
    if (at == A_S_IDLE || at == A_S_MAXGAP || at == A_S_BUSY) {
        /* the largest holes between the step's GPU intervals, with the kernels around them */
        for (int k = 0; k < GAPS_TOP; k++) {
            uint64_t best = 0, end = 0;
            int bi = -1, bj = -1;
            for (uint32_t i = 0, j; i < W->gpu->n; i++) {
                const struct tkp_srec *r = &W->gpu->v[i];
                if (i && r->gpu_start > end) {
                    uint64_t g = r->gpu_start - end;
                    int dup = 0;
                    for (int q = 0; q < v->nw; q++)
                        if (!strcmp(v->w[q].role, "gap") && v->w[q].r.id == r->id) dup = 1;
                    if (!dup && g > best) best = g, bi = (int)i, bj = -1;
                }
                (void)j;
                if (r->gpu_end > end) end = r->gpu_end, bj = (int)i;
            }
            if (bi < 0) break;
            add_w(v, "gap", &W->gpu->v[bi]);
            struct tkp_witem *w = &v->w[v->nw - 1];
            w->gap_ns = best;
            w->gap_start = W->gpu->v[bi].gpu_start - best;
            if (bi > 0) {
                w->before = W->gpu->v[bi - 1];
                w->before_id_valid = 1;
            }
            (void)bj;
        }
        return;
    }
    /* latency: the longest kernels of the step */
    for (int k = 0; k < 3; k++) {
        int bi = -1;
        uint64_t bd = 0;
        for (uint32_t i = 0; i < W->gpu->n; i++) {
            const struct tkp_srec *r = &W->gpu->v[i];
            int dup = 0;
            for (int q = 0; q < v->nw; q++)
                if (!strcmp(v->w[q].role, "longest") && v->w[q].r.id == r->id) dup = 1;
            if (!dup && r->gpu_end - r->gpu_start > bd) bd = r->gpu_end - r->gpu_start, bi = (int)i;
        }
        if (bi >= 0) add_w(v, "longest", &W->gpu->v[bi]);
    }
}

/* Keeps the first violations and the worst ones (by margin), witness-count of each. */
static struct tkp_viol *slot_for(struct tkp_mon *m, int as, double margin, int has)
{
    struct tkp_ares *R = &m->res[as];
    int k = m->sp->as[as].witness;
    if (R->nfirst < k) return &R->first[R->nfirst++];
    if (!has || k == 0) return NULL;
    if (R->nworst < k) return &R->worst[R->nworst++];
    int wi = 0;
    for (int i = 1; i < R->nworst; i++)
        if (R->worst[i].margin > R->worst[wi].margin) wi = i;
    return margin < R->worst[wi].margin ? &R->worst[wi] : NULL;
}

static void verdict(struct tkp_mon *m, struct tkp_eval *E, int as, int t,
                    const struct tkp_sstep *s, const struct tkp_srec *r, const struct wctx *W)
{
    struct tkp_ares *R = &m->res[as];
    R->evaluated++;
    if (t == 1) return;
    if (t < 0) {
        R->inconclusive++;
        return;
    }
    R->violations++;
    struct tkp_viol v;
    memset(&v, 0, sizeof(v));
    v.as = as;
    fill_margin(E, as, &v);
    if (v.has_val && (!R->has_worst || v.margin < R->worst_margin)) {
        R->has_worst = 1;
        R->worst_margin = v.margin;
        R->worst_obs = v.observed;
        R->worst_bound = v.bound;
    }
    struct tkp_viol *dst = slot_for(m, as, v.margin, v.has_val);
    if (!dst) return;
    if (s) {
        v.thread = s->thread, v.tid = s->tid, v.step = s->idx, v.token = s->token;
        v.host_start = s->start, v.host_end = s->end;
        v.has_gpu = s->has_gpu, v.gpu_start = s->gpu_start, v.gpu_end = s->gpu_end;
    }
    if (r) {
        v.thread = r->thread, v.step = r->step, v.token = r->token, v.rec_id = r->id;
        v.host_start = v.host_end = r->host_ns;
        v.has_gpu = r->gpu_end != 0, v.gpu_start = r->gpu_start, v.gpu_end = r->gpu_end;
        v.tid = m->t[r->thread].tid;
        add_w(&v, "this", r);
    }
    if (W) witness_step(m, E, as, &v, W);
    *dst = v;
}

/* ---- per-step folding ---- */

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct_of(double *v, uint64_t n, double p)
{
    tkp_sort(v, n, sizeof(double), cmpd);
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
    return v[rank ? rank - 1 : 0];
}

/* Folds the step aggregates of one phase (host or GPU) over the step's records in one pass,
 * records outer and aggregates inner, so that a class several aggregates test is evaluated
 * once per record (the evaluator caches class results per record). */
static int fold_step_aggs(struct tkp_mon *m, struct tkp_eval *E, const struct vec *recs, int gpu)
{
    const struct tkp_spec *sp = m->sp;
    int nact = 0;
    for (int s = 0; s < sp->nslots_agg; s++) {
        const struct tkp_node *x = &sp->n[m->agg_node[s]];
        if (x->gpu != gpu) continue;
        struct fold *f = &m->fold[s];
        f->acc = x->agg == AG_MIN ? INFINITY : x->agg == AG_MAX ? -INFINITY : 0;
        f->cnt = 0;
        f->first = f->last = (struct tkp_val){0};
        f->unknown = 0;
        f->np = 0;
        m->fold_act[nact++] = s;
    }
    for (uint32_t i = 0; recs && nact && i < recs->n; i++) {
        E->r = &recs->v[i];
        for (int j = 0; j < nact; j++) {
            const struct tkp_node *x = &sp->n[m->agg_node[m->fold_act[j]]];
            struct fold *f = &m->fold[m->fold_act[j]];
            if (x->agg == AG_COUNT || x->agg == AG_EXISTS) {
                /* no temporal state in an aggregate: the class (cached) first, then where */
                if (x->a >= 0 && tkp_eval_bool(E, x->a) != 1) continue;
                if (x->b >= 0 && tkp_eval_bool(E, x->b) != 1) continue;
                f->cnt++;
                continue;
            }
            if (x->b >= 0 && tkp_eval_bool(E, x->b) != 1) continue;
            struct tkp_val v = tkp_eval(E, x->a);
            if (v.t == VT_UNK) {
                f->unknown = 1;
                continue;
            }
            if (!f->cnt) f->first = v;
            f->last = v;
            f->cnt++;
            switch (x->agg) {
            case AG_SUM: case AG_MEAN: f->acc += v.n; break;
            case AG_MIN: f->acc = fmin(f->acc, v.n); break;
            case AG_MAX: f->acc = fmax(f->acc, v.n); break;
            case AG_PCT:
                if (f->np == f->cap) {
                    uint64_t cap = f->cap ? 2 * f->cap : 1024;
                    double *p = realloc(f->pv, cap * sizeof(double));
                    if (!p) return TKP_ERR_NOMEM;
                    f->pv = p;
                    f->cap = cap;
                }
                f->pv[f->np++] = v.n;
                break;
            }
        }
    }
    E->r = NULL;
    for (int j = 0; j < nact; j++) {
        int s = m->fold_act[j];
        const struct tkp_node *x = &sp->n[m->agg_node[s]];
        struct fold *f = &m->fold[s];
        struct tkp_val out = {VT_NUM, 0, NULL};
        switch (x->agg) {
        case AG_COUNT: out.n = f->cnt; break;
        case AG_EXISTS: out.t = VT_BOOL, out.n = f->cnt > 0; break;
        case AG_SUM: out.n = f->acc; break;
        case AG_MEAN: case AG_MIN: case AG_MAX:
            if (!f->cnt) out.t = VT_UNK;
            else out.n = x->agg == AG_MEAN ? f->acc / f->cnt : f->acc;
            break;
        case AG_FIRST: out = f->cnt ? f->first : (struct tkp_val){0}; break;
        case AG_LAST: out = f->cnt ? f->last : (struct tkp_val){0}; break;
        case AG_PCT:
            if (!f->np) out.t = VT_UNK;
            else out.n = pct_of(f->pv, f->np, x->num);
            break;
        }
        /* a fold that skipped unknown values (GPU time missing) is not a fact */
        if (f->unknown && x->agg != AG_COUNT) out.t = VT_UNK;
        m->aggs[s] = out;
    }
    return 0;
}

static int fold_runs(struct tkp_mon *m, struct tkp_eval *E, int phase_gpu)
{
    const struct tkp_spec *sp = m->sp;
    for (int s = 0; s < sp->nslots_run; s++) {
        int as = m->run_owner[s];
        const struct tkp_assert *a = &sp->as[as];
        if (a->gpu != phase_gpu) continue;
        if (E->s->token < a->skip) continue;
        if (a->when >= 0 && tkp_eval_bool(E, a->when) != 1) continue;
        const struct tkp_node *x = &sp->n[m->run_node[s]];
        if (x->b >= 0 && tkp_eval_bool(E, x->b) != 1) continue;
        double *acc = &m->run_acc[4 * s];
        if (x->agg == AG_COUNT || x->agg == AG_EXISTS) {
            if (x->a < 0 || tkp_eval_bool(E, x->a) == 1) acc[1]++;
            continue;
        }
        struct tkp_val v = tkp_eval(E, x->a);
        if (v.t != VT_NUM && v.t != VT_BOOL) continue;
        acc[0] += v.n, acc[1]++;
        acc[2] = fmin(acc[2], v.n), acc[3] = fmax(acc[3], v.n);
        if (x->agg == AG_PCT) {
            if (m->run_nvals[s] == m->run_capvals[s]) {
                uint64_t cap = m->run_capvals[s] ? 2 * m->run_capvals[s] : 1024;
                double *p = realloc(m->run_vals[s], cap * sizeof(double));
                if (!p) return TKP_ERR_NOMEM;
                m->run_vals[s] = p;
                m->run_capvals[s] = cap;
            }
            m->run_vals[s][m->run_nvals[s]++] = v.n;
        }
        /* top-k steps by value: the witnesses of a percentile or max bound */
        int k = a->witness, nt = m->run_ntop[s];
        struct tkp_witem *top = m->run_top[s];
        int at = nt < k ? nt : -1;
        if (at < 0)
            for (int i = 0; i < nt; i++)
                if (v.n > top[i].value && (at < 0 || top[i].value < top[at].value)) at = i;
        if (at >= 0) {
            memset(&top[at], 0, sizeof(top[at]));
            snprintf(top[at].role, sizeof(top[at].role), "step_top");
            top[at].value = v.n;
            top[at].r.step = E->s->idx;
            top[at].r.token = E->s->token;
            top[at].r.thread = E->s->thread;
            top[at].r.host_ns = E->s->start;
            if (nt < k) m->run_ntop[s]++;
        }
    }
    return 0;
}

static void eval_steps(struct tkp_mon *m, struct thr *h, const struct tkp_sstep *s, int gpu,
                       const struct wctx *W)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval E = {.sp = sp, .s = s, .aggs = m->aggs, .ts = h->ts, .point = (int64_t)s->token,
                         .now_ns = (int64_t)s->start, .scope = (int64_t)s->idx, .update = 1,
                         .re_memo = m->memo, .re_memo_len = m->memo_len, .base = m->base,
                         .figures = m->figures};
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        if (a->level != LV_STEP || a->gpu != gpu) continue;
        /* the body advances its temporal state at every step, counted or not */
        int t = tkp_eval_bool(&E, a->body);
        if (s->token < a->skip) continue;
        if (a->when >= 0 && tkp_eval_bool(&E, a->when) != 1) continue;
        verdict(m, &E, i, t, s, NULL, W);
    }
    fold_runs(m, &E, gpu);
}

static int cmp_start(const void *a, const void *b)
{
    const struct tkp_srec *x = a, *y = b;
    return x->gpu_start < y->gpu_start ? -1 : x->gpu_start > y->gpu_start;
}

/* GPU phase of one step: the union of its GPU intervals, then GPU aggregates and verdicts. */
static int gpu_close(struct tkp_mon *m, struct thr *h, struct pend *p)
{
    struct tkp_sstep *s = &p->s;
    struct vec *g = &p->gpu;
    if (g->n) {
        tkp_sort(g->v, g->n, sizeof(*g->v), cmp_start);
        uint64_t end = 0, busy = 0, gap = 0;
        s->gpu_start = g->v[0].gpu_start;
        for (uint32_t i = 0; i < g->n; i++) {
            const struct tkp_srec *r = &g->v[i];
            if (i && r->gpu_start > end) gap = r->gpu_start - end > gap ? r->gpu_start - end : gap;
            uint64_t from = i && r->gpu_start < end ? end : r->gpu_start;
            if (r->gpu_end > from) busy += r->gpu_end - from;
            if (r->gpu_end > end) end = r->gpu_end;
        }
        s->gpu_end = end, s->busy = busy, s->maxgap = gap, s->has_gpu = 1;
    }
    memcpy(m->aggs, p->aggs, (size_t)m->sp->nslots_agg * sizeof(*m->aggs));
    struct tkp_eval E = {.sp = m->sp, .s = s, .re_memo = m->memo, .re_memo_len = m->memo_len};
    int rc = fold_step_aggs(m, &E, g, 1);
    if (rc) return rc;
    struct wctx W = {NULL, g, &p->first, &p->last};
    eval_steps(m, h, s, 1, &W);
    g->n = 0;
    return 0;
}

static int pend_pop(struct tkp_mon *m, struct thr *h)
{
    struct pend *p = &h->pend[h->pend_head];
    int rc = gpu_close(m, h, p);
    h->pend_head = (h->pend_head + 1) % h->pend_cap;
    h->npend--;
    return rc;
}

static int pend_push(struct tkp_mon *m, struct thr *h, const struct tkp_sstep *s, struct open *o)
{
    if (h->npend == PEND_MAX && pend_pop(m, h)) return TKP_ERR_NOMEM;
    if (h->npend == h->pend_cap) {
        uint32_t cap = h->pend_cap ? 2 * h->pend_cap : 16;
        struct pend *q = calloc(cap, sizeof(*q));
        if (!q) return TKP_ERR_NOMEM;
        for (uint32_t i = 0; i < h->npend; i++)
            q[i] = h->pend[(h->pend_head + i) % h->pend_cap];
        for (uint32_t i = h->npend; i < h->pend_cap; i++) /* keep the idle slots' buffers */
            q[i] = h->pend[(h->pend_head + i) % h->pend_cap];
        free(h->pend);
        h->pend = q;
        h->pend_head = 0;
        h->pend_cap = cap;
    }
    struct pend *p = &h->pend[(h->pend_head + h->npend) % h->pend_cap];
    if (!p->aggs && !(p->aggs = calloc((size_t)m->sp->nslots_agg + 1, sizeof(*p->aggs))))
        return TKP_ERR_NOMEM;
    p->s = *s;
    memcpy(p->aggs, m->aggs, (size_t)m->sp->nslots_agg * sizeof(*m->aggs));
    p->gpu.n = 0;
    for (uint32_t i = 0; i < o->gpu.n; i++)
        if (vpush(&p->gpu, &o->gpu.v[i])) return TKP_ERR_NOMEM;
    memset(&p->first, 0, sizeof(p->first));
    memset(&p->last, 0, sizeof(p->last));
    if (o->host.n) p->first = o->host.v[0], p->last = o->host.v[o->host.n - 1];
    h->npend++;
    if (h->npend > m->st.pending_peak) m->st.pending_peak = h->npend;
    return 0;
}

/* Host phase: the STEP record (or a forced close) of open step o. */
static int host_close(struct tkp_mon *m, struct thr *h, struct open *o, const struct tkp_record *st)
{
    int token = !st || st->step_rec.kind == TKP_STEP_TOKEN;
    if (o->host.n > m->st.buffered_peak) m->st.buffered_peak = o->host.n;
    if (!token) {
        h->outside++;
        o->used = 0;
        o->host.n = o->gpu.n = 0;
        return 0;
    }
    struct tkp_sstep s = {.thread = (uint32_t)(h - m->t), .tid = h->tid, .idx = o->seg,
                          .token = h->tokens++, .len = o->host.n};
    if (st) {
        s.start = st->step_rec.begin_ns, s.mark = st->step_rec.mark_ns, s.end = st->step_rec.end_ns;
        s.launches = st->step_rec.launches + st->step_rec.graph_launches;
    } else if (o->host.n) {
        s.start = o->host.v[0].host_ns, s.end = s.mark = o->host.v[o->host.n - 1].host_ns;
    }
    for (uint32_t i = 0; i < o->host.n; i++) {
        o->host.v[i].token = s.token;
        if (!st && (o->host.v[i].kind == RK_KERNEL || o->host.v[i].kind == RK_GRAPH)) s.launches++;
    }
    if (o->host.n) s.first_id = o->host.v[0].id, s.last_id = o->host.v[o->host.n - 1].id;
    /* the phase from the GEMMs' token dimension (decoder/libcalls.h has the rule) */
    if (o->tok_max && o->tok_max == o->tok_last) s.phase = PH_DECODE;
    else if (o->tok_max > o->tok_last) s.phase = h->had_decode ? PH_MIXED : PH_PREFILL;
    else s.phase = h->had_decode ? PH_DECODE : PH_UNKNOWN;
    if (s.phase == PH_DECODE) h->had_decode = 1;
    m->st.steps++;
    struct tkp_eval E = {.sp = m->sp, .s = &s, .re_memo = m->memo, .re_memo_len = m->memo_len};
    int rc = fold_step_aggs(m, &E, &o->host, 0);
    if (rc) return rc;
    struct wctx W = {&o->host, NULL, o->host.n ? &o->host.v[0] : NULL,
                     o->host.n ? &o->host.v[o->host.n - 1] : NULL};
    eval_steps(m, h, &s, 0, &W);
    if (m->need_gpu && (rc = pend_push(m, h, &s, o))) return rc;
    h->last_closed = o->seg;
    o->used = 0;
    o->host.n = o->gpu.n = 0;
    return 0;
}

static struct open *open_for(struct tkp_mon *m, struct thr *h, uint64_t seg, int *rc)
{
    struct open *fr = NULL, *old = NULL;
    for (int i = 0; i < OPEN_MAX; i++) {
        struct open *o = &h->open[i];
        if (o->used && o->seg == seg) return o;
        if (!o->used && !fr) fr = o;
        if (o->used && (!old || o->seg < old->seg)) old = o;
    }
    if (!fr) {
        /* no STEP record came for the oldest: close it on what we have */
        if ((*rc = host_close(m, h, old, NULL))) return NULL;
        fr = old;
    }
    fr->used = 1;
    fr->seg = seg;
    fr->host.n = fr->gpu.n = 0;
    fr->tok_max = fr->tok_last = 0;
    return fr;
}

static int to_srec(struct tkp_mon *m, struct thr *h, const struct tkp_record *r, struct tkp_srec *x)
{
    memset(x, 0, sizeof(*x));
    x->id = m->next_id;
    x->host_ns = r->host_ns;
    x->step = r->step;
    x->thread = r->thread;
    x->name_id = x->op_id = UINT64_MAX;
    uint64_t tok = r->step > h->outside ? r->step - h->outside : 0;
    x->token = tok;
    switch (r->type) {
    case TKP_REC_LAUNCH:
        x->kind = RK_KERNEL;
        x->name = r->launch.name, x->name_id = r->launch.name_id;
        x->stream = r->launch.stream;
        x->grid = r->launch.grid[0] * r->launch.grid[1] * r->launch.grid[2];
        x->block = r->launch.block[0] * r->launch.block[1] * r->launch.block[2];
        if (r->launch.call && r->launch.call == h->call) {
            x->has_lib = 1;
            x->lib = h->lib.lib, x->op = h->lib.op, x->op_id = h->lib.op_id;
            x->m = h->lib.m, x->n = h->lib.n, x->k = h->lib.k, x->batch = h->lib.batch;
        }
        return 1;
    case TKP_REC_GRAPH_LAUNCH:
        x->kind = RK_GRAPH, x->name = "graph", x->stream = r->graph_launch.stream;
        return 1;
    case TKP_REC_COPY:
        x->kind = r->copy.kind == TKP_COPY_MEMSET ? RK_MEMSET : RK_MEMCPY;
        x->name = x->kind == RK_MEMSET ? "memset" : "memcpy";
        x->dir = r->copy.dir, x->has_dir = 1, x->bytes = r->copy.bytes, x->stream = r->copy.stream;
        x->async = (r->copy.flags & TKP_COPY_ASYNC) != 0;
        x->sync = !x->async; /* a blocking copy waits for the device */
        return 1;
    case TKP_REC_SYNC:
        x->kind = RK_SYNC, x->name = "sync", x->sync = 1, x->wait_ns = r->sync.wait_ns;
        x->stream = r->sync.handle;
        return 1;
    case TKP_REC_EVENT_RECORD:
        x->kind = RK_EVENT, x->name = "event", x->stream = r->event_record.stream;
        return 1;
    case TKP_REC_STREAM_WAIT:
        x->kind = RK_WAIT, x->name = "wait", x->stream = r->stream_wait.stream;
        return 1;
    case TKP_REC_NVTX:
        x->kind = RK_NVTX, x->name = r->nvtx.name, x->name_id = r->nvtx.name_id;
        return 1;
    case TKP_REC_MARKER:
        x->kind = RK_MARKER, x->name = "marker";
        return 1;
    case TKP_REC_LIB_CALL:
        x->kind = RK_API, x->name = r->lib_call.op, x->op = r->lib_call.op, x->has_lib = 1;
        x->op_id = r->lib_call.op_id;
        x->lib = r->lib_call.lib, x->m = r->lib_call.m, x->n = r->lib_call.n;
        x->k = r->lib_call.k, x->batch = r->lib_call.batch, x->stream = r->lib_call.stream;
        return 1;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        x->is_gpu = 1;
        x->host_ns = 0;
        x->kind = r->type == TKP_REC_GPU_KERNEL ? RK_KERNEL
                  : r->gpu.kind == TKP_COPY_MEMSET ? RK_MEMSET : RK_MEMCPY;
        x->name = r->gpu.name, x->name_id = r->type == TKP_REC_GPU_KERNEL ? r->gpu.name_id : UINT64_MAX;
        x->gpu_start = r->gpu.start_ns, x->gpu_end = r->gpu.end_ns > r->gpu.start_ns ? r->gpu.end_ns : r->gpu.start_ns + 1;
        x->stream = r->gpu.stream, x->bytes = r->gpu.bytes;
        if (r->type == TKP_REC_GPU_COPY) x->dir = r->gpu.dir, x->has_dir = 1;
        else {
            x->grid = r->gpu.grid[0] * r->gpu.grid[1] * r->gpu.grid[2];
            x->block = r->gpu.block[0] * r->gpu.block[1] * r->gpu.block[2];
        }
        return 1;
    default:
        return 0;
    }
}

static int memo_grow(struct tkp_mon *m, uint64_t id)
{
    if (id == UINT64_MAX || id < m->memo_len || !m->sp->nre) return 0;
    if (id > (1u << 24)) return 0; /* hostile ids: evaluate without the memo */
    uint64_t n = m->memo_len ? m->memo_len : 1024;
    while (n <= id) n *= 2;
    uint64_t *p = realloc(m->memo, n * sizeof(*p));
    if (!p) return TKP_ERR_NOMEM;
    memset(p + m->memo_len, 0, (n - m->memo_len) * sizeof(*p));
    m->memo = p;
    m->memo_len = n;
    return 0;
}

static void eval_records(struct tkp_mon *m, struct thr *h, const struct tkp_srec *x)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval E = {.sp = sp, .r = x, .ts = h->ts, .point = (int64_t)h->recs,
                         .now_ns = (int64_t)(x->is_gpu ? x->gpu_start : x->host_ns),
                         .scope = (int64_t)x->step, .update = 1, .re_memo = m->memo,
                         .re_memo_len = m->memo_len, .figures = m->figures};
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        if (a->level != LV_RECORD || a->gpu != x->is_gpu) continue;
        int t = tkp_eval_bool(&E, a->body);
        if (x->token < a->skip) continue;
        if (a->when >= 0 && tkp_eval_bool(&E, a->when) != 1) continue;
        verdict(m, &E, i, t, NULL, x, NULL);
    }
}

int tkp_mon_feed(struct tkp_mon *m, const struct tkp_record *r)
{
    m->next_id++;
    m->st.records++;
    int rc = 0;
    if (r->type == TKP_REC_THREAD) {
        struct thr *h = thread(m, r->thread);
        if (!h) return TKP_ERR_NOMEM;
        h->tid = r->tid;
        return 0;
    }
    if (r->type == TKP_REC_STEP) {
        struct thr *h = thread(m, r->thread);
        if (!h) return TKP_ERR_NOMEM;
        struct open *o = open_for(m, h, r->step, &rc);
        if (!o) return rc;
        return host_close(m, h, o, r);
    }
    struct tkp_srec x;
    if (r->type == TKP_REC_GPU_KERNEL || r->type == TKP_REC_GPU_COPY) {
        m->st.gpu_records++;
        if (r->thread == TKP_GPU_THREAD_NONE) return 0; /* not joined to a step */
        struct thr *h = thread(m, r->thread);
        if (!h) return TKP_ERR_NOMEM;
        to_srec(m, h, r, &x);
        if ((rc = memo_grow(m, x.name_id))) return rc;
        eval_records(m, h, &x);
        if (!m->need_gpu) return 0;
        /* steps two or more behind this one are complete on the GPU */
        while (h->npend && h->pend[h->pend_head].s.idx + 1 < r->step)
            if ((rc = pend_pop(m, h))) return rc;
        for (uint32_t i = 0; i < h->npend; i++) {
            struct pend *p = &h->pend[(h->pend_head + i) % h->pend_cap];
            if (p->s.idx == r->step) return vpush(&p->gpu, &x);
        }
        for (int i = 0; i < OPEN_MAX; i++)
            if (h->open[i].used && h->open[i].seg == r->step) return vpush(&h->open[i].gpu, &x);
        if (r->step > h->last_closed) {
            struct open *o = open_for(m, h, r->step, &rc);
            if (!o) return rc;
            return vpush(&o->gpu, &x);
        }
        return 0;
    }
    if (r->type == TKP_REC_LIB_CALL) {
        struct thr *h = thread(m, r->thread);
        if (!h) return TKP_ERR_NOMEM;
        to_srec(m, h, r, &h->lib);
        h->call = r->lib_call.call;
        /* unbatched, executed GEMMs carry the token dimension (n) */
        if (r->lib_call.batch <= 1 && !(r->lib_call.flags & TKP_LIBF_CAPTURED) && r->lib_call.n) {
            struct open *o = open_for(m, h, r->step, &rc);
            if (!o) return rc;
            if (r->lib_call.n > o->tok_max) o->tok_max = r->lib_call.n;
            o->tok_last = r->lib_call.n;
        }
    }
    if (!tkp_record_has_time(r->type) && r->type != TKP_REC_LIB_CALL) return 0;
    struct thr *h = thread(m, r->thread);
    if (!h) return TKP_ERR_NOMEM;
    if (!to_srec(m, h, r, &x)) return 0;
    if ((rc = memo_grow(m, x.name_id)) || (rc = memo_grow(m, x.op_id))) return rc;
    h->recs++;
    if (h->last_closed && r->step <= h->last_closed && h->tokens) {
        m->st.late++;
        return 0;
    }
    struct open *o = open_for(m, h, r->step, &rc);
    if (!o) return rc;
    x.pos = o->host.n;
    eval_records(m, h, &x);
    return vpush(&o->host, &x);
}

static void finalize_runs(struct tkp_mon *m)
{
    const struct tkp_spec *sp = m->sp;
    for (int s = 0; s < sp->nslots_run; s++) {
        const struct tkp_node *x = &sp->n[m->run_node[s]];
        double *acc = &m->run_acc[4 * s];
        struct tkp_val v = {VT_NUM, 0, NULL};
        switch (x->agg) {
        case AG_COUNT: v.n = acc[1]; break;
        case AG_EXISTS: v.t = VT_BOOL, v.n = acc[1] > 0; break;
        case AG_SUM: v.n = acc[0]; break;
        case AG_MEAN: v.n = acc[1] ? acc[0] / acc[1] : 0, v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_MIN: v.n = acc[2], v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_MAX: v.n = acc[3], v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_PCT:
            if (m->run_nvals[s]) v.n = pct_of(m->run_vals[s], m->run_nvals[s], x->num);
            else v.t = VT_UNK;
            break;
        default: v.t = VT_UNK;
        }
        m->runs[s] = v;
    }
}

int tkp_mon_finish(struct tkp_mon *m)
{
    int rc;
    for (uint32_t t = 0; t < m->nt; t++) {
        struct thr *h = &m->t[t];
        if (!h->seen) continue;
        /* steps whose STEP record never came (a torn capture) close on what arrived */
        for (;;) {
            struct open *o = NULL;
            for (int i = 0; i < OPEN_MAX; i++)
                if (h->open[i].used && h->open[i].host.n && (!o || h->open[i].seg < o->seg))
                    o = &h->open[i];
            if (!o) break;
            /* no STEP record: a truncated step is not judged (it would be a guess) */
            m->st.unclosed++;
            o->used = 0;
            o->host.n = o->gpu.n = 0;
        }
        while (h->npend)
            if ((rc = pend_pop(m, h))) return rc;
    }
    finalize_runs(m);
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval E = {.sp = sp, .runs = m->runs, .base = m->base, .figures = m->figures};
    for (int i = 0; i < sp->nas; i++) {
        if (sp->as[i].level != LV_RUN) continue;
        int t = tkp_eval_bool(&E, sp->as[i].body);
        verdict(m, &E, i, t, NULL, NULL, NULL);
        struct tkp_ares *R = &m->res[i];
        if (t == 0 && R->nfirst) {
            struct tkp_viol *v = &R->first[R->nfirst - 1];
            for (int s = 0; s < sp->nslots_run; s++) {
                if (m->run_owner[s] != i) continue;
                for (int k = 0; k < m->run_ntop[s] && v->nw < TKP_WIT_MAX; k++)
                    v->w[v->nw++] = m->run_top[s][k];
                const struct tkp_node *x = &sp->n[m->run_node[s]];
                if (x->agg == AG_PCT)
                    snprintf(v->note, sizeof(v->note), "%llu steps; p%g over them; the largest "
                             "values are listed", (unsigned long long)m->run_nvals[s], x->num);
            }
        }
    }
    return 0;
}

const struct tkp_ares *tkp_mon_result(const struct tkp_mon *m, int as) { return &m->res[as]; }
const struct tkp_val *tkp_mon_runs(const struct tkp_mon *m) { return m->runs; }
const struct tkp_mon_stats *tkp_mon_stats(const struct tkp_mon *m) { return &m->st; }

void tkp_mon_free(struct tkp_mon *m)
{
    if (!m) return;
    for (uint32_t t = 0; t < m->nt; t++) {
        struct thr *h = &m->t[t];
        for (int i = 0; i < OPEN_MAX; i++)
            free(h->open[i].host.v), free(h->open[i].gpu.v);
        for (int i = 0; h->ts && i < m->sp->nslots_temporal; i++)
            free(h->ts[i].ring);
        free(h->ts);
        for (uint32_t i = 0; i < h->pend_cap; i++)
            free(h->pend[i].aggs), free(h->pend[i].gpu.v);
        free(h->pend);
    }
    for (int i = 0; m->res && i < m->sp->nas; i++)
        free(m->res[i].first), free(m->res[i].worst);
    for (int s = 0; s < m->sp->nslots_run; s++) {
        if (m->run_vals) free(m->run_vals[s]);
        if (m->run_top) free(m->run_top[s]);
    }
    free(m->t), free(m->res), free(m->agg_node), free(m->run_node), free(m->run_owner);
    free(m->aggs), free(m->runs), free(m->run_acc), free(m->run_vals), free(m->run_nvals);
    free(m->run_capvals), free(m->run_top), free(m->run_ntop), free(m->memo);
    for (int s = 0; m->fold && s < m->sp->nslots_agg; s++)
        free(m->fold[s].pv);
    free(m->fold), free(m->fold_act);
    free(m);
}
