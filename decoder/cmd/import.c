/* tokprof import: another tool's trace into a tokprof capture (decoder/import/), then the capture's
 * GPU timeline read back from the written file: the figures docs/VALIDATION.md compares with
 * TraceLens's and HTA's.
 *
 * The timeline (two definitions, docs/VALIDATION.md "Imported traces"): busy is the length of the
 * union of [start, end) over all streams, span first start to last end, idle span - busy;
 *  - "kernels": every GPU_KERNEL record, joined to its launch or not;
 *  - "linked": kernels, memcpys and memsets whose host call is in the trace (joined records):
 *    what TraceLens's gpu_timeline counts by default (include_unlinked_kernels=False). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/json.h"
#include "capture/reader.h"
#include "cmd/cmd.h"
#include "import/kineto.h"
#include "tokprof/format.h"

struct span {
    uint64_t s, e;
};

struct tl {
    struct span *v;
    size_t n, cap;
    uint64_t busy, first, last;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return (x->s > y->s) - (x->s < y->s);
}

static void tl_sweep(struct tl *t)
{
    qsort(t->v, t->n, sizeof(*t->v), cmp_span);
    uint64_t cs = 0, ce = 0;
    t->busy = t->first = t->last = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct span *p = &t->v[i];
        if (!i)
            t->first = p->s, cs = p->s, ce = p->e;
        else if (p->s > ce)
            t->busy += ce - cs, cs = p->s, ce = p->e;
        else if (p->e > ce)
            ce = p->e;
        if (p->e > t->last) t->last = p->e;
    }
    if (t->n) t->busy += ce - cs;
}

static void tl_print(FILE *f, const char *key, const struct tl *t, int json)
{
    uint64_t span = t->last - t->first;
    if (json) {
        fprintf(f,
                "%s\"%s\":{\"records\":%zu,\"busy_ns\":%" PRIu64 ",\"span_ns\":%" PRIu64
                ",\"idle_ns\":%" PRIu64 "}",
                strcmp(key, "kernels") ? "," : "", key, t->n, t->busy, span, span - t->busy);
        return;
    }
    fprintf(f, "  %-8s %6zu records: busy %.3f ms, span %.3f ms, idle %.3f ms\n", key, t->n,
            (double)t->busy / 1e6, (double)span / 1e6, (double)(span - t->busy) / 1e6);
}

/* The two timelines of the capture at path. */
static int timeline(struct tkp_ctx *ctx, const char *path, struct tl *k, struct tl *l)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    int err = tkp_cmd_open(ctx, path, &r);
    if (err) return err;
    while (!err && tkp_reader_next(r, &rec) == 1) {
        if (rec.type != TKP_REC_GPU_KERNEL && rec.type != TKP_REC_GPU_COPY) continue;
        struct span p = {rec.gpu.start_ns, rec.gpu.end_ns};
        if (rec.type == TKP_REC_GPU_KERNEL) {
            if (TKP_GROW(k->v, k->cap, k->n + 1))
                err = TKP_ERR_NOMEM;
            else
                k->v[k->n++] = p;
        }
        if (!err && rec.gpu.join != TKP_JOIN_NONE) {
            if (TKP_GROW(l->v, l->cap, l->n + 1))
                err = TKP_ERR_NOMEM;
            else
                l->v[l->n++] = p;
        }
    }
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    if (err) return tkp_cmd_fail(ctx, err, "out of memory");
    tl_sweep(k);
    tl_sweep(l);
    return 0;
}

