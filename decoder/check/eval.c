/* tokprof check: the evaluator, three-valued (true, false, unknown): a loop over one program's
 * instructions (prog.h) and a value stack.
 *
 * Temporal operators follow Havelund and Rosu's dynamic programming for past-time LTL (as in
 * DejaVu): each keeps its state from the previous point and updates it once per point, so a
 * program never short-circuits over a subtree that holds one (E->update says whether this
 * evaluation is the point's one update). Metric bounds keep O(1) state: [0,b] the latest hit,
 * [a,*] the earliest, and bounded [a,b] in steps or records a ring of b+1 values.
 *
 * Atoms (Boolean tests of a record's discrete fields) are computed once per record shape and
 * kept in a table keyed by the shape: the name and op strings (the reader interns them: one
 * pointer per distinct string of a process, alive until it closes) and the small fields. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/map.h"
#include "check/prog.h"
#include "check/eval.h"

static const struct tkp_val UNK = {VT_UNK, 0, NULL};

int tkp_check_general;

static struct tkp_val num(double v) { return (struct tkp_val){VT_NUM, v, NULL}; }
static struct tkp_val boolv(int v) { return (struct tkp_val){VT_BOOL, v, NULL}; }
static struct tkp_val str(const char *s) { return s ? (struct tkp_val){VT_STR, 0, s} : UNK; }

const char *tkp_rkind_str(uint32_t k)
{
    static const char *const w[RK_COUNT_] = {"kernel", "graph", "memcpy", "memset", "sync",
                                             "event", "wait", "nvtx", "marker", "api"};
    return k < RK_COUNT_ ? w[k] : "?";
}

const char *tkp_phase_str(int ph)
{
    static const char *const w[] = {"unknown", "prefill", "decode", "mixed"};
    return w[ph & 3];
}

static const char *lib_str(uint32_t lib)
{
    return lib == 1 ? "cublas" : lib == 2 ? "cublasLt" : lib == 3 ? "cudnn" : NULL;
}

static const char *dir_str(uint32_t d)
{
    static const char *const w[] = {"HtoH", "HtoD", "DtoH", "DtoD", "default"};
    return d < 5 ? w[d] : NULL;
}

static struct tkp_val rattr(const struct tkp_srec *r, int a)
{
    switch (a) {
    case A_R_ID: return num((double)r->id);
    case A_R_KIND: return str(tkp_rkind_str(r->kind));
    case A_R_NAME: return str(r->name);
    case A_R_STREAM: return num((double)r->stream);
    case A_R_STEP: return num((double)r->step);
    case A_R_TOKEN: return num((double)r->token);
    case A_R_HOST: return r->host_ns ? num((double)r->host_ns) : UNK;
    case A_R_POS: return r->is_gpu ? UNK : num(r->pos);
    case A_R_GPU_START: return r->gpu_end ? num((double)r->gpu_start) : UNK;
    case A_R_GPU_END: return r->gpu_end ? num((double)r->gpu_end) : UNK;
    case A_R_DUR: return r->gpu_end ? num((double)(r->gpu_end - r->gpu_start)) : UNK;
    case A_R_LIB: return r->has_lib ? str(lib_str(r->lib)) : UNK;
    case A_R_OP: return r->has_lib ? str(r->op) : UNK;
    case A_R_M: return r->has_lib && r->m ? num((double)r->m) : UNK;
    case A_R_N: return r->has_lib && r->n ? num((double)r->n) : UNK;
    case A_R_K: return r->has_lib && r->k ? num((double)r->k) : UNK;
    case A_R_BATCH: return r->has_lib && r->batch ? num((double)r->batch) : UNK;
    case A_R_BYTES: return num((double)r->bytes);
    case A_R_DIR: return r->has_dir ? str(dir_str(r->dir)) : UNK;
    case A_R_SYNC: return boolv(r->sync);
    case A_R_ASYNC: return boolv(r->async);
    case A_R_GRID: return r->grid ? num(r->grid) : UNK;
    case A_R_BLOCK: return r->block ? num(r->block) : UNK;
    case A_R_WAIT: return r->kind == RK_SYNC ? num((double)r->wait_ns) : UNK;
    case A_R_THREAD: return num(r->thread);
    }
    return UNK;
}

static struct tkp_val sattr(const struct tkp_sstep *s, int a)
{
    int g = s->has_gpu;
    switch (a) {
    case A_S_IDX: return num((double)s->idx);
    case A_S_TOKEN: return num((double)s->token);
    case A_S_KIND: return str("token");
    case A_S_PHASE: return str(tkp_phase_str(s->phase));
    case A_S_LEN: return num((double)s->len);
    case A_S_START: return num((double)s->start);
    case A_S_END: return num((double)s->end);
    case A_S_MARK: return num((double)s->mark);
    case A_S_DUR: return num((double)(s->end - s->start));
    case A_S_GPU_START: return g ? num((double)s->gpu_start) : UNK;
    case A_S_GPU_END: return g ? num((double)s->gpu_end) : UNK;
    case A_S_GPU_DUR: return g ? num((double)(s->gpu_end - s->gpu_start)) : UNK;
    case A_S_BUSY: return g ? num((double)s->busy) : UNK;
    case A_S_IDLE:
        return g && s->gpu_end > s->gpu_start
                   ? num(1.0 - (double)s->busy / (double)(s->gpu_end - s->gpu_start))
                   : UNK;
    case A_S_MAXGAP: return g ? num((double)s->maxgap) : UNK;
    case A_S_LAUNCHES: return num((double)s->launches);
    case A_S_THREAD: return num(s->thread);
    }
    return UNK;
}

struct tkp_val tkp_attr_value(const struct tkp_eval *E, int attr, int is_r)
{
    if (is_r) return E->r ? rattr(E->r, attr) : UNK;
    return E->s ? sattr(E->s, attr) : UNK;
}

static int truth(struct tkp_val v)
{
    if (v.t == VT_BOOL || v.t == VT_NUM) return v.n != 0;
    return -1;
}

static int cmpv(int op, struct tkp_val a, struct tkp_val b)
{
    if (a.t == VT_UNK || b.t == VT_UNK) return -1;
    int c;
    if (a.t == VT_STR || b.t == VT_STR) {
        if (a.t != b.t) return op == VO_NE;
        c = strcmp(a.s, b.s);
    } else {
        c = a.n < b.n ? -1 : a.n > b.n;
    }
    switch (op) {
    case VO_EQ: return c == 0;
    case VO_NE: return c != 0;
    case VO_LT: return c < 0;
    case VO_LE: return c <= 0;
    case VO_GT: return c > 0;
    default: return c >= 0;
    }
}

static struct tkp_val arith(int op, struct tkp_val a, struct tkp_val b)
{
    if ((a.t != VT_NUM && a.t != VT_BOOL) || (b.t != VT_NUM && b.t != VT_BOOL)) return UNK;
    switch (op) {
    case VO_ADD: return num(a.n + b.n);
    case VO_SUB: return num(a.n - b.n);
    case VO_MUL: return num(a.n * b.n);
    default: return b.n == 0 ? UNK : num(a.n / b.n);
    }
}

static struct tkp_val tri(int t) { return t < 0 ? UNK : boolv(t); }

/* three-valued logic on 1 true, 0 false, -1 unknown */
static int not3(int l) { return l < 0 ? -1 : !l; }
static int and3(int l, int r) { return l == 0 || r == 0 ? 0 : (l < 0 || r < 0) ? -1 : 1; }
static int or3(int l, int r) { return l == 1 || r == 1 ? 1 : (l < 0 || r < 0) ? -1 : 0; }

