/* The step detector's state machine (shim/record/step.c), fed synthetic sequences of what the
 * hooks report: the STEP events it leaves in the thread's ring must be the steps a server made,
 * closed by what closed them, with their counts. Criterion runs each test in a process of its
 * own. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "core/config.h"
#include "core/state.h"
#include "record/ring.h"
#include "record/step.h"
#include "record/symtab.h"
#include "tokprof/format.h"

static uint32_t segments[64];
static int nsegments;
static void on_segment(uint32_t seg)
{
    if (nsegments < 64) segments[nsegments] = seg;
    nsegments++;
}

static void setup(void)
{
    tkp_cfg.ring_kb = 64;
    tkp_cfg.buffer_mb = 1;
    tkp_cfg.step_mode = TKP_STEPMODE_AUTO;
    tkp_cfg.step_copy_max = 4u << 20;
    atomic_store(&tkp_state, 1);
    tkp_rings_set_hooks(tkp_step_thread_init, tkp_step_flush_thread);
    tkp_step_set_segment_hook(on_segment);
}
TestSuite(shim_step, .init = setup);

static uint64_t now = 1000;
static struct tkp_ring *R(void)
{
    struct tkp_ring *r = tkp_ring_self();
    cr_assert_not_null(r);
    return r;
}
static void launches(int n)
{
    for (int i = 0; i < n; i++)
        tkp_step_on_launch(R(), now += 10, 0);
}
static void graph_launch(void)
{
    tkp_step_on_launch(R(), now += 10, 1);
}
static void dtoh_at(uint64_t bytes, uint64_t stream, uint64_t host)
{
    tkp_step_on_copy(R(), now += 10, TKP_DIR_DTOH, bytes, 1, stream, host);
}
static void dtoh_on(uint64_t bytes, uint64_t stream)
{
    dtoh_at(bytes, stream, 0);
}
static void dtoh(uint64_t bytes)
{
    dtoh_on(bytes, 0);
}
static void sync_on(int kind, uint64_t handle)
{
    tkp_step_on_sync(R(), kind, handle, now += 10);
}

struct step {
    uint32_t seg, closed_by, launches, glaunches, copies;
    int kind;
    uint64_t begin, mark, end;
};
static struct step steps[64];
static int nsteps;
static void take(void *ctx, const struct tkp_ev *e, uint32_t thread, int os_tid)
{
    (void)ctx, (void)thread, (void)os_tid;
    if (e->type != TKP_REC_STEP) return;
    cr_assert_lt(nsteps, 64);
    steps[nsteps++] =
        (struct step){e->step, e->u[0], e->u[1], e->u[2], e->u[3], e->sub, e->ts, e->a, e->b};
}
static void drain(void)
{
    nsteps = 0;
    tkp_rings_drain(take, NULL);
}
static void expect(int i, uint32_t seg, int kind, uint32_t closed_by, uint32_t launches_,
                   uint32_t copies)
{
    cr_assert_gt(nsteps, i, "step %d missing (%d steps)", i, nsteps);
    cr_expect_eq(steps[i].seg, seg, "step %d: seg %u", i, steps[i].seg);
    cr_expect_eq(steps[i].kind, kind, "step %d: kind %d", i, steps[i].kind);
    cr_expect_eq(steps[i].closed_by, closed_by, "step %d: closed by %u", i, steps[i].closed_by);
    cr_expect_eq(steps[i].launches, launches_, "step %d: %u launches", i, steps[i].launches);
    cr_expect_eq(steps[i].copies, copies, "step %d: %u copies", i, steps[i].copies);
    cr_expect_leq(steps[i].begin, steps[i].mark);
    cr_expect_leq(steps[i].mark, steps[i].end);
}

/* vLLM's async scheduling: step N+1 is launched before the host waits for step N's event. */
Test(shim_step, auto_pairs_a_late_event_wait_with_its_step)
{
    launches(3), dtoh(16), tkp_step_on_event_record(R(), 0xE0);
    launches(4), dtoh(16), tkp_step_on_event_record(R(), 0xE1);
    drain();
    cr_assert_eq(nsteps, 0, "marked, not complete: nothing reported yet");
    sync_on(TKP_SYNC_EVENT, 0xE0);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_SYNC, 3, 1);
    sync_on(TKP_SYNC_EVENT, 0xE1);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 1, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_SYNC, 4, 1);
    cr_assert_eq(nsegments, 2);
    cr_assert_eq(segments[0], 1, "the GPU tier hears of each new segment");
    cr_assert_eq(segments[1], 2);
}

