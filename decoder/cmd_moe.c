/* tokprof moe: tokens per expert per step, from per-expert GEMMs (HF-eager-style MoE, minillm
 * --moe), with the imbalance of each step and an SVG heatmap.
 *
 * How experts are found, per thread (all from LIB_CALL records; the weight is operand A, the
 * row-major-framework convention of libcalls.h):
 *   1. An expert weight is one that, in some step, is absent while another weight of its shape
 *      class (m, k, type) is called, or is called with fewer tokens than the step has. Dense
 *      projections see every token of every forward; lm_head (the step's last GEMM) is excluded.
 *   2. In a step, each maximal run of consecutive expert-weight calls is one MoE layer; the run's
 *      ordinal is the layer index.
 *   3. In a layer, the shape class with the fewest distinct weights holds one weight per expert
 *      (e.g. the down projection, where gate and up share a class). Its expert index is
 *      (address - lowest) / stride, stride = the gcd of the address differences: experts
 *      stored as one [E, ...] tensor (vLLM, recent HF, minillm) come out exactly; an expert never
 *      active in the whole capture below the lowest seen one shifts the indices (--experts E
 *      only pads the width).
 * Fused MoE kernels (vLLM's fused_moe_kernel, grouped GEMMs) hide the load from the host; with
 * GPU time their duration against the step's tokens is the only view (not done here). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "err.h"
#include "libcalls.h"
#include "multireader.h"
#include "reader.h"
#include "sort.h"

#define MAX_LAYERS 512
#define MAX_EXPERTS 1024

struct wt { /* one weight */
    uint64_t ptr, m, k;
    int32_t at;
    uint32_t steps; /* steps it appears in */
    int expert;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

struct moe {
    struct wt *w;
    uint32_t nw;
    /* per layer: the expert class and its lowest address and stride */
    uint64_t cls_m[MAX_LAYERS], cls_k[MAX_LAYERS], base[MAX_LAYERS], stride[MAX_LAYERS];
    uint32_t nexp[MAX_LAYERS];
    uint32_t layers;
};

static struct wt *find_w(struct moe *e, uint64_t ptr)
{
    for (uint32_t i = 0; i < e->nw; i++) /* weights are hundreds: linear is fine */
        if (e->w[i].ptr == ptr) return &e->w[i];
    return NULL;
}

static int usable(const struct tkp_lstep *s, const struct tkp_call *c, uint32_t j)
{
    return tkp_call_executed(c) && c->batch <= 1 && j + 1 < s->first + s->ncalls;
}

/* Step 1: which weights are experts (one thread's steps [s0, s1)). */
static int find_experts(struct tkp_libmodel *m, uint32_t s0, uint32_t s1, struct moe *e)
{
    for (uint32_t i = s0; i < s1; i++) {
        const struct tkp_lstep *s = &m->steps[i];
        for (uint32_t j = s->first; j < s->first + s->ncalls; j++) {
            const struct tkp_call *c = &m->calls[j];
            if (!usable(s, c, j)) continue;
            struct wt *w = find_w(e, c->a_ptr);
            if (!w) {
                struct wt *q = realloc(e->w, (e->nw + 1) * sizeof(*q));
                if (!q) return TKP_ERR_NOMEM;
                e->w = q;
                w = &e->w[e->nw++];
                *w = (struct wt){c->a_ptr, c->m, c->k, c->atype, 0, 0};
            }
            w->steps++;
            if (c->tokens < s->tokens) w->expert = 1;
        }
    }
    /* absent while its class was present: count class-steps */
    for (uint32_t a = 0; a < e->nw; a++) {
        uint32_t class_steps = 0;
        for (uint32_t i = s0; i < s1; i++) {
            const struct tkp_lstep *s = &m->steps[i];
            for (uint32_t j = s->first; j < s->first + s->ncalls; j++) {
                const struct tkp_call *c = &m->calls[j];
                if (usable(s, c, j) && c->m == e->w[a].m && c->k == e->w[a].k &&
                    c->atype == e->w[a].at) {
                    class_steps++;
                    break;
                }
            }
        }
        if (e->w[a].steps < class_steps) e->w[a].expert = 1;
    }
    return 0;
}

/* Calls the visitor for every expert call with its layer (run ordinal in its step). */
typedef void visit_fn(void *ctx, uint32_t step_idx, uint32_t layer, const struct tkp_call *c);
static void walk(struct tkp_libmodel *m, uint32_t s0, uint32_t s1, struct moe *e, visit_fn *fn,
                 void *ctx)
{
    for (uint32_t i = s0; i < s1; i++) {
        const struct tkp_lstep *s = &m->steps[i];
        int in_run = 0;
        uint32_t layer = 0;
        for (uint32_t j = s->first; j < s->first + s->ncalls; j++) {
            const struct tkp_call *c = &m->calls[j];
            if (!usable(s, c, j)) continue;
            struct wt *w = find_w(e, c->a_ptr);
            if (w && w->expert) {
                if (!in_run && layer < MAX_LAYERS) in_run = 1;
                fn(ctx, i, layer, c);
            } else if (in_run) {
                in_run = 0, layer++;
            }
        }
    }
}

