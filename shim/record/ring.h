/* Per-thread single-producer single-consumer rings (ring.c): the producer's inline fast path
 * (application threads: never blocks, never allocates) and the consumer's side (the writer
 * thread). Types in ring_types.h. */
#ifndef TKP_RECORD_RING_H
#define TKP_RECORD_RING_H

#include <stddef.h>

#include "core/state.h"
#include "record/ring_types.h"

/* ---- producer (application threads) ---------------------------------------------------------- */
/* The calling thread's ring, registering it on first use (one mmap per thread lifetime; errno
 * kept). NULL when no ring can be had; the caller counts a drop. */
struct tkp_ring *tkp_ring_get_slow(void);
static inline struct tkp_ring *tkp_ring_self(void)
{
    struct tkp_ring *r = tkp_tls.ring;
    return TKP_LIKELY(r != NULL) ? r : tkp_ring_get_slow();
}
/* Counts one event dropped because the ring was full. */
void tkp_ring_count_drop(struct tkp_ring *r);
/* Drops counted for threads that could not get a ring at all. */
extern _Atomic uint64_t tkp_ringless_drops;

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

/* Wakes the writer when it sleeps and r holds a quarter of its capacity or more (ring.c); h is
 * the head just published. */
void tkp_ring_nudge(struct tkp_ring *r, uint64_t h);

/* Publishes the slot reserved last. Every eighth of the ring, the producer asks whether the
 * writer should be woken: a burst wakes the writer by the ring's occupancy, not by its timer. */
static inline void tkp_ring_commit(struct tkp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed) + 1;
    atomic_store_explicit(&r->head, h, memory_order_release);
    if (TKP_UNLIKELY(!(h & r->nudge_mask))) tkp_ring_nudge(r, h);
}

/* Sets r->fast_limit from the head now (the producer, after a slot taken the full way): the
 * head at which the next slot would find the ring full by the cached tail, or whose commit would
 * be due to look at the writer (tkp_ring_commit's nudge), whichever comes first. Below it, the
 * launch fast path (hooks.h) reserves and commits with no check of either. */
static inline void tkp_ring_fast_refresh(struct tkp_ring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t full = r->tail_cache + r->mask + 1;
    uint64_t nudge = ((h + r->nudge_mask + 1) & ~r->nudge_mask) - 1; /* next h: !((h+1) & m) */
    r->fast_limit = full < nudge ? full : nudge;
}

/* What the floor above does when a thread claims a ring (its user bytes are zero by then) and
 * when the thread exits (its last events go in before the ring is released). Set once, by
 * shim/init.c, before capture starts; NULL does nothing. */
typedef void (*tkp_ring_claim_fn)(struct tkp_ring *r);
typedef void (*tkp_ring_exit_fn)(struct tkp_ring *r, uint64_t stamp);
void tkp_rings_set_hooks(tkp_ring_claim_fn on_claim, tkp_ring_exit_fn on_exit);

/* Rings made from now on hold `scale` times TOKPROF_RING_KB, as long as TOKPROF_BUFFER_MB has
 * room for that (then the plain size). Set by shim/init.c before capture starts. */
void tkp_rings_set_scale(unsigned scale);

/* ---- consumer (the writer thread) ------------------------------------------------------------ */
typedef void (*tkp_drain_fn)(void *ctx, const struct tkp_ev *ev, uint32_t thread_idx,
                             int os_tid);
/* Sleeps until timeout_ns passed or a producer's ring reached a quarter of its capacity
 * (tkp_ring_nudge); returns at once when one holds that much already. */
void tkp_rings_wait(uint64_t timeout_ns);
/* Drains every ring; returns the number of events. A ring whose thread exited is emptied, its
 * final drop count handed to fn as a LOSS event, and freed for another thread. */
size_t tkp_rings_drain(tkp_drain_fn fn, void *ctx);
/* Number of ring memory objects ever registered. */
uint32_t tkp_rings_count(void);
/* Ring i's thread: its capture-local index (returned), os tid and drops so far; -1 when free. */
int tkp_ring_info(uint32_t i, int *os_tid, uint64_t *dropped);
/* Fork child: forget every ring but the caller's, which is emptied. */
void tkp_rings_reset_after_fork(void);

#endif
