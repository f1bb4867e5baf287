/* tokprof decoder: the Prometheus exposition of live figures (see prom.h). */
#include "views/prom.h"

#include <stddef.h>
#include <string.h>

void tkp_prom_escape(char *out, size_t cap, const char *v)
{
    size_t n = 0;
    for (; *v && n + 3 < cap; v++) {
        if (*v == '\\' || *v == '"')
            out[n++] = '\\', out[n++] = *v;
        else if (*v == '\n')
            out[n++] = '\\', out[n++] = 'n';
        else
            out[n++] = *v;
    }
    out[n] = 0;
}

/* The labels of process i: program, pid and the fixed ones. */
static void proc_labels(char *b, size_t cap, const struct tkp_lcount *c, const char *extra)
{
    char prog[160];
    tkp_prom_escape(prog, sizeof(prog), c->program[0] ? c->program : "?");
    snprintf(b, cap, "program=\"%s\",pid=\"%llu\"%s%s", prog, (unsigned long long)c->pid,
             extra && *extra ? "," : "", extra ? extra : "");
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(FILE *f, const struct tkp_live *l, const char *extra, const char *name,
                    const char *help, size_t off)
{
    char lb[512];
    head(f, name, "counter", help);
    for (size_t i = 0; i < tkp_live_nprocs(l); i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        fprintf(f, "%s{%s} %llu\n", name, lb,
                (unsigned long long)*(const uint64_t *)((const char *)c + off));
    }
}

void tkp_prom_write(FILE *f, const struct tkp_live *l, const struct tkp_classes *cl,
                    const char *extra, const struct tkp_prom_spec *spec)
{
    char lb[512];
    size_t np = tkp_live_nprocs(l);
    head(f, "tokprof_token_step_duration_seconds", "histogram",
         "Duration of token steps (one iteration of the generate loop), host clock.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        uint64_t cum = 0;
        for (int h = 0; h < TKP_LIVE_HIST; h++) {
            cum += c->hist[h];
            if (h < TKP_LIVE_HIST - 1)
                fprintf(f, "tokprof_token_step_duration_seconds_bucket{%s,le=\"%g\"} %llu\n", lb,
                        tkp_live_hist_le[h], (unsigned long long)cum);
            else
                fprintf(f, "tokprof_token_step_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n", lb,
                        (unsigned long long)cum);
        }
        fprintf(f, "tokprof_token_step_duration_seconds_sum{%s} %.9f\n", lb,
                (double)c->dur_sum_ns / 1e9);
        fprintf(f, "tokprof_token_step_duration_seconds_count{%s} %llu\n", lb,
                (unsigned long long)c->token_steps);
    }
    counter(f, l, extra, "tokprof_tokens_total", "Tokens made by token steps.",
            offsetof(struct tkp_lcount, tokens));
    counter(f, l, extra, "tokprof_token_steps_total", "Token steps (decode or prefill).",
            offsetof(struct tkp_lcount, token_steps));
    counter(f, l, extra, "tokprof_steps_total", "Steps of every kind (token and outside).",
            offsetof(struct tkp_lcount, steps));
    counter(f, l, extra, "tokprof_launches_total", "Kernel launches and graph launches.",
            offsetof(struct tkp_lcount, launches));
    counter(f, l, extra, "tokprof_gpu_kernels_total", "GPU kernel records (CUPTI).",
            offsetof(struct tkp_lcount, kernels));
    counter(f, l, extra, "tokprof_dropped_records_total",
            "Records the shim dropped (full rings, CUPTI drops).",
            offsetof(struct tkp_lcount, dropped));
    head(f, "tokprof_gpu_busy_seconds_total", "counter",
         "GPU busy time: per step the union of its kernels' intervals.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        fprintf(f, "tokprof_gpu_busy_seconds_total{%s} %.9f\n", lb, (double)c->busy_ns / 1e9);
    }
    head(f, "tokprof_gpu_timed_step_seconds_total", "counter",
         "Host duration of the token steps that have GPU records: the GPU busy share is "
         "rate(tokprof_gpu_busy_seconds_total) / rate(this), also when only some steps are "
         "timed (TOKPROF_GPU=window:N/M).");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        fprintf(f, "tokprof_gpu_timed_step_seconds_total{%s} %.9f\n", lb,
                (double)c->timed_ns / 1e9);
    }
    head(f, "tokprof_gpu_class_seconds_total", "counter",
         "GPU time of kernels (and copies) by kernel class.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        for (int k = 0; k < tkp_classes_count(cl) && k < TKP_CLASSES_MAX; k++)
            if (c->cls_ns[k])
                fprintf(f, "tokprof_gpu_class_seconds_total{%s,class=\"%s\"} %.9f\n", lb,
                        tkp_classes_name(cl, k), (double)c->cls_ns[k] / 1e9);
    }
    head(f, "tokprof_process_running", "gauge", "1 while the process writes its capture.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        fprintf(f, "tokprof_process_running{%s} %d\n", lb, !c->ended);
    }
    if (!spec || !spec->nas) return;
    head(f, "tokprof_spec_violations_total", "counter", "Violations of each spec assertion.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        for (int a = 0; a < spec->nas; a++)
            fprintf(f, "tokprof_spec_violations_total{%s,assertion=\"%s\",severity=\"%s\"} %llu\n",
                    lb, spec->ids[a], spec->warn[a] ? "warn" : "error",
                    (unsigned long long)spec->violations(spec->arg, c->pid, a));
    }
    head(f, "tokprof_spec_ok", "gauge", "1 while the assertion has no violation so far.");
    for (size_t i = 0; i < np; i++) {
        const struct tkp_lcount *c = tkp_live_proc(l, i);
        proc_labels(lb, sizeof(lb), c, extra);
        for (int a = 0; a < spec->nas; a++)
            fprintf(f, "tokprof_spec_ok{%s,assertion=\"%s\",severity=\"%s\"} %d\n", lb,
                    spec->ids[a], spec->warn[a] ? "warn" : "error",
                    spec->violations(spec->arg, c->pid, a) == 0);
    }
}
