/* tokprof check: the compiled form of a spec (docs/SPEC.md "Evaluation").
 *
 * lower.c turns the checked tree into flat postfix programs, one per place the monitor evaluates
 * (an assertion's body and guard, a bound's operands, an aggregate's selection and value, a
 * class), and plans how each step aggregate is folded. eval.c runs the programs: one loop over
 * an instruction array and a value stack, no recursion through the tree. A program of numbers
 * and truth values without strings runs on a number and its type, with common instruction
 * pairs fused (run_num), and one that is a bound between fields, constants and `prev`s of
 * fields (struct tkp_nbound) without a stack (run_bound).
 *
 * Atoms. A Boolean test that reads only a record's discrete fields (kind, name, op, lib, dir,
 * sync, async) — a class such as `r.kind == kernel and r.name =~ /attention/`, a regex on a
 * name — has one value per record *shape*. Its value is computed once per distinct shape (the
 * name and op strings, which the reader interns, and the small fields) and kept in a table, so a
 * record pays one table lookup for all such tests together, never a regexec or a strcmp.
 *
 * Shape verdicts. A record-level assertion whose formula is Boolean over atoms and temporal
 * operators is also evaluated once per shape, with the temporal operators' values left open:
 * when the shape leaves every temporal state as it is (`once P` with P false, ...) and the
 * formula holds whatever those values are, a record of that shape is a pass without running
 * it (TKP_FAST_PASS; TKP_FAST_QUIET when its guard is false). The one state change a shape
 * may make is a `once` whose operand it makes true: an unbounded `once` (or `historically`)
 * that holds from now on, or a hit of a `once` with a window or near misses that keeps no ring
 * (its latest and earliest points, the hit its near misses are measured from): its slot is set
 * in the shape's marks (eval.c tkp_shape_marks). `argmax -> once in step gemm` runs on the argmax records only. A guard
 * that is Boolean over atoms in front of a body without temporal operators is decided the same
 * way, whatever the body reads: `[record, when d2h]: r.bytes == 1` is QUIET on every shape but
 * the DtoH copies', and those alone are decoded and run. A shape whose guard such a guard
 * decides true runs the body alone (TKP_FAST_BODY: the guard is not run again). A body whose
 * temporal operators are all `prev X`, X without one (`r.host_ts - prev r.host_ts < 10ms`), is
 * QUIET where the guard is false but for its `prev`s, which must see every point: the shape's
 * pmarks name their slots, and such a record updates them with X's value alone (eval.c
 * tkp_prev_marks), without running the body; one whose X the shape decides (`prev kern`) with the
 * shape's value, without reading the record (monitor_int.h struct tkp_pdec). An implication `A -> B` that is not Boolean, A
 * Boolean over atoms and `prev`s (struct tkp_assert imp_prog), is a PASS where the shape makes A
 * false (its `prev`s updated the same way) and BODY where it makes A true: B alone, straight
 * when it is a bound, unless the body holds a `prev` (then the whole body runs). A one-byte
 * program a shape's plan runs (a body, A of such an implication) runs as its residual on the
 * shape (eval.c tkp_residual): the atoms the shape decides folded into its logic, what holds
 * state kept (`historically (api or r.host_ts >= prev r.host_ts)` on a library call: the bound,
 * for its `prev`, then true, then `historically`). */
#ifndef TKP_CHECK_PROG_H
#define TKP_CHECK_PROG_H

#include <stdio.h>

#include "base/map.h"
#include "check/trace.h"

#define TKP_ATOMS_MAX 64   /* atoms are bits of a word; tests past this run inline */
#define TKP_STACK_MAX 256  /* value stack of one program (the tree nests at most 200 deep) */
#define TKP_NEAR_TOP 3     /* near misses kept per `once` and thread */
#define TKP_FAST_MAX 32    /* record-level assertions with shape verdicts (2 bits each) */
enum { TKP_FAST_RUN = 0, TKP_FAST_QUIET = 1, TKP_FAST_PASS = 2, TKP_FAST_BODY = 3 };