/* vLLM's Model Runner V2 (async scheduling): after step N's output copies it waits for step
 * N-1's event, records events after N's copies and polls one (ready on a fast GPU), then launches
 * step N+1 and only then waits for N's event and takes its token. The poll notes N ready; the
 * wait paired with N completes it (vLLM's output stamp follows that wait). */
Test(shim_step, auto_a_polled_step_ends_at_the_wait_paired_with_it)
{
    launches(3), dtoh(64), tkp_step_on_event_record(R(), 0xE0);
    tkp_step_on_event_record(R(), 0xA0);
    sync_on(TKP_SYNC_EVENT_QUERY, 0xA0);
    uint64_t polled = now;
    sync_on(TKP_SYNC_EVENT_QUERY, 0xA0); /* polled again: still the same step */
    drain();
    cr_assert_eq(nsteps, 0, "polled ready, not yet waited for: nothing reported");
    launches(4), dtoh(64), tkp_step_on_event_record(R(), 0xE1);
    sync_on(TKP_SYNC_EVENT, 0xE0);
    uint64_t waited = now;
    tkp_step_on_event_record(R(), 0xA1);
    sync_on(TKP_SYNC_EVENT_QUERY, 0xA1);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_SYNC, 3, 1);
    cr_expect_eq(steps[0].end, waited, "ends at the wait (%lu), not the poll (%lu)",
                 (unsigned long)steps[0].end, (unsigned long)polled);
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 1, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_QUERY, 4, 1);
}

/* A host that only polls (never waits on the step's event): each step ends at the poll that
 * found it ready, reported when a later step is found ready. */
Test(shim_step, auto_a_step_only_polled_ends_at_its_poll)
{
    launches(2), dtoh(4), tkp_step_on_event_record(R(), 0xB0);
    sync_on(TKP_SYNC_EVENT_QUERY, 0xB0);
    uint64_t first = now;
    launches(2), dtoh(4), tkp_step_on_event_record(R(), 0xB1);
    sync_on(TKP_SYNC_EVENT_QUERY, 0xB0);
    drain();
    cr_assert_eq(nsteps, 0, "a repeated poll of the same step reports nothing");
    sync_on(TKP_SYNC_EVENT_QUERY, 0xB1);
    uint64_t second = now;
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_QUERY, 2, 1);
    cr_expect_eq(steps[0].end, first);
    sync_on(TKP_SYNC_STREAM, 0); /* a later unpaired wait does not move the poll's time */
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 1, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_QUERY, 2, 1);
    cr_expect_eq(steps[0].end, second);
}

Test(shim_step, auto_large_copies_and_unknown_events_end_nothing)
{
    launches(3), dtoh(64u << 20); /* a weight download, not sampled ids */
    sync_on(TKP_SYNC_EVENT_QUERY, 0x99);
    drain();
    cr_assert_eq(nsteps, 0);
    cr_assert_eq(tkp_step_current(R()), 0);
}

Test(shim_step, auto_work_waited_for_before_any_step_is_outside)
{
    launches(5);
    sync_on(TKP_SYNC_STREAM, 0);
    launches(2), dtoh(4);
    sync_on(TKP_SYNC_STREAM, 0);
    drain();
    cr_assert_eq(nsteps, 2);
    expect(0, 0, TKP_STEP_OUTSIDE, TKP_CLOSE_STREAM_SYNC, 5, 0);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 2, 1);
}

/* CUDA's stream semantics: a sync on one stream does not wait for another (non-legacy) stream's
 * work. ggml (llama.cpp) uploads its inputs with cudaMemcpyAsync + cudaStreamSynchronize on the
 * per-thread default stream (2), which waits for nothing on its compute stream. */
enum { S_COMPUTE = 0x7f10, S_PER_THREAD = 2, S_OTHER = 0x7f20 };

Test(shim_step, auto_a_sync_on_another_stream_leaves_the_step_pending)
{
    launches(3), dtoh_on(2048, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_PER_THREAD);
    drain();
    cr_assert_eq(nsteps, 0, "the per-thread stream's sync has not waited for the compute stream");
    sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 3, 1);
}

