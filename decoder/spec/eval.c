/* tokprof check: the expression evaluator, three-valued (true, false, unknown).
 *
 * Temporal operators follow Havelund and Rosu's dynamic programming for past-time LTL (as in
 * DejaVu): each keeps its state from the previous point and updates it once per point, so the
 * evaluator never short-circuits a subtree that holds one (E->update says whether this
 * evaluation is the point's one update). Metric bounds keep O(1) state: [0,b] the latest hit,
 * [a,*] the earliest, and bounded [a,b] in steps or records a ring of b+1 values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static const struct tkp_val UNK = {VT_UNK, 0, NULL};

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

int tkp_eval_bool(struct tkp_eval *E, int node)
{
    struct tkp_val v = tkp_eval(E, node);
    if (v.t == VT_BOOL || v.t == VT_NUM) return v.n != 0;
    return -1;
}

static int truth(struct tkp_val v)
{
    if (v.t == VT_BOOL || v.t == VT_NUM) return v.n != 0;
    return -1;
}

static int match(struct tkp_eval *E, const struct tkp_node *x, struct tkp_val l)
{
    if (l.t != VT_STR) return -1;
    /* memo: 2 bits per regex per name id, 0 = not computed yet */
    const struct tkp_srec *r = E->r;
    /* the memo is by name id: only for operands that are a name id's string */
    const struct tkp_node *o = &E->sp->n[x->a];
    uint64_t id = UINT64_MAX;
    if (r && o->op == OP_ATTR && o->var_is_r)
        id = o->attr == A_R_NAME ? r->name_id : o->attr == A_R_OP ? r->op_id : UINT64_MAX;
    if (x->slot >= 0 && id < E->re_memo_len && E->re_memo) {
        uint64_t *m = &E->re_memo[id];
        unsigned bits = (unsigned)(*m >> (2 * x->slot)) & 3;
        if (bits) return bits == 2;
        int hit = !regexec(x->re, l.s, 0, NULL, 0);
        *m |= (uint64_t)(hit ? 2 : 1) << (2 * x->slot);
        return hit;
    }
    return !regexec(x->re, l.s, 0, NULL, 0);
}

static int cmpv(int op, struct tkp_val a, struct tkp_val b)
{
    if (a.t == VT_UNK || b.t == VT_UNK) return -1;
    int c;
    if (a.t == VT_STR || b.t == VT_STR) {
        if (a.t != b.t) return op == OP_NE;
        c = strcmp(a.s, b.s);
    } else {
        c = a.n < b.n ? -1 : a.n > b.n;
    }
    switch (op) {
    case OP_EQ: return c == 0;
    case OP_NE: return c != 0;
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    default: return c >= 0;
    }
}

