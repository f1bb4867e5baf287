/* tokprof check: the evaluator (eval.c), running lowered programs over the trace model. */
#ifndef TKP_CHECK_EVAL_H
#define TKP_CHECK_EVAL_H

#include "check/prog.h"

/* Evaluation (eval.c). */
struct tkp_val tkp_eval_prog(struct tkp_eval *E, int prog);
int tkp_truth(struct tkp_eval *E, int prog); /* 1 true, 0 false, -1 unknown */
/* The instructions tkp_truth runs p's truth with in the one-byte interpreter (prog.h: ins when
 * Boolean, or Boolean but for `prev`s; bins), NULL when it runs another; and running them. */
const struct tkp_ins *tkp_bool_ins(const struct tkp_prog *p);
int tkp_run_bool(struct tkp_eval *E, const struct tkp_ins *ins);
/* A program's straight form (prog.h struct tkp_nbound): what tkp_truth gives for it. */
int tkp_run_bound(struct tkp_eval *E, const struct tkp_nbound *b);
/* An implication assertion's body `A -> B` with `prev`s (struct tkp_assert imp_prog, cons_prog;
 * cb: B's straight form or NULL; a_ins: A's one-byte instructions to run instead, a residual, or
 * NULL) run as its two sides, both evaluated as the whole program evaluates both when a side
 * holds a `prev`: 1 true, 0 false, -1 unknown. */
int tkp_truth_imp(struct tkp_eval *E, int imp_prog, const struct tkp_ins *a_ins, int a_form,
                  int cons_prog, const struct tkp_nbound *cb);
/* The residual of one-byte program ins (run_bool's: tkp_bool_ins) on the records of a shape
 * whose atoms are kn (known) and tr (true): each atom its truth, the logic it decides folded,
 * what holds state (`prev`, `once`, a bound with a `prev`) kept; run_bool gives it the value
 * and the state changes ins gives on such a record. NULL when no shorter (or no memory). */
struct tkp_ins *tkp_residual(const struct tkp_ins *ins, uint64_t kn, uint64_t tr);
/* Residual forms run without the interpreter's loop (tkp_run_resid), by what tkp_resid_form
 * finds in a residual: TKP_RF_PREVK `[CONST c, PREV]` (`kern and prev kern` on a kernel: the
 * `prev` fed a constant); TKP_RF_XT `[CONST c or BOUND, ONCE or HIST]` whose temporal operator
 * keeps neither a ring of values nor near misses (`historically[0 records, 100 records]
 * (api or r.host_ts >= prev r.host_ts)` on a kernel), TKP_RF_XKT the same with the bound's
 * value kept `[BOUND, KEEP c, ...]` (on a library call: its `prev` advances, the operand is
 * true); TKP_RF_RUN the others (run_bool). */
enum { TKP_RF_RUN, TKP_RF_PREVK, TKP_RF_XT, TKP_RF_XKT };
int tkp_resid_form(const struct tkp_spec *sp, const struct tkp_ins *r);
/* Residual r (of form `form`) run: what run_bool gives for it, state changes included. */
int tkp_run_resid(struct tkp_eval *E, const struct tkp_ins *r, int form);
/* 'in step': a state slot enters step `scope` (its buffers kept). */
void tkp_scope_enter(struct tkp_tstate *t, int64_t scope);

/* `prev` (state slot `slot`) at E's point: its value before (prev_out), the operand (type t,
 * number *d) kept; what eval.c's prev() does on a struct tkp_val. Inline: the straight bounds'
 * and the monitor's column path. */
static inline __attribute__((always_inline)) int tkp_prev_num(struct tkp_eval *E, int slot,
                                                              int in_step, int t, double *d)
{
    struct tkp_tstate *s = &E->ts[slot];
    if (in_step && s->scope != E->scope) tkp_scope_enter(s, E->scope);
    if (E->update) {
        struct tkp_val out = s->prev_set ? s->prev : (struct tkp_val){VT_UNK, 0, NULL};
        s->prev_first = !s->prev_set;
        s->prev = (struct tkp_val){t, t == VT_UNK ? 0 : *d, NULL};
        s->prev_set = 1;
        s->prev_out = out;
    }
    *d = s->prev_out.n;
    return s->prev_out.t;
}

