/* tokprof check: reports. The table is for people (one line per assertion, then the kept
 * violations with their witnesses); the JSON lines are for tools (one object per kept
 * violation, then one summary object per assertion). Times print in the unit a person reads
 * (ms, us), and JSON keeps nanoseconds. */
#include "check/results.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "base/json.h"
#include "check/prog.h"
#include "check/eval.h"

static void fmt_val(char *b, size_t n, double v, int is_time)
{
    if (!is_time) {
        snprintf(b, n, "%.6g", v);
        return;
    }
    double a = fabs(v);
    if (a >= 1e9) snprintf(b, n, "%.3gs", v / 1e9);
    else if (a >= 1e6) snprintf(b, n, "%.4gms", v / 1e6);
    else if (a >= 1e3) snprintf(b, n, "%.4gus", v / 1e3);
    else snprintf(b, n, "%.0fns", v);
}

static int is_time(const struct tkp_spec *sp, int as)
{
    int c = tkp_bound_cmp(sp, sp->as[as].body);
    return c >= 0 && sp->n[sp->n[c].a].is_time;
}

static const char *lvl(int l) { return l == LV_RECORD ? "record" : l == LV_STEP ? "step" : "run"; }

/* ---- a subtree as spec text (for near misses and --explain) ---- */

struct sb {
    char *b;
    size_t n, len;
};

