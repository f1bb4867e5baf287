/* tokprof steps: one row per step (segment) of every thread — tokens, host duration, GPU span,
 * busy and idle time, launches, the class that took the most GPU time, and an anomaly flag.
 *
 * JSON (`--json`): one object {"gpu": {"available", "reason"}, "steps": [...]}; each step has
 *   the columns of model/columns.def (TKP_COLS_STEPS, in its order, each with its docs line);
 *   those marked GPU only when the capture has GPU records; null when unknown (the GPU ones of a
 *   step that was not timed: model.h, tkp_mstep_timed).
 * CSV (`--csv`): the same keys as columns, null as an empty field, a word with a comma quoted. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "base/json.h"
#include "model/model.h"
#include "model/columns.h"
#include "capture/reader.h"

struct opts {
    const char *path, *classes;
    int json, csv;
    int64_t from, to;
    uint32_t tid;
};

static int parse(int argc, char **argv, struct tkp_ctx *ctx, struct opts *o)
{
    uint64_t tid = o->tid;
    const struct tkp_opt opts[] = {
        {"--json", 'f', &o->json, 0, NULL, NULL},
        {"--csv", 'f', &o->csv, 0, NULL, NULL},
        {"--classes", 's', &o->classes, 0, "--classes needs a file", NULL},
        {"--from", 'u', &o->from, INT64_MAX, NULL, NULL},
        {"--to", 'u', &o->to, INT64_MAX, NULL, NULL},
        {"--thread", 'u', &tid, UINT32_MAX, NULL, NULL},
    };
    int err = tkp_cmd_parse(ctx, argc, argv, opts, sizeof(opts) / sizeof(*opts), &o->path);
    o->tid = (uint32_t)tid;
    if (err) return err;
    if (o->json && o->csv) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--json or --csv, not both");
    return 0;
}

static int shown(const struct opts *o, const struct tkp_mstep *s)
{
    if (o->tid && s->tid != o->tid) return 0;
    if (o->from < 0 && o->to < 0) return 1;
    if (s->kind != TKP_STEP_TOKEN) return 0;
    return (o->from < 0 || s->index >= o->from) && (o->to < 0 || s->index <= o->to);
}

/* Whether column k is shown: the local views' ones, the GPU ones only when the capture has GPU
 * records. */
static int col_shown(int k, int gpu)
{
    return tkp_col_local(&tkp_step_cols[k]) && (gpu || !tkp_col_gpu(&tkp_step_cols[k]));
}

/* One row, its columns from columns.def (tkp_cmd_cell). */
static void print_row(FILE *f, int json, const struct tkp_steprow *r, int gpu)
{
    int first = 1;
    if (json) putc('{', f);
    for (int k = 0; k < TKP_SC_COUNT; k++) {
        int64_t v = 0;
        const char *str = NULL;
        if (!col_shown(k, gpu)) continue;
        int has = tkp_steprow_cell(r, k, &v, &str);
        tkp_cmd_cell(f, json, first, &tkp_step_cols[k], has, v, str);
        first = 0;
    }
    fputs(json ? "}" : "\n", f);
}

static void us(FILE *f, int w, uint64_t ns)
{
    fprintf(f, " %*.1f", w, (double)ns / 1e3);
}

static void print_text(FILE *f, const struct opts *o, const struct tkp_steprows *x, int gpu,
                       const char *why)
{
    const struct tkp_model *m = x->m;
    int assumed = 0, untimed = 0;
    if (!gpu) fprintf(f, "GPU: not recorded (%s); GPU columns omitted\n", why);
    fprintf(f, "%5s %4s %8s %-7s %6s %9s %8s %8s %6s", "step", "seg", "tid", "kind", "tokens",
            "host_us", "gap_us", "launches", "graphs");
    if (gpu) fprintf(f, " %9s %9s %9s %7s %-13s", "span_us", "busy_us", "idle_us", "lat_us",
                     "top_class");
    fputs(" flag\n", f);
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        struct tkp_steprow r;
        if (!shown(o, s)) continue;
        tkp_steprows_at(x, i, &r);
        if (s->kind == TKP_STEP_TOKEN) fprintf(f, "%5" PRId64, s->index);
        else fprintf(f, "%5s", "-");
        fprintf(f, " %4" PRIu64 " %8u %-7s", s->seg, s->tid, tkp_mstep_kind_str(s->kind));
        if (r.tok_src == TKP_TOK_NONE) fprintf(f, " %6s", "-");
        else if (r.tok_src == TKP_TOK_ASSUMED) fprintf(f, " %5" PRIu64 "~", r.tokens), assumed = 1;
        else fprintf(f, " %6" PRIu64, r.tokens);
        us(f, 9, tkp_mstep_host_ns(s));
        if (s->has_gap) fprintf(f, " %8.1f", (double)s->gap_ns / 1e3);
        else fprintf(f, " %8s", "-");
        fprintf(f, " %8" PRIu64 " %6" PRIu64, s->launches, s->graph_launches);
        if (gpu && !tkp_mstep_timed(s)) {
            fprintf(f, " %9s %9s %9s %7s %-13s", "-", "-", "-", "-", "-"), untimed = 1;
        } else if (gpu) {
            uint64_t span = tkp_mstep_span_ns(s);
            us(f, 9, span);
            us(f, 9, s->busy_ns);
            us(f, 9, span - s->busy_ns);
            if (s->lat_n) us(f, 7, s->lat_sum_ns / s->lat_n);
            else fprintf(f, " %7s", "-");
            fprintf(f, " %-13s", r.top_class ? r.top_class : "-");
        }
        fprintf(f, " %s\n", r.anomaly ? r.anomaly : "");
    }
    if (untimed)
        fprintf(f, "- GPU columns of a step that launched work but has no GPU record: not timed "
                   "(TOKPROF_GPU=%s), unknown, not 0\n", m->gpu_mode[0] ? m->gpu_mode : "?");
    if (assumed)
        fputs("~ tokens assumed: no GEMM shapes in the capture, so a batch-1 decode loop (one "
              "token per step) is assumed\n", f);
}

