/* tokprof export --format perfetto|chrome -o FILE.json CAPTURE: the capture as Chrome trace event
 * JSON ({"traceEvents": [...]}), which chrome://tracing and the Perfetto UI both open.
 *
 * Tracks: pid 1 "host" with one tid per OS thread — launches and copies as zero-length "X"
 * slices at their host_ns, syncs as "X" slices of wait_ns; pid 2 "GPU" with one tid per CUPTI
 * stream — kernels and GPU copies as "X" slices; pid 3 "tokens" with one tid per OS thread — one
 * "X" slice per token step (begin_ns .. end_ns, named "step N"; steps that overlap go to extra
 * lanes, tid + lane x 10^7). A kernel joined to its launch
 * gets a flow arrow: "s" at the launch (on the host track) and "f" (binding point "e") at the
 * kernel's start, sharing an id "thread.seg.join.index"; both are written when the kernel is
 * read, and only when its launch's host time is still known (analysis.h's open window), so every
 * start has its end. Times are µs relative to the first chunk's base, printed with 3 decimals
 * (ns precision). Streaming: each record becomes its events as it is read; memory is the
 * analysis accumulator's window, never the records. "perfetto" and "chrome" write the same JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "cmd/cmd.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/json.h"
#include "capture/reader.h"
#include "tokprof/format.h"

#define PID_HOST 1
#define PID_GPU 2
#define PID_TOKENS 3
/* Token steps of one thread overlap when the host waits for step N during step N+1 (async
 * scheduling): they go to the first of LANES tracks of that thread where they do not overlap. */
#define LANES 4
#define LANE_TID(tid, lane) ((tid) + (uint64_t)(lane) * 10000000ull)

struct ex {
    FILE *f;
    uint64_t base;
    int have_base, first;
    uint64_t *tids; /* OS tids seen (thread_name metadata once each) */
    uint64_t (*lanes)[LANES]; /* per tid: where each token-track lane's last slice ends */
    size_t ntids, captids;
    uint32_t streams[256]; /* GPU streams named so far */
    size_t nstreams;
};

static void ts(struct ex *e, uint64_t ns)
{
    int64_t d = (int64_t)(ns - e->base);
    if (d < 0) fprintf(e->f, "-%" PRId64 ".%03" PRId64, -d / 1000, -d % 1000);
    else fprintf(e->f, "%" PRId64 ".%03" PRId64, d / 1000, d % 1000);
}

static void begin(struct ex *e)
{
    fputs(e->first ? "\n" : ",\n", e->f);
    e->first = 0;
}

static void meta(struct ex *e, int pid, uint64_t tid, const char *what, const char *name)
{
    begin(e);
    fprintf(e->f, "{\"ph\":\"M\",\"ts\":0,\"pid\":%d,\"tid\":%" PRIu64 ",\"name\":\"%s\",\"args\":{\"name\":",
            pid, tid, what);
    tkp_json_str(e->f, name);
    fputs("}}", e->f);
}

static int host_tid(struct ex *e, uint64_t tid, size_t *at)
{
    for (size_t i = 0; i < e->ntids; i++)
        if (e->tids[i] == tid) return *at = i, 0;
    if (e->ntids == e->captids) { /* two arrays of one capacity */
        size_t c = e->captids;
        if (TKP_GROW(e->tids, c, e->ntids + 1)) return TKP_ERR_NOMEM;
        c = e->captids;
        if (TKP_GROW(e->lanes, c, e->ntids + 1)) return TKP_ERR_NOMEM;
        e->captids = c;
    }
    memset(e->lanes[e->ntids], 0, sizeof(*e->lanes));
    *at = e->ntids;
    e->tids[e->ntids++] = tid;
    char b[48];
    snprintf(b, sizeof(b), "thread %" PRIu64, tid);
    meta(e, PID_HOST, tid, "thread_name", b);
    for (int l = 0; l < LANES; l++) {
        snprintf(b, sizeof(b), "thread %" PRIu64 "%s", tid, l ? " (overlapping steps)" : "");
        meta(e, PID_TOKENS, LANE_TID(tid, l), "thread_name", b);
    }
    return 0;
}

