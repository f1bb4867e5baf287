/* tokprof check: from the parsed tree to monitors.
 *
 * Resolves names (constants are inlined, classes become class tests, kind words strings),
 * rewrites guarded quantifiers into propositional past formulas, checks that every construct is
 * used at a level where one streaming pass can decide it, and hands out state slots. Every
 * rejection names the construct and says why: the user should learn what the monitor can do,
 * not just that it refused. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/ast.h"
#include "check/compile.h"
#include "check/lower.h"
#include "check/prog.h"

#define RING_MAX 4096 /* a bounded [a,b] in steps/records keeps b+1 bits; refuse larger b */

void tkp_spec_free(struct tkp_spec *sp)
{
    if (!sp) return;
    for (int i = 0; i < sp->nn; i++) {
        free(sp->n[i].str);
        if (sp->n[i].re) {
            regfree(sp->n[i].re);
            free(sp->n[i].re);
        }
    }
    for (int i = 0; i < sp->ncls; i++)
        free(sp->cls[i].name);
    for (int i = 0; i < sp->ncst; i++)
        free(sp->cst[i].name);
    for (int i = 0; i < sp->nas; i++) {
        free(sp->as[i].id);
        free(sp->as[i].src);
    }
    tkp_code_free(sp->code);
    free(sp->n);
    free(sp->cls);
    free(sp->cst);
    free(sp->as);
    free(sp->text);
    free(sp);
}

struct cc {
    struct tkp_spec *sp;
    struct tkp_spec_err *e;
    struct tkp_assert *as;
};

