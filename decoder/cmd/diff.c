/* tokprof diff A B: what got slower or faster from capture A to capture B.
 *
 * Per kernel class: the per-step GPU time of the class over the token steps with kernels, A vs
 * B — medians and means of the per-step values, and a two-sided Mann–Whitney U test on them.
 * Per kernel name: its launches' GPU durations (the model's 2%-wide histograms: a bucket is a
 * tie group) for the U test, and its mean GPU time per step (total / token steps with kernels)
 * for the size of the change; memory stays O(steps + names), never per step per name.
 *
 * Mann–Whitney U: ranks of the pooled sample with ties averaged, U = R_B − n_B(n_B+1)/2, normal
 * approximation with tie correction σ² = n_A·n_B/12 · ((n+1) − Σ(t³−t)/(n(n−1))) and a 0.5
 * continuity correction; p = erfc(|z|/√2). Verdict: "regression" (B slower) or "improvement"
 * when p < DIFF_ALPHA AND the change is beyond the threshold (default 5%); the change is the
 * larger in magnitude of the relative change of the median and of the mean (a shift that hits
 * a minority of steps leaves the median unmoved but not the mean); else "no change". A kernel
 * seen in only one capture is "new" or "gone" (reported, not a regression).
 *
 * Without GPU records in either capture: per-step host duration of the token steps (U test)
 * and launches per step per kernel name, and the output says so.
 *
 * Exit: 0, or 1 (TKP_ERR_VIOLATION) when any class or kernel is a regression.
 * JSON (`--json`): {gpu, threshold_pct, steps_a, steps_b, rows: [{kind ("class", "kernel",
 * "host" or "launches"), name, a_median, b_median, a_mean, b_mean, change_pct, p, verdict}],
 * regressions}. Times in ns (launches: per step). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/json.h"
#include "tokprof/format.h"
#include "base/sort.h"

#define DIFF_ALPHA 0.01

struct row {
    const char *kind, *name, *verdict;
    double am, bm, amean, bmean, pct, p;
};

struct mwu {
    double na, nb, rb, ties, seen;
};

static void mwu_group(struct mwu *u, double a, double b)
{
    double t = a + b;
    if (t <= 0) return;
    u->rb += b * (u->seen + (t + 1) / 2);
    u->ties += t * t * t - t;
    u->seen += t;
    u->na += a, u->nb += b;
}

static double mwu_p(const struct mwu *u)
{
    double n = u->na + u->nb;
    if (u->na < 1 || u->nb < 1) return 1;
    double U = u->rb - u->nb * (u->nb + 1) / 2, mu = u->na * u->nb / 2;
    double var = u->na * u->nb / 12 * ((n + 1) - u->ties / (n * (n - 1)));
    if (var <= 0) return 1;
    double d = fabs(U - mu) - 0.5;
    if (d <= 0) return 1;
    return erfc(d / sqrt(var) / sqrt(2.0));
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* U test and medians of two samples (sorted in place). */
static void compare_arrays(double *a, size_t na, double *b, size_t nb, struct row *r)
{
    struct mwu u = {0};
    tkp_sort(a, na, sizeof(*a), cmp_d);
    tkp_sort(b, nb, sizeof(*b), cmp_d);
    size_t i = 0, j = 0;
    double sa = 0, sb = 0;
    while (i < na || j < nb) {
        double v = i < na && (j >= nb || a[i] <= b[j]) ? a[i] : b[j], ca = 0, cb = 0;
        while (i < na && a[i] == v)
            ca++, sa += a[i++];
        while (j < nb && b[j] == v)
            cb++, sb += b[j++];
        mwu_group(&u, ca, cb);
    }
    r->p = mwu_p(&u);
    r->am = na ? (na % 2 ? a[na / 2] : (a[na / 2 - 1] + a[na / 2]) / 2) : 0;
    r->bm = nb ? (nb % 2 ? b[nb / 2] : (b[nb / 2 - 1] + b[nb / 2]) / 2) : 0;
    r->amean = na ? sa / (double)na : 0;
    r->bmean = nb ? sb / (double)nb : 0;
}

static double rel(double a, double b)
{
    return a > 0 ? 100.0 * (b - a) / a : b > 0 ? 100.0 : 0;
}