static void slice(struct ex *e, int pid, uint64_t tid, const char *name, const char *cat,
                  uint64_t t0, uint64_t dur)
{
    begin(e);
    fputs("{\"ph\":\"X\",\"name\":", e->f);
    tkp_json_str(e->f, name);
    fprintf(e->f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":", cat, pid, tid);
    ts(e, t0);
    fprintf(e->f, ",\"dur\":%" PRIu64 ".%03" PRIu64 "}", dur / 1000, dur % 1000);
}

static void flow(struct ex *e, char ph, int pid, uint64_t tid, uint64_t t, const struct tkp_record *r)
{
    begin(e);
    fprintf(e->f, "{\"ph\":\"%c\",\"name\":\"launch\",\"cat\":\"flow\",\"id\":\"%u.%" PRIu64 ".%u.%u\","
                  "\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":",
            ph, r->thread, r->step, r->gpu.join, r->gpu.index, pid, tid);
    ts(e, t);
    fputs(ph == 'f' ? ",\"bp\":\"e\"}" : "}", e->f);
}

static const char *sync_name(uint32_t k)
{
    static const char *const n[] = {"stream sync", "event sync", "device sync", "context sync",
                                    "event query", "blocking copy"};
    return k < 6 ? n[k] : "sync";
}

static int gpu_stream(struct ex *e, uint32_t s)
{
    for (size_t i = 0; i < e->nstreams; i++)
        if (e->streams[i] == s) return 0;
    if (e->nstreams < sizeof(e->streams) / sizeof(*e->streams)) e->streams[e->nstreams++] = s;
    char b[32];
    snprintf(b, sizeof(b), "stream %u", s);
    meta(e, PID_GPU, s, "thread_name", b);
    return 0;
}

