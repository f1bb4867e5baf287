/* tokprof decoder: the rows of a live capture as its steps close (tail.h), for `tokprof ingest
 * --watch` (ingest.c): the pass and the row writers of one capture (table_rows.c) fed record by
 * record. */
#include "fleet/tail.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "fleet/table_calls.h"
#include "fleet/table_rows.h"
#include "model/analysis.h"
#include "model/columns.h"
#include "model/model.h"

/* Per thread: the segments below `next` have had their rows; what the next row needs of them. */
struct tmark {
    uint64_t next;
    uint64_t prev_end;     /* end of the thread's previous step (gap_before), has_prev */
    uint64_t prev_tok_end; /* end of its previous token step (itl), has_tok */
    struct tkp_tokrule tok; /* tokens: analysis.h's rule, carried along the thread */
    int has_prev, has_tok;
};

struct tkp_tab_tail {
    struct tkp_rows_pass p;
    struct tkp_model m;
    struct tkp_acc *a;
    struct tmark *th;
    size_t nth;
    size_t lo; /* steps below lo have had their rows (or never will: closed, library calls only) */
    int finished;
};

int tkp_tab_tail_new(const struct tkp_classes *cl, struct tkp_tab_tail **out)
{
    struct tkp_tab_tail *t = calloc(1, sizeof(*t));
    struct tkp_model_opts mo = {
        .classes = cl, .from = -1, .to = -1, .no_dists = 1, .class_counts = 1};
    *out = NULL;
    if (!t) return TKP_ERR_NOMEM;
    t->p = (struct tkp_rows_pass){.cl = cl, .ncls = tkp_classes_count(cl)};
    t->p.want_steps = t->p.want_sc = t->p.want_k = t->p.want_moe = 1;
    tkp_model_init(&t->m, &mo);
    if (tkp_tcalls_new(&t->p.calls) || tkp_acc_bind(&t->m, &t->a)) {
        tkp_tab_tail_free(t);
        return TKP_ERR_NOMEM;
    }
    tkp_rows_pass_types(&t->p);
    *out = t;
    return 0;
}

void tkp_tab_tail_free(struct tkp_tab_tail *t)
{
    if (!t) return;
    tkp_acc_free(t->a);
    tkp_model_free(&t->m);
    tkp_rows_pass_free(&t->p);
    free(t->th);
    free(t);
}

int tkp_tab_tail_add(struct tkp_tab_tail *t, const struct tkp_record *r)
{
    int err = tkp_model_add(&t->m, r);
    return err ? err : tkp_rows_on_record(&t->p, t->p.types, r);
}

int tkp_tab_tail_id(const struct tkp_tab_tail *t, uint64_t *id)
{
    if (!t->p.has_meta) return 0;
    *id = tkp_rows_capture_id(t->p.hostbuf, t->p.pid, t->p.rt0, 0);
    return 1;
}

int tkp_tab_tail_moe_hint(struct tkp_tab_tail *t)
{
    for (size_t i = 0; i < t->p.ngs; i++)
        if (t->p.gs[i].used) tkp_rows_gstep_close(&t->p, &t->p.gs[i]), t->p.gs[i].used = 0;
    if (t->p.max_count > 1 && t->p.weights.n > t->p.max_count) t->p.moe_hint = 1;
    return t->p.moe_hint;
}

struct cand {
    uint32_t thread;
    uint64_t seg;
    size_t i;
};

static int by_thread_seg(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->seg < y->seg ? -1 : x->seg > y->seg;
}

