/* tokprof heatmap -o FILE.svg [--kind class|position|expert] CAPTURE: GPU time as a picture.
 *
 *   class     rows = kernel classes, columns = token steps of the thread with the most of them
 *             (binned to at most TKP_SVG_MAX_COLS columns: the mean per step of each bin);
 *   position  rows = the kernel's position in its step (the ordinal of its launch in the step —
 *             the layer structure shows as repeating bands; graph nodes use their node id),
 *             columns = segments (all threads; binned the same way, grown by doubling the bin
 *             as the capture goes on, so one pass and a fixed grid suffice); rows past
 *             POS_ROWS are folded into the last row. A cell is the mean over the column's
 *             segments that have GPU records; a column whose segments launched work and have
 *             none (TOKPROF_GPU=window:N/M) is grey, "not timed", never 0.
 *   expert    rows = segments (steps) of the MoE thread with the most expert GEMM calls, from
 *             its first to its last step with one, binned to at most TKP_SVG_MAX_ROWS rows
 *             (the mean per step of each bin); columns = experts (libcalls.h: tkp_moe_find,
 *             the same experts and calls as `tokprof moe`); cell = GPU time of the expert's
 *             GEMMs (gate, up, down... all MoE layers), or their count without GPU records.
 *             Under the columns, each expert's exact total (data-total): the `expert_totals`
 *             of `tokprof moe --json`. No per-expert GEMMs, or fused expert kernels
 *             (moe_fused.h): a one-line error, exit 2.
 * Colour is sqrt(GPU time / max), so small classes stay visible; the legend gives the scale. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "base/grow.h"
#include "model/libcalls.h"
#include "model/moe.h"
#include "model/model.h"
#include "model/moe_fused.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "views/heatmap.h"
#include "views/svg.h"
#include "tokprof/format.h"

#define POS_ROWS 512

struct pos {
    float *g; /* POS_ROWS x TKP_SVG_MAX_COLS */
    size_t bin, ncols, nrows;
};

static void pos_add(struct pos *p, uint64_t seg, uint64_t row, double ns)
{
    while (seg / p->bin >= TKP_SVG_MAX_COLS) { /* halve the columns: pairs merge */
        for (size_t r = 0; r < POS_ROWS; r++) {
            float *g = p->g + r * TKP_SVG_MAX_COLS;
            for (size_t c = 0; c < TKP_SVG_MAX_COLS; c++) {
                float v = g[c];
                g[c] = 0;
                g[c / 2] += v;
            }
        }
        p->bin *= 2;
        p->ncols = (p->ncols + 1) / 2;
    }
    size_t c = (size_t)(seg / p->bin), r = row >= POS_ROWS ? POS_ROWS - 1 : (size_t)row;
    p->g[r * TKP_SVG_MAX_COLS + c] += (float)ns;
    if (c + 1 > p->ncols) p->ncols = c + 1;
    if (r + 1 > p->nrows) p->nrows = r + 1;
}

static const char *pos_name(void *arg, size_t row, char *buf)
{
    (void)arg;
    snprintf(buf, 64, row == POS_ROWS - 1 ? "%zu+" : "%zu", row);
    return buf;
}