static void sbf(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(struct sb *s, const char *fmt, ...)
{
    if (s->len + 1 >= s->n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->b + s->len, s->n - s->len, fmt, ap);
    va_end(ap);
    if (k > 0) s->len = s->len + (size_t)k < s->n ? s->len + (size_t)k : s->n - 1;
}

static const char *const opsym[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
    [OP_EQ] = "==", [OP_NE] = "!=", [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">=",
    [OP_MATCH] = "=~", [OP_AND] = "and", [OP_OR] = "or", [OP_IMPLIES] = "->"};

static int prec(int op)
{
    switch (op) {
    case OP_IMPLIES: return 1;
    case OP_OR: return 2;
    case OP_AND: return 3;
    case OP_NOT: return 4;
    case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_MATCH:
        return 5;
    case OP_ADD: case OP_SUB: return 6;
    case OP_MUL: case OP_DIV: return 7;
    default: return 8;
    }
}

static void unparse(struct sb *o, const struct tkp_spec *sp, int n, int outer, int depth)
{
    static const char *const aggs[] = {"count", "sum", "min", "max", "mean", "exists", "first",
                                       "last", "p"};
    if (n < 0 || depth > 40) {
        sbf(o, "...");
        return;
    }
    const struct tkp_node *x = &sp->n[n];
    int p = prec(x->op), paren = p < outer;
    char b[32];
    if (paren) sbf(o, "(");
    switch (x->op) {
    case OP_NUM:
        if (x->is_time) fmt_val(b, sizeof(b), x->num, 1);
        else snprintf(b, sizeof(b), "%g", x->num);
        sbf(o, "%s", b);
        break;
    case OP_STR: sbf(o, "\"%s\"", x->str ? x->str : ""); break;
    case OP_BOOL: sbf(o, "%s", x->num != 0 ? "true" : "false"); break;
    case OP_ATTR: sbf(o, "%s", tkp_attr_name(x->attr)); break;
    case OP_CLASS: sbf(o, "%s", sp->cls[x->cls].name); break;
    case OP_BASE_KEY: sbf(o, "baseline(\"%s\")", x->str ? x->str : ""); break;
    case OP_BASE_EXPR: sbf(o, "baseline("), unparse(o, sp, x->a, 0, depth + 1), sbf(o, ")"); break;
    case OP_NEG: sbf(o, "-"), unparse(o, sp, x->a, 8, depth + 1); break;
    case OP_NOT: sbf(o, "not "), unparse(o, sp, x->a, 4, depth + 1); break;
    case OP_MATCH:
        unparse(o, sp, x->a, 6, depth + 1);
        sbf(o, " =~ /%s/", sp->n[x->b].str ? sp->n[x->b].str : "");
        break;
    case OP_PREV: case OP_ONCE: case OP_HIST: case OP_SINCE:
        if (x->op == OP_SINCE) unparse(o, sp, x->a, 8, depth + 1);
        sbf(o, x->op == OP_PREV ? "prev" : x->op == OP_ONCE ? "once"
               : x->op == OP_HIST ? "historically" : " since");
        if (x->has_iv) {
            const char *u = x->unit == U_STEPS ? " steps" : x->unit == U_RECORDS ? " records" : "ns";
            sbf(o, "[%g%s, ", x->num, u);
            if (isfinite(x->hi)) sbf(o, "%g%s]", x->hi, u);
            else sbf(o, "*]");
        }
        if (x->in_step) sbf(o, " in step");
        sbf(o, " ");
        unparse(o, sp, x->op == OP_SINCE ? x->b : x->a, 8, depth + 1);
        break;
    case OP_AGG:
        sbf(o, "%s", aggs[x->agg]);
        if (x->agg == AG_PCT) sbf(o, "%g", x->num);
        sbf(o, "(");
        if (x->a >= 0) unparse(o, sp, x->a, 0, depth + 1), sbf(o, " ");
        sbf(o, "in %s", x->src == SRC_STEP ? "s" : "steps");
        if (x->b >= 0) sbf(o, " where "), unparse(o, sp, x->b, 0, depth + 1);
        sbf(o, ")");
        break;
    default:
        if (x->op == OP_AND && (sp->n[x->a].op == OP_BOOL || sp->n[x->b].op == OP_BOOL) &&
            sp->n[sp->n[x->a].op == OP_BOOL ? x->a : x->b].num != 0) {
            /* `C and true` (what a quantifier's rewrite leaves) reads as C */
            unparse(o, sp, sp->n[x->a].op == OP_BOOL ? x->b : x->a, outer, depth + 1);
        } else if (x->op < (int)(sizeof(opsym) / sizeof(*opsym)) && opsym[x->op]) {
            unparse(o, sp, x->a, p, depth + 1);
            sbf(o, " %s ", opsym[x->op]);
            unparse(o, sp, x->b, p + 1, depth + 1);
        } else {
            sbf(o, "?");
        }
    }
    if (paren) sbf(o, ")");
}

static const char *node_text(const struct tkp_spec *sp, int n, char *b, size_t len)
{
    struct sb o = {b, len, 0};
    b[0] = 0;
    unparse(&o, sp, n, 0, 0);
    return b;
}

static const char *unit_word(int unit, int is_step, int64_t d)
{
    if (unit == U_NS) return "ns";
    if (unit == U_STEPS || (unit == U_NONE && is_step)) return d == 1 ? "step" : "steps";
    return d == 1 ? "record" : "records";
}

static void near_text(FILE *f, const struct tkp_spec *sp, const struct tkp_witem *w)
{
    char t[160], o[32], b[32], mg[32];
    int tm = w->fail >= 0 && sp->n[w->fail].a >= 0 && sp->n[sp->n[w->fail].a].is_time;
    if (w->fail >= 0) {
        fprintf(f, ": %s failed", node_text(sp, w->fail, t, sizeof(t)));
        if (w->has_margin) {
            fmt_val(o, sizeof(o), w->observed, tm);
            fmt_val(b, sizeof(b), w->bound, tm);
            fmt_val(mg, sizeof(mg), w->margin, tm);
            fprintf(f, " (%s vs %s, margin %s)", o, b, mg);
        }
        if (w->nconj > 1) fprintf(f, ", %d of %d held", w->sat, w->nconj);
        fprintf(f, ", %" PRId64 " %s before\n", w->distance,
                unit_word(w->unit, w->is_step, w->distance));
        return;
    }
    const struct tkp_node *x = &sp->n[w->node];
    fmt_val(mg, sizeof(mg), w->margin, w->unit == U_NS);
    fprintf(f, ": %s held %" PRId64 " %s before, outside the window (margin %s%s)\n",
            node_text(sp, x->a, t, sizeof(t)), w->distance,
            unit_word(w->unit, w->is_step, w->distance), mg,
            w->unit == U_NS ? "" : w->is_step ? " steps" : " records");
}

static void witem_text(FILE *f, const struct tkp_spec *sp, const struct tkp_witem *w)
{
    char b[32];
    if (!strcmp(w->role, "near_miss") && w->is_step) {
        fprintf(f, "      near_miss step %" PRIu64 " (token %" PRIu64 ", thread %u)", w->r.step,
                w->r.token, w->r.thread);
        near_text(f, sp, w);
        return;
    }
    if (!strcmp(w->role, "step_top")) {
        fprintf(f, "      step %" PRIu64 " (token %" PRIu64 ", thread %u): %s\n", w->r.step,
                w->r.token, w->r.thread, (fmt_val(b, sizeof(b), w->value, 1), b));
        return;
    }
    fprintf(f, "      %-8s #%" PRIu64 " %s %.60s", w->role, w->r.id, tkp_rkind_str(w->r.kind),
            w->r.name ? w->r.name : "");
    if (w->r.gpu_end) {
        fmt_val(b, sizeof(b), (double)(w->r.gpu_end - w->r.gpu_start), 1);
        fprintf(f, " gpu %s", b);
    }
    if (w->r.has_lib && w->r.n) fprintf(f, " m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64, w->r.m, w->r.n, w->r.k);
    if (!strcmp(w->role, "gap")) {
        fmt_val(b, sizeof(b), (double)w->gap_ns, 1);
        fprintf(f, " after a %s gap", b);
        if (w->before_id_valid) fprintf(f, " following #%" PRIu64 " %.40s", w->before.id, w->before.name ? w->before.name : "");
    }
    if (!strcmp(w->role, "near_miss")) {
        near_text(f, sp, w);
        return;
    }
    fputc('\n', f);
}

static void viol_text(FILE *f, const struct tkp_spec *sp, const struct tkp_viol *v)
{
    const struct tkp_assert *a = &sp->as[v->as];
    char o[32], b[32], mg[32];
    fprintf(f, "    %s:%u %s at thread %u step %" PRIu64, sp->path, a->line, a->id, v->thread,
            v->step);
    if (v->setup) fprintf(f, " (set-up, no token)");
    else fprintf(f, " token %" PRIu64, v->token);
    if (a->level == LV_RUN) fprintf(f, " (run)");
    if (v->rec_id) fprintf(f, " record #%" PRIu64, v->rec_id);
    if (v->has_val) {
        int t = is_time(sp, v->as);
        fmt_val(o, sizeof(o), v->observed, t);
        fmt_val(b, sizeof(b), v->bound, t);
        fmt_val(mg, sizeof(mg), v->margin, t);
        fprintf(f, ": %s vs bound %s (margin %s)", o, b, mg);
    }
    fputc('\n', f);
    if (v->note[0]) fprintf(f, "      note: %s\n", v->note);
    for (int i = 0; i < v->nw && i < 12; i++) witem_text(f, sp, &v->w[i]);
    if (v->nw > 12) fprintf(f, "      ... %d more in --json\n", v->nw - 12);
}

void tkp_report_table(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m)
{
    fprintf(f, "   %-20s %-6s %10s %10s %12s  %s\n", "assertion", "level", "evaluated",
            "violations", "inconclusive", "worst vs bound");
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        const struct tkp_ares *R = tkp_mon_result(m, i);
        int v = tkp_mon_verdict(m, i, NULL);
        const char *mark = !v ? (a->warn ? "!" : "\xe2\x9c\x97") : v < 0 ? "?" : "\xe2\x9c\x93";
        char w[80] = "-";
        if (R->has_worst) {
            char o[32], b[32];
            int t = is_time(sp, i);
            fmt_val(o, sizeof(o), R->worst_obs, t);
            fmt_val(b, sizeof(b), R->worst_bound, t);
            snprintf(w, sizeof(w), "%s vs %s", o, b);
        }
        fprintf(f, "%s  %-20s %-6s %10" PRIu64 " %10" PRIu64 " %12" PRIu64 "  %s%s\n", mark, a->id,
                lvl(a->level), R->evaluated, R->violations, R->inconclusive, w,
                a->warn && R->violations ? " (warn)" : "");
    }
    int nwhy[TKP_WHY_COUNT_] = {0}, ninc = 0;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_ares *R = tkp_mon_result(m, i);
        int why, v = tkp_mon_verdict(m, i, &why);
        if (v < 0) ninc++, nwhy[why]++;
        if (v > 0) continue;
        fprintf(f, "\n%s (%s:%u): %s\n", sp->as[i].id, sp->path, sp->as[i].line, sp->as[i].src);
        if (R->inconclusive)
            fprintf(f, "    %" PRIu64 " evaluations inconclusive; the first: %s\n",
                    R->inconclusive, R->unknown_note);
        else if (v < 0)
            fprintf(f, "    inconclusive: %s\n", tkp_why_str(why));
        for (int k = 0; k < R->nfirst; k++) viol_text(f, sp, &R->first[k]);
        if (R->nworst) fprintf(f, "    worst:\n");
        for (int k = 0; k < R->nworst; k++) viol_text(f, sp, &R->worst[k]);
    }
    const struct tkp_mon_stats *st = tkp_mon_stats(m);
    fprintf(f, "\n%" PRIu64 " records, %" PRIu64 " steps, %" PRIu64 " GPU records", st->records,
            st->steps, st->gpu_records);
    if (st->unclosed) fprintf(f, ", %" PRIu64 " steps without a STEP record (not judged)", st->unclosed);
    if (st->late) fprintf(f, ", %" PRIu64 " late records (their step was already decided)", st->late);
    if (ninc) {
        /* what a CI gate reading the exit status needs to know: how many and why */
        fprintf(f, ", %d assertion%s inconclusive (", ninc, ninc > 1 ? "s" : "");
        const char *sep = "";
        for (int w = 0; w < TKP_WHY_COUNT_; w++)
            if (nwhy[w]) fprintf(f, "%s%d %s", sep, nwhy[w], tkp_why_str(w)), sep = "; ";
        fprintf(f, ")");
    }
    fprintf(f, "; state %" PRIu64 " B per thread", st->state_bytes);
    if (st->shapes) fprintf(f, ", %" PRIu64 " record shapes", st->shapes);
    if (st->buffered_peak) fprintf(f, ", at most %" PRIu64 " records buffered in a step", st->buffered_peak);
    fputc('\n', f);
}

static void near_json(FILE *f, const struct tkp_spec *sp, const struct tkp_witem *w)
{
    char t[300];
    fprintf(f, ",\"held\":%d,\"of\":%d,\"distance\":%" PRId64 ",\"unit\":\"%s\"", w->sat,
            w->nconj, w->distance, unit_word(w->unit, w->is_step, 2));
    fprintf(f, ",\"condition\":");
    tkp_json_str(f, node_text(sp, sp->n[w->node].a, t, sizeof(t)));
    if (w->fail >= 0) {
        fprintf(f, ",\"failed\":");
        tkp_json_str(f, node_text(sp, w->fail, t, sizeof(t)));
    }
    if (w->has_margin)
        fprintf(f, ",\"observed\":%.17g,\"bound\":%.17g,\"margin\":%.17g", w->observed, w->bound,
                w->margin);
}

static void witem_json(FILE *f, const struct tkp_spec *sp, const struct tkp_witem *w)
{
    fprintf(f, "{\"role\":");
    tkp_json_str(f, w->role);
    if (!strcmp(w->role, "near_miss") && w->is_step) {
        fprintf(f, ",\"step\":%" PRIu64 ",\"token\":%" PRIu64 ",\"thread\":%u", w->r.step,
                w->r.token, w->r.thread);
        near_json(f, sp, w);
        fputc('}', f);
        return;
    }
    if (!strcmp(w->role, "step_top")) {
        fprintf(f, ",\"step\":%" PRIu64 ",\"token\":%" PRIu64 ",\"thread\":%u,\"value\":%.17g}",
                w->r.step, w->r.token, w->r.thread, w->value);
        return;
    }
    fprintf(f, ",\"record\":%" PRIu64 ",\"kind\":\"%s\",\"name\":", w->r.id, tkp_rkind_str(w->r.kind));
    tkp_json_str(f, w->r.name);
    fprintf(f, ",\"step\":%" PRIu64, w->r.step);
    if (w->r.host_ns) fprintf(f, ",\"host_ns\":%" PRIu64, w->r.host_ns);
    if (w->r.gpu_end)
        fprintf(f, ",\"gpu_start_ns\":%" PRIu64 ",\"gpu_end_ns\":%" PRIu64 ",\"dur_ns\":%" PRIu64,
                w->r.gpu_start, w->r.gpu_end, w->r.gpu_end - w->r.gpu_start);
    if (w->r.has_lib) {
        fprintf(f, ",\"op\":");
        tkp_json_str(f, w->r.op);
        fprintf(f, ",\"m\":%" PRIu64 ",\"n\":%" PRIu64 ",\"k\":%" PRIu64, w->r.m, w->r.n, w->r.k);
    }
    if (!strcmp(w->role, "gap")) {
        fprintf(f, ",\"gap_ns\":%" PRIu64 ",\"gap_start_ns\":%" PRIu64, w->gap_ns, w->gap_start);
        if (w->before_id_valid) {
            fprintf(f, ",\"before\":{\"record\":%" PRIu64 ",\"name\":", w->before.id);
            tkp_json_str(f, w->before.name);
            fputc('}', f);
        }
    }
    if (!strcmp(w->role, "near_miss")) near_json(f, sp, w);
    fputc('}', f);
}

static void viol_json(FILE *f, const struct tkp_spec *sp, const struct tkp_viol *v, const char *which)
{
    const struct tkp_assert *a = &sp->as[v->as];
    fprintf(f, "{\"type\":\"violation\",\"assert\":");
    tkp_json_str(f, a->id);
    fprintf(f, ",\"line\":%u,\"severity\":\"%s\",\"level\":\"%s\",\"kept_as\":\"%s\"", a->line,
            a->warn ? "warn" : "error", lvl(a->level), which);
    if (a->level != LV_RUN) {
        fprintf(f, ",\"thread\":%u,\"tid\":%u,\"step\":%" PRIu64, v->thread, v->tid, v->step);
        /* a set-up segment's record has no token (0 is the first token step's) */
        if (v->setup) fprintf(f, ",\"token\":null,\"setup\":true");
        else fprintf(f, ",\"token\":%" PRIu64, v->token);
        if (v->rec_id) fprintf(f, ",\"record\":%" PRIu64, v->rec_id);
        fprintf(f, ",\"host_start_ns\":%" PRIu64 ",\"host_end_ns\":%" PRIu64, v->host_start, v->host_end);
        if (v->has_gpu)
            fprintf(f, ",\"gpu_start_ns\":%" PRIu64 ",\"gpu_end_ns\":%" PRIu64, v->gpu_start, v->gpu_end);
    }
    if (v->has_val)
        fprintf(f, ",\"observed\":%.17g,\"bound\":%.17g,\"margin\":%.17g", v->observed, v->bound,
                v->margin);
    if (v->matched) fprintf(f, ",\"matched\":%" PRIu64, v->matched);
    if (v->note[0]) {
        fprintf(f, ",\"note\":");
        tkp_json_str(f, v->note);
    }
    fprintf(f, ",\"witness\":[");
    for (int i = 0; i < v->nw; i++) {
        if (i) fputc(',', f);
        witem_json(f, sp, &v->w[i]);
    }
    fprintf(f, "]}\n");
}

void tkp_report_json(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m)
{
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_ares *R = tkp_mon_result(m, i);
        for (int k = 0; k < R->nfirst; k++) viol_json(f, sp, &R->first[k], "first");
        for (int k = 0; k < R->nworst; k++) viol_json(f, sp, &R->worst[k], "worst");
    }
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        const struct tkp_ares *R = tkp_mon_result(m, i);
        int why, v = tkp_mon_verdict(m, i, &why);
        fprintf(f, "{\"type\":\"assertion\",\"assert\":");
        tkp_json_str(f, a->id);
        fprintf(f, ",\"line\":%u,\"level\":\"%s\",\"severity\":\"%s\",\"verdict\":\"%s\","
                   "\"evaluated\":%" PRIu64 ",\"violations\":%" PRIu64 ",\"inconclusive\":%" PRIu64,
                a->line, lvl(a->level), a->warn ? "warn" : "error",
                !v ? "violated" : v < 0 ? "inconclusive" : "pass", R->evaluated, R->violations,
                R->inconclusive);
        if (v < 0) {
            fprintf(f, ",\"why\":");
            tkp_json_str(f, R->inconclusive ? R->unknown_note : tkp_why_str(why));
        }
        if (R->has_worst)
            fprintf(f, ",\"worst_observed\":%.17g,\"worst_bound\":%.17g,\"worst_margin\":%.17g",
                    R->worst_obs, R->worst_bound, R->worst_margin);
        fprintf(f, ",\"formula\":");
        tkp_json_str(f, a->src);
        fprintf(f, "}\n");
    }
}