/* ---- temporal operators ---- */

/* 'in step': the operator sees only the current step's points (its buffers are kept) */
void tkp_scope_enter(struct tkp_tstate *t, int64_t scope)
{
    uint8_t *ring = t->ring;
    uint32_t len = t->ring_len;
    struct tkp_near *near = t->near;
    memset(t, 0, sizeof(*t));
    t->ring = ring, t->ring_len = len, t->near = near;
    t->scope = scope;
}

/* the time or index of the current point in the interval's unit */
static int64_t at(const struct tkp_eval *E, const struct tkp_node *x)
{
    return x->unit == U_NS ? E->now_ns : E->point;
}

static int in_window(const struct tkp_node *x, int64_t now, int64_t then)
{
    double d = (double)(now - then);
    return d >= x->num && d <= x->hi;
}

/* once / historically over a ring of the last b+1 operand values (bounded [a,b]) */
static int ring_once(struct tkp_tstate *t, const struct tkp_node *x, int64_t now, int v)
{
    uint32_t len = (uint32_t)x->hi + 1;
    if (!t->ring_used) {
        if (!t->ring && !(t->ring = malloc(len))) return -1;
        memset(t->ring, 0, len);
        t->ring_len = len;
        t->ring_at = now - 1;
        t->ring_used = 1;
    }
    /* clear the slots of points skipped since the last update */
    for (int64_t p = t->ring_at + 1; p < now && p - t->ring_at <= len; p++)
        t->ring[(uint64_t)p % len] = 0;
    t->ring[(uint64_t)now % len] = v == 1 ? 1 : 0;
    t->ring_at = now;
    for (int64_t d = (int64_t)x->num; d <= (int64_t)x->hi && d <= now; d++)
        if (t->ring[(uint64_t)(now - d) % len]) return 1;
    return 0;
}

/* once / historically (v: the operand), since (l since v) */
static int temporal(struct tkp_eval *E, const struct tkp_node *x, int l, int v)
{
    struct tkp_tstate *t = &E->ts[x->slot];
    if (x->in_step && t->scope != E->scope) tkp_scope_enter(t, E->scope);
    int64_t now = at(E, x);
    if (x->op == OP_SINCE) {
        if (E->update) {
            if (v == 1) {
                if (!(t->valid && l == 1)) t->first = now;
                t->last = now;
                t->valid = 1;
            } else if (l != 1) {
                t->valid = 0;
            }
        }
        if (!t->valid) return 0;
        if (!x->has_iv) return 1;
        /* [0,b]: the latest hit; [a,*]: the earliest one still chained */
        if (isfinite(x->hi)) return (double)(now - t->last) <= x->hi;
        return (double)(now - t->first) >= x->num;
    }
    if (x->op == OP_HIST) v = v < 0 ? -1 : !v; /* historically P = not once not P */
    int res;
    if (x->has_iv && x->num > 0 && isfinite(x->hi)) {
        res = E->update ? ring_once(t, x, now, v) : 0;
    } else {
        if (E->update && v == 1) {
            if (!t->valid) t->first = now;
            t->last = now;
            t->valid = 1;
        }
        if (!t->valid) res = 0;
        else if (!x->has_iv) res = 1;
        else if (isfinite(x->hi)) res = (double)(now - t->last) <= x->hi;
        else res = in_window(x, now, t->first);
    }
    if (x->op == OP_HIST) return !res;
    const struct tkp_nearplan *np = &E->sp->code->near[x->slot];
    if (E->update && np->on && E->near_note) E->near_note(E, np, t, v, now);
    return res;
}

static struct tkp_val prev(struct tkp_eval *E, const struct tkp_node *x, struct tkp_val v)
{
    struct tkp_tstate *t = &E->ts[x->slot];
    if (x->in_step && t->scope != E->scope) tkp_scope_enter(t, E->scope);
    /* A re-read (a witness's operands, after the point was evaluated) sees what the point saw:
     * the value before this point's update, not the point's own */
    if (!E->update) return t->prev_out;
    struct tkp_val out = t->prev_set ? t->prev : UNK;
    t->prev_first = !t->prev_set;
    t->prev = v;
    t->prev_set = 1;
    t->prev_out = out;
    return out;
}

/* once / historically of operand truth l (i->x: unbounded without near misses, one bit) */
static inline int once_op(struct tkp_eval *E, const struct tkp_ins *i, int l)
{
    const struct tkp_node *x = &E->sp->n[i->node];
    if (!i->x) return temporal(E, x, 0, l);
    struct tkp_tstate *t = &E->ts[x->slot];
    if (x->in_step && t->scope != E->scope) tkp_scope_enter(t, E->scope);
    if (i->op == VO_HIST) l = not3(l);
    if (E->update && l == 1) t->valid = 1;
    return i->op == VO_HIST ? !t->valid : t->valid;
}

/* ---- atoms: record tests computed once per record shape ---- */

#define SHAPES_MAX (1u << 16) /* distinct shapes cached; past this, atoms run per record */

int tkp_shapes_new(struct tkp_shapes **out)
{
    struct tkp_shapes *t = calloc(1, sizeof(*t));
    *out = t;
    return t ? 0 : TKP_ERR_NOMEM;
}

void tkp_shapes_free(struct tkp_shapes *t)
{
    if (t) free(t->v), tkp_map_free(&t->ix);
    free(t);
}

size_t tkp_shapes_count(const struct tkp_shapes *t) { return t ? t->n : 0; }

static struct tkp_val run(struct tkp_eval *E, const struct tkp_prog *p);

/* The value of Boolean program p on a record's shape, with what the record does not decide
 * (temporal operators' values, classes evaluated per record) open: 2. *noop stays 1 while
 * every temporal operator it reaches leaves its state as it is, or is an unbounded `once`
 * (`historically`) that the shape makes hold (fail): those are added to *marks. */