static void print_machine(FILE *f, const struct opts *o, const struct tkp_steprows *x, int gpu,
                          const char *why)
{
    const struct tkp_model *m = x->m;
    if (o->json) {
        fprintf(f, "{\"gpu\":{\"available\":%s,\"reason\":", gpu ? "true" : "false");
        tkp_json_str(f, gpu ? NULL : why);
        fputs("},\"steps\":[", f);
    } else {
        for (int k = 0, n = 0; k < TKP_SC_COUNT; k++)
            if (col_shown(k, gpu)) fprintf(f, "%s%s", n++ ? "," : "", tkp_step_cols[k].name);
        putc('\n', f);
    }
    int first = 1;
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_steprow r;
        if (!shown(o, &m->steps[i])) continue;
        if (o->json && !first) putc(',', f);
        first = 0;
        tkp_steprows_at(x, i, &r);
        print_row(f, o->json, &r, gpu);
    }
    if (o->json) fputs("]}\n", f);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct opts o = {.from = -1, .to = -1};
    struct tkp_classes *cl;
    struct tkp_model m;
    struct tkp_acc *acc;
    struct tkp_steprows x;
    char why[256];
    int err = parse(argc, argv, ctx, &o);
    if (err) return err;
    if ((err = tkp_cmd_classes(ctx, o.classes, &cl))) return err;
    /* the model and, in the same pass, the library-call shapes that give tokens per step */
    if ((err = tkp_cmd_load_analysis(ctx, o.path, cl, &m, &acc))) {
        tkp_classes_free(cl);
        return err;
    }
    if (tkp_steprows_init(&x, &m, acc)) {
        err = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    } else {
        int gpu = tkp_model_gpu(&m, why, sizeof(why));
        if (o.json || o.csv) print_machine(ctx->out, &o, &x, gpu, why);
        else print_text(ctx->out, &o, &x, gpu, why);
        tkp_steprows_free(&x);
    }
    tkp_acc_free(acc);
    tkp_model_free(&m);
    tkp_classes_free(cl);
    return err;
}

const struct tkp_cmd tkp_cmd_steps = {
    .name = "steps",
    .brief = "one row per step: host time, GPU busy and idle, launches, top kernel class",
    .usage =
        "usage: tokprof steps [--json|--csv] [--from N] [--to N] [--thread TID]\n"
        "                     [--classes FILE] CAPTURE...\n"
        "\n"
        "One row per step (segment) of every thread of the capture FILE: its token index,\n"
        "tokens, host duration (begin to the sync that ended it) and gap to the next step,\n"
        "launches, and from GPU records: the GPU span (first kernel start to last end), busy\n"
        "time (the union of kernel intervals over all streams), idle time inside the span,\n"
        "launch-to-start latency and the kernel class with the most GPU time. A step is\n"
        "flagged when its host duration or GPU busy time is over 3x the median of token\n"
        "steps. Without GPU records the GPU columns are left out and the reason is printed.\n"
        "A step that launched work but has no GPU record was not timed (TOKPROF_GPU=window:N/M\n"
        "or trigger): its GPU columns are '-' (null in --json, empty in --csv), never 0.\n"
        "Tokens of a token step (tokens_source in --json/--csv), the first rule that applies:\n"
        "  unknown   a forward in two or more graph launches (vLLM's piecewise CUDA graphs):\n"
        "            its GEMMs are inside the graphs, the eager ones count sequences;\n"
        "  shapes    the largest token dimension of the step's executed cuBLAS/cuBLASLt GEMMs\n"
        "            (prompt tokens in a prefill, one per sequence in a decode step);\n"
        "  kernels   the token count its kernels' names carry (llama.cpp's ggml-cuda:\n"
        "            mul_mat_vec_q<type, N> is N tokens, 1 to 8; a mul_mat_q, more: unknown);\n"
        "  previous  a step without any GEMM (its forward replayed as a CUDA graph) in a capture\n"
        "            that has GEMM shapes: the sequences of the thread's previous known step;\n"
        "  assumed   no GEMM shapes or such kernels in the whole capture: 1 per step after the\n"
        "            thread's first (a batch-1 decode loop; marked ~ in the text), the first\n"
        "            (prefill) unknown;\n"
        "A part step's tokens (an evaluation read back in parts) are counted in its token step.\n"
        "else '-' (null): outside, warm-up, part (README \"Steps\") and open steps, and what\n"
        "none of the rules gives.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "  --from N, --to N  token steps N.. / ..N of each thread (outside segments hidden)\n"
        "  --thread TID      one OS thread\n"
        "  --classes FILE    extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "  --json, --csv     for scripts (keys: decoder/model/columns.def)\n"
        "\n"
        "example: the slowest token steps\n"
        "  tokprof steps --csv server.1234.tokprof | sort -t, -k11 -n | tail\n",
    .run = run,
};
