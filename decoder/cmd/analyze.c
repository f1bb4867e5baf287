/* tokprof analyze: change points in the step latency series, scaling slopes (attention against
 * KV tokens, gemm against tokens per step), the GPU idle split (launch gaps vs host waits) and
 * the launch-bound verdict. The methods are in analysis.h.
 *
 * JSON keys (`--json`): series_tid, token_steps, tokens_known, change_points [{series ("host" or
 * "busy"), step, before_ns, after_ns, classes [{class, before_ns, after_ns}]}], host_only_shifts
 * [{step, before_ns, after_ns}] (host changes without GPU backing: analysis.h), slopes
 * {attention_per_1k_kv_tokens {ns_per_1k, intercept_ns, r2, steps} | null, gemm_per_token
 * {ns_per_token, ...} | null, prompt_tokens}, idle {span_ns, busy_ns, launch_gap_ns,
 * host_wait_ns, idle_share, launch_gap_share}, verdict. */
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path;
    int json, err;
    struct tkp_classes *cl;
    if ((err = tkp_cmd_args_json_classes(ctx, argc, argv, &path, &json, &cl))) return err;
    struct tkp_model m;
    struct tkp_acc *a;
    struct tkp_analysis an;
    if ((err = tkp_cmd_load_analysis(ctx, path, cl, &m, &a))) {
        tkp_classes_free(cl);
        return err;
    }
    if ((err = tkp_analysis_make(&m, a, &an))) {
        tkp_cmd_fail(ctx, err, "out of memory");
    } else if (json) {
        fprintf(ctx->out, "{\"token_steps\":%zu,\"tokens_known\":%s,", an.nseries,
                an.tokens_known ? "true" : "false");
        tkp_analysis_print_json(ctx->out, &m, &an);
        fprintf(ctx->out, ",\"verdict\":\"%s\"}\n", an.verdict);
    } else {
        if (!an.gpu) {
            char w[256];
            tkp_model_gpu(&m, w, sizeof(w));
            fprintf(ctx->out, "gpu       not recorded (%s): host duration only\n", w);
        }
        tkp_analysis_print_lines(ctx->out, &m, &an);
        char vt[256];
        tkp_verdict_text(&an.v, vt, sizeof(vt));
        fprintf(ctx->out, "verdict   %s\n", vt);
        if (!an.attn.ok) fputs("scaling   attention: not enough decode steps with GPU time\n", ctx->out);
        if (!an.mlp.ok)
            fputs("scaling   gemm per token: needs library calls with two token counts\n", ctx->out);
    }
    tkp_analysis_free(&an);
    tkp_acc_free(a);
    tkp_model_free(&m);
    tkp_classes_free(cl);
    return err;
}

const struct tkp_cmd tkp_cmd_analyze = {
    .name = "analyze",
    .brief = "change points, scaling slopes, idle split and launch-bound verdict",
    .usage =
        "usage: tokprof analyze [--json] [--classes FILE] CAPTURE...\n"
        "\n"
        "Finds where the step latency changed and names the kernel classes that moved: binary\n"
        "segmentation on the mean of the GPU busy time (with GPU records) and of the host\n"
        "duration of the token steps, after a 5-step running median (a stall every K steps is\n"
        "no change); a split is kept when it lowers the squared error by more than the\n"
        "BIC-like penalty 2*sigma^2*ln(N), sigma a robust noise estimate (1.4826 * MAD of\n"
        "the first differences / sqrt 2), moves the mean by 10% or more, and stands 8\n"
        "standard errors clear; segments of at least 10 steps; the levels printed are the\n"
        "segments' means of the smoothed series. With GPU records a host change\n"
        "needs a GPU busy change within 5 steps or a change in the steps' launches or tokens;\n"
        "otherwise it is printed as a host-only shift (machine load), not a change point.\n"
        "Fits attention GPU time per step against KV tokens (prompt + decode steps so far, times\n"
        "sequences) and gemm time against tokens per step (from library-call shapes). Splits\n"
        "the GPU idle time inside steps into launch gaps (the next kernel was launched after the\n"
        "GPU went idle) and host waits (it was queued but held back), and says whether the run\n"
        "is gpu-bound, launch-bound or host-bound (README \"Verdict\").\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "  --json          one JSON object, for scripts\n"
        "  --classes FILE  extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "\n"
        "example: the step where a deploy made tokens slower\n"
        "  tokprof analyze --json server.1234.tokprof | jq '.change_points[0]'\n",
    .run = run,
};
