/* tokprof check: from the checked tree to flat programs (prog.h).
 *
 * Each node the monitor evaluates gets a postfix program. While emitting, a maximal Boolean
 * subtree that reads only a record's discrete fields becomes one ATOM instruction (its value is
 * looked up per record shape at run time). Step aggregates get a fold plan: streamed as records
 * arrive when nothing they read waits for the step's close, else buffered behind a prefilter of
 * the conjuncts that do not wait. A `once` whose operand is a conjunction or a numeric bound, or
 * that has a window, gets a near-miss plan. Last, the state each assertion needs, in bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/monitor.h"
#include "check/prog.h"
#include "check/lower.h"

struct lw {
    struct tkp_spec *sp;
    struct tkp_code *c;
    struct tkp_spec_err *e;
    signed char *cls_disc;
};

struct buf {
    struct tkp_ins *v;
    int n, cap;
    int bounds; /* a comparison below the top with a straight form is one VO_BOUND (bins) */
};

#define X(i) (L->sp->n[i])

static int lerr(struct lw *L, int node, const char *msg)
{
    L->e->line = node >= 0 ? X(node).line : 1;
    L->e->col = node >= 0 ? X(node).col : 1;
    snprintf(L->e->msg, sizeof(L->e->msg), "%s", msg);
    return TKP_ERR_SPEC;
}

static int is_disc_attr(int a)
{
    return a == A_R_KIND || a == A_R_NAME || a == A_R_OP || a == A_R_LIB || a == A_R_DIR ||
           a == A_R_SYNC || a == A_R_ASYNC;
}

/* The subtree's value is a function of the record's shape (prog.h). */
static int disc(struct lw *L, int n)
{
    if (n < 0) return 1;
    const struct tkp_node *x = &X(n);
    switch (x->op) {
    case OP_NUM: case OP_STR: case OP_BOOL: return 1;
    case OP_ATTR: return x->var_is_r && is_disc_attr(x->attr);
    case OP_CLASS: return L->cls_disc[x->cls];
    case OP_MATCH: case OP_NEG: case OP_NOT: return disc(L, x->a);
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_EQ: case OP_NE: case OP_LT:
    case OP_LE: case OP_GT: case OP_GE: case OP_AND: case OP_OR: case OP_IMPLIES:
        return disc(L, x->a) && disc(L, x->b);
    default: return 0;
    }
}

static int reads_rec(struct lw *L, int n)
{
    if (n < 0) return 0;
    const struct tkp_node *x = &X(n);
    if ((x->op == OP_ATTR && x->var_is_r) || x->op == OP_CLASS) return 1;
    return reads_rec(L, x->a) || (x->op != OP_MATCH && reads_rec(L, x->b));
}

/* The subtree reads nothing that the step's close decides (s.len, s.dur, r.token, ...). */
static int early(struct lw *L, int n)
{
    if (n < 0) return 1;
    const struct tkp_node *x = &X(n);
    switch (x->op) {
    case OP_NUM: case OP_STR: case OP_BOOL: case OP_BASE_KEY: return 1;
    case OP_ATTR:
        return x->var_is_r ? x->attr != A_R_TOKEN : x->attr == A_S_IDX || x->attr == A_S_THREAD;
    case OP_CLASS: return L->c->cls_early[x->cls];
    case OP_AGG: case OP_BASE_EXPR: case OP_PREV: case OP_ONCE: case OP_HIST: case OP_SINCE:
        return 0;
    case OP_MATCH: return early(L, x->a);
    default: return early(L, x->a) && early(L, x->b);
    }
}

static int atom_ok(struct lw *L, int n)
{
    int op = X(n).op;
    int boolean = (op >= OP_EQ && op <= OP_IMPLIES) || op == OP_CLASS;
    return boolean && disc(L, n) && reads_rec(L, n);
}

/* The atom computing node n (a class's atom is shared by all its uses), -1 when full. */
static int atom_for(struct lw *L, int n)
{
    struct tkp_code *c = L->c;
    int cls = X(n).op == OP_CLASS ? X(n).cls : -1;
    if (cls >= 0 && c->cls_atom[cls] >= 0) return c->cls_atom[cls];
    for (int k = 0; cls < 0 && k < c->natoms; k++)
        if (c->atom_node[k] == n) return k;
    if (c->natoms == TKP_ATOMS_MAX) return -1;
    int k = c->natoms++;
    c->atom_node[k] = n;
    if (cls >= 0) c->cls_atom[cls] = k;
    return k;
}

