/* tokprof decoder: the columns of the output tables (columns.def) and the values of a steps row,
 * derived once here for every view (columns.c). */
#ifndef TKP_COLUMNS_H
#define TKP_COLUMNS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/columns.def"
#include "model/norms.h"

struct tkp_model;
struct tkp_mstep;
struct tkp_acc;
struct tkp_astep;

enum tkp_ctype { TKP_CT_U64, TKP_CT_I64, TKP_CT_F64, TKP_CT_STR };
/* columns.def's `where` */
enum tkp_cwhere { TKP_CW_ALL, TKP_CW_LOCAL, TKP_CW_FLEET, TKP_CW_GPU, TKP_CW_LOCAL_GPU, TKP_CW_TIME };

struct tkp_colspec {
    const char *name;
    int type;           /* enum tkp_ctype */
    int where;          /* enum tkp_cwhere */
    int nullable;       /* some row may leave it null */
    int64_t fleet_null; /* a null number in the fleet tables */
    const char *doc;
};

enum tkp_step_col {
#define COL_NUM(name, ...) TKP_SC_##name,
#define COL_STR(name, ...) TKP_SC_##name,
    TKP_COLS_STEPS(COL_NUM, COL_STR)
#undef COL_NUM
#undef COL_STR
        TKP_SC_COUNT
};

/* Whether the fleet tables have column c; whether the local views (the CLI's JSON and CSV, the
 * Arrow tables) have it; whether those leave it out of a capture without GPU records. */