static void judge(struct row *r, double thr)
{
    double pm = rel(r->am, r->bm), pe = rel(r->amean, r->bmean);
    r->pct = fabs(pm) >= fabs(pe) ? pm : pe;
    if (r->p < DIFF_ALPHA && fabs(r->pct) >= thr)
        r->verdict = r->pct > 0 ? "regression" : "improvement";
    else
        r->verdict = "no change";
}

struct side {
    struct tkp_model m;
    struct tkp_acc *a;
    size_t nsteps, ngpu; /* token steps, and those with kernels */
};

/* Per-step values of token steps: fig -1 host duration, else class fig (GPU steps only). */
static size_t values(const struct side *s, int fig, double *v)
{
    size_t k = 0;
    for (size_t i = 0; i < s->m.nsteps; i++) {
        const struct tkp_mstep *st = &s->m.steps[i];
        if (st->kind != TKP_STEP_TOKEN) continue;
        if (fig < 0) v[k++] = (double)tkp_mstep_host_ns(st);
        else if (st->gpu_kernels) v[k++] = (double)st->class_ns[fig];
    }
    return k;
}

static const struct tkp_mname *find_name(const struct tkp_model *m, const char *name)
{
    for (size_t i = 0; i < m->nnames; i++) /* O(names^2) overall: names are few */
        if (!strcmp(m->names[i].name, name)) return &m->names[i];
    return NULL;
}

static int push(struct row **rows, size_t *n, size_t *cap, struct row r)
{
    if (TKP_GROW_FROM(*rows, *cap, *n + 1, 64)) return TKP_ERR_NOMEM;
    (*rows)[(*n)++] = r;
    return 0;
}

/* One kernel name, A vs B (either may be NULL). */
static struct row kernel_row(const struct side *A, const struct side *B, const struct tkp_mname *a,
                             const struct tkp_mname *b, int gpu, double thr)
{
    struct row r = {.kind = gpu ? "kernel" : "launches", .name = a ? a->name : b->name};
    double da = A->ngpu ? (double)A->ngpu : 1, db = B->ngpu ? (double)B->ngpu : 1;
    if (!gpu) {
        da = A->nsteps ? (double)A->nsteps : 1, db = B->nsteps ? (double)B->nsteps : 1;
        r.amean = a ? (double)a->launches / da : 0;
        r.bmean = b ? (double)b->launches / db : 0;
        r.am = r.amean, r.bm = r.bmean, r.p = r.amean == r.bmean ? 1 : 0;
    } else {
        struct mwu u = {0};
        for (uint32_t k = 0; k < TKP_HIST_BUCKETS; k++) {
            double ca = a && a->d.hist ? a->d.hist[k] : 0, cb = b && b->d.hist ? b->d.hist[k] : 0;
            mwu_group(&u, ca, cb);
        }
        r.p = mwu_p(&u);
        r.am = a ? (double)tkp_dist_pct(&a->d, 0.5) : 0; /* per launch */
        r.bm = b ? (double)tkp_dist_pct(&b->d, 0.5) : 0;
        r.amean = a ? (double)a->d.total_ns / da : 0; /* per step */
        r.bmean = b ? (double)b->d.total_ns / db : 0;
    }
    if (!a || (gpu ? !a->d.count : !a->launches)) {
        r.verdict = "new", r.pct = 100;
    } else if (!b || (gpu ? !b->d.count : !b->launches)) {
        r.verdict = "gone", r.pct = -100;
    } else {
        /* for kernels the change is the mean per step (the median is per launch) */
        r.pct = rel(r.amean, r.bmean);
        r.verdict = r.p < DIFF_ALPHA && fabs(r.pct) >= thr ? (r.pct > 0 ? "regression" : "improvement")
                                                          : "no change";
    }
    return r;
}

