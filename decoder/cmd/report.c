/* tokprof report -o FILE.html [--spec SPEC] CAPTURE: one self-contained HTML page — no network,
 * no script: inline CSS and inline SVG figures. Sections (each figure an <svg> with an id the
 * tests look for): summary and analyses (the lines of `tokprof analyze`), step latency over time
 * (#fig-latency), GPU time per step stacked by class (#fig-classes), the step x class heatmap
 * (#heatmap-class), the top kernels (#top-kernels), the change points (#change-points) and, with
 * --spec, the spec checker's table (#spec), with --whatif the observed and predicted ITL
 * (#fig-whatif, model/critpath.h). Streaming: one pass feeds the model and the analysis
 * accumulator, and with --spec one more pass runs the spec monitor (report_spec.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "model/symbolize.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "capture/reader.h"
#include "check/compile.h"
#include "check/monitor.h"
#include "check/parse.h"
#include "check/results.h"
#include "views/heatmap.h"
#include "views/svg.h"
#include "cmd/whatif.h"
#include "model/critpath.h"
#include "base/sort.h"

#define TOP 20

static const char CSS[] =
    "body{font-family:sans-serif;margin:24px;max-width:1240px;color:#222}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;"
    "text-align:right}td.n{text-align:left;font-family:monospace}";

static void esc(FILE *f, const char *s)
{
    tkp_svg_esc(f, s);
}

/* Runs the text printer fn into a buffer and writes it escaped inside <pre id=id>. */
static int pre(FILE *f, const char *id, void (*fn)(FILE *, const void *, const void *),
               const void *a, const void *b)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return TKP_ERR_NOMEM;
    fn(m, a, b);
    fclose(m);
    fprintf(f, "<pre id=\"%s\">", id);
    esc(f, buf);
    fputs("</pre>\n", f);
    free(buf);
    return 0;
}

static void analysis_lines(FILE *f, const void *m, const void *an)
{
    tkp_analysis_print_lines(f, m, an);
}

static int cmp_total(const void *x, const void *y)
{
    const struct tkp_mname *a = *(const struct tkp_mname *const *)x,
                           *b = *(const struct tkp_mname *const *)y;
    return a->d.total_ns < b->d.total_ns ? 1 : a->d.total_ns > b->d.total_ns ? -1 : 0;
}

static int top_kernels(FILE *f, const struct tkp_model *m)
{
    const struct tkp_mname **v = malloc((m->nnames + 1) * sizeof(*v));
    if (!v) return TKP_ERR_NOMEM;
    for (size_t i = 0; i < m->nnames; i++)
        v[i] = &m->names[i];
    tkp_sort(v, m->nnames, sizeof(*v), cmp_total);
    fputs("<table id=\"top-kernels\"><tr><th>kernel</th><th>class</th><th>count</th><th>total ms"
          "</th><th>share</th><th>p50 us</th><th>p99 us</th></tr>\n", f);
    for (size_t i = 0; i < m->nnames && i < TOP && v[i]->d.count; i++) {
        /* C++ kernels demangled, shown without parameters (the whole name on hover) */
        char b[512], *d = tkp_demangle(v[i]->name);
        fputs("<tr><td class=\"n\" title=\"", f);
        esc(f, d ? d : v[i]->name);
        fputs("\">", f);
        esc(f, d ? tkp_short_name(d, b, sizeof(b)) : v[i]->name);
        free(d);
        fputs("</td><td class=\"n\">", f);
        esc(f, tkp_classes_name(m->opts.classes, v[i]->cls));
        fprintf(f, "</td><td>%" PRIu64 "</td><td>%.3f</td><td>%.1f%%</td><td>%.1f</td><td>%.1f</td>"
                   "</tr>\n",
                v[i]->d.count, v[i]->d.total_ns / 1e6,
                m->kernel_ns_total ? 100.0 * v[i]->d.total_ns / m->kernel_ns_total : 0.0,
                tkp_dist_pct(&v[i]->d, 0.5) / 1e3, tkp_dist_pct(&v[i]->d, 0.99) / 1e3);
    }
    fputs("</table>\n", f);
    free(v);
    return 0;
}

