/* Online step detection: which decode step (token) each record belongs to.
 *
 * Records are tagged with the current *segment* of their thread at the moment they are made.
 * A segment becomes a token step when its end is marked, and is reported (a STEP record) once the
 * host has seen it complete, so the record carries the inter-token time the server saw.
 *
 * auto (the default) follows the three end-of-step patterns of real servers
 * (shared/notes/serving-loops.md):
 *   - a small device-to-host copy (sampled ids, a logits row, a 1-byte flag) after kernels marks
 *     the end of a step's launches: later launches belong to the next segment;
 *   - the host waiting for it (event sync on an event recorded after the copy, stream or device
 *     sync, a blocking copy) completes it. A stream sync waits only for what CUDA orders before
 *     it (covers()): the step's copy stream, the legacy default stream, or a stream made to
 *     wait on an event recorded after the step; a sync on another stream (a library's own
 *     synchronous upload on the per-thread default stream: ggml's set_tensor) leaves it pending.
 *     When such a sync completed nothing and the next step's end copy is made on the same stream,
 *     the pending step is a *part* of that next step (STEP kind part): one evaluation read back
 *     in parts, the host having waited only for its own uploads in between. llama.cpp's ggml
 *     splits a decode into micro-batches the other way: its scheduler syncs the compute stream
 *     between them, which completes the first part; a complete step whose logits-sized copy
 *     began at the thread's recurring output start is reported at the next end copy (report()),
 *     as a part when that copy lands right after its own (continues()).
 *     With vLLM's async scheduling that wait comes after the next step was launched, so
 *     completed steps are paired through the event they waited on.
 *     An event *query* that finds a step complete only notes when (ready_ns): vLLM's Model
 *     Runner V2 polls its output event right after launching, then waits for it (and takes the
 *     token) only after launching the next step; the wait paired with the step completes it. A
 *     host that only polls (no paired wait before a later step is found ready, or any other
 *     close) completes it at the query that found it ready;
 *   - work synchronised before the first marked step (weights, warm-up) is one or more
 *     "outside" segments.
 * sync: every host sync after launches ends and completes a step. graph: each graph launch
 * begins a step. kernel:RE: a launch of a matching kernel begins a step. nvtx:RE and marker:
 * ranges (a matching NVTX push/start, tokprof_step_begin) begin and end steps.
 *
 * State is per thread (struct tkp_stepstate, in the ring's user bytes): each serving thread has its own
 * sequence of steps. Only the owning thread touches it. */

#include "record/step.h"
#include "record/symtab.h"
#include "tokprof/format.h"

static tkp_step_segment_fn segment_hook;

void tkp_step_set_segment_hook(tkp_step_segment_fn fn)
{
    segment_hook = fn;
}

void tkp_step_thread_init(struct tkp_ring *r)
{
    tkp_step_state(r)->last_marked = -1;
}

static void emit_step(struct tkp_ring *r, uint32_t seg, int kind, uint64_t begin, uint64_t mark,
                      uint64_t end, int closed_by, uint32_t launches, uint32_t glaunches,
                      uint32_t copies)
{
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return;
    e->type = TKP_REC_STEP;
    e->sub = (uint8_t)kind;
    e->flags = 0;
    e->step = seg;
    e->ts = begin;
    e->a = mark;
    e->b = end;
    e->u[0] = (uint32_t)closed_by;
    e->u[1] = launches;
    e->u[2] = glaunches;
    e->u[3] = copies;
    tkp_ring_commit(r);
}

static int seg_has_work(const struct tkp_stepstate *s)
{
    return s->launches + s->graph_launches > 0;
}

static void seg_reset(struct tkp_stepstate *s)
{
    s->seg++;
    s->launches = s->graph_launches = s->copies = 0;
    s->begin_ns = s->last_ns = 0;
    if (segment_hook) segment_hook(s->seg); /* GPU window/trigger modes switch here */
}

static void close_pending(struct tkp_ring *r, int64_t upto, uint64_t end_ns, int closed_by,
                          int paired);

/* Ends the current segment's launches; it waits in `pending` for the host to see it complete.
 * stream, dst, bytes: its end copy's; at_base: that copy began where the thread's previous
 * evaluation's output did. */