enum tkp_vop {
    VO_CONST,     /* push v */
    VO_RATTR,     /* push r.<x> */
    VO_SATTR,     /* push s.<x> */
    VO_ATOM,      /* push atom x of the record */
    VO_CLASS,     /* push class x (a class that is not an atom), cached per record and step */
    VO_TOBOOL,    /* class value: true iff the top is true (an unknown field is a miss) */
    VO_FIG,       /* push --baseline figure of node */
    VO_BASE,      /* push program x's value on the baseline's run aggregates */
    VO_AGG_STEP,  /* push step aggregate slot x */
    VO_AGG_RUN,   /* push run aggregate slot x */
    VO_NEG, VO_ADD, VO_SUB, VO_MUL, VO_DIV,
    VO_EQ, VO_NE, VO_LT, VO_LE, VO_GT, VO_GE,
    VO_MATCH,     /* the top against node's regex */
    VO_NOT,
    VO_AND_L, VO_OR_L, VO_IMPL_L, /* left operand's truth; jmp >= 0: skip the right one if decided */
    VO_AND, VO_OR,                /* combine left and right */
    VO_PREV, VO_ONCE, VO_HIST, VO_SINCE, /* node's temporal state */
    VO_END,
    /* numeric programs' own (struct tkp_prog nins): a pair of the above in one instruction */
    VO_PREV_RATTR, /* RATTR x then PREV of node */
    VO_CMPK,       /* CONST v then the comparison x (VO_EQ ... VO_GE) */
    VO_ARITHK,     /* CONST v then the arithmetic x (VO_ADD ... VO_DIV) */
    /* mixed programs' own (struct tkp_prog bins) */
    VO_BOUND,      /* push the truth of program x, a comparison with a straight form */
    /* residual programs' own (eval.c tkp_residual) */
    VO_KEEP,       /* the top becomes truth v (its code ran for its state, its value is decided) */
};

struct tkp_ins {
    uint8_t op;
    uint16_t x;
    int32_t jmp;
    int node;
    struct tkp_val v;
};

/* A numeric program that is one comparison, or a conjunction of up to TKP_NB_MAX comparisons
 * without `prev`, whose sides are a term or two terms and an arithmetic operator; a term is a
 * constant, a record attribute or `prev` of one (`r.host_ts - prev r.host_ts < 10ms`,
 * `r.m * r.k <= N`, `r.grid >= 1 and r.block <= 1024`): evaluated straight, no stack. */
#define TKP_NB_MAX 4
struct tkp_nterm {
    uint8_t kind; /* 0 constant (t, v), 1 r.<attr>, 2 prev r.<attr> (node: the OP_PREV) */
    uint8_t t;
    uint16_t attr;
    int node;
    int slot, in_step; /* prev: the OP_PREV's state slot and `in step` */
    double v;
};
struct tkp_nside {
    struct tkp_nterm a, b;
    int op;   /* 0: a alone, else VO_ADD ... VO_DIV of a and b */
    int same; /* a is r.<attr> and b `prev` of the same attribute: the field is read once */
};
struct tkp_ncmp {
    struct tkp_nside l, r;
    int op;         /* VO_EQ ... VO_GE */
    int rk;         /* r is a lone constant (r.a.t, r.a.v) */
    uint8_t tab[3]; /* op's truth where l < r, l == r (neither less nor greater), l > r */
};
struct tkp_nbound {
    int n;
    int delta; /* one comparison `r.x - prev r.x OP constant` (its sides' same and rk) */
    int cross; /* one comparison of r.x and `prev r.x`, terms alone: 1 `r.x OP prev r.x`, 2
                  `prev r.x OP r.x` (the field read once) */
    struct tkp_ncmp c[TKP_NB_MAX];
};

struct tkp_prog {
    struct tkp_ins *ins;
    int n;
    int node;    /* the subtree it computes */
    int boolean; /* truth values only (atoms, classes, logic, temporal): runs on 1-byte values */
    int numeric; /* not Boolean, no string (no string attribute, constant or regex, no
                    aggregate or baseline value): runs on a number and a type (eval.c run_num) */
    struct tkp_ins *nins; /* numeric: the instructions run_num runs, common pairs fused */
    int attr;    /* numeric: a lone record attribute (`r.host_ts`), else -1 */
    struct tkp_nbound *bound; /* numeric: its straight form, NULL when it has none */
    int bool_prev; /* not Boolean only for `prev`s of truth values (`kern and prev kern`):
                      run_bool runs it too, but under tkp_check_general */
    /* Not Boolean, but for comparisons with straight forms (and `prev`s of truth values): the
     * program with each such comparison one VO_BOUND, which run_bool runs but under
     * tkp_check_general (`historically[...] (r.kind == api or r.host_ts >= prev r.host_ts)`);
     * NULL when it has none */
    struct tkp_ins *bins;
};

