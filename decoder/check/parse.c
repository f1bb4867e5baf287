/* tokprof check: the spec parser (recursive descent over docs/SPEC.md's grammar).
 *
 * Produces the tree only; names, levels and monitorability are the compiler's business, so a
 * syntax error and a semantic error point at the same kind of position. The first error stops
 * the parse: later ones are usually its echo. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "check/ast.h"
#include "check/lex.h"
#include "check/parse.h"

struct parser {
    struct tkp_lexer lx;
    struct tkp_spec *sp;
    struct tkp_spec_err *e;
    int failed;
};

static int perr(struct parser *P, const struct tkp_token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(struct parser *P, const struct tkp_token *t, const char *fmt, ...)
{
    if (P->failed) return -1;
    P->failed = 1;
    P->e->line = t->line;
    P->e->col = t->col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->e->msg, sizeof(P->e->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static void parse_next(struct parser *P)
{
    if (P->failed) return;
    if (tkp_lex_next(&P->lx) == TK_ERR) perr(P, &P->lx.tok, "%s", P->lx.err);
}

static int is(struct parser *P, const char *s)
{
    return !P->failed && tkp_lex_is(&P->lx, s);
}

static int accept(struct parser *P, const char *s)
{
    if (!is(P, s)) return 0;
    parse_next(P);
    return 1;
}

static void tokdesc(const struct tkp_token *t, char *buf, size_t n)
{
    if (t->kind == TK_EOF)
        snprintf(buf, n, "end of file");
    else
        snprintf(buf, n, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->p);
}

static int expect(struct parser *P, const char *s)
{
    if (accept(P, s)) return 0;
    char d[64];
    tokdesc(&P->lx.tok, d, sizeof(d));
    return perr(P, &P->lx.tok, "expected '%s', found %s", s, d);
}

static char *tokstr(const struct tkp_token *t, size_t skip, size_t trim)
{
    size_t n = t->len - skip - trim;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, t->p + skip, n);
    s[n] = 0;
    return s;
}

static int node(struct parser *P, int op, const struct tkp_token *t)
{
    int i = tkp_spec_node_new(P->sp, op, t->line, t->col);
    if (i < 0) return perr(P, t, "out of memory");
    return i;
}

static struct tkp_node *N(struct parser *P, int i)
{
    return &P->sp->n[i];
}

static int formula(struct parser *P);
static int expr(struct parser *P);

static const char *const future_ops[] = {"next", "eventually", "always", "until", "future",
                                         "finally", "globally", "release", NULL};

/* A future-time operator where the current token is one, prefix (always P) or infix (P until
 * Q): every one is refused with the same reason. Returns -1 after the error, 0 when none. */
static int future_refuse(struct parser *P)
{
    for (int i = 0; future_ops[i]; i++)
        if (is(P, future_ops[i]))
            return perr(P, &P->lx.tok,
                        "'%s' looks into the future: only past-time operators (prev, once, "
                        "historically, since) can give a verdict at most one step late",
                        future_ops[i]);
    return 0;
}

/* The current word is followed by '(' (blanks allowed): `exists(` is the aggregate, `exists t:`
 * the quantifier. */
static int call_follows(const struct parser *P)
{
    const char *c = P->lx.p;
    while (*c == ' ' || *c == '\t') c++;
    return *c == '(';
}

/* "[" dur "," (dur | "*") "]" */
static int interval(struct parser *P, int n)
{
    if (!is(P, "[")) return 0;
    struct tkp_token at = P->lx.tok;
    parse_next(P);
    struct tkp_node *x = N(P, n);
    x->has_iv = 1;
    if (P->lx.tok.kind != TK_NUM) return perr(P, &P->lx.tok, "expected a bound like 3 steps or 10ms");
    x->num = P->lx.tok.num;
    x->unit = P->lx.tok.unit;
    parse_next(P);
    if (expect(P, ",")) return -1;
    if (accept(P, "*")) {
        x = N(P, n);
        x->hi = INFINITY;
    } else {
        if (P->lx.tok.kind != TK_NUM) return perr(P, &P->lx.tok, "expected a bound or '*'");
        x = N(P, n);
        x->hi = P->lx.tok.num;
        if (x->unit == U_NONE) x->unit = P->lx.tok.unit;
        if (P->lx.tok.unit != U_NONE && P->lx.tok.unit != x->unit)
            return perr(P, &P->lx.tok, "both bounds of an interval take the same unit");
        parse_next(P);
    }
    if (expect(P, "]")) return -1;
    x = N(P, n);
    if (x->unit == U_NONE) return perr(P, &at, "an interval needs a unit (steps, records, ns..s)");
    if (x->hi < x->num) return perr(P, &at, "empty interval: upper bound below lower bound");
    return 0;
}