/* ---- --explain: the compiled monitors ---- */

static const char *temporal_state(const struct tkp_node *x)
{
    if (x->op == OP_PREV) return "the previous value";
    if (x->has_iv && x->num > 0 && isfinite(x->hi)) return "a ring of b+1 values";
    if (x->has_iv && !isfinite(x->hi)) return "the earliest hit (8 B)";
    return x->has_iv ? "the latest hit (8 B)" : "one bit";
}

void tkp_prog_print(FILE *f, const struct tkp_spec *sp, int prog, int indent)
{
    static const char *const sym[] = {[VO_NEG] = "negate", [VO_ADD] = "+", [VO_SUB] = "-",
        [VO_MUL] = "*", [VO_DIV] = "/", [VO_EQ] = "==", [VO_NE] = "!=", [VO_LT] = "<",
        [VO_LE] = "<=", [VO_GT] = ">", [VO_GE] = ">=", [VO_NOT] = "not", [VO_AND] = "and",
        [VO_OR] = "or", [VO_TOBOOL] = "class value (unknown: false)"};
    const struct tkp_code *c = sp->code;
    const struct tkp_prog *p = &c->prog[prog];
    char t[160];
    for (int k = 0; k < p->n; k++) {
        const struct tkp_ins *i = &p->ins[k];
        const struct tkp_node *x = &sp->n[i->node];
        if (i->op == VO_END) break;
        fprintf(f, "%*s%3d  ", indent, "", k);
        switch (i->op) {
        case VO_CONST: fprintf(f, "push %s\n", node_text(sp, i->node, t, sizeof(t))); break;
        case VO_RATTR: case VO_SATTR:
            fprintf(f, "read %s%s\n", tkp_attr_name(i->x), tkp_attr_gpu(i->x) ? "  [GPU]" : "");
            break;
        case VO_ATOM:
            fprintf(f, "atom %d: %s\n", i->x, node_text(sp, c->atom_node[i->x], t, sizeof(t)));
            break;
        case VO_CLASS: fprintf(f, "class %s (per record)\n", sp->cls[i->x].name); break;
        case VO_FIG: fprintf(f, "push %s\n", node_text(sp, i->node, t, sizeof(t))); break;
        case VO_BASE: fprintf(f, "%s on the baseline\n", node_text(sp, x->a, t, sizeof(t))); break;
        case VO_AGG_STEP: case VO_AGG_RUN:
            fprintf(f, "%s aggregate slot %d: %s\n", i->op == VO_AGG_STEP ? "step" : "run", i->x,
                    node_text(sp, i->node, t, sizeof(t)));
            break;
        case VO_MATCH: fprintf(f, "=~ /%s/\n", sp->n[x->b].str); break;
        case VO_AND_L: case VO_OR_L: case VO_IMPL_L:
            fprintf(f, "%s, left side", i->op == VO_AND_L ? "and" : i->op == VO_OR_L ? "or" : "->");
            if (i->jmp >= 0)
                fprintf(f, " (%s: skip to %d)\n", i->op == VO_AND_L ? "false" : i->op == VO_OR_L
                        ? "true" : "false", i->jmp);
            else fprintf(f, " (the right side holds a temporal operator: always evaluated)\n");
            break;
        case VO_PREV: case VO_ONCE: case VO_HIST: case VO_SINCE: {
            const char *w = i->op == VO_PREV ? "prev" : i->op == VO_ONCE ? "once"
                            : i->op == VO_HIST ? "historically" : "since";
            fprintf(f, "%s", w);
            if (x->has_iv) {
                const char *u = x->unit == U_STEPS ? " steps" : x->unit == U_RECORDS ? " records" : "ns";
                fprintf(f, "[%g%s, ", x->num, u);
                if (isfinite(x->hi)) fprintf(f, "%g%s]", x->hi, u);
                else fprintf(f, "*]");
            }
            fprintf(f, "%s: state slot %d, %s", x->in_step ? " in step" : "", x->slot,
                    temporal_state(x));
            const struct tkp_nearplan *np = i->op == VO_ONCE ? &c->near[x->slot] : NULL;
            if (np && np->on)
                fprintf(f, "; near misses: %s%s", np->nconj ? "the best 3 points by conjuncts held" : "",
                        np->timing ? (np->nconj ? " and the hit outside the window" : "the hit outside the window") : "");
            fputc('\n', f);
            break;
        }
        default: fprintf(f, "%s\n", i->op < sizeof(sym) / sizeof(*sym) && sym[i->op] ? sym[i->op] : "?");
        }
    }
}

