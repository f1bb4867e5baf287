/* tokprof summary: the capture at a glance.
 *
 * One streaming pass feeds each record to a struct summary (summary_add, the counts) and to the
 * step model (model.h); the views only read them. The text view opens with five lines for the
 * on-call engineer — tokens, latency, where the GPU time goes, the verdict, the worst steps —
 * then the counts; a DROPPED line before them when the shim dropped records.
 *
 * Definitions (token steps only; set-up work outside any step is left out), derived in the model
 * (ITL: model.h, tkp_itl_ns; verdict and worst steps: model/figures.c), this file only shows them:
 *   - inter-token latency (ITL): end_ns of a token step minus end_ns of the previous token step
 *     of the same thread (when the host saw consecutive tokens), pooled over threads;
 *   - GPU time by class: kernel durations summed per class (model.h: classes.h);
 *   - verdict: figures.h's one rule (the token steps' time split into the host waiting on the
 *     GPU, in launch calls, in its own code): "gpu-bound", "launch-bound", "host-bound" or
 *     "unknown" (no token step); GPU idle share = sum of idle / sum of GPU span over token steps
 *     (idle = span - busy, the GPU waiting inside a step), shown beside it with GPU records;
 *   - worst steps: the 3 token steps with the longest host duration; the cause is the figure
 *     that grew most over its median across token steps: a kernel class's GPU time, "GPU idle"
 *     (idle inside the span) or "host" (host duration not covered by the GPU span); "none" when
 *     nothing grew; "host" alone without GPU records.
 *
 * JSON keys (`tokprof summary --json`), stable; new keys may be added, none renamed:
 *   program         string   META program ("" when the capture has no META)
 *   pid             int      META pid (0 when unknown)
 *   duration_ns     int      last minus first timestamp among records and steps (0 if none)
 *   threads         int      distinct threads the capture mapped (THREAD records)
 *   steps           int      STEP records of kind token
 *   outside_steps   int      STEP records of kind outside (set-up work)
 *   warmup_steps    int      STEP records of kind warmup (the learned step definition, README
 *                            "Steps": a token end that is not the steady state's)
 *   part_steps      int      STEP records of kind part (a token step's earlier part: one
 *                            evaluation read back in parts, README "Steps")
 *   launches        int      LAUNCH records (kernel launches outside graphs)
 *   graph_launches  int      GRAPH_LAUNCH records
 *   copies          int      COPY records (memcpy and memset)
 *   syncs           int      SYNC records
 *   dropped         int      records the shim dropped: sum over threads of their last LOSS
 *   chunks          int      whole chunks decoded
 *   complete        bool     false when decoding stopped at a torn or bad chunk
 *   stopped_at      int|null file offset of that chunk
 *   stopped_why     str|null why, e.g. "incomplete chunk"
 *   missing_names   int      name references their chunk did not define (shown as "?")
 *   host_time_ns    int      the grain of the host times (TOKPROF_TIME_NS: each rounded down to
 *                            a multiple of it; the coarsest of the files'), 1 when exact
 *   tokens          int|null tokens processed over the token steps (prompt + generated), from
 *                            library-call shapes (libcalls.h's rule, streamed: analysis.h) or
 *                            kernel names that carry them (ggml's mul_mat_vec_q); null without
 *                            either
 *   tokens_unknown_steps int token steps whose tokens are unknown (a forward in several CUDA
 *                            graphs: analysis.h, TKP_HIDDEN_GRAPHS; a ggml mul_mat_q: more than
 *                            8); only when there are some
 *   analysis        object   `tokprof analyze --json`'s series_tid, change_points,
 *                            host_only_shifts, slopes, idle and
 *                            verdict (the same as verdict below)
 *   itl_ns          object   inter-token latency {p50, p90, p99, max}, each null with < 2 token
 *                            steps on every thread
 *   gpu             object   {available bool, reason str|null (why no GPU records),
 *                            busy_p50_ns, busy_p90_ns, busy_p99_ns, span_p50_ns (int|null),
 *                            timed_steps, token_steps (int), idle_share (0..1|null)}; the
 *                            busy and span percentiles and the idle share are over the
 *                            timed_steps: token steps with GPU kernel records. A step not
 *                            timed (TOKPROF_GPU=window:N/M, trigger) is unknown, never a 0
 *                            among them
 *   classes         array    [{class, ns, share}] GPU kernel time of token steps by class, most
 *                            first (empty without GPU records)
 *   verdict         string   "gpu-bound", "launch-bound", "host-bound" or "unknown" (figures.h)
 *   verdict_split   object|null {gpu_share, idle_wait_share, launch_share, own_share (0..1, they
 *                            add up to 1)}: the token steps' time the rule split
 *                            (figures.h); null when the verdict is unknown
 *   worst_steps     array    [{step (token index), tid, host_ns, cause}] the 3 slowest token steps
 *   processes       array    [{pid, program, threads, launches, graph_launches}] per process, in
 *                            the order first seen (one entry for one capture; several captures or
 *                            a directory are merged: multireader.h); `pid` and `program` above
 *                            are the last META's
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/json.h"
#include "base/sort.h"
#include "model/analysis.h"
#include "model/figures.h"
#include "model/model.h"
#include "model/norms.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "capture/record.h"

/* What the model says, computed once for both views. */
struct insight {
    struct tkp_run_figs rf;     /* ITL, verdict, worst steps: figures.h */
    int order[TKP_CLASSES_MAX]; /* classes by GPU time, most first */
    int nclasses_used;
    uint64_t class_total;
    struct tkp_norms nr;
    struct tkp_acc *acc;     /* analysis.h: tokens per step, idle split */
    struct tkp_analysis an;  /* change points and slopes */
    uint64_t tokens, tsteps; /* tokens over the token steps whose tokens are known */
    uint64_t hidden; /* token steps of unknown tokens: analysis.h, TKP_HIDDEN_GRAPHS */
    uint64_t many;   /* ... and those whose kernel names say more than 8 (ggml's mul_mat_q) */
    int kernels;     /* the tokens come from kernel names (tkp_acc_has_kernel_tokens) */
    uint64_t busy[3]; /* GPU busy per step p50, p90, p99 over the timed token steps (nr.gpu_steps) */
};