static int in_step(struct parser *P, int n)
{
    if (!is(P, "in")) return 0;
    struct tkp_token at = P->lx.tok;
    parse_next(P);
    if (!accept(P, "step")) return perr(P, &at, "expected 'in step' (the operator's scope)");
    N(P, n)->in_step = 1;
    return 0;
}

static int agg_kind(const struct tkp_token *t, int *agg, double *pct)
{
    static const struct {
        const char *w;
        int agg;
    } a[] = {{"count", AG_COUNT}, {"sum", AG_SUM},     {"min", AG_MIN},
             {"max", AG_MAX},     {"mean", AG_MEAN},   {"exists", AG_EXISTS},
             {"first", AG_FIRST}, {"last", AG_LAST}};
    for (size_t i = 0; i < sizeof(a) / sizeof(*a); i++)
        if (strlen(a[i].w) == t->len && !memcmp(a[i].w, t->p, t->len)) {
            *agg = a[i].agg;
            return 1;
        }
    if (t->len >= 2 && t->len <= 4 && t->p[0] == 'p') {
        double v = 0;
        for (size_t i = 1; i < t->len; i++) {
            if (t->p[i] < '0' || t->p[i] > '9') return 0;
            v = v * 10 + (t->p[i] - '0');
        }
        if (t->len == 4) v /= 10; /* p999 = 99.9th */
        if (v > 100) return 0;
        *agg = AG_PCT;
        *pct = v;
        return 1;
    }
    return 0;
}

/* agg "(" [formula] ["in" ("s" | ID | "steps")] ["where" formula] ")" — the current token is
 * the aggregate's name. */
static int aggregate(struct parser *P, int agg, double pct)
{
    struct tkp_token at = P->lx.tok;
    int n = node(P, OP_AGG, &at);
    if (n < 0) return -1;
    N(P, n)->agg = agg;
    N(P, n)->num = pct;
    N(P, n)->src = -1;
    parse_next(P);
    if (expect(P, "(")) return -1;
    if (!is(P, "in") && !is(P, "where") && !is(P, ")")) {
        int a = formula(P);
        if (a < 0) return -1;
        N(P, n)->a = a;
    }
    if (accept(P, "in")) {
        if (accept(P, "steps")) {
            N(P, n)->src = SRC_RUN;
            if (is(P, "last"))
                return perr(P, &P->lx.tok, "sliding windows ('in steps last W') are not supported");
        } else if (P->lx.tok.kind == TK_ID) {
            N(P, n)->src = SRC_STEP;
            parse_next(P);
        } else {
            return perr(P, &P->lx.tok, "expected 's' or 'steps' after 'in'");
        }
    }
    if (accept(P, "where")) {
        int b = formula(P);
        if (b < 0) return -1;
        N(P, n)->b = b;
    }
    if (expect(P, ")")) return -1;
    if (N(P, n)->a < 0 && agg != AG_COUNT && agg != AG_EXISTS)
        return perr(P, &at, "this aggregate needs a value to fold");
    return n;
}

