/* tokprof check: reports. The table is for people (one line per assertion, then the kept
 * violations with their witnesses); the JSON lines are for tools (one object per kept
 * violation, then one summary object per assertion). Times print in the unit a person reads
 * (ms, us), and JSON keeps nanoseconds. */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json.h"

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

static int bound_node(const struct tkp_spec *sp, int n)
{
    while (n >= 0 && sp->n[n].op == OP_IMPLIES) n = sp->n[n].b;
    return n >= 0 && sp->n[n].op >= OP_EQ && sp->n[n].op <= OP_GE ? n : -1;
}

static int is_time(const struct tkp_spec *sp, int as)
{
    int c = bound_node(sp, sp->as[as].body);
    return c >= 0 && sp->n[sp->n[c].a].is_time;
}

static const char *lvl(int l) { return l == LV_RECORD ? "record" : l == LV_STEP ? "step" : "run"; }

static void witem_text(FILE *f, const struct tkp_witem *w)
{
    char b[32];
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
    fputc('\n', f);
}

static void viol_text(FILE *f, const struct tkp_spec *sp, const struct tkp_viol *v)
{
    const struct tkp_assert *a = &sp->as[v->as];
    char o[32], b[32], mg[32];
    fprintf(f, "    %s:%u %s at thread %u step %" PRIu64 " token %" PRIu64, sp->path, a->line, a->id,
            v->thread, v->step, v->token);
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
    for (int i = 0; i < v->nw && i < 12; i++) witem_text(f, &v->w[i]);
    if (v->nw > 12) fprintf(f, "      ... %d more in --json\n", v->nw - 12);
}

void tkp_report_table(FILE *f, const struct tkp_spec *sp, const struct tkp_mon *m)
{
    fprintf(f, "   %-20s %-6s %10s %10s %12s  %s\n", "assertion", "level", "evaluated",
            "violations", "inconclusive", "worst vs bound");
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        const struct tkp_ares *R = tkp_mon_result(m, i);
        const char *mark = R->violations ? (a->warn ? "!" : "\xe2\x9c\x97")
                           : R->inconclusive || !R->evaluated ? "?" : "\xe2\x9c\x93";
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
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_ares *R = tkp_mon_result(m, i);
        if (!R->violations && !R->inconclusive) continue;
        fprintf(f, "\n%s (%s:%u): %s\n", sp->as[i].id, sp->path, sp->as[i].line, sp->as[i].src);
        if (R->inconclusive)
            fprintf(f, "    %" PRIu64 " evaluations inconclusive: a value they read is unknown "
                       "(GPU time absent from the capture, or a library field on a record "
                       "outside a library call)\n", R->inconclusive);
        for (int k = 0; k < R->nfirst; k++) viol_text(f, sp, &R->first[k]);
        if (R->nworst) fprintf(f, "    worst:\n");
        for (int k = 0; k < R->nworst; k++) viol_text(f, sp, &R->worst[k]);
    }
    const struct tkp_mon_stats *st = tkp_mon_stats(m);
    fprintf(f, "\n%" PRIu64 " records, %" PRIu64 " steps, %" PRIu64 " GPU records", st->records,
            st->steps, st->gpu_records);
    if (st->unclosed) fprintf(f, ", %" PRIu64 " steps without a STEP record (not judged)", st->unclosed);
    if (st->late) fprintf(f, ", %" PRIu64 " late records (their step was already decided)", st->late);
    fputc('\n', f);
}

static void witem_json(FILE *f, const struct tkp_witem *w)
{
    fprintf(f, "{\"role\":");
    tkp_json_str(f, w->role);
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
        fprintf(f, ",\"thread\":%u,\"tid\":%u,\"step\":%" PRIu64 ",\"token\":%" PRIu64, v->thread,
                v->tid, v->step, v->token);
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
        witem_json(f, &v->w[i]);
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
        fprintf(f, "{\"type\":\"assertion\",\"assert\":");
        tkp_json_str(f, a->id);
        fprintf(f, ",\"line\":%u,\"level\":\"%s\",\"severity\":\"%s\",\"verdict\":\"%s\","
                   "\"evaluated\":%" PRIu64 ",\"violations\":%" PRIu64 ",\"inconclusive\":%" PRIu64,
                a->line, lvl(a->level), a->warn ? "warn" : "error",
                R->violations ? "violated" : R->inconclusive || !R->evaluated ? "inconclusive" : "pass",
                R->evaluated, R->violations, R->inconclusive);
        if (R->has_worst)
            fprintf(f, ",\"worst_observed\":%.17g,\"worst_bound\":%.17g,\"worst_margin\":%.17g",
                    R->worst_obs, R->worst_bound, R->worst_margin);
        fprintf(f, ",\"formula\":");
        tkp_json_str(f, a->src);
        fprintf(f, "}\n");
    }
}