static inline int atom(struct tkp_eval *E, int k);

static int probe(struct tkp_eval *E, const struct tkp_prog *p, int *noop, uint64_t *marks)
{
    int8_t st[TKP_STACK_MAX];
    int k = 0, l, r;
    for (const struct tkp_ins *i = p->ins;; i++) {
        switch (i->op) {
        case VO_CONST: st[k++] = (int8_t)truth(i->v); break;
        case VO_ATOM: st[k++] = (int8_t)atom(E, i->x); break;
        case VO_TOBOOL: if (st[k - 1] != 2) st[k - 1] = E->r && st[k - 1] == 1; break;
        case VO_PREV: st[k - 1] = 2; break; /* the previous point's: open */
        case VO_NOT: if (st[k - 1] != 2) st[k - 1] = (int8_t)not3(st[k - 1]); break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L:
            l = st[k - 1];
            if (i->op == VO_IMPL_L && l != 2) st[k - 1] = (int8_t)(l = not3(l));
            if (i->jmp >= 0 && l == (i->op == VO_AND_L ? 0 : 1)) i = p->ins + i->jmp - 1;
            break;
        case VO_AND: case VO_OR:
            k--, l = st[k - 1], r = st[k];
            if (i->op == VO_AND)
                st[k - 1] = (int8_t)(l == 0 || r == 0 ? 0 : l == 2 || r == 2 ? 2 : and3(l, r));
            else st[k - 1] = (int8_t)(l == 1 || r == 1 ? 1 : l == 2 || r == 2 ? 2 : or3(l, r));
            break;
        case VO_ONCE: case VO_HIST: {
            /* once updates on a true operand, historically on a false one; near misses see
             * every point where they score conjuncts, else only the hits (a window's hit
             * outside it: tkp_near_note returns at once for the rest). A `once` whose operand
             * the shape makes true is a mark (tkp_shape_marks): one bit of state, or a hit
             * (its latest and earliest points, its near misses' hit) unless it keeps a ring of
             * values (bounded [a,b], a > 0) */
            const struct tkp_node *x = &E->sp->n[i->node];
            int slot = x->slot, ring = x->has_iv && x->num > 0 && isfinite(x->hi);
            const struct tkp_nearplan *np = &E->sp->code->near[slot];
            l = st[k - 1];
            if (l == 2 || (i->op == VO_ONCE && np->on && l != 1 && np->nconj)) *noop = 0;
            else if (l == (i->op == VO_ONCE ? 1 : 0)) {
                if (slot < 64 && (i->x || (i->op == VO_ONCE && !ring && !tkp_check_general)))
                    *marks |= 1ull << slot;
                else *noop = 0;
            }
            st[k - 1] = 2;
            break;
        }
        case VO_SINCE:
            k--, l = st[k - 1], r = st[k];
            if (r != 0 && r != -1) *noop = 0; /* a hit (or an open right side) */
            if (l != 1) *noop = 0;            /* an open or failing left side may reset it */
            st[k - 1] = 2;
            break;
        case VO_END: return st[0];
        default: st[k++] = 2; break; /* VO_CLASS: per record */
        }
    }
}

/* What a shape decides of each record-level assertion (prog.h "Shape verdicts"). */
static void shape_verdicts(struct tkp_eval *E, struct tkp_srec *r)
{
    const struct tkp_spec *sp = E->sp;
    r->fast = r->marks[0] = r->marks[1] = r->pmarks[0] = r->pmarks[1] = 0;
    r->gfalse = 0;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        if (a->fast < 0) continue;
        uint64_t marks = 0, gmarks = 0; /* a guard's operators change only past the warm-up */
        const struct tkp_prog *body = &sp->code->prog[a->body_prog];
        /* a body that is not Boolean has no temporal operator but `prev`s (lower.c): open, 2 */
        int noop = 1, gnoop = 1, v = body->boolean ? probe(E, body, &noop, &marks) : 2, g = 1;
        /* `A -> B` (lower.c imp_prog): where the shape makes A false the body holds whatever B
         * is (its `prev`s still see the record: pmarks), where it makes A true the body is B
         * (TKP_FAST_BODY runs B alone when it has no `prev`: monitor.c tkp_eval_shape) */
        int ia = a->imp_prog >= 0 ? probe(E, &sp->code->prog[a->imp_prog], &noop, &marks) : -1;
        if (ia == 0) v = 1;
        if (!body->boolean && a->prevs) noop = 0;
        if (a->when_prog >= 0) g = probe(E, &sp->code->prog[a->when_prog], &gnoop, &gmarks);
        if (!gnoop || gmarks || g == 2) continue; /* TKP_FAST_RUN: the guard runs */
        int f = TKP_FAST_RUN;
        if (g == 1 && noop && v == 1) f = TKP_FAST_PASS;
        else if (g == 1 && ia == 0 && !tkp_check_general) {
            f = TKP_FAST_PASS; /* but for the `prev`s */
            r->pmarks[a->gpu != 0] |= a->prevs;
        } else if (g == 1) f = tkp_check_general || ia == 2 ? TKP_FAST_RUN : TKP_FAST_BODY;
        else if (noop) f = TKP_FAST_QUIET;
        else if (a->prevs && !body->boolean && !tkp_check_general) {
            f = TKP_FAST_QUIET; /* but for the `prev`s */
            r->pmarks[a->gpu != 0] |= a->prevs;
        }
        if (f == TKP_FAST_RUN) {
            /* the body advances its state; the guard's false needs no run */
            if (g == 0 && !tkp_check_general) r->gfalse |= 1u << a->fast;
            continue;
        }
        r->fast |= (uint64_t)f << (2 * a->fast);
        if (f != TKP_FAST_BODY) r->marks[a->gpu != 0] |= marks;
    }
}

void tkp_shape_marks(struct tkp_eval *E, uint64_t marks)
{
    const struct tkp_spec *sp = E->sp;
    for (; marks; marks &= marks - 1) {
        int slot = __builtin_ctzll(marks);
        struct tkp_tstate *t = &E->ts[slot];
        const struct tkp_node *x = &sp->n[sp->code->slot_node[slot]];
        if (x->in_step && t->scope != E->scope) tkp_scope_enter(t, E->scope);
        const struct tkp_nearplan *np = &sp->code->near[slot];
        if (x->op != OP_ONCE || (!x->has_iv && !np->on)) {
            t->valid = 1; /* one bit (once_op) */
            continue;
        }
        /* a hit, as temporal() takes it */
        int64_t now = at(E, x);
        if (!t->valid) t->first = now;
        t->last = now;
        t->valid = 1;
        if (np->on && E->near_note) E->near_note(E, np, t, 1, now);
    }
}

/* A shape not in the table: every atom, once (they read the record only, never the step);
 * then the table keeps it (growing first), unless it is full. */