static int parse_path(struct parser *P)
{
    struct tkp_token at = P->lx.tok;
    char *head = tokstr(&at, 0, 0);
    if (!head) return perr(P, &at, "out of memory");
    parse_next(P);
    /* "t.idx" is a path; "t. " ends a quantifier's domain */
    if (P->lx.tok.kind == TK_PUNCT && P->lx.tok.len == 1 && *P->lx.tok.p == '.' &&
        (P->lx.p[0] == '_' || isalpha((unsigned char)P->lx.p[0]))) {
        parse_next(P);
        struct tkp_token f = P->lx.tok;
        parse_next(P);
        int n = node(P, OP_VAR, &at);
        if (n < 0) {
            free(head);
            return -1;
        }
        /* a field of a variable: OP_VAR with str "head.field"; the compiler maps it */
        size_t hl = strlen(head);
        char *s = malloc(hl + f.len + 2);
        if (!s) {
            free(head);
            return perr(P, &at, "out of memory");
        }
        memcpy(s, head, hl);
        s[hl] = '.';
        memcpy(s + hl + 1, f.p, f.len);
        s[hl + 1 + f.len] = 0;
        free(head);
        N(P, n)->str = s;
        return n;
    }
    int n = node(P, OP_VAR, &at);
    if (n < 0) {
        free(head);
        return -1;
    }
    N(P, n)->str = head;
    return n;
}

static int atom(struct parser *P)
{
    struct tkp_token t = P->lx.tok;
    if (P->failed) return -1;
    if (t.kind == TK_NUM) {
        int n = node(P, OP_NUM, &t);
        if (n < 0) return -1;
        N(P, n)->num = t.num;
        N(P, n)->is_time = t.unit == U_NS;
        if (t.unit == U_STEPS || t.unit == U_RECORDS) N(P, n)->unit = t.unit;
        parse_next(P);
        return n;
    }
    if (t.kind == TK_STR) {
        int n = node(P, OP_STR, &t);
        if (n < 0) return -1;
        if (!(N(P, n)->str = tokstr(&t, 1, 1))) return perr(P, &t, "out of memory");
        parse_next(P);
        return n;
    }
    if (is(P, "(")) {
        parse_next(P);
        int n = formula(P);
        if (expect(P, ")")) return -1;
        return n;
    }
    if (is(P, "-")) {
        parse_next(P);
        int a = atom(P);
        if (a < 0) return -1;
        int n = node(P, OP_NEG, &t);
        if (n >= 0) N(P, n)->a = a;
        return n;
    }
    if (t.kind != TK_ID) {
        char d[64];
        tokdesc(&t, d, sizeof(d));
        return perr(P, &t, "expected a value, found %s", d);
    }
    if (future_refuse(P)) return -1;
    if (is(P, "true") || is(P, "false")) {
        int n = node(P, OP_BOOL, &t);
        if (n >= 0) N(P, n)->num = is(P, "true");
        parse_next(P);
        return n;
    }
    if (is(P, "not")) {
        parse_next(P);
        int a = atom(P);
        if (a < 0) return -1;
        int n = node(P, OP_NOT, &t);
        if (n >= 0) N(P, n)->a = a;
        return n;
    }
    if (is(P, "prev") || is(P, "once") || is(P, "historically")) {
        int op = is(P, "prev") ? OP_PREV : is(P, "once") ? OP_ONCE : OP_HIST;
        int n = node(P, op, &t);
        if (n < 0) return -1;
        parse_next(P);
        if (interval(P, n) || in_step(P, n)) return -1;
        int a = atom(P);
        if (a < 0) return -1;
        N(P, n)->a = a;
        return n;
    }
    if (is(P, "baseline")) {
        parse_next(P);
        if (expect(P, "(")) return -1;
        int n;
        if (P->lx.tok.kind == TK_STR) {
            n = node(P, OP_BASE_KEY, &t);
            if (n < 0) return -1;
            if (!(N(P, n)->str = tokstr(&P->lx.tok, 1, 1))) return perr(P, &t, "out of memory");
            parse_next(P);
        } else {
            int a = expr(P);
            if (a < 0) return -1;
            n = node(P, OP_BASE_EXPR, &t);
            if (n < 0) return -1;
            N(P, n)->a = a;
        }
        if (expect(P, ")")) return -1;
        return n;
    }
    /* busy(s), idle_frac(s), maxgap(s): the draft's call forms of s.busy, ... */
    if ((is(P, "busy") || is(P, "idle_frac") || is(P, "maxgap")) && call_follows(P)) {
        int attr = is(P, "busy") ? A_S_BUSY : is(P, "idle_frac") ? A_S_IDLE : A_S_MAXGAP;
        parse_next(P);
        parse_next(P);
        if (P->lx.tok.kind != TK_ID) return perr(P, &P->lx.tok, "expected a step variable");
        parse_next(P);
        if (expect(P, ")")) return -1;
        int n = node(P, OP_ATTR, &t);
        if (n >= 0) N(P, n)->attr = attr;
        return n;
    }
    int agg;
    double pct = 0;
    if (agg_kind(&t, &agg, &pct) && call_follows(P)) return aggregate(P, agg, pct);
    return parse_path(P);
}