static int figures(FILE *f, const struct tkp_model *m, int gpu)
{
    double *cls = NULL, *host = NULL;
    size_t bin;
    long n = tkp_svg_step_bins(m, &cls, &host, &bin);
    if (n < 0) return (int)n;
    fputs("<h2>Step latency</h2>\n", f);
    tkp_svg_lines(f, "fig-latency", "Host duration per token step", host, (size_t)n, bin,
                  "host duration");
    int err = 0;
    if (gpu) {
        const char *names[TKP_CLASSES_MAX];
        size_t ns = 0;
        double *v = malloc(((size_t)m->nclasses * (size_t)n + 1) * sizeof(*v));
        if (!v) err = TKP_ERR_NOMEM;
        for (int c = 0; !err && c < m->nclasses && c < TKP_CLASSES_MAX; c++) {
            double t = 0;
            for (long i = 0; i < n; i++) /* NaN: a bin not timed (svg.h) */
                if (!isnan(cls[(size_t)c * (size_t)n + (size_t)i]))
                    t += cls[(size_t)c * (size_t)n + (size_t)i];
            if (t <= 0) continue;
            memcpy(v + ns * (size_t)n, cls + (size_t)c * (size_t)n, (size_t)n * sizeof(*v));
            names[ns++] = tkp_classes_name(m->opts.classes, c);
        }
        if (!err) {
            fputs("<h2>GPU time per step by class</h2>\n", f);
            tkp_svg_stacked(f, "fig-classes", "GPU time per token step, stacked by kernel class",
                            v, (size_t)n, ns, names, bin);
            fputs("<h2>Heatmap</h2>\n", f);
            err = tkp_heatmap_class(f, m, "heatmap-class");
        }
        free(v);
    } else {
        fputs("<p>No GPU records: the class breakdown and heatmap need GPU time.</p>\n", f);
    }
    free(cls);
    free(host);
    return err;
}

/* ---- the spec section: `tokprof check`'s table, run in the same process ---- */

static int spec_load(struct tkp_ctx *ctx, const char *path, struct tkp_spec **sp)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int c;
    while (m && (c = fgetc(f)) != EOF && len < (16u << 20))
        fputc(c, m);
    fclose(f);
    if (!m) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    fclose(m);
    struct tkp_spec_err e;
    *sp = NULL;
    int rc = tkp_spec_parse(text, path, sp, &e);
    if (!rc) rc = tkp_spec_compile(*sp, &e);
    if (!rc) return 0;
    tkp_spec_free(*sp);
    *sp = NULL;
    if (rc == TKP_ERR_NOMEM) return tkp_cmd_fail(ctx, rc, "out of memory");
    return tkp_cmd_fail(ctx, rc, "%s:%u:%u: %s (try 'tokprof check')", path, e.line, e.col, e.msg);
}

/* Loads and compiles SPEC, checks CAPTURE against it in one streaming pass and renders the
 * result table of `tokprof check` into *text (malloc'd, caller frees). *violated is 1 when an
 * error-severity assertion failed. Returns 0 or a tkp_err with ctx->why set. */