static void mark_current(struct tkp_ring *r, uint64_t mark_ns, uint64_t stream, uint64_t dst,
                         uint64_t bytes, int at_base)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (s->npending == TKP_PENDING_MAX) {
        /* The host never waits (or we do not see it): report the oldest as closed by the next
         * step rather than grow. */
        close_pending(r, s->pending[s->pending_head].seg, mark_ns, TKP_CLOSE_NEXT_STEP, 0);
    }
    struct tkp_pending *p = &s->pending[(s->pending_head + s->npending) % TKP_PENDING_MAX];
    p->seg = s->seg;
    p->launches = s->launches;
    p->graph_launches = s->graph_launches;
    p->copies = s->copies;
    p->begin_ns = s->begin_ns ? s->begin_ns : mark_ns;
    p->mark_ns = mark_ns;
    p->ready_ns = 0;
    p->stream = stream;
    p->dst = dst, p->bytes = bytes;
    p->passed = p->part = 0;
    p->at_base = (uint8_t)at_base;
    s->npending++;
    s->last_marked = s->seg;
    s->seen_token = 1;
    seg_reset(s);
}

static void emit_pending(struct tkp_ring *r, const struct tkp_pending *p, int kind, uint64_t end,
                         int closed_by)
{
    emit_step(r, p->seg, kind, p->begin_ns, p->mark_ns, end, closed_by, p->launches,
              p->graph_launches, p->copies);
}

/* Reports the held step (report()) as `kind`: TKP_STEP_PART when the next end copy continued it. */
static void release_held(struct tkp_ring *r, int kind)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (!s->has_held) return;
    s->has_held = 0;
    emit_pending(r, &s->held, kind, s->held_end, s->held_closed_by);
}

/* Reports a completed step. One whose end copy began at the thread's recurring output start and
 * is logits-sized (TKP_HOLD_MIN) may be the first part of an evaluation read back in parts, each
 * part waited for (llama.cpp's micro-batches: ggml's scheduler syncs the compute stream between
 * them): its report waits for the next end copy (tkp_step_on_copy), which says. */
static void report(struct tkp_ring *r, const struct tkp_pending *p, uint64_t end, int closed_by)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    release_held(r, TKP_STEP_TOKEN);
    if (!p->part && p->at_base && p->bytes >= TKP_HOLD_MIN) {
        s->held = *p, s->held_end = end, s->held_closed_by = closed_by, s->has_held = 1;
        return;
    }
    emit_pending(r, p, p->part ? TKP_STEP_PART : TKP_STEP_TOKEN, end, closed_by);
}

/* Completes pending steps up to and including segment `upto` (-1: all), at end_ns when the
 * host's wait is paired with them (an event wait on their event), else a step an event query
 * already found ready at that query. */
static void close_pending(struct tkp_ring *r, int64_t upto, uint64_t end_ns, int closed_by,
                          int paired)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    while (s->npending) {
        struct tkp_pending *p = &s->pending[s->pending_head];
        if (upto >= 0 && (int64_t)p->seg > upto) break;
        int polled = p->ready_ns && !paired;
        report(r, p, polled ? p->ready_ns : end_ns, polled ? TKP_CLOSE_EVENT_QUERY : closed_by);
        s->pending_head = (s->pending_head + 1) % TKP_PENDING_MAX;
        s->npending--;
    }
}

/* An event query found the steps up to `upto` complete: a step an earlier query had found ready
 * and no wait claimed since is completed at that query (the host polls, it never waits); the
 * others note this query's time and wait for a paired event wait. */
static void ready_pending(struct tkp_ring *r, int64_t upto, uint64_t ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    while (s->npending) {
        struct tkp_pending *p = &s->pending[s->pending_head];
        if (!p->ready_ns || (int64_t)p->seg >= upto) break;
        close_pending(r, p->seg, 0, TKP_CLOSE_EVENT_QUERY, 0);
    }
    for (uint32_t i = 0; i < s->npending; i++) {
        struct tkp_pending *p = &s->pending[(s->pending_head + i) % TKP_PENDING_MAX];
        if ((int64_t)p->seg > upto) break;
        if (!p->ready_ns) p->ready_ns = ts;
    }
}

