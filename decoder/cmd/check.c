/* tokprof check SPEC CAPTURE: assertions over steps, kernels and runs (docs/SPEC.md), checked
 * in one streaming pass. Exit 0 when every error-severity assertion holds, 1 when one is
 * violated, 2 for a spec or capture error, 3 when none is violated and one is inconclusive. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/check_follow.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/reader.h"
#include "check/ast.h"
#include "check/bulk.h"
#include "check/monitor.h"
#include "check/results.h"
#include "check/parse.h"
#include "check/compile.h"
#include "check/prog.h"

static int read_file(struct tkp_ctx *ctx, const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 0, n = 0;
    char *b = NULL;
    for (size_t got = 1; got && cap <= (64u << 20); n += got) {
        if (TKP_GROW_FROM(b, cap, n + 2, 4096)) {
            free(b), b = NULL;
            break;
        }
        got = fread(b + n, 1, cap - n - 1, f);
    }
    fclose(f);
    if (!b) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    b[n] = 0;
    *out = b;
    if (len) *len = n;
    return 0;
}

static int spec_fail(struct tkp_ctx *ctx, const struct tkp_spec *sp, const char *path,
                     const struct tkp_spec_err *e)
{
    const char *t = sp ? sp->text : NULL, *ls = t;
    for (uint32_t l = 1; t && ls && l < e->line; l++) {
        ls = strchr(ls, '\n');
        if (ls) ls++;
    }
    uint32_t line = e->line, col = e->col;
    if (t && (!ls || !*ls) && line > 1) {
        /* an error at the end of the file points just past the last line that has text */
        const char *end = t + strlen(t);
        while (end > t && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
        ls = end;
        while (ls > t && ls[-1] != '\n') ls--;
        line = 1;
        for (const char *c = t; c < ls; c++) line += *c == '\n';
        col = (uint32_t)(end - ls) + 1;
    }
    if (!ls || !e->line)
        return tkp_cmd_fail(ctx, TKP_ERR_SPEC, "%s:%u:%u: %s", path, e->line, e->col, e->msg);
    int w = (int)strcspn(ls, "\n");
    return tkp_cmd_fail(ctx, TKP_ERR_SPEC, "%s:%u:%u: %s\n    %.*s\n    %*s^", path, line, col,
                        e->msg, w > 200 ? 200 : w, ls, (int)(col > 200 ? 200 : col) - 1, "");
}

/* Loads and compiles a spec; on error ctx->why has "SPEC:line:col: message" and a caret. */
static int load_spec(struct tkp_ctx *ctx, const char *path, struct tkp_spec **sp)
{
    char *text;
    /* tests: the general interpreter only, to compare the fast paths with (prog.h) */
    const char *g = getenv("TOKPROF_CHECK_GENERAL");
    tkp_check_general = g && *g && strcmp(g, "0");
    int rc = read_file(ctx, path, &text, NULL);
    if (rc) return rc;
    struct tkp_spec_err e;
    rc = tkp_spec_parse(text, path, sp, &e);
    if (!rc) rc = tkp_spec_compile(*sp, &e);
    if (rc == TKP_ERR_NOMEM) return tkp_cmd_fail(ctx, rc, "out of memory");
    if (rc) return spec_fail(ctx, *sp, path, &e);
    return 0;
}

static int run_capture(struct tkp_ctx *ctx, const char *path, struct tkp_mon *m)
{
    struct tkp_reader *r;
    int rc = tkp_cmd_open(ctx, path, &r);
    if (rc) return rc;
    rc = tkp_mon_read(m, r);
    if (rc == TKP_ERR_NOMEM) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, rc, "out of memory");
    }
    tkp_cmd_warn_reader(ctx, path, r);
    /* a torn tail is how a killed program's capture ends: check what is there */
    rc = tkp_mon_finish(m);
    /* names live until the reader closes: the caller reports before closing it */
    ctx->why[0] = 0;
    tkp_reader_close(r);
    return rc;
}