static __attribute__((noinline)) void atoms_eval(struct tkp_eval *E, struct tkp_srec *r)
{
    const struct tkp_code *c = E->sp->code;
    struct tkp_eval A = {.sp = E->sp, .r = r, .figures = E->figures};
    r->akn = r->atr = 0;
    for (int k = 0; k < c->natoms; k++) {
        int v = truth(run(&A, &c->prog[c->atom_prog[k]]));
        if (v >= 0) r->akn |= 1ull << k;
        if (v == 1) r->atr |= 1ull << k;
    }
    shape_verdicts(&A, r);
    struct tkp_shapes *t = E->shapes;
    if (!t || t->n >= SHAPES_MAX) return;
    if (TKP_GROW_FROM(t->v, t->cap, t->n + 1, 256) ||
        tkp_map_add(&t->ix, tkp_shape_hash(r->name, r->op, r->small), (uint32_t)t->n))
        return;
    t->v[t->n++] = (struct tkp_shape){.name = r->name,
                                      .op = r->op,
                                      .small = r->small,
                                      .gfalse = r->gfalse,
                                      .kn = r->akn,
                                      .tr = r->atr,
                                      .fast = r->fast,
                                      .marks = {r->marks[0], r->marks[1]},
                                      .pmarks = {r->pmarks[0], r->pmarks[1]}};
}

void tkp_atoms_fill(struct tkp_eval *E, struct tkp_srec *r)
{
    const struct tkp_shape *s = E->shapes ? tkp_shape_find(E->shapes, r) : NULL;
    r->atoms_ok = 1;
    if (!s) {
        atoms_eval(E, r);
        return;
    }
    r->akn = s->kn, r->atr = s->tr, r->fast = s->fast;
    r->marks[0] = s->marks[0], r->marks[1] = s->marks[1];
    r->pmarks[0] = s->pmarks[0], r->pmarks[1] = s->pmarks[1];
    r->gfalse = s->gfalse;
}

static inline int atom(struct tkp_eval *E, int k)
{
    struct tkp_srec *r = E->r;
    if (!r) return truth(run(E, &E->sp->code->prog[E->sp->code->atom_prog[k]]));
    if (!r->atoms_ok) tkp_atoms_fill(E, r);
    return r->akn >> k & 1 ? (int)(r->atr >> k & 1) : -1;
}

/* A class that is not an atom: one evaluation per record and step, whatever tests it. */
static int class_test(struct tkp_eval *E, int cls)
{
    if (!E->r) return 0;
    if (E->cls_r != E->r || E->cls_s != E->s) {
        E->cls_r = E->r;
        E->cls_s = E->s;
        E->cls_done = 0;
    }
    uint64_t bit = cls < 64 ? 1ull << cls : 0;
    if (E->cls_done & bit) return (E->cls_val & bit) != 0;
    int t = tkp_eval_bool(E, E->sp->cls[cls].expr) == 1;
    /* (a class may test earlier classes: they share the cache) */
    if (bit && E->cls_r == E->r && E->cls_s == E->s) {
        E->cls_done |= bit;
        E->cls_val = t ? E->cls_val | bit : E->cls_val & ~bit;
    }
    return t; /* an unknown field makes a class miss, not match */
}

/* ---- the loop ---- */

/* A record's numeric attribute (tkp_attr_is_str false) as rattr computes it, without a
 * struct tkp_val: 0 unknown, VT_NUM or VT_BOOL, the number in *d. */
static inline __attribute__((always_inline)) int rnum(const struct tkp_srec *r, int a, double *d)
{
    switch (a) {
    case A_R_ID: *d = (double)r->id; return VT_NUM;
    case A_R_STREAM: *d = (double)r->stream; return VT_NUM;
    case A_R_STEP: *d = (double)r->step; return VT_NUM;
    case A_R_TOKEN: *d = (double)r->token; return VT_NUM;
    case A_R_HOST: *d = (double)r->host_ns; return r->host_ns ? VT_NUM : VT_UNK;
    case A_R_POS: *d = r->pos; return r->is_gpu ? VT_UNK : VT_NUM;
    case A_R_GPU_START: *d = (double)r->gpu_start; return r->gpu_end ? VT_NUM : VT_UNK;
    case A_R_GPU_END: *d = (double)r->gpu_end; return r->gpu_end ? VT_NUM : VT_UNK;
    case A_R_DUR: *d = (double)(r->gpu_end - r->gpu_start); return r->gpu_end ? VT_NUM : VT_UNK;
    case A_R_M: *d = (double)r->m; return r->has_lib && r->m ? VT_NUM : VT_UNK;
    case A_R_N: *d = (double)r->n; return r->has_lib && r->n ? VT_NUM : VT_UNK;
    case A_R_K: *d = (double)r->k; return r->has_lib && r->k ? VT_NUM : VT_UNK;
    case A_R_BATCH: *d = (double)r->batch; return r->has_lib && r->batch ? VT_NUM : VT_UNK;
    case A_R_BYTES: *d = (double)r->bytes; return VT_NUM;
    case A_R_SYNC: *d = r->sync; return VT_BOOL;
    case A_R_ASYNC: *d = r->async; return VT_BOOL;
    case A_R_GRID: *d = r->grid; return r->grid ? VT_NUM : VT_UNK;
    case A_R_BLOCK: *d = r->block; return r->block ? VT_NUM : VT_UNK;
    case A_R_WAIT: *d = (double)r->wait_ns; return r->kind == RK_SYNC ? VT_NUM : VT_UNK;
    case A_R_THREAD: *d = r->thread; return VT_NUM;
    }
    return VT_UNK;
}

/* A numeric program (prog.h): the same instructions as run's, on a number and its type
 * (VT_UNK, VT_NUM, VT_BOOL) in two arrays: no string, no struct tkp_val but at `prev`'s state
 * (which a witness's re-read through run() sees). Every case computes what run's does. */
