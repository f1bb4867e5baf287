/* tokprof check: one streaming pass over the reader's records.
 *
 * A host record is decoded once, into its open step, and goes only where it is needed: to the
 * record-level assertions, to the step aggregates that stream (folded as it arrives), and into
 * the open step's buffer only when a buffered aggregate's prefilter takes it. Assertions that
 * read only the step (s.dur, s.launches, aggregates) never see the records.
 *
 * Steps close in two phases. The host phase is the STEP record (the shim writes it after the
 * step's records): per-step aggregates are final and host assertions get their verdict. GPU
 * records come later, in CUPTI's batches, so assertions that read GPU time wait for the GPU
 * phase: a step is done on the GPU when a GPU record of a step at least two later on the same
 * thread arrives (one step of reordering slack) or at the end — or at once, when the capture's
 * GPU_INFO says no GPU record will come. Between the phases a step is a constant-size summary
 * (struct pend) plus the GPU records that have arrived for it. */
#include "check/monitor_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/sort.h"
#include "check/eval.h"
#include "check/agg.h"
#include "check/witness.h"

static int list_add(int **v, int *n, int x)
{
    size_t cap = (size_t)*n; /* the lists are short: grown by one each time */
    if (tkp_grow_to((void **)v, &cap, cap + 1, sizeof(int), 1, 0)) return TKP_ERR_NOMEM;
    (*v)[(*n)++] = x;
    return 0;
}

static struct thr *thread_new(struct tkp_mon *m, uint32_t t)
{
    if (t >= TKP_THREADS_MAX) return NULL;
    if (t >= m->nt) {
        uint32_t old = m->nt;
        if (TKP_GROW_ZEROED_FROM(m->t, m->nt, (size_t)t + 1, 4)) return NULL;
        /* cur caches a pointer into its thread's own open[]: it moved with the table */
        for (uint32_t i = 0; i < old; i++)
            m->t[i].cur = NULL;
    }
    struct thr *h = &m->t[t];
    if (!h->seen) {
        h->seen = 1;
        m->st.threads++;
        h->ts = calloc((size_t)m->sp->nslots_temporal + 1, sizeof(*h->ts));
        if (!h->ts) return NULL;
        for (int i = 0; m->nstream && i < TKP_MON_OPEN_MAX; i++)
            if (!(h->open[i].fold = calloc((size_t)m->sp->nslots_agg, sizeof(struct tkp_fold))))
                return NULL;
    }
    return h;
}

static inline struct thr *thread(struct tkp_mon *m, uint32_t t)
{
    return t < m->nt && m->t[t].seen ? &m->t[t] : thread_new(m, t);
}

int tkp_mon_new(const struct tkp_spec *sp, struct tkp_mon **out)
{
    struct tkp_mon *m = calloc(1, sizeof(*m));
    *out = m;
    if (!m) return TKP_ERR_NOMEM;
    m->sp = sp;
    const struct tkp_code *c = sp->code;
    int na = sp->nslots_agg + 1, nr = sp->nslots_run + 1;
    m->res = calloc((size_t)sp->nas + 1, sizeof(*m->res));
    m->run_node = calloc((size_t)nr, sizeof(int));
    m->run_owner = calloc((size_t)nr, sizeof(int));
    m->aggs = calloc((size_t)na, sizeof(*m->aggs));
    m->fold = calloc((size_t)na, sizeof(*m->fold));
    m->runs = calloc((size_t)nr, sizeof(*m->runs));
    m->run_acc = calloc((size_t)nr * 4, sizeof(double));
    m->run_unk = calloc((size_t)nr, 1);
    m->run_vals = calloc((size_t)nr, sizeof(double *));
    m->run_nvals = calloc((size_t)nr, sizeof(uint64_t));
    m->run_capvals = calloc((size_t)nr, sizeof(uint64_t));
    m->run_top = calloc((size_t)nr, sizeof(*m->run_top));
    m->run_ntop = calloc((size_t)nr, sizeof(int));
    if (!m->res || !m->run_node || !m->run_owner || !m->aggs || !m->runs || !m->fold ||
        !m->run_acc || !m->run_unk || !m->run_vals || !m->run_nvals || !m->run_capvals ||
        !m->run_top || !m->run_ntop || tkp_shapes_new(&m->shapes))
        return TKP_ERR_NOMEM;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        int rc = 0;
        if (a->level == LV_RECORD) rc = list_add(a->gpu ? &m->rec_gpu : &m->rec_host,
                                                 a->gpu ? &m->nrec_gpu : &m->nrec_host, i);
        if (a->level == LV_STEP) rc = list_add(a->gpu ? &m->step_gpu : &m->step_host,
                                               a->gpu ? &m->nstep_gpu : &m->nstep_host, i);
        if (rc) return rc;
        if (a->gpu && a->level != LV_RECORD) m->need_gpu = 1;
        m->res[i].first = calloc((size_t)a->witness + 1, sizeof(struct tkp_viol));
        m->res[i].worst = calloc((size_t)a->witness + 1, sizeof(struct tkp_viol));
        if (!m->res[i].first || !m->res[i].worst) return TKP_ERR_NOMEM;
        m->st.state_bytes += a->state_bytes;
    }
    for (int s = 0; s < sp->nslots_agg; s++) {
        const struct tkp_slotplan *p = &c->plan[s];
        int rc = p->gpu      ? list_add(&m->gpu_slots, &m->ngpu_slots, s)
                 : p->stream ? list_add(&m->stream, &m->nstream, s)
                             : list_add(&m->buffered, &m->nbuffered, s);
        if (rc) return rc;
        if (p->gpu) m->need_gpu = 1;
    }
    for (int s = 0; s < sp->nslots_run; s++) {
        m->run_node[s] = c->run_node[s];
        m->run_owner[s] = c->run_owner[s];
        if (sp->n[c->run_node[s]].gpu) m->need_gpu = 1;
    }
    if (!(m->rec_skip = calloc((size_t)m->nrec_host + 1, sizeof(uint64_t))) ||
        !(m->rh = calloc((size_t)m->nrec_host + 1, sizeof(*m->rh))))
        return TKP_ERR_NOMEM;
    for (int j = 0; j < m->nrec_host; j++) {
        const struct tkp_assert *a = &sp->as[m->rec_host[j]];
        const struct tkp_nbound *b = c->prog[a->body_prog].bound;
        const struct tkp_nbound *cb = a->cons_prog >= 0 ? c->prog[a->cons_prog].bound : NULL;
        m->rh[j] = (struct rhost){.bound = tkp_check_general ? NULL : b,
                                  .bins = tkp_bool_ins(&c->prog[a->body_prog]), .as = m->rec_host[j],
                                  .body_prog = a->body_prog, .when_prog = a->when_prog,
                                  .skip = a->skip, .cbound = tkp_check_general ? NULL : cb,
                                  .cons_prog = tkp_check_general ? -1 : a->cons_prog,
                                  .imp_prog = tkp_check_general || !a->prevs ? -1 : a->imp_prog};
        m->rec_skip[j] = a->skip;
        m->rec_warm |= a->skip > 0;
    }
    m->rec_none = !m->nrec_host && !m->nstream && !m->nbuffered;
    for (int s = 0; s < sp->nslots_temporal && s < 64; s++) {
        const struct tkp_node *x = &sp->n[c->slot_node[s]];
        if (x->op == OP_ONCE && (x->has_iv || c->near[s].on)) m->hit_slots |= 1ull << s;
    }
    m->bulk_off = tkp_check_general;
    m->er = (struct tkp_eval){.sp = sp, .shapes = m->shapes, .update = 1, .near_note = tkp_near_note};
    m->es = (struct tkp_eval){.sp = sp, .shapes = m->shapes};
    for (int s = 0; s < sp->nslots_run; s++) {
        m->run_acc[4 * s + 2] = INFINITY;
        m->run_acc[4 * s + 3] = -INFINITY;
        int k = sp->as[m->run_owner[s]].witness;
        m->run_top[s] = calloc((size_t)k + 1, sizeof(struct tkp_witem));
        if (!m->run_top[s]) return TKP_ERR_NOMEM;
    }
    return 0;
}