static int cerr(struct cc *C, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cerr(struct cc *C, int node, const char *fmt, ...)
{
    C->e->line = node >= 0 ? C->sp->n[node].line : (C->as ? C->as->line : 1);
    C->e->col = node >= 0 ? C->sp->n[node].col : 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(C->e->msg, sizeof(C->e->msg), fmt, ap);
    va_end(ap);
    return TKP_ERR_SPEC;
}

#define X(i) (C->sp->n[i])

static const char *const kind_words[] = {"kernel", "graph", "memcpy", "memset", "sync", "event",
                                         "wait", "nvtx", "marker", "api", "token", "outside",
                                         "prefill", "decode", "mixed", "unknown", NULL};

/* Renames quantified variable `from` to the step variable s in a subtree. */
static void rename_var(struct cc *C, int n, const char *from)
{
    if (n < 0) return;
    struct tkp_node *x = &X(n);
    if (x->op == OP_VAR && x->str) {
        size_t l = strlen(from);
        if (!strncmp(x->str, from, l) && x->str[l] == '.') {
            x->str[0] = 's';
            memmove(x->str + 1, x->str + l, strlen(x->str + l) + 1);
        }
    }
    rename_var(C, X(n).a, from);
    rename_var(C, X(n).b, from);
    rename_var(C, X(n).c, from);
}

static int mentions(struct cc *C, int n, const char *var)
{
    if (n < 0) return 0;
    struct tkp_node *x = &X(n);
    size_t l = strlen(var);
    if (x->op == OP_VAR && x->str && !strncmp(x->str, var, l) && x->str[l] == '.') return 1;
    return mentions(C, x->a, var) || mentions(C, x->b, var) || mentions(C, x->c, var);
}

static int is_field(struct cc *C, int n, const char *var, const char *field)
{
    char want[128];
    snprintf(want, sizeof(want), "%s.%s", var, field);
    return n >= 0 && X(n).op == OP_VAR && X(n).str && !strcmp(X(n).str, want);
}

/* In `exists t2: steps before t where C`, takes the conjuncts of C that bound t.idx - t2.idx
 * into [lo, hi] and replaces them with true. Anything else that relates t and t2 is data
 * quantification the propositional monitor cannot express. */
static int take_distance(struct cc *C, int n, const char *t, const char *t2, double *lo, double *hi)
{
    if (n < 0) return 0;
    struct tkp_node *x = &X(n);
    if (x->op == OP_AND) {
        if (take_distance(C, x->a, t, t2, lo, hi)) return -1;
        return take_distance(C, X(n).b, t, t2, lo, hi);
    }
    if (!mentions(C, n, t)) return 0;
    int ok = (x->op == OP_GE || x->op == OP_GT || x->op == OP_LE || x->op == OP_LT) &&
             X(x->a).op == OP_SUB && is_field(C, X(x->a).a, t, "idx") &&
             is_field(C, X(x->a).b, t2, "idx") && X(x->b).op == OP_NUM;
    if (!ok)
        return cerr(C, n,
                    "this relates %s and %s beyond a distance '%s.idx - %s.idx >= N': that needs "
                    "first-order monitoring, which tokprof check does not do",
                    t, t2, t, t2);
    double d = X(x->b).num;
    switch (x->op) {
    case OP_GE: *lo = fmax(*lo, d); break;
    case OP_GT: *lo = fmax(*lo, floor(d) + 1); break;
    case OP_LE: *hi = fmin(*hi, d); break;
    case OP_LT: *hi = fmin(*hi, ceil(d) - 1); break;
    }
    x->op = OP_BOOL;
    x->num = 1;
    return 0;
}

/* forall t: step where G. F          =>  G -> F               (t renamed s)
 * exists t2: steps before t where C. F  =>  once[lo, hi steps] (C and F)   (t2 renamed s) */
static int rewrite_quant(struct cc *C, int n, const char *outer, int *out)
{
    struct tkp_node *x = &X(n);
    if (x->op != OP_FORALL && x->op != OP_EXISTS) {
        *out = n;
        return 0;
    }
    char var[64];
    snprintf(var, sizeof(var), "%s", x->str);
    int body, guard = x->c, dom = x->src;
    if (x->op == OP_FORALL) {
        if (dom != 0)
            return cerr(C, n, "'forall %s: steps before ...' is not supported: write "
                              "historically[...] instead", var);
        if (outer) return cerr(C, n, "only one 'forall ...: step' per assertion");
        if (C->as->level != LV_STEP)
            return cerr(C, n, "'forall %s: step' quantifies over steps: it needs a step-level "
                              "assertion", var);
        if (rewrite_quant(C, x->a, var, &body)) return -1;
        rename_var(C, body, var);
        rename_var(C, guard, var);
        if (guard < 0) {
            *out = body;
            return 0;
        }
        int imp = tkp_spec_node_new(C->sp, OP_IMPLIES, X(n).line, X(n).col);
        if (imp < 0) return cerr(C, n, "out of memory");
        X(imp).a = guard;
        X(imp).b = body;
        *out = imp;
        return 0;
    }
    if (dom != 1 || !outer)
        return cerr(C, n, "an unguarded 'exists %s: step' cannot be decided before the run ends: "
                          "use a run-level count(...) > 0, or bind it as 'steps before T' inside "
                          "'forall T: step'", var);
    double lo = 1, hi = INFINITY; /* strictly before */
    if (take_distance(C, guard, outer, var, &lo, &hi)) return -1;
    if (rewrite_quant(C, X(n).a, NULL, &body)) return -1;
    if (mentions(C, body, outer))
        return cerr(C, n, "the body of 'exists %s' refers to %s: that needs first-order "
                          "monitoring, which tokprof check does not do", var, outer);
    rename_var(C, body, var);
    rename_var(C, guard, var);
    int conj = body;
    if (guard >= 0) {
        conj = tkp_spec_node_new(C->sp, OP_AND, X(n).line, X(n).col);
        if (conj < 0) return cerr(C, n, "out of memory");
        X(conj).a = guard;
        X(conj).b = body;
    }
    int once = tkp_spec_node_new(C->sp, OP_ONCE, X(n).line, X(n).col);
    if (once < 0) return cerr(C, n, "out of memory");
    X(once).a = conj;
    X(once).has_iv = 1;
    X(once).num = lo;
    X(once).hi = hi;
    X(once).unit = U_STEPS;
    *out = once;
    return 0;
}

enum { CX_RECORD = 1, CX_STEP = 2, CX_RUN = 4, CX_IN_STEP_AGG = 8, CX_IN_RUN_AGG = 16,
       CX_CLASS = 32 };

static int check(struct cc *C, int n, int cx, int depth);

static int resolve_var(struct cc *C, int n, int cx)
{
    struct tkp_node *x = &X(n);
    char *dot = strchr(x->str, '.');
    if (dot) {
        int is_r = dot - x->str == 1 && x->str[0] == 'r';
        int is_s = dot - x->str == 1 && x->str[0] == 's';
        if (!is_r && !is_s)
            return cerr(C, n, "unknown variable in '%s' (r is the record, s the step)", x->str);
        int a = tkp_attr_lookup(is_r, dot + 1);
        if (a < 0 && is_s && strcmp(dot + 1, "records") == 0)
            return cerr(C, n, "'s.records' is a domain: write count(P in s) or exists(P in s)");
        if (a < 0) return cerr(C, n, "unknown attribute '%s' (docs/SPEC.md lists them)", x->str);
        x->op = OP_ATTR;
        x->attr = a;
        x->var_is_r = is_r;
        x->gpu = tkp_attr_gpu(a);
        x->is_time = tkp_attr_time(a);
        return 0;
    }
    for (int i = 0; i < C->sp->ncst; i++)
        if (!strcmp(C->sp->cst[i].name, x->str)) {
            /* folded at its declaration (fold_const): a leaf to copy */
            uint32_t line = x->line, col = x->col;
            char *s = x->str;
            *x = X(C->sp->cst[i].expr);
            x->line = line, x->col = col;
            free(s);
            if (x->str && !(x->str = strdup(x->str))) return cerr(C, n, "out of memory");
            return 0;
        }
    for (int i = 0; i < C->sp->ncls; i++)
        if (!strcmp(C->sp->cls[i].name, x->str)) {
            if (!(cx & (CX_RECORD | CX_IN_STEP_AGG | CX_CLASS)))
                return cerr(C, n, "class '%s' tests a record, and no record is bound here: "
                                  "use it in a record-level assertion or as count(%s in s)",
                            x->str, x->str);
            x->op = OP_CLASS;
            x->cls = i;
            x->gpu = C->sp->cls[i].gpu;
            return 0;
        }
    for (int i = 0; kind_words[i]; i++)
        if (!strcmp(kind_words[i], x->str)) {
            x->op = OP_STR;
            return 0;
        }
    return cerr(C, n, "unknown name '%s' (not a const, a class, or a kind word)", x->str);
}

/* Folds constant k's expression (node n, in place) into one NUM, STR or BOOL leaf: numbers with
 * their units, strings, kind words, earlier constants, + - * / and unary minus. Anything read at
 * run time, or any other operator, is refused here, at the declaration, not at a use. */
static int fold_const(struct cc *C, int n, int k, int depth)
{
    const char *name = C->sp->cst[k].name;
    if (depth > 200) return cerr(C, n, "constant '%s' nests too deeply", name);
    struct tkp_node *x = &X(n);
    switch (x->op) {
    case OP_NUM: case OP_STR: case OP_BOOL: return 0;
    case OP_VAR: {
        if (strchr(x->str, '.'))
            return cerr(C, n, "constant '%s' reads '%s', which is known only while checking: a "
                              "constant is numbers (with units), strings, earlier constants and "
                              "+ - * / on them", name, x->str);
        for (int i = 0; i < k; i++)
            if (!strcmp(C->sp->cst[i].name, x->str)) {
                const struct tkp_node *v = &X(C->sp->cst[i].expr);
                char *s = v->str ? strdup(v->str) : NULL;
                if (v->str && !s) return cerr(C, n, "out of memory");
                free(x->str);
                x->op = v->op, x->num = v->num, x->is_time = v->is_time, x->str = s;
                return 0;
            }
        for (int i = k; i < C->sp->ncst; i++)
            if (!strcmp(C->sp->cst[i].name, x->str))
                return cerr(C, n, "constant '%s' uses '%s', which is not defined before it",
                            name, x->str);
        for (int i = 0; kind_words[i]; i++)
            if (!strcmp(kind_words[i], x->str)) {
                x->op = OP_STR;
                return 0;
            }
        return cerr(C, n, "constant '%s' uses '%s', which is not a constant defined before it "
                          "(classes and attributes are known only while checking)", name, x->str);
    }
    case OP_NEG:
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: {
        int a = x->a, b = x->op == OP_NEG ? -1 : x->b;
        if (fold_const(C, a, k, depth + 1) || (b >= 0 && fold_const(C, b, k, depth + 1)))
            return -1;
        const struct tkp_node *l = &X(a), *r = b >= 0 ? &X(b) : NULL;
        if (l->op != OP_NUM || (r && r->op != OP_NUM))
            return cerr(C, n, "constant '%s': arithmetic needs numbers", name);
        double v = l->num, w = r ? r->num : 0;
        int lt = l->is_time, rt = r && r->is_time;
        x = &X(n);
        switch (x->op) {
        case OP_NEG: v = -v; break;
        case OP_ADD: v += w; break;
        case OP_SUB: v -= w; break;
        case OP_MUL: v *= w; break;
        default:
            if (w == 0) return cerr(C, n, "constant '%s' divides by zero", name);
            v /= w;
        }
        /* the unit follows the expression: 2 * 5ms is a time, 10ms / 2ms a ratio */
        x->is_time = x->op == OP_DIV ? lt && !rt : lt || rt;
        x->op = OP_NUM, x->num = v, x->a = x->b = -1;
        return 0;
    }
    default:
        return cerr(C, n, "constant '%s' must be a constant expression (numbers with units, "
                          "strings, earlier constants, + - * /)", name);
    }
}

static const char *opname(int op)
{
    switch (op) {
    case OP_PREV: return "prev";
    case OP_ONCE: return "once";
    case OP_HIST: return "historically";
    default: return "since";
    }
}

static int check_temporal(struct cc *C, int n, int cx)
{
    struct tkp_node *x = &X(n);
    const char *w = opname(x->op);
    if (cx & (CX_IN_STEP_AGG | CX_IN_RUN_AGG | CX_CLASS | CX_RUN))
        return cerr(C, n, "'%s' is a temporal operator: it belongs at record or step level, not "
                          "inside an aggregate, a class or a run-level assertion", w);
    if (x->in_step && !(cx & CX_RECORD))
        return cerr(C, n, "'%s in step' scopes an operator to the records of one step: it needs a "
                          "record-level assertion", w);
    if (x->has_iv) {
        if (x->op == OP_PREV) return cerr(C, n, "'prev' takes no interval");
        if ((cx & CX_STEP) && x->unit == U_RECORDS)
            return cerr(C, n, "a step-level '%s' counts steps or time, not records", w);
        if ((cx & CX_RECORD) && x->unit == U_STEPS)
            return cerr(C, n, "a record-level '%s' counts records or time, not steps", w);
        int bounded = x->num > 0 && isfinite(x->hi);
        if (bounded && x->unit == U_NS)
            return cerr(C, n, "'%s[a,b]' with a clock-time lower bound above 0 and a finite upper "
                              "bound needs state that grows with the event rate; use [0,b], "
                              "[a,*], or bounds in %s", w, cx & CX_STEP ? "steps" : "records");
        if (bounded && x->op == OP_SINCE)
            return cerr(C, n, "'since[a,b]' with 0 < a and finite b is not supported: use [0,b] "
                              "or [a,*]");
        if (bounded && x->hi >= RING_MAX)
            return cerr(C, n, "'%s[a,b]' keeps b+1 bits: b must be below %d", w, RING_MAX);
    }
    x->slot = C->sp->nslots_temporal++;
    return 0;
}

static int check(struct cc *C, int n, int cx, int depth)
{
    if (n < 0) return 0;
    if (depth > 200) return cerr(C, n, "the formula nests too deeply");
    struct tkp_node *x = &X(n);
    switch (x->op) {
    case OP_VAR:
        if (resolve_var(C, n, cx)) return -1;
        x = &X(n);
        if (x->op == OP_ATTR) {
            int is_r = x->var_is_r;
            if (is_r && !(cx & (CX_RECORD | CX_IN_STEP_AGG | CX_CLASS)))
                return cerr(C, n, "'%s': no record is bound here (r exists in record-level "
                                  "assertions and inside count(... in s where ...))",
                            tkp_attr_name(x->attr));
            if (!is_r && (cx & CX_RUN) && !(cx & CX_IN_RUN_AGG))
                return cerr(C, n, "'%s': no step is bound in a run-level formula outside an "
                                  "aggregate 'in steps'", tkp_attr_name(x->attr));
            if (!is_r && (cx & CX_RECORD) && !(cx & CX_IN_STEP_AGG)) {
                /* the step is still open at a record: its own fields say what is known */
                const char *alt = x->attr == A_S_IDX ? "r.step" : x->attr == A_S_TOKEN ? "r.token"
                                  : x->attr == A_S_THREAD ? "r.thread" : NULL;
                if (alt)
                    return cerr(C, n, "'%s' at record level: no step is bound there (it is still "
                                      "open); the record's own '%s' has that value",
                                tkp_attr_name(x->attr), alt);
                return cerr(C, n, "'%s' at record level refers to the rest of the step, which has "
                                  "not been seen yet: use it in a step-level assertion "
                                  "(count(... in s where ...))", tkp_attr_name(x->attr));
            }
            if (x->attr == A_R_POS && (cx & CX_CLASS))
                return cerr(C, n, "r.pos cannot be used in a class");
        }
        return 0;
    case OP_ATTR:
        x->gpu = tkp_attr_gpu(x->attr);
        x->is_time = tkp_attr_time(x->attr);
        if (!(cx & (CX_STEP | CX_IN_RUN_AGG)) && !(cx & CX_IN_STEP_AGG) &&
            TKP_ATTR_IS_STEP(x->attr) && x->attr != A_S_IDX && x->attr != A_S_TOKEN)
            return cerr(C, n, "'%s' is a step attribute: it needs a step-level assertion",
                        tkp_attr_name(x->attr));
        return 0;
    case OP_CLASS:
    case OP_NUM:
    case OP_STR:
    case OP_BOOL:
        return 0;
    case OP_BASE_KEY:
        C->sp->uses_base = 1;
        return 0;
    case OP_BASE_EXPR:
        if (!(cx & CX_RUN) || (cx & CX_IN_RUN_AGG))
            return cerr(C, n, "baseline(EXPR) compares run aggregates: use it in a run-level "
                              "assertion");
        C->sp->uses_base = 1;
        if (check(C, x->a, cx, depth + 1)) return -1;
        X(n).is_time = X(X(n).a).is_time;
        return 0;
    case OP_PREV:
    case OP_ONCE:
    case OP_HIST:
    case OP_SINCE:
        if (check_temporal(C, n, cx)) return -1;
        if (check(C, X(n).a, cx, depth + 1) || check(C, X(n).b, cx, depth + 1)) return -1;
        X(n).gpu = X(X(n).a).gpu || (X(n).b >= 0 && X(X(n).b).gpu);
        X(n).is_time = X(X(n).a).is_time;
        return 0;
    case OP_AGG: {
        int src = x->src;
        if (src < 0) src = (cx & CX_RUN) && !(cx & CX_IN_RUN_AGG) ? SRC_RUN : SRC_STEP;
        x->src = src;
        if (src == SRC_STEP) {
            if (cx & (CX_IN_STEP_AGG | CX_CLASS))
                return cerr(C, n, "aggregates do not nest inside per-step aggregates or classes");
            if ((cx & CX_RECORD) && !(cx & CX_IN_STEP_AGG))
                return cerr(C, n, "a per-step aggregate is known when the step closes: it needs "
                                  "a step-level assertion");
            if ((cx & CX_RUN) && !(cx & CX_IN_RUN_AGG))
                return cerr(C, n, "a per-step aggregate in a run-level formula must sit inside "
                                  "an aggregate 'in steps' (e.g. max(count(P in s) in steps))");
            int sub = CX_STEP | CX_IN_STEP_AGG | (cx & CX_IN_RUN_AGG);
            if (check(C, x->a, sub, depth + 1) || check(C, X(n).b, sub, depth + 1)) return -1;
            x = &X(n);
            x->gpu = (x->a >= 0 && X(x->a).gpu) || (x->b >= 0 && X(x->b).gpu);
            x->slot = C->sp->nslots_agg++;
        } else {
            if (!(cx & CX_RUN) || (cx & CX_IN_RUN_AGG))
                return cerr(C, n, "an aggregate 'in steps' is final at the end of the run: it "
                                  "needs a run-level assertion ([run])");
            int sub = CX_RUN | CX_IN_RUN_AGG | CX_STEP;
            if (check(C, x->a, sub, depth + 1) || check(C, X(n).b, sub, depth + 1)) return -1;
            x = &X(n);
            x->gpu = (x->a >= 0 && X(x->a).gpu) || (x->b >= 0 && X(x->b).gpu);
            x->slot = C->sp->nslots_run++;
        }
        X(n).is_time = X(n).a >= 0 && X(X(n).a).is_time && X(n).agg != AG_COUNT &&
                       X(n).agg != AG_EXISTS;
        return 0;
    }
    case OP_FORALL:
    case OP_EXISTS:
        return cerr(C, n, "quantifiers must open the assertion ('forall t: step where G. ...')");
    case OP_MATCH: {
        if (check(C, x->a, cx, depth + 1)) return -1;
        x = &X(n);
        if (X(x->b).op != OP_STR) return cerr(C, n, "=~ takes a /regex/ or a string");
        x->re = calloc(1, sizeof(regex_t));
        if (!x->re) return cerr(C, n, "out of memory");
        int rc = regcomp(x->re, X(x->b).str, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, x->re, why, sizeof(why));
            free(x->re);
            x->re = NULL;
            return cerr(C, x->b, "bad regex /%s/: %s", X(x->b).str, why);
        }
        x->gpu = X(x->a).gpu;
        return 0;
    }
    default: /* binary and unary operators */
        if (check(C, x->a, cx, depth + 1) || check(C, X(n).b, cx, depth + 1)) return -1;
        x = &X(n);
        x->gpu = (x->a >= 0 && X(x->a).gpu) || (x->b >= 0 && X(x->b).gpu);
        if (x->op == OP_ADD || x->op == OP_SUB || x->op == OP_NEG)
            x->is_time = (x->a >= 0 && X(x->a).is_time) || (x->b >= 0 && X(x->b).is_time);
        if (x->op == OP_SUB && x->a >= 0 && X(x->a).is_time && X(x->b).is_time) x->is_time = 1;
        if (x->op == OP_MUL)
            x->is_time = X(x->a).is_time || X(x->b).is_time;
        if (x->op == OP_DIV) x->is_time = X(x->a).is_time && !X(x->b).is_time;
        return 0;
    }
}