/* A left-associative chain of `sub` operands joined by `a` (OP `op_a`) or `b` (OP `op_b`). */
static int chain(struct parser *P, int (*sub)(struct parser *), const char *a, int op_a,
                 const char *b, int op_b)
{
    int l = sub(P);
    while (l >= 0 && (is(P, a) || is(P, b))) {
        struct tkp_token t = P->lx.tok;
        int op = is(P, a) ? op_a : op_b;
        parse_next(P);
        int r = sub(P);
        if (r < 0) return -1;
        int n = node(P, op, &t);
        if (n < 0) return -1;
        N(P, n)->a = l, N(P, n)->b = r;
        l = n;
    }
    return l;
}

static int term(struct parser *P)
{
    return chain(P, atom, "*", OP_MUL, "/", OP_DIV);
}

static int expr(struct parser *P)
{
    return chain(P, term, "+", OP_ADD, "-", OP_SUB);
}

static int cmp(struct parser *P)
{
    static const struct {
        const char *w;
        int op;
    } rel[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE},
               {"<", OP_LT},  {">", OP_GT},  {"=~", OP_MATCH}};
    int l = expr(P);
    if (l < 0) return -1;
    for (size_t i = 0; i < sizeof(rel) / sizeof(*rel); i++) {
        if (!is(P, rel[i].w)) continue;
        struct tkp_token t = P->lx.tok;
        parse_next(P);
        int r;
        if (rel[i].op == OP_MATCH) {
            if (!is(P, "/") && P->lx.tok.kind != TK_STR)
                return perr(P, &P->lx.tok, "expected /regex/ or a string after =~");
            if (is(P, "/") && tkp_lex_regex(&P->lx) == TK_ERR) return perr(P, &t, "%s", P->lx.err);
            struct tkp_token rt = P->lx.tok;
            r = node(P, OP_STR, &rt);
            if (r < 0) return -1;
            if (!(N(P, r)->str = tokstr(&rt, 1, 1))) return perr(P, &rt, "out of memory");
            parse_next(P);
        } else {
            r = expr(P);
        }
        if (r < 0) return -1;
        int n = node(P, rel[i].op, &t);
        if (n < 0) return -1;
        N(P, n)->a = l, N(P, n)->b = r;
        return n;
    }
    return l;
}

static int notf(struct parser *P)
{
    if (is(P, "not")) {
        struct tkp_token t = P->lx.tok;
        parse_next(P);
        int a = notf(P);
        if (a < 0) return -1;
        int n = node(P, OP_NOT, &t);
        if (n >= 0) N(P, n)->a = a;
        return n;
    }
    return cmp(P);
}

static int sincef(struct parser *P)
{
    int l = notf(P);
    while (l >= 0 && is(P, "since")) {
        struct tkp_token t = P->lx.tok;
        int n = node(P, OP_SINCE, &t);
        if (n < 0) return -1;
        parse_next(P);
        if (interval(P, n) || in_step(P, n)) return -1;
        int r = notf(P);
        if (r < 0) return -1;
        N(P, n)->a = l, N(P, n)->b = r;
        l = n;
    }
    /* `P until Q` stands where `since` would: refuse it for what it is, not as a stray word */
    if (l >= 0 && future_refuse(P)) return -1;
    return l;
}

static int binary(struct parser *P, const char *w, int op, int (*sub)(struct parser *))
{
    return chain(P, sub, w, op, w, op);
}