static int put(struct buf *b, int op, int x, int node)
{
    if (tkp_spec_grow((void **)&b->v, &b->cap, b->n, sizeof(*b->v))) return -1;
    struct tkp_ins *i = &b->v[b->n];
    memset(i, 0, sizeof(*i));
    i->op = (uint8_t)op;
    i->x = (uint16_t)x;
    i->jmp = -1;
    i->node = node;
    return b->n++;
}

static int root(struct lw *L, int n);

static int binop(int op)
{
    switch (op) {
    case OP_ADD: return VO_ADD;
    case OP_SUB: return VO_SUB;
    case OP_MUL: return VO_MUL;
    case OP_DIV: return VO_DIV;
    case OP_EQ: return VO_EQ;
    case OP_NE: return VO_NE;
    case OP_LT: return VO_LT;
    case OP_LE: return VO_LE;
    case OP_GT: return VO_GT;
    default: return VO_GE;
    }
}

static int emit(struct lw *L, struct buf *b, int n, int atomise, int depth)
{
    if (depth > TKP_STACK_MAX - 8) return lerr(L, n, "the formula nests too deeply");
    if (atomise && atom_ok(L, n)) {
        int k = atom_for(L, n);
        if (k >= 0) return put(b, VO_ATOM, k, n) < 0 ? -1 : 0;
    }
    const struct tkp_node *x = &X(n);
    int i, op = x->op, a = x->a, bb = x->b;
    switch (op) {
    case OP_NUM: case OP_STR: case OP_BOOL:
        if ((i = put(b, VO_CONST, 0, n)) < 0) return -1;
        b->v[i].v = op == OP_NUM    ? (struct tkp_val){VT_NUM, x->num, NULL}
                    : op == OP_BOOL ? (struct tkp_val){VT_BOOL, x->num != 0, NULL}
                    : x->str        ? (struct tkp_val){VT_STR, 0, x->str}
                                    : (struct tkp_val){VT_UNK, 0, NULL};
        return 0;
    case OP_ATTR: return put(b, x->var_is_r ? VO_RATTR : VO_SATTR, x->attr, n) < 0 ? -1 : 0;
    case OP_CLASS: {
        int cls = x->cls;
        if (!L->cls_disc[cls]) {
            /* evaluated per record (and step) through its own program */
            if (root(L, L->sp->cls[cls].expr) < 0) return -1;
            return put(b, VO_CLASS, cls, n) < 0 ? -1 : 0;
        }
        /* inside an atom: the class's test inline */
        if (emit(L, b, L->sp->cls[cls].expr, 0, depth + 1)) return -1;
        return put(b, VO_TOBOOL, 0, n) < 0 ? -1 : 0;
    }
    case OP_BASE_KEY: return put(b, VO_FIG, 0, n) < 0 ? -1 : 0;
    case OP_BASE_EXPR: {
        int p = root(L, a);
        if (p < 0) return -1;
        return put(b, VO_BASE, p, n) < 0 ? -1 : 0;
    }
    case OP_AGG:
        return put(b, x->src == SRC_STEP ? VO_AGG_STEP : VO_AGG_RUN, x->slot, n) < 0 ? -1 : 0;
    case OP_NEG: case OP_NOT: case OP_MATCH:
        if (emit(L, b, a, atomise, depth + 1)) return -1;
        return put(b, op == OP_NEG ? VO_NEG : op == OP_NOT ? VO_NOT : VO_MATCH, 0, n) < 0 ? -1 : 0;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_EQ: case OP_NE: case OP_LT:
    case OP_LE: case OP_GT: case OP_GE:
        if (b->bounds && depth > 0 && op >= OP_EQ) {
            int p = root(L, n);
            if (p < 0) return -1;
            if (L->c->prog[p].bound) return put(b, VO_BOUND, p, n) < 0 ? -1 : 0;
        }
        if (emit(L, b, a, atomise, depth + 1) || emit(L, b, bb, atomise, depth + 1)) return -1;
        return put(b, binop(op), 0, n) < 0 ? -1 : 0;
    case OP_AND: case OP_OR: case OP_IMPLIES: {
        if (emit(L, b, a, atomise, depth + 1)) return -1;
        int l = put(b, op == OP_AND ? VO_AND_L : op == OP_OR ? VO_OR_L : VO_IMPL_L, 0, n);
        if (l < 0 || emit(L, b, bb, atomise, depth + 1)) return -1;
        if (put(b, op == OP_AND ? VO_AND : VO_OR, 0, n) < 0) return -1;
        /* no short circuit over a temporal operator: it must see every point */
        if (!X(bb).temporal) b->v[l].jmp = b->n;
        return 0;
    }
    case OP_PREV: case OP_ONCE: case OP_HIST: {
        /* x: an unbounded once/historically without near misses, one bit of state */
        int plain = op != OP_PREV && !x->has_iv && !(op == OP_ONCE && L->c->near[x->slot].on);
        if (emit(L, b, a, atomise, depth + 1)) return -1;
        return put(b, op == OP_PREV ? VO_PREV : op == OP_ONCE ? VO_ONCE : VO_HIST, plain, n) < 0
                   ? -1 : 0;
    }
    case OP_SINCE:
        if (emit(L, b, a, atomise, depth + 1) || emit(L, b, bb, atomise, depth + 1)) return -1;
        return put(b, VO_SINCE, 0, n) < 0 ? -1 : 0;
    default: return lerr(L, n, "internal error: a construct the compiler left in place");
    }
}