static int step_opt(struct tkp_ctx *ctx, const char *name, const char *v, void *dst)
{
    struct tkp_import_opts *o = dst;
    if (!strcmp(v, "auto"))
        o->step = TKP_IMPORT_STEP_AUTO;
    else if (!strcmp(v, "profiler-step"))
        o->step = TKP_IMPORT_STEP_PROFILER;
    else if (!strncmp(v, "annotation:", 11) && v[11])
        o->step = TKP_IMPORT_STEP_ANNOTATION, o->pattern = v + 11;
    else
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "%s: '%s' is not auto, profiler-step or annotation:REGEX", name, v);
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *args[1], *out = NULL;
    size_t nargs = 0;
    int json = 0, err;
    struct tkp_import_opts o = {TKP_IMPORT_STEP_AUTO, NULL};
    const struct tkp_opt opts[] = {{"-o", 's', &out, 0, NULL, NULL},
                                   {"--step", 'c', &o, 0, NULL, step_opt},
                                   {"--json", 'f', &json, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse_args(ctx, argc, argv, opts, 3, args, 1, &nargs))) return err;
    if (nargs != 1) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "import needs one trace (TRACE.json)");
    if (!out) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "import needs -o OUT.tokprof");

    struct tkp_import_stats st;
    if ((err = tkp_import_kineto(args[0], out, &o, &st, ctx->why, sizeof(ctx->why)))) return err;
    struct tl k = {0}, l = {0};
    err = timeline(ctx, out, &k, &l);
    FILE *f = ctx->out;
    if (!err && json) {
        fputs("{\"trace\":", f);
        tkp_json_str(f, args[0]);
        fputs(",\"capture\":", f);
        tkp_json_str(f, out);
        fprintf(f,
                ",\"bytes\":%" PRIu64 ",\"events\":%" PRIu64 ",\"kernels\":%" PRIu64
                ",\"kernels_linked\":%" PRIu64 ",\"copies\":%" PRIu64 ",\"copies_linked\":%" PRIu64
                ",\"launches\":%" PRIu64 ",\"graph_launches\":%" PRIu64 ",\"host_copies\":%" PRIu64
                ",\"syncs\":%" PRIu64 ",\"event_calls\":%" PRIu64 ",\"other_calls\":%" PRIu64
                ",\"annotations\":%" PRIu64 ",\"threads\":%" PRIu64 ",\"steps\":%" PRIu64
                ",\"bad_times\":%" PRIu64,
                st.bytes, st.events, st.kernels, st.kernels_linked, st.copies, st.copies_linked,
                st.launches, st.graph_launches, st.host_copies, st.syncs, st.events_rw,
                st.other_calls, st.annotations, st.threads, st.steps, st.bad_times);
        fputs(",\"step_source\":", f);
        tkp_json_str(f, st.step_source);
        fputs(",\"timeline\":{", f);
        tl_print(f, "kernels", &k, 1);
        tl_print(f, "linked", &l, 1);
        fputs("}}\n", f);
    } else if (!err) {
        fprintf(f, "%s -> %s: %" PRIu64 " events (%.1f MB of JSON)\n", args[0], out, st.events,
                (double)st.bytes / 1e6);
        fprintf(
            f,
            "  kernels %" PRIu64 " (%" PRIu64 " without their launch in the trace), copies %" PRIu64
            " (%" PRIu64 " without their call)\n",
            st.kernels, st.kernels - st.kernels_linked, st.copies, st.copies - st.copies_linked);
        fprintf(f,
                "  host     %" PRIu64 " launches, %" PRIu64 " graph launches, %" PRIu64
                " copies, %" PRIu64 " syncs, %" PRIu64 " event calls on %" PRIu64
                " threads (%" PRIu64 " other runtime calls not kept)\n",
                st.launches, st.graph_launches, st.host_copies, st.syncs, st.events_rw, st.threads,
                st.other_calls);
        fprintf(f, "  steps    %" PRIu64 " (%s)\n", st.steps, st.step_source);
        if (st.bad_times)
            fprintf(f, "  skipped  %" PRIu64 " events with a negative or absurd ts or dur\n",
                    st.bad_times);
        fputs("GPU timeline of the capture (union over all streams):\n", f);
        tl_print(f, "kernels", &k, 0);
        tl_print(f, "linked", &l, 0);
    }
    free(k.v);
    free(l.v);
    return err;
}

const struct tkp_cmd tkp_cmd_import = {
    .name = "import",
    .brief = "turn a PyTorch profiler (Kineto) trace into a capture",
    .usage =
        "usage: tokprof import [--step SOURCE] [--json] TRACE -o OUT.tokprof\n"
        "\n"
        "Reads the Chrome-trace JSON that torch.profiler (Kineto) writes, also the traces of\n"
        "vLLM's and SGLang's profilers and of ROCm builds (TRACE.json or TRACE.json.gz), and\n"
        "writes a tokprof capture of it: the runtime calls that launched work (launches, graph\n"
        "launches, copies, syncs, event records and waits) on their threads, the kernels, memcpys\n"
        "and memsets the GPU ran, joined to their calls by correlation id (work whose call is not\n"
        "in the trace is kept, unjoined, and counted), and user annotations as NVTX ranges. Every\n"
        "view reads the capture; what the trace does not hold (library-call shapes, hence tokens\n"
        "per step) is \"unknown\". `tokprof dump --type meta` shows the source.\n"
        "Then prints what it imported and the capture's GPU timeline: busy (the union of the\n"
        "intervals over all streams), span and idle, of all kernels and of the kernels and copies\n"
        "whose call is in the trace (docs/VALIDATION.md).\n"
        "\n"
        "  --step SOURCE  what a step is: auto (the default: ProfilerStep#N ranges, else a host\n"
        "                 sync after work closes a step, as the shim's auto), profiler-step\n"
        "                 (ProfilerStep#N only), annotation:REGEX (user annotations whose\n"
        "                 name matches the extended regular expression; outermost ones)\n"
        "  --json         the report as one JSON object\n"
        "\n"
        "A malformed or cut trace: one line naming the byte offset (of the JSON, after gunzip)\n"
        "and what was expected, exit 2.\n"
        "\n"
        "example:\n"
        "  tokprof import --step annotation:'^execute_' vllm_trace.json.gz -o vllm.tokprof\n"
        "  tokprof summary vllm.tokprof\n",
    .run = run,
};