struct thread_sum {
    unsigned char mapped, lost;
    uint64_t dropped; /* last LOSS value: they are cumulative */
};

#define PROCS_MAX 64 /* processes listed; the counts above cover all */

struct proc {
    uint64_t pid, threads, launches, graph_launches;
    char program[64];
};

struct summary {
    struct proc procs[PROCS_MAX];
    size_t nprocs;
    int merged; /* several files: records are told apart by pid (else all are one process) */
    char program[TKP_NAME_MAX];
    uint64_t pid;
    uint64_t time_ns; /* the coarsest host-time grain a META gave (TOKPROF_TIME_NS); 1 exact */
    uint64_t first_ns, last_ns;
    uint64_t steps, outside_steps, warmup_steps, part_steps, launches, graph_launches, copies, syncs;
    struct thread_sum *threads; /* by capture-local thread index */
    uint32_t nthreads;
    uint64_t ringless; /* LOSS of threads that never got a ring (thread TKP_THREAD_NONE) */
};

static int thread_at(struct summary *s, uint32_t t, struct thread_sum **out)
{
    if (t >= s->nthreads) { /* t < TKP_THREADS_MAX: the reader checked */
        size_t cap = s->nthreads;
        if (tkp_grow_zeroed((void **)&s->threads, &cap, (size_t)t + 1, sizeof(*s->threads)))
            return TKP_ERR_NOMEM;
        s->nthreads = (uint32_t)cap;
    }
    *out = &s->threads[t];
    return 0;
}

static inline void saw_time(struct summary *s, uint64_t ns)
{
    if (ns > s->last_ns) { /* the usual case: time goes forward */
        s->last_ns = ns;
        if (!s->first_ns) s->first_ns = ns;
    } else if (ns && (!s->first_ns || ns < s->first_ns)) {
        s->first_ns = ns;
    }
}

