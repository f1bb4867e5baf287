/* tokprof summary: the capture at a glance.
 *
 * One streaming pass feeds each record to a struct summary (summary_add); the views only read
 * it. Per-step analysis (a model of steps and tokens) plugs in as another consumer in the same
 * loop and another section in the views.
 *
 * JSON keys (`tokprof summary --json`), stable; new keys may be added, none renamed:
 *   program         string   META program ("" when the capture has no META)
 *   pid             int      META pid (0 when unknown)
 *   duration_ns     int      last minus first timestamp among records and steps (0 if none)
 *   threads         int      distinct threads the capture mapped (THREAD records)
 *   steps           int      STEP records of kind token
 *   outside_steps   int      STEP records of kind outside (set-up work)
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
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "err.h"
#include "json.h"
#include "reader.h"

struct thread_sum {
    unsigned char mapped, lost;
    uint64_t dropped; /* last LOSS value: they are cumulative */
};

struct summary {
    char program[TKP_NAME_MAX];
    uint64_t pid;
    uint64_t first_ns, last_ns;
    uint64_t steps, outside_steps, launches, graph_launches, copies, syncs;
    struct thread_sum *threads; /* by capture-local thread index */
    uint32_t nthreads;
};

static int thread_at(struct summary *s, uint32_t t, struct thread_sum **out)
{
    if (t >= s->nthreads) { /* t < TKP_THREADS_MAX: the reader checked */
        uint32_t n = s->nthreads ? s->nthreads : 16;
        while (n <= t)
            n *= 2;
        struct thread_sum *p = realloc(s->threads, n * sizeof(*p));
        if (!p) return TKP_ERR_NOMEM;
        memset(p + s->nthreads, 0, (n - s->nthreads) * sizeof(*p));
        s->threads = p;
        s->nthreads = n;
    }
    *out = &s->threads[t];
    return 0;
}

static void saw_time(struct summary *s, uint64_t ns)
{
    if (!ns) return;
    if (!s->first_ns || ns < s->first_ns) s->first_ns = ns;
    if (ns > s->last_ns) s->last_ns = ns;
}