Test(shim_step, auto_the_legacy_stream_and_its_copies_keep_their_order)
{
    launches(1), dtoh_on(4, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, 0); /* the legacy default stream waits for blocking streams */
    launches(1), dtoh_on(4, 0);
    sync_on(TKP_SYNC_STREAM, S_OTHER); /* a copy on the legacy stream: later work waits for it */
    drain();
    cr_assert_eq(nsteps, 2);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 1, 1);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 1, 1);
}

Test(shim_step, auto_a_stream_that_waited_on_the_steps_event_covers_it)
{
    launches(2), dtoh_on(16, S_COMPUTE), tkp_step_on_event_record(R(), 0xE5);
    tkp_step_on_stream_wait(R(), S_OTHER, 0xE5);
    sync_on(TKP_SYNC_STREAM, S_OTHER);
    drain();
    cr_assert_eq(nsteps, 1, "S_OTHER's work was ordered after the step's event");
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 2, 1);
}

/* One evaluation read back in two parts: each micro-batch ends with its output copy on the
 * compute stream; the second's inputs are uploaded synchronously on the per-thread stream in
 * between (a sync that completes nothing); the host waits for the compute stream once, after the
 * second. The first segment is a part of the token step. */
Test(shim_step, auto_a_micro_batch_is_a_part_of_its_step)
{
    launches(3), dtoh_on(2048, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_PER_THREAD);
    launches(4), dtoh_on(6144, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    launches(4), dtoh_on(2048, S_COMPUTE); /* the next decode, whole */
    sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    drain();
    cr_assert_eq(nsteps, 3);
    expect(0, 0, TKP_STEP_PART, TKP_CLOSE_STREAM_SYNC, 3, 1);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 4, 1);
    expect(2, 2, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 4, 1);
    cr_expect_eq(steps[0].end, steps[1].end, "one wait completed both");
}

/* A sync on a later step's stream, while an older step on another stream is still in flight, has
 * waited for that later step (it could not be reported before the older one): it is not passed
 * over, and the next copy on its stream does not make it a part. */
Test(shim_step, auto_a_step_waited_for_behind_an_older_one_is_no_part)
{
    launches(1), dtoh_on(4, S_OTHER);
    launches(2), dtoh_on(4, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_COMPUTE); /* covers the second, which waits behind the first */
    launches(3), dtoh_on(4, S_COMPUTE);
    sync_on(TKP_SYNC_DEVICE, 0);
    drain();
    cr_assert_eq(nsteps, 3);
    for (int i = 0; i < 3; i++)
        expect(i, (uint32_t)i, TKP_STEP_TOKEN, TKP_CLOSE_DEVICE_SYNC, (uint32_t)i + 1, 1);
}

/* llama.cpp's server: each evaluation reads its logits back into one host buffer; ggml splits a
 * batch into micro-batches, each with its logits copy, the second's landing right after the
 * first's, and its scheduler syncs the compute stream between them (the first part is complete
 * before the second is launched). The first part is reported once the next end copy says it was
 * continued; the next evaluation's copy begins at the buffer's start again. */
enum { LOGITS = 0x7000000 };
Test(shim_step, auto_a_micro_batch_waited_for_is_a_part_of_its_step)
{
    launches(2), dtoh_at(2048, S_COMPUTE, LOGITS), sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    launches(3), dtoh_at(2048, S_COMPUTE, LOGITS), sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    drain();
    cr_assert_eq(nsteps, 1, "the second evaluation's report waits for the next end copy");
    launches(4), dtoh_at(2048, S_COMPUTE, LOGITS + 2048), sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    launches(5), dtoh_at(16384, S_COMPUTE, LOGITS), sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, 3);
    expect(0, 1, TKP_STEP_PART, TKP_CLOSE_STREAM_SYNC, 3, 1);
    expect(1, 2, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 4, 1);
    expect(2, 3, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 5, 1);
}

/* A loop that appends each token's logits to a growing host array: every copy lands right after
 * the last, but no output begins twice at one place: every step a token. Sampled ids (small
 * copies) are never held: their steps are reported when complete. */
