/* tokprof heatmap -o FILE.svg [--kind class|position] CAPTURE: GPU time as a picture.
 *
 *   class     rows = kernel classes, columns = token steps of the thread with the most of them
 *             (binned to at most TKP_SVG_MAX_COLS columns: the mean per step of each bin);
 *   position  rows = the kernel's position in its step (the ordinal of its launch in the step —
 *             the layer structure shows as repeating bands; graph nodes use their node id),
 *             columns = segments (all threads; binned the same way, grown by doubling the bin
 *             as the capture goes on, so one pass and a fixed grid suffice); rows past
 *             POS_ROWS are folded into the last row.
 *   expert    needs MoE data: not built yet (refused with a usage error).
 * Colour is sqrt(GPU time / max), so small classes stay visible; the legend gives the scale. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "err.h"
#include "model.h"
#include "reader.h"
#include "svg.h"
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

struct clsrows {
    int map[TKP_CLASSES_MAX]; /* row -> class id */
    const struct tkp_classes *cl;
};

static const char *cls_name(void *arg, size_t row, char *buf)
{
    const struct clsrows *a = arg;
    (void)buf;
    return tkp_classes_name(a->cl, a->map[row]);
}

int tkp_heatmap_class(FILE *f, const struct tkp_model *m, const char *id)
{
    double *cls;
    size_t bin;
    long n = tkp_svg_step_bins(m, &cls, NULL, &bin);
    if (n < 0) return (int)n;
    /* rows: classes with time, and where their names come from (cls_name's arg) */
    struct clsrows a;
    size_t rows = 0;
    double *g = malloc(((size_t)m->nclasses * (size_t)n + 1) * sizeof(*g));
    if (!g) {
        free(cls);
        return TKP_ERR_NOMEM;
    }
    a.cl = m->opts.classes;
    for (int c = 0; c < m->nclasses && c < TKP_CLASSES_MAX; c++) {
        double t = 0;
        for (long i = 0; i < n; i++)
            t += cls[(size_t)c * (size_t)n + (size_t)i];
        if (t <= 0) continue;
        memcpy(g + rows * (size_t)n, cls + (size_t)c * (size_t)n, (size_t)n * sizeof(*g));
        a.map[rows++] = c;
    }
    tkp_svg_heatmap(f, id, "GPU time per step by kernel class", g, rows, (size_t)n, bin,
                    "token step", "kernel class", cls_name, &a);
    free(g);
    free(cls);
    return 0;
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
    while (tkp_reader_next(r, &rec) == 1) {
        if (rec.type != TKP_REC_GPU_KERNEL || rec.thread == TKP_GPU_THREAD_NONE) continue;
        uint64_t row = rec.gpu.join == TKP_JOIN_GRAPH_LAUNCH && rec.gpu.node != TKP_GRAPH_UNKNOWN
                           ? rec.gpu.node
                           : rec.gpu.index;
        pos_add(&p, rec.step, row, (double)(rec.gpu.end_ns - rec.gpu.start_ns));
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    if (!p.ncols) {
        free(p.g);
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: no GPU kernel records to place", path);
    }
    double *g = malloc(p.nrows * p.ncols * sizeof(*g));
    if (!g) {
        free(p.g);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < p.nrows; i++)
        for (size_t c = 0; c < p.ncols; c++)
            g[i * p.ncols + c] = p.g[i * TKP_SVG_MAX_COLS + c] / (double)p.bin;
    tkp_svg_heatmap(f, "heatmap-position", "GPU time by position of the kernel in its step", g,
                    p.nrows, p.ncols, p.bin, "segment (step)", "kernel position in step", pos_name,
                    NULL);
    free(g);
    free(p.g);
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path = NULL, *out = NULL, *kind = "class", *classes = NULL;
    char why[256];
    int err;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kind") && i + 1 < argc) kind = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--classes") && i + 1 < argc) classes = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "unknown option '%s'", argv[i]);
        else if ((err = tkp_cmd_input(ctx, &path, argv[i])))
            return err;
    }
    if (!path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");
    if (!out) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "-o FILE.svg needed");
    if (!strcmp(kind, "expert"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--kind expert is not built yet (try 'tokprof moe')");
    if (strcmp(kind, "class") && strcmp(kind, "position"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--kind class or position, not '%s'", kind);
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : ctx->out;
    if (!f) return tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", out, strerror(errno));
    if (!strcmp(kind, "position")) {
        err = position(ctx, path, f);
    } else {
        struct tkp_classes *cl;
        struct tkp_model m;
        struct tkp_model_opts mo = {.from = 0, .to = -1};
        if ((err = tkp_classes_new(classes, &cl, why, sizeof(why)))) {
            tkp_cmd_fail(ctx, err, "%s", err == TKP_ERR_NOMEM ? "out of memory" : why);
        } else {
            mo.classes = cl;
            tkp_model_init(&m, &mo);
            if (!(err = tkp_model_load(ctx, path, &m))) {
                if (!tkp_model_gpu(&m, why, sizeof(why)))
                    err = tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: no GPU time to draw: %s", path, why);
                else if ((err = tkp_heatmap_class(f, &m, "heatmap-class")))
                    tkp_cmd_fail(ctx, err, "out of memory");
            }
            tkp_model_free(&m);
            tkp_classes_free(cl);
        }
    }
    if (f != ctx->out ? fclose(f) : fflush(f)) err = err ? err : tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: write failed", out);
    return err;
}

const struct tkp_cmd tkp_cmd_heatmap = {
    .name = "heatmap",
    .brief = "an SVG heatmap of GPU time: step x kernel class, or step x position in the step",
    .usage =
        "usage: tokprof heatmap -o FILE.svg [--kind class|position] [--classes FILE] CAPTURE...\n"
        "\n"
        "Draws GPU time as an SVG heatmap. --kind class (default): one row per kernel class,\n"
        "one column per token step. --kind position: one row per position of the kernel in\n"
        "its step (its launch's ordinal: layers show as repeating bands). Long captures are\n"
        "binned to at most 1000 columns (the mean per step of each bin). Colour is the square\n"
        "root of the GPU time against the largest cell; the legend gives the scale.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "example:\n"
        "  tokprof heatmap -o classes.svg server.1234.tokprof\n",
    .run = run,
};