void tkp_mon_set_baseline(struct tkp_mon *m, const struct tkp_val *runs, const double *figures)
{
    m->base = runs;
    m->figures = m->er.figures = m->es.figures = figures;
}

/* The open step's last record, decoded (it was kept raw while only its shape was needed). */
static void last_decode(struct thr *h, struct open_step *o)
{
    if (!o->last_lazy) return;
    tkp_decode_rest(h, &o->last_raw, o->last_id, &o->last);
    o->last.pos = (uint32_t)(o->len - 1);
    o->last_lazy = 0;
}

/* ---- judging ---- */

static void eval_records(struct tkp_mon *m, struct thr *h, struct tkp_srec *x, const int *list,
                         int n)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval *E = &m->er;
    E->r = x;
    if (!x->atoms_ok) tkp_atoms_fill(E, x);
    E->ts = h->ts, E->scope = (int64_t)x->step;
    int set = 0;
    if (x->marks[x->is_gpu] || x->pmarks[x->is_gpu]) {
        set = 1;
        E->point = (int64_t)h->recs;
        E->now_ns = (int64_t)(x->is_gpu ? x->gpu_start : x->host_ns);
        E->cls_r = NULL; /* x is reused for the next record */
        if (x->marks[x->is_gpu]) tkp_shape_marks(E, x->marks[x->is_gpu]);
        if (x->pmarks[x->is_gpu]) tkp_prev_marks(E, x->pmarks[x->is_gpu]);
    }
    for (int j = 0; j < n; j++) {
        const struct tkp_assert *a = &sp->as[list[j]];
        unsigned v = TKP_FAST_RUN;
        if (a->fast >= 0) {
            /* what the record's shape decides (prog.h "Shape verdicts") */
            v = (unsigned)(x->fast >> (2 * a->fast)) & 3;
            if (v == TKP_FAST_PASS && x->token >= a->skip) m->res[list[j]].evaluated++;
            if (v == TKP_FAST_PASS || v == TKP_FAST_QUIET) continue;
        }
        if (!set) {
            set = 1;
            E->point = (int64_t)h->recs;
            E->now_ns = (int64_t)(x->is_gpu ? x->gpu_start : x->host_ns);
            E->cls_r = NULL; /* x is reused for the next record */
        }
        int t = tkp_truth(E, a->body_prog);
        if (x->token < a->skip) continue;
        /* TKP_FAST_BODY: the shape says the guard holds */
        if (v != TKP_FAST_BODY && a->when_prog >= 0 && tkp_truth(E, a->when_prog) != 1) continue;
        tkp_evaluated(m, E, list[j], t, NULL, x, NULL);
    }
}

/* The residual of the one-byte program position j of rec_host runs on shape e, NULL none; its
 * form in *form. */
static inline const struct tkp_ins *resid(const struct tkp_mon *m, const struct tkp_shape *e,
                                          int j, int *form)
{
    size_t at = (size_t)(e - m->shapes->v) * (size_t)m->nrec_host + (size_t)j;
    if (at >= m->nresid) return *form = TKP_RF_RUN, NULL;
    *form = m->rform[at];
    return m->resid[at];
}

/* A decoded host record whose shape e has a plan (shape_plan): what eval_records does, with the
 * shape's verdicts read once for all its assertions: its passes counted per shape, the
 * assertions it runs visited alone. */
