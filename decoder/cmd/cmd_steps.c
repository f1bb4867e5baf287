/* tokprof steps: one row per step (segment) of every thread — tokens, host duration, GPU span,
 * busy and idle time, launches, the class that took the most GPU time, and an anomaly flag.
 *
 * JSON (`--json`): one object {"gpu": {"available", "reason"}, "steps": [...]}; each step has
 *   thread, tid, seg, step (token index on the thread, null outside), kind ("token", "outside",
 *   "warmup": README "Steps", "open": its STEP record is missing), tokens (null when unknown)
 *   and tokens_source ("shapes", "previous", "assumed": analysis.h, tkp_step_tokens; null when
 *   unknown), begin_ns,
 *   mark_ns, end_ns, host_ns, gap_ns (to the thread's next step, null for its last), launches,
 *   graph_launches, copies, anomaly (null, "host", "gpu" or "host,gpu"),
 *   and only when the capture has GPU records: gpu_kernels, gpu_copies, span_ns, busy_ns,
 *   idle_ns, copy_ns, latency_mean_ns, latency_max_ns (launch -> GPU start; null when no kernel
 *   was paired), top_class (null without kernels); last, pid (the process: several captures
 *   or a directory are merged, multireader.h; `thread` is then unique across processes).
 * CSV (`--csv`): the same keys as columns, null as an empty field. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "base/json.h"
#include "model/model.h"
#include "model/norms.h"
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

/* One value, as JSON or CSV: numbers, or null (JSON) / empty (CSV) when has is 0. */
static void num(FILE *f, int json, const char *key, int has, int64_t v, int first)
{
    if (json) fprintf(f, "%s\"%s\":", first ? "" : ",", key);
    else if (!first) putc(',', f);
    if (has) fprintf(f, "%" PRId64, v);
    else if (json) fputs("null", f);
}

static void str(FILE *f, int json, const char *key, const char *v)
{
    if (json) {
        fprintf(f, ",\"%s\":", key);
        tkp_json_str(f, v);
    } else {
        putc(',', f);
        if (v) fputs(v, f); /* class and kind words: no commas or quotes */
    }
}

static const char *const keys_host[] = {"thread", "tid", "seg", "step", "kind", "tokens",
                                        "tokens_source", "begin_ns", "mark_ns", "end_ns", "host_ns", "gap_ns",
                                        "launches", "graph_launches", "copies", "anomaly"};
static const char *const keys_gpu[] = {"gpu_kernels", "gpu_copies", "span_ns", "busy_ns",
                                       "idle_ns", "copy_ns", "latency_mean_ns", "latency_max_ns",
                                       "top_class"};

struct toks { /* tokens per step (analysis.h: tkp_step_tokens), by model step index */
    uint64_t *n;
    int *src;
};