static int build(struct side *A, struct side *B, int gpu, double thr, struct row **rows,
                 size_t *n)
{
    size_t cap = 0, mx = A->m.nsteps > B->m.nsteps ? A->m.nsteps : B->m.nsteps;
    double *va = malloc((mx + 1) * sizeof(*va)), *vb = malloc((mx + 1) * sizeof(*vb));
    int err = va && vb ? 0 : TKP_ERR_NOMEM;
    *n = 0;
    if (!err && !gpu) {
        struct row r = {.kind = "host", .name = "step host duration"};
        compare_arrays(va, values(A, -1, va), vb, values(B, -1, vb), &r);
        judge(&r, thr);
        err = push(rows, n, &cap, r);
    }
    for (int c = 0; gpu && !err && c < A->m.nclasses; c++) {
        if (!A->m.cls[c].count && !B->m.cls[c].count) continue;
        struct row r = {.kind = "class", .name = tkp_classes_name(A->m.opts.classes, c)};
        compare_arrays(va, values(A, c, va), vb, values(B, c, vb), &r);
        judge(&r, thr);
        err = push(rows, n, &cap, r);
    }
    for (size_t i = 0; !err && i < A->m.nnames; i++) {
        const struct tkp_mname *a = &A->m.names[i];
        if (gpu ? !a->d.count : !a->launches) continue;
        err = push(rows, n, &cap, kernel_row(A, B, a, find_name(&B->m, a->name), gpu, thr));
    }
    for (size_t i = 0; !err && i < B->m.nnames; i++) {
        const struct tkp_mname *b = &B->m.names[i], *a = find_name(&A->m, b->name);
        if ((gpu ? !b->d.count : !b->launches) || (a && (gpu ? a->d.count : a->launches)))
            continue;
        err = push(rows, n, &cap, kernel_row(A, B, NULL, b, gpu, thr));
    }
    free(va);
    free(vb);
    return err;
}

static void count_steps(struct side *s)
{
    for (size_t i = 0; i < s->m.nsteps; i++)
        if (s->m.steps[i].kind == TKP_STEP_TOKEN)
            s->nsteps++, s->ngpu += s->m.steps[i].gpu_kernels > 0;
}

static void print(FILE *f, const struct row *rows, size_t n, int gpu, int json, double thr,
                  const struct side *A, const struct side *B, int all)
{
    if (json) {
        fprintf(f, "{\"gpu\":%s,\"threshold_pct\":%.3f,\"steps_a\":%zu,\"steps_b\":%zu,\"rows\":[",
                gpu ? "true" : "false", thr, A->nsteps, B->nsteps);
        for (size_t i = 0; i < n; i++) {
            const struct row *r = &rows[i];
            fprintf(f, "%s{\"kind\":\"%s\",\"name\":", i ? "," : "", r->kind);
            tkp_json_str(f, r->name);
            fprintf(f, ",\"a_median\":%.1f,\"b_median\":%.1f,\"a_mean\":%.1f,\"b_mean\":%.1f,"
                       "\"change_pct\":%.3f,\"p\":%.3g,\"verdict\":\"%s\"}",
                    r->am, r->bm, r->amean, r->bmean, r->pct, r->p, r->verdict);
        }
        size_t reg = 0;
        for (size_t i = 0; i < n; i++)
            reg += !strcmp(rows[i].verdict, "regression");
        fprintf(f, "],\"regressions\":%zu}\n", reg);
        return;
    }
    if (!gpu)
        fputs("no GPU records in one or both captures: comparing host duration per step and "
              "launches per step\n", f);
    fprintf(f, "A: %zu token steps, B: %zu; threshold %.1f%%, p < %.2f\n", A->nsteps, B->nsteps,
            thr, DIFF_ALPHA);
    fprintf(f, "%-7s %-12s %12s %12s %8s %9s  %s\n", "kind", "verdict", "A", "B", "change",
            "p", "name");
    size_t hidden = 0;
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        int quiet = !strcmp(r->verdict, "no change") && strcmp(r->kind, "class") &&
                    strcmp(r->kind, "host");
        if (quiet && !all) {
            hidden++;
            continue;
        }
        int launches = !strcmp(r->kind, "launches");
        /* classes and host: the median per step; kernels: the mean per step */
        double a = !strcmp(r->kind, "kernel") || launches ? r->amean : r->am;
        double b = !strcmp(r->kind, "kernel") || launches ? r->bmean : r->bm;
        if (launches)
            fprintf(f, "%-7s %-12s %12.2f %12.2f %+7.1f%% %9.2g  %s\n", "launch", r->verdict, a,
                    b, r->pct, r->p, r->name);
        else
            fprintf(f, "%-7s %-12s %9.3f ms %9.3f ms %+7.1f%% %9.2g  %s\n", r->kind, r->verdict,
                    a / 1e6, b / 1e6, r->pct, r->p, r->name);
    }
    if (hidden) fprintf(f, "(%zu kernels with no change not shown; --all shows them)\n", hidden);
}

