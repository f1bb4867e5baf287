/* simgpu timeline: streams as FIFOs with a tail time on the host's CLOCK_MONOTONIC.
 *
 * Rules (all under sim_lock):
 *  - an op on stream s starts at max(its earliest time, s->tail) and s->tail becomes its end;
 *  - the legacy default stream synchronises with every *blocking* stream (created without
 *    CU_STREAM_NON_BLOCKING; per-thread default streams are blocking): an op on it starts no
 *    earlier than every blocking stream's tail, and an op on a blocking stream starts no earlier
 *    than the legacy stream's tail. Using tails at enqueue time gives exactly CUDA's "waits for
 *    work already issued" semantics;
 *  - streams are otherwise fully concurrent (infinite SMs). */
#include <stdlib.h>

#include "sim.h"

static struct sim_stream legacy = {.magic = MAGIC_STREAM, .id = 0, .kind = STREAM_LEGACY};
static struct sim_stream *all_streams = &legacy; /* legacy is always first */
static int next_stream_id = 1;
static __thread struct sim_stream *per_thread;

struct sim_stream *tl_legacy(void) { return &legacy; }

/* Called with sim_lock held. */
struct sim_stream *tl_new_stream(int kind, unsigned flags, int priority)
{
    struct sim_stream *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    s->magic = MAGIC_STREAM;
    s->id = next_stream_id++;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
    s->next = all_streams->next;
    all_streams->next = s;
    return s;
}

void tl_unlink_stream(struct sim_stream *s)
{
    for (struct sim_stream *p = all_streams; p; p = p->next)
        if (p->next == s) {
            p->next = s->next;
            break;
        }
    s->magic = 0;
    free(s->deps);
    free(s);
}

struct sim_stream *tl_resolve(CUstream h, int ptsz)
{
    if (h == CU_STREAM_PER_THREAD || (h == NULL && ptsz)) {
        if (!per_thread)
            per_thread = tl_new_stream(STREAM_PER_THREAD, 0, 0);
        return per_thread;
    }
    if (h == NULL || h == CU_STREAM_LEGACY)
        return &legacy;
    struct sim_stream *s = (struct sim_stream *)h;
    return s->magic == MAGIC_STREAM ? s : NULL;
}

static int blocking(const struct sim_stream *s)
{
    return s->kind != STREAM_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

simtime_t tl_ready(struct sim_stream *s, simtime_t earliest)
{
    simtime_t t = earliest > s->tail ? earliest : s->tail;
    if (s->kind == STREAM_LEGACY) {
        for (struct sim_stream *p = all_streams; p; p = p->next)
            if (blocking(p) && p->tail > t)
                t = p->tail;
    } else if (blocking(s) && legacy.tail > t) {
        t = legacy.tail;
    }
    return t;
}

void tl_commit(struct sim_stream *s, simtime_t end)
{
    if (end > s->tail)
        s->tail = end;
}

simtime_t tl_all_tails(void)
{
    simtime_t t = 0;
    for (struct sim_stream *p = all_streams; p; p = p->next)
        if (p->tail > t)
            t = p->tail;
    return t;
}

/* op->end holds the duration on entry; op->start may hold a stall delay. */
void tl_exec(struct sim_op *op)
{
    simtime_t dur = op->end, stall = op->start;
    simtime_t start = tl_ready(op->stream, sim_now() + cost_latency()) + stall;
    op->start = start;
    op->end = start + dur;
    tl_commit(op->stream, op->end);
    tlog_write(op);
}

/* Ends a capture on every stream that joined it (fork/join across streams). */
void tl_end_capture(struct sim_capture *cap)
{
    for (struct sim_stream *p = all_streams; p; p = p->next)
        if (p->cap == cap) {
            p->cap = NULL;
            p->ndeps = 0;
        }
}
