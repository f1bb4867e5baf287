/* tokprof moe: tokens per expert per step, from per-expert GEMMs (HF-eager-style MoE, minillm
 * --moe), with the imbalance of each step, per-expert totals and an SVG heatmap. How experts are
 * found and which GEMMs are an expert's: libcalls.h (tkp_moe_find), shared with
 * `tokprof heatmap --kind expert`. When the expert GEMMs are fused or grouped kernels
 * (moe_fused.h), the load per expert is not observable from the host: no expert is reported
 * (library calls around them, the router or a shared expert, would pass for experts), and the
 * fused kernels' time per step and its trend are shown instead.
 *
 * JSON (`--json`): {"threads": [{thread, layers, experts, steps: [{step, kind, tokens,
 * max_over_mean, cv, worst_max_over_mean, worst_cv, expert_load: [[tokens per expert] per
 * layer]}], expert_totals: [{expert, tokens, calls, gpu_ns, gpu_calls (the calls gpu_ns is the
 * time of: those of timed steps; both null without GPU records)}],
 * hottest_expert (the most tokens; the lowest index on a tie)}]}. With fused expert kernels:
 * {"threads": [], "fused": {kernels: [names], per_expert_observable: false, launches, gpu_ns
 * (null without GPU records), threads: [{thread, steps: [{step, launches, kernels, gpu_ns}],
 * gpu_ns_per_step: {mean, p50, max} | null, trend: {first_quarter_mean_ns, last_quarter_mean_ns,
 * change} | null}]}}. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "base/json.h"
#include "base/sort.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "model/libcalls.h"
#include "model/moe.h"
#include "model/moe_fused.h"

static void imbalance(const uint64_t *l, uint32_t n, double *maxmean, double *cv)
{
    double sum = 0, mx = 0, sq = 0;
    for (uint32_t i = 0; i < n; i++) sum += (double)l[i], mx = l[i] > mx ? (double)l[i] : mx;
    double mean = n ? sum / n : 0;
    for (uint32_t i = 0; i < n; i++) sq += ((double)l[i] - mean) * ((double)l[i] - mean);
    *maxmean = mean > 0 ? mx / mean : 0;
    *cv = mean > 0 ? sqrt(sq / n) / mean : 0;
}

static void svg(FILE *f, const struct tkp_libmodel *m, const struct tkp_moe *x)
{
    uint32_t L = x->layers, W = x->width, rows = x->s1 - x->s0, cell = 10, left = 60, top = 30;
    uint64_t mx = 1;
    for (size_t i = 0; i < (size_t)rows * L * W; i++) mx = x->load[i] > mx ? x->load[i] : mx;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
               "font-family=\"monospace\" font-size=\"9\">\n",
            left + L * (W * cell + 4) + 10, top + rows * cell + 20);
    fprintf(f, "<text x=\"2\" y=\"12\">tokens per expert (columns: layer x expert; rows: steps); "
               "max %" PRIu64 "</text>\n", mx);
    for (uint32_t r = 0; r < rows; r++) {
        const struct tkp_lstep *s = &m->steps[x->s0 + r];
        fprintf(f, "<text x=\"2\" y=\"%u\">%" PRIu64 " %c</text>\n", top + r * cell + 8, s->step,
                tkp_step_class_str(s->kind)[0]);
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t c = 0; c < W; c++) {
                uint64_t v = x->load[((size_t)r * L + l) * W + c];
                int shade = 255 - (int)(255.0 * (double)v / (double)mx);
                fprintf(f, "<rect x=\"%u\" y=\"%u\" width=\"%u\" height=\"%u\" "
                           "fill=\"rgb(255,%d,%d)\"><title>step %" PRIu64 " layer %u expert %u: "
                           "%" PRIu64 "</title></rect>\n",
                        left + l * (W * cell + 4) + c * cell, top + r * cell, cell - 1, cell - 1,
                        shade, shade, s->step, l, c, v);
            }
    }
    fputs("</svg>\n", f);
}

/* Per-expert totals over the thread's steps: tokens (all layers), calls and GPU time. */
static void totals(const struct tkp_moe *x, uint64_t *tok, uint64_t *calls, uint64_t *ns)
{
    memset(tok, 0, x->width * sizeof(*tok));
    memset(calls, 0, x->width * sizeof(*calls));
    memset(ns, 0, x->width * sizeof(*ns));
    for (uint32_t r = 0; r < x->s1 - x->s0; r++)
        for (uint32_t c = 0; c < x->width; c++) {
            for (uint32_t l = 0; l < x->layers; l++)
                tok[c] += x->load[((size_t)r * x->layers + l) * x->width + c];
            calls[c] += x->calls[(size_t)r * x->width + c];
            ns[c] += x->ns[(size_t)r * x->width + c];
        }
}