/* A delta form's (b->delta: `r.x - prev r.x OP k`) verdict on r.x's value, given: type t
 * (VT_NUM, VT_UNK), number d; what tkp_run_bound computes of it. */
static inline __attribute__((always_inline)) int tkp_bound_delta(struct tkp_eval *E,
                                                                 const struct tkp_nbound *b,
                                                                 int t, double d)
{
    const struct tkp_ncmp *c = &b->c[0];
    double e = d;
    int u = tkp_prev_num(E, c->l.b.slot, c->l.b.in_step, t, &e);
    if (t == VT_UNK || u == VT_UNK) return -1;
    d -= e;
    return c->tab[(d > c->r.a.v) - (d < c->r.a.v) + 1];
}

/* tkp_truth, calling a straight form directly (the monitor's per-record judging) */
static inline int tkp_truth_fast(struct tkp_eval *E, int prog)
{
    const struct tkp_prog *p = &E->sp->code->prog[prog];
    return p->bound && !tkp_check_general ? tkp_run_bound(E, p->bound) : tkp_truth(E, prog);
}
/* A record's atoms and shape verdicts (akn, atr, fast): from the table, else computed on r (a
 * whole record) and kept. */
void tkp_atoms_fill(struct tkp_eval *E, struct tkp_srec *r);
/* Applies a shape's marks at E's point (E->ts, E->scope). */
void tkp_shape_marks(struct tkp_eval *E, uint64_t marks);
/* Updates the `prev`s in state slots `slots` at E's point (E->r, E->ts, E->scope, E->update):
 * their operands' values on E->r, as the bodies holding them would (prog.h "Shape verdicts"). */
void tkp_prev_marks(struct tkp_eval *E, uint64_t slots);
/* Of the `prev`s in state slots `slots`, those whose operand a shape with atoms kn (known) and
 * tr (true) decides (Boolean over atoms: `prev kern`): their slots; of them, *vt those whose
 * operand is true there, *vu unknown, *in_step those `in step` (monitor_int.h tkp_pdec_set
 * updates them with those values, as tkp_prev_marks would on a record of the shape, without
 * reading the record). */
uint64_t tkp_prev_decided(const struct tkp_spec *sp, uint64_t kn, uint64_t tr, uint64_t slots,
                          uint64_t *vt, uint64_t *vu, uint64_t *in_step);
int tkp_shapes_new(struct tkp_shapes **out);
void tkp_shapes_free(struct tkp_shapes *t);
size_t tkp_shapes_count(const struct tkp_shapes *t);

/* Runs the program computing node (lower.c made one for every node the monitor evaluates). */
struct tkp_val tkp_eval(struct tkp_eval *E, int node);
/* A Boolean verdict: 1 true, 0 false, -1 unknown. */
int tkp_eval_bool(struct tkp_eval *E, int node);
/* The value of attribute attr (enum tkp_attr) of E's record (is_r) or step; unknown when none
 * is bound. */
struct tkp_val tkp_attr_value(const struct tkp_eval *E, int attr, int is_r);
/* r.kind as a word. */
const char *tkp_rkind_str(uint32_t k);
const char *tkp_phase_str(int ph);

/* c holds for record E->r */
static inline int tkp_conj_holds(struct tkp_eval *E, const struct tkp_conj *c)
{
    if (c->atoms) {
        struct tkp_srec *r = E->r;
        if (!r) return 0;
        if (!r->atoms_ok) tkp_atoms_fill(E, r);
        if ((r->akn & r->atr & c->atoms) != c->atoms) return 0;
    }
    int p = tkp_check_general ? c->whole : c->run;
    return p < 0 || tkp_truth(E, p) == 1;
}

#endif