static struct proc *proc_at(struct summary *s, uint64_t pid)
{
    for (size_t i = 0; i < s->nprocs; i++)
        if (s->procs[i].pid == pid) return &s->procs[i];
    if (s->nprocs == PROCS_MAX) return NULL;
    s->procs[s->nprocs].pid = pid;
    return &s->procs[s->nprocs++];
}

static int summary_other(struct summary *s, const struct tkp_record *r);

/* The counts of one record (run() sets nprocs and launches of a single file's process). */
static inline int summary_add(struct summary *s, const struct tkp_record *r)
{
    if (r->type == TKP_REC_LAUNCH && !s->merged) { /* most records */
        saw_time(s, r->host_ns);
        s->launches++;
        return 0;
    }
    return summary_other(s, r);
}

static int summary_other(struct summary *s, const struct tkp_record *r)
{
    struct thread_sum *t;
    /* a record before its file's META has pid 0: one file is one process whatever it says */
    struct proc *p = s->merged ? proc_at(s, r->pid) : &s->procs[0];
    if (tkp_record_has_time(r->type)) saw_time(s, r->host_ns);
    switch (r->type) {
    case TKP_REC_META:
        snprintf(s->program, sizeof(s->program), "%s", r->meta.program);
        s->pid = r->meta.pid;
        uint64_t q = tkp_meta_config_uint(r, "time_ns", 1);
        if (q > s->time_ns) s->time_ns = q;
        if (p) snprintf(p->program, sizeof(p->program), "%s", r->meta.program);
        if (p && !s->merged) p->pid = r->meta.pid;
        break;
    case TKP_REC_THREAD:
        if (thread_at(s, r->thread, &t)) return TKP_ERR_NOMEM;
        if (p && !t->mapped) p->threads++;
        t->mapped = 1;
        break;
    case TKP_REC_LOSS:
        if (r->thread == TKP_THREAD_NONE) { /* no thread entry: thread_at would never end */
            s->ringless = r->loss.dropped;     /* cumulative, like a thread's */
            break;
        }
        if (thread_at(s, r->thread, &t)) return TKP_ERR_NOMEM;
        t->lost = 1;
        t->dropped = r->loss.dropped;
        break;
    case TKP_REC_STEP:
        if (r->step_rec.kind == TKP_STEP_TOKEN)
            s->steps++;
        else if (r->step_rec.kind == TKP_STEP_OUTSIDE)
            s->outside_steps++;
        else if (r->step_rec.kind == TKP_STEP_WARMUP)
            s->warmup_steps++;
        else if (r->step_rec.kind == TKP_STEP_PART)
            s->part_steps++;
        saw_time(s, r->step_rec.begin_ns);
        saw_time(s, r->step_rec.end_ns);
        break;
    case TKP_REC_LAUNCH: /* merged */
        s->launches++;
        if (p) p->launches++;
        break;
    case TKP_REC_GRAPH_LAUNCH:
        s->graph_launches++;
        if (p) p->graph_launches++;
        break;
    case TKP_REC_COPY:
        s->copies++;
        break;
    case TKP_REC_SYNC:
        s->syncs++;
        break;
    default:
        break;
    }
    return 0;
}

/* Why the shim drops (shim/record/ring.c): a thread's ring was full, or the rings' budget
 * (TOKPROF_BUFFER_MB) had none for a thread. */
#define DROP_WHY "a thread's ring was full, or TOKPROF_BUFFER_MB had no ring for it"

static void totals(const struct summary *s, uint64_t *threads, uint64_t *dropped)
{
    *threads = *dropped = 0;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        *threads += s->threads[i].mapped;
        *dropped += s->threads[i].dropped;
    }
    *dropped += s->ringless;
}