static void print_row(FILE *f, int json, const struct tkp_model *m, const struct tkp_norms *nr,
                      const struct toks *tk, size_t i, int gpu)
{
    const struct tkp_mstep *s = &m->steps[i];
    int tok = s->kind == TKP_STEP_TOKEN, closed = s->kind != TKP_MSTEP_OPEN;
    if (json) putc('{', f);
    num(f, json, "thread", 1, s->thread, 1);
    num(f, json, "tid", 1, s->tid, 0);
    num(f, json, "seg", 1, (int64_t)s->seg, 0);
    num(f, json, "step", tok, s->index, 0);
    str(f, json, "kind", tkp_mstep_kind_str(s->kind));
    num(f, json, "tokens", tk->src[i] != TKP_TOK_NONE, (int64_t)tk->n[i], 0);
    str(f, json, "tokens_source", tkp_tok_src_str(tk->src[i]));
    num(f, json, "begin_ns", closed, (int64_t)s->begin_ns, 0);
    num(f, json, "mark_ns", closed, (int64_t)s->mark_ns, 0);
    num(f, json, "end_ns", closed, (int64_t)s->end_ns, 0);
    num(f, json, "host_ns", closed, (int64_t)tkp_mstep_host_ns(s), 0);
    num(f, json, "gap_ns", s->has_gap, s->gap_ns, 0);
    num(f, json, "launches", 1, (int64_t)s->launches, 0);
    num(f, json, "graph_launches", 1, (int64_t)s->graph_launches, 0);
    num(f, json, "copies", 1, (int64_t)s->copies, 0);
    str(f, json, "anomaly", tkp_mstep_anomaly(nr, s));
    if (gpu) {
        uint64_t span = tkp_mstep_span_ns(s);
        int top = tkp_mstep_top_class(m, s);
        num(f, json, "gpu_kernels", 1, (int64_t)s->gpu_kernels, 0);
        num(f, json, "gpu_copies", 1, (int64_t)s->gpu_copies, 0);
        num(f, json, "span_ns", 1, (int64_t)span, 0);
        num(f, json, "busy_ns", 1, (int64_t)s->busy_ns, 0);
        num(f, json, "idle_ns", 1, (int64_t)(span - s->busy_ns), 0);
        num(f, json, "copy_ns", 1, (int64_t)s->copy_ns, 0);
        num(f, json, "latency_mean_ns", s->lat_n > 0,
            s->lat_n ? (int64_t)(s->lat_sum_ns / s->lat_n) : 0, 0);
        num(f, json, "latency_max_ns", s->lat_n > 0, (int64_t)s->lat_max_ns, 0);
        str(f, json, "top_class", top < 0 ? NULL : tkp_classes_name(m->opts.classes, top));
    }
    num(f, json, "pid", 1, (int64_t)s->pid, 0);
    fputs(json ? "}" : "\n", f);
}

static void us(FILE *f, int w, uint64_t ns)
{
    fprintf(f, " %*.1f", w, (double)ns / 1e3);
}

static void print_text(FILE *f, const struct opts *o, const struct tkp_model *m,
                       const struct tkp_norms *nr, const struct toks *tk, int gpu, const char *why)
{
    int assumed = 0;
    if (!gpu) fprintf(f, "GPU: not recorded (%s); GPU columns omitted\n", why);
    fprintf(f, "%5s %4s %8s %-7s %6s %9s %8s %8s %6s", "step", "seg", "tid", "kind", "tokens",
            "host_us", "gap_us", "launches", "graphs");
    if (gpu) fprintf(f, " %9s %9s %9s %7s %-13s", "span_us", "busy_us", "idle_us", "lat_us",
                     "top_class");
    fputs(" flag\n", f);
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (!shown(o, s)) continue;
        if (s->kind == TKP_STEP_TOKEN) fprintf(f, "%5" PRId64, s->index);
        else fprintf(f, "%5s", "-");
        fprintf(f, " %4" PRIu64 " %8u %-7s", s->seg, s->tid, tkp_mstep_kind_str(s->kind));
        if (tk->src[i] == TKP_TOK_NONE) fprintf(f, " %6s", "-");
        else if (tk->src[i] == TKP_TOK_ASSUMED) fprintf(f, " %5" PRIu64 "~", tk->n[i]), assumed = 1;
        else fprintf(f, " %6" PRIu64, tk->n[i]);
        us(f, 9, tkp_mstep_host_ns(s));
        if (s->has_gap) fprintf(f, " %8.1f", (double)s->gap_ns / 1e3);
        else fprintf(f, " %8s", "-");
        fprintf(f, " %8" PRIu64 " %6" PRIu64, s->launches, s->graph_launches);
        if (gpu) {
            uint64_t span = tkp_mstep_span_ns(s);
            int top = tkp_mstep_top_class(m, s);
            us(f, 9, span);
            us(f, 9, s->busy_ns);
            us(f, 9, span - s->busy_ns);
            if (s->lat_n) us(f, 7, s->lat_sum_ns / s->lat_n);
            else fprintf(f, " %7s", "-");
            fprintf(f, " %-13s", top < 0 ? "-" : tkp_classes_name(m->opts.classes, top));
        }
        const char *a = tkp_mstep_anomaly(nr, s);
        fprintf(f, " %s\n", a ? a : "");
    }
    if (assumed)
        fputs("~ tokens assumed: no GEMM shapes in the capture, so a batch-1 decode loop (one "
              "token per step) is assumed\n", f);
}