/* --baseline FILE.json: {"name": number | "12.5ms", ...} — a flat object of figures */
static int parse_figures(struct tkp_ctx *ctx, const char *path, struct tkp_spec *sp, double *fig)
{
    char *t;
    int rc = read_file(ctx, path, &t, NULL);
    if (rc) return rc;
    for (int i = 0; i < sp->nn; i++) {
        if (sp->n[i].op != OP_BASE_KEY) continue;
        char key[300];
        snprintf(key, sizeof(key), "\"%s\"", sp->n[i].str);
        char *p = strstr(t, key);
        if (!p) {
            free(t);
            return tkp_cmd_fail(ctx, TKP_ERR_SPEC, "%s:%u:%u: baseline(\"%s\"): %s has no such "
                                "figure", sp->path, sp->n[i].line, sp->n[i].col, sp->n[i].str, path);
        }
        p += strlen(key);
        while (isspace((unsigned char)*p) || *p == ':') p++;
        if (*p == '"') p++;
        char *end;
        double v = strtod(p, &end);
        if (end == p) {
            free(t);
            return tkp_cmd_fail(ctx, TKP_ERR_SPEC, "%s: figure \"%s\" is not a number", path, sp->n[i].str);
        }
        double mul = !strncmp(end, "ms", 2) ? 1e6 : !strncmp(end, "us", 2) ? 1e3
                   : !strncmp(end, "ns", 2) ? 1 : *end == 's' ? 1e9 : 1;
        fig[i] = v * mul;
    }
    free(t);
    return 0;
}

static int is_capture(const char *path)
{
    FILE *f = fopen(path, "rb");
    char b[8] = {0};
    if (!f) return 0;
    size_t n = fread(b, 1, 8, f);
    fclose(f);
    return n == 8 && !memcmp(b, "\x89TKP", 4);
}

/* The exit status of a check: a violation wins; else an inconclusive error-severity assertion
 * (a value it read unknown, or never judged) is its own status, unless --inconclusive says to
 * count it as a pass (inc 1) or a failure (inc 2). */
static int verdict(struct tkp_ctx *ctx, const struct tkp_spec *sp, const struct tkp_mon *m, int inc)
{
    int nviol = 0, ninc = 0, first = -1, why = 0;
    for (int i = 0; i < sp->nas; i++) {
        int w, v = sp->as[i].warn ? 1 : tkp_mon_verdict(m, i, &w);
        nviol += v == 0;
        if (v < 0 && !ninc++) first = i, why = w;
    }
    if (nviol) return tkp_why(ctx->why, sizeof(ctx->why), TKP_ERR_VIOLATION, "assertions violated");
    if (!ninc || inc == 1) return 0;
    const struct tkp_ares *R = tkp_mon_result(m, first);
    return tkp_why(ctx->why, sizeof(ctx->why), inc == 2 ? TKP_ERR_VIOLATION : TKP_ERR_INCONCLUSIVE,
                   "%d assertion%s inconclusive%s (%s: %s)", ninc, ninc > 1 ? "s" : "",
                   inc == 2 ? ", counted as violated (--inconclusive=fail)" : "", sp->as[first].id,
                   R->inconclusive ? R->unknown_note : tkp_why_str(why));
}