static void print_totals(FILE *f, int json, const struct tkp_moe *x, const uint64_t *tok,
                         const uint64_t *calls, const uint64_t *ns)
{
    uint32_t hot = 0;
    uint64_t all = 0;
    for (uint32_t c = 0; c < x->width; c++) {
        if (tok[c] > tok[hot]) hot = c;
        all += tok[c];
    }
    if (json) {
        fputs(",\"expert_totals\":[", f);
        for (uint32_t c = 0; c < x->width; c++) {
            fprintf(f, "%s{\"expert\":%u,\"tokens\":%" PRIu64 ",\"calls\":%" PRIu64 ",\"gpu_ns\":",
                    c ? "," : "", c, tok[c], calls[c]);
            /* gpu_calls: the calls of the steps where the expert's GEMMs have GPU time — gpu_ns
             * is theirs alone when only some steps are timed (TOKPROF_GPU=window:N/M) */
            uint64_t timed = 0;
            for (uint32_t r = 0; r < x->s1 - x->s0; r++)
                if (x->ns[(size_t)r * x->width + c]) timed += x->calls[(size_t)r * x->width + c];
            if (x->has_gpu) fprintf(f, "%" PRIu64 ",\"gpu_calls\":%" PRIu64 "}", ns[c], timed);
            else fputs("null,\"gpu_calls\":null}", f);
        }
        fprintf(f, "],\"hottest_expert\":%u", hot);
        return;
    }
    fprintf(f, "%6s %9s %7s %10s\n", "expert", "tokens", "calls", x->has_gpu ? "gpu_ms" : "");
    for (uint32_t c = 0; c < x->width; c++) {
        fprintf(f, "%6u %9" PRIu64 " %7" PRIu64, c, tok[c], calls[c]);
        if (x->has_gpu) fprintf(f, " %10.3f", (double)ns[c] / 1e6);
        fputc('\n', f);
    }
    fprintf(f, "hottest expert %u: %.1f%% of the tokens routed (uniform: %.1f%%)\n", hot,
            all ? 100.0 * (double)tok[hot] / (double)all : 0.0, 100.0 / x->width);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One thread's fused kernel rows [a, b): the rows, then GPU time per step and its trend (the mean
 * of the first quarter of the steps against the last quarter's; at least 4 steps). */
static int fused_thread(FILE *f, int json, const struct tkp_fused *x, size_t a, size_t b,
                        int first)
{
    size_t rows = b - a, n = 0;
    int gpu = x->kernels > 0;
    uint64_t *v = malloc((rows ? rows : 1) * sizeof(*v)), sum = 0, lo = 0, hi = 0;
    if (!v) return TKP_ERR_NOMEM;
    /* the figures are over the timed steps (GPU records joined): a step not timed
     * (TOKPROF_GPU=window:N/M) is unknown, not a 0 in the mean, the median or the trend */
    for (size_t i = 0; i < rows; i++)
        if (x->steps[a + i].kernels) v[n++] = x->steps[a + i].gpu_ns;
    size_t q = n / 4;
    for (size_t i = 0; i < n; i++) {
        sum += v[i];
        if (i < q) lo += v[i];
        if (i >= n - q) hi += v[i];
    }
    double lo_m = q ? (double)lo / (double)q : 0, hi_m = q ? (double)hi / (double)q : 0;
    double change = lo_m > 0 ? hi_m / lo_m - 1 : 0;
    tkp_sort(v, n, sizeof(*v), cmp_u64);
    double mean = n ? (double)sum / (double)n : 0;
    uint64_t p50 = n ? v[(n - 1) / 2] : 0, mx = n ? v[n - 1] : 0;
    free(v);
    uint32_t thread = x->steps[a].thread;
    if (json) {
        fprintf(f, "%s{\"thread\":%u,\"steps\":[", first ? "" : ",", thread);
        for (size_t i = a; i < b; i++) {
            const struct tkp_fused_step *s = &x->steps[i];
            fprintf(f, "%s{\"step\":%" PRIu64 ",\"launches\":%" PRIu64 ",\"kernels\":%" PRIu64
                       ",\"gpu_ns\":", i > a ? "," : "", s->step, s->launches, s->kernels);
            if (gpu && (s->kernels || !s->launches)) fprintf(f, "%" PRIu64 "}", s->gpu_ns);
            else fputs("null}", f);
        }
        fputs("],\"gpu_ns_per_step\":", f);
        if (gpu && n) fprintf(f, "{\"mean\":%.1f,\"p50\":%" PRIu64 ",\"max\":%" PRIu64 "}", mean,
                              p50, mx);
        else fputs("null", f);
        fputs(",\"trend\":", f);
        if (gpu && q) fprintf(f, "{\"first_quarter_mean_ns\":%.1f,\"last_quarter_mean_ns\":%.1f,"
                                 "\"change\":%.4f}}", lo_m, hi_m, change);
        else fputs("null}", f);
        return 0;
    }
    fprintf(f, "%sthread %u: %zu steps with fused expert kernels\n%6s %9s %8s %10s\n",
            first ? "" : "\n", thread, n, "step", "launches", "kernels", gpu ? "gpu_us" : "");
    for (size_t i = a; i < b; i++) {
        const struct tkp_fused_step *s = &x->steps[i];
        fprintf(f, "%6" PRIu64 " %9" PRIu64 " %8" PRIu64, s->step, s->launches, s->kernels);
        if (gpu && (s->kernels || !s->launches)) fprintf(f, " %10.1f", (double)s->gpu_ns / 1e3);
        else if (gpu) fprintf(f, " %10s", "-"); /* not timed */
        fputc('\n', f);
    }
    if (!gpu) {
        fputs("no GPU records: their GPU time needs TOKPROF_GPU (always, window:N/M)\n", f);
        return 0;
    }
    fprintf(f, "GPU time per step: mean %.1f us, p50 %.1f, max %.1f\n", mean / 1e3,
            (double)p50 / 1e3, (double)mx / 1e3);
    if (q)
        fprintf(f, "trend: first quarter of the steps %.1f us per step, last quarter %.1f (%+.1f%%)\n",
                lo_m / 1e3, hi_m / 1e3, 100.0 * change);
    return 0;
}

/* The view of a capture whose expert GEMMs are fused kernels. */
static int fused_view(FILE *f, int json, const struct tkp_fused *x)
{
    int err = 0;
    if (json) {
        fputs("{\"threads\":[],\"fused\":{\"kernels\":[", f);
        for (size_t i = 0; i < x->nnames; i++) {
            if (i) fputc(',', f);
            tkp_json_str(f, x->names[i]);
        }
        fprintf(f, "],\"per_expert_observable\":false,\"launches\":%" PRIu64 ",\"gpu_ns\":",
                x->launches);
        if (x->kernels) fprintf(f, "%" PRIu64, x->gpu_ns);
        else fputs("null", f);
        fputs(",\"threads\":[", f);
    } else {
        fputs("MoE expert GEMMs run as fused or grouped kernels (", f);
        char base[128];
        for (size_t i = 0; i < x->nnames; i++)
            fprintf(f, "%s%s", i ? ", " : "", tkp_fused_display_name(x->names[i], base, sizeof(base)));
        fputs("):\nthe tokens each expert received are routed on the GPU inside them, so per-expert"
              " load\nis not observable from the host; their launches and GPU time per step:\n\n", f);
    }
    for (size_t a = 0, b; a < x->nsteps && !err; a = b) {
        for (b = a + 1; b < x->nsteps && x->steps[b].thread == x->steps[a].thread; b++) {}
        err = fused_thread(f, json, x, a, b, a == 0);
    }
    if (json) fputs("]}}\n", f);
    return err;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *arg[2], *path, *svg_path = NULL;
    int json = 0, err;
    uint64_t nexp = 0;
    size_t n;
    const struct tkp_opt opts[] = {{"--json", 'f', &json, 0, NULL, NULL},
                                   {"--svg", 's', &svg_path, 0, NULL, NULL},
                                   {"--experts", 'u', &nexp, UINT32_MAX, NULL, NULL}};
    if ((err = tkp_cmd_parse_args(ctx, argc, argv, opts, 3, arg, 2, &n))) return err;
    if (!n) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");
    if (n > 1) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one capture at a time ('%s')", arg[1]);
    path = arg[0];
    if (nexp > TKP_MOE_MAX_EXPERTS)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--experts: at most %d", TKP_MOE_MAX_EXPERTS);
    uint32_t experts = (uint32_t)nexp;
    struct tkp_reader *r;
    struct tkp_libmodel m;
    struct tkp_fused fx;
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    int fused = 0;
    if ((err = tkp_fused_load(r, &fx))) {
        err = tkp_cmd_fail(ctx, err, "%s: out of memory", path);
    } else if ((fused = fx.nnames > 0)) {
        tkp_cmd_warn_reader(ctx, path, r);
        if ((err = fused_view(ctx->out, json, &fx))) err = tkp_cmd_fail(ctx, err, "out of memory");
        else if (svg_path) ctx->warn(ctx, "--svg: no expert load to draw (fused expert kernels)");
    }
    tkp_fused_free(&fx);
    tkp_reader_close(r);
    if (err || fused) return err;
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    if (tkp_reader_is_merged(r)) { /* experts are told apart by weight addresses, per process */
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "%s: one process at a time (these captures are of several)", path);
    }
    if ((err = tkp_libmodel_load(r, &m))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "%s: out of memory", path);
    }
    tkp_cmd_warn_reader(ctx, path, r);
    if (m.token_dim_m) ctx->warn(ctx, "tokens are cuBLAS's m here: the weight operand is B, "
                                      "which the capture does not record; no expert view");
    FILE *f = ctx->out;
    if (json) fputs("{\"threads\":[", f);
    int any = 0;
    for (uint32_t s0 = 0, s1; s0 < m.nsteps && !m.token_dim_m; s0 = s1) {
        s1 = tkp_libmodel_thread_end(&m, s0);
        struct tkp_moe x;
        if ((err = tkp_moe_find(&m, s0, s1, experts, &x))) {
            tkp_cmd_fail(ctx, err, "out of memory");
            break;
        }
        if (!x.layers) continue;
        uint64_t *tot = calloc(3 * (size_t)x.width, sizeof(*tot));
        if (!tot) {
            tkp_moe_free(&x);
            err = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
            break;
        }
        if (json) fprintf(f, "%s{\"thread\":%u,\"layers\":%u,\"experts\":%u,\"steps\":[",
                          any ? "," : "", x.thread, x.layers, x.width);
        else fprintf(f, "%sthread %u: %u MoE layers, %u experts\n%6s %-8s %6s %9s %6s  %s\n",
                     any ? "\n" : "", x.thread, x.layers, x.width, "step", "kind", "tokens",
                     "max/mean", "cv", "tokens per expert, per layer");
        any = 1;
        for (uint32_t i = s0; i < s1; i++) {
            const struct tkp_lstep *s = &m.steps[i];
            const uint64_t *row = x.load + (size_t)(i - s0) * x.layers * x.width;
            double mm = 0, cv = 0, mmw = 0, cvw = 0;
            for (uint32_t l = 0; l < x.layers; l++) {
                double a, b;
                imbalance(row + (size_t)l * x.width, x.width, &a, &b);
                mm += a / x.layers, cv += b / x.layers;
                mmw = a > mmw ? a : mmw, cvw = b > cvw ? b : cvw;
            }
            if (json) {
                fprintf(f, "%s{\"step\":%" PRIu64 ",\"kind\":\"%s\",\"tokens\":%" PRIu64
                           ",\"max_over_mean\":%.4f,\"cv\":%.4f,\"worst_max_over_mean\":%.4f,"
                           "\"worst_cv\":%.4f,\"expert_load\":[",
                        i > s0 ? "," : "", s->step, tkp_step_class_str(s->kind), s->tokens, mm,
                        cv, mmw, cvw);
                for (uint32_t l = 0; l < x.layers; l++) {
                    fputs(l ? ",[" : "[", f);
                    for (uint32_t c = 0; c < x.width; c++)
                        fprintf(f, "%s%" PRIu64, c ? "," : "", row[(size_t)l * x.width + c]);
                    fputc(']', f);
                }
                fputs("]}", f);
            } else {
                fprintf(f, "%6" PRIu64 " %-8s %6" PRIu64 " %9.2f %6.2f ", s->step,
                        tkp_step_class_str(s->kind), s->tokens, mm, cv);
                for (uint32_t l = 0; l < x.layers; l++) {
                    fputs(" [", f);
                    for (uint32_t c = 0; c < x.width; c++)
                        fprintf(f, "%s%" PRIu64, c ? " " : "", row[(size_t)l * x.width + c]);
                    fputc(']', f);
                }
                fputc('\n', f);
            }
        }
        if (json) fputc(']', f);
        totals(&x, tot, tot + x.width, tot + 2 * (size_t)x.width);
        print_totals(f, json, &x, tot, tot + x.width, tot + 2 * (size_t)x.width);
        if (json) fputc('}', f);
        free(tot);
        if (svg_path) {
            FILE *sf = fopen(svg_path, "w");
            if (!sf) err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: cannot write", svg_path);
            else svg(sf, &m, &x), fclose(sf), svg_path = NULL; /* first thread only */
        }
        tkp_moe_free(&x);
        if (err) break;
    }
    if (json) fputs("]}\n", f);
    else if (!any) fputs("no per-expert GEMMs in this capture (fused MoE kernels hide the load)\n", f);
    tkp_libmodel_free(&m);
    tkp_reader_close(r);
    return err;
}

