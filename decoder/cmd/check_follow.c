/* tokprof check --follow SPEC DIR|CAPTURE: the streaming monitor (check/monitor.h) on captures
 * still being written — each violation printed as soon as its step closes, one monitor per
 * process; ends when every process followed has ended (or at Ctrl-C). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/live.h"
#include "cmd/live_spec.h"
#include "cmd/check_follow.h"
#include "base/err.h"
#include "capture/follow.h"
#include "base/json.h"
#include "check/compile.h"
#include "check/ast.h"
#include "check/monitor.h"

struct cf {
    struct tkp_ctx *ctx;
    int json, exit_on;
    uint64_t errors;
};

static void print_text(FILE *o, uint64_t pid, const struct tkp_spec *sp, const struct tkp_viol *v)
{
    const struct tkp_assert *a = &sp->as[v->as];
    fprintf(o, "violation: %s (%s) pid %llu tid %u step %llu token %llu", a->id,
            a->warn ? "warn" : "error", (unsigned long long)pid, v->tid,
            (unsigned long long)v->step, (unsigned long long)v->token);
    if (v->has_val) fprintf(o, ": observed %g, bound %g", v->observed, v->bound);
    fprintf(o, "  [host %.6f .. %.6f s]\n", (double)v->host_start / 1e9, (double)v->host_end / 1e9);
    if (v->note[0]) fprintf(o, "    note: %s\n", v->note);
    for (int k = 0; k < v->nw; k++) {
        const struct tkp_witem *w = &v->w[k];
        fprintf(o, "    %-9s step %llu", w->role, (unsigned long long)w->r.step);
        if (w->r.host_ns) fprintf(o, " host %.6f s", (double)w->r.host_ns / 1e9);
        if (w->r.gpu_end)
            fprintf(o, " gpu %.6f..%.6f s", (double)w->r.gpu_start / 1e9,
                    (double)w->r.gpu_end / 1e9);
        if (w->r.name) fprintf(o, " %s", w->r.name);
        fputc('\n', o);
    }
}

static void print_json(FILE *o, uint64_t pid, const struct tkp_spec *sp, const struct tkp_viol *v)
{
    const struct tkp_assert *a = &sp->as[v->as];
    fputs("{\"assertion\":", o);
    tkp_json_str(o, a->id);
    fprintf(o,
            ",\"severity\":\"%s\",\"pid\":%llu,\"tid\":%u,\"step\":%llu,\"token\":%llu,"
            "\"host_start_ns\":%llu,\"host_end_ns\":%llu",
            a->warn ? "warn" : "error", (unsigned long long)pid, v->tid,
            (unsigned long long)v->step, (unsigned long long)v->token,
            (unsigned long long)v->host_start, (unsigned long long)v->host_end);
    if (v->has_val) fprintf(o, ",\"observed\":%.17g,\"bound\":%.17g", v->observed, v->bound);
    fputs(",\"witness\":[", o);
    for (int k = 0; k < v->nw; k++) {
        const struct tkp_witem *w = &v->w[k];
        fprintf(o, "%s{\"role\":", k ? "," : "");
        tkp_json_str(o, w->role);
        fprintf(o, ",\"step\":%llu,\"host_ns\":%llu,\"gpu_start_ns\":%llu,\"gpu_end_ns\":%llu",
                (unsigned long long)w->r.step, (unsigned long long)w->r.host_ns,
                (unsigned long long)w->r.gpu_start, (unsigned long long)w->r.gpu_end);
        if (w->r.name) {
            fputs(",\"name\":", o);
            tkp_json_str(o, w->r.name);
        }
        fputc('}', o);
    }
    fputs("]}\n", o);
}

static void on_viol(void *arg, uint64_t pid, const struct tkp_spec *sp, int as,
                    const struct tkp_viol *v, uint64_t n)
{
    struct cf *c = arg;
    const struct tkp_assert *a = &sp->as[as];
    if (v && c->json)
        print_json(c->ctx->out, pid, sp, v);
    else if (v)
        print_text(c->ctx->out, pid, sp, v);
    else if (c->json) {
        fputs("{\"assertion\":", c->ctx->out);
        tkp_json_str(c->ctx->out, a->id);
        fprintf(c->ctx->out, ",\"severity\":\"%s\",\"pid\":%llu,\"unreported\":%llu}\n",
                a->warn ? "warn" : "error", (unsigned long long)pid, (unsigned long long)n);
    } else {
        fprintf(c->ctx->out,
                "violation: %s (%s) pid %llu: %llu more at the same record, not kept "
                "in full (%d are)\n",
                a->id, a->warn ? "warn" : "error", (unsigned long long)pid, (unsigned long long)n,
                TKP_LIVE_WITNESS);
    }
    fflush(c->ctx->out); /* as soon as it is known: a pipe reader sees it now */
    if (!a->warn) {
        c->errors += n;
        if (c->exit_on) tkp_live_stop = 1;
    }
}

int tkp_cmd_check_follow(struct tkp_ctx *ctx, const char *spec, const char *path, int json,
                         int exit_on)
{
    struct cf c = {.ctx = ctx, .json = json, .exit_on = exit_on};
    struct tkp_spec *sp = NULL;
    struct tkp_follow *f = NULL;
    struct tkp_live_mons *ms = NULL;
    int rc = tkp_live_load_spec(ctx, spec, &sp);
    if (rc) goto out;
    struct tkp_follow_opts fo = {.until_exit = 1};
    if ((rc = tkp_follow_open(path, &fo, &f, ctx->why, sizeof(ctx->why)))) goto out;
    if ((rc = tkp_live_mons_new(sp, on_viol, &c, &ms))) {
        rc = tkp_cmd_fail(ctx, rc, "out of memory");
        goto out;
    }
    tkp_live_signals();
    while (!tkp_live_stop && (rc = tkp_live_pump(ctx, f, NULL, ms, 1000, 1000, NULL, 0)) == 0)
        ;
    if (rc < 0) goto out;
    rc = 0;
    if (c.errors)
        rc = tkp_cmd_fail(ctx, TKP_ERR_VIOLATION, "%llu error-severity violation%s%s",
                          (unsigned long long)c.errors, c.errors == 1 ? "" : "s",
                          c.exit_on ? " (stopped at the first)" : "");
out:
    tkp_live_mons_free(ms);
    tkp_follow_close(f);
    tkp_spec_free(sp);
    return rc;
}