static __attribute__((noinline)) int run_num(struct tkp_eval *E, const struct tkp_prog *p, double *out)
{
    const struct tkp_spec *sp = E->sp;
    double v[TKP_STACK_MAX];
    uint8_t t[TKP_STACK_MAX];
    int k = 0, l, r, c, op;
    for (const struct tkp_ins *i = p->nins;; i++) {
        switch (i->op) {
        case VO_CONST: v[k] = i->v.n, t[k++] = (uint8_t)i->v.t; break;
        case VO_RATTR:
            if (E->r) t[k] = (uint8_t)rnum(E->r, i->x, &v[k]);
            else t[k] = VT_UNK;
            k++;
            break;
        case VO_SATTR: {
            struct tkp_val x = E->s ? sattr(E->s, i->x) : UNK;
            v[k] = x.n, t[k++] = (uint8_t)x.t;
            break;
        }
        case VO_ATOM:
            l = atom(E, i->x);
            t[k] = l < 0 ? VT_UNK : VT_BOOL, v[k++] = l > 0;
            break;
        case VO_CLASS: v[k] = class_test(E, i->x), t[k++] = VT_BOOL; break;
        case VO_TOBOOL:
            v[k - 1] = E->r && t[k - 1] != VT_UNK && v[k - 1] != 0, t[k - 1] = VT_BOOL;
            break;
        case VO_NEG:
            if (t[k - 1] == VT_NUM) v[k - 1] = -v[k - 1];
            else t[k - 1] = VT_UNK;
            break;
        case VO_ARITHK: case VO_ADD: case VO_SUB: case VO_MUL: case VO_DIV:
            op = i->op;
            if (op == VO_ARITHK) v[k] = i->v.n, t[k++] = (uint8_t)i->v.t, op = i->x;
            k--;
            if (t[k - 1] == VT_UNK || t[k] == VT_UNK || (op == VO_DIV && v[k] == 0)) {
                t[k - 1] = VT_UNK;
                break;
            }
            t[k - 1] = VT_NUM;
            v[k - 1] = op == VO_ADD ? v[k - 1] + v[k] : op == VO_SUB ? v[k - 1] - v[k]
                       : op == VO_MUL ? v[k - 1] * v[k] : v[k - 1] / v[k];
            break;
        case VO_CMPK: case VO_EQ: case VO_NE: case VO_LT: case VO_LE: case VO_GT: case VO_GE:
            op = i->op;
            if (op == VO_CMPK) v[k] = i->v.n, t[k++] = (uint8_t)i->v.t, op = i->x;
            k--;
            if (t[k - 1] == VT_UNK || t[k] == VT_UNK) {
                t[k - 1] = VT_UNK;
                break;
            }
            c = v[k - 1] < v[k] ? -1 : v[k - 1] > v[k];
            v[k - 1] = op == VO_EQ ? c == 0 : op == VO_NE ? c != 0 : op == VO_LT ? c < 0
                       : op == VO_LE ? c <= 0 : op == VO_GT ? c > 0 : c >= 0;
            t[k - 1] = VT_BOOL;
            break;
        case VO_NOT:
            if (t[k - 1] != VT_UNK) v[k - 1] = v[k - 1] == 0, t[k - 1] = VT_BOOL;
            break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L:
            l = t[k - 1] == VT_UNK ? -1 : v[k - 1] != 0;
            if (i->op == VO_IMPL_L) l = not3(l);
            t[k - 1] = l < 0 ? VT_UNK : VT_BOOL, v[k - 1] = l > 0;
            if (i->jmp >= 0 && l == (i->op == VO_AND_L ? 0 : 1)) i = p->nins + i->jmp - 1;
            break;
        case VO_AND: case VO_OR:
            k--;
            l = t[k - 1] == VT_UNK ? -1 : v[k - 1] != 0, r = t[k] == VT_UNK ? -1 : v[k] != 0;
            l = i->op == VO_AND ? and3(l, r) : or3(l, r);
            t[k - 1] = l < 0 ? VT_UNK : VT_BOOL, v[k - 1] = l > 0;
            break;
        case VO_PREV_RATTR: case VO_PREV: {
            if (i->op == VO_PREV_RATTR) {
                if (E->r) t[k] = (uint8_t)rnum(E->r, i->x, &v[k]);
                else t[k] = VT_UNK;
                k++;
            }
            const struct tkp_node *x = &sp->n[i->node];
            struct tkp_tstate *s = &E->ts[x->slot];
            if (x->in_step && s->scope != E->scope) tkp_scope_enter(s, E->scope);
            if (E->update) {
                struct tkp_val out = s->prev_set ? s->prev : UNK;
                s->prev_first = !s->prev_set;
                s->prev = (struct tkp_val){t[k - 1], t[k - 1] == VT_UNK ? 0 : v[k - 1], NULL};
                s->prev_set = 1;
                s->prev_out = out;
            }
            v[k - 1] = s->prev_out.n, t[k - 1] = (uint8_t)s->prev_out.t;
            break;
        }
        case VO_ONCE: case VO_HIST:
            l = once_op(E, i, t[k - 1] == VT_UNK ? -1 : v[k - 1] != 0);
            t[k - 1] = l < 0 ? VT_UNK : VT_BOOL, v[k - 1] = l > 0;
            break;
        case VO_SINCE:
            k--;
            l = temporal(E, &sp->n[i->node], t[k - 1] == VT_UNK ? -1 : v[k - 1] != 0,
                         t[k] == VT_UNK ? -1 : v[k] != 0);
            t[k - 1] = l < 0 ? VT_UNK : VT_BOOL, v[k - 1] = l > 0;
            break;
        default: /* VO_END */
            *out = t[0] == VT_UNK ? 0 : v[0];
            return t[0];
        }
    }
}

static inline __attribute__((always_inline)) int nterm(struct tkp_eval *E,
                                                       const struct tkp_nterm *x, double *d)
{
    if (!x->kind) {
        *d = x->v;
        return x->t;
    }
    *d = 0;
    int t = E->r ? rnum(E->r, x->attr, d) : VT_UNK;
    return x->kind == 1 ? t : tkp_prev_num(E, x->slot, x->in_step, t, d);
}

static inline __attribute__((always_inline)) int nside(struct tkp_eval *E,
                                                       const struct tkp_nside *s, double *d)
{
    if (!s->op) return nterm(E, &s->a, d);
    double e = 0;
    int t, u;
    if (s->same) {
        /* `r.x - prev r.x`: the field once, the `prev` fed with it */
        *d = 0;
        t = E->r ? rnum(E->r, s->a.attr, d) : VT_UNK;
        e = *d;
        u = tkp_prev_num(E, s->b.slot, s->b.in_step, t, &e);
    } else {
        t = nterm(E, &s->a, d);
        u = nterm(E, &s->b, &e); /* evaluated whatever a is: a `prev` in it must update */
    }
    if (t == VT_UNK || u == VT_UNK || (s->op == VO_DIV && e == 0)) return VT_UNK;
    *d = s->op == VO_ADD ? *d + e : s->op == VO_SUB ? *d - e : s->op == VO_MUL ? *d * e : *d / e;
    return VT_NUM;
}

/* One comparison of a straight form: 1, 0, -1 unknown. o as run_num computes it (NaN: 0). */
static inline __attribute__((always_inline)) int ncmp(struct tkp_eval *E, const struct tkp_ncmp *c)
{
    double x = 0, y = 0;
    int tx = nside(E, &c->l, &x), ty;
    if (c->rk) y = c->r.a.v, ty = c->r.a.t;
    else ty = nside(E, &c->r, &y);
    if (tx == VT_UNK || ty == VT_UNK) return -1;
    return c->tab[(x > y) - (x < y) + 1];
}

