/* The per-thread ring's types (ring.c): the 64-byte event every hook fills and the ring that
 * holds them. The inline fast path is in ring.h.
 *
 * Event field use (struct tkp_ev):
 *   LAUNCH        sub=via flags=key kind a=key b=stream u[0..5]=grid x y, block x y, grid z,
 *                 block z (dim3's x and y are one register each: plain 64-bit stores)
 *                 u[6]=smem u[7]=library call id (0 none)
 *   LIB_CALL      see libcall.h
 *   GRAPH_LAUNCH  sub=via a=graph exec b=stream
 *   COPY          sub=kind flags=dir|copyflags<<8 a=bytes b=stream
 *   SYNC          sub=kind a=handle b=wait_ns
 *   EVENT_RECORD  a=event b=stream          STREAM_WAIT a=stream b=event
 *   STEP          sub=step kind u[0]=closed_by ts=begin a=mark b=end u[1..3]=counts
 *   NVTX          sub=kind a=name (interned pointer) u[0]=range id
 *   MARKER        sub=kind a=value
 * and two ring-only events that are never records of their own:
 *   TKP_EV_GPU_CORR  CUPTI's launch callback saw correlation id `a` for the calling thread's
 *                    latest host record of kind `sub` (enum tkp_gpu_join) in segment `step`,
 *                    ordinal u[0] among that segment's records of that kind (gpu/activity.c)
 *   TKP_EV_STACK     a = stack id, ts = the launch's ts: the next LAUNCH's stack (stacks.c) */
#ifndef TKP_RECORD_RING_TYPES_H
#define TKP_RECORD_RING_TYPES_H

#include <stdatomic.h>
#include <stdint.h>

#define TKP_EV_GPU_CORR 200
#define TKP_EV_STACK 201

/* One fixed-size event; w[] views it as eight 64-bit words (the launch fast path's stores). */
struct tkp_ev {
    union {
        struct {
            uint8_t type;   /* enum tkp_rec, or TKP_EV_* */
            uint8_t sub;    /* via / copy kind / sync kind / nvtx kind / step kind */
            uint16_t flags; /* LAUNCH: key kind; COPY: dir | flags<<8 */
            uint32_t step;
            uint64_t ts;
            uint64_t a, b;
            uint32_t u[8];
        };
        uint64_t w[8];
    };
};
_Static_assert(sizeof(struct tkp_ev) == 64, "ring events are one cache line");
/* A LAUNCH's first word: type, via, key kind and step as the fields above lay them out. */
#define TKP_EV_LAUNCH_W0(via, key_kind, step)                                                     \
    ((uint64_t)TKP_REC_LAUNCH | (uint64_t)(uint8_t)(via) << 8 |                                   \
     (uint64_t)(uint16_t)(key_kind) << 16 | (uint64_t)(uint32_t)(step) << 32)

enum { TKP_RING_FREE = 0, TKP_RING_OWNED = 1, TKP_RING_EXITED = 2 };

/* Bytes of per-thread state kept beside each ring for the floor above (the step detector's,
 * record/step.h): the ring zeroes them when a thread claims the ring and knows nothing else. */
#define TKP_RING_USER 2048

struct tkp_ring {
    /* producer line */
    _Atomic uint64_t head;
    uint64_t tail_cache;
    _Atomic uint64_t dropped;
    uint64_t mask;
    struct tkp_ev *slots;
    uint64_t nudge_mask; /* the producer looks at the writer every nudge_mask + 1 events */
    /* The launch fast path's bound (hooks.h): below this head a slot is free and its commit asks
     * nothing of the writer (no nudge due). 0 after a claim; tkp_ring_fast_refresh sets it. */
    uint64_t fast_limit;
    char pad0[64 - 56];
    /* consumer line */
    _Atomic uint64_t tail;
    char pad1[56];
    /* identity */
    _Atomic int state;
    int os_tid;
    uint32_t thread_idx; /* capture-local, never reused */
    uint32_t mem_idx;
    /* the owning thread's state of the step detector; touched only by that thread */
    _Alignas(64) unsigned char user[TKP_RING_USER];
};

#endif
