/* tokprof gemm: library GEMM calls grouped by shape (calls, kernels, FLOPs, host time in the
 * call, GPU time and TFLOP/s when the capture has GPU time), and per step the tokens, sequences
 * and kind the shapes imply (libcalls.h has the rule). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "base/json.h"
#include "model/libcalls.h"
#include "capture/reader.h"
#include "base/sort.h"

struct shape {
    const struct tkp_call *c; /* representative */
    uint64_t calls, kernels, call_ns, gpu_ns;
    double flops;
    double flops_timed; /* of the calls whose kernels have GPU records: TFLOP/s divides these by
                           gpu_ns, so that untimed calls (TOKPROF_GPU=window:N/M) do not inflate it */
};

static int same_shape(const struct tkp_call *a, const struct tkp_call *b)
{
    return a->lib == b->lib && !strcmp(a->op, b->op) && a->m == b->m && a->n == b->n &&
           a->k == b->k && a->batch == b->batch && a->atype == b->atype && a->btype == b->btype &&
           a->ctype == b->ctype && a->compute == b->compute && a->transa == b->transa &&
           a->transb == b->transb;
}

static int cmp_flops(const void *a, const void *b)
{
    const struct shape *x = a, *y = b;
    return x->flops < y->flops ? 1 : x->flops > y->flops ? -1 : 0;
}