/* A cross form (struct tkp_nbound cross): r.x against `prev r.x`, the field read once, the
 * `prev` fed with it; as ncmp computes it. */
static inline __attribute__((always_inline)) int bound_cross(struct tkp_eval *E,
                                                             const struct tkp_nbound *b)
{
    const struct tkp_ncmp *c = &b->c[0];
    const struct tkp_nterm *p = c->l.a.kind == 2 ? &c->l.a : &c->r.a;
    double d = 0, e;
    int t = E->r ? rnum(E->r, p->attr, &d) : VT_UNK;
    e = d;
    int u = tkp_prev_num(E, p->slot, p->in_step, t, &e);
    if (t == VT_UNK || u == VT_UNK) return -1;
    if (b->cross == 2) {
        double x = d;
        d = e, e = x;
    }
    return c->tab[(d > e) - (d < e) + 1];
}

/* A program's straight form (prog.h struct tkp_nbound): 1 true, 0 false, -1 unknown, as
 * run_num computes it. */
int tkp_run_bound(struct tkp_eval *E, const struct tkp_nbound *b)
{
    if (b->delta) {
        double d = 0;
        int t = E->r ? rnum(E->r, b->c[0].l.a.attr, &d) : VT_UNK;
        return tkp_bound_delta(E, b, t, d);
    }
    if (b->cross) return bound_cross(E, b);
    if (b->n == 1) return ncmp(E, &b->c[0]);
    int res = 1;
    for (int j = 0; j < b->n; j++)
        res = and3(res, ncmp(E, &b->c[j]));
    return res;
}

/* A Boolean program (prog.h: its ins, or the bins of one Boolean but for straight comparisons)
 * on 1-byte truth values: same instructions, same logic. */
static int run_bool(struct tkp_eval *E, const struct tkp_ins *ins)
{
    int8_t st[TKP_STACK_MAX];
    int k = 0, l;
    for (const struct tkp_ins *i = ins;; i++) {
        switch (i->op) {
        case VO_CONST: st[k++] = (int8_t)truth(i->v); break;
        case VO_ATOM: st[k++] = (int8_t)atom(E, i->x); break;
        case VO_CLASS: st[k++] = (int8_t)class_test(E, i->x); break;
        case VO_TOBOOL: st[k - 1] = E->r && st[k - 1] == 1; break;
        case VO_NOT: st[k - 1] = (int8_t)not3(st[k - 1]); break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L:
            l = i->op == VO_IMPL_L ? not3(st[k - 1]) : st[k - 1];
            st[k - 1] = (int8_t)l;
            if (i->jmp >= 0 && l == (i->op == VO_AND_L ? 0 : 1)) i = ins + i->jmp - 1;
            break;
        case VO_AND: k--, st[k - 1] = (int8_t)and3(st[k - 1], st[k]); break;
        case VO_OR: k--, st[k - 1] = (int8_t)or3(st[k - 1], st[k]); break;
        case VO_ONCE: case VO_HIST: st[k - 1] = (int8_t)once_op(E, i, st[k - 1]); break;
        case VO_SINCE:
            k--;
            st[k - 1] = (int8_t)temporal(E, &E->sp->n[i->node], st[k - 1], st[k]);
            break;
        case VO_PREV: { /* of a truth value (bool_prev), kept as run_num keeps it */
            const struct tkp_node *x = &E->sp->n[i->node];
            struct tkp_tstate *s = &E->ts[x->slot];
            if (x->in_step && s->scope != E->scope) tkp_scope_enter(s, E->scope);
            if (E->update) {
                struct tkp_val out = s->prev_set ? s->prev : UNK;
                s->prev_first = !s->prev_set;
                l = st[k - 1];
                s->prev = (struct tkp_val){l < 0 ? VT_UNK : VT_BOOL, l > 0, NULL};
                s->prev_set = 1;
                s->prev_out = out;
            }
            st[k - 1] = (int8_t)truth(s->prev_out);
            break;
        }
        case VO_BOUND: {
            const struct tkp_nbound *b = E->sp->code->prog[i->x].bound;
            st[k++] = (int8_t)(b->cross ? bound_cross(E, b) : tkp_run_bound(E, b));
            break;
        }
        case VO_KEEP: st[k - 1] = (int8_t)truth(i->v); break;
        default: /* VO_END */
            return st[0];
        }
    }
}

static struct tkp_val run(struct tkp_eval *E, const struct tkp_prog *p)
{
    if (p->boolean) return tri(run_bool(E, p->ins));
    if (p->bins && !tkp_check_general) return tri(run_bool(E, p->bins));
    if (p->numeric && !tkp_check_general) {
        if (p->bound) return tri(tkp_run_bound(E, p->bound));
        double d;
        int t = p->attr >= 0 && E->r ? rnum(E->r, p->attr, &d) : run_num(E, p, &d);
        return t == VT_UNK ? UNK : (struct tkp_val){t, d, NULL};
    }
    const struct tkp_spec *sp = E->sp;
    struct tkp_val st[TKP_STACK_MAX];
    int k = 0, l, r;
    for (const struct tkp_ins *i = p->ins;; i++) {
        switch (i->op) {
        case VO_CONST: st[k++] = i->v; break;
        case VO_RATTR: st[k++] = E->r ? rattr(E->r, i->x) : UNK; break;
        case VO_SATTR: st[k++] = E->s ? sattr(E->s, i->x) : UNK; break;
        case VO_ATOM: st[k++] = tri(atom(E, i->x)); break;
        case VO_CLASS: st[k++] = boolv(class_test(E, i->x)); break;
        case VO_TOBOOL: st[k - 1] = boolv(E->r && truth(st[k - 1]) == 1); break;
        case VO_FIG:
            st[k++] = E->figures && !isnan(E->figures[i->node]) ? num(E->figures[i->node]) : UNK;
            break;
        case VO_BASE: {
            if (!E->base) {
                st[k++] = UNK;
                break;
            }
            struct tkp_eval B = *E;
            B.runs = E->base;
            B.base = NULL;
            st[k++] = run(&B, &sp->code->prog[i->x]);
            break;
        }
        case VO_AGG_STEP: st[k++] = E->aggs ? E->aggs[i->x] : UNK; break;
        case VO_AGG_RUN: st[k++] = E->runs ? E->runs[i->x] : UNK; break;
        case VO_NEG: st[k - 1] = st[k - 1].t == VT_NUM ? num(-st[k - 1].n) : UNK; break;
        case VO_ADD: case VO_SUB: case VO_MUL: case VO_DIV:
            k--;
            st[k - 1] = arith(i->op, st[k - 1], st[k]);
            break;
        case VO_EQ: case VO_NE: case VO_LT: case VO_LE: case VO_GT: case VO_GE:
            k--;
            st[k - 1] = tri(cmpv(i->op, st[k - 1], st[k]));
            break;
        case VO_MATCH:
            st[k - 1] = tri(st[k - 1].t != VT_STR ? -1
                                                  : !regexec(sp->n[i->node].re, st[k - 1].s, 0, NULL, 0));
            break;
        case VO_NOT: st[k - 1] = tri(not3(truth(st[k - 1]))); break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L:
            l = truth(st[k - 1]);
            if (i->op == VO_IMPL_L) l = not3(l);
            st[k - 1] = tri(l);
            if (i->jmp >= 0 && l == (i->op == VO_AND_L ? 0 : 1)) i = p->ins + i->jmp - 1;
            break;
        case VO_AND: case VO_OR:
            k--;
            l = truth(st[k - 1]), r = truth(st[k]);
            st[k - 1] = tri(i->op == VO_AND ? and3(l, r) : or3(l, r));
            break;
        case VO_PREV: st[k - 1] = prev(E, &sp->n[i->node], st[k - 1]); break;
        case VO_ONCE: case VO_HIST: st[k - 1] = tri(once_op(E, i, truth(st[k - 1]))); break;
        case VO_SINCE:
            k--;
            st[k - 1] = tri(temporal(E, &sp->n[i->node], truth(st[k - 1]), truth(st[k])));
            break;
        default: /* VO_END */
            return st[0];
        }
    }
}

