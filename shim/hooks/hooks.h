/* The hooks' emitters (tkp_emit_*), shared by the runtime, driver and library hooks: each puts one
 * event in the calling thread's ring, and is the whole per-event cost: clock, TLS, one ring slot.
 * ("rec" is kept for the record types, TKP_REC_*.) */
#ifndef TKP_HOOKS_HOOKS_H
#define TKP_HOOKS_HOOKS_H

#include <errno.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/state.h"
#include "hooks/hooks_drv.h"
#include "record/ring.h"
#include "record/stacks.h"
#include "record/step.h"
#include "tokprof/format.h"

/* True when the calling thread should record: capture on, and not nested in another hook. */
static inline int tkp_should_record(void)
{
    return tkp_tls.depth == 0 && tkp_active();
}

static inline int tkp_skip_captured(uint64_t stream, int ptsz)
{
    return TKP_UNLIKELY(atomic_load_explicit(&tkp_captures_active, memory_order_relaxed) > 0) &&
           tkp_stream_capturing(stream, ptsz);
}

/* A LAUNCH's slot (ring_types.h's layout), eight 64-bit stores. */
static inline __attribute__((always_inline)) void
tkp_launch_fill(struct tkp_ev *e, uint64_t w0, uint64_t ts, uint64_t key, uint64_t stream,
                uint64_t gxy, uint64_t bxy, uint32_t gz, uint32_t bz, uint32_t smem)
{
    e->w[0] = w0;
    e->w[1] = ts;
    e->w[2] = key;
    e->w[3] = stream;
    e->w[4] = gxy;
    e->w[5] = bxy;
    e->w[6] = gz | (uint64_t)bz << 32;
    /* the cuBLAS/cuDNN call that launched it, 0 none */
    e->w[7] = smem | (uint64_t)tkp_tls.lib_call << 32;
}

/* A launch's record. Inlined into each launch hook (one frame, no argument marshalling). It keeps
 * errno without touching it on the common path: nothing there can set it (the ring's slow paths
 * keep it themselves), and the rare calls that might are wrapped one by one. */
static inline __attribute__((always_inline)) void
tkp_emit_launch(int via, uint64_t key, int key_kind, uint64_t stream, unsigned gx, unsigned gy,
                unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem)
{
    if (TKP_UNLIKELY(atomic_load_explicit(&tkp_captures_active, memory_order_relaxed) > 0)) {
        int e = errno;
        int skip = tkp_stream_capturing(stream, via & TKP_VIA_PTSZ);
        errno = e;
        if (skip) return;
    }
    struct tkp_ring *r = tkp_ring_self();
    if (TKP_UNLIKELY(!r)) {
        atomic_fetch_add_explicit(&tkp_ringless_drops, 1, memory_order_relaxed);
        return;
    }
    uint64_t ts = tkp_stamp();
    if (TKP_UNLIKELY(tkp_cfg.step_mode == TKP_STEPMODE_KERNEL)) {
        int e = errno;
        tkp_step_launch_boundary(r, key, key_kind, ts);
        errno = e;
    }
    uint32_t step = tkp_step_on_launch(r, ts, 0);
    /* sampled call stack: its ring event goes right before the LAUNCH (stacks.h) */
    if (TKP_UNLIKELY(tkp_stacks_mode)) {
        int e = errno;
        tkp_stacks_on_launch(r, key, via, ts);
        errno = e;
    }
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (TKP_UNLIKELY(!e)) return;
    tkp_launch_fill(e, TKP_EV_LAUNCH_W0(via, key_kind, step), ts, key, stream,
                    gx | (uint64_t)gy << 32, bx | (uint64_t)by << 32, gz, bz, smem);
    tkp_ring_commit(r);
}

/* ---- the launch fast path (issue 32) ------------------------------------------------------ *
 * A runtime launch hook (hooks_rt.c) records inline and leaves by a tail jump to the real
 * function when all of this holds, else it jumps to its full path (tkp_emit_launch, then the
 * real function):
 *   - the gate word is 1 (state.h: capturing, no stream capturing a graph, TSC stamps, no kernel
 *     step mode, no stacks): one compare for what were five branches on settings and state;
 *   - the thread is in none of our hooks (tkp_tls.depth) and has its ring;
 *   - the head is below the ring's fast_limit (ring.h): a free slot, and no writer nudge due.
 * What the full path would do besides is then nothing: so the record is the same. The slot is
 * eight plain 64-bit stores (ring_types.h's launch layout keeps dim3's x,y register whole). */
static inline __attribute__((always_inline)) int tkp_launch_fast_ok(struct tkp_ring *r,
                                                                     uint64_t *h)
{
    if (TKP_UNLIKELY(tkp_tls.depth || !r)) return 0; /* the caller asked tkp_gate_open() */
    *h = atomic_load_explicit(&r->head, memory_order_relaxed);
    return TKP_LIKELY(*h < r->fast_limit);
}