static int report_spec(struct tkp_ctx *ctx, const char *spec, const char *capture, char **text,
                    int *violated)
{
    struct tkp_spec *sp;
    struct tkp_mon *mon;
    struct tkp_reader *r;
    struct tkp_record rec;
    int rc = spec_load(ctx, spec, &sp);
    if (rc) return rc;
    if (tkp_mon_new(sp, &mon)) {
        tkp_spec_free(sp);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    if ((rc = tkp_cmd_open(ctx, capture, &r))) {
        tkp_mon_free(mon);
        tkp_spec_free(sp);
        return rc;
    }
    while ((rc = tkp_reader_next(r, &rec)) == 1)
        if ((rc = tkp_mon_feed(mon, &rec)) < 0) break;
    if (rc != TKP_ERR_NOMEM) rc = tkp_mon_finish(mon);
    *violated = 0;
    for (int i = 0; rc != TKP_ERR_NOMEM && i < sp->nas; i++)
        if (!sp->as[i].warn && tkp_mon_verdict(mon, i, NULL) == 0) *violated = 1;
    if (rc == TKP_ERR_NOMEM) {
        tkp_cmd_fail(ctx, rc, "out of memory");
    } else {
        size_t len = 0;
        FILE *m = open_memstream(text, &len);
        if (m) {
            tkp_report_table(m, sp, mon); /* names live until the reader closes */
            fclose(m);
            rc = 0;
        } else {
            rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
        }
    }
    tkp_reader_close(r);
    tkp_mon_free(mon);
    tkp_spec_free(sp);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --whatif: the observed and predicted ITL distributions (critpath.h) as quantile curves. */
static int whatif_figure(FILE *f, const struct tkp_crit *c, const char *change)
{
    uint64_t *o, *p;
    size_t n, skipped;
    int err = tkp_crit_intervals(c, &o, &p, &n, &skipped);
    if (err) return err;
    double *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));
    if (!a || !b) {
        free(o), free(p), free(a), free(b);
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (double)o[i], b[i] = (double)p[i];
    qsort(a, n, sizeof(*a), cmp_double);
    qsort(b, n, sizeof(*b), cmp_double);
    fputs("<h2>What if: ", f);
    esc(f, change);
    fprintf(f, "</h2>\n<p>Inter-token latency observed and predicted by <code>tokprof whatif "
               "--scale ");
    esc(f, change);
    fprintf(f, "</code> over %zu token intervals (%zu not predictable: a GPU record or a "
               "dependency missing).</p>\n", n, skipped);
    if (n) {
        char t[320];
        snprintf(t, sizeof(t), "ITL, sorted: observed vs predicted with %s", change);
        tkp_svg_quantiles(f, "fig-whatif", t, a, b, n, "observed", "predicted");
    }
    free(o), free(p), free(a), free(b);
    return 0;
}

static int write_report(FILE *f, const char *path, const struct tkp_model *m,
                        const struct tkp_analysis *an, const char *spec_text,
                        const struct tkp_crit *crit, const char *change)
{
    char why[256];
    int gpu = tkp_model_gpu(m, why, sizeof(why)), err;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<title>tokprof report</title><style>%s</style></head><body>\n<h1>tokprof report: ",
            CSS);
    esc(f, path);
    fputs("</h1>\n<h2>Summary</h2>\n<p>", f);
    size_t tok = 0, timed = 0;
    for (size_t i = 0; i < m->nsteps; i++)
        if (m->steps[i].kind == TKP_STEP_TOKEN) tok++, timed += tkp_mstep_timed(&m->steps[i]);
    fprintf(f, "%zu token steps; GPU records: %s", tok, gpu ? "yes" : "no (");
    if (!gpu) esc(f, why), fputs(")", f);
    if (gpu && timed < tok) /* the others' GPU time is unknown: grey in the figures */
        fprintf(f, ", %zu of %zu token steps timed (TOKPROF_GPU=%s; grey: not timed)", timed, tok,
                m->gpu_mode[0] ? m->gpu_mode : "?");
    char vt[256];
    tkp_verdict_text(&an->v, vt, sizeof(vt));
    const char *colon = strchr(vt, ':');
    fprintf(f, "; verdict: <b>%s</b> (", an->verdict);
    esc(f, colon ? colon + 2 : vt);
    if (gpu) fprintf(f, "; GPU idle %.1f%% of the steps' GPU span", 100.0 * an->idle_share);
    fputs(").</p>\n", f);
    if ((err = pre(f, "analysis", analysis_lines, m, an))) return err;
    if ((err = figures(f, m, gpu))) return err;
    if (crit && (err = whatif_figure(f, crit, change))) return err;
    fputs("<h2>Top kernels</h2>\n", f);
    if ((err = top_kernels(f, m))) return err;
    fputs("<h2>Change points</h2>\n<table id=\"change-points\"><tr><th>series</th><th>step</th>"
          "<th>before ms</th><th>after ms</th><th>classes that moved</th></tr>\n", f);
    for (int i = 0; i < an->ncps; i++) {
        const struct tkp_acp *c = &an->cps[i];
        fprintf(f, "<tr><td class=\"n\">%s</td><td>%" PRId64 "</td><td>%.3f</td><td>%.3f</td>"
                   "<td class=\"n\">",
                c->series, c->step, c->before_ns / 1e6, c->after_ns / 1e6);
        for (int j = 0; j < c->ncls; j++) {
            if (j) fputs(", ", f);
            esc(f, tkp_classes_name(m->opts.classes, c->cls[j]));
            fprintf(f, " %+.3f ms", (c->cls_after[j] - c->cls_before[j]) / 1e6);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (!an->ncps) fputs("<p>No change point.</p>\n", f);
    if (spec_text) {
        fputs("<h2>Spec</h2>\n<pre id=\"spec\">", f);
        esc(f, spec_text);
        fputs("</pre>\n", f);
    }
    fputs("</body></html>\n", f);
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path = NULL, *out = NULL, *spec = NULL, *classes = NULL, *whatif = NULL;
    int err;
    const struct tkp_opt opts[] = {{"-o", 's', &out, 0, NULL, NULL},
                                   {"--spec", 's', &spec, 0, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL},
                                   {"--whatif", 's', &whatif, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse(ctx, argc, argv, opts, 4, &path))) return err;
    if (!out) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "-o FILE.html needed");
    char *spec_text = NULL;
    int violated = 0;
    struct tkp_classes *cl = NULL;
    struct tkp_reader *r = NULL;
    struct tkp_acc *acc = NULL;
    struct tkp_crit *crit = NULL;
    struct tkp_whatif_rule *rule = NULL;
    struct tkp_crit_change ch;
    struct tkp_model m;
    struct tkp_analysis an;
    struct tkp_record rec;
    struct tkp_model_opts mo = {.from = 0, .to = -1};
    memset(&an, 0, sizeof(an));
    /* the spec first, in its own pass: a bad spec fails before any work */
    if (spec && (err = report_spec(ctx, spec, path, &spec_text, &violated))) return err;
    if ((err = tkp_cmd_classes(ctx, classes, &cl))) goto done;
    mo.classes = cl;
    tkp_crit_change_init(&ch);
    if (whatif && ((err = tkp_whatif_rule_new(ctx, cl, "--whatif", whatif, &ch, &rule)) ||
                   (err = tkp_crit_new(&ch, &crit)))) {
        if (err == TKP_ERR_NOMEM) tkp_cmd_fail(ctx, err, "out of memory");
        goto done;
    }
    tkp_model_init(&m, &mo);
    if ((err = tkp_cmd_open(ctx, path, &r))) goto model;
    if ((err = tkp_acc_bind(&m, &acc))) goto fail; /* the extras come from this model's steps */
    while (!err && tkp_reader_next(r, &rec) == 1)
        if (!(err = tkp_model_add(&m, &rec)) && crit) err = tkp_crit_add(crit, &rec);
    if (!err) err = tkp_model_finish(&m);
    if (!err && crit) err = tkp_crit_finish(crit);
    if (!err) err = tkp_analysis_make(&m, acc, &an);
    if (err) goto fail;
    tkp_cmd_warn_reader(ctx, path, r);
    FILE *f = fopen(out, "w");
    if (!f) {
        err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", out, strerror(errno));
        goto model;
    }
    err = write_report(f, path, &m, &an, spec_text, crit, whatif);
    if (fclose(f) && !err) err = TKP_ERR_IO;
    if (err) tkp_cmd_fail(ctx, err, "%s: %s", out, tkp_strerror(err));
    goto model;
fail:
    tkp_cmd_fail(ctx, err, "%s: %s", path, tkp_strerror(err));
model:
    tkp_model_free(&m);
done:
    tkp_crit_free(crit);
    tkp_whatif_rule_free(rule);
    tkp_analysis_free(&an);
    tkp_acc_free(acc);
    tkp_reader_close(r);
    tkp_classes_free(cl);
    free(spec_text);
    return err;
}

const struct tkp_cmd tkp_cmd_report = {
    .name = "report",
    .brief = "one self-contained HTML page: summary, figures, top kernels, change points, spec",
    .usage =
        "usage: tokprof report -o FILE.html [--spec SPEC] [--whatif CLASS_OR_REGEX=F]\n"
        "                      [--classes FILE] CAPTURE...\n"
        "\n"
        "Writes one HTML file that needs nothing else (no network, no script): the analyses\n"
        "of 'tokprof analyze', step latency over time, GPU time per step stacked by kernel\n"
        "class, the step x class heatmap, the top kernels, the change points, and with --spec\n"
        "the results of 'tokprof check SPEC' on the capture; with --whatif, the inter-token\n"
        "latency observed and predicted under that change ('tokprof whatif --scale', e.g.\n"
        "attention=0.5), as two quantile curves (#fig-whatif).\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "example:\n"
        "  tokprof report -o report.html --spec slo.spec server.1234.tokprof\n",
    .run = run,
};
