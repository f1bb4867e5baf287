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

/* A LAUNCH's slot (ring_types.h's layout), eight 64-bit stores. The runtime launch exports'
 * assembly (hooks_rt.c, RT_LAUNCH_FAST) writes the same words: change both together. */
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