static int insight_make(const struct tkp_model *m, struct insight *in)
{
    struct tkp_acc *acc = in->acc;
    memset(in, 0, sizeof(*in));
    in->acc = acc;
    if (tkp_model_norms(m, &in->nr) || tkp_run_figs_make(m, &in->nr, &in->rf)) return TKP_ERR_NOMEM;
    /* analysis.h's rule; counted: the tokens a step's own shapes or kernel names give (a part's
     * in its token step's), not the rules that carry a figure over ("previous", "assumed") */
    uint64_t *tok = malloc((m->nsteps ? m->nsteps : 1) * sizeof(*tok));
    int *src = malloc((m->nsteps ? m->nsteps : 1) * sizeof(*src));
    if (!tok || !src) return free(tok), free(src), TKP_ERR_NOMEM;
    tkp_step_tokens(m, in->acc, tok, src);
    in->kernels = tkp_acc_has_kernel_tokens(in->acc);
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_astep as;
        if (m->steps[i].kind != TKP_STEP_TOKEN || !tkp_acc_step_of(in->acc, m, i, &as)) continue;
        if (src[i] == TKP_TOK_SHAPES || src[i] == TKP_TOK_KERNELS) in->tokens += tok[i], in->tsteps++;
        else if (src[i] == TKP_TOK_NONE && !as.hidden && in->kernels) in->many++;
        in->hidden += (uint64_t)as.hidden;
    }
    free(tok), free(src);
    if (tkp_analysis_make(m, in->acc, &in->an)) return TKP_ERR_NOMEM;
    /* busy percentiles over the token steps that have GPU records (norms.h's set): a step that
     * was not timed (TOKPROF_GPU=window:N/M, trigger) is unknown, not a 0 among them */
    uint64_t *v = malloc((in->nr.gpu_steps ? in->nr.gpu_steps : 1) * sizeof(*v));
    if (!v) return TKP_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->nsteps && n < in->nr.gpu_steps; i++)
        if (m->steps[i].kind == TKP_STEP_TOKEN && m->steps[i].gpu_kernels)
            v[n++] = m->steps[i].busy_ns;
    static const double q[3] = {0.5, 0.9, 0.99};
    tkp_pcts_u64(v, n, q, 3, in->busy);
    free(v);
    for (int c = 0; c < m->nclasses; c++) {
        in->class_total += m->cls[c].total_ns;
        if (!m->cls[c].total_ns) continue;
        int k = in->nclasses_used++;
        in->order[k] = c;
        for (; k > 0 && m->cls[in->order[k - 1]].total_ns < m->cls[c].total_ns; k--) {
            in->order[k] = in->order[k - 1];
            in->order[k - 1] = c;
        }
    }
    return 0;
}

static void json_pct(FILE *f, const char *key, int has, uint64_t v)
{
    if (has) fprintf(f, "\"%s\":%" PRIu64, key, v);
    else fprintf(f, "\"%s\":null", key);
}

