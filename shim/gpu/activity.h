/* Tier 2: GPU time from CUPTI activity, the side that runs on application threads and on
 * CUPTI's (activity.c): the subscription, the API callback, the activity buffers, the window and
 * trigger switch, the graph node map. Internal to the shim. The writer thread's side, which
 * encodes the buffers into chunks, is gpuenc.c; it uses this header, never the other way round.
 *
 * Who calls what:
 *   shim/init.c  tkp_cupti_config() before the writer starts, tkp_cupti_start() once capture
 *                has started; tkp_cupti_stop() at exit, before the writer's final drain;
 *                tkp_cupti_after_fork() in a fork child; and it hands
 *                tkp_cupti_on_segment() to the step detector, which calls it when the calling
 *                thread's segment advances (window and trigger modes switch activity there).
 *   graph.c      tkp_cupti_graph_node() for every node of an instantiated graph.
 *   sink/flight.c  tkp_gpu_arm() when a snapshot begins.
 *   gpuenc.c     (the writer thread only) the hand-over functions at the end. */
#ifndef TKP_GPU_ACTIVITY_H
#define TKP_GPU_ACTIVITY_H

#include <cupti.h>
#include <stdint.h>

/* Takes TOKPROF_GPU and its companions from tkp_cfg, before the writer thread starts (which
 * reads the mode and status): shim/init.c, after tkp_config_load(). */
void tkp_cupti_config(void);
void tkp_cupti_start(void);
void tkp_cupti_stop(void);
void tkp_cupti_after_fork(void);
/* hooks_cupti.c, when the program (torch.profiler, nsys) registers CUPTI clients of its own: the
 * shim hands CUPTI over (tier 1 from then on, one warning) and returns the real `fn`, or NULL. */
void *tkp_cupti_yield(const char *fn);
void tkp_cupti_on_segment(uint32_t new_seg);
/* graph.c: CUPTI's id of a node (0 when CUPTI is off), and its capture-local graph/node ids from
 * `since` (a tkp_stamp()) on: an updated exec maps the same CUPTI node to a new graph version. */
uint64_t tkp_cupti_node_id(void *cu_graph_node);
void tkp_cupti_graph_node(uint64_t cupti_id, uint32_t graph, uint64_t node, uint64_t since);
/* Arms the next `steps` segments of the stepping thread for GPU tracing, on top of the window
 * in window mode (trigger and window modes; the flight recorder's snapshot calls it, steps 0:
 * TOKPROF_GPU_TRIGGER_STEPS). Async-signal-safe. */
void tkp_gpu_arm(unsigned steps);

/* ---- the hand-over to the writer thread's side (gpuenc.c; the writer thread only) ---- */
/* A buffer CUPTI completed. */
struct tkp_cupti_buf;
/* The buffers completed so far, oldest first, as a list that tkp_cupti_release() walks; NULL
 * when none. The caller owns them until it releases them. */
struct tkp_cupti_buf *tkp_cupti_take(void);
/* Puts the list `more` (from tkp_cupti_take) after the last buffer of `list`. */
void tkp_cupti_append(struct tkp_cupti_buf *list, struct tkp_cupti_buf *more);
/* CUPTI's cuptiActivityGetNextRecord and the buffer's bytes, for the caller to walk the records
 * itself (no call of ours per record): next(*data, *valid, &rec) advances rec (NULL: the first)
 * and returns CUPTI_SUCCESS until the end. NULL when CUPTI has no such entry point. */
typedef CUptiResult (*tkp_cupti_next_fn)(uint8_t *data, size_t valid, CUpti_Activity **rec);
tkp_cupti_next_fn tkp_cupti_records(struct tkp_cupti_buf *b, uint8_t **data, size_t *valid);
/* Frees a buffer (it counts against TOKPROF_GPU_BUFFER_MB no more); returns the next one. */
struct tkp_cupti_buf *tkp_cupti_release(struct tkp_cupti_buf *b);
/* 1 when the GPU mode (window, trigger) may leave records out: tkp_cupti_untraced() can say 1. */
int tkp_cupti_filters(void);
/* 1 when a record of (capture-local thread, step) falls outside the traced steps (window and
 * trigger modes: CUPTI was switched on early or off late around it), so the encoder drops it. */
int tkp_cupti_untraced(uint32_t thread, uint32_t step);
/* CUPTI's graph node id -> the capture-local graph and node ids graph.c registered for the
 * version current at `stamp` (the launch's CUPTI callback; UINT64_MAX: the newest); 0 when
 * unknown. *from (when from is not NULL): when that is the newest version, its start (every stamp from there gets the
 * same ids until tkp_cupti_node_gen() changes), else UINT64_MAX. */
int tkp_cupti_node_lookup(uint64_t cupti_id, uint64_t stamp, uint32_t *graph, uint64_t *node,
                          uint64_t *from);
/* Changes whenever a node version is added (read it after tkp_cupti_take: a version added
 * before a launch whose record the buffers hold is counted). */
uint64_t tkp_cupti_node_gen(void);
/* The tier's state as GPU_INFO reports it, read at once (the writer reads it while the capture's
 * start or a hand-over sets it); mode is the tier's own string (valid until the next capture start
 * or fork), reason a copy. */
struct tkp_cupti_status {
    int status;        /* enum tkp_gpu_status */
    const char *mode;  /* TOKPROF_GPU as applied: always, off, trigger:N, window:N/M */
    char reason[160];  /* why GPU time is off or partial; "" when on */
    uint64_t dropped;  /* records CUPTI dropped (declined buffers) */
    uint64_t buf_peak; /* the most buffer bytes held at once */
};
void tkp_cupti_status(struct tkp_cupti_status *st);

#endif