static int andf(struct parser *P)
{
    return binary(P, "and", OP_AND, sincef);
}

static int orf(struct parser *P)
{
    return binary(P, "or", OP_OR, andf);
}

static int formula(struct parser *P)
{
    int l = orf(P);
    if (l >= 0 && is(P, "->")) {
        struct tkp_token t = P->lx.tok;
        parse_next(P);
        int r = formula(P);
        if (r < 0) return -1;
        int n = node(P, OP_IMPLIES, &t);
        if (n < 0) return -1;
        N(P, n)->a = l, N(P, n)->b = r;
        return n;
    }
    return l;
}

/* { ("forall" | "exists") ID ":" domain ["where" formula] "." } formula */
static int stmt(struct parser *P)
{
    /* `exists(P in s)` opening a formula is the aggregate, not the quantifier */
    if (!is(P, "forall") && !(is(P, "exists") && !call_follows(P))) return formula(P);
    struct tkp_token t = P->lx.tok;
    int n = node(P, is(P, "forall") ? OP_FORALL : OP_EXISTS, &t);
    if (n < 0) return -1;
    parse_next(P);
    if (P->lx.tok.kind != TK_ID) return perr(P, &P->lx.tok, "expected a variable name");
    if (!(N(P, n)->str = tokstr(&P->lx.tok, 0, 0))) return perr(P, &t, "out of memory");
    parse_next(P);
    if (expect(P, ":")) return -1;
    if (accept(P, "step")) {
        N(P, n)->src = 0; /* every step */
    } else if (accept(P, "steps")) {
        if (expect(P, "before")) return -1;
        if (P->lx.tok.kind != TK_ID) return perr(P, &P->lx.tok, "expected a step variable");
        N(P, n)->src = 1; /* steps before the outer variable */
        parse_next(P);
    } else {
        return perr(P, &P->lx.tok,
                    "quantifiers range over 'step' or 'steps before VAR' (a finite, past domain)");
    }
    N(P, n)->c = -1;
    if (accept(P, "where")) {
        int c = formula(P);
        if (c < 0) return -1;
        N(P, n)->c = c;
    }
    if (expect(P, ".")) return -1;
    int body = stmt(P);
    if (body < 0) return -1;
    N(P, n)->a = body;
    return n;
}

static int option(struct parser *P, struct tkp_assert *a)
{
    struct tkp_token t = P->lx.tok;
    if (accept(P, "record")) a->level = LV_RECORD;
    else if (accept(P, "step")) a->level = LV_STEP;
    else if (accept(P, "run")) a->level = LV_RUN;
    else if (accept(P, "warn")) a->warn = 1;
    else if (accept(P, "skip") || accept(P, "witness")) {
        int skip = t.len == 4;
        if (P->lx.tok.kind != TK_NUM || P->lx.tok.num < 0 || P->lx.tok.num > 1e9 ||
            P->lx.tok.num != floor(P->lx.tok.num) ||
            (P->lx.tok.unit != U_NONE && P->lx.tok.unit != U_STEPS))
            return perr(P, &P->lx.tok, skip ? "expected a step count (skip 50 steps)"
                                            : "expected a count (witness 5)");
        if (skip) a->skip = (uint64_t)P->lx.tok.num;
        else a->witness = (int)(P->lx.tok.num > 1000 ? 1000 : P->lx.tok.num);
        parse_next(P);
    } else if (accept(P, "when")) {
        if ((a->when = formula(P)) < 0) return -1;
    } else {
        char d[64];
        tokdesc(&t, d, sizeof(d));
        return perr(P, &t, "unknown option %s (record, step, run, warn, skip N steps, when COND, "
                           "witness N)", d);
    }
    return 0;
}

/* Room for element n of an array whose capacity is implied by its count: it grows when n is 0
 * or a power of two (the array is full then), to 2n (4 at first). 0, or -1 out of memory. */
static int grow(void **p, int n, size_t sz)
{
    if (n & (n - 1) && n) return 0;
    size_t cap = (size_t)n;
    return tkp_grow_to(p, &cap, cap + 1, sz, 4, 0) ? -1 : 0;
}