static void explain_conj(FILE *f, const struct tkp_spec *sp, const char *what,
                         const struct tkp_conj *c)
{
    fprintf(f, "      %s:", what);
    if (!c->nconj) {
        fprintf(f, " every record\n");
        return;
    }
    const char *sep = " atom";
    for (int k = 0; k < TKP_ATOMS_MAX; k++)
        if (c->atoms >> k & 1) fprintf(f, "%s %d", sep, k), sep = ",";
    fprintf(f, "%s%s\n", c->atoms && c->prog >= 0 ? " and" : "", c->prog >= 0 ? " the program" : "");
    if (c->prog >= 0) tkp_prog_print(f, sp, c->prog, 8);
}

/* The aggregates of an assertion's tree: how each is folded. */
static void explain_aggs(FILE *f, const struct tkp_spec *sp, int n, int depth)
{
    if (n < 0 || depth > 200) return;
    const struct tkp_node *x = &sp->n[n];
    char t[200];
    if (x->op == OP_AGG && x->slot >= 0) {
        fprintf(f, "    %s aggregate slot %d, %s:\n", x->src == SRC_STEP ? "step" : "run", x->slot,
                node_text(sp, n, t, sizeof(t)));
        if (x->src == SRC_RUN) {
            fprintf(f, "      %s\n", x->agg == AG_PCT ? "exact: every value (8 B per judged step), sorted at the end"
                                                      : "a running fold (32 B)");
        } else {
            const struct tkp_slotplan *p = &sp->code->plan[x->slot];
            fprintf(f, "      %s\n", p->gpu ? "folded over the step's GPU records when they are in"
                    : p->stream ? "streamed: folded as each record arrives, nothing buffered"
                                : "buffered: records the prefilter takes wait for the step's close");
            if (!p->gpu && !p->stream) explain_conj(f, sp, "prefilter (buffered)", &p->pre);
            explain_conj(f, sp, "takes", &p->sel);
            if (p->value >= 0) {
                fprintf(f, "      value:\n");
                tkp_prog_print(f, sp, p->value, 8);
            }
            if (p->keep) fprintf(f, "      keeps its first %d records as the witness\n", TKP_WIT_MAX);
        }
    }
    explain_aggs(f, sp, x->a, depth + 1);
    if (x->op != OP_MATCH) explain_aggs(f, sp, x->b, depth + 1);
}