enum { B_PREV = 1, B_BOUND = 2 };

/* Every instruction computes a truth value from truth values, and so does the last; with
 * B_PREV, `prev`s of them too (what eval.c's probe and run_bool read: prog.h bool_prev), with
 * B_BOUND, VO_BOUND too (prog.h bins). */
static int is_boolean(const struct buf *b, int ok)
{
    for (int k = 0; k < b->n; k++) {
        const struct tkp_ins *i = &b->v[k];
        switch (i->op) {
        case VO_CONST: if (i->v.t == VT_BOOL) break; return 0;
        case VO_PREV: if (ok & B_PREV) break; return 0;
        case VO_BOUND: if (ok & B_BOUND) break; return 0;
        case VO_ATOM: case VO_CLASS: case VO_TOBOOL: case VO_NOT: case VO_AND_L: case VO_OR_L:
        case VO_IMPL_L: case VO_AND: case VO_OR: case VO_ONCE: case VO_HIST: case VO_SINCE:
        case VO_END:
            break;
        default: return 0;
        }
    }
    return 1;
}

/* Not Boolean, and every value a number, a truth value or unknown (prog.h): no string. */
static int is_numeric(const struct buf *b)
{
    for (int k = 0; k < b->n; k++) {
        const struct tkp_ins *i = &b->v[k];
        switch (i->op) {
        case VO_CONST: if (i->v.t == VT_STR) return 0; break;
        case VO_RATTR: case VO_SATTR: if (tkp_attr_is_str(i->x)) return 0; break;
        case VO_ATOM: case VO_CLASS: case VO_TOBOOL: case VO_NEG: case VO_ADD: case VO_SUB:
        case VO_MUL: case VO_DIV: case VO_EQ: case VO_NE: case VO_LT: case VO_LE: case VO_GT:
        case VO_GE: case VO_NOT: case VO_AND_L: case VO_OR_L: case VO_IMPL_L: case VO_AND:
        case VO_OR: case VO_PREV: case VO_ONCE: case VO_HIST: case VO_SINCE: case VO_END:
            break;
        default: return 0; /* VO_MATCH, VO_FIG, VO_BASE, VO_AGG_STEP, VO_AGG_RUN */
        }
    }
    return !is_boolean(b, 0);
}

/* A numeric program's instructions for run_num: RATTR+PREV, CONST+comparison and
 * CONST+arithmetic fused into one (jump targets mapped: none lands inside a pair), NULL when
 * out of memory. */
static struct tkp_ins *fuse(const struct buf *b)
{
    struct tkp_ins *v = malloc((size_t)b->n * sizeof(*v));
    int *at = malloc(((size_t)b->n + 1) * sizeof(int));
    if (!v || !at) {
        free(v), free(at);
        return NULL;
    }
    int n = 0;
    for (int k = 0; k < b->n; k++) {
        const struct tkp_ins *i = &b->v[k], *j = k + 1 < b->n ? &b->v[k + 1] : NULL;
        at[k] = n;
        v[n] = *i;
        if (j && i->op == VO_RATTR && j->op == VO_PREV) {
            v[n].op = VO_PREV_RATTR, v[n].node = j->node;
            at[++k] = n;
        } else if (j && i->op == VO_CONST && j->op >= VO_EQ && j->op <= VO_GE) {
            v[n].op = VO_CMPK, v[n].x = j->op;
            at[++k] = n;
        } else if (j && i->op == VO_CONST && j->op >= VO_ADD && j->op <= VO_DIV) {
            v[n].op = VO_ARITHK, v[n].x = j->op;
            at[++k] = n;
        }
        n++;
    }
    at[b->n] = n;
    for (int k = 0; k < n; k++)
        if (v[k].jmp >= 0) v[k].jmp = at[v[k].jmp];
    free(at);
    return v;
}