static int decl(struct parser *P)
{
    struct tkp_spec *sp = P->sp;
    struct tkp_token t = P->lx.tok;
    int kind = is(P, "const") ? 0 : is(P, "class") ? 1 : is(P, "assert") ? 2 : -1;
    if (kind < 0) {
        char d[64];
        tokdesc(&t, d, sizeof(d));
        return perr(P, &t, "expected 'const', 'class' or 'assert', found %s", d);
    }
    parse_next(P);
    struct tkp_token id = P->lx.tok;
    if (id.kind != TK_ID) return perr(P, &id, "expected a name");
    char *name = tokstr(&id, 0, 0);
    if (!name) return perr(P, &id, "out of memory");
    parse_next(P);
    if (kind < 2) {
        if (expect(P, "=")) goto bad;
        int e = kind == 0 ? expr(P) : formula(P);
        if (e < 0 || expect(P, ";")) goto bad;
        if (kind == 0) {
            if (grow((void **)&sp->cst, sp->ncst, sizeof(*sp->cst))) goto oom;
            sp->cst[sp->ncst++] = (struct tkp_const){name, e};
        } else {
            if (grow((void **)&sp->cls, sp->ncls, sizeof(*sp->cls))) goto oom;
            sp->cls[sp->ncls++] = (struct tkp_spec_class){name, e, 0};
        }
        return 0;
    }
    struct tkp_assert a = {.id = name, .line = t.line, .level = LV_STEP, .when = -1,
                           .witness = 5, .body = -1};
    if (accept(P, "[")) {
        do {
            if (option(P, &a)) goto bad;
        } while (accept(P, ","));
        if (expect(P, "]")) goto bad;
    }
    if (expect(P, ":")) goto bad;
    const char *from = P->lx.tok.p;
    if ((a.body = stmt(P)) < 0) goto bad;
    const char *to = P->lx.tok.p;
    while (to > from && (to[-1] == ' ' || to[-1] == '\n' || to[-1] == '\t')) to--;
    if (expect(P, ";")) goto bad;
    a.src = malloc((size_t)(to - from) + 1);
    if (!a.src) goto oom;
    /* one line for reports: newlines and runs of blanks become one space */
    size_t k = 0;
    for (const char *c = from; c < to; c++) {
        char ch = (*c == '\n' || *c == '\t' || *c == '\r') ? ' ' : *c;
        if (ch == ' ' && k && a.src[k - 1] == ' ') continue;
        a.src[k++] = ch;
    }
    a.src[k] = 0;
    for (int i = 0; i < sp->nas; i++)
        if (!strcmp(sp->as[i].id, name)) {
            free(a.src);
            perr(P, &id, "assertion '%s' is defined twice (line %u)", name, sp->as[i].line);
            goto bad;
        }
    if (grow((void **)&sp->as, sp->nas, sizeof(*sp->as))) {
        free(a.src);
        goto oom;
    }
    sp->as[sp->nas++] = a;
    return 0;
oom:
    perr(P, &t, "out of memory");
bad:
    free(name);
    return -1;
}

int tkp_spec_parse(char *text, const char *path, struct tkp_spec **out, struct tkp_spec_err *e)
{
    struct tkp_spec *sp = calloc(1, sizeof(*sp));
    *out = sp;
    memset(e, 0, sizeof(*e));
    if (!sp) {
        free(text);
        snprintf(e->msg, sizeof(e->msg), "out of memory");
        return TKP_ERR_NOMEM;
    }
    sp->text = text;
    sp->path = path;
    struct parser P = {.sp = sp, .e = e};
    tkp_lex_init(&P.lx, text);
    parse_next(&P);
    while (!P.failed && P.lx.tok.kind != TK_EOF)
        if (decl(&P)) break;
    if (P.failed) return TKP_ERR_SPEC;
    if (!sp->nas) {
        e->line = P.lx.tok.line, e->col = P.lx.tok.col;
        snprintf(e->msg, sizeof(e->msg), "the spec has no assertion");
        return TKP_ERR_SPEC;
    }
    return 0;
}