static void print_call_fields(FILE *f, const struct tkp_call *c)
{
    char b[6][24];
    fprintf(f, "\"lib\":\"%s\",\"op\":", tkp_lib_str(c->lib, b[0]));
    tkp_json_str(f, c->op);
    fprintf(f,
            ",\"m\":%" PRIu64 ",\"n\":%" PRIu64 ",\"k\":%" PRIu64 ",\"batch\":%" PRIu64
            ",\"atype\":\"%s\",\"btype\":\"%s\",\"ctype\":\"%s\",\"compute\":\"%s\","
            "\"transa\":\"%s\",\"transb\":\"%s\"",
            c->m, c->n, c->k, c->batch, tkp_dtype_str(c->atype, b[0]),
            tkp_dtype_str(c->btype, b[1]), tkp_dtype_str(c->ctype, b[2]),
            tkp_compute_str(c->compute, b[3]), tkp_trans_str(c->transa, b[4]),
            tkp_trans_str(c->transb, b[5]));
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *arg[2], *path;
    int json = 0, steps = 0, err;
    size_t n;
    const struct tkp_opt opts[] = {{"--json", 'f', &json, 0, NULL, NULL},
                                   {"--steps", 'f', &steps, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse_args(ctx, argc, argv, opts, 2, arg, 2, &n))) return err;
    if (!n) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");
    if (n > 1) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one capture at a time ('%s')", arg[1]);
    path = arg[0];
    struct tkp_reader *r;
    struct tkp_libmodel m;
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    if ((err = tkp_libmodel_load(r, &m))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "%s: out of memory", path);
    }
    tkp_cmd_warn_reader(ctx, path, r);

    struct shape *sh = calloc(m.ncalls ? m.ncalls : 1, sizeof(*sh));
    uint32_t nsh = 0;
    double total = 0;
    if (!sh) {
        tkp_libmodel_free(&m);
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    /* shapes are few (tens): a linear search per call is fine */
    for (uint32_t i = 0; i < m.ncalls; i++) {
        const struct tkp_call *c = &m.calls[i];
        if (c->status || (c->flags & TKP_LIBF_CAPTURED)) continue;
        uint32_t j = 0;
        while (j < nsh && !same_shape(sh[j].c, c)) j++;
        if (j == nsh) sh[nsh++].c = c;
        sh[j].calls++, sh[j].kernels += c->kernels, sh[j].call_ns += c->call_ns;
        sh[j].gpu_ns += c->gpu_ns, sh[j].flops += tkp_call_flops(c);
        if (c->gpu_ns) sh[j].flops_timed += tkp_call_flops(c);
        total += tkp_call_flops(c);
    }
    tkp_sort(sh, nsh, sizeof(*sh), cmp_flops);
    FILE *f = ctx->out;
    if (json) {
        fprintf(f, "{\"token_dim\":\"%s\",\"calls\":%u,\"flops\":%.0f,\"shapes\":[",
                m.token_dim_m ? "m" : "n", m.ncalls, total);
        for (uint32_t j = 0; j < nsh; j++) {
            fputs(j ? ",{" : "{", f);
            print_call_fields(f, sh[j].c);
            fprintf(f, ",\"calls\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"flops\":%.0f,"
                       "\"host_ns\":%" PRIu64,
                    sh[j].calls, sh[j].kernels, sh[j].flops, sh[j].call_ns);
            if (sh[j].gpu_ns)
                fprintf(f, ",\"gpu_ns\":%" PRIu64 ",\"tflops\":%.3f", sh[j].gpu_ns,
                        sh[j].flops_timed / (double)sh[j].gpu_ns / 1e3);
            fputc('}', f);
        }
        fputs("],\"steps\":[", f);
        for (uint32_t i = 0; i < m.nsteps; i++) {
            const struct tkp_lstep *s = &m.steps[i];
            fprintf(f,
                    "%s{\"thread\":%u,\"step\":%" PRIu64 ",\"kind\":\"%s\",\"tokens\":%" PRIu64
                    ",\"seqs\":%" PRIu64 ",\"gemm_calls\":%u,\"flops\":%" PRIu64
                    ",\"graph_launches\":%u}",
                    i ? "," : "", s->thread, s->step, tkp_step_class_str(s->kind), s->tokens,
                    s->seqs, s->ncalls, s->flops, s->graph_launches);
        }
        fputs("]}\n", f);
    } else {
        fprintf(f, "%u library calls, %.3f GFLOP; token dimension: %s\n\n", m.ncalls, total / 1e9,
                m.token_dim_m ? "m" : "n");
        fprintf(f, "%-28s %7s %7s %7s %5s %-15s %3s %7s %7s %10s %9s %9s\n", "op", "m", "n", "k",
                "batch", "a/b/c compute", "op", "calls", "kern", "GFLOP", "host_us", "TFLOP/s");
        for (uint32_t j = 0; j < nsh; j++) {
            const struct tkp_call *c = sh[j].c;
            char b[6][24], ty[64], tr[8], tf[16] = "-";
            snprintf(ty, sizeof(ty), "%s/%s/%s %s", tkp_dtype_str(c->atype, b[0]),
                     tkp_dtype_str(c->btype, b[1]), tkp_dtype_str(c->ctype, b[2]),
                     tkp_compute_str(c->compute, b[3]));
            snprintf(tr, sizeof(tr), "%s%s", tkp_trans_str(c->transa, b[4]),
                     tkp_trans_str(c->transb, b[5]));
            if (sh[j].gpu_ns)
                snprintf(tf, sizeof(tf), "%.2f", sh[j].flops_timed / (double)sh[j].gpu_ns / 1e3);
            fprintf(f, "%-28s %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %5" PRIu64
                       " %-15s %3s %7" PRIu64 " %7" PRIu64 " %10.3f %9.1f %9s\n",
                    c->op, c->m, c->n, c->k, c->batch, ty, tr, sh[j].calls, sh[j].kernels,
                    sh[j].flops / 1e9, sh[j].call_ns / 1e3, tf);
        }
        if (steps) {
            fprintf(f, "\n%6s %6s %-8s %7s %6s %6s %10s\n", "thread", "step", "kind", "tokens",
                    "seqs", "gemms", "GFLOP");
            for (uint32_t i = 0; i < m.nsteps; i++) {
                const struct tkp_lstep *s = &m.steps[i];
                fprintf(f, "%6u %6" PRIu64 " %-8s %7" PRIu64 " %6" PRIu64 " %6u %10.3f\n",
                        s->thread, s->step, tkp_step_class_str(s->kind), s->tokens, s->seqs,
                        s->ncalls, s->flops / 1e9);
            }
        }
        if (!nsh) fputs("(no library GEMM calls in this capture)\n", f);
    }
    free(sh);
    tkp_libmodel_free(&m);
    tkp_reader_close(r);
    return 0;
}

const struct tkp_cmd tkp_cmd_gemm = {
    .name = "gemm",
    .brief = "library GEMMs by shape: calls, FLOPs, TFLOP/s; tokens and kind per step",
    .usage =
        "usage: tokprof gemm [--steps] [--json] FILE\n"
        "\n"
        "Groups the cuBLAS / cuBLASLt / cuDNN calls of the capture FILE by shape (op, m, n, k,\n"
        "batch, types, transposes): calls, kernels they launched, FLOPs (2*m*n*k*batch), host\n"
        "time inside the calls, and GPU time and TFLOP/s when the capture has GPU time. Calls\n"
        "recorded while their stream was capturing a CUDA graph, and failed calls, are left out.\n"
        "\n"
        "  --steps   also one line per step: tokens, sequences and kind (prefill, decode,\n"
        "            mixed), from the GEMM shapes (rule: 'tokprof help gemm' in docs/FORMAT.md)\n"
        "  --json    one JSON object with \"shapes\" and \"steps\"\n"
        "\n"
        "example: tokens per step\n"
        "  tokprof gemm --json server.1234.tokprof | jq -c '.steps[] | [.step, .kind, .tokens]'\n",
    .run = run,
};