void tkp_report_explain(FILE *f, const struct tkp_spec *sp)
{
    const struct tkp_code *c = sp->code;
    size_t total = 0, run = 0;
    int buffers = 0;
    char t[200];
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        fprintf(f, "%s (line %u) [%s%s", a->id, a->line, lvl(a->level), a->warn ? ", warn" : "");
        if (a->skip) fprintf(f, ", skip %" PRIu64 " steps", a->skip);
        fprintf(f, ", witness %d]: %s\n", a->witness, a->src);
        fprintf(f, "  evaluated: %s\n",
                a->level == LV_RECORD ? (a->gpu ? "at every GPU record" : "at every host record")
                : a->level == LV_STEP ? (a->gpu ? "when the step's GPU records are in (<= 1 step late)"
                                                : "when the step closes (its STEP record); it sees no record")
                                      : "at the end of the run");
        if (a->level == LV_RECORD && a->fast >= 0)
            fprintf(f, "  shapes: %s\n",
                    c->prog[a->body_prog].boolean
                        ? "a record's shape decides its verdict where it can; the program runs on "
                          "the rest"
                        : a->prevs ? "a record's shape decides its guard: the records it selects "
                                     "run the formula, the others only update its `prev`s"
                        : "a record's shape decides its guard: only the records it selects are "
                          "decoded and run");
        fprintf(f, "  state: %zu bytes per thread%s%s; %zu bytes per check (run aggregates, kept "
                   "violations)\n", a->state_bytes,
                a->gpu && a->level != LV_RECORD ? ", plus one step summary per step awaiting GPU records" : "",
                a->buffers ? ", plus the buffered records of an open step" : "", a->state_run);
        if (a->when >= 0) {
            fprintf(f, "  guard:\n");
            tkp_prog_print(f, sp, c->node_prog[a->when], 4);
        }
        fprintf(f, "  program:\n");
        tkp_prog_print(f, sp, c->node_prog[a->body], 4);
        explain_aggs(f, sp, a->body, 0);
        explain_aggs(f, sp, a->when, 0);
        total += a->state_bytes;
        run += a->state_run;
        buffers |= a->buffers;
    }
    if (c->natoms) {
        fprintf(f, "atoms (record tests computed once per record shape: kind, name, op, lib, dir, "
                   "sync, async):\n");
        for (int k = 0; k < c->natoms; k++) {
            int n = c->atom_node[k];
            if (sp->n[n].op == OP_CLASS)
                fprintf(f, "  atom %d: class %s = %s\n", k, sp->cls[sp->n[n].cls].name,
                        node_text(sp, sp->cls[sp->n[n].cls].expr, t, sizeof(t)));
            else fprintf(f, "  atom %d: %s\n", k, node_text(sp, n, t, sizeof(t)));
        }
    }
    fprintf(f, "total: %zu bytes of assertion state per thread, %zu bytes per check; %s\n", total,
            run, buffers ? "open steps buffer the records a buffered aggregate may take"
                         : "no record is buffered");
}
