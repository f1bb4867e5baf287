/* Tier 2, the writer thread's side (gpuenc.c): the GPU records of CUPTI's completed buffers,
 * joined to the host records and encoded as GPU_TMPL and GPU_RUN (kernels), COLS (copies) and GPU_INFO into the writer's chunks. Internal
 * to the shim; the writer thread only.
 *
 * Who calls what (writer/writer.c, each cycle):
 *   tkp_gpuenc_take()    before draining the rings: the buffers CUPTI completed so far (with
 *                        what an earlier cycle left unencoded);
 *   tkp_gpuenc_note()    for each TKP_EV_GPU_CORR ring event (record/ring_types.h) of the drain;
 *   tkp_gpuenc_encode()  after the drain, with a struct tkp_enc (the encoder never calls the
 *                        writer back), a slice of records at a time, the rings drained between.
 * shim/init.c calls tkp_gpuenc_after_fork() in a fork child. This side reads gpu/activity.h (the
 * buffers, the window filter, the graph nodes, the tier's status); activity.c never calls it. */
#ifndef TKP_GPU_GPUENC_H
#define TKP_GPU_GPUENC_H

#include <msgpack.h>
#include <stdint.h>

#include "record/ring_types.h"

/* What the writer hands an encoder that lives outside it: its packer and its name table, behind
 * two functions, so that the encoder never calls the writer back. */
struct tkp_enc {
    void *ctx;
    /* The packer of the current chunk, opening one when none is open and ending the open RUN
     * (records packed next come after it). */
    msgpack_packer *(*packer)(void *ctx);
    /* The id of a name, defined in the current chunk before it is returned. */
    uint32_t (*name)(void *ctx, const char *s);
    /* The current chunk's number (the same during one tkp_gpuenc_encode() call): GPU templates
     * are defined once per chunk. */
    uint32_t (*chunk)(void *ctx);
    /* TOKPROF_TEST_GPU: 0 GPU_RUNs, 1 COLS only (as format 5), 2 GPU_RUNs each shadowed by its
     * COLS (tests only) */
    int test;
};
struct tkp_gpu_batch;
/* The buffers CUPTI completed so far, to encode after the rings are drained. Valid until the
 * next call; tkp_gpuenc_encode() frees them. */
struct tkp_gpu_batch *tkp_gpuenc_take(void);
/* Remembers the launch a correlation id belongs to (thread: its capture-local index). */
void tkp_gpuenc_note(const struct tkp_ev *e, uint32_t thread);
/* Encodes up to `max` of the batch's records (COLS; all of them when final) and returns 1 when
 * some remain: the writer drains the rings between two calls, so that a large batch never
 * keeps it from the rings for long. At the batch's end, a GPU_INFO when anything changed
 * (always when final), and 0. */
int tkp_gpuenc_encode(struct tkp_gpu_batch *b, int final, uint32_t max, const struct tkp_enc *enc);
/* GPU records encoded so far. */
uint64_t tkp_gpuenc_records(void);
/* A fork child: forgets the parent's open COLS and the GPU_INFO it sent. */
void tkp_gpuenc_after_fork(void);

#endif