static int one(struct ex *e, struct tkp_acc *acc, const struct tkp_record *r)
{
    char b[64];
    uint64_t h;
    int err = 0;
    if (r->type == TKP_REC_CHUNK && !e->have_base) {
        e->base = r->chunk.base_ns, e->have_base = 1;
        meta(e, PID_HOST, 0, "process_name", "host");
        meta(e, PID_GPU, 0, "process_name", "GPU");
        meta(e, PID_TOKENS, 0, "process_name", "tokens");
    }
    int hosty = r->type == TKP_REC_LAUNCH || r->type == TKP_REC_GRAPH_LAUNCH ||
                r->type == TKP_REC_COPY || r->type == TKP_REC_SYNC || r->type == TKP_REC_STEP;
    size_t ti = 0;
    if (hosty && (err = host_tid(e, r->tid, &ti))) return err;
    switch (r->type) {
    case TKP_REC_LAUNCH:
        slice(e, PID_HOST, r->tid, r->launch.name, "launch", r->host_ns, 0);
        break;
    case TKP_REC_GRAPH_LAUNCH:
        snprintf(b, sizeof(b), "graph launch %" PRIu64, r->graph_launch.graph);
        slice(e, PID_HOST, r->tid, b, "launch", r->host_ns, 0);
        break;
    case TKP_REC_COPY:
        slice(e, PID_HOST, r->tid, r->copy.kind ? "memset" : "memcpy", "copy", r->host_ns, 0);
        break;
    case TKP_REC_SYNC:
        slice(e, PID_HOST, r->tid, sync_name(r->sync.kind), "sync", r->host_ns, r->sync.wait_ns);
        break;
    case TKP_REC_STEP:
        if (r->step_rec.kind != TKP_STEP_TOKEN || r->step_rec.end_ns < r->step_rec.begin_ns) break;
        snprintf(b, sizeof(b), "step %" PRIu64, r->step);
        int lane = 0;
        while (lane < LANES - 1 && e->lanes[ti][lane] > r->step_rec.begin_ns)
            lane++;
        e->lanes[ti][lane] = r->step_rec.end_ns;
        slice(e, PID_TOKENS, LANE_TID(r->tid, lane), b, "step", r->step_rec.begin_ns,
              r->step_rec.end_ns - r->step_rec.begin_ns);
        break;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        gpu_stream(e, r->gpu.stream);
        slice(e, PID_GPU, r->gpu.stream,
              r->type == TKP_REC_GPU_KERNEL ? r->gpu.name : r->gpu.kind ? "memset" : "memcpy",
              r->type == TKP_REC_GPU_KERNEL ? "kernel" : "copy", r->gpu.start_ns,
              r->gpu.end_ns - r->gpu.start_ns);
        if (r->type == TKP_REC_GPU_KERNEL && r->thread != TKP_GPU_THREAD_NONE &&
            (r->gpu.join == TKP_JOIN_LAUNCH || r->gpu.join == TKP_JOIN_GRAPH_LAUNCH) &&
            tkp_acc_launch_ns(acc, r->thread, r->step, r->gpu.join, r->gpu.index, &h)) {
            flow(e, 's', PID_HOST, r->tid, h, r);
            flow(e, 'f', PID_GPU, r->gpu.stream, r->gpu.start_ns, r);
        }
        break;
    default:
        break;
    }
    return ferror(e->f) ? TKP_ERR_IO : 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path, *out = NULL, *format = "perfetto";
    int err;
    const struct tkp_opt opts[] = {{"--format", 's', &format, 0, NULL, NULL},
                                   {"-o", 's', &out, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse(ctx, argc, argv, opts, 2, &path))) return err;
    if (strcmp(format, "perfetto") && strcmp(format, "chrome"))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--format perfetto or chrome, not '%s'", format);
    if (!out) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "-o FILE.json needed");
    struct tkp_reader *r;
    struct tkp_record rec;
    struct tkp_acc *acc;
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    if ((err = tkp_acc_new(&acc))) {
        tkp_reader_close(r);
        return tkp_cmd_fail(ctx, err, "out of memory");
    }
    struct ex e = {.first = 1};
    if (!(e.f = tkp_cmd_output(ctx, out, "w"))) {
        err = tkp_cmd_fail(ctx, TKP_ERR_IO, "%s: %s", out, strerror(errno));
    } else {
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", e.f);
        /* the acc first: it must know a launch before its kernel asks for it */
        while (!err && tkp_reader_next(r, &rec) == 1)
            if (!(err = tkp_acc_add(acc, &rec))) err = one(&e, acc, &rec);
        fputs("\n]}\n", e.f);
        if (!err) tkp_cmd_warn_reader(ctx, path, r);
        int to_out = e.f == ctx->out;
        if (to_out ? fflush(e.f) : fclose(e.f)) err = err ? err : TKP_ERR_IO;
        if (err) tkp_cmd_fail(ctx, err, "%s: %s", err == TKP_ERR_IO ? out : path, tkp_strerror(err));
    }
    free(e.tids);
    free(e.lanes);
    tkp_acc_free(acc);
    tkp_reader_close(r);
    return err;
}

const struct tkp_cmd tkp_cmd_export = {
    .name = "export",
    .brief = "the capture as a Perfetto / Chrome trace (JSON) for timeline viewers",
    .usage =
        "usage: tokprof export [--format perfetto|chrome] -o FILE.json CAPTURE...\n"
        "\n"
        "Writes the capture as Chrome trace event JSON, which ui.perfetto.dev and\n"
        "chrome://tracing open: host threads with launches, copies and syncs (as long as the\n"
        "host waited), GPU streams with kernels and copies, arrows from each launch to its\n"
        "kernel, and a 'tokens' track with one slice per token step. Times are microseconds\n"
        "from the start of the capture, with nanosecond precision. '-o -' writes to stdout.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "\n"
        "example:\n"
        "  tokprof export -o trace.json server.1234.tokprof   # then open it in ui.perfetto.dev\n",
    .run = run,
};
