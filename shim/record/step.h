/* Online step detection (step.c): which decode step (token) each record belongs to. Application
 * threads only; each thread's state lives beside its ring (TKP_RING_USER bytes) and is touched
 * by that thread alone. */
#ifndef TKP_RECORD_STEP_H
#define TKP_RECORD_STEP_H

#include <stdint.h>

#include "core/config.h"
#include "record/ring.h"

#define TKP_PENDING_MAX 16 /* steps marked but not yet seen complete by the host */
#define TKP_EVMAP_MAX 16   /* recently recorded events -> latest marked segment */
#define TKP_SWAIT_MAX 4    /* streams that waited on such an event -> that segment */
#define TKP_HOLD_MIN 1024  /* an end copy this large (logits rows, not sampled ids) may be read
                            * back in parts: its step's report waits for the next end copy */

struct tkp_pending {
    uint32_t seg;
    uint32_t launches, graph_launches, copies;
    uint64_t stream;     /* of the copy that marked it */
    uint64_t dst, bytes; /* that copy's host destination and size */
    uint8_t passed;      /* a stream sync that completed nothing left it pending (step.c) */
    uint8_t part;        /* the next step's end copy continues it: a part of that step */
    uint8_t at_base;     /* its copy began where the thread's previous evaluation's output did */
    uint64_t begin_ns, mark_ns;
    uint64_t ready_ns; /* an event query first found it complete (0: none yet): its end unless
                        * an event wait paired with it comes before a later step is ready */
};

/* Step detector state of one thread. */
struct tkp_stepstate {
    uint32_t seg; /* current segment */
    uint32_t launches, graph_launches, copies;
    uint64_t begin_ns, last_ns; /* first and latest record of the current segment */
    int seen_token;             /* a token step has been marked on this thread */
    int64_t last_marked;        /* highest marked segment, -1 none */
    uint32_t npending, pending_head;
    struct tkp_pending pending[TKP_PENDING_MAX];
    uint64_t ev_key[TKP_EVMAP_MAX];
    int64_t ev_seg[TKP_EVMAP_MAX];
    uint32_t ev_next;
    uint64_t sw_stream[TKP_SWAIT_MAX]; /* streams made to wait (cudaStreamWaitEvent) on an event */
    int64_t sw_seg[TKP_SWAIT_MAX];     /* ... recorded after this marked segment */
    uint32_t sw_next;
    uint64_t eval_base;            /* where the last evaluation's output began (its end copy) */
    struct tkp_pending held;       /* a completed step whose report waits for the next end copy */
    uint64_t held_end;
    int held_closed_by, has_held;
    int in_range; /* nvtx/marker modes: inside a step range */
};
_Static_assert(sizeof(struct tkp_stepstate) <= TKP_RING_USER, "step state fits beside the ring");

static inline struct tkp_stepstate *tkp_step_state(struct tkp_ring *r)
{
    return (struct tkp_stepstate *)(void *)r->user;
}

/* What the GPU tier is told when the calling thread's segment advances (window and trigger modes
 * switch CUPTI activity there). Set once by shim/init.c; NULL tells nobody. */
typedef void (*tkp_step_segment_fn)(uint32_t new_seg);
void tkp_step_set_segment_hook(tkp_step_segment_fn fn);

/* A thread claimed its ring (the ring's claim hook): a fresh detector. */
void tkp_step_thread_init(struct tkp_ring *r);

/* Each hook reports what it saw; the detector tags records with the current segment. */
uint32_t tkp_step_on_copy(struct tkp_ring *r, uint64_t ts, int dir, uint64_t bytes, int async,
                          uint64_t stream, uint64_t host);
void tkp_step_on_copy_return(struct tkp_ring *r, uint64_t ts, int marked);
uint32_t tkp_step_current(struct tkp_ring *r);
void tkp_step_on_event_record(struct tkp_ring *r, uint64_t event);
void tkp_step_on_stream_wait(struct tkp_ring *r, uint64_t stream, uint64_t event);
void tkp_step_on_sync(struct tkp_ring *r, int kind, uint64_t handle, uint64_t end_ts);
void tkp_step_on_marker(struct tkp_ring *r, int kind, uint64_t ts);
void tkp_step_on_nvtx(struct tkp_ring *r, int kind, const char *name, uint64_t ts);
int tkp_step_launch_boundary(struct tkp_ring *r, uint64_t key, int key_kind, uint64_t ts);
/* Program or thread exit (the ring's exit hook): report what is pending. */
void tkp_step_flush_thread(struct tkp_ring *r, uint64_t ts);
/* The graph-mode boundary; plain launches are counted inline (tkp_step_on_launch). */
void tkp_step_graph_boundary(struct tkp_ring *r, uint64_t ts);

/* Launch path of the step detector: count the launch in the current segment. Inline: it is on
 * every launch. */
static inline uint32_t tkp_step_on_launch(struct tkp_ring *r, uint64_t ts, int graph)
{
    struct tkp_stepstate *s = tkp_step_state(r);
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