/* Step 3, pass 1: per layer and class, the distinct weights */
struct cls_ctx {
    struct moe *e;
    uint64_t *flat; /* per layer, up to cap distinct weights */
    uint32_t *nflat;
    uint32_t cap;
};

static void collect(void *p, uint32_t si, uint32_t layer, const struct tkp_call *c)
{
    (void)si;
    struct cls_ctx *x = p;
    if (layer >= MAX_LAYERS) return;
    if (layer + 1 > x->e->layers) x->e->layers = layer + 1;
    uint64_t *l = x->flat + (size_t)layer * x->cap;
    for (uint32_t i = 0; i < x->nflat[layer]; i++)
        if (l[i] == c->a_ptr) return;
    if (x->nflat[layer] < x->cap) l[x->nflat[layer]++] = c->a_ptr;
}

static void layer_classes(struct moe *e, uint32_t layer, const uint64_t *ptrs, uint32_t n)
{
    /* the class with the fewest distinct weights */
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const struct wt *w = NULL;
        for (uint32_t a = 0; a < e->nw; a++)
            if (e->w[a].ptr == ptrs[i]) w = &e->w[a];
        uint32_t cnt = 0;
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t a = 0; a < e->nw; a++)
                if (e->w[a].ptr == ptrs[j] && e->w[a].m == w->m && e->w[a].k == w->k) cnt++;
        if (cnt < best || (cnt == best)) /* ties: the later class (the down projection) */
            best = cnt, e->cls_m[layer] = w->m, e->cls_k[layer] = w->k;
    }
    uint64_t v[2 * MAX_EXPERTS];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < 2 * MAX_EXPERTS; i++) {
        const struct wt *w = find_w(e, ptrs[i]);
        if (w->m == e->cls_m[layer] && w->k == e->cls_k[layer]) v[k++] = ptrs[i];
    }
    tkp_sort(v, k, sizeof(*v), cmp_u64);
    uint64_t g = 0;
    for (uint32_t i = 1; i < k; i++) g = gcd(g, v[i] - v[0]);
    e->base[layer] = k ? v[0] : 0;
    e->stride[layer] = g;
    e->nexp[layer] = g ? (uint32_t)((v[k - 1] - v[0]) / g + 1) : k;
    if (e->nexp[layer] > MAX_EXPERTS) e->nexp[layer] = MAX_EXPERTS;
}

static int expert_of(const struct moe *e, uint32_t layer, const struct tkp_call *c)
{
    if (c->m != e->cls_m[layer] || c->k != e->cls_k[layer]) return -1;
    if (!e->stride[layer]) return 0;
    uint64_t d = c->a_ptr - e->base[layer];
    if (d % e->stride[layer]) return -1;
    uint64_t i = d / e->stride[layer];
    return i < e->nexp[layer] ? (int)i : -1;
}

struct load_ctx {
    struct moe *e;
    uint32_t s0, width;
    uint64_t *load; /* [step - s0][layer][width] */
};

static void fill(void *p, uint32_t si, uint32_t layer, const struct tkp_call *c)
{
    struct load_ctx *x = p;
    if (layer >= x->e->layers) return;
    int ex = expert_of(x->e, layer, c);
    if (ex < 0 || (uint32_t)ex >= x->width) return;
    x->load[((size_t)(si - x->s0) * x->e->layers + layer) * x->width + (uint32_t)ex] = c->tokens;
}

static void imbalance(const uint64_t *l, uint32_t n, double *maxmean, double *cv)
{
    double sum = 0, mx = 0, sq = 0;
    for (uint32_t i = 0; i < n; i++) sum += (double)l[i], mx = l[i] > mx ? (double)l[i] : mx;
    double mean = n ? sum / n : 0;
    for (uint32_t i = 0; i < n; i++) sq += ((double)l[i] - mean) * ((double)l[i] - mean);
    *maxmean = mean > 0 ? mx / mean : 0;
    *cv = mean > 0 ? sqrt(sq / n) / mean : 0;
}

