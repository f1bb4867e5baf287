/* Tier 2: GPU time from CUPTI activity (cupti.c). Internal to the shim.
 *
 * Who calls what:
 *   init.c   tkp_cupti_start() once capture has started; tkp_cupti_stop() at exit, before the
 *            writer's final drain; tkp_cupti_after_fork() in a fork child.
 *   step.c   tkp_cupti_on_segment() when the calling thread's segment advances (window and
 *            trigger modes switch activity there).
 *   graph.c  tkp_cupti_graph_node() for every node of an instantiated graph.
 *   writer.c (writer thread only) tkp_cupti_take() before draining the rings, tkp_cupti_note()
 *            for each TKP_EV_GPU_CORR ring event, tkp_cupti_encode() after the drain. */
#ifndef TKP_CUPTI_H
#define TKP_CUPTI_H

#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>

#include "shim.h"

/* Ring event (never a record type): CUPTI's launch callback saw correlation id `a` for the
 * calling thread's latest host record of kind `sub` (enum tkp_gpu_join) in segment `step`,
 * ordinal u[0] among that segment's records of that kind. */
#define TKP_EV_GPU_CORR 200

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

/* Writer side. The packer and name ids come from the writer (writer.c). */
struct tkp_gpu_batch;
struct tkp_gpu_batch *tkp_cupti_take(void);
void tkp_cupti_note(const struct tkp_ev *e, uint32_t thread);
void tkp_cupti_encode(struct tkp_gpu_batch *b, int final);
msgpack_packer *tkp_writer_packer(void); /* opens a chunk when none is open */
uint32_t tkp_writer_name(const char *s);

#endif