struct tkp_val tkp_eval_prog(struct tkp_eval *E, int prog)
{
    return run(E, &E->sp->code->prog[prog]);
}

int tkp_truth_imp(struct tkp_eval *E, int imp_prog, const struct tkp_ins *a_ins, int a_form,
                  int cons_prog, const struct tkp_nbound *cb)
{
    int a = a_ins ? tkp_run_resid(E, a_ins, a_form) : tkp_truth(E, imp_prog);
    int b = cb ? tkp_run_bound(E, cb) : tkp_truth(E, cons_prog);
    return or3(not3(a), b);
}

/* ---- residual programs: a one-byte program on a shape's atoms ---- */

struct rent {
    int dyn;   /* its value is computed by the output's code (else the truth c, no code) */
    int8_t c;
};
struct rpend {
    int what;  /* 0 the left side is code (at: its X_L), 1 decided (c), 2 neutral */
    int at;
    int8_t c;
};

static int rput(struct tkp_ins *out, int *n, int cap, const struct tkp_ins *i)
{
    if (*n >= cap) return -1;
    out[(*n)++] = *i;
    return 0;
}

static int rconst(struct tkp_ins *out, int *n, int cap, int op, int c)
{
    struct tkp_ins i = {.op = (uint8_t)op, .jmp = -1,
                        .v = c < 0 ? UNK : (struct tkp_val){VT_BOOL, c > 0, NULL}};
    return rput(out, n, cap, &i);
}

struct tkp_ins *tkp_residual(const struct tkp_ins *ins, uint64_t kn, uint64_t tr)
{
    int n = 0, len = 0, k = 0, np = 0;
    while (ins[len].op != VO_END) len++;
    len++;
    struct tkp_ins *out = malloc((size_t)len * sizeof(*out));
    struct rent *st = malloc((size_t)len * sizeof(*st));
    struct rpend *pe = malloc((size_t)len * sizeof(*pe));
    if (!out || !st || !pe) goto fail;
    for (int q = 0; q < len; q++) {
        const struct tkp_ins *i = &ins[q];
        struct rent *t = k ? &st[k - 1] : NULL;
        switch (i->op) {
        case VO_CONST: st[k++] = (struct rent){0, (int8_t)truth(i->v)}; break;
        case VO_ATOM:
            st[k++] = (struct rent){0, (int8_t)(kn >> i->x & 1 ? (int)(tr >> i->x & 1) : -1)};
            break;
        case VO_CLASS: case VO_BOUND:
            if (rput(out, &n, len, i)) goto fail;
            st[k++] = (struct rent){1, 0};
            break;
        case VO_TOBOOL: case VO_NOT:
            if (t->dyn) {
                if (rput(out, &n, len, i)) goto fail;
            } else t->c = (int8_t)(i->op == VO_NOT ? not3(t->c) : t->c == 1);
            break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L: {
            if (t->dyn) {
                pe[np++] = (struct rpend){0, n, 0};
                if (rput(out, &n, len, i)) goto fail;
                break;
            }
            int l = i->op == VO_IMPL_L ? not3(t->c) : t->c;
            t->c = (int8_t)l;
            if (l == (i->op == VO_AND_L ? 0 : 1)) {
                if (i->jmp >= 0) { /* the right side is skipped: its code is none */
                    q = i->jmp - 1;
                    break;
                }
                pe[np++] = (struct rpend){1, 0, (int8_t)l};
            } else {
                pe[np++] = (struct rpend){2, 0, 0};
            }
            break;
        }
        case VO_AND: case VO_OR: {
            struct rent r = st[--k];
            struct rpend p = pe[--np];
            t = &st[k - 1];
            if (p.what == 1) { /* decided: the right side ran for its state */
                if (r.dyn && rconst(out, &n, len, VO_KEEP, p.c)) goto fail;
                *t = (struct rent){r.dyn, p.c};
            } else if (p.what == 2) {
                *t = r; /* and3(1, r), or3(0, r): r */
            } else {
                if (!r.dyn && rconst(out, &n, len, VO_CONST, r.c)) goto fail;
                if (rput(out, &n, len, i)) goto fail;
                if (out[p.at].jmp >= 0) out[p.at].jmp = n;
                *t = (struct rent){1, 0};
            }
            break;
        }
        case VO_PREV: case VO_ONCE: case VO_HIST:
            if (!t->dyn && rconst(out, &n, len, VO_CONST, t->c)) goto fail;
            if (rput(out, &n, len, i)) goto fail;
            *t = (struct rent){1, 0};
            break;
        case VO_END:
            if (!t->dyn && rconst(out, &n, len, VO_CONST, t->c)) goto fail;
            if (rput(out, &n, len, i)) goto fail;
            break;
        default: /* VO_SINCE (two operands), VO_KEEP: not made residual */
            goto fail;
        }
    }
    free(st), free(pe);
    if (n < len) return out;
    free(out);
    return NULL;
fail:
    free(out), free(st), free(pe);
    return NULL;
}

/* A `once` or `historically` that keeps neither a ring nor near misses (temporal()'s case
 * without them): its value on operand truth v, its state updated. */