void tkp_eval_shape(struct tkp_mon *m, struct thr *h, struct tkp_srec *x,
                       struct tkp_shape *e)
{
    struct tkp_eval *E = &m->er;
    E->r = x;
    E->ts = h->ts, E->scope = (int64_t)x->step;
    E->point = (int64_t)h->recs;
    E->now_ns = (int64_t)x->host_ns;
    E->cls_r = NULL; /* x is reused for the next record */
    if (e->marks[0]) tkp_shape_marks(E, e->marks[0]);
    tkp_pdec_set(m, E, e);
    if (e->pmarks[0]) tkp_prev_marks(E, e->pmarks[0]);
    if (!m->rec_warm) e->npass++; /* counted once per shape at the end (pass_counts) */
    else
        for (uint64_t b = e->pass; b; b &= b - 1) {
            int j = __builtin_ctzll(b);
            m->res[m->rec_host[j]].evaluated += x->token >= m->rec_skip[j];
        }
    for (uint32_t b = e->run; b; b &= b - 1) {
        int j = __builtin_ctz(b);
        const struct rhost *q = &m->rh[j];
        int t, f;
        if (q->imp_prog >= 0) { /* `A -> B` with `prev`s: its two sides */
            const struct tkp_ins *r = resid(m, e, j, &f);
            t = tkp_truth_imp(E, q->imp_prog, r, f, q->cons_prog, q->cbound);
        }
        else if ((e->body >> j & 1) && q->cons_prog >= 0) /* `A -> B`, the shape makes A true */
            t = q->cbound ? tkp_run_bound(E, q->cbound) : tkp_truth(E, q->cons_prog);
        else if (q->bound) t = tkp_run_bound(E, q->bound);
        else if (q->bins) {
            const struct tkp_ins *r = resid(m, e, j, &f);
            t = r ? tkp_run_resid(E, r, f) : tkp_run_bool(E, q->bins);
        } else t = tkp_truth(E, q->body_prog);
        if (x->token < q->skip || (e->bodyonly >> j & 1)) continue;
        if (!(e->body >> j & 1) && q->when_prog >= 0 && tkp_truth(E, q->when_prog) != 1) continue;
        tkp_evaluated(m, E, q->as, t, NULL, x, NULL);
    }
}

static int eval_steps(struct tkp_mon *m, struct thr *h, const struct tkp_sstep *s, int gpu,
                      const struct wctx *W)
{
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval E = {.sp = sp, .s = s, .aggs = m->aggs, .ts = h->ts, .point = (int64_t)s->token,
                         .now_ns = (int64_t)s->start, .scope = (int64_t)s->idx, .update = 1,
                         .shapes = m->shapes, .base = m->base, .figures = m->figures,
                         .near_note = tkp_near_note};
    const int *list = gpu ? m->step_gpu : m->step_host;
    int n = gpu ? m->nstep_gpu : m->nstep_host;
    for (int j = 0; j < n; j++) {
        const struct tkp_assert *a = &sp->as[list[j]];
        /* the body advances its temporal state at every step, counted or not */
        int t = tkp_truth(&E, a->body_prog);
        if (s->token < a->skip) continue;
        if (a->when_prog >= 0 && tkp_truth(&E, a->when_prog) != 1) continue;
        tkp_evaluated(m, &E, list[j], t, s, NULL, W);
    }
    return tkp_fold_runs(m, &E, gpu);
}

/* ---- steps ---- */

static int cmp_start(const void *a, const void *b)
{
    const struct tkp_srec *x = a, *y = b;
    return x->gpu_start < y->gpu_start ? -1 : x->gpu_start > y->gpu_start;
}

/* GPU phase of one step: the union of its GPU intervals, then GPU aggregates and verdicts. */
static int gpu_close(struct tkp_mon *m, struct thr *h, struct tkp_sstep *s,
                     const struct tkp_val *aggs, struct vec *g, const struct tkp_srec *first,
                     const struct tkp_srec *last)
{
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
    if (aggs != m->aggs) memcpy(m->aggs, aggs, (size_t)m->sp->nslots_agg * sizeof(*m->aggs));
    struct tkp_eval E = {.sp = m->sp, .s = s, .shapes = m->shapes, .figures = m->figures};
    int rc = tkp_fold_vec(m, &E, g, m->gpu_slots, m->ngpu_slots);
    if (rc) return rc;
    /* a step that put work on the GPU and got no GPU record (GPU time off, or not joined) has
     * unknown GPU aggregates: "no slow kernel" must not pass because nothing was timed */
    if (!g->n && s->work)
        for (int j = 0; j < m->ngpu_slots; j++)
            m->aggs[m->gpu_slots[j]] = (struct tkp_val){VT_UNK, 0, NULL};
    struct wctx W = {NULL, g, first, last, NULL};
    rc = eval_steps(m, h, s, 1, &W);
    g->n = 0;
    return rc;
}

static int pend_pop(struct tkp_mon *m, struct thr *h)
{
    struct pend *p = &h->pend[h->pend_head];
    int rc = gpu_close(m, h, &p->s, p->aggs, &p->gpu, &p->first, &p->last);
    h->pend_head = (h->pend_head + 1) % h->pend_cap;
    h->npend--;
    return rc;
}

