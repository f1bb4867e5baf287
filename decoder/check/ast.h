/* tokprof check: the spec language's syntax tree and compiled form (docs/SPEC.md).
 *
 * One struct tkp_node per expression node, in one array owned by the spec (nodes refer to each
 * other by index, so the tree is freed at once and copied with memcpy). The compiler annotates
 * nodes in place: which domain an aggregate folds over, which temporal state slot an operator
 * owns, whether a subtree needs GPU time; then lower.c compiles the tree into flat programs
 * (prog.h), which are what the monitor runs. */
#ifndef TKP_CHECK_AST_H
#define TKP_CHECK_AST_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum tkp_tok {
    TK_EOF, TK_ID, TK_NUM, TK_STR, TK_REGEX, TK_PUNCT, TK_ERR,
};

enum tkp_op {
    /* leaves */
    OP_NUM, OP_STR, OP_BOOL, OP_ATTR, OP_CLASS, OP_BASE_KEY,
    /* arithmetic, comparison, logic */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_NEG,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_MATCH,
    OP_AND, OP_OR, OP_NOT, OP_IMPLIES,
    /* past-time temporal */
    OP_PREV, OP_ONCE, OP_HIST, OP_SINCE,
    /* aggregates: per step (in s) or per run (in steps) */
    OP_AGG,
    /* baseline(expr): the expression's value on the --baseline capture */
    OP_BASE_EXPR,
    /* quantifiers (rewritten away by the compiler) */
    OP_FORALL, OP_EXISTS, OP_VAR,
};

enum tkp_agg { AG_COUNT, AG_SUM, AG_MIN, AG_MAX, AG_MEAN, AG_EXISTS, AG_FIRST, AG_LAST, AG_PCT };
enum tkp_src { SRC_STEP, SRC_RUN };
enum tkp_level { LV_RECORD, LV_STEP, LV_RUN };
/* interval units */
enum tkp_unit { U_NONE, U_STEPS, U_RECORDS, U_NS };

/* attributes of a record (r.) and of a step (s.) */
enum tkp_attr {
    A_R_ID, A_R_KIND, A_R_NAME, A_R_STREAM, A_R_STEP, A_R_TOKEN, A_R_HOST, A_R_POS, A_R_GPU_START,
    A_R_GPU_END, A_R_DUR, A_R_LIB, A_R_OP, A_R_M, A_R_N, A_R_K, A_R_BATCH, A_R_BYTES, A_R_DIR,
    A_R_SYNC, A_R_ASYNC, A_R_GRID, A_R_BLOCK, A_R_WAIT, A_R_THREAD,
    A_S_IDX, A_S_TOKEN, A_S_KIND, A_S_PHASE, A_S_LEN, A_S_START, A_S_END, A_S_MARK, A_S_DUR,
    A_S_GPU_START, A_S_GPU_END, A_S_GPU_DUR, A_S_BUSY, A_S_IDLE, A_S_MAXGAP, A_S_LAUNCHES,
    A_S_THREAD,
    A_COUNT_
};
#define TKP_ATTR_IS_STEP(a) ((a) >= A_S_IDX)

struct tkp_node {
    int op;
    uint32_t line, col; /* source position (1-based), for errors and reports */
    int a, b, c;        /* children (node indices), -1 none; AGG: a=value/pred, b=where */
    double num;         /* NUM; AGG pNN: NN; intervals: lo */
    double hi;          /* interval hi, INFINITY for '*' */
    int unit;           /* interval unit (enum tkp_unit) */
    int has_iv, in_step;
    int attr;           /* OP_ATTR */
    int agg, src;       /* OP_AGG */
    int var_is_r;       /* OP_ATTR: 1 when it reads the record, 0 the step */
    char *str;          /* STR / REGEX source / VAR name / CLASS name / BASE key */
    regex_t *re;        /* OP_MATCH with a literal regex */
    int cls;            /* OP_CLASS: class index */
    /* compiler annotations */
    int gpu;            /* subtree reads GPU time (r.dur, s.busy, ...) */
    int slot;           /* temporal state slot or aggregate slot; -1 none */
    int is_time;        /* value is a duration or timestamp in ns (for printing) */
    int temporal;       /* the subtree holds a temporal operator (no short circuit above it) */
};

struct tkp_spec_class {
    char *name;
    int expr;
    int gpu;
};

struct tkp_const {
    char *name;
    int expr;
};

struct tkp_assert {
    char *id;
    uint32_t line;
    int level;       /* enum tkp_level */
    int warn;        /* severity: warn (does not fail the run) */
    uint64_t skip;   /* warm-up token steps per thread */
    int when;        /* guard node or -1 */
    int witness;     /* witnesses / violations kept (first and worst) */
    int body;        /* formula node */
    char *src;       /* the formula's source text (for reports) */
    int gpu;         /* needs GPU records: evaluated when the step's GPU records are in */
    /* state (lower.c): per thread (temporal operators, one open step's aggregate folds and
     * witness records); per check (run aggregates, the kept violations); buffers: open steps
     * keep the records one of its aggregates may take until the step closes */
    size_t state_bytes, state_run;
    int buffers;
    int body_prog, when_prog; /* their programs (prog.h), when_prog -1 without a guard */
    int fast;        /* record level: its 2 bits in a shape's verdict word (prog.h), -1 none */
    uint64_t prevs;  /* record level, a body whose temporal operators are all `prev` of
                        operands without one (prog.h "Shape verdicts"): their state slots */
    int imp_prog;    /* record level, a body `A -> B` that is not Boolean, A Boolean over atoms
                        and `prev`s, no temporal operator but `prev`s: A's program (prog.h "Shape
                        verdicts"), else -1 */
    int cons_prog;   /* and B's: a record whose shape makes A true runs it alone, and the
                        body with `prev`s runs as A and B (eval.c tkp_truth_imp); else -1 */
};

struct tkp_spec {
    struct tkp_node *n;
    int nn, capn;
    struct tkp_spec_class *cls;
    int ncls;
    struct tkp_const *cst;
    int ncst;
    struct tkp_assert *as;
    int nas;
    int nslots_temporal; /* temporal operator states */
    int nslots_agg;      /* step aggregates (per step) */
    int nslots_run;      /* run aggregates */
    int uses_base;       /* has baseline(...) */
    struct tkp_code *code; /* the compiled programs and plans (prog.h) */
    char *text;          /* the spec's source, owned */
    const char *path;
};

/* An error at a source position: "SPEC:line:col: message". */
struct tkp_spec_err {
    uint32_t line, col;
    char msg[256];
};

int tkp_spec_node_new(struct tkp_spec *sp, int op, uint32_t line, uint32_t col);
/* Makes room for *n + 1 elements of size bytes in *p (doubling *cap, first 16): 0 or -1. */
int tkp_spec_grow(void **p, int *cap, int n, size_t size);
/* The comparison that bounds formula n through its guards (G -> F), -1 when none: its operands
 * are the observed value and the bound of a violation. */
int tkp_bound_cmp(const struct tkp_spec *sp, int n);
const char *tkp_attr_name(int attr); /* "r.dur", "s.idle_frac" */
int tkp_attr_lookup(int is_r, const char *name);
int tkp_attr_gpu(int attr);
int tkp_attr_time(int attr);
int tkp_attr_is_str(int attr);

#endif