/* The straight form of a numeric program (prog.h struct tkp_nbound), NULL when it has none or
 * out of memory: its postfix read on a stack of terms, sides, comparisons and conjunctions. */
static struct tkp_nbound *straight(const struct tkp_spec *sp, const struct buf *b)
{
    enum { T_TERM, T_SIDE, T_CMP };
    struct item {
        int what;
        struct tkp_nside side; /* a term is side.a with op 0 */
    } st[2 * TKP_NB_MAX + 2];
    struct tkp_nbound nb = {0};
    int k = 0, prevs = 0;
    for (int q = 0; q < b->n; q++) {
        const struct tkp_ins *i = &b->v[q];
        switch (i->op) {
        case VO_CONST: case VO_RATTR:
            if (k == (int)(sizeof(st) / sizeof(st[0]))) return NULL;
            memset(&st[k], 0, sizeof(st[k]));
            st[k].what = T_TERM;
            if (i->op == VO_CONST) st[k].side.a.t = (uint8_t)i->v.t, st[k].side.a.v = i->v.n;
            else st[k].side.a.kind = 1, st[k].side.a.attr = i->x;
            k++;
            break;
        case VO_PREV:
            if (!k || st[k - 1].what != T_TERM || st[k - 1].side.a.kind != 1) return NULL;
            st[k - 1].side.a.kind = 2, st[k - 1].side.a.node = i->node;
            st[k - 1].side.a.slot = sp->n[i->node].slot;
            st[k - 1].side.a.in_step = sp->n[i->node].in_step;
            prevs++;
            break;
        case VO_ADD: case VO_SUB: case VO_MUL: case VO_DIV:
            if (k < 2 || st[k - 2].what != T_TERM || st[k - 1].what != T_TERM) return NULL;
            st[k - 2].what = T_SIDE;
            st[k - 2].side.b = st[k - 1].side.a;
            st[k - 2].side.op = i->op;
            k--;
            break;
        case VO_EQ: case VO_NE: case VO_LT: case VO_LE: case VO_GT: case VO_GE:
            if (k < 2 || st[k - 2].what == T_CMP || st[k - 1].what == T_CMP) return NULL;
            if (nb.n == TKP_NB_MAX) return NULL;
            nb.c[nb.n++] = (struct tkp_ncmp){.l = st[k - 2].side, .r = st[k - 1].side, .op = i->op};
            st[k - 2].what = T_CMP;
            k--;
            break;
        case VO_AND_L: /* a comparison (or the conjunction so far) on the left */
            if (!k || st[k - 1].what != T_CMP) return NULL;
            break;
        case VO_AND:
            if (k < 2 || st[k - 2].what != T_CMP || st[k - 1].what != T_CMP) return NULL;
            k--;
            break;
        case VO_END:
            if (k != 1 || st[0].what != T_CMP || (nb.n > 1 && prevs)) return NULL;
            break;
        default: return NULL;
        }
    }
    /* a conjunction's comparisons are in postfix order, left to right: its order */
    for (int j = 0; j < nb.n; j++) {
        struct tkp_ncmp *c = &nb.c[j];
        static const uint8_t tab[6][3] = {
            [VO_EQ - VO_EQ] = {0, 1, 0}, [VO_NE - VO_EQ] = {1, 0, 1}, [VO_LT - VO_EQ] = {1, 0, 0},
            [VO_LE - VO_EQ] = {1, 1, 0}, [VO_GT - VO_EQ] = {0, 0, 1}, [VO_GE - VO_EQ] = {0, 1, 1}};
        memcpy(c->tab, tab[c->op - VO_EQ], 3);
        c->rk = !c->r.op && !c->r.a.kind;
        for (struct tkp_nside *s = &c->l; s <= &c->r; s++)
            s->same = s->op && s->a.kind == 1 && s->b.kind == 2 && s->a.attr == s->b.attr;
    }
    nb.delta = nb.n == 1 && nb.c[0].l.same && nb.c[0].l.op == VO_SUB && nb.c[0].rk;
    const struct tkp_nterm *l = &nb.c[0].l.a, *r = &nb.c[0].r.a;
    if (nb.n == 1 && !nb.c[0].l.op && !nb.c[0].r.op && l->attr == r->attr && l->kind && r->kind &&
        l->kind != r->kind)
        nb.cross = l->kind == 1 ? 1 : 2;
    struct tkp_nbound *out = malloc(sizeof(*out));
    if (out) *out = nb;
    return out;
}

/* Program bins of node n (prog.h): NULL where it has no VO_BOUND or is not Boolean but for
 * them and `prev`s. Makes the comparisons' programs (root); -1 on an error (L->e). */