static int summary_add(struct summary *s, const struct tkp_record *r)
{
    struct thread_sum *t;
    if (tkp_record_has_time(r->type)) saw_time(s, r->host_ns);
    switch (r->type) {
    case TKP_REC_META:
        snprintf(s->program, sizeof(s->program), "%s", r->meta.program);
        s->pid = r->meta.pid;
        break;
    case TKP_REC_THREAD:
        if (thread_at(s, r->thread, &t)) return TKP_ERR_NOMEM;
        t->mapped = 1;
        break;
    case TKP_REC_LOSS:
        if (thread_at(s, r->thread, &t)) return TKP_ERR_NOMEM;
        t->lost = 1;
        t->dropped = r->loss.dropped;
        break;
    case TKP_REC_STEP:
        if (r->step_rec.kind == TKP_STEP_TOKEN)
            s->steps++;
        else if (r->step_rec.kind == TKP_STEP_OUTSIDE)
            s->outside_steps++;
        saw_time(s, r->step_rec.begin_ns);
        saw_time(s, r->step_rec.end_ns);
        break;
    case TKP_REC_LAUNCH:
        s->launches++;
        break;
    case TKP_REC_GRAPH_LAUNCH:
        s->graph_launches++;
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

static void totals(const struct summary *s, uint64_t *threads, uint64_t *dropped)
{
    *threads = *dropped = 0;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        *threads += s->threads[i].mapped;
        *dropped += s->threads[i].dropped;
    }
}

static void print_json(FILE *f, const struct summary *s, const struct tkp_reader *r)
{
    const struct tkp_reader_err *e = tkp_reader_error(r);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    uint64_t threads, dropped;
    totals(s, &threads, &dropped);
    fputs("{\"program\":", f);
    tkp_json_str(f, s->program);
    fprintf(f,
            ",\"pid\":%" PRIu64 ",\"duration_ns\":%" PRIu64 ",\"threads\":%" PRIu64
            ",\"steps\":%" PRIu64 ",\"outside_steps\":%" PRIu64 ",\"launches\":%" PRIu64
            ",\"graph_launches\":%" PRIu64 ",\"copies\":%" PRIu64 ",\"syncs\":%" PRIu64
            ",\"dropped\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"complete\":%s",
            s->pid, s->last_ns - s->first_ns, threads, s->steps, s->outside_steps, s->launches,
            s->graph_launches, s->copies, s->syncs, dropped, st->chunks, e ? "false" : "true");
    if (e) {
        fprintf(f, ",\"stopped_at\":%" PRIu64 ",\"stopped_why\":", e->offset);
        tkp_json_str(f, e->msg);
    } else {
        fputs(",\"stopped_at\":null,\"stopped_why\":null", f);
    }
    fprintf(f, ",\"missing_names\":%" PRIu64 "}\n", st->missing_names);
}

static void print_text(FILE *f, const char *path, const struct summary *s,
                       const struct tkp_reader *r)
{
    const struct tkp_reader_err *e = tkp_reader_error(r);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    uint64_t threads, dropped;
    totals(s, &threads, &dropped);
    fprintf(f, "capture   %s: %" PRIu64 " chunks", path, st->chunks);
    if (e)
        fprintf(f, ", stopped at byte %" PRIu64 " (%s)\n", e->offset, e->msg);
    else
        fputs(", complete\n", f);
    fprintf(f, "program   %s (pid %" PRIu64 ")\n", s->program[0] ? s->program : "?", s->pid);
    fprintf(f, "duration  %.6f s\n", (double)(s->last_ns - s->first_ns) / 1e9);
    fprintf(f, "threads   %" PRIu64 "\n", threads);
    fprintf(f, "steps     %" PRIu64 " token steps, %" PRIu64 " outside any step\n", s->steps,
            s->outside_steps);
    fprintf(f, "launches  %" PRIu64 " kernel, %" PRIu64 " graph\n", s->launches, s->graph_launches);
    fprintf(f, "copies    %" PRIu64 "\n", s->copies);
    fprintf(f, "syncs     %" PRIu64 "\n", s->syncs);
    fprintf(f, "dropped   %" PRIu64 " records%s\n", dropped,
            dropped ? " (rings were full: counts above are low)" : "");
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *path = NULL;
    int json = 0, err;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] == '-' && argv[i][1])
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "unknown option '%s'", argv[i]);
        else if (path)
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one capture at a time ('%s')", argv[i]);
        else
            path = argv[i];
    }
    if (!path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no capture file given");

    struct tkp_reader *r;
    struct tkp_record rec;
    struct summary *s = calloc(1, sizeof(*s));
    if (!s) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    if ((err = tkp_cmd_open(ctx, path, &r))) {
        free(s);
        return err;
    }
    while (!err && tkp_reader_next(r, &rec) == 1)
        err = summary_add(s, &rec);
    if (err) {
        tkp_cmd_fail(ctx, err, "%s: %s", path, tkp_strerror(err));
    } else {
        tkp_cmd_warn_reader(ctx, path, r);
        if (json)
            print_json(ctx->out, s, r);
        else
            print_text(ctx->out, path, s, r);
    }
    tkp_reader_close(r);
    free(s->threads);
    free(s);
    return err;
}

const struct tkp_cmd tkp_cmd_summary = {
    .name = "summary",
    .brief = "the capture at a glance: steps, launches, copies, syncs, drops",
    .usage =
        "usage: tokprof summary [--json] FILE\n"
        "\n"
        "Counts what the capture FILE holds: token steps, kernel and graph launches, copies,\n"
        "syncs, threads, records the shim had to drop, and the span of time covered. A capture\n"
        "cut short (a killed program) is summarised up to its last whole chunk, with a warning.\n"
        "\n"
        "  --json     one JSON object with stable keys, for scripts\n"
        "\n"
        "example: fail a CI job when the shim dropped records\n"
        "  test \"$(tokprof summary --json server.1234.tokprof | jq .dropped)\" = 0\n",
    .run = run,
};