/* --inconclusive=pass|fail: *(int *)dst 1 or 2 */
static int inconclusive(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    if (strcmp(v, "pass") && strcmp(v, "fail"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not pass or fail", name, v);
    *(int *)dst = !strcmp(v, "pass") ? 1 : 2;
    return 0;
}

static int check_run(int argc, char **argv, struct tkp_ctx *ctx)
{
    int json = 0, explain = 0, inc = 0; /* --inconclusive: 0 exit 3, 1 pass, 2 fail */
    int follow = 0, exit_on = 0;
    const char *base = NULL, *arg[3], *spec, *cap;
    size_t n;
    const struct tkp_opt opts[] = {
        {"--json", 'f', &json, 0, NULL, NULL},
        {"--explain", 'f', &explain, 0, NULL, NULL},
        {"--baseline", 's', &base, 0, NULL, NULL},
        {"--inconclusive", 'c', &inc, 0, NULL, inconclusive},
        {"--follow", 'f', &follow, 0, NULL, NULL},
        {"--exit-on-violation", 'f', &exit_on, 0, NULL, NULL},
    };
    int rc = tkp_cmd_parse_args(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), arg, 3, &n);
    if (rc) return rc;
    if (n > 2) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "too many arguments ('%s')", arg[2]);
    spec = n > 0 ? arg[0] : NULL, cap = n > 1 ? arg[1] : NULL;
    if (follow) { /* live captures: cmd/check_follow.c */
        const char *other = explain ? "--explain" : base ? "--baseline" : inc ? "--inconclusive"
                                                                              : NULL;
        if (other) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s does not go with --follow", other);
        if (!cap) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "expected SPEC and DIR|CAPTURE");
        return tkp_cmd_check_follow(ctx, spec, cap, json, exit_on);
    }
    if (exit_on) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--exit-on-violation goes with --follow");
    if (!spec || (!cap && !explain))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "expected SPEC and CAPTURE");
    struct tkp_spec *sp = NULL;
    struct tkp_mon *m = NULL, *bm = NULL;
    double *fig = NULL;
    if ((rc = load_spec(ctx, spec, &sp))) goto out;
    if (explain) {
        tkp_report_explain(ctx->out, sp);
        if (!cap) goto out;
    }
    if (sp->uses_base && !base) {
        rc = tkp_cmd_fail(ctx, TKP_ERR_USAGE, "the spec uses baseline(...): give --baseline FILE");
        goto out;
    }
    if (base && is_capture(base)) {
        /* the same monitors over the baseline capture; its run aggregates are the baseline */
        if ((rc = tkp_mon_new(sp, &bm)) || (rc = run_capture(ctx, base, bm))) goto out;
    } else if (base) {
        fig = malloc((size_t)sp->nn * sizeof(*fig));
        if (!fig) {
            rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < sp->nn; i++) fig[i] = NAN;
        if ((rc = parse_figures(ctx, base, sp, fig))) goto out;
    }
    if ((rc = tkp_mon_new(sp, &m))) goto out;
    tkp_mon_set_baseline(m, bm ? tkp_mon_runs(bm) : NULL, fig);
    struct tkp_reader *r;
    if ((rc = tkp_cmd_open(ctx, cap, &r))) goto out;
    rc = tkp_mon_read(m, r);
    if (rc == TKP_ERR_NOMEM) {
        tkp_reader_close(r);
        rc = tkp_cmd_fail(ctx, rc, "out of memory");
        goto out;
    }
    tkp_cmd_warn_reader(ctx, cap, r);
    if ((rc = tkp_mon_finish(m))) {
        tkp_reader_close(r);
        goto out;
    }
    if (json) tkp_report_json(ctx->out, sp, m);
    else tkp_report_table(ctx->out, sp, m);
    tkp_reader_close(r);
    rc = verdict(ctx, sp, m, inc);
out:
    tkp_mon_free(m);
    tkp_mon_free(bm);
    free(fig);
    tkp_spec_free(sp);
    return rc;
}

const struct tkp_cmd tkp_cmd_check = {
    "check",
    "check a capture against a spec of temporal assertions",
    "usage: tokprof check [--json] [--baseline FILE] [--inconclusive=pass|fail] SPEC CAPTURE\n"
    "       tokprof check --explain SPEC [CAPTURE]\n"
    "       tokprof check --follow [--json] [--exit-on-violation] SPEC DIR|CAPTURE\n"
    "\n"
    "Checks the assertions of SPEC (docs/SPEC.md) over CAPTURE in one streaming pass and prints\n"
    "one line per assertion (evaluated, violations, worst value against its bound) and, for\n"
    "each kept violation, where it happened and its witness records.\n"
    "\n"
    "  --json           one JSON object per kept violation, then one per assertion\n"
    "  --baseline FILE  values for baseline(...): a capture (its run aggregates) or a JSON\n"
    "                   object of figures {\"p50_step\": \"12.5ms\", ...}\n"
    "  --explain        print the compiled monitors and their state sizes\n"
    "  --inconclusive=pass|fail\n"
    "                   count an inconclusive assertion as a pass (exit 0, the behaviour\n"
    "                   before exit status 3) or as a violation (exit 1)\n"
    "  --follow         check captures still being written (DIR: every process's capture in\n"
    "                   it, new ones included): each violation is printed as soon as its step\n"
    "                   closes (--json: one JSON line each), until every process has ended or\n"
    "                   Ctrl-C; step and record assertions only (run-level ones are refused:\n"
    "                   their state grows with the run)\n"
    "  --exit-on-violation  with --follow: exit 1 at the first error-severity violation\n"
    "\n"
    "Exit status: 0 every error-severity assertion holds, 1 one is violated, 2 the spec or the\n"
    "capture cannot be read, 3 none is violated but one is inconclusive: a value it reads is\n"
    "not in the capture (GPU time with TOKPROF_GPU=off, a library field outside a library\n"
    "call) or no point passed its guard, so it was never really checked. A violation wins over\n"
    "inconclusive. The table's last line counts the inconclusive assertions and says why.\n"
    "\n"
    "example:\n"
    "  tokprof check slo.tks minillm.4242.tokprof\n",
    check_run,
};
