/* tokprof check: the evaluator (eval.c), running lowered programs over the trace model. */
#ifndef TKP_CHECK_EVAL_H
#define TKP_CHECK_EVAL_H

#include "check/prog.h"

/* Evaluation (eval.c). */
struct tkp_val tkp_eval_prog(struct tkp_eval *E, int prog);
int tkp_truth(struct tkp_eval *E, int prog); /* 1 true, 0 false, -1 unknown */
/* A program's straight form (prog.h struct tkp_nbound): what tkp_truth gives for it. */
int tkp_run_bound(struct tkp_eval *E, const struct tkp_nbound *b);
/* A delta form's (b->delta) verdict on its field's value, given: type t (VT_NUM, VT_UNK), d. */
int tkp_bound_delta(struct tkp_eval *E, const struct tkp_nbound *b, int t, double d);

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
    return c->prog < 0 || tkp_truth(E, c->prog) == 1;
}

#endif