static int bins(struct lw *L, int n, int atomise, struct tkp_ins **out)
{
    struct buf b = {.bounds = 1};
    *out = NULL;
    if (emit(L, &b, n, atomise, 0) || put(&b, VO_END, 0, n) < 0) {
        free(b.v);
        return -1;
    }
    int any = 0;
    for (int k = 0; k < b.n; k++) any |= b.v[k].op == VO_BOUND;
    if (any && is_boolean(&b, B_PREV | B_BOUND)) *out = b.v;
    else free(b.v);
    return 0;
}

static int new_prog(struct lw *L, int n, int atomise)
{
    struct buf b = {0};
    struct tkp_ins *bi = NULL;
    if (emit(L, &b, n, atomise, 0) || put(&b, VO_END, 0, n) < 0) {
        free(b.v);
        if (!L->e->msg[0]) lerr(L, n, "out of memory");
        return -1;
    }
    int boolean = is_boolean(&b, 0), bool_prev = !boolean && is_boolean(&b, B_PREV);
    /* (before this program's slot: bins makes its comparisons' programs) */
    struct tkp_code *c = L->c;
    if ((!boolean && !bool_prev && bins(L, n, atomise, &bi)) ||
        tkp_spec_grow((void **)&c->prog, &c->capprog, c->nprog, sizeof(*c->prog))) {
        free(b.v), free(bi);
        if (!L->e->msg[0]) lerr(L, n, "out of memory");
        return -1;
    }
    struct tkp_prog *p = &c->prog[c->nprog];
    *p = (struct tkp_prog){b.v, b.n, n, boolean, is_numeric(&b), NULL, -1, NULL, bool_prev, bi};
    if (p->numeric && !(p->nins = fuse(&b))) {
        free(b.v), free(bi);
        lerr(L, n, "out of memory");
        return -1;
    }
    if (p->numeric && b.n == 2 && b.v[0].op == VO_RATTR) p->attr = b.v[0].x;
    if (p->numeric) p->bound = straight(L->sp, &b); /* none (or no memory): run_num runs it */
    return c->nprog++;
}

/* The program computing node n (made once). */
static int root(struct lw *L, int n)
{
    if (n < 0) return -1;
    if (L->c->node_prog[n] >= 0) return L->c->node_prog[n];
    int p = new_prog(L, n, 1);
    if (p >= 0) L->c->node_prog[n] = p;
    return p;
}

/* ---- conjunctions ---- */

#define CONJ_MAX 64

static void conjuncts(struct lw *L, int n, int *out, int *k)
{
    if (n < 0) return;
    if (X(n).op == OP_AND && *k < CONJ_MAX - 1) {
        int b = X(n).b;
        conjuncts(L, X(n).a, out, k);
        conjuncts(L, b, out, k);
        return;
    }
    out[(*k)++] = n;
}

/* The atoms a conjunction of atoms and classes needs true (its top-level conjuncts that are
 * atoms, through the classes it names): where one is false or unknown, so is the conjunction,
 * and a class is false. */
static uint64_t needed_atoms(struct lw *L, int n, int depth)
{
    int cj[CONJ_MAX], k = 0;
    uint64_t need = 0;
    if (depth > 8) return 0;
    conjuncts(L, n, cj, &k);
    for (int i = 0; i < k; i++) {
        int a = atom_ok(L, cj[i]) ? atom_for(L, cj[i]) : -1;
        if (a >= 0) need |= 1ull << a;
        else if (X(cj[i]).op == OP_CLASS)
            need |= needed_atoms(L, L->sp->cls[X(cj[i]).cls].expr, depth + 1);
    }
    return need;
}

/* Splits conjuncts into atoms and one program (a chain of new AND nodes) for the rest; only
 * those that are early when `only_early`. c->prog holds a node until programs are made. A class
 * in the rest adds the atoms it needs (needed_atoms) to c->atoms: a record whose shape fails one
 * is not taken, without running the program (`count(big_gemm in s)`, big_gemm = `r.lib ==
 * "cublas" and r.m >= 1024`, runs on cuBLAS calls only). */