static int position(struct tkp_ctx *ctx, const char *path, FILE *f)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    struct pos p = {.bin = 1};
    int err = tkp_cmd_open(ctx, path, &r);
    if (err) return err;
    if (!(p.g = calloc((size_t)POS_ROWS * TKP_SVG_MAX_COLS, sizeof(*p.g)))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    /* segments that launched work, and those with GPU records: a column's value is the mean
     * over its timed segments, and a column with launches but none timed (TOKPROF_GPU=window:N/M)
     * is unknown (NaN: grey), not 0. One bit per segment each. */
    uint8_t *sent = NULL, *timed = NULL;
    size_t nseg = 0;
    while (!err && tkp_reader_next(r, &rec) == 1) {
        int gpu = rec.type == TKP_REC_GPU_KERNEL && rec.thread != TKP_GPU_THREAD_NONE;
        if (!gpu && rec.type != TKP_REC_LAUNCH && rec.type != TKP_REC_GRAPH_LAUNCH) continue;
        uint64_t seg = rec.step;
        if (seg / 8 >= nseg) {
            size_t n = nseg;
            if (tkp_grow_zeroed((void **)&sent, &n, seg / 8 + 1, 1) ||
                (n = nseg, tkp_grow_zeroed((void **)&timed, &n, seg / 8 + 1, 1))) {
                err = TKP_ERR_NOMEM;
                break;
            }
            nseg = n;
        }
        (gpu ? timed : sent)[seg / 8] |= (uint8_t)(1u << (seg % 8));
        if (!gpu) continue;
        uint64_t row = rec.gpu.join == TKP_JOIN_GRAPH_LAUNCH && rec.gpu.node != TKP_GRAPH_UNKNOWN
                           ? rec.gpu.node
                           : rec.gpu.index;
        pos_add(&p, rec.step, row, (double)(rec.gpu.end_ns - rec.gpu.start_ns));
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    if (err || !p.ncols) {
        free(p.g), free(sent), free(timed);
        return err ? tkp_cmd_fail(ctx, err, "out of memory")
                   : tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: no GPU kernel records to place", path);
    }
    double *g = malloc(p.nrows * p.ncols * sizeof(*g));
    if (!g) {
        free(p.g), free(sent), free(timed);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    for (size_t c = 0; c < p.ncols; c++) {
        size_t nt = 0, ns = 0;
        for (size_t k = c * p.bin; k < (c + 1) * p.bin && k / 8 < nseg; k++)
            nt += timed[k / 8] >> (k % 8) & 1, ns += sent[k / 8] >> (k % 8) & 1;
        for (size_t i = 0; i < p.nrows; i++)
            g[i * p.ncols + c] = nt   ? p.g[i * TKP_SVG_MAX_COLS + c] / (double)nt
                                 : ns ? NAN
                                      : 0;
    }
    tkp_svg_heatmap(f, "heatmap-position", "GPU time by position of the kernel in its step", g,
                    p.nrows, p.ncols, p.bin, "segment (step)", "kernel position in step", pos_name,
                    NULL);
    free(g);
    free(p.g), free(sent), free(timed);
    return 0;
}

/* ---- --kind expert ---------------------------------------------------------------------------- */

struct exrows {
    const struct tkp_libmodel *m;
    uint32_t first, last; /* libmodel steps drawn: [first, last) */
    size_t bin;
};

static const char *ex_row(void *arg, size_t row, char *buf)
{
    const struct exrows *a = arg;
    snprintf(buf, 64, "%" PRIu64, a->m->steps[a->first + row * a->bin].step);
    return buf;
}

static const char *ex_col(void *arg, size_t col, char *buf)
{
    (void)arg;
    snprintf(buf, 64, "%zu", col);
    return buf;
}

/* The expert view of one MoE thread x: rows = its steps from the first to the last with expert
 * calls, binned to TKP_SVG_MAX_ROWS (the mean per step of each bin: per timed step with GPU time,
 * a bin with none grey), columns = experts; GPU time, or calls without GPU records. The totals
 * under the columns are exact sums over all steps (of the GPU time recorded). */
static int expert_svg(FILE *f, const struct tkp_libmodel *m, const struct tkp_moe *x)
{
    struct exrows a = {m, x->s0, x->s0, 1};
    const uint64_t *v = x->has_gpu ? x->ns : x->calls;
    size_t W = x->width;
    int seen = 0;
    for (uint32_t i = x->s0; i < x->s1; i++)
        for (size_t c = 0; c < W; c++)
            if (x->calls[(size_t)(i - x->s0) * W + c]) {
                if (!seen) a.first = i, seen = 1;
                a.last = i + 1;
                break;
            }
    size_t n = a.last - a.first;
    a.bin = n > TKP_SVG_MAX_ROWS ? (n + TKP_SVG_MAX_ROWS - 1) / TKP_SVG_MAX_ROWS : 1;
    size_t rows = (n + a.bin - 1) / a.bin;
    double *g = calloc(rows * W + 1, sizeof(*g));
    uint64_t *tot = calloc(W + 1, sizeof(*tot));
    if (!g || !tot) {
        free(g), free(tot);
        return TKP_ERR_NOMEM;
    }
    /* totals over all the thread's steps (outside [first, last) they are 0) */
    for (size_t i = 0; i < (size_t)(x->s1 - x->s0); i++)
        for (size_t c = 0; c < W; c++)
            tot[c] += v[i * W + c];
    /* with GPU time, a row is the mean over its timed steps (a call of the step has GPU time);
     * a row with none is unknown (NaN: grey, TOKPROF_GPU=window:N/M), not 0 */
    size_t *nt = calloc(rows + 1, sizeof(*nt));
    if (!nt) {
        free(g), free(tot);
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tkp_lstep *st = &m->steps[a.first + i];
        int t = !x->has_gpu;
        for (uint32_t k = st->first; !t && k < st->first + st->ncalls; k++)
            t = m->calls[k].gpu_ns > 0;
        if (!t) continue;
        nt[i / a.bin]++;
        for (size_t c = 0; c < W; c++)
            g[(i / a.bin) * W + c] += (double)v[(size_t)(a.first - x->s0 + i) * W + c];
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < W; c++)
            g[r * W + c] = nt[r] ? g[r * W + c] / (double)nt[r] : NAN;
    free(nt);
    char title[160], ylabel[96];
    snprintf(title, sizeof(title), "%s per step by MoE expert (thread %u, %u MoE layers)",
             x->has_gpu ? "GPU time of the expert GEMMs" : "Expert GEMM calls", x->thread,
             x->layers);
    if (a.bin > 1) snprintf(ylabel, sizeof(ylabel), "segment (step), %zu steps per row", a.bin);
    else snprintf(ylabel, sizeof(ylabel), "segment (step)");
    tkp_svg_heatmap_rows(f, "heatmap-expert", title, g, rows, W,
                         "MoE expert (index from the weight address); bars: total over the capture",
                         ylabel, ex_row, ex_col, &a, tot, x->has_gpu,
                         x->has_gpu ? "GPU time" : "calls");
    free(g);
    free(tot);
    return 0;
}

static int expert(struct tkp_ctx *ctx, const char *path, FILE *f)
{
    struct tkp_reader *r;
    struct tkp_libmodel m;
    struct tkp_moe best = {0};
    uint64_t best_calls = 0;
    int err = tkp_cmd_open(ctx, path, &r);
    if (err) return err;
    if (tkp_reader_is_merged(r)) { /* experts are told apart by weight addresses, per process */
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "%s: --kind expert reads one process at a time (these captures are "
                            "of several)", path);
    }
    /* fused expert kernels: library calls around them (router, shared expert) would pass for
     * experts (moe_fused.h) */
    struct tkp_fused fx;
    char base[128];
    if ((err = tkp_fused_load(r, &fx)) || fx.nnames) {
        if (!err) /* before the reader closes: names are its strings */
            err = tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                               "%s: the expert GEMMs are fused kernels (%s): per-expert load is "
                               "not observable from the host; 'tokprof moe' shows their time per "
                               "step", path, tkp_fused_display_name(fx.names[0], base, sizeof(base)));
        else err = tkp_cmd_fail(ctx, err, "%s: out of memory", path);
        tkp_fused_free(&fx);
        tkp_reader_close(r);
        return err;
    }
    tkp_fused_free(&fx);
    tkp_reader_close(r);
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    if ((err = tkp_libmodel_load(r, &m))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "%s: out of memory", path);
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    /* the thread with the most expert GEMM calls */
    for (uint32_t s0 = 0, s1; s0 < m.nsteps && !err; s0 = s1) {
        struct tkp_moe x;
        s1 = tkp_libmodel_thread_end(&m, s0);
        if ((err = tkp_moe_find(&m, s0, s1, 0, &x))) break;
        uint64_t calls = 0;
        for (size_t i = 0; x.layers && i < (size_t)(s1 - s0) * x.width; i++)
            calls += x.calls[i];
        if (calls > best_calls) tkp_moe_free(&best), best = x, best_calls = calls;
        else tkp_moe_free(&x);
    }
    if (err) err = tkp_cmd_fail(ctx, err, "out of memory");
    else if (!best_calls)
        err = tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                           "%s: no MoE data: --kind expert needs per-expert GEMM calls (MoE as in "
                           "HF eager; fused MoE kernels hide the load)", path);
    else if ((err = expert_svg(f, &m, &best)))
        tkp_cmd_fail(ctx, err, "out of memory");
    tkp_moe_free(&best);
    tkp_libmodel_free(&m);
    return err;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path = NULL, *out = NULL, *kind = "class", *classes = NULL;
    char why[256];
    int err;
    const struct tkp_opt opts[] = {{"--kind", 's', &kind, 0, NULL, NULL},
                                   {"-o", 's', &out, 0, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse(ctx, argc, argv, opts, 3, &path))) return err;
    if (!out) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "-o FILE.svg needed");
    if (strcmp(kind, "class") && strcmp(kind, "position") && strcmp(kind, "expert"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--kind class, position or expert, not '%s'", kind);
    FILE *f = tkp_cmd_output(ctx, out, "w");
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", out, strerror(errno));
    if (!strcmp(kind, "position")) {
        err = position(ctx, path, f);
    } else if (!strcmp(kind, "expert")) {
        err = expert(ctx, path, f);
    } else {
        struct tkp_classes *cl;
        struct tkp_model m;
        struct tkp_model_opts mo = {.from = 0, .to = -1};
        if (!(err = tkp_cmd_classes(ctx, classes, &cl))) {
            mo.classes = cl;
            tkp_model_init(&m, &mo);
            if (!(err = tkp_cmd_load_model(ctx, path, &m))) {
                if (!tkp_model_gpu(&m, why, sizeof(why)))
                    err = tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: no GPU time to draw: %s", path, why);
                else if ((err = tkp_heatmap_class(f, &m, "heatmap-class")))
                    tkp_cmd_fail(ctx, err, "out of memory");
            }
            tkp_model_free(&m);
            tkp_classes_free(cl);
        }
    }
    if ((f != ctx->out ? fclose(f) : fflush(f)) && !err)
        err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: write failed", out);
    if (err && f != ctx->out) unlink(out); /* no half-written picture left behind */
    return err;
}

const struct tkp_cmd tkp_cmd_heatmap = {
    .name = "heatmap",
    .brief = "an SVG heatmap of GPU time: step x kernel class, x position in the step, x MoE expert",
    .usage =
        "usage: tokprof heatmap -o FILE.svg [--kind class|position|expert] [--classes FILE]\n"
        "                       CAPTURE...\n"
        "\n"
        "Draws GPU time as an SVG heatmap. --kind class (default): one row per kernel class,\n"
        "one column per token step. --kind position: one row per position of the kernel in\n"
        "its step (its launch's ordinal: layers show as repeating bands). Long captures are\n"
        "binned to at most 1000 columns (the mean per step of each bin). --kind expert (MoE\n"
        "with per-expert GEMMs, as HF eager or minillm --moe; one process): one row per step,\n"
        "one column per expert (the experts of 'tokprof moe'), the GPU time of each expert's\n"
        "GEMMs over all MoE layers (their count without GPU records); steps binned to at most\n"
        "250 rows; under each column a bar with the expert's total over the capture (routing\n"
        "skew shows as one tall bar). Colour is the square root of the value against the\n"
        "largest cell; the legend gives the scale.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "examples:\n"
        "  tokprof heatmap -o classes.svg server.1234.tokprof\n"
        "  tokprof heatmap --kind expert -o experts.svg server.1234.tokprof\n",
    .run = run,
};