/* Ends and completes the current segment at once (sync, graph, kernel, range modes). */
static void close_current(struct tkp_ring *r, int kind, uint64_t end_ns, int closed_by)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    uint64_t begin = s->begin_ns ? s->begin_ns : end_ns;
    emit_step(r, s->seg, kind, begin, s->last_ns ? s->last_ns : end_ns, end_ns, closed_by,
              s->launches, s->graph_launches, s->copies);
    if (kind == TKP_STEP_TOKEN) s->seen_token = 1;
    seg_reset(s);
}

static void touch(struct tkp_stepstate *s, uint64_t ts)
{
    if (!s->begin_ns) s->begin_ns = ts;
    s->last_ns = ts;
}

uint32_t tkp_step_current(struct tkp_ring *r)
{
    return tkp_step_state(r)->seg;
}

void tkp_step_graph_boundary(struct tkp_ring *r, uint64_t ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (s->graph_launches > 0) close_current(r, TKP_STEP_TOKEN, ts, TKP_CLOSE_NEXT_STEP);
    else if (seg_has_work(s) || s->copies) close_current(r, TKP_STEP_OUTSIDE, ts, TKP_CLOSE_NEXT_STEP);
}

/* The regex was compiled when the settings were read (core/config.c), before any hook ran:
 * application threads only run it. */
static int kernel_matches(const char *name)
{
    return name && regexec(&tkp_cfg.step_re, name, 0, NULL, 0) == 0;
}

/* kernel:RE mode, called before a launch is tagged. Whether the kernel matches is asked of the
 * regex once per kernel and kept beside its name (record/symtab.c): a table probe per launch, no
 * regexec (which takes a lock in glibc). */
int tkp_step_launch_boundary(struct tkp_ring *r, uint64_t key, int key_kind, uint64_t ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (!tkp_sym_matches(key, key_kind, kernel_matches)) return 0;
    /* what ran before the first matching kernel is not a step */
    if (seg_has_work(s) || s->copies)
        close_current(r, s->in_range ? TKP_STEP_TOKEN : TKP_STEP_OUTSIDE, ts, TKP_CLOSE_NEXT_STEP);
    s->in_range = 1;
    return 1;
}

/* Whether an end copy (stream, dst) continues step p's output: the segment right after p's, on
 * its stream, landing where p's logits-sized copy ended, p's having begun at the thread's
 * recurring output start (a buffer an evaluation is read back into, in parts: llama.cpp's
 * `logits + n_outputs_prev * n_vocab`; a loop appending each token to a growing array never
 * begins twice at one place). */
static int continues(const struct tkp_stepstate *s, const struct tkp_pending *p, uint64_t stream,
                     uint64_t dst)
{
    return p->seg + 1 == s->seg && p->stream == stream && dst && p->at_base &&
           p->bytes >= TKP_HOLD_MIN && dst == p->dst + p->bytes;
}

uint32_t tkp_step_on_copy(struct tkp_ring *r, uint64_t ts, int dir, uint64_t bytes, int async,
                          uint64_t stream, uint64_t host)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    (void)async;
    touch(s, ts);
    s->copies++;
    uint32_t seg = s->seg;
    if (tkp_cfg.step_mode == TKP_STEPMODE_AUTO && dir == TKP_DIR_DTOH &&
        bytes <= tkp_cfg.step_copy_max && seg_has_work(s)) {
        int cont = 0;
        if (s->has_held) { /* the step before, complete: this copy says whether it was a part */
            cont = continues(s, &s->held, stream, host);
            release_held(r, cont ? TKP_STEP_PART : TKP_STEP_TOKEN);
        }
        if (s->npending) { /* the step before, still pending: passed over by a sync, or continued */
            struct tkp_pending *t =
                &s->pending[(s->pending_head + s->npending - 1) % TKP_PENDING_MAX];
            if ((t->passed && t->stream == stream && t->seg + 1 == s->seg) ||
                continues(s, t, stream, host))
                t->part = 1, cont = 1;
        }
        mark_current(r, ts, stream, host, bytes, !cont && host && host == s->eval_base);
        if (!cont) s->eval_base = host;
    }
    return seg;
}