static int split(struct lw *L, const int *cj, int k, int only_early, struct tkp_conj *c)
{
    memset(c, 0, sizeof(*c));
    c->prog = -1;
    for (int i = 0; i < k; i++) {
        int n = cj[i];
        if (only_early && !early(L, n)) continue;
        c->nconj++;
        int a = atom_ok(L, n) ? atom_for(L, n) : -1;
        if (a >= 0) {
            c->atoms |= 1ull << a;
            continue;
        }
        if (X(n).op == OP_CLASS) c->atoms |= needed_atoms(L, L->sp->cls[X(n).cls].expr, 0);
        if (c->prog < 0) {
            c->prog = n;
            continue;
        }
        int and = tkp_spec_node_new(L->sp, OP_AND, X(n).line, X(n).col);
        if (and < 0) return lerr(L, n, "out of memory");
        X(and).a = c->prog;
        X(and).b = n;
        c->prog = and;
    }
    return 0;
}

static int plan_slot(struct lw *L, int node)
{
    const struct tkp_node *x = &X(node);
    struct tkp_slotplan *p = &L->c->plan[x->slot];
    int cj[CONJ_MAX], k = 0, count = x->agg == AG_COUNT || x->agg == AG_EXISTS;
    p->node = node;
    p->gpu = x->gpu;
    p->value = count ? -1 : x->a;
    /* a streamed slot has no prefilter: -1, not node 0 (the spec's first node, which may be a
     * quantifier the compiler rewrote away) */
    p->pre = (struct tkp_conj){0, -1, 0, -1, -1};
    int va = x->a, vb = x->b;
    if (count) conjuncts(L, va, cj, &k);
    conjuncts(L, vb, cj, &k);
    int all_early = 1;
    for (int i = 0; i < k; i++) all_early &= early(L, cj[i]);
    if (!count) all_early &= early(L, va);
    p->stream = !p->gpu && all_early;
    if (split(L, cj, k, 0, &p->sel)) return -1;
    if (!p->stream && !p->gpu) {
        if (split(L, cj, k, 1, &p->pre)) return -1;
        L->c->host_buffer = 1;
    }
    /* a step assertion bounding this aggregate lists its selected records as the witness */
    for (int i = 0; p->stream && i < L->sp->nas; i++) {
        int c = tkp_bound_cmp(L->sp, L->sp->as[i].body);
        if (L->sp->as[i].level == LV_STEP && !L->sp->as[i].gpu && c >= 0 && X(c).a == node)
            p->keep = 1;
    }
    p->count_atoms = p->stream && count && p->sel.prog < 0 && !p->keep;
    return 0;
}

static int is_str_operand(struct lw *L, int n)
{
    return X(n).op == OP_STR || (X(n).op == OP_ATTR && tkp_attr_is_str(X(n).attr));
}

static void plan_near(struct lw *L, int node)
{
    const struct tkp_node *x = &X(node);
    struct tkp_nearplan *np = &L->c->near[x->slot];
    int cj[CONJ_MAX], k = 0;
    np->node = node;
    np->timing = x->has_iv;
    if (!X(x->a).temporal) conjuncts(L, x->a, cj, &k);
    for (int i = 0; i < k && np->nconj < 8; i++)
        if (X(cj[i]).op != OP_BOOL && X(cj[i]).op != OP_NUM && X(cj[i]).op != OP_STR)
            np->conj[np->nconj++] = cj[i];
    int c0 = np->conj[0];
    int numeric = np->nconj == 1 && X(c0).op >= OP_EQ && X(c0).op <= OP_GE &&
                  !is_str_operand(L, X(c0).a) && !is_str_operand(L, X(c0).b);
    if (np->nconj < 2 && !numeric) np->nconj = 0;
    np->on = np->timing || np->nconj > 0;
}

/* Walks an assertion's trees: plans its aggregates and `once`s, adds up its state. */
static int walk(struct lw *L, int n, struct tkp_assert *a, int body)
{
    if (n < 0) return 0;
    const struct tkp_node *x = &X(n);
    int op = x->op, slot = x->slot, src = x->src, agg = x->agg, xa = x->a, xb = x->b;
    if (op == OP_AGG && src == SRC_STEP) {
        if (plan_slot(L, n)) return -1;
        const struct tkp_slotplan *p = &L->c->plan[slot];
        a->state_bytes += sizeof(struct tkp_fold) + (p->keep ? TKP_WIT_MAX * sizeof(struct tkp_srec) : 0);
        a->buffers |= !p->stream && !p->gpu;
    } else if (op == OP_AGG) {
        a->state_run += 4 * sizeof(double) + (size_t)a->witness * sizeof(struct tkp_witem);
        L->c->run_node[slot] = n;
        L->c->run_owner[slot] = (int)(a - L->sp->as);
        (void)agg;
    } else if (op == OP_PREV || op == OP_ONCE || op == OP_HIST || op == OP_SINCE) {
        L->c->slot_node[slot] = n;
        a->state_bytes += sizeof(struct tkp_tstate);
        if (x->has_iv && x->num > 0 && isfinite(x->hi)) a->state_bytes += (size_t)x->hi + 1;
        if (op == OP_ONCE && body) {
            plan_near(L, n);
            if (L->c->near[slot].on) a->state_bytes += (TKP_NEAR_TOP + 1) * sizeof(struct tkp_near);
        }
    }
    if (walk(L, xa, a, body)) return -1;
    return op == OP_MATCH ? 0 : walk(L, xb, a, body);
}

