/* The per-thread ring and the per-thread step-detector state that lives beside it. Internal to
 * ring.c, step.c and writer.c. */
#ifndef TKP_RING_H
#define TKP_RING_H

#include "shim.h"

#define TKP_PENDING_MAX 16 /* steps marked but not yet seen complete by the host */
#define TKP_EVMAP_MAX 16   /* recently recorded events -> latest marked segment */

struct tkp_pending {
    uint32_t seg;
    uint32_t launches, graph_launches, copies;
    uint64_t begin_ns, mark_ns;
};

/* Step detector state of one thread: touched only by the owning thread. */
struct tkp_stepstate {
    uint32_t seg;                 /* current segment */
    uint32_t launches, graph_launches, copies;
    uint64_t begin_ns, last_ns;   /* first and latest record of the current segment */
    int seen_token;               /* a token step has been marked on this thread */
    int64_t last_marked;          /* highest marked segment, -1 none */
    uint32_t npending, pending_head;
    struct tkp_pending pending[TKP_PENDING_MAX];
    uint64_t ev_key[TKP_EVMAP_MAX];
    int64_t ev_seg[TKP_EVMAP_MAX];
    uint32_t ev_next;
    int in_range;                 /* nvtx/marker modes: inside a step range */
};

enum { TKP_RING_FREE = 0, TKP_RING_OWNED = 1, TKP_RING_EXITED = 2 };

struct tkp_ring {
    /* producer line */
    _Atomic uint64_t head;
    uint64_t tail_cache;
    _Atomic uint64_t dropped;
    uint64_t mask;
    struct tkp_ev *slots;
    char pad0[64 - 40];
    /* consumer line */
    _Atomic uint64_t tail;
    char pad1[56];
    /* identity */
    _Atomic int state;
    int os_tid;
    uint32_t thread_idx; /* capture-local, never reused */
    uint32_t mem_idx;
    struct tkp_stepstate st;
};

/* Reserves the next slot, or NULL when the ring is full (the drop is counted). The producer
 * compares against a cached tail and reads the consumer's line only when that says full. */
static inline struct tkp_ev *tkp_ring_reserve(struct tkp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (TKP_UNLIKELY(h - r->tail_cache > r->mask)) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_cache > r->mask) {
            tkp_ring_count_drop(r);
            return NULL;
        }
    }
    /* The slot's line was last read by the writer, on another core: ask for ownership of a line
     * a few slots ahead now, so that transfer overlaps the launches in between instead of
     * stalling a later one. */
    __builtin_prefetch(&r->slots[(h + 4) & r->mask], 1, 3);
    return &r->slots[h & r->mask];
}

/* Publishes the slot reserved last. */
static inline void tkp_ring_commit(struct tkp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

void tkp_step_graph_boundary(struct tkp_ring *r, uint64_t ts);

/* Launch path of the step detector: count the launch in the current segment. Inline: it is on
 * every launch. */
static inline uint32_t tkp_step_on_launch(struct tkp_ring *r, uint64_t ts, int graph)
{
    struct tkp_stepstate *s = &r->st;
    if (graph) {
        if (tkp_cfg.step_mode == TKP_STEPMODE_GRAPH) tkp_step_graph_boundary(r, ts);
        s->graph_launches++;
    } else {
        s->launches++;
    }
    if (TKP_UNLIKELY(!s->begin_ns)) s->begin_ns = ts;
    s->last_ns = ts;
    return s->seg;
}

#endif