static struct tkp_val tri(int t) { return t < 0 ? UNK : boolv(t); }

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
    if (!t->ring) {
        t->ring = calloc(len, 1);
        if (!t->ring) return -1;
        t->ring_len = len;
        t->ring_at = now - 1;
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

static int temporal(struct tkp_eval *E, const struct tkp_node *x)
{
    struct tkp_tstate *t = &E->ts[x->slot];
    if (x->in_step && t->scope != E->scope) {
        /* 'in step': the operator sees only the current step's points */
        free(t->ring);
        memset(t, 0, sizeof(*t));
        t->scope = E->scope;
    }
    int64_t now = at(E, x);
    if (x->op == OP_SINCE) {
        int l = truth(tkp_eval(E, x->a)), r = truth(tkp_eval(E, x->b));
        if (E->update) {
            if (r == 1) {
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
    int v = truth(tkp_eval(E, x->a));
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
    if (x->op == OP_HIST) res = !res;
    return res;
}

struct tkp_val tkp_eval(struct tkp_eval *E, int node)
{
    const struct tkp_node *x = &E->sp->n[node];
    struct tkp_val a, b;
    switch (x->op) {
    case OP_NUM: return num(x->num);
    case OP_STR: return str(x->str);
    case OP_BOOL: return boolv(x->num != 0);
    case OP_ATTR:
        if (x->var_is_r) return E->r ? rattr(E->r, x->attr) : UNK;
        return E->s ? sattr(E->s, x->attr) : UNK;
    case OP_CLASS: {
        if (!E->r) return boolv(0);
        if (E->cls_r != E->r || E->cls_s != E->s) {
            E->cls_r = E->r;
            E->cls_s = E->s;
            E->cls_done = 0;
        }
        uint64_t bit = x->cls < 64 ? 1ull << x->cls : 0;
        if (E->cls_done & bit) return boolv((E->cls_val & bit) != 0);
        int t = tkp_eval_bool(E, E->sp->cls[x->cls].expr) == 1;
        /* (a class may test earlier classes: they share the cache) */
        if (bit && E->cls_r == E->r && E->cls_s == E->s) {
            E->cls_done |= bit;
            E->cls_val = t ? E->cls_val | bit : E->cls_val & ~bit;
        }
        return boolv(t); /* an unknown field makes a class miss, not match */
    }
    case OP_BASE_KEY: return E->figures && !isnan(E->figures[node]) ? num(E->figures[node]) : UNK;
    case OP_BASE_EXPR: {
        if (!E->base) return UNK;
        struct tkp_eval B = *E;
        B.runs = E->base;
        B.base = NULL;
        return tkp_eval(&B, x->a);
    }
    case OP_AGG:
        if (x->src == SRC_STEP) return E->aggs ? E->aggs[x->slot] : UNK;
        return E->runs ? E->runs[x->slot] : UNK;
    case OP_NEG:
        a = tkp_eval(E, x->a);
        return a.t == VT_NUM ? num(-a.n) : UNK;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV:
        a = tkp_eval(E, x->a);
        b = tkp_eval(E, x->b);
        if ((a.t != VT_NUM && a.t != VT_BOOL) || (b.t != VT_NUM && b.t != VT_BOOL)) return UNK;
        switch (x->op) {
        case OP_ADD: return num(a.n + b.n);
        case OP_SUB: return num(a.n - b.n);
        case OP_MUL: return num(a.n * b.n);
        default: return b.n == 0 ? UNK : num(a.n / b.n);
        }
    case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        return tri(cmpv(x->op, tkp_eval(E, x->a), tkp_eval(E, x->b)));
    case OP_MATCH: return tri(match(E, x, tkp_eval(E, x->a)));
    case OP_NOT: {
        int t = truth(tkp_eval(E, x->a));
        return tri(t < 0 ? -1 : !t);
    }
    case OP_AND: case OP_OR: case OP_IMPLIES: {
        /* no short circuit over a temporal operator: it must see every point */
        int l = truth(tkp_eval(E, x->a));
        if (x->op == OP_IMPLIES) l = l < 0 ? -1 : !l;
        if (!E->sp->n[x->b].temporal && l == (x->op == OP_AND ? 0 : 1)) return boolv(l);
        int r = truth(tkp_eval(E, x->b));
        if (x->op == OP_AND) return tri(l == 0 || r == 0 ? 0 : (l < 0 || r < 0) ? -1 : 1);
        return tri(l == 1 || r == 1 ? 1 : (l < 0 || r < 0) ? -1 : 0);
    }
    case OP_PREV: {
        struct tkp_tstate *t = &E->ts[x->slot];
        if (x->in_step && t->scope != E->scope) {
            memset(t, 0, sizeof(*t));
            t->scope = E->scope;
        }
        struct tkp_val v = tkp_eval(E, x->a);
        struct tkp_val out = t->prev_set ? t->prev : UNK;
        if (E->update) {
            t->prev = v;
            t->prev_set = 1;
        }
        return out;
    }
    case OP_ONCE: case OP_HIST: case OP_SINCE:
        return tri(temporal(E, x));
    }
    return UNK;
}