/* --threshold PCT: a percentage, 0 to 1e6 */
static int pct(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e6)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: '%s' is not a percentage", name, v);
    *(double *)dst = x;
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path[3], *classes = NULL;
    double thr = 5;
    int json = 0, all = 0, err;
    size_t np;
    char why[256];
    const struct tkp_opt opts[] = {{"--json", 'f', &json, 0, NULL, NULL},
                                   {"--all", 'f', &all, 0, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL},
                                   {"--threshold", 'c', &thr, 0, NULL, pct}};
    if ((err = tkp_cmd_parse_args(ctx, argc, argv, opts, 4, path, 3, &np))) return err;
    if (np > 2) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "two captures, A and B ('%s')", path[2]);
    if (np != 2) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "two captures needed: A B");
    struct tkp_classes *cl;
    if ((err = tkp_cmd_classes(ctx, classes, &cl))) return err;
    struct side s[2];
    memset(s, 0, sizeof(s));
    if ((err = tkp_cmd_load_analysis(ctx, path[0], cl, &s[0].m, &s[0].a))) {
        tkp_classes_free(cl);
        return err;
    }
    if ((err = tkp_cmd_load_analysis(ctx, path[1], cl, &s[1].m, &s[1].a))) {
        tkp_acc_free(s[0].a);
        tkp_model_free(&s[0].m);
        tkp_classes_free(cl);
        return err;
    }
    count_steps(&s[0]);
    count_steps(&s[1]);
    int gpu = tkp_model_gpu(&s[0].m, why, sizeof(why)) && tkp_model_gpu(&s[1].m, why, sizeof(why));
    struct row *rows = NULL;
    size_t n = 0, reg = 0;
    if ((err = build(&s[0], &s[1], gpu, thr, &rows, &n))) {
        tkp_cmd_fail(ctx, err, "out of memory");
    } else {
        print(ctx->out, rows, n, gpu, json, thr, &s[0], &s[1], all);
        const char *first = NULL;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(rows[i].verdict, "regression")) {
                if (!reg++) first = rows[i].name;
            }
        if (reg)
            err = tkp_cmd_fail(ctx, TKP_ERR_VIOLATION, "%zu regression%s beyond %.1f%% (first: %s)",
                               reg, reg == 1 ? "" : "s", thr, first);
    }
    free(rows);
    for (int i = 0; i < 2; i++)
        tkp_acc_free(s[i].a), tkp_model_free(&s[i].m);
    tkp_classes_free(cl);
    return err;
}

const struct tkp_cmd tkp_cmd_diff = {
    .name = "diff",
    .brief = "what got slower from capture A to B: per class and kernel, with a U test",
    .usage =
        "usage: tokprof diff [--threshold PCT] [--json] [--all] [--classes FILE] A B\n"
        "\n"
        "Compares capture B with capture A: per kernel class the GPU time per token step\n"
        "(median and mean of the per-step values), per kernel name its GPU time per step and\n"
        "the distribution of its launches' durations. Each row has a two-sided Mann-Whitney U\n"
        "test (normal approximation, tie-corrected) and a verdict: regression or improvement\n"
        "when p < 0.01 and the change is beyond PCT (default 5%), else no change. Without GPU\n"
        "records it compares host duration per step and launches per step, and says so.\n"
        "Exit status 1 when a regression is found.\n"
        "\n"
        "  --threshold PCT  smallest change reported (percent, default 5)\n"
        "  --json           one JSON object with every row\n"
        "  --all            also list the kernels that did not change\n"
        "  --classes FILE   extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "\n"
        "example: fail CI when the new build is slower\n"
        "  tokprof diff --threshold 3 baseline.tokprof candidate.tokprof\n",
    .run = run,
};