const struct tkp_cmd tkp_cmd_moe = {
    .name = "moe",
    .brief = "MoE expert load per step from per-expert GEMMs; imbalance; SVG heatmap",
    .usage =
        "usage: tokprof moe [--experts E] [--json] [--svg FILE] CAPTURE\n"
        "\n"
        "Finds the per-expert GEMMs of Mixture-of-Experts layers (one cuBLAS call per active\n"
        "expert, as in HF eager or minillm --moe) and prints, per step, the tokens each expert\n"
        "received in each MoE layer, with the imbalance: max/mean and the coefficient of\n"
        "variation (mean over layers; --json also the worst layer). Then, per expert, the\n"
        "tokens routed to it (all layers), its GEMM calls (gate, up, down...) and their GPU\n"
        "time, and the hottest expert (the most tokens). Experts are numbered from their\n"
        "weights' addresses; an expert never used in the capture is not visible.\n"
        "Fused or grouped expert kernels (vLLM fused_moe_kernel, CUTLASS grouped GEMMs such as\n"
        "torch._grouped_mm) route the tokens on the GPU: per-expert load is not observable from\n"
        "the host there, so no expert is reported; the fused kernels' launches and GPU time per\n"
        "step and the trend of that time (first quarter of the steps against the last) are.\n"
        "\n"
        "  --experts E  print at least E experts per layer (pads with zeros)\n"
        "  --svg FILE   a heatmap, step x (layer, expert), of the first thread (tokens; GPU\n"
        "               time per expert: tokprof heatmap --kind expert)\n"
        "  --json       one JSON object\n"
        "\n"
        "example: tokprof moe --experts 8 --svg load.svg server.1234.tokprof\n",
    .run = run,
};