static void explain_node(FILE *f, const struct tkp_spec *sp, int n, int depth)
{
    if (n < 0) return;
    const struct tkp_node *x = &sp->n[n];
    static const char *const ops[] = {"num", "str", "bool", "attr", "class", "baseline_key",
        "+", "-", "*", "/", "neg", "==", "!=", "<", "<=", ">", ">=", "=~", "and", "or", "not",
        "->", "prev", "once", "historically", "since", "agg", "baseline", "forall", "exists", "var"};
    static const char *const aggs[] = {"count", "sum", "min", "max", "mean", "exists", "first",
                                       "last", "p"};
    fprintf(f, "%*s", 6 + 2 * depth, "");
    switch (x->op) {
    case OP_NUM: fprintf(f, "%g\n", x->num); return;
    case OP_STR: fprintf(f, "\"%s\"\n", x->str); return;
    case OP_ATTR: fprintf(f, "%s%s\n", tkp_attr_name(x->attr), x->gpu ? "  [GPU]" : ""); return;
    case OP_CLASS: fprintf(f, "class %s\n", sp->cls[x->cls].name); return;
    case OP_AGG:
        fprintf(f, "%s%s%s per %s: %s, slot %d\n", aggs[x->agg], x->agg == AG_PCT ? "" : "",
                x->agg == AG_PCT ? "NN" : "", x->src == SRC_STEP ? "step" : "run",
                x->src == SRC_STEP ? "fold over the step's records at close, 24 B"
                : x->agg == AG_PCT ? "exact: 8 B per step, sorted at the end"
                                   : "running fold, 40 B",
                x->slot);
        break;
    case OP_PREV: case OP_ONCE: case OP_HIST: case OP_SINCE:
        fprintf(f, "%s", ops[x->op]);
        if (x->has_iv) {
            const char *u = x->unit == U_STEPS ? " steps" : x->unit == U_RECORDS ? " records" : "ns";
            fprintf(f, "[%g%s, ", x->num, u);
            if (isfinite(x->hi)) fprintf(f, "%g%s]", x->hi, u);
            else fprintf(f, "*]");
        }
        if (x->in_step) fprintf(f, " in step");
        fprintf(f, ": state slot %d, %s\n", x->slot,
                x->has_iv && x->num > 0 && isfinite(x->hi) ? "ring of b+1 values"
                : x->has_iv && !isfinite(x->hi) ? "earliest hit (8 B)"
                : x->has_iv ? "latest hit (8 B)" : "one bit / previous value");
        break;
    case OP_MATCH:
        fprintf(f, "=~ /%s/%s\n", sp->n[x->b].str, x->slot >= 0 ? "  (memoised per name id)" : "");
        explain_node(f, sp, x->a, depth + 1);
        return;
    default: fprintf(f, "%s\n", ops[x->op]);
    }
    explain_node(f, sp, x->a, depth + 1);
    explain_node(f, sp, x->b, depth + 1);
}

void tkp_report_explain(FILE *f, const struct tkp_spec *sp)
{
    size_t total = 0;
    for (int i = 0; i < sp->nas; i++) {
        const struct tkp_assert *a = &sp->as[i];
        fprintf(f, "%s (line %u) [%s%s", a->id, a->line, lvl(a->level), a->warn ? ", warn" : "");
        if (a->skip) fprintf(f, ", skip %" PRIu64 " steps", a->skip);
        fprintf(f, ", witness %d]: %s\n", a->witness, a->src);
        fprintf(f, "  evaluated: %s\n",
                a->level == LV_RECORD ? (a->gpu ? "at every GPU record" : "at every host record")
                : a->level == LV_STEP ? (a->gpu ? "when the step's GPU records are in (<= 1 step late)"
                                                : "when the step closes (its STEP record)")
                                      : "at the end of the run");
        fprintf(f, "  state: %zu bytes per thread%s\n", a->state_bytes,
                a->gpu && a->level != LV_RECORD ? ", plus one step summary per step awaiting GPU records" : "");
        if (a->when >= 0) {
            fprintf(f, "  guard:\n");
            explain_node(f, sp, a->when, 0);
        }
        fprintf(f, "  monitor:\n");
        explain_node(f, sp, a->body, 0);
        total += a->state_bytes;
    }
    fprintf(f, "total: %zu bytes of assertion state per thread, plus one open step's records\n", total);
}
