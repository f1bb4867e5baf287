/* tokprof decoder: the columns of the output tables and the derived values of a steps row
 * (columns.h). */
#include "model/columns.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/sort.h"
#include "tokprof/format.h"
#include "model/analysis.h"
#include "model/classes.h"
#include "model/libcalls.h"
#include "model/model.h"
#include "model/moe.h"

/* The X-macros of columns.def made into specs and cells; CELL_OF names the table's enum. */
#define SPEC_NUM(name, type, where, nul, has, value, fnull, doc)                                   \
    {#name, TKP_CT_##type, TKP_CW_##where, nul, fnull, doc},
#define SPEC_STR(name, where, nul, value, doc) {#name, TKP_CT_STR, TKP_CW_##where, nul, 0, doc},
#define CELL_NUM(name, type, where, nul, has, value, fnull, doc)                                   \
    case CELL_OF(name):                                                                            \
        CELL_##type(value);                                                                        \
        return (has) != 0;
#define CELL_U64(value) *v = (int64_t)(value)
#define CELL_I64(value) *v = (int64_t)(value)
#define CELL_F64(value)                                                                            \
    do {                                                                                           \
        double d_ = (value);                                                                       \
        memcpy(v, &d_, sizeof d_);                                                                 \
    } while (0)
#define CELL_STR(name, where, nul, value, doc)                                                     \
    case CELL_OF(name):                                                                            \
        return (*str = (value)) != NULL;

const struct tkp_colspec tkp_step_cols[TKP_SC_COUNT] = {TKP_COLS_STEPS(SPEC_NUM, SPEC_STR)};
const struct tkp_colspec tkp_class_cols[TKP_CC_COUNT] = {TKP_COLS_STEP_CLASSES(SPEC_NUM, SPEC_STR)};
const struct tkp_colspec tkp_kern_cols[TKP_KC_COUNT] = {TKP_COLS_KERNELS(SPEC_NUM, SPEC_STR)};
const struct tkp_colspec tkp_call_cols[TKP_LC_COUNT] = {TKP_COLS_CALLS(SPEC_NUM, SPEC_STR)};
const struct tkp_colspec tkp_moe_cols[TKP_MC_COUNT] = {TKP_COLS_MOE(SPEC_NUM, SPEC_STR)};

#define CELL_OF(name) TKP_SC_##name
int tkp_steprow_cell(const struct tkp_steprow *r, int col, int64_t *v, const char **str)
{
    const struct tkp_mstep *s = r->s;
    int tok = s->kind == TKP_STEP_TOKEN, closed = s->kind != TKP_MSTEP_OPEN,
        timed = tkp_mstep_timed(s);
    (void)tok, (void)closed, (void)timed;
    switch (col) {
        TKP_COLS_STEPS(CELL_NUM, CELL_STR)
    }
    return 0;
}
#undef CELL_OF

int tkp_classrow_is(const struct tkp_model *m, const struct tkp_mstep *s, int c)
{
    return c < m->nclasses && s->class_ns && (s->class_ns[c] || (s->class_n && s->class_n[c]));
}

#define CELL_OF(name) TKP_CC_##name
int tkp_classrow_cell(const struct tkp_classrow *r, int col, int64_t *v, const char **str)
{
    const struct tkp_mstep *s = r->s;
    int tok = s->kind == TKP_STEP_TOKEN;
    (void)tok;
    switch (col) {
        TKP_COLS_STEP_CLASSES(CELL_NUM, CELL_STR)
    }
    return 0;
}
#undef CELL_OF

#define CELL_OF(name) TKP_KC_##name
int tkp_kernrow_cell(const struct tkp_kernrow *r, int col, int64_t *v, const char **str)
{
    switch (col) { TKP_COLS_KERNELS(CELL_NUM, CELL_STR) }
    return 0;
}
#undef CELL_OF

#define CELL_OF(name) TKP_LC_##name
int tkp_callrow_cell(const struct tkp_callrow *r, int col, int64_t *v, const char **str, char *b)
{
    switch (col) { TKP_COLS_CALLS(CELL_NUM, CELL_STR) }
    return 0;
}
#undef CELL_OF

static uint64_t moerow_tokens(const struct tkp_moerow *r)
{
    return r->x->load[((size_t)r->r * r->x->layers + r->layer) * r->x->width + r->expert];
}

static uint64_t moerow_gpu_ns(const struct tkp_moerow *r)
{
    return r->x->ns[(size_t)r->r * r->x->width + r->expert];
}

#define CELL_OF(name) TKP_MC_##name
int tkp_moerow_cell(const struct tkp_moerow *r, int col, int64_t *v, const char **str)
{
    const struct tkp_mstep *s = r->ms;
    (void)str; /* numbers only */
    switch (col) { TKP_COLS_MOE(CELL_NUM, CELL_STR) }
    return 0;
}
#undef CELL_OF

int tkp_moerows_each(const struct tkp_libmodel *lm, const struct tkp_model *m,
                     const struct tkp_moe *x, int (*fn)(void *ctx, const struct tkp_moerow *r),
                     void *ctx)
{
    int err = 0;
    struct tkp_moerow row = {.x = x};
    for (row.r = 0; !err && row.r < x->s1 - x->s0 && x->layers; row.r++) {
        row.ls = &lm->steps[x->s0 + row.r];
        row.ms = tkp_model_step(m, row.ls->thread, row.ls->step);
        for (row.layer = 0; !err && row.layer < x->layers; row.layer++)
            for (row.expert = 0; !err && row.expert < x->width; row.expert++)
                err = fn(ctx, &row);
    }
    return err;
}

int tkp_steprows_init(struct tkp_steprows *x, const struct tkp_model *m, const struct tkp_acc *acc)
{
    char why[256];
    uint64_t *h = malloc((m->nsteps + 1) * sizeof(*h));
    size_t nh = 0;
    *x = (struct tkp_steprows){.m = m, .acc = acc};
    x->gpu = tkp_model_gpu(m, why, sizeof(why));
    if (acc) {
        x->tok = malloc((m->nsteps + 1) * sizeof(*x->tok));
        x->src = malloc((m->nsteps + 1) * sizeof(*x->src));
    }
    if (!h || (acc && (!x->tok || !x->src)) || tkp_model_norms(m, &x->nr)) {
        free(h), free(x->tok), free(x->src);
        *x = (struct tkp_steprows){0};
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->nsteps; i++)
        if (m->steps[i].kind == TKP_STEP_TOKEN) h[nh++] = tkp_mstep_host_ns(&m->steps[i]);
    tkp_sort_u64(h, nh);
    x->slow = nh ? tkp_pct_sorted(h, nh, TKP_SLOW_PCT) : UINT64_MAX;
    free(h);
    if (acc) tkp_step_tokens(m, acc, x->tok, x->src);
    return 0;
}

void tkp_steprows_free(struct tkp_steprows *x)
{
    if (x->m) tkp_norms_free(&x->nr);
    free(x->tok), free(x->src);
    *x = (struct tkp_steprows){0};
}

void tkp_steprow_fill(const struct tkp_steprows *x, const struct tkp_mstep *s,
                      const struct tkp_astep *as, uint64_t tok, int src, int has_gap_before,
                      int64_t gap_before, uint64_t itl, struct tkp_steprow *r)
{
    const struct tkp_model *m = x->m;
    int tokstep = s->kind == TKP_STEP_TOKEN, top = tkp_mstep_top_class(m, s);
    int64_t by;
    *r = (struct tkp_steprow){.m = m, .s = s, .tokens = tok, .tok_src = src};
    r->anomaly = tkp_mstep_anomaly(&x->nr, s);
    r->top_class = top < 0 ? NULL : tkp_classes_name(m->opts.classes, top);
    r->phase = tokstep && as->kind != TKP_KIND_UNKNOWN ? tkp_step_class_str(as->kind) : NULL;
    /* the cause of a slow token step: flagged, or at or above the slow percentile */
    if (tokstep && (r->anomaly || tkp_mstep_host_ns(s) >= x->slow))
        r->cause = tkp_mstep_cause(m, &x->nr, x->gpu, s, &by);
    r->has_gap_before = has_gap_before, r->gap_before_ns = gap_before;
    r->itl_ns = itl;
}

void tkp_steprows_at(const struct tkp_steprows *x, size_t i, struct tkp_steprow *r)
{
    const struct tkp_model *m = x->m;
    const struct tkp_mstep *s = &m->steps[i], *b = i ? &m->steps[i - 1] : NULL;
    struct tkp_astep as;
    tkp_acc_step_of(x->acc, m, i, &as);
    int gb = b && b->thread == s->thread && b->has_gap;
    tkp_steprow_fill(x, s, &as, x->tok[i], x->src[i], gb, gb ? b->gap_ns : 0, s->itl_ns, r);
}