Test(shim_step, auto_appended_outputs_and_small_reads_are_tokens)
{
    for (int i = 0; i < 4; i++)
        launches(1), dtoh_at(2048, S_COMPUTE, LOGITS + 2048u * (unsigned)i),
            sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    drain();
    cr_assert_eq(nsteps, 4);
    for (int i = 0; i < 4; i++) expect(i, (uint32_t)i, TKP_STEP_TOKEN, TKP_CLOSE_STREAM_SYNC, 1, 1);
    for (int i = 0; i < 3; i++)
        launches(1), dtoh_at(64, S_COMPUTE, LOGITS), sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    drain();
    cr_assert_eq(nsteps, 3, "64-byte reads at one place: reported at once");
}

/* Two steps in flight, then one wait (a host running a step ahead, a stream sync for both): two
 * tokens, not parts. Nor is a step a part when the sync that passed it over was on its own
 * stream's copy of the next step, or the next copy is on another stream. */
Test(shim_step, auto_steps_in_flight_are_not_parts)
{
    launches(2), dtoh_on(4, S_COMPUTE);
    launches(2), dtoh_on(4, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_COMPUTE);
    launches(2), dtoh_on(4, S_COMPUTE);
    sync_on(TKP_SYNC_STREAM, S_PER_THREAD); /* passed over */
    launches(2), dtoh_on(4, S_OTHER);       /* but the next copy is another stream's */
    sync_on(TKP_SYNC_DEVICE, 0);
    drain();
    cr_assert_eq(nsteps, 4);
    for (int i = 0; i < 4; i++)
        expect(i, (uint32_t)i, TKP_STEP_TOKEN, i < 2 ? TKP_CLOSE_STREAM_SYNC : TKP_CLOSE_DEVICE_SYNC,
               2, 1);
}

Test(shim_step, auto_a_blocking_copy_completes_what_is_pending)
{
    launches(2), dtoh(4);
    tkp_step_on_copy_return(R(), now += 10, 1);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_BLOCKING_COPY, 2, 1);
}

Test(shim_step, auto_a_host_that_never_waits_is_bounded)
{
    for (int i = 0; i < TKP_PENDING_MAX + 1; i++)
        launches(1), dtoh(4);
    drain();
    cr_assert_eq(nsteps, 1, "the oldest pending step is reported, closed by the next");
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_NEXT_STEP, 1, 1);
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, TKP_PENDING_MAX);
    for (int i = 0; i < TKP_PENDING_MAX; i++)
        expect(i, (uint32_t)i + 1, TKP_STEP_TOKEN, TKP_CLOSE_EXIT, 1, 1);
}

Test(shim_step, sync_mode_every_wait_after_launches_is_a_step)
{
    tkp_cfg.step_mode = TKP_STEPMODE_SYNC;
    launches(3), sync_on(TKP_SYNC_DEVICE, 0);
    sync_on(TKP_SYNC_DEVICE, 0); /* nothing launched since: no step */
    launches(1), sync_on(TKP_SYNC_EVENT, 0xE);
    drain();
    cr_assert_eq(nsteps, 2);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_DEVICE_SYNC, 3, 0);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_EVENT_SYNC, 1, 0);
}

Test(shim_step, graph_mode_each_replay_begins_a_step)
{
    tkp_cfg.step_mode = TKP_STEPMODE_GRAPH;
    launches(2); /* warm-up, eager */
    graph_launch(), launches(1);
    graph_launch();
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, 3);
    expect(0, 0, TKP_STEP_OUTSIDE, TKP_CLOSE_NEXT_STEP, 2, 0);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_NEXT_STEP, 1, 0);
    cr_expect_eq(steps[1].glaunches, 1);
    expect(2, 2, TKP_STEP_TOKEN, TKP_CLOSE_EXIT, 0, 0);
}

Test(shim_step, marker_mode_ranges)
{
    tkp_cfg.step_mode = TKP_STEPMODE_MARKER;
    launches(2);
    tkp_step_on_marker(R(), TKP_MARK_STEP_BEGIN, now += 10);
    launches(3);
    tkp_step_on_marker(R(), TKP_MARK_STEP_END, now += 10);
    tkp_step_on_marker(R(), TKP_MARK_STEP_END, now += 10); /* outside a range: nothing */
    drain();
    cr_assert_eq(nsteps, 2);
    expect(0, 0, TKP_STEP_OUTSIDE, TKP_CLOSE_MARKER, 2, 0);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_MARKER, 3, 0);
}