void tkp_step_on_copy_return(struct tkp_ring *r, uint64_t ts, int marked)
{
    /* A blocking copy: the host has the data, so whatever was marked before is complete. */
    (void)marked;
    if (tkp_cfg.step_mode == TKP_STEPMODE_AUTO) close_pending(r, -1, ts, TKP_CLOSE_BLOCKING_COPY, 0);
    else tkp_step_on_sync(r, TKP_SYNC_MEMCPY, 0, ts);
}

void tkp_step_on_event_record(struct tkp_ring *r, uint64_t event)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    for (uint32_t i = 0; i < TKP_EVMAP_MAX; i++)
        if (s->ev_key[i] == event) {
            s->ev_seg[i] = s->last_marked;
            return;
        }
    s->ev_key[s->ev_next] = event;
    s->ev_seg[s->ev_next] = s->last_marked;
    s->ev_next = (s->ev_next + 1) % TKP_EVMAP_MAX;
}

/* cudaStreamWaitEvent(stream, event): work on `stream` after it waits for what `event` followed,
 * the steps marked before the event was recorded. */
void tkp_step_on_stream_wait(struct tkp_ring *r, uint64_t stream, uint64_t event)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    int64_t seg = -1;
    for (uint32_t i = 0; i < TKP_EVMAP_MAX; i++)
        if (s->ev_key[i] == event) seg = s->ev_seg[i];
    if (seg < 0) return;
    for (uint32_t i = 0; i < TKP_SWAIT_MAX; i++)
        if (s->sw_stream[i] == stream) {
            if (seg > s->sw_seg[i]) s->sw_seg[i] = seg;
            return;
        }
    s->sw_stream[s->sw_next] = stream;
    s->sw_seg[s->sw_next] = seg;
    s->sw_next = (s->sw_next + 1) % TKP_SWAIT_MAX;
}

/* Stream handles with a meaning of their own: 0 and cudaStreamLegacy (1), the legacy default
 * stream; cudaStreamPerThread (2) is an ordinary stream here. */
static int is_legacy(uint64_t h)
{
    return h <= 1;
}

/* Whether a sync on stream h has waited for pending step p (CUDA's stream semantics): h is p's
 * copy stream; h or p's stream is the legacy default stream (which work on every blocking stream
 * is ordered with; the shim does not know which streams were made non-blocking and takes them
 * as blocking, as before); or h was made to wait on an event recorded after p was marked. */
static int covers(const struct tkp_stepstate *s, uint64_t h, const struct tkp_pending *p)
{
    if (h == p->stream || is_legacy(h) || is_legacy(p->stream)) return 1;
    for (uint32_t i = 0; i < TKP_SWAIT_MAX; i++)
        if (s->sw_stream[i] == h && s->sw_seg[i] >= (int64_t)p->seg) return 1;
    return 0;
}

/* A stream sync on h: completes the pending steps it covers, oldest first, up to the first it
 * does not. One that completed nothing passes over the pending steps it does not cover
 * (tkp_step_on_copy); one it covers but could not complete yet (an older one before it is still
 * in flight) was waited for, not passed over. */
static void stream_sync(struct tkp_ring *r, uint64_t h, uint64_t end_ts, int closed_by)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    int closed = 0;
    while (s->npending && covers(s, h, &s->pending[s->pending_head])) {
        close_pending(r, s->pending[s->pending_head].seg, end_ts, closed_by, 0);
        closed = 1;
    }
    for (uint32_t i = 0; !closed && i < s->npending; i++) {
        struct tkp_pending *p = &s->pending[(s->pending_head + i) % TKP_PENDING_MAX];
        if (!covers(s, h, p)) p->passed = 1;
    }
}

static const int close_kind[] = {
    [TKP_SYNC_STREAM] = TKP_CLOSE_STREAM_SYNC, [TKP_SYNC_EVENT] = TKP_CLOSE_EVENT_SYNC,
    [TKP_SYNC_DEVICE] = TKP_CLOSE_DEVICE_SYNC, [TKP_SYNC_CTX] = TKP_CLOSE_DEVICE_SYNC,
    [TKP_SYNC_EVENT_QUERY] = TKP_CLOSE_EVENT_QUERY, [TKP_SYNC_MEMCPY] = TKP_CLOSE_BLOCKING_COPY,
};