/* 1: the monitor and the evaluator take none of their numeric fast paths (numeric programs,
 * guard verdicts by shape, `prev` updates by shape), only the general interpreter: tests
 * compare the two (TOKPROF_CHECK_GENERAL=1 for `tokprof check`). */
extern int tkp_check_general;

/* A conjunction, split: atoms that must all be true, and the other conjuncts as one program
 * (prog, -1 when none). Holds iff every conjunct is true (an unknown conjunct fails it). */
struct tkp_conj {
    uint64_t atoms;
    int prog;
    int nconj;
    int run; /* the program whose truth tkp_conj_holds tests: prog's, or where prog is one class
                that is not an atom, its expression's (true where the class holds), or where
                that is atoms (among `atoms`) and one other conjunct, the other's */
    int whole; /* prog's, or the class's expression: what tkp_check_general tests */
};

/* How one step aggregate slot is folded. */
struct tkp_slotplan {
    int node;              /* the OP_AGG */
    int gpu;               /* over the step's GPU records, when its GPU phase closes */
    int stream;            /* host slot folded as its records arrive (reads nothing the step's
                              close decides: s.len, s.dur, r.token, ...) */
    struct tkp_conj sel;   /* the records it takes: count/exists: operand and where; else where */
    int value;             /* program of the value (sum, min, ...), -1 for count/exists */
    struct tkp_conj pre;   /* not streamed: the early conjuncts; records passing are buffered */
    int keep;              /* streamed, a bound's left side: keeps its first TKP_WIT_MAX
                              selected records as the witness */
    int count_atoms;       /* streamed count/exists of atoms only, no witness: a record's shape
                              is all it needs */
};

/* Near misses of one `once` (by temporal slot). */
struct tkp_nearplan {
    int on;
    int node;     /* the OP_ONCE */
    int timing;   /* has an interval: its hits outside the window are near misses */
    int nconj;    /* conjuncts of the operand scored at each point (0: none) */
    int conj[8];  /* their nodes */
    int prog[8];  /* their programs */
};

/* A step aggregate being folded over one step's records. */
struct tkp_fold {
    double acc, cnt;
    struct tkp_val first, last;
    int unknown;
    uint64_t np, cap; /* pNN: the values, in pv */
    double *pv;
    uint64_t matched;       /* keep: selected records */
    uint32_t nkeep;
    struct tkp_srec *keep;  /* keep: the first TKP_WIT_MAX of them */
};

/* A record near-satisfying a `once` operand, or its hit outside the window. */
struct tkp_near {
    int sat, nconj, fail;       /* conjuncts that held; the first that did not (node, -1) */
    int has_margin;
    double observed, bound, margin;
    int64_t point;              /* the point (distance = now - point) */
    struct tkp_srec r;          /* record level: the record */
    struct tkp_sstep s;         /* step level: the step */
};

struct tkp_code {
    struct tkp_prog *prog;
    int nprog, capprog;
    int *node_prog;            /* node -> program computing it, -1 */
    int natoms;
    int atom_node[TKP_ATOMS_MAX];
    int atom_prog[TKP_ATOMS_MAX];
    int *cls_atom;             /* class -> atom, -1 when the class is evaluated per record */
    int *cls_early;            /* class reads nothing a step's close decides */
    struct tkp_slotplan *plan; /* by step aggregate slot */
    int *run_node, *run_owner; /* by run aggregate slot: its node, its assertion */
    int *slot_node;            /* by temporal state slot: its operator */
    int host_buffer;           /* some host slot is not streamed: open steps buffer records */
    struct tkp_nearplan *near; /* by temporal slot */
};