static int conj_prog(struct lw *L, struct tkp_conj *c)
{
    int n = c->prog;
    c->run = c->whole = -1;
    if (n >= 0 && (c->prog = c->run = c->whole = root(L, n)) < 0) return -1;
    if (n < 0 || X(n).op != OP_CLASS || L->cls_disc[X(n).cls]) return 0;
    /* one class: its expression, without the class's cache (lower.c emit's VO_CLASS); where
     * that is atoms and one other conjunct, the other alone (`r.m >= 1024` of big_gemm =
     * `r.lib == "cublas" and r.m >= 1024`): the atoms are among c->atoms (split's
     * needed_atoms), true wherever the program runs */
    int cj[CONJ_MAX], k = 0, other = -1, nother = 0;
    conjuncts(L, L->sp->cls[X(n).cls].expr, cj, &k);
    for (int i = 0; i < k; i++)
        if ((atom_ok(L, cj[i]) ? atom_for(L, cj[i]) : -1) < 0) other = cj[i], nother++;
    if ((c->whole = root(L, L->sp->cls[X(n).cls].expr)) < 0) return -1;
    return (c->run = nother == 1 ? root(L, other) : c->whole) < 0 ? -1 : 0;
}

/* The state slots of the `prev`s of formula n when every temporal operator in it is a `prev`
 * of an operand without one (slots below 64), else 0. */
static uint64_t prev_only(struct lw *L, int n, int depth, int *ok)
{
    if (n < 0 || !X(n).temporal || depth > TKP_STACK_MAX) return 0;
    const struct tkp_node *x = &X(n);
    if (x->op == OP_PREV && x->slot < 64 && (x->a < 0 || !X(x->a).temporal))
        return 1ull << x->slot;
    if (x->op == OP_PREV || x->op == OP_ONCE || x->op == OP_HIST || x->op == OP_SINCE ||
        x->op == OP_AGG || x->op == OP_BASE_EXPR) {
        *ok = 0;
        return 0;
    }
    return prev_only(L, x->a, depth + 1, ok) | (x->op == OP_MATCH ? 0 : prev_only(L, x->b, depth + 1, ok));
}