void tkp_step_on_sync(struct tkp_ring *r, int kind, uint64_t handle, uint64_t end_ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    int closed_by = close_kind[kind];
    switch (tkp_cfg.step_mode) {
    case TKP_STEPMODE_AUTO:
        if (kind == TKP_SYNC_EVENT || kind == TKP_SYNC_EVENT_QUERY) {
            int64_t upto = -2;
            for (uint32_t i = 0; i < TKP_EVMAP_MAX; i++)
                if (s->ev_key[i] == handle) upto = s->ev_seg[i];
            if (upto >= 0 && kind == TKP_SYNC_EVENT) close_pending(r, upto, end_ts, closed_by, 1);
            else if (upto >= 0) ready_pending(r, upto, end_ts);
        } else if (kind == TKP_SYNC_STREAM) {
            stream_sync(r, handle, end_ts, closed_by);
        } else {
            close_pending(r, -1, end_ts, closed_by, 0);
        }
        /* Set-up work that the host waited for before any step: one "outside" segment. */
        if (!s->seen_token && seg_has_work(s) && kind != TKP_SYNC_EVENT_QUERY)
            close_current(r, TKP_STEP_OUTSIDE, end_ts, closed_by);
        break;
    case TKP_STEPMODE_SYNC:
        if (seg_has_work(s)) close_current(r, TKP_STEP_TOKEN, end_ts, closed_by);
        break;
    default:
        break;
    }
}

void tkp_step_on_marker(struct tkp_ring *r, int kind, uint64_t ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (kind == TKP_MARK_STEP_BEGIN) {
        if (seg_has_work(s) || s->copies) close_current(r, TKP_STEP_OUTSIDE, ts, TKP_CLOSE_MARKER);
        s->in_range = 1;
        touch(s, ts);
    } else if (s->in_range) {
        close_current(r, TKP_STEP_TOKEN, ts, TKP_CLOSE_MARKER);
        s->in_range = 0;
    }
}

void tkp_step_on_nvtx(struct tkp_ring *r, int kind, const char *name, uint64_t ts)
{
    struct tkp_stepstate *s = tkp_step_state(r);
    if (tkp_cfg.step_mode != TKP_STEPMODE_NVTX) return;
    if (kind == TKP_NVTX_PUSH || kind == TKP_NVTX_RANGE_START) {
        if (!name || regexec(&tkp_cfg.step_re, name, 0, NULL, 0)) {
            if (s->in_range) s->in_range++; /* nested non-matching range */
            return;
        }
        if (seg_has_work(s) || s->copies) close_current(r, TKP_STEP_OUTSIDE, ts, TKP_CLOSE_NVTX);
        s->in_range = 1;
        touch(s, ts);
    } else if (kind == TKP_NVTX_POP || kind == TKP_NVTX_RANGE_END) {
        if (s->in_range > 1) s->in_range--;
        else if (s->in_range == 1) {
            close_current(r, TKP_STEP_TOKEN, ts, TKP_CLOSE_NVTX);
            s->in_range = 0;
        }
    }
}

/* Program exit: report what is pending; trailing work after the last step is "outside". */
void tkp_step_flush_thread(struct tkp_ring *r, uint64_t ts)
{
    release_held(r, TKP_STEP_TOKEN);
    close_pending(r, -1, ts, TKP_CLOSE_EXIT, 0);
    struct tkp_stepstate *s = tkp_step_state(r);
    if (!seg_has_work(s) && !s->copies) return;
    /* A step that a boundary began (kernel, graph, a range still open) is a step cut short. */
    int token = (tkp_cfg.step_mode == TKP_STEPMODE_KERNEL && s->in_range) ||
                (tkp_cfg.step_mode == TKP_STEPMODE_GRAPH && s->graph_launches) ||
                ((tkp_cfg.step_mode == TKP_STEPMODE_NVTX || tkp_cfg.step_mode == TKP_STEPMODE_MARKER) &&
                 s->in_range);
    close_current(r, token ? TKP_STEP_TOKEN : TKP_STEP_OUTSIDE, ts, TKP_CLOSE_EXIT);
}