/* The table of record shapes (eval.c fills it). */
struct tkp_shape {
    const char *name, *op;
    uint32_t small, gfalse; /* gfalse: struct tkp_srec's */
    uint64_t kn, tr, fast; /* its atoms, its shape verdicts */
    uint64_t marks[2];     /* state slots its host [0] and GPU [1] records set */
    uint64_t pmarks[2];    /* `prev` slots its host [0] and GPU [1] records update */
    /* the monitor's plan for its host records: want 0 not made yet, 1 the shape decides all
     * (pass: the record-level assertions it passes, counts: the streamed counts of atoms it adds
     * to, both by position in the monitor's lists; counts with plan too), 2 the record is decoded
     * and evaluated */
    uint8_t want;
    uint8_t plan;       /* pass, run, body hold: the monitor judges its decoded records by them */
    uint8_t pdec;       /* the monitor decides some of its host `prev`s by it (struct tkp_pdec) */
    uint8_t spare;
    /* with plan: the streamed step aggregates (by position in the monitor's list, the first 32)
     * other than counts of atoms whose selection's atoms it passes: all its records may feed */
    uint32_t takes;
    uint64_t pass, counts;
    /* host record-level assertions (by position, the first 32: plan is 0 past them) it runs;
     * of those, the ones whose guard it decides true (TKP_FAST_BODY), and false (gfalse: the
     * body runs for its temporal state, nothing is judged); valid with plan. (The entry stays
     * 128 bytes: a lookup indexes the table by it.) */
    uint32_t run, body, bodyonly;
    uint32_t col; /* its launches from a RUN's columns (check/bulk.c): 0 no, 1 the shape decides
                     all, 2 its runs are straight bounds on r.host_ts (no streamed or buffered
                     aggregate takes records), 3 decoded, judged by the plan and given to the
                     step aggregates */
    uint64_t npass; /* records of this shape that passed them all (no warm-up to tell apart):
                       added to their evaluated counts at the end */
};

struct tkp_shapes {
    struct tkp_shape *v; /* in order added */
    size_t cap, n;
    struct tkp_map ix; /* v by (name, op, small) */
    uint32_t recent[256]; /* a direct-mapped cache in front of ix: id + 1 by tkp_shape_slot */
};

/* Everything an atom may read besides the name and op strings (lower.c's disc()), packed. The
 * decoder leaves op NULL and lib 0 without has_lib, dir 0 without has_dir, sync/async 0 or 1. */
static inline uint32_t tkp_shape_small(const struct tkp_srec *r)
{
    uint32_t lib = r->lib < 4 ? r->lib : 4, dir = r->dir < 5 ? r->dir : 5;
    return r->kind | (uint32_t)r->has_lib << 4 | lib << 5 | (uint32_t)r->has_dir << 8 |
           dir << 9 | (uint32_t)r->sync << 12 | (uint32_t)r->async << 13;
}

static inline uint64_t tkp_shape_hash(const char *name, const char *op, uint32_t small)
{
    return tkp_hash_pair((uint64_t)(uintptr_t)name ^ (uint64_t)(uintptr_t)op << 7, small);
}

static inline int tkp_shape_eq(const void *ctx, uint32_t id, const void *key)
{
    const struct tkp_shape *s = &((const struct tkp_shapes *)ctx)->v[id];
    const struct tkp_shape *k = key;
    return s->name == k->name && s->op == k->op && s->small == k->small;
}

/* The entry of r's shape (its name, op, small), NULL when not in the table yet. */
static inline uint32_t tkp_shape_slot(const char *name, const char *op, uint32_t small)
{
    return (uint32_t)(((uintptr_t)name >> 4) ^ ((uintptr_t)op >> 4) ^ small) & 255;
}

static inline struct tkp_shape *tkp_shape_find(struct tkp_shapes *t, const struct tkp_srec *r)
{
    if (!t->n) return NULL;
    uint32_t *c = &t->recent[tkp_shape_slot(r->name, r->op, r->small)];
    if (*c) {
        struct tkp_shape *e = &t->v[*c - 1];
        if (e->name == r->name && e->op == r->op && e->small == r->small) return e;
    }
    struct tkp_shape k = {.name = r->name, .op = r->op, .small = r->small};
    uint64_t h = tkp_shape_hash(r->name, r->op, r->small);
    int64_t id = tkp_map_find(&t->ix, h, tkp_shape_eq, t, &k);
    if (id < 0) return NULL;
    *c = (uint32_t)id + 1;
    return &t->v[id];
}

#endif