/* The rows of step s (its thread's mark says what came before it on the thread). */
static int tail_step(struct tkp_tab_tail *t, const struct tkp_rows_emit *e,
                     const struct tkp_steprows *x, struct tkp_tab_out *const *outs,
                     const struct tkp_mstep *s, struct tmark *k)
{
    struct tkp_astep as;
    struct tkp_steprow r;
    uint64_t tok = 0, itl = 0;
    int tokstep = s->kind == TKP_STEP_TOKEN, err = 0, src = TKP_TOK_NONE;
    int found = tkp_acc_step(t->a, s->thread, s->seg, &as);
    tkp_tokrule_step(&k->tok, s, found, &as, tkp_acc_has_tokens(t->a),
                     tkp_acc_has_kernel_tokens(t->a), &tok, &src);
    if (tokstep) {
        itl = tkp_itl_ns(k->has_tok ? k->prev_tok_end : 0, s->end_ns);
        k->has_tok = 1, k->prev_tok_end = s->end_ns;
    }
    int has_gap = k->has_prev && k->prev_end && s->begin_ns;
    int64_t gap = has_gap ? (int64_t)(s->begin_ns - k->prev_end) : 0;
    k->has_prev = 1, k->prev_end = s->end_ns, k->next = s->seg + 1;
    tkp_steprow_fill(x, s, &as, tok, src, has_gap, gap, itl, &r);
    if (outs[TKP_TAB_STEPS]) err = tkp_rows_step(outs[TKP_TAB_STEPS], e, &r);
    if (!err && outs[TKP_TAB_STEP_CLASSES])
        err = tkp_rows_step_classes(outs[TKP_TAB_STEP_CLASSES], e, &t->p, &t->m, s, tok, src);
    return err;
}

int tkp_tab_tail_rows(struct tkp_tab_tail *t, const struct tkp_tab_ident *id,
                      struct tkp_tab_out *const *outs, int final)
{
    struct tkp_model *m = &t->m;
    struct tkp_steprows sr;
    struct cand *c = NULL;
    size_t nc = 0;
    int err = 0;
    if (final && !t->finished) {
        if ((err = tkp_model_finish(m))) return err;
        t->finished = 1, t->lo = 0; /* the steps moved: sorted by (thread, seg) */
    } else if (!t->finished) {
        tkp_model_vote(m); /* tokens by the weights seen so far */
    }
    if (tkp_steprows_init(&sr, m, NULL)) return TKP_ERR_NOMEM;
    if (m->nsteps > t->lo && !(c = malloc((m->nsteps - t->lo) * sizeof(*c)))) err = TKP_ERR_NOMEM;
    for (size_t i = t->lo; !err && i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (TKP_GROW_ZEROED_FROM(t->th, t->nth, (size_t)s->thread + 1, 4)) {
            err = TKP_ERR_NOMEM;
            break;
        }
        if (!s->lib_only && s->seg >= t->th[s->thread].next)
            c[nc++] = (struct cand){s->thread, s->seg, i};
    }
    if (!err && nc > 1) qsort(c, nc, sizeof(*c), by_thread_seg);
    struct tkp_rows_idcache ic[TKP_TAB_COUNT + 1] = {0};
    struct tkp_rows_emit e = {id, &t->p, 0, ic};
    tkp_tab_tail_id(t, &e.capture_id);
    /* per thread, its steps in order while they are closed: a step the watermark has not closed
     * yet (GPU records may still come for it) holds back the later ones */
    uint32_t held = UINT32_MAX;
    for (size_t x = 0; !err && x < nc; x++) {
        const struct tkp_mstep *s = &m->steps[c[x].i];
        if (s->thread == held) continue;
        if (!t->finished && s->open) {
            held = s->thread;
            continue;
        }
        err = tail_step(t, &e, &sr, outs, s, &t->th[s->thread]);
    }
    while (!t->finished && t->lo < m->nsteps) {
        const struct tkp_mstep *s = &m->steps[t->lo];
        if (s->lib_only ? s->open != NULL : s->seg >= t->th[s->thread].next) break;
        t->lo++;
    }
    if (!err && final && outs[TKP_TAB_KERNELS])
        err = tkp_rows_kernels(outs[TKP_TAB_KERNELS], &e, &t->p);
    if (!err && final && outs[TKP_TAB_CALLS])
        err = tkp_rows_calls(outs[TKP_TAB_CALLS], &e, t->p.calls);
    free(c);
    tkp_rows_idcache_free(ic);
    tkp_steprows_free(&sr);
    return err;
}