static inline int tkp_col_fleet(const struct tkp_colspec *c)
{
    return c->where != TKP_CW_LOCAL && c->where != TKP_CW_LOCAL_GPU;
}
static inline int tkp_col_local(const struct tkp_colspec *c)
{
    return c->where != TKP_CW_FLEET;
}
static inline int tkp_col_gpu(const struct tkp_colspec *c)
{
    return c->where == TKP_CW_GPU || c->where == TKP_CW_LOCAL_GPU;
}
/* An F64 cell's number, kept in the int64 of the cell functions (below) bit for bit. */
static inline double tkp_cell_f64(int64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

/* The steps columns, by enum tkp_step_col. */
extern const struct tkp_colspec tkp_step_cols[TKP_SC_COUNT];

enum tkp_class_col {
#define COL_NUM(name, ...) TKP_CC_##name,
#define COL_STR(name, ...) TKP_CC_##name,
    TKP_COLS_STEP_CLASSES(COL_NUM, COL_STR)
#undef COL_NUM
#undef COL_STR
        TKP_CC_COUNT
};

/* The step_classes columns, by enum tkp_class_col. */
extern const struct tkp_colspec tkp_class_cols[TKP_CC_COUNT];

enum tkp_kern_col {
#define COL_NUM(name, ...) TKP_KC_##name,
#define COL_STR(name, ...) TKP_KC_##name,
    TKP_COLS_KERNELS(COL_NUM, COL_STR)
#undef COL_NUM
#undef COL_STR
        TKP_KC_COUNT
};

/* The kernels columns, by enum tkp_kern_col. */
extern const struct tkp_colspec tkp_kern_cols[TKP_KC_COUNT];

/* One row of kernels: the durations d of kernel `name` of class cls (in the fleet table, those of
 * the hour from hour_ns). */
struct tkp_dist;
struct tkp_kernrow {
    uint64_t hour_ns;                /* the fleet table's */
    const char *name, *base, *cls; /* base: the local views' */
    const struct tkp_dist *d;
    uint64_t count;  /* d->count; without GPU records, the launches */
    uint64_t all_ns; /* the GPU kernel time of the selected steps (share's whole; 0: none) */
};

/* One cell of a kernels row, as tkp_steprow_cell. */
int tkp_kernrow_cell(const struct tkp_kernrow *r, int col, int64_t *v, const char **str);

enum tkp_call_col {
#define COL_NUM(name, ...) TKP_LC_##name,
#define COL_STR(name, ...) TKP_LC_##name,
    TKP_COLS_CALLS(COL_NUM, COL_STR)
#undef COL_NUM
#undef COL_STR
        TKP_LC_COUNT
};

/* The calls columns, by enum tkp_call_col. */
extern const struct tkp_colspec tkp_call_cols[TKP_LC_COUNT];

/* One row of calls: the library calls of one (hour, lib, op, shape, types, transposes) summed
 * (fleet/table_calls.h streams them). */
struct tkp_callrow {
    uint64_t hour_ns;
    uint32_t lib; /* TKP_LIB_* */
    char *op;
    uint64_t m, n, k, batch;
    int32_t atype, btype, ctype, compute, transa, transb;
    uint64_t calls, flops, host_ns, gpu_ns;
    uint64_t timed_calls, timed_flops; /* of them, those whose kernels have GPU records */
};

/* One cell of a calls row, as tkp_steprow_cell; a word may be written into b (24 chars). */
int tkp_callrow_cell(const struct tkp_callrow *r, int col, int64_t *v, const char **str, char *b);

enum tkp_moe_col {
#define COL_NUM(name, ...) TKP_MC_##name,
#define COL_STR(name, ...) TKP_MC_##name,
    TKP_COLS_MOE(COL_NUM, COL_STR)
#undef COL_NUM
#undef COL_STR
        TKP_MC_COUNT
};

/* The moe columns, by enum tkp_moe_col. */
extern const struct tkp_colspec tkp_moe_cols[TKP_MC_COUNT];

/* One row of moe: expert `expert` of layer `layer` in the library-call step ls, the r-th step of
 * the experts x (model/moe.h: tkp_moe_find), ms its step in the step model (NULL: none). */
struct tkp_moe;
struct tkp_lstep;
struct tkp_libmodel;
struct tkp_moerow {
    const struct tkp_moe *x;
    const struct tkp_lstep *ls;
    const struct tkp_mstep *ms;
    uint32_t r, layer, expert;
};

/* One cell of a moe row, as tkp_steprow_cell. */
int tkp_moerow_cell(const struct tkp_moerow *r, int col, int64_t *v, const char **str);
/* Calls fn on every row of x (steps of lm, their steps in m) in order: step, layer, expert;
 * stops at fn's first non-zero answer and returns it. */
int tkp_moerows_each(const struct tkp_libmodel *lm, const struct tkp_model *m,
                     const struct tkp_moe *x, int (*fn)(void *ctx, const struct tkp_moerow *r),
                     void *ctx);

/* One row of step_classes: step s, class cls, the step's tokens and their source. */
struct tkp_classrow {
    const struct tkp_model *m;
    const struct tkp_mstep *s;
    int cls;
    uint64_t tokens;
    int tok_src; /* enum tkp_tok_src */
};

/* Whether step s of m has a step_classes row for class c (kernels or GPU time in it). */
int tkp_classrow_is(const struct tkp_model *m, const struct tkp_mstep *s, int c);
/* One cell of a step_classes row, as tkp_steprow_cell. */
int tkp_classrow_cell(const struct tkp_classrow *r, int col, int64_t *v, const char **str);

/* What every view shows of one step, derived once (the rules: columns.def's docs). */
struct tkp_steprow {
    const struct tkp_model *m;
    const struct tkp_mstep *s;
    uint64_t tokens;
    int tok_src;                                     /* enum tkp_tok_src */
    const char *phase, *anomaly, *cause, *top_class; /* NULL: none */
    int has_gap_before;
    int64_t gap_before_ns;
    uint64_t itl_ns; /* 0: none */
};

/* One cell of a steps row: a number in *v (an F64's bits: tkp_cell_f64) or a word in *str;
 * returns 0 when null. */
int tkp_steprow_cell(const struct tkp_steprow *r, int col, int64_t *v, const char **str);

/* What judges the steps of a model m: its norms, whether it has GPU records, the host duration
 * from which a token step counts as slow (its cause is given: TKP_SLOW_PCT), and (with an acc)
 * tokens, gap before and ITL of every step. m must be finished when acc is given. */
/* steps.cause is given for the slow token steps: flagged (over 3x the median: norms.h) or at or
 * above this percentile of the capture's token step host durations */
#define TKP_SLOW_PCT 0.99
struct tkp_steprows {
    const struct tkp_model *m;
    const struct tkp_acc *acc;
    struct tkp_norms nr;
    int gpu;
    uint64_t slow;
    uint64_t *tok; /* with acc: by step index */
    int *src;
};
int tkp_steprows_init(struct tkp_steprows *x, const struct tkp_model *m,
                      const struct tkp_acc *acc); /* 0 or NOMEM */
void tkp_steprows_free(struct tkp_steprows *x);
/* The row of m->steps[i] (x made with an acc). */
void tkp_steprows_at(const struct tkp_steprows *x, size_t i, struct tkp_steprow *r);
/* The row of step s given what came before it on its thread (a caller that writes rows while
 * the model is still fed: table_rows.c's tail): its extras as, tokens and their source, the gap
 * before it (has 0: none) and its ITL (0: none). */
void tkp_steprow_fill(const struct tkp_steprows *x, const struct tkp_mstep *s,
                      const struct tkp_astep *as, uint64_t tok, int src, int has_gap_before,
                      int64_t gap_before, uint64_t itl, struct tkp_steprow *r);

#endif