static int pend_push(struct tkp_mon *m, struct thr *h, const struct tkp_sstep *s,
                     struct open_step *o)
{
    if (h->npend == PEND_MAX && pend_pop(m, h)) return TKP_ERR_NOMEM;
    if (h->npend == h->pend_cap) {
        uint32_t cap = h->pend_cap ? 2 * h->pend_cap : 16;
        struct pend *q = calloc(cap, sizeof(*q));
        if (!q) return TKP_ERR_NOMEM;
        for (uint32_t i = 0; i < h->pend_cap; i++) /* the idle slots keep their buffers */
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
        if (tkp_vec_push(&p->gpu, &o->gpu.v[i])) return TKP_ERR_NOMEM;
    memset(&p->first, 0, sizeof(p->first));
    memset(&p->last, 0, sizeof(p->last));
    if (o->len) p->first = o->first, p->last = o->last;
    h->npend++;
    if (h->npend > m->st.pending_peak) m->st.pending_peak = h->npend;
    return 0;
}

/* No GPU record will come for this thread's steps: its process's GPU_INFO said so, none came. */
static int gpu_absent(const struct tkp_mon *m, const struct thr *h)
{
    return !h->npend && tkp_gpu_off(m, (int)(h - m->t));
}

static void open_release(struct open_step *o)
{
    o->used = 0;
    o->last_lazy = 0;
    o->len = o->launches = o->work = 0;
    o->host.n = o->gpu.n = 0;
}

/* Host phase: the STEP record (or a forced close) of open step o. */
static int host_close(struct tkp_mon *m, struct thr *h, struct open_step *o,
                      const struct tkp_record *st)
{
    int token = !st || st->step_rec.kind == TKP_STEP_TOKEN;
    if (o->host.n > m->st.buffered_peak) m->st.buffered_peak = o->host.n;
    last_decode(h, o);
    if (!token) {
        h->outside++;
        /* its records have no token: kept violations say so, and its GPU records will */
        h->setup[h->nsetup++ % 8] = o->seg;
        tkp_setup_mark(m, (uint32_t)(h - m->t), o->seg);
        open_release(o);
        return 0;
    }
    struct tkp_sstep s = {.thread = (uint32_t)(h - m->t), .tid = h->tid, .idx = o->seg,
                          .token = h->tokens++, .len = o->len, .work = o->work};
    if (st) {
        s.start = st->step_rec.begin_ns, s.mark = st->step_rec.mark_ns, s.end = st->step_rec.end_ns;
        s.launches = st->step_rec.launches + st->step_rec.graph_launches;
    } else if (o->len) {
        s.start = o->first.host_ns, s.end = s.mark = o->last.host_ns;
        s.launches = o->launches;
    }
    /* a record's token is its step's, known now */
    o->first.token = o->last.token = s.token;
    for (uint32_t i = 0; i < o->host.n; i++) o->host.v[i].token = s.token;
    for (int j = 0; j < m->nstream; j++) {
        struct tkp_fold *f = &o->fold[m->stream[j]];
        for (uint32_t i = 0; i < f->nkeep; i++) f->keep[i].token = s.token;
    }
    if (o->len) s.first_id = o->first.id, s.last_id = o->last.id;
    /* the phase from the GEMMs' token dimension (decoder/libcalls.h has the rule) */
    if (o->tok_max && o->tok_max == o->tok_last) s.phase = PH_DECODE;
    else if (o->tok_max > o->tok_last) s.phase = h->had_decode ? PH_MIXED : PH_PREFILL;
    else s.phase = h->had_decode ? PH_DECODE : PH_UNKNOWN;
    if (s.phase == PH_DECODE) h->had_decode = 1;
    m->st.steps++;
    const struct tkp_spec *sp = m->sp;
    for (int j = 0; j < m->nstream; j++) {
        int k = m->stream[j];
        m->aggs[k] = tkp_fold_value(&o->fold[k], &sp->n[sp->code->plan[k].node]);
    }
    struct tkp_eval E = {.sp = sp, .s = &s, .shapes = m->shapes, .figures = m->figures};
    int rc = tkp_fold_vec(m, &E, &o->host, m->buffered, m->nbuffered);
    if (rc) return rc;
    const struct tkp_srec *first = o->len ? &o->first : NULL, *last = o->len ? &o->last : NULL;
    struct wctx W = {&o->host, NULL, first, last, o->fold};
    if ((rc = eval_steps(m, h, &s, 0, &W))) return rc;
    if (m->need_gpu) {
        rc = gpu_absent(m, h) ? gpu_close(m, h, &s, m->aggs, &o->gpu, first, last)
                              : pend_push(m, h, &s, o);
        if (rc) return rc;
    }
    h->last_closed = o->seg;
    open_release(o);
    return 0;
}

static struct open_step *open_for(struct tkp_mon *m, struct thr *h, uint64_t seg, int *rc)
{
    if (h->cur && h->cur->used && h->cur->seg == seg) return h->cur;
    struct open_step *fr = NULL, *old = NULL;
    for (int i = 0; i < TKP_MON_OPEN_MAX; i++) {
        struct open_step *o = &h->open[i];
        if (o->used && o->seg == seg) return h->cur = o;
        if (!o->used && !fr) fr = o;
        if (o->used && (!old || o->seg < old->seg)) old = o;
    }
    if (!fr) {
        /* no STEP record came for the oldest: close it on what we have */
        if ((*rc = host_close(m, h, old, NULL))) return NULL;
        fr = old;
    }
    open_release(fr);
    fr->used = 1;
    fr->seg = seg;
    fr->tok_max = fr->tok_last = 0;
    fr->part = (struct tkp_sstep){.thread = (uint32_t)(h - m->t), .tid = h->tid, .idx = seg};
    const struct tkp_spec *sp = m->sp;
    for (int j = 0; j < m->nstream; j++) {
        int k = m->stream[j];
        tkp_fold_reset(&fr->fold[k], &sp->n[sp->code->plan[k].node]);
    }
    return h->cur = fr;
}

/* ---- records ---- */

/* The plan for host records of shape e (struct tkp_shape): whether anything reads more of
 * them than their shape — a record-level assertion the shape does not decide, an aggregate
 * that takes them (a streamed one that keeps them, reads a value or tests more than atoms), a
 * buffered aggregate's prefilter that passes — else what the shape decides. */
static void shape_plan(const struct tkp_mon *m, struct tkp_shape *e)
{
    const struct tkp_spec *sp = m->sp;
    const struct tkp_code *c = sp->code;
    uint64_t on = e->kn & e->tr;
    e->want = 2;
    e->pass = e->counts = e->run = e->body = e->bodyonly = e->takes = 0;
    e->plan = 0;
    if (m->nrec_host > 64 || m->nstream > 64) return;
    int runs = 0;
    for (int j = 0; j < m->nrec_host; j++) {
        /* an assertion without shape verdicts runs on every record, the others as planned */
        int f = sp->as[m->rec_host[j]].fast;
        unsigned v = f < 0 ? TKP_FAST_RUN : (unsigned)(e->fast >> (2 * f)) & 3;
        uint32_t bit = j < 32 ? 1u << j : 0;
        runs |= v == TKP_FAST_RUN || v == TKP_FAST_BODY;
        if (v == TKP_FAST_RUN || v == TKP_FAST_BODY) e->run |= bit;
        if (v == TKP_FAST_RUN && f >= 0 && (e->gfalse >> f & 1)) e->bodyonly |= bit;
        if (v == TKP_FAST_BODY) e->body |= bit;
        if (v == TKP_FAST_PASS) e->pass |= 1ull << j;
    }
    e->plan = !tkp_check_general && m->nrec_host <= 32;
    int other = 0; /* a streamed aggregate takes it that is not a count of atoms */
    for (int j = 0; j < m->nstream; j++) {
        const struct tkp_slotplan *p = &c->plan[m->stream[j]];
        if ((on & p->sel.atoms) != p->sel.atoms) continue;
        if (p->count_atoms) e->counts |= 1ull << j;
        else other = 1, e->takes |= j < 32 ? 1u << j : 0;
    }
    if (runs || other) return;
    for (int j = 0; j < m->nbuffered; j++)
        if ((on & c->plan[m->buffered[j]].pre.atoms) == c->plan[m->buffered[j]].pre.atoms) return;
    e->want = 1;
}

/* The residuals of the one-byte programs shape e's plan runs (struct tkp_mon resid); none where
 * out of memory (the programs run whole). */
static __attribute__((noinline)) void shape_resid(struct tkp_mon *m, const struct tkp_shape *e)
{
    if (!e->plan || !e->run) return;
    size_t id = (size_t)(e - m->shapes->v) * (size_t)m->nrec_host, n = id + (size_t)m->nrec_host;
    if (n > m->nresid) {
        size_t cap = m->nresid;
        if (tkp_grow_to((void **)&m->resid, &cap, n, sizeof(*m->resid), 64, 1)) return;
        size_t capf = m->nresid;
        if (tkp_grow_to((void **)&m->rform, &capf, cap, 1, 64, 1)) return;
        m->nresid = cap;
    }
    const struct tkp_code *c = m->sp->code;
    for (uint32_t b = e->run; b; b &= b - 1) {
        int j = __builtin_ctz(b);
        const struct rhost *q = &m->rh[j];
        const struct tkp_ins *ins = q->imp_prog >= 0 ? tkp_bool_ins(&c->prog[q->imp_prog])
                                    : (e->body >> j & 1) && q->cons_prog >= 0 ? NULL
                                    : q->bound ? NULL : q->bins;
        if (ins && !m->resid[id + (size_t)j]) {
            m->resid[id + (size_t)j] = tkp_residual(ins, e->kn, e->tr);
            m->rform[id + (size_t)j] = (uint8_t)tkp_resid_form(m->sp, m->resid[id + (size_t)j]);
        }
    }
}

/* The `prev`s shape e's host records update that the shape decides (struct tkp_pdec): taken
 * out of its pmarks, so that its records are not decoded for them. Planned shapes only (the
 * others' records take their pmarks through eval_records); none where out of memory. */
static __attribute__((noinline)) void shape_prevs(struct tkp_mon *m, struct tkp_shape *e)
{
    if (!e->plan || !e->pmarks[0]) return;
    struct tkp_pdec p;
    p.slots = tkp_prev_decided(m->sp, e->kn, e->tr, e->pmarks[0], &p.vt, &p.vu, &p.in_step);
    if (!p.slots) return;
    size_t id = (size_t)(e - m->shapes->v);
    if (id >= m->npdec) {
        size_t cap = m->npdec;
        if (tkp_grow_to((void **)&m->pdec, &cap, id + 1, sizeof(*m->pdec), 64, 1)) return;
        m->npdec = cap;
    }
    m->pdec[id] = p;
    e->pmarks[0] &= ~p.slots;
    e->pdec = 1;
}

/* eval.c prev()'s update, of the truth values shape e gives its decided `prev`s. */
__attribute__((noinline)) void tkp_pdec_apply(const struct tkp_mon *m, struct tkp_eval *E,
                                              const struct tkp_shape *e)
{
    const struct tkp_pdec *p = &m->pdec[e - m->shapes->v];
    if (!E->update) return;
    for (uint64_t q = p->slots; q; q &= q - 1) {
        int slot = __builtin_ctzll(q);
        struct tkp_tstate *t = &E->ts[slot];
        if ((p->in_step >> slot & 1) && t->scope != E->scope) tkp_scope_enter(t, E->scope);
        if (t->prev_set) t->prev_out = t->prev;
        else t->prev_out = (struct tkp_val){VT_UNK, 0, NULL};
        t->prev_first = !t->prev_set;
        t->prev = p->vu >> slot & 1 ? (struct tkp_val){VT_UNK, 0, NULL}
                                    : (struct tkp_val){VT_BOOL, (double)(p->vt >> slot & 1), NULL};
        t->prev_set = 1;
    }
}

/* Whether launches of shape e (planned) can be judged from a RUN's columns (struct tkp_shape
 * col): nothing of the record is read but, by straight bounds r.x - prev r.x OP k, r.host_ts
 * (2); or decoded from them and judged by the plan, then given to the step aggregates (3). */
static __attribute__((noinline)) void shape_col(const struct tkp_mon *m, struct tkp_shape *e)
{
    e->col = 0;
    if (tkp_check_general) return;
    int plain = !e->pmarks[0] && !(e->marks[0] & m->hit_slots); /* nothing reads the record */
    if (e->want == 1) {
        e->col = plain;
        return;
    }
    if (!e->plan) return;
    e->col = 3;
    if (!plain || e->bodyonly || m->nstream || m->nbuffered) return;
    for (uint32_t b = e->run; b; b &= b - 1) {
        int j = __builtin_ctz(b);
        const struct rhost *q = &m->rh[j];
        if (!q->bound || !q->bound->delta || q->bound->c[0].l.a.attr != A_R_HOST) return;
        if (!(e->body >> j & 1) && q->when_prog >= 0) return;
    }
    e->col = 2;
}

/* A record its shape e decides: record-level passes and marks, the streamed counts of atoms. */
static void shape_record(struct tkp_mon *m, struct thr *h, struct open_step *o, struct tkp_shape *e,
                         uint64_t token, uint64_t step)
{
    if (e->marks[0] & ~m->hit_slots) {
        m->er.ts = h->ts, m->er.scope = (int64_t)step;
        tkp_shape_marks(&m->er, e->marks[0] & ~m->hit_slots);
    }
    if (e->pdec) m->er.ts = h->ts, m->er.scope = (int64_t)step, tkp_pdec_set(m, &m->er, e);
    if (e->pmarks[0] || (e->marks[0] & m->hit_slots)) {
        /* the `prev`s its shape does not decide: their operands on the record, decoded; the
         * hits of windows (their near misses keep the record) */
        last_decode(h, o);
        struct tkp_eval *E = &m->er;
        E->r = &o->last, E->ts = h->ts, E->scope = (int64_t)step, E->cls_r = NULL;
        E->point = (int64_t)h->recs, E->now_ns = (int64_t)o->last.host_ns;
        if (e->marks[0] & m->hit_slots) tkp_shape_marks(E, e->marks[0] & m->hit_slots);
        if (e->pmarks[0]) tkp_prev_marks(E, e->pmarks[0]);
    }
    if (!m->rec_warm) e->npass++; /* counted once per shape at the end (pass_counts) */
    else
        for (uint64_t b = e->pass; b; b &= b - 1) {
            int j = __builtin_ctzll(b);
            m->res[m->rec_host[j]].evaluated += token >= m->rec_skip[j];
        }
    for (uint64_t b = e->counts; b; b &= b - 1)
        o->fold[m->stream[__builtin_ctzll(b)]].cnt++;
}

static int host_full(struct tkp_mon *m, struct thr *h, struct open_step *o,
                     const struct tkp_record *r, uint32_t pos, struct tkp_shape *e);

/* The open step's last record, kept undecoded (last_decode decodes it when a witness needs it). */
static inline void keep_raw(const struct tkp_mon *m, struct open_step *o, const struct tkp_record *r)
{
    o->last_raw = *r;
    o->last_id = m->next_id;
    o->last_lazy = 1;
}

/* The passes shape_record counted per shape, into the assertions' evaluated counts. */
static void pass_counts(struct tkp_mon *m)
{
    struct tkp_shapes *t = m->shapes;
    for (size_t i = 0; i < t->n; i++) {
        struct tkp_shape *e = &t->v[i];
        if (!e->npass) continue;
        for (uint64_t b = e->pass; b; b &= b - 1)
            m->res[m->rec_host[__builtin_ctzll(b)]].evaluated += e->npass;
        e->npass = 0;
    }
}

/* A host record: to the record-level assertions, the streamed aggregates, maybe the buffer.
 * Most records are decided by their shape: they are decoded no further than that. */
static int host_record(struct tkp_mon *m, const struct tkp_record *r)
{
    struct thr *h = thread(m, r->thread);
    if (!h) return TKP_ERR_NOMEM;
    h->recs++;
    if (h->last_closed && r->step <= h->last_closed && h->tokens) {
        m->st.late++;
        return 0;
    }
    int rc = 0;
    struct open_step *o =
        h->cur && h->cur->used && h->cur->seg == r->step ? h->cur : open_for(m, h, r->step, &rc);
    if (!o) return rc;
    struct tkp_srec *x = &o->last;
    uint32_t pos = (uint32_t)o->len++;
    tkp_decode_shape(h, r, x);
    o->launches += x->kind == RK_KERNEL || x->kind == RK_GRAPH;
    o->work += x->kind <= RK_MEMSET; /* kernel, graph, memcpy, memset */
    struct tkp_shape *e = pos ? tkp_shape_find(m->shapes, x) : NULL;
    if (!e && pos && m->rec_none) {
        /* nothing reads host records (step and run assertions on the step's own figures): kept
         * raw, as a shape that decides everything keeps it */
        keep_raw(m, o, r);
        return 0;
    }
    if (e) {
        if (!e->want) shape_plan(m, e), shape_prevs(m, e), shape_col(m, e), shape_resid(m, e);
        if (e->want == 1) {
            keep_raw(m, o, r);
            shape_record(m, h, o, e, x->token, r->step);
            return 0;
        }
        x->akn = e->kn, x->atr = e->tr, x->fast = e->fast;
        x->marks[0] = e->marks[0], x->marks[1] = e->marks[1];
        /* (tkp_eval_shape reads the shape's own) */
        if (!e->plan) x->pmarks[0] = e->pmarks[0], x->pmarks[1] = e->pmarks[1];
        x->atoms_ok = 1;
    }
    return host_full(m, h, o, r, pos, e);
}

/* A host record something reads beyond its shape: decoded whole, then judged. */
static __attribute__((noinline)) int host_full(struct tkp_mon *m, struct thr *h,
                                               struct open_step *o, const struct tkp_record *r,
                                               uint32_t pos, struct tkp_shape *e)
{
    struct tkp_srec *x = &o->last;
    uint8_t ok = x->atoms_ok;
    tkp_decode_rest(h, r, m->next_id, x);
    x->atoms_ok = ok;
    x->pos = pos;
    o->last_lazy = 0;
    if (!pos) o->first = *x;
    if (m->nrec_host) {
        if (e && e->plan) tkp_eval_shape(m, h, x, e);
        else eval_records(m, h, x, m->rec_host, m->nrec_host);
    }
    return m->nstream || m->nbuffered ? tkp_host_aggs(m, o, x, e) : 0;
}

int tkp_host_aggs(struct tkp_mon *m, struct open_step *o, struct tkp_srec *x,
                  const struct tkp_shape *e)
{
    const struct tkp_spec *sp = m->sp;
    const struct tkp_code *c = sp->code;
    struct tkp_eval *E = &m->es;
    int rc, by_shape = e && e->plan;
    E->r = x, E->s = &o->part, E->cls_r = NULL;
    if (by_shape && m->nstream <= 32) {
        /* the shape says which: its counts of atoms, and the others its atoms pass */
        for (uint64_t q = e->counts; q; q &= q - 1)
            o->fold[m->stream[__builtin_ctzll(q)]].cnt++;
        for (uint32_t q = e->takes; q; q &= q - 1) {
            int k = m->stream[__builtin_ctz(q)];
            const struct tkp_slotplan *p = &c->plan[k];
            if (tkp_conj_holds(E, &p->sel) &&
                (rc = tkp_fold_take(&o->fold[k], p, &sp->n[p->node], E)))
                return rc;
        }
    } else {
        for (int j = 0; j < m->nstream; j++) {
            const struct tkp_slotplan *p = &c->plan[m->stream[j]];
            if (by_shape && p->count_atoms) { /* the shape says (shape_plan's counts) */
                o->fold[m->stream[j]].cnt += e->counts >> j & 1;
                continue;
            }
            if (tkp_conj_holds(E, &p->sel) &&
                (rc = tkp_fold_take(&o->fold[m->stream[j]], p, &sp->n[p->node], E)))
                return rc;
        }
    }
    for (int j = 0; j < m->nbuffered; j++)
        if (tkp_conj_holds(E, &c->plan[m->buffered[j]].pre)) return tkp_vec_push(&o->host, x);
    return 0;
}

static int gpu_record(struct tkp_mon *m, const struct tkp_record *r)
{
    m->st.gpu_records++;
    if (r->thread == TKP_GPU_THREAD_NONE) return 0; /* not joined to a step */
    struct thr *h = thread(m, r->thread);
    if (!h) return TKP_ERR_NOMEM;
    h->gpu_seen = 1;
    struct tkp_srec *x = &m->gpu_rec;
    tkp_decode(h, r, m->next_id, x);
    if (m->nrec_gpu) eval_records(m, h, x, m->rec_gpu, m->nrec_gpu);
    if (!m->need_gpu) return 0;
    int rc;
    /* steps two or more behind this one are complete on the GPU */
    while (h->npend && h->pend[h->pend_head].s.idx + 1 < r->step)
        if ((rc = pend_pop(m, h))) return rc;
    for (uint32_t i = 0; i < h->npend; i++) {
        struct pend *p = &h->pend[(h->pend_head + i) % h->pend_cap];
        if (p->s.idx == r->step) return tkp_vec_push(&p->gpu, x);
    }
    for (int i = 0; i < TKP_MON_OPEN_MAX; i++)
        if (h->open[i].used && h->open[i].seg == r->step) return tkp_vec_push(&h->open[i].gpu, x);
    if (r->step > h->last_closed) {
        struct open_step *o = open_for(m, h, r->step, &rc);
        if (!o) return rc;
        return tkp_vec_push(&o->gpu, x);
    }
    return 0;
}

int tkp_lib_call(struct tkp_mon *m, struct thr *h,
                 const __typeof__(((struct tkp_record *)0)->lib_call) *c, uint32_t call,
                 uint64_t step)
{
    int rc = 0;
    /* a kept raw launch inside the current library call decodes with it, now */
    for (int i = 0; i < TKP_MON_OPEN_MAX; i++)
        if (h->open[i].used && h->open[i].last.has_lib) last_decode(h, &h->open[i]);
    /* what a launch inside the call reads of it (decode_shape, decode_rest) */
    h->lib.lib = c->lib, h->lib.op = c->op;
    h->lib.m = c->m, h->lib.n = c->n;
    h->lib.k = c->k, h->lib.batch = c->batch;
    h->call = call;
    /* unbatched, executed GEMMs carry the token dimension (n) */
    if (c->batch <= 1 && !(c->flags & TKP_LIBF_CAPTURED) && c->n) {
        struct open_step *o = open_for(m, h, step, &rc);
        if (!o) return rc;
        if (c->n > o->tok_max) o->tok_max = c->n;
        o->tok_last = c->n;
    }
    return 0;
}

/* Records other than the host records of a step (which host_record takes directly). */
static __attribute__((noinline)) int feed_other(struct tkp_mon *m, const struct tkp_record *r)
{
    struct thr *h;
    int rc = 0;
    switch (r->type) {
    case TKP_REC_LIB_CALL:
        if (!(h = thread(m, r->thread))) return TKP_ERR_NOMEM;
        if ((rc = tkp_lib_call(m, h, &r->lib_call, r->lib_call.call, r->step))) return rc;
        return host_record(m, r);
    case TKP_REC_THREAD:
        if (!(h = thread(m, r->thread))) return TKP_ERR_NOMEM;
        h->tid = r->tid;
        h->pid = r->pid;
        return 0;
    case TKP_REC_STEP: {
        if (!(h = thread(m, r->thread))) return TKP_ERR_NOMEM;
        struct open_step *o = open_for(m, h, r->step, &rc);
        if (!o) return rc;
        return host_close(m, h, o, r);
    }
    case TKP_REC_GPU_KERNEL: case TKP_REC_GPU_COPY:
        return gpu_record(m, r);
    case TKP_REC_GPU_INFO:
        if (r->gpu_info.status != TKP_GPU_ON && m->ngpu_off < 16) {
            for (int i = 0; i < m->ngpu_off; i++)
                if (m->gpu_off[i] == r->pid) return 0;
            m->gpu_off[m->ngpu_off++] = r->pid;
        }
        return 0;
    default:
        return 0;
    }
}

int tkp_mon_feed(struct tkp_mon *m, const struct tkp_record *r)
{
    m->next_id++;
    m->st.records++;
    switch (r->type) {
    case TKP_REC_LAUNCH: case TKP_REC_GRAPH_LAUNCH: case TKP_REC_COPY: case TKP_REC_SYNC:
    case TKP_REC_EVENT_RECORD: case TKP_REC_STREAM_WAIT: case TKP_REC_NVTX: case TKP_REC_MARKER:
        return host_record(m, r);
    default:
        return feed_other(m, r);
    }
}

int tkp_mon_finish(struct tkp_mon *m)
{
    int rc;
    for (uint32_t t = 0; t < m->nt; t++) {
        struct thr *h = &m->t[t];
        if (!h->seen) continue;
        /* steps whose STEP record never came (a torn capture): a truncated step is not judged
         * (it would be a guess) */
        for (int i = 0; i < TKP_MON_OPEN_MAX; i++)
            if (h->open[i].used && h->open[i].len) {
                m->st.unclosed++;
                open_release(&h->open[i]);
            }
        while (h->npend)
            if ((rc = pend_pop(m, h))) return rc;
    }
    pass_counts(m);
    tkp_runs_finalize(m);
    const struct tkp_spec *sp = m->sp;
    struct tkp_eval E = {.sp = sp, .runs = m->runs, .base = m->base, .figures = m->figures,
                         .shapes = m->shapes};
    for (int i = 0; i < sp->nas; i++) {
        if (sp->as[i].level != LV_RUN) continue;
        int t = tkp_eval_bool(&E, sp->as[i].body);
        tkp_evaluated(m, &E, i, t, NULL, NULL, NULL);
        if (t == 0) tkp_run_witness(m, i);
    }
    m->st.shapes = tkp_shapes_count(m->shapes);
    return 0;
}

const struct tkp_ares *tkp_mon_result(const struct tkp_mon *m, int as) { return &m->res[as]; }

int tkp_mon_verdict(const struct tkp_mon *m, int as, int *why)
{
    const struct tkp_ares *R = &m->res[as];
    const struct tkp_assert *a = &m->sp->as[as];
    int v = 1, w = TKP_WHY_NONE;
    if (R->violations) {
        v = 0;
    } else if (R->inconclusive) {
        v = -1, w = R->why;
    } else if (!R->evaluated) {
        /* nothing judged is nothing checked: a GPU-record assertion of a capture without GPU
         * time, or a guard no point passed */
        v = -1, w = a->gpu && tkp_gpu_off(m, -1) ? TKP_WHY_GPU_OFF : TKP_WHY_NEVER;
    }
    if (why) *why = w;
    return v;
}

const struct tkp_val *tkp_mon_runs(const struct tkp_mon *m) { return m->runs; }
const struct tkp_mon_stats *tkp_mon_stats(const struct tkp_mon *m) { return &m->st; }

static void fold_free(struct tkp_fold *f, int n)
{
    for (int i = 0; f && i < n; i++) free(f[i].pv), free(f[i].keep);
    free(f);
}

void tkp_mon_free(struct tkp_mon *m)
{
    if (!m) return;
    const struct tkp_spec *sp = m->sp;
    for (uint32_t t = 0; t < m->nt; t++) {
        struct thr *h = &m->t[t];
        for (int i = 0; i < TKP_MON_OPEN_MAX; i++) {
            free(h->open[i].host.v), free(h->open[i].gpu.v);
            fold_free(h->open[i].fold, sp->nslots_agg);
        }
        for (int i = 0; h->ts && i < sp->nslots_temporal; i++)
            free(h->ts[i].ring), free(h->ts[i].near);
        free(h->ts);
        for (uint32_t i = 0; i < h->pend_cap; i++)
            free(h->pend[i].aggs), free(h->pend[i].gpu.v);
        free(h->pend);
    }
    for (int i = 0; m->res && i < sp->nas; i++)
        free(m->res[i].first), free(m->res[i].worst);
    for (int s = 0; s < sp->nslots_run; s++) {
        if (m->run_vals) free(m->run_vals[s]);
        if (m->run_top) free(m->run_top[s]);
    }
    free(m->t), free(m->res), free(m->run_node), free(m->run_owner);
    free(m->aggs), free(m->runs), free(m->run_acc), free(m->run_unk), free(m->run_vals);
    free(m->run_nvals);
    free(m->run_capvals), free(m->run_top), free(m->run_ntop);
    fold_free(m->fold, sp->nslots_agg);
    free(m->rec_host), free(m->rec_gpu), free(m->step_host), free(m->step_gpu);
    free(m->stream), free(m->buffered), free(m->gpu_slots), free(m->rec_skip), free(m->rh);
    for (size_t i = 0; i < m->nresid; i++) free(m->resid[i]);
    free(m->resid), free(m->rform), free(m->pdec);
    tkp_shapes_free(m->shapes);
    free(m);
}