static inline __attribute__((always_inline)) void
tkp_launch_fast(struct tkp_ring *r, uint64_t h, int via, int key_kind, uint64_t key,
                uint64_t stream, uint64_t gxy, uint64_t bxy, uint32_t gz, uint32_t bz,
                uint32_t smem)
{
    uint64_t ts = __builtin_ia32_rdtsc(); /* the gate says the stamps are TSC */
    uint32_t seg = tkp_step_on_launch(r, ts, 0);
    struct tkp_ev *e = &r->slots[h & r->mask];
    /* tkp_ring_reserve's prefetch; past the ring's end near its wrap (a prefetch never faults) */
    __builtin_prefetch(e + 4, 1, 3);
    tkp_launch_fill(e, TKP_EV_LAUNCH_W0(via, key_kind, seg), ts, key, stream, gxy, bxy, gz, bz,
                    smem);
    atomic_store_explicit(&r->head, h + 1, memory_order_release); /* tkp_ring_commit, no nudge due */
}

static inline void tkp_emit_graph_launch(int via, uint64_t exec, uint64_t stream)
{
    struct tkp_ring *r = tkp_ring_self();
    if (TKP_UNLIKELY(!r)) {
        atomic_fetch_add_explicit(&tkp_ringless_drops, 1, memory_order_relaxed);
        return;
    }
    uint64_t ts = tkp_stamp();
    uint32_t step = tkp_step_on_launch(r, ts, 1);
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (TKP_UNLIKELY(!e)) return;
    e->type = TKP_REC_GRAPH_LAUNCH;
    e->sub = (uint8_t)via;
    e->step = step;
    e->ts = ts;
    e->a = exec;
    e->b = stream;
    tkp_ring_commit(r);
}

/* Returns 1 when this copy marked the end of a step (auto mode). */
static inline int tkp_emit_copy(int kind, int dir, uint64_t bytes, uint64_t stream, unsigned flags,
                                uint64_t host)
{
    if (tkp_skip_captured(stream, 0)) return 0;
    struct tkp_ring *r = tkp_ring_self();
    if (TKP_UNLIKELY(!r)) {
        atomic_fetch_add_explicit(&tkp_ringless_drops, 1, memory_order_relaxed);
        return 0;
    }
    uint64_t ts = tkp_stamp();
    uint32_t before = tkp_step_current(r);
    uint32_t step = kind == TKP_COPY_MEMCPY
                        ? tkp_step_on_copy(r, ts, dir, bytes, flags & TKP_COPY_ASYNC, stream, host)
                        : tkp_step_on_copy(r, ts, -1, bytes, 1, stream, 0);
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (e) {
        e->type = TKP_REC_COPY;
        e->sub = (uint8_t)kind;
        e->flags = (uint16_t)(dir | (flags << 8));
        e->step = step;
        e->ts = ts;
        e->a = bytes;
        e->b = stream;
        tkp_ring_commit(r);
    }
    return tkp_step_current(r) != before;
}

static inline void tkp_emit_sync(int kind, uint64_t handle, uint64_t t0, uint64_t t1)
{
    struct tkp_ring *r = tkp_ring_self();
    if (TKP_UNLIKELY(!r)) return;
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (e) {
        e->type = TKP_REC_SYNC;
        e->sub = (uint8_t)kind;
        e->step = tkp_step_current(r);
        e->ts = t0;
        e->a = handle;
        e->b = t1 - t0;
        tkp_ring_commit(r);
    }
    tkp_step_on_sync(r, kind, handle, t1);
}

/* A blocking copy returned: the host waited from t0 to t1 (a SYNC), which may complete steps. */
static inline void tkp_emit_copy_return(int marked, uint64_t t0, uint64_t t1)
{
    struct tkp_ring *r = tkp_ring_self();
    if (!r) return;
    tkp_emit_sync(TKP_SYNC_MEMCPY, 0, t0, t1);
    tkp_step_on_copy_return(r, t1, marked);
}

static inline void tkp_emit_pair(int type, uint64_t a, uint64_t b)
{
    struct tkp_ring *r = tkp_ring_self();
    if (TKP_UNLIKELY(!r)) return;
    if (type == TKP_REC_EVENT_RECORD) tkp_step_on_event_record(r, a);
    else if (type == TKP_REC_STREAM_WAIT) tkp_step_on_stream_wait(r, a, b);
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return;
    e->type = (uint8_t)type;
    e->step = tkp_step_current(r);
    e->ts = tkp_stamp();
    e->a = a;
    e->b = b;
    tkp_ring_commit(r);
}

#endif