int tkp_spec_lower(struct tkp_spec *sp, struct tkp_spec_err *e)
{
    struct tkp_code *c = calloc(1, sizeof(*c));
    sp->code = c;
    struct lw L0 = {sp, c, e, NULL}, *L = &L0;
    e->msg[0] = 0;
    int nc = sp->ncls + 1;
    L->cls_disc = calloc((size_t)nc, 1);
    if (!c || !L->cls_disc || !(c->cls_atom = malloc((size_t)nc * sizeof(int))) ||
        !(c->cls_early = calloc((size_t)nc, sizeof(int))) ||
        !(c->plan = calloc((size_t)sp->nslots_agg + 1, sizeof(*c->plan))) ||
        !(c->near = calloc((size_t)sp->nslots_temporal + 1, sizeof(*c->near))) ||
        !(c->run_node = calloc((size_t)sp->nslots_run + 1, sizeof(int))) ||
        !(c->run_owner = calloc((size_t)sp->nslots_run + 1, sizeof(int))) ||
        !(c->slot_node = calloc((size_t)sp->nslots_temporal + 1, sizeof(int)))) {
        free(L->cls_disc);
        return TKP_ERR_NOMEM;
    }
    int rc = TKP_ERR_SPEC;
    /* classes refer only to earlier ones: one pass in order */
    for (int i = 0; i < sp->ncls; i++) {
        c->cls_atom[i] = -1;
        L->cls_disc[i] = (signed char)disc(L, sp->cls[i].expr);
        c->cls_early[i] = early(L, sp->cls[i].expr);
    }
    for (int i = 0; i < sp->nas; i++) {
        struct tkp_assert *a = &sp->as[i];
        a->state_bytes = 0;
        a->state_run = 2 * ((size_t)a->witness + 1) * sizeof(struct tkp_viol);
        if (walk(L, a->body, a, 1) || walk(L, a->when, a, 0)) goto out;
    }
    /* programs: nodes exist now (split added its AND chains) */
    if (!(c->node_prog = malloc((size_t)sp->nn * sizeof(int)))) {
        rc = TKP_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < sp->nn; i++) c->node_prog[i] = -1;
    int nfast = 0;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        int b = tkp_bound_cmp(sp, a->body);
        struct tkp_assert *w = &sp->as[i];
        if ((w->body_prog = root(L, a->body)) < 0) goto out;
        w->when_prog = a->when >= 0 ? root(L, a->when) : -1;
        if (a->when >= 0 && w->when_prog < 0) goto out;
        /* shape verdicts: a Boolean formula and guard; or a Boolean guard over a body without
         * temporal operators (nothing to advance where the guard is false), whose shapes that
         * fail the guard need no more than their shape */
        w->fast = -1;
        w->prevs = 0;
        w->imp_prog = w->cons_prog = -1;
        int guard_bool = w->when_prog < 0 || c->prog[w->when_prog].boolean, ok = 1;
        uint64_t prevs = a->level == LV_RECORD ? prev_only(L, a->body, 0, &ok) : 0;
        if (!ok) prevs = 0;
        /* `A -> B` whose A is Boolean (a shape may make it false) and whose temporal operators
         * are none or all `prev`s; B alone (a record whose shape makes A true) without them */
        const struct tkp_node *bn = &sp->n[a->body];
        int imp = a->level == LV_RECORD && bn->op == OP_IMPLIES &&
                  !c->prog[w->body_prog].boolean && (!bn->temporal || prevs);
        if (imp && (w->imp_prog = root(L, bn->a)) < 0) goto out;
        if (imp && !c->prog[w->imp_prog].boolean && !c->prog[w->imp_prog].bool_prev)
            w->imp_prog = -1, imp = 0;
        if (imp && (w->cons_prog = root(L, bn->b)) < 0) goto out;
        if (a->level == LV_RECORD && nfast < TKP_FAST_MAX && guard_bool &&
            (c->prog[w->body_prog].boolean || (w->when_prog >= 0 && !sp->n[a->body].temporal) ||
             prevs || imp))
            w->fast = nfast++;
        /* a `prev`'s operand alone, for the points whose shape needs no more (prog.h) */
        if (w->fast >= 0)
            for (uint64_t b = w->prevs = prevs; b; b &= b - 1)
                if (root(L, sp->n[c->slot_node[__builtin_ctzll(b)]].a) < 0) goto out;
        if (b >= 0 && (root(L, sp->n[b].a) < 0 || root(L, sp->n[b].b) < 0)) goto out;
    }
    for (int s = 0; s < sp->nslots_agg; s++) {
        struct tkp_slotplan *p = &c->plan[s];
        if (conj_prog(L, &p->sel) || conj_prog(L, &p->pre)) goto out;
        if (p->value >= 0 && (p->value = root(L, p->value)) < 0) goto out;
    }
    for (int n = 0; n < sp->nn; n++)
        if (sp->n[n].op == OP_AGG && sp->n[n].src == SRC_RUN &&
            ((sp->n[n].a >= 0 && root(L, sp->n[n].a) < 0) ||
             (sp->n[n].b >= 0 && root(L, sp->n[n].b) < 0)))
            goto out;
    for (int s = 0; s < sp->nslots_temporal; s++)
        for (int k = 0; k < c->near[s].nconj; k++) {
            int n = c->near[s].conj[k], op = sp->n[n].op;
            if ((c->near[s].prog[k] = root(L, n)) < 0) goto out;
            /* a numeric bound's miss is measured: its operands are read */
            if (op >= OP_EQ && op <= OP_GE && (root(L, sp->n[n].a) < 0 || root(L, sp->n[n].b) < 0))
                goto out;
        }
    /* last: atoms (emitting them adds none) */
    for (int k = 0; k < c->natoms; k++)
        if ((c->atom_prog[k] = new_prog(L, c->atom_node[k], 0)) < 0) goto out;
    rc = 0;
out:
    free(L->cls_disc);
    if (rc == TKP_ERR_SPEC && !e->msg[0]) lerr(L, -1, "out of memory");
    return rc;
}

void tkp_code_free(struct tkp_code *c)
{
    if (!c) return;
    for (int i = 0; i < c->nprog; i++) free(c->prog[i].ins), free(c->prog[i].nins), free(c->prog[i].bound), free(c->prog[i].bins);
    free(c->prog), free(c->node_prog), free(c->cls_atom), free(c->cls_early), free(c->plan);
    free(c->near), free(c->run_node), free(c->run_owner), free(c->slot_node);
    free(c);
}