static void print_json_insight(FILE *f, const struct tkp_model *m, const struct insight *in)
{
    if (in->tsteps) fprintf(f, ",\"tokens\":%" PRIu64, in->tokens);
    else fputs(",\"tokens\":null", f);
    if (in->hidden + in->many)
        fprintf(f, ",\"tokens_unknown_steps\":%" PRIu64, in->hidden + in->many);
    fputs(",\"itl_ns\":{", f);
    static const char *const k[] = {"p50", "p90", "p99", "max"};
    for (int i = 0; i < 4; i++) {
        if (i) putc(',', f);
        json_pct(f, k[i], in->rf.nitl > 0, in->rf.itl[i]);
    }
    fprintf(f, "},\"gpu\":{\"available\":%s,\"reason\":", in->rf.gpu ? "true" : "false");
    tkp_json_str(f, in->rf.gpu ? NULL : in->rf.why);
    int g = in->rf.gpu && in->nr.gpu_steps;
    putc(',', f);
    json_pct(f, "busy_p50_ns", g, in->busy[0]);
    putc(',', f);
    json_pct(f, "busy_p90_ns", g, in->busy[1]);
    putc(',', f);
    json_pct(f, "busy_p99_ns", g, in->busy[2]);
    fprintf(f, ",\"timed_steps\":%zu,\"token_steps\":%zu,", in->rf.gpu ? in->nr.gpu_steps : 0,
            in->nr.token_steps);
    json_pct(f, "span_p50_ns", g, in->nr.span_p50);
    if (g)
        fprintf(f, ",\"idle_share\":%.6f}", in->rf.idle_share);
    else fputs(",\"idle_share\":null}", f);
    fputs(",\"classes\":[", f);
    for (int i = 0; i < in->nclasses_used; i++) {
        int c = in->order[i];
        fputs(i ? ",{\"class\":" : "{\"class\":", f);
        tkp_json_str(f, tkp_classes_name(m->opts.classes, c));
        fprintf(f, ",\"ns\":%" PRIu64 ",\"share\":%.6f}", m->cls[c].total_ns,
                (double)m->cls[c].total_ns / (double)in->class_total);
    }
    const struct tkp_verdict *v = &in->rf.v;
    fprintf(f, "],\"verdict\":\"%s\",\"verdict_split\":", v->word);
    if (strcmp(v->word, "unknown"))
        fprintf(f,
                "{\"gpu_share\":%.6f,\"idle_wait_share\":%.6f,\"launch_share\":%.6f,"
                "\"own_share\":%.6f}",
                v->gpu_share, v->idle_wait_share, v->launch_share, v->own_share);
    else
        fputs("null", f);
    fputs(",\"worst_steps\":[", f);
    for (size_t w = 0; w < in->rf.nworst; w++) {
        const struct tkp_mstep *s = &m->steps[in->rf.worst[w]];
        fprintf(f, "%s{\"step\":%" PRId64 ",\"tid\":%u,\"host_ns\":%" PRIu64 ",\"cause\":",
                w ? "," : "", s->index, s->tid, tkp_mstep_host_ns(s));
        tkp_json_str(f, in->rf.cause[w]);
        putc('}', f);
    }
    fputs("],\"analysis\":{", f);
    tkp_analysis_print_json(f, m, &in->an);
    fprintf(f, ",\"verdict\":\"%s\"}", in->an.verdict);
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void print_text_insight(FILE *f, const struct summary *s, const struct tkp_model *m,
                               const struct insight *in, uint64_t dropped)
{
    uint64_t threads = 0;
    for (uint32_t i = 0; i < s->nthreads; i++)
        threads += s->threads[i].mapped;
    if (dropped) /* before the five lines: every figure in them is short of what ran */
        fprintf(f, "DROPPED   %" PRIu64 " records (%s): every count and share below is low\n",
                dropped, DROP_WHY);
    fprintf(f, "tokens    %" PRIu64 " token steps on %" PRIu64 " thread%s", s->steps, threads,
            threads == 1 ? "" : "s");
    if (in->tsteps && in->kernels)
        fprintf(f,
                ", %" PRIu64 " tokens in %" PRIu64 " of them (%.2f per step, from kernel names: "
                "ggml's mul_mat_vec_q); %" PRIu64 " unknown (mul_mat_q: more than 8)\n",
                in->tokens, in->tsteps, (double)in->tokens / (double)in->tsteps,
                in->many + in->hidden);
    else if (in->tsteps && in->hidden)
        fprintf(f,
                ", %" PRIu64 " tokens in %" PRIu64 " of them (%.2f per step, from library-call "
                "shapes); %" PRIu64 " unknown (a forward in several CUDA graphs)\n",
                in->tokens, in->tsteps, (double)in->tokens / (double)in->tsteps, in->hidden);
    else if (in->tsteps)
        fprintf(f, ", %" PRIu64 " tokens (%.2f per step, from library-call shapes)\n", in->tokens,
                (double)in->tokens / (double)in->tsteps);
    else
        fputs(" (tokens per step: not known)\n", f);
    if (in->rf.nitl)
        fprintf(f, "latency   inter-token p50 %.3f ms, p90 %.3f, p99 %.3f, max %.3f",
                ms(in->rf.itl[0]), ms(in->rf.itl[1]), ms(in->rf.itl[2]), ms(in->rf.itl[3]));
    else
        fputs("latency   inter-token: fewer than 2 token steps", f);
    if (in->rf.gpu && in->nr.gpu_steps) {
        fprintf(f, "; GPU busy per step p50 %.3f ms, p99 %.3f", ms(in->busy[0]), ms(in->busy[2]));
        if (in->nr.gpu_steps < in->nr.token_steps)
            fprintf(f, " over the %zu timed of %zu token steps (TOKPROF_GPU=%s; the others "
                       "unknown)", in->nr.gpu_steps, in->nr.token_steps,
                    m->gpu_mode[0] ? m->gpu_mode : "?");
        putc('\n', f);
    } else
        fputs("; GPU busy: not recorded\n", f);
    char vt[256];
    tkp_verdict_text(&in->rf.v, vt, sizeof(vt));
    if (!in->rf.gpu) {
        fprintf(f, "gpu time  not recorded: %s\n", in->rf.why);
        fprintf(f, "verdict   %s\n", vt);
    } else {
        fputs("gpu time ", f);
        for (int i = 0; i < in->nclasses_used && i < 4; i++)
            fprintf(f, "%s %s %.1f%%", i ? "," : "", tkp_classes_name(m->opts.classes, in->order[i]),
                    100.0 * (double)m->cls[in->order[i]].total_ns / (double)in->class_total);
        fputs(in->nclasses_used ? "\n" : " no kernels in token steps\n", f);
        fprintf(f, "verdict   %s\n", vt);
    }
    fputs("worst    ", f);
    for (size_t w = 0; w < in->rf.nworst; w++) {
        const struct tkp_mstep *st = &m->steps[in->rf.worst[w]];
        fprintf(f, "%s step %" PRId64 " (tid %u) %.3f ms: %s", w ? ";" : "", st->index, st->tid,
                ms(tkp_mstep_host_ns(st)), in->rf.cause[w]);
        if (in->rf.cause_ns[w] > 0) fprintf(f, " +%.3f ms", ms((uint64_t)in->rf.cause_ns[w]));
    }
    fputs(in->rf.nworst ? "\n" : " no token steps\n", f);
    tkp_analysis_print_lines(f, m, &in->an);
}

static void print_json(FILE *f, const struct summary *s, const struct tkp_reader *r,
                       const struct tkp_model *m, const struct insight *in)
{
    const struct tkp_reader_err *e = tkp_reader_error(r);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    uint64_t threads, dropped;
    totals(s, &threads, &dropped);
    fputs("{\"program\":", f);
    tkp_json_str(f, s->program);
    fprintf(f,
            ",\"pid\":%" PRIu64 ",\"duration_ns\":%" PRIu64 ",\"threads\":%" PRIu64
            ",\"steps\":%" PRIu64 ",\"outside_steps\":%" PRIu64 ",\"warmup_steps\":%" PRIu64
            ",\"part_steps\":%" PRIu64 ",\"launches\":%" PRIu64
            ",\"graph_launches\":%" PRIu64 ",\"copies\":%" PRIu64 ",\"syncs\":%" PRIu64
            ",\"dropped\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"complete\":%s",
            s->pid, s->last_ns - s->first_ns, threads, s->steps, s->outside_steps,
            s->warmup_steps, s->part_steps, s->launches, s->graph_launches, s->copies, s->syncs, dropped,
            st->chunks, e ? "false" : "true");
    if (e) {
        fprintf(f, ",\"stopped_at\":%" PRIu64 ",\"stopped_why\":", e->offset);
        tkp_json_str(f, e->msg);
    } else {
        fputs(",\"stopped_at\":null,\"stopped_why\":null", f);
    }
    fprintf(f, ",\"missing_names\":%" PRIu64 ",\"host_time_ns\":%" PRIu64, st->missing_names,
            s->time_ns);
    print_json_insight(f, m, in);
    fputs(",\"processes\":[", f);
    for (size_t i = 0; i < s->nprocs; i++) {
        const struct proc *p = &s->procs[i];
        fprintf(f, "%s{\"pid\":%" PRIu64 ",\"program\":", i ? "," : "", p->pid);
        tkp_json_str(f, p->program);
        fprintf(f,
                ",\"threads\":%" PRIu64 ",\"launches\":%" PRIu64 ",\"graph_launches\":%" PRIu64
                "}",
                p->threads, p->launches, p->graph_launches);
    }
    putc(']', f);
    fputs("}\n", f);
}

static void print_text(FILE *f, const char *path, const struct summary *s,
                       const struct tkp_reader *r, const struct tkp_model *m,
                       const struct insight *in)
{
    const struct tkp_reader_err *e = tkp_reader_error(r);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    uint64_t threads, dropped;
    totals(s, &threads, &dropped);
    print_text_insight(f, s, m, in, dropped);
    if (tkp_reader_nfiles(r) > 1)
        fprintf(f, "capture   %zu files (%s, ...): %" PRIu64 " chunks", tkp_reader_nfiles(r), path,
                st->chunks);
    else
        fprintf(f, "capture   %s: %" PRIu64 " chunks", path, st->chunks);
    if (e)
        fprintf(f, ", stopped at byte %" PRIu64 " (%s)", e->offset, e->msg);
    else
        fputs(", complete", f);
    if (s->time_ns > 1) /* TOKPROF_TIME_NS: launch gaps are known to that, not to the ns */
        fprintf(f, "; host times to %" PRIu64 " ns", s->time_ns);
    putc('\n', f);
    if (s->nprocs > 1) {
        fprintf(f, "processes %zu:", s->nprocs);
        for (size_t i = 0; i < s->nprocs; i++)
            fprintf(f, "%s %s (pid %" PRIu64 ") %" PRIu64 " threads, %" PRIu64 " launches",
                    i ? ";" : "", s->procs[i].program[0] ? s->procs[i].program : "?",
                    s->procs[i].pid, s->procs[i].threads, s->procs[i].launches);
        putc('\n', f);
    } else {
        fprintf(f, "program   %s (pid %" PRIu64 ")\n", s->program[0] ? s->program : "?", s->pid);
    }
    fprintf(f, "duration  %.6f s\n", (double)(s->last_ns - s->first_ns) / 1e9);
    fprintf(f, "threads   %" PRIu64 "\n", threads);
    fprintf(f, "steps     %" PRIu64 " token steps, %" PRIu64 " outside any step", s->steps,
            s->outside_steps);
    if (s->warmup_steps)
        fprintf(f, ", %" PRIu64 " warm-up (not tokens: README \"Steps\")", s->warmup_steps);
    if (s->part_steps)
        fprintf(f, ", %" PRIu64 " part of the next token step (README \"Steps\")", s->part_steps);
    fputc('\n', f);
    fprintf(f, "launches  %" PRIu64 " kernel, %" PRIu64 " graph\n", s->launches, s->graph_launches);
    fprintf(f, "copies    %" PRIu64 "\n", s->copies);
    fprintf(f, "syncs     %" PRIu64 "\n", s->syncs);
    if (dropped)
        fprintf(f, "dropped   %" PRIu64 " records (counts above are low: the first line)\n",
                dropped);
    else
        fputs("dropped   0 records\n", f);
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path;
    int json, err;
    struct tkp_classes *cl;
    if ((err = tkp_cmd_args_json_classes(ctx, argc, argv, &path, &json, &cl))) return err;
    struct tkp_reader *r;
    struct tkp_record rec;
    struct tkp_model m;
    struct insight in;
    /* from 0: the per-class figures cover token steps, not set-up work */
    struct tkp_model_opts mo = {.classes = cl, .from = 0, .to = -1};
    struct summary *s = calloc(1, sizeof(*s));
    if (!s) {
        tkp_classes_free(cl);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    }
    if ((err = tkp_cmd_open(ctx, path, &r))) {
        tkp_classes_free(cl);
        free(s);
        return err;
    }
    s->merged = tkp_reader_nfiles(r) > 1;
    s->time_ns = 1; /* exact until a META says otherwise */
    tkp_model_init(&m, &mo);
    memset(&in, 0, sizeof(in));
    struct tkp_acc *acc = NULL;
    err = tkp_acc_bind(&m, &acc);
    uint64_t nrec = 0;
    struct tkp_run_full rb;
    rec.type = TKP_REC_CHUNK;
    while (!err) {
        size_t nb;
        /* a RUN's launches and library calls in bulk: what summary_add and tkp_model_add do
         * with each, a batch at a time; the first of a run comes through tkp_reader_next (the
         * model's slow path opens the step) */
        if (!s->merged && (rec.type == TKP_REC_LAUNCH || rec.type == TKP_REC_LIB_CALL) &&
            (nb = tkp_reader_peek_full(r, &rb)) && (nb = tkp_model_add_run(&m, &rb, nb))) {
            /* saw_time's result is the least time above 0 and the greatest, in any order: the
             * model's figures of the records it took */
            uint64_t libs = m.run_libs;
            if (m.run_hi) saw_time(s, m.run_lo1 + 1), saw_time(s, m.run_hi);
            s->launches += nb - libs;
            nrec += nb;
            tkp_reader_take_full(r, &rb, nb);
            continue;
        }
        if (tkp_reader_next(r, &rec) != 1) break;
        nrec++;
        if (!(err = summary_add(s, &rec))) err = tkp_model_add(&m, &rec);
    }
    if (!s->merged && nrec) /* a single file's one process */
        s->nprocs = 1, s->procs[0].launches = s->launches;
    if (!err && !(err = tkp_model_finish(&m))) {
        in.acc = acc;
        err = insight_make(&m, &in);
    }
    if (err) {
        tkp_cmd_fail(ctx, err, "%s: %s", path, tkp_strerror(err));
    } else {
        tkp_cmd_warn_reader(ctx, path, r);
        if (m.late)
            ctx->warn(ctx, "%s: %llu GPU records arrived long after their step: busy time of "
                      "those steps is approximate", path, (unsigned long long)m.late);
        if (json)
            print_json(ctx->out, s, r, &m, &in);
        else
            print_text(ctx->out, path, s, r, &m, &in);
    }
    tkp_norms_free(&in.nr);
    tkp_analysis_free(&in.an);
    tkp_acc_free(acc);
    tkp_model_free(&m);
    tkp_classes_free(cl);
    tkp_reader_close(r);
    free(s->threads);
    free(s);
    return err;
}

const struct tkp_cmd tkp_cmd_summary = {
    .name = "summary",
    .brief = "the capture at a glance: latency, GPU time by class, verdict, worst steps",
    .usage =
        "usage: tokprof summary [--json] [--classes FILE] CAPTURE...\n"
        "\n"
        "The capture FILE at a glance. Five lines first: token steps, inter-token latency and\n"
        "GPU busy time per step, where the GPU time goes by kernel class, whether the run is\n"
        "gpu-bound, launch-bound or host-bound (the host's time: waiting on the GPU, in launch\n"
        "calls, in its own code; README \"Verdict\"), and the 3 slowest\n"
        "steps with what grew in them. Then the counts: token steps, kernel and graph launches,\n"
        "copies, syncs, threads, records the shim had to drop, and the span of time covered. A\n"
        "capture cut short (a killed program) is summarised up to its last whole chunk, with a\n"
        "warning. Without GPU records the GPU lines say why.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "  --json          one JSON object with stable keys, for scripts\n"
        "  --classes FILE  extra 'CLASS REGEX' lines, tried before the built-in classes\n"
        "\n"
        "example: fail a CI job when the shim dropped records\n"
        "  test \"$(tokprof summary --json server.1234.tokprof | jq .dropped)\" = 0\n",
    .run = run,
};
