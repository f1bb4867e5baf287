/* tokprof check: verdicts that are not a pass. A violation gets its observed value, bound and
 * margin, and is kept when it is among the first N or the worst N of its assertion, with a
 * witness: the records that certify it (docs/SPEC.md "Reports"). A `once` that failed lists its
 * near misses: the points where its condition came closest to holding (most conjuncts held,
 * then the smallest miss of a numeric bound), and the condition's hits outside the window. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check/monitor_int.h"
#include "check/eval.h"
#include "check/witness.h"

#define GAPS_TOP 3

static double margin_of(int op, double o, double b)
{
    switch (op) {
    case OP_LT: case OP_LE: return b - o;
    case OP_GT: case OP_GE: return o - b;
    case OP_EQ: return -fabs(o - b);
    default: return 0;
    }
}

/* The operands of comparison node c as numbers; 0 when one is not. Re-reading them must not
 * advance temporal state. */
static int operands(struct tkp_eval *E, int c, double *o, double *b)
{
    int save = E->update;
    E->update = 0;
    struct tkp_val x = tkp_eval(E, E->sp->n[c].a), y = tkp_eval(E, E->sp->n[c].b);
    E->update = save;
    if (x.t != VT_NUM || y.t != VT_NUM) return 0;
    *o = x.n, *b = y.n;
    return 1;
}

static void fill_margin(struct tkp_eval *E, int as, struct tkp_viol *v)
{
    const struct tkp_spec *sp = E->sp;
    int c = tkp_bound_cmp(sp, sp->as[as].body);
    if (c < 0 || !operands(E, c, &v->observed, &v->bound)) return;
    v->has_val = 1;
    v->margin = margin_of(sp->n[c].op, v->observed, v->bound);
}

static struct tkp_witem *add_w(struct tkp_viol *v, const char *role, const struct tkp_srec *r)
{
    if (v->nw >= TKP_WIT_MAX) return NULL;
    struct tkp_witem *w = &v->w[v->nw++];
    memset(w, 0, sizeof(*w));
    snprintf(w->role, sizeof(w->role), "%s", role);
    if (r) w->r = *r;
    return w;
}

static int agg_of(const struct tkp_spec *sp, int n)
{
    /* the step aggregate the bound's left side is (count(...) == 32 -> that count) */
    int c = tkp_bound_cmp(sp, n);
    if (c < 0) return -1;
    int l = sp->n[c].a;
    return sp->n[l].op == OP_AGG && sp->n[l].src == SRC_STEP ? l : -1;
}

static int attr_of(const struct tkp_spec *sp, int n)
{
    int c = tkp_bound_cmp(sp, n);
    if (c < 0) return -1;
    int l = sp->n[c].a;
    while (sp->n[l].op == OP_SUB || sp->n[l].op == OP_ADD || sp->n[l].op == OP_MUL ||
           sp->n[l].op == OP_DIV)
        l = sp->n[l].a;
    return sp->n[l].op == OP_ATTR ? sp->n[l].attr : -1;
}

/* A count bound: the records its aggregate took. */
static void witness_agg(struct tkp_mon *m, struct tkp_eval *E, int as, int ag, struct tkp_viol *v,
                        const struct wctx *W)
{
    const struct tkp_spec *sp = m->sp;
    const struct tkp_node *x = &sp->n[ag];
    const struct tkp_slotplan *p = &sp->code->plan[x->slot];
    int c = tkp_bound_cmp(sp, sp->as[as].body);
    int save = E->update;
    E->update = 0;
    struct tkp_val lim = tkp_eval(E, sp->n[c].b);
    /* too many: bound+1 records certify it; too few: all of them, absence has no smaller
     * certificate */
    uint64_t want = lim.t == VT_NUM && v->observed > lim.n ? (uint64_t)lim.n + 1 : UINT64_MAX;
    if (p->stream) {
        const struct tkp_fold *f = W->fold ? &W->fold[x->slot] : NULL;
        for (uint32_t i = 0; f && i < f->nkeep && i < want; i++) add_w(v, "match", &f->keep[i]);
        v->matched = f ? f->matched : 0;
    } else {
        const struct vec *dom = x->gpu ? W->gpu : W->host;
        for (uint32_t i = 0; dom && i < dom->n; i++) {
            E->r = &dom->v[i];
            if (!tkp_conj_holds(E, &p->sel)) continue;
            v->matched++;
            if (v->matched <= want) add_w(v, "match", &dom->v[i]);
        }
        E->r = NULL;
    }
    E->update = save;
    if (v->matched > TKP_WIT_MAX)
        snprintf(v->note, sizeof(v->note), "%llu records matched; the first %d are listed",
                 (unsigned long long)v->matched, v->nw);
}