Test(shim_step, nvtx_mode_nested_ranges_end_at_the_matching_pop)
{
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "nvtx:^decode"), 0);
    tkp_step_on_nvtx(R(), TKP_NVTX_PUSH, "decode_step", now += 10);
    launches(1);
    tkp_step_on_nvtx(R(), TKP_NVTX_PUSH, "layer", now += 10);
    tkp_step_on_nvtx(R(), TKP_NVTX_RANGE_START, "attention", now += 10);
    launches(2);
    tkp_step_on_nvtx(R(), TKP_NVTX_RANGE_END, NULL, now += 10);
    tkp_step_on_nvtx(R(), TKP_NVTX_POP, NULL, now += 10);
    drain();
    cr_assert_eq(nsteps, 0, "the inner ends end the inner ranges only");
    tkp_step_on_nvtx(R(), TKP_NVTX_POP, NULL, now += 10);
    drain();
    cr_assert_eq(nsteps, 1);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_NVTX, 3, 0);
}

Test(shim_step, exit_reports_trailing_work_as_outside)
{
    launches(2), dtoh(4);
    launches(3);
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, 2);
    expect(0, 0, TKP_STEP_TOKEN, TKP_CLOSE_EXIT, 2, 1);
    expect(1, 1, TKP_STEP_OUTSIDE, TKP_CLOSE_EXIT, 3, 0);
}

static void launch_kernel(const void *stub)
{
    uint64_t ts = now += 10;
    tkp_step_launch_boundary(R(), (uint64_t)(uintptr_t)stub, TKP_KEY_HOSTFUN, ts);
    tkp_step_on_launch(R(), ts, 0);
}

Test(shim_step, kernel_mode_a_matching_launch_begins_a_step)
{
    static const char embed, attn; /* host stubs: any distinct addresses */
    tkp_sym_register(&embed, "embedding_kernel");
    tkp_sym_register(&attn, "attention_kernel");
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "kernel:^embed"), 0);
    launch_kernel(&attn); /* warm-up before the first matching kernel */
    launch_kernel(&embed), launch_kernel(&attn), launch_kernel(&attn);
    launch_kernel(&embed), launch_kernel(&attn);
    tkp_step_flush_thread(R(), now += 10);
    drain();
    cr_assert_eq(nsteps, 3);
    expect(0, 0, TKP_STEP_OUTSIDE, TKP_CLOSE_NEXT_STEP, 1, 0);
    expect(1, 1, TKP_STEP_TOKEN, TKP_CLOSE_NEXT_STEP, 3, 0);
    expect(2, 2, TKP_STEP_TOKEN, TKP_CLOSE_EXIT, 2, 0);
}

/* Whether a kernel matches is asked of the regex once per kernel and kept (record/symtab.c); a
 * regex compiled again (a fork child reading TOKPROF_STEP anew) is asked again. */
Test(shim_step, kernel_mode_answers_are_the_current_regex)
{
    static const char embed, attn;
    const uint64_t e = (uint64_t)(uintptr_t)&embed, a = (uint64_t)(uintptr_t)&attn;
    tkp_sym_register(&embed, "embedding_kernel");
    tkp_sym_register(&attn, "attention_kernel");
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "kernel:^embed"), 0);
    for (int i = 0; i < 2; i++) { /* asked, then kept */
        cr_assert_eq(tkp_step_launch_boundary(R(), e, TKP_KEY_HOSTFUN, now += 10), 1);
        cr_assert_eq(tkp_step_launch_boundary(R(), a, TKP_KEY_HOSTFUN, now += 10), 0);
    }
    cr_assert_eq(tkp_config_set("TOKPROF_STEP", "kernel:^attention"), 0);
    cr_assert_eq(tkp_step_launch_boundary(R(), e, TKP_KEY_HOSTFUN, now += 10), 0);
    cr_assert_eq(tkp_step_launch_boundary(R(), a, TKP_KEY_HOSTFUN, now += 10), 1);
    static const char unknown; /* never registered: no name, never a boundary */
    cr_assert_eq(tkp_step_launch_boundary(R(), (uint64_t)(uintptr_t)&unknown, TKP_KEY_HOSTFUN,
                                          now += 10), 0);
}
