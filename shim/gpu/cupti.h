/* Tier 2: GPU time from CUPTI activity (cupti.c). Internal to the shim.
 *
 * Who calls what:
 *   shim/init.c  tkp_cupti_start() once capture has started; tkp_cupti_stop() at exit, before
 *                the writer's final drain; tkp_cupti_after_fork() in a fork child; and it hands
 *                tkp_cupti_on_segment() to the step detector, which calls it when the calling
 *                thread's segment advances (window and trigger modes switch activity there).
 *   graph.c      tkp_cupti_graph_node() for every node of an instantiated graph.
 *   sink/flight.c  tkp_gpu_arm() when a snapshot begins.
 *   the writer   (writer thread only) tkp_cupti_take() before draining the rings,
 *                tkp_cupti_note() for each TKP_EV_GPU_CORR ring event (record/ring_types.h),
 *                tkp_cupti_encode() after the drain, with a struct tkp_enc: the GPU tier never
 *                calls the writer. */
#ifndef TKP_GPU_CUPTI_H
#define TKP_GPU_CUPTI_H

#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>

#include "record/ring_types.h"

void tkp_cupti_start(void);
void tkp_cupti_stop(void);
void tkp_cupti_after_fork(void);
void tkp_cupti_on_segment(uint32_t new_seg);
/* graph.c: CUPTI's id of a node (0 when CUPTI is off), and its capture-local graph/node ids. */
uint64_t tkp_cupti_node_id(void *cu_graph_node);
void tkp_cupti_graph_node(uint64_t cupti_id, uint32_t graph, uint64_t node);
/* Arms the next `steps` segments of the stepping thread for GPU tracing (trigger mode; also the
 * entry point for later production triggers). Async-signal-safe. */
void tkp_gpu_arm(unsigned steps);

/* ---- writer side (the writer thread only) ---- */
/* What the writer hands an encoder that lives outside it: its packer and its name table, behind
 * two functions, so that the encoder never calls the writer back. */
struct tkp_enc {
    void *ctx;
    /* The packer of the current chunk, opening one when none is open and ending the open RUN
     * (records packed next come after it). */
    msgpack_packer *(*packer)(void *ctx);
    /* The id of a name, defined in the current chunk before it is returned. */
    uint32_t (*name)(void *ctx, const char *s);
};
struct tkp_gpu_batch;
/* The buffers CUPTI completed so far, to encode after the rings are drained. */
struct tkp_gpu_batch *tkp_cupti_take(void);
void tkp_cupti_note(const struct tkp_ev *e, uint32_t thread);
/* Encodes the batch's records (COLS) and a GPU_INFO when anything changed (always when final). */
void tkp_cupti_encode(struct tkp_gpu_batch *b, int final, const struct tkp_enc *enc);

#endif