static void svg(FILE *f, const struct tkp_libmodel *m, const struct load_ctx *x, uint32_t s1)
{
    uint32_t L = x->e->layers, W = x->width, rows = s1 - x->s0, cell = 10, left = 60, top = 30;
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

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path = NULL, *svg_path = NULL;
    int json = 0, err;
    uint32_t experts = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--svg") && i + 1 < argc) svg_path = argv[++i];
        else if (!strcmp(argv[i], "--experts") && i + 1 < argc) experts = (uint32_t)atoi(argv[++i]);
        else if (argv[i][0] == '-' && argv[i][1])
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "unknown option '%s'", argv[i]);
        else if (path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one capture at a time");
        else path = argv[i];
    }
    if (!path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");
    if (experts > MAX_EXPERTS) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--experts: at most 1024");
    struct tkp_reader *r;
    struct tkp_libmodel m;
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
        for (s1 = s0; s1 < m.nsteps && m.steps[s1].thread == m.steps[s0].thread; s1++) {}
        struct moe e;
        memset(&e, 0, sizeof(e));
        if ((err = find_experts(&m, s0, s1, &e))) break;
        uint32_t cap = 2 * MAX_EXPERTS;
        struct cls_ctx cc = {&e, calloc((size_t)MAX_LAYERS * cap, sizeof(uint64_t)),
                             calloc(MAX_LAYERS, sizeof(uint32_t)), cap};
        struct load_ctx lc = {&e, s0, 0, NULL};
        if (!cc.flat || !cc.nflat) err = TKP_ERR_NOMEM;
        if (!err) walk(&m, s0, s1, &e, collect, &cc);
        for (uint32_t l = 0; !err && l < e.layers; l++) {
            layer_classes(&e, l, cc.flat + (size_t)l * cap, cc.nflat[l]);
            if (e.nexp[l] > lc.width) lc.width = e.nexp[l];
        }
        if (experts > lc.width) lc.width = experts;
        if (!err && e.layers && lc.width) {
            lc.load = calloc((size_t)(s1 - s0) * e.layers * lc.width, sizeof(uint64_t));
            if (!lc.load) err = TKP_ERR_NOMEM;
            else walk(&m, s0, s1, &e, fill, &lc);
        }
        if (!err && lc.load) {
            if (json) fprintf(f, "%s{\"thread\":%u,\"layers\":%u,\"experts\":%u,\"steps\":[",
                              any ? "," : "", m.steps[s0].thread, e.layers, lc.width);
            else fprintf(f, "thread %u: %u MoE layers, %u experts\n%6s %-8s %6s %9s %6s  %s\n",
                         m.steps[s0].thread, e.layers, lc.width, "step", "kind", "tokens",
                         "max/mean", "cv", "tokens per expert, per layer");
            any = 1;
            for (uint32_t i = s0; i < s1; i++) {
                const struct tkp_lstep *s = &m.steps[i];
                const uint64_t *row = lc.load + (size_t)(i - s0) * e.layers * lc.width;
                double mm = 0, cv = 0, mmw = 0, cvw = 0;
                for (uint32_t l = 0; l < e.layers; l++) {
                    double a, b;
                    imbalance(row + (size_t)l * lc.width, lc.width, &a, &b);
                    mm += a / e.layers, cv += b / e.layers;
                    mmw = a > mmw ? a : mmw, cvw = b > cvw ? b : cvw;
                }
                if (json) {
                    fprintf(f, "%s{\"step\":%" PRIu64 ",\"kind\":\"%s\",\"tokens\":%" PRIu64
                               ",\"max_over_mean\":%.4f,\"cv\":%.4f,\"worst_max_over_mean\":%.4f,"
                               "\"worst_cv\":%.4f,\"expert_load\":[",
                            i > s0 ? "," : "", s->step, tkp_step_class_str(s->kind), s->tokens,
                            mm, cv, mmw, cvw);
                    for (uint32_t l = 0; l < e.layers; l++) {
                        fputs(l ? ",[" : "[", f);
                        for (uint32_t x = 0; x < lc.width; x++)
                            fprintf(f, "%s%" PRIu64, x ? "," : "", row[(size_t)l * lc.width + x]);
                        fputc(']', f);
                    }
                    fputs("]}", f);
                } else {
                    fprintf(f, "%6" PRIu64 " %-8s %6" PRIu64 " %9.2f %6.2f ", s->step,
                            tkp_step_class_str(s->kind), s->tokens, mm, cv);
                    for (uint32_t l = 0; l < e.layers; l++) {
                        fputs(" [", f);
                        for (uint32_t x = 0; x < lc.width; x++)
                            fprintf(f, "%s%" PRIu64, x ? " " : "", row[(size_t)l * lc.width + x]);
                        fputc(']', f);
                    }
                    fputc('\n', f);
                }
            }
            if (json) fputs("]}", f);
            if (svg_path) {
                FILE *sf = fopen(svg_path, "w");
                if (!sf) err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: cannot write", svg_path);
                else svg(sf, &m, &lc, s1), fclose(sf), svg_path = NULL; /* first thread only */
            }
        }
        free(lc.load);
        free(cc.flat);
        free(cc.nflat);
        free(e.w);
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
        "variation (mean over layers; --json also the worst layer). Experts are numbered from\n"
        "their weights' addresses; an expert never used in the capture is not visible.\n"
        "Fused MoE kernels (vLLM fused_moe_kernel) hide the load from the host.\n"
        "\n"
        "  --experts E  print at least E experts per layer (pads with zeros)\n"
        "  --svg FILE   a heatmap, step x (layer, expert), of the first thread\n"
        "  --json       one JSON object\n"
        "\n"
        "example: tokprof moe --experts 8 --svg load.svg server.1234.tokprof\n",
    .run = run,
};