static void print_machine(FILE *f, const struct opts *o, const struct tkp_model *m,
                          const struct tkp_norms *nr, const struct toks *tk, int gpu,
                          const char *why)
{
    if (o->json) {
        fprintf(f, "{\"gpu\":{\"available\":%s,\"reason\":", gpu ? "true" : "false");
        tkp_json_str(f, gpu ? NULL : why);
        fputs("},\"steps\":[", f);
    } else {
        for (size_t k = 0; k < sizeof(keys_host) / sizeof(*keys_host); k++)
            fprintf(f, "%s%s", k ? "," : "", keys_host[k]);
        for (size_t k = 0; gpu && k < sizeof(keys_gpu) / sizeof(*keys_gpu); k++)
            fprintf(f, ",%s", keys_gpu[k]);
        fputs(",pid", f);
        putc('\n', f);
    }
    int first = 1;
    for (size_t i = 0; i < m->nsteps; i++) {
        if (!shown(o, &m->steps[i])) continue;
        if (o->json && !first) putc(',', f);
        first = 0;
        print_row(f, o->json, m, nr, tk, i, gpu);
    }
    if (o->json) fputs("]}\n", f);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    struct opts o = {.from = -1, .to = -1};
    struct tkp_classes *cl;
    struct tkp_model m;
    struct tkp_acc *acc;
    struct tkp_norms nr;
    char why[256];
    int err = parse(argc, argv, ctx, &o);
    if (err) return err;
    if ((err = tkp_cmd_classes(ctx, o.classes, &cl))) return err;
    /* the model and, in the same pass, the library-call shapes that give tokens per step */
    if ((err = tkp_cmd_load_analysis(ctx, o.path, cl, &m, &acc))) {
        tkp_classes_free(cl);
        return err;
    }
    struct toks tk = {malloc((m.nsteps + 1) * sizeof(*tk.n)), malloc((m.nsteps + 1) * sizeof(*tk.src))};
    if (!tk.n || !tk.src || (err = tkp_model_norms(&m, &nr))) {
        err = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    } else {
        int gpu = tkp_model_gpu(&m, why, sizeof(why));
        tkp_step_tokens(&m, acc, tk.n, tk.src);
        if (o.json || o.csv) print_machine(ctx->out, &o, &m, &nr, &tk, gpu, why);
        else print_text(ctx->out, &o, &m, &nr, &tk, gpu, why);
        tkp_norms_free(&nr);
    }
    free(tk.n);
    free(tk.src);
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
        "Tokens of a token step (tokens_source in --json/--csv), the first rule that applies:\n"
        "  unknown   a forward in two or more graph launches (vLLM's piecewise CUDA graphs):\n"
        "            its GEMMs are inside the graphs, the eager ones count sequences;\n"
        "  shapes    the largest token dimension of the step's executed cuBLAS/cuBLASLt GEMMs\n"
        "            (prompt tokens in a prefill, one per sequence in a decode step);\n"
        "  previous  a step without any GEMM (its forward replayed as a CUDA graph) in a capture\n"
        "            that has GEMM shapes: the sequences of the thread's previous known step;\n"
        "  assumed   no GEMM shapes in the whole capture: 1 per step after the thread's first\n"
        "            (a batch-1 decode loop; marked ~ in the text), the first (prefill) unknown;\n"
        "else '-' (null): outside, warm-up (README \"Steps\") and open steps, and what none of\n"
        "the rules gives.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "  --from N, --to N  token steps N.. / ..N of each thread (outside segments hidden)\n"
        "  --thread TID      one OS thread\n"
        "  --classes FILE    extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "  --json, --csv     for scripts (keys: decoder/cmd_steps.c)\n"
        "\n"
        "example: the slowest token steps\n"
        "  tokprof steps --csv server.1234.tokprof | sort -t, -k11 -n | tail\n",
    .run = run,
};