/* Marks the subtrees that hold a temporal operator: and/or/implies may skip the others. */
static int mark_temporal(struct tkp_spec *sp, int n, int depth)
{
    if (n < 0 || depth > 400) return n >= 0;
    struct tkp_node *x = &sp->n[n];
    int t = x->op == OP_PREV || x->op == OP_ONCE || x->op == OP_HIST || x->op == OP_SINCE;
    t |= mark_temporal(sp, x->a, depth + 1);
    t |= mark_temporal(sp, x->b, depth + 1);
    t |= mark_temporal(sp, x->c, depth + 1);
    sp->n[n].temporal = t;
    return t;
}

int tkp_spec_compile(struct tkp_spec *sp, struct tkp_spec_err *e)
{
    struct cc C = {.sp = sp, .e = e};
    struct tkp_assert top = {.line = 1};
    C.as = &top;
    /* constants first, in order: each is folded to a value where it is declared */
    for (int i = 0; i < sp->ncst; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(sp->cst[j].name, sp->cst[i].name))
                return cerr(&C, sp->cst[i].expr, "constant '%s' is defined twice",
                            sp->cst[i].name);
        if (fold_const(&C, sp->cst[i].expr, i, 0)) return TKP_ERR_SPEC;
    }
    /* classes next: they are record predicates and may refer to constants and earlier classes */
    for (int i = 0; i < sp->ncls; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(sp->cls[j].name, sp->cls[i].name))
                return cerr(&C, sp->cls[i].expr, "class '%s' is defined twice", sp->cls[i].name);
        struct tkp_assert dummy = {.line = 1};
        C.as = &dummy;
        /* a class may only use classes defined before it: no recursion */
        int saved = sp->ncls;
        sp->ncls = i;
        int rc = check(&C, sp->cls[i].expr, CX_CLASS, 0);
        sp->ncls = saved;
        if (rc) return TKP_ERR_SPEC;
        sp->cls[i].gpu = sp->n[sp->cls[i].expr].gpu;
    }
    for (int i = 0; i < sp->nas; i++) {
        struct tkp_assert *a = &sp->as[i];
        C.as = a;
        int body;
        if (rewrite_quant(&C, a->body, NULL, &body)) return TKP_ERR_SPEC;
        a->body = body;
        int cx = a->level == LV_RECORD ? CX_RECORD : a->level == LV_STEP ? CX_STEP : CX_RUN;
        if (check(&C, a->body, cx, 0)) return TKP_ERR_SPEC;
        /* a run-level guard filters the steps its aggregates see */
        int wcx = a->level == LV_RUN ? CX_STEP : cx;
        if (a->when >= 0) {
            if (a->level == LV_RUN) {
                /* evaluated at each step close, like an aggregate's operand */
                if (check(&C, a->when, CX_STEP | CX_IN_RUN_AGG | CX_RUN, 0)) return TKP_ERR_SPEC;
            } else if (check(&C, a->when, wcx, 0)) {
                return TKP_ERR_SPEC;
            }
        }
        a->gpu = sp->n[a->body].gpu || (a->when >= 0 && sp->n[a->when].gpu);
    }
    for (int i = 0; i < sp->nas; i++) {
        mark_temporal(sp, sp->as[i].body, 0);
        mark_temporal(sp, sp->as[i].when, 0);
    }
    return tkp_spec_lower(sp, e);
}
