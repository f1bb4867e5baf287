/* tokprof decoder: the text frame of `tokprof top` (see live_view.h). */
#include "views/live_view.h"

#include <string.h>

static void dur(char *b, size_t n, uint64_t ns)
{
    if (!ns)
        snprintf(b, n, "-");
    else if (ns < 1000000)
        snprintf(b, n, "%.0fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(b, n, "%.2fms", (double)ns / 1e6);
    else
        snprintf(b, n, "%.2fs", (double)ns / 1e9);
}

/* An ASCII sparkline of v (scaled to its max): a terminal without UTF-8 shows it too. */
static void spark(char *out, const double *v, int n)
{
    static const char ramp[] = " .:-=+*#%@";
    double max = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > max) max = v[i];
    for (int i = 0; i < n; i++)
        out[i] = max > 0 ? ramp[(int)(v[i] / max * 9 + 0.5)] : ' ';
    out[n] = 0;
}

static void row(FILE *f, const char *who, const struct tkp_lwin *w)
{
    char p50[16], p99[16], busy[8];
    dur(p50, sizeof(p50), w->itl_p50);
    dur(p99, sizeof(p99), w->itl_p99);
    if (w->has_gpu && w->timed_steps)
        snprintf(busy, sizeof(busy), "%3.0f%%", w->busy_share * 100);
    else
        snprintf(busy, sizeof(busy), "-");
    fprintf(f, "%-24s %9.1f %8.1f %9s %9s %5s  %s\n", who, w->tok_s, w->steps_s, p50, p99, busy,
            w->verdict);
}

void tkp_live_print_frame(FILE *f, const struct tkp_live *l, const struct tkp_classes *cl,
                          const struct tkp_live_view *v)
{
    fprintf(f, "tokprof top  %s  window %us%s\n", v->source, v->window_s,
            v->paused ? "  [paused]" : "");
    fprintf(f, "%-24s %9s %8s %9s %9s %5s  %s\n", "PROCESS / THREAD", "TOK/S", "STEPS/S", "ITL p50",
            "ITL p99", "GPU", "VERDICT");
    size_t np = tkp_live_nprocs(l);
    if (!np) fprintf(f, "(no process yet)\n");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        struct tkp_lwin w;
        char who[64], sp[TKP_LIVE_SPARK + 1];
        tkp_live_window(l, i, TKP_LIVE_ALL, v->window_s, &w);
        snprintf(who, sizeof(who), "%.14s pid %llu%s", c->program[0] ? c->program : "?",
                 (unsigned long long)c->pid, c->ended ? " (ended)" : "");
        row(f, who, &w);
        uint32_t idx[8], tid[8];
        size_t nt = tkp_live_thread_list(l, i, idx, tid, 8);
        for (size_t k = 0; nt > 1 && k < nt; k++) {
            struct tkp_lwin tw;
            tkp_live_window(l, i, idx[k], v->window_s, &tw);
            snprintf(who, sizeof(who), "  tid %u", tid[k]);
            row(f, who, &tw);
        }
        spark(sp, w.spark, TKP_LIVE_SPARK);
        fprintf(f,
                "  tokens/s, last %ds: [%s]  tokens %llu  steps %llu  launches %llu  dropped "
                "%llu\n",
                TKP_LIVE_SPARK, sp, (unsigned long long)c->tokens,
                (unsigned long long)c->token_steps, (unsigned long long)c->launches,
                (unsigned long long)c->dropped);
        if (w.has_gpu && w.timed_steps) {
            fprintf(f, "  GPU busy %.0f%%, idle %.0f%% in launch gaps, %.0f%% between forwards",
                    w.busy_share * 100, w.launch_idle_share * 100, w.host_idle_share * 100);
            if (w.timed_steps < w.steps) /* the shares are over the timed ones (live.h) */
                fprintf(f, " (%llu of %llu steps timed)", (unsigned long long)w.timed_steps,
                        (unsigned long long)w.steps);
            fputc('\n', f);
        } else if (w.has_gpu)
            fprintf(f, "  GPU busy unknown: none of the window's %llu steps timed\n",
                    (unsigned long long)w.steps);
        else
            fprintf(f, "  no GPU records (TOKPROF_GPU off or CUPTI unavailable)\n");
        if (v->show_classes && w.ncls) {
            fprintf(f, "  top classes by GPU time:");
            for (int k = 0; k < w.ncls; k++)
                fprintf(f, "  %s %.0f%%", tkp_classes_name(cl, w.cls[k]),
                        w.gpu_ns ? 100.0 * (double)w.cls_ns[k] / (double)w.gpu_ns : 0.0);
            fputc('\n', f);
        }
        if (v->show_kernels && w.nnames) {
            fprintf(f, "  top kernels by GPU time:\n");
            for (int k = 0; k < w.nnames; k++) {
                char d[16];
                dur(d, sizeof(d), w.name_ns[k]);
                fprintf(f, "    %5.1f%% %9s  %.*s\n",
                        w.gpu_ns ? 100.0 * (double)w.name_ns[k] / (double)w.gpu_ns : 0.0, d,
                        v->name_width, w.names[k]);
            }
        }
        if (w.has_worst) {
            char d[16], b[16];
            dur(d, sizeof(d), w.worst_ns);
            if (w.worst_timed) dur(b, sizeof(b), w.worst_busy_ns);
            else snprintf(b, sizeof(b), "unknown");
            fprintf(f, "  worst step: tid %u step %llu  %s (GPU busy %s), cause: %s\n", w.worst_tid,
                    (unsigned long long)w.worst_seg, d, b, w.worst_cause);
        }
    }
}