static inline __attribute__((always_inline)) int once_plain(struct tkp_eval *E,
                                                            const struct tkp_node *x, int v)
{
    struct tkp_tstate *t = &E->ts[x->slot];
    if (x->in_step && t->scope != E->scope) tkp_scope_enter(t, E->scope);
    int64_t now = at(E, x);
    if (x->op == OP_HIST) v = v < 0 ? -1 : !v;
    if (E->update && v == 1) {
        if (!t->valid) t->first = now;
        t->last = now;
        t->valid = 1;
    }
    int res = !t->valid ? 0 : !x->has_iv ? 1
              : isfinite(x->hi) ? (double)(now - t->last) <= x->hi
                                : in_window(x, now, t->first);
    return x->op == OP_HIST ? !res : res;
}

int tkp_resid_form(const struct tkp_spec *sp, const struct tkp_ins *r)
{
    if (!r || tkp_check_general) return TKP_RF_RUN;
    if (r[0].op == VO_CONST && r[1].op == VO_PREV && r[2].op == VO_END) return TKP_RF_PREVK;
    int keep = r[0].op == VO_BOUND && r[1].op == VO_KEEP; /* the bound for its `prev`s' state */
    const struct tkp_ins *o = &r[1 + keep];
    if ((r[0].op != VO_CONST && r[0].op != VO_BOUND) || (o->op != VO_ONCE && o->op != VO_HIST) ||
        o[1].op != VO_END)
        return TKP_RF_RUN;
    const struct tkp_node *x = &sp->n[o->node];
    if (o->x || (x->has_iv && x->num > 0 && isfinite(x->hi)) || sp->code->near[x->slot].on)
        return TKP_RF_RUN; /* one bit (once_op's), a ring, near misses */
    return keep ? TKP_RF_XKT : TKP_RF_XT;
}

int tkp_run_resid(struct tkp_eval *E, const struct tkp_ins *r, int form)
{
    const struct tkp_spec *sp = E->sp;
    int v;
    switch (form) {
    case TKP_RF_PREVK: { /* run_bool's CONST then PREV */
        const struct tkp_node *x = &sp->n[r[1].node];
        struct tkp_tstate *s = &E->ts[x->slot];
        if (x->in_step && s->scope != E->scope) tkp_scope_enter(s, E->scope);
        if (E->update) {
            v = truth(r[0].v);
            s->prev_out = s->prev_set ? s->prev : UNK;
            s->prev_first = !s->prev_set;
            s->prev = (struct tkp_val){v < 0 ? VT_UNK : VT_BOOL, v > 0, NULL};
            s->prev_set = 1;
        }
        return truth(s->prev_out);
    }
    case TKP_RF_XT: case TKP_RF_XKT:
        /* a constant or a bound (its value kept: a constant), then a plain `once` or
         * `historically` */
        if (r[0].op == VO_CONST) v = truth(r[0].v);
        else {
            const struct tkp_nbound *b = sp->code->prog[r[0].x].bound;
            v = b->cross ? bound_cross(E, b) : tkp_run_bound(E, b);
        }
        if (form == TKP_RF_XKT) v = truth(r[1].v), r++;
        return once_plain(E, &sp->n[r[1].node], v);
    default: return run_bool(E, r);
    }
}

const struct tkp_ins *tkp_bool_ins(const struct tkp_prog *p)
{
    if (p->boolean || (p->bool_prev && !tkp_check_general)) return p->ins;
    return tkp_check_general ? NULL : p->bins;
}

int tkp_run_bool(struct tkp_eval *E, const struct tkp_ins *ins) { return run_bool(E, ins); }

int tkp_truth(struct tkp_eval *E, int prog)
{
    const struct tkp_prog *p = &E->sp->code->prog[prog];
    const struct tkp_ins *b = tkp_bool_ins(p);
    if (b) return run_bool(E, b);
    if (p->numeric && !tkp_check_general) {
        if (p->bound) return tkp_run_bound(E, p->bound);
        double d;
        return run_num(E, p, &d) == VT_UNK ? -1 : d != 0;
    }
    return truth(run(E, p));
}

struct tkp_val tkp_eval(struct tkp_eval *E, int node)
{
    int p = node >= 0 ? E->sp->code->node_prog[node] : -1;
    return p >= 0 ? run(E, &E->sp->code->prog[p]) : UNK;
}

int tkp_eval_bool(struct tkp_eval *E, int node)
{
    int p = node >= 0 ? E->sp->code->node_prog[node] : -1;
    return p >= 0 ? tkp_truth(E, p) : -1;
}

uint64_t tkp_prev_decided(const struct tkp_spec *sp, uint64_t kn, uint64_t tr, uint64_t slots,
                          uint64_t *vt, uint64_t *vu, uint64_t *in_step)
{
    const struct tkp_code *c = sp->code;
    struct tkp_srec r = {.atoms_ok = 1, .akn = kn, .atr = tr};
    struct tkp_eval A = {.sp = sp, .r = &r};
    uint64_t dec = 0;
    *vt = *vu = *in_step = 0;
    for (; slots; slots &= slots - 1) {
        int slot = __builtin_ctzll(slots);
        const struct tkp_prog *p = &c->prog[c->node_prog[sp->n[c->slot_node[slot]].a]];
        if (!p->boolean) continue;
        int noop = 1;
        uint64_t marks = 0;
        int v = probe(&A, p, &noop, &marks); /* (no temporal operator in a `prev`'s operand) */
        if (v == 2) continue;                 /* a class evaluated per record */
        dec |= 1ull << slot;
        if (sp->n[c->slot_node[slot]].in_step) *in_step |= 1ull << slot;
        if (v == 1) *vt |= 1ull << slot;
        if (v < 0) *vu |= 1ull << slot;
    }
    return dec;
}

void tkp_prev_marks(struct tkp_eval *E, uint64_t slots)
{
    const struct tkp_spec *sp = E->sp;
    const struct tkp_code *c = sp->code;
    for (; slots; slots &= slots - 1) {
        const struct tkp_node *x = &sp->n[c->slot_node[__builtin_ctzll(slots)]];
        const struct tkp_prog *p = &c->prog[c->node_prog[x->a]];
        if (p->attr >= 0 && E->r && !tkp_check_general) {
            /* `prev r.<field>`: the field, read */
            double d;
            int t = rnum(E->r, p->attr, &d);
            tkp_prev_num(E, x->slot, x->in_step, t, &d);
            continue;
        }
        if (p->boolean && p->n == 2 && p->ins[0].op == VO_ATOM && E->r) {
            /* `prev <atom>` (`prev kern`): the shape's truth */
            prev(E, x, tri(atom(E, p->ins[0].x)));
            continue;
        }
        prev(E, x, run(E, p));
    }
}