static void witness_step(struct tkp_mon *m, struct tkp_eval *E, int as, struct tkp_viol *v,
                         const struct wctx *W)
{
    const struct tkp_spec *sp = m->sp;
    int ag = agg_of(sp, sp->as[as].body);
    if (ag >= 0) {
        witness_agg(m, E, as, ag, v, W);
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
            int bi = -1;
            for (uint32_t i = 0; i < W->gpu->n; i++) {
                const struct tkp_srec *r = &W->gpu->v[i];
                if (i && r->gpu_start > end) {
                    uint64_t g = r->gpu_start - end;
                    int dup = 0;
                    for (int q = 0; q < v->nw; q++)
                        if (!strcmp(v->w[q].role, "gap") && v->w[q].r.id == r->id) dup = 1;
                    if (!dup && g > best) best = g, bi = (int)i;
                }
                if (r->gpu_end > end) end = r->gpu_end;
            }
            if (bi < 0) break;
            struct tkp_witem *w = add_w(v, "gap", &W->gpu->v[bi]);
            if (!w) break;
            w->gap_ns = best;
            w->gap_start = W->gpu->v[bi].gpu_start - best;
            if (bi > 0) {
                w->before = W->gpu->v[bi - 1];
                w->before_id_valid = 1;
            }
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

/* ---- near misses of a `once` ---- */

/* a is nearer to holding than b: more conjuncts held, then a numeric miss, then a smaller one */
static int nearer(const struct tkp_near *a, const struct tkp_near *b)
{
    if (a->sat != b->sat) return a->sat > b->sat;
    if (a->has_margin != b->has_margin) return a->has_margin;
    return a->has_margin && a->margin > b->margin;
}

static void near_point(struct tkp_eval *E, struct tkp_near *n, int64_t now)
{
    n->point = now;
    if (E->r) n->r = *E->r;
    else if (E->s) n->s = *E->s;
}

void tkp_near_note(struct tkp_eval *E, const struct tkp_nearplan *np, struct tkp_tstate *t,
                   int v, int64_t now)
{
    const struct tkp_node *x = &E->sp->n[np->node];
    if (!t->near && !(t->near = calloc(TKP_NEAR_TOP + 1, sizeof(*t->near)))) return;
    if (v == 1) {
        /* the hit a window miss is measured from: [a,*] the earliest, else the latest */
        if (np->timing && (isfinite(x->hi) || !t->has_hit)) {
            struct tkp_near *h = &t->near[TKP_NEAR_TOP];
            h->sat = h->nconj = np->nconj;
            h->fail = -1;
            near_point(E, h, now);
            t->has_hit = 1;
        }
        return;
    }
    /* an unbounded `once` that held in its scope cannot fail there again */
    if (!np->nconj || (!x->has_iv && t->valid)) return;
    struct tkp_near c = {.nconj = np->nconj, .fail = -1};
    int nfail = 0, save = E->update;
    E->update = 0;
    for (int k = 0; k < np->nconj; k++) {
        if (tkp_eval_bool(E, np->conj[k]) == 1) {
            c.sat++;
        } else if (!nfail++) {
            c.fail = np->conj[k];
        }
    }
    E->update = save;
    if (!c.sat && np->nconj > 1) return; /* nothing of it held */
    int op = E->sp->n[c.fail].op;
    if (nfail == 1 && op >= OP_EQ && op <= OP_GE && operands(E, c.fail, &c.observed, &c.bound)) {
        c.has_margin = 1;
        c.margin = margin_of(op, c.observed, c.bound);
    }
    if (np->nconj == 1 && !c.has_margin) return;
    int at = t->nnear;
    while (at > 0 && nearer(&c, &t->near[at - 1])) at--;
    if (at >= TKP_NEAR_TOP) return;
    int last = t->nnear < TKP_NEAR_TOP ? t->nnear : TKP_NEAR_TOP - 1;
    memmove(&t->near[at + 1], &t->near[at], (size_t)(last - at) * sizeof(c));
    t->near[at] = c;
    near_point(E, &t->near[at], now);
    if (t->nnear < TKP_NEAR_TOP) t->nnear++;
}

static void near_item(struct tkp_viol *v, const struct tkp_node *x, const struct tkp_near *n,
                      int64_t now, int is_step)
{
    struct tkp_witem *w = add_w(v, "near_miss", is_step ? NULL : &n->r);
    if (!w) return;
    if (is_step) {
        w->is_step = 1;
        w->r.step = n->s.idx, w->r.token = n->s.token, w->r.thread = n->s.thread;
        w->r.host_ns = n->s.start;
    }
    w->fail = n->fail, w->sat = n->sat, w->nconj = n->nconj;
    w->has_margin = n->has_margin;
    w->observed = n->observed, w->bound = n->bound, w->margin = n->margin;
    w->distance = now - n->point;
    w->unit = x->unit;
    if (n->fail < 0 && x->has_iv) {
        /* outside the window: how far, in the window's unit */
        double d = (double)w->distance;
        w->has_margin = 1;
        w->observed = d;
        w->bound = d < x->num ? x->num : x->hi;
        w->margin = d < x->num ? d - x->num : x->hi - d;
    }
}

/* The near misses of the `once`s of a violated formula (n: a subtree of the body). */
static void near_witness(struct tkp_mon *m, struct tkp_eval *E, int n, struct tkp_viol *v,
                         const struct tkp_tstate *ts)
{
    const struct tkp_spec *sp = m->sp;
    if (n < 0 || !ts) return;
    const struct tkp_node *x = &sp->n[n];
    if (x->op == OP_ONCE && sp->code->near[x->slot].on) {
        const struct tkp_tstate *t = &ts[x->slot];
        int64_t now = x->unit == U_NS ? E->now_ns : E->point;
        int is_step = E->r == NULL;
        int from = v->nw;
        if (t->near && t->has_hit) {
            /* the condition held, outside the window */
            const struct tkp_near *h = &t->near[TKP_NEAR_TOP];
            double d = (double)(now - h->point);
            if (!(d >= x->num && d <= x->hi)) near_item(v, x, h, now, is_step);
        }
        for (int k = 0; t->near && k < t->nnear; k++) near_item(v, x, &t->near[k], now, is_step);
        for (int k = from; k < v->nw; k++) v->w[k].node = n;
    }
    near_witness(m, E, x->a, v, ts);
    if (x->op != OP_MATCH) near_witness(m, E, x->b, v, ts);
}

/* ---- keeping violations ---- */

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

/* ---- inconclusive: which value was unknown ---- */

/* The first value of formula n unknown at E's point (an attribute or an aggregate), -1 none. */
static int unknown_leaf(struct tkp_eval *E, int n, int depth)
{
    const struct tkp_spec *sp = E->sp;
    if (n < 0 || depth > 200) return -1;
    const struct tkp_node *x = &sp->n[n];
    struct tkp_val v;
    switch (x->op) {
    case OP_ATTR:
        v = tkp_attr_value(E, x->attr, x->var_is_r);
        return v.t == VT_UNK ? n : -1;
    case OP_AGG:
        v = x->src == SRC_STEP ? (E->aggs ? E->aggs[x->slot] : (struct tkp_val){0})
                               : (E->runs ? E->runs[x->slot] : (struct tkp_val){0});
        return v.t == VT_UNK ? n : -1;
    case OP_CLASS: return -1; /* a class on an unknown field is false, never unknown */
    default: {
        int l = unknown_leaf(E, x->a, depth + 1);
        return l >= 0 || x->op == OP_MATCH ? l : unknown_leaf(E, x->b, depth + 1);
    }
    }
}

static const char *const agg_word[] = {"count", "sum", "min", "max", "mean", "exists", "first",
                                       "last", "pNN"};

/* The first inconclusive evaluation of assertion as: why, in R->why and R->unknown_note. */
static void note_unknown(struct tkp_mon *m, struct tkp_eval *E, int as, int thread)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_ares *R = &m->res[as];
    int n = unknown_leaf(E, sp->as[as].body, 0);
    if (n < 0) {
        R->why = TKP_WHY_VALUE;
        snprintf(R->unknown_note, sizeof(R->unknown_note), "%s", tkp_why_str(R->why));
        return;
    }
    const struct tkp_node *x = &sp->n[n];
    int lib = x->op == OP_ATTR && x->attr >= A_R_LIB && x->attr <= A_R_BATCH;
    R->why = x->gpu ? (tkp_gpu_off(m, thread) ? TKP_WHY_GPU_OFF : TKP_WHY_GPU_MISS)
             : lib ? TKP_WHY_LIB : TKP_WHY_VALUE;
    if (x->op == OP_ATTR)
        snprintf(R->unknown_note, sizeof(R->unknown_note), "%s unknown: %s",
                 tkp_attr_name(x->attr), tkp_why_str(R->why));
    else
        snprintf(R->unknown_note, sizeof(R->unknown_note), "%s(...) at %u:%u unknown: %s",
                 agg_word[x->agg], x->line, x->col, tkp_why_str(R->why));
}

void tkp_setup_mark(struct tkp_mon *m, uint32_t t, uint64_t seg)
{
    for (int as = 0; as < m->sp->nas; as++) {
        struct tkp_ares *R = &m->res[as];
        if (m->sp->as[as].level != LV_RECORD) continue;
        for (int k = 0; k < R->nfirst; k++)
            if (R->first[k].thread == t && R->first[k].step == seg) R->first[k].setup = 1;
        for (int k = 0; k < R->nworst; k++)
            if (R->worst[k].thread == t && R->worst[k].step == seg) R->worst[k].setup = 1;
    }
}

/* A `prev` of formula n read the point before the first one (of the thread, or of the step
 * for `in step`): there is none. */
static int prev_first(const struct tkp_eval *E, int n, int depth)
{
    if (n < 0 || depth > 200 || !E->ts) return 0;
    const struct tkp_node *x = &E->sp->n[n];
    if (!x->temporal) return 0;
    if (x->op == OP_PREV && E->ts[x->slot].prev_first) return 1;
    return prev_first(E, x->a, depth + 1) || prev_first(E, x->b, depth + 1);
}

void tkp_judge(struct tkp_mon *m, struct tkp_eval *E, int as, int t, const struct tkp_sstep *s,
               const struct tkp_srec *r, const struct wctx *W)
{
    struct tkp_ares *R = &m->res[as];
    if (t < 0 && prev_first(E, m->sp->as[as].body, 0)) {
        /* `s.start - prev(s.end)` at the first step: no gap to judge, not an unknown gap */
        R->evaluated--;
        return;
    }
    if (t < 0) {
        if (!R->inconclusive++)
            note_unknown(m, E, as, s ? (int)s->thread : r ? (int)r->thread : -1);
        return;
    }
    R->violations++;
    struct tkp_viol h; /* the header: a violation is 30 KB with its witness, built in place */
    memset(&h, 0, offsetof(struct tkp_viol, w));
    fill_margin(E, as, &h);
    if (h.has_val && (!R->has_worst || h.margin < R->worst_margin)) {
        R->has_worst = 1;
        R->worst_margin = h.margin;
        R->worst_obs = h.observed;
        R->worst_bound = h.bound;
    }
    struct tkp_viol *v = slot_for(m, as, h.margin, h.has_val);
    if (!v) return;
    memcpy(v, &h, offsetof(struct tkp_viol, w));
    v->as = as;
    if (s) {
        v->thread = s->thread, v->tid = s->tid, v->step = s->idx, v->token = s->token;
        v->host_start = s->start, v->host_end = s->end;
        v->has_gpu = s->has_gpu, v->gpu_start = s->gpu_start, v->gpu_end = s->gpu_end;
    }
    if (r) {
        v->thread = r->thread, v->step = r->step, v->token = r->token, v->rec_id = r->id;
        v->host_start = v->host_end = r->host_ns;
        v->has_gpu = r->gpu_end != 0, v->gpu_start = r->gpu_start, v->gpu_end = r->gpu_end;
        v->tid = m->t[r->thread].tid;
        v->setup = tkp_is_setup(&m->t[r->thread], r->step);
        add_w(v, "this", r);
    }
    if (W) witness_step(m, E, as, v, W);
    near_witness(m, E, m->sp->as[as].body, v, E->ts);
}

void tkp_run_witness(struct tkp_mon *m, int as)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_ares *R = &m->res[as];
    if (!R->nfirst) return;
    struct tkp_viol *v = &R->first[R->nfirst - 1];
    for (int s = 0; s < sp->nslots_run; s++) {
        if (m->run_owner[s] != as) continue;
        for (int k = 0; k < m->run_ntop[s] && v->nw < TKP_WIT_MAX; k++)
            v->w[v->nw++] = m->run_top[s][k];
        const struct tkp_node *x = &sp->n[m->run_node[s]];
        if (x->agg == AG_PCT)
            snprintf(v->note, sizeof(v->note), "%llu steps; p%g over them; the largest values are "
                     "listed", (unsigned long long)m->run_nvals[s], x->num);
    }
}
