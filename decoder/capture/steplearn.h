/* tokprof decoder: the learned step definition — which of the shim's `auto` token steps are the
 * loop's tokens, learned from the capture's steady state (README "Steps", docs/FORMAT.md "Steps").
 *
 * The shim's `auto` ends a step at a small device-to-host copy and completes it when the host
 * waits for it. Before a loop's steady state the host reads other small values back the same
 * way: torch.compile's scalar reads while it compiles (2 bytes), a transformers model's
 * data-dependent flag in a CUDA-graph warm-up forward (1 byte, on the warm-up's side stream).
 * Each such segment is a STEP record of kind token. The learner tells them apart by the
 * segment's *end signature*: the stream and size of its last device-to-host copy and how the host
 * waited for it (through an event it recorded, or otherwise). With an event wait (vLLM's async
 * output) the size is left out: it is the batch's sampled ids, which vary with the batch.
 *
 * Learning, per thread (each serving thread has its own loop and streams): the thread's first
 * TKP_LEARN_WINDOW token STEP records, in order. A signature seen in the window's first half and
 * never in its second half (the steady state), whose copy is a scalar (TKP_LEARN_SCALAR bytes at
 * most) or waited through an event, is a warm-up signature: every token STEP record of
 * the thread with it, anywhere in the capture, is delivered with kind TKP_STEP_WARMUP instead. Signatures the window never saw are tokens (a batch size that appears
 * later is not rejected), nor is a step whose end copy the file does not hold (a rotated file's
 * first). A thread with fewer than TKP_LEARN_MIN candidates learns nothing: its steps stay as the
 * shim wrote them. Only captures whose META config.step is "auto" (or absent) learn.
 *
 * Where it runs: inside the reader (reader.c), so every pass of every command — summary, steps,
 * check, table, the follower behind top/serve/check --follow, the Python API — sees the same
 * kinds. A reader opened on a file (tkp_reader_open) first reads the capture's head, at its first
 * read (a bounded prefix, RUNs and COLS skipped: until every thread with steps so far has its
 * window, or TKP_LEARN_PRESCAN_MAX steps), then the reader's own pass classifies; the chunks the
 * prescan decompressed are the pass's (reader.c, up to one maximal chunk's 64 MiB), so the head is
 * decompressed once. A thread whose window is not full by then (a capture
 * still being written, followed live; a thread that starts later) goes on learning in the
 * reader's pass: its first steps are delivered as the shim wrote them, the later ones classified
 * once its window is full. */
#ifndef TKP_STEPLEARN_H
#define TKP_STEPLEARN_H

#include <stdint.h>

struct tkp_record;

#define TKP_LEARN_WINDOW 64        /* a thread's token STEP records learned from */
#define TKP_LEARN_MIN 8            /* fewer at the end of a capture: nothing learned */
#define TKP_LEARN_RING 16          /* per thread: the last segments' end copies (async pairing) */
#define TKP_LEARN_PRESCAN_MAX 256  /* the prescan stops after this many, all threads together */
#define TKP_LEARN_SCALAR 8         /* a warm-up's end copy: a scalar read back, this many bytes */

struct tkp_endsig {
    uint64_t stream, bytes; /* of the segment's last device-to-host copy; bytes 0: event wait */
    uint32_t wait;          /* 1 the host waited through an event, 0 otherwise, 2 no copy seen */
};

struct tkp_steplearn;

/* A learner for one capture file. NULL when out of memory (the reader then learns nothing). */
struct tkp_steplearn *tkp_steplearn_new(void);
void tkp_steplearn_free(struct tkp_steplearn *l); /* accepts NULL */

/* Feeds one record (only META, COPY and STEP matter) and, for a token STEP record, rewrites its
 * kind to TKP_STEP_WARMUP when its signature is a learned warm-up one. */
void tkp_steplearn_feed(struct tkp_steplearn *l, struct tkp_record *rec);

/* The end of the prescan (the capture's end or a full window): learns from what was seen when
 * there are enough candidates, and readies l for the reader's own pass over the same records. */
void tkp_steplearn_rewind(struct tkp_steplearn *l);

/* Whether the prescan has what it needs (every thread seen has its window, TKP_LEARN_PRESCAN_MAX
 * steps, or learning is off): stop reading. */
int tkp_steplearn_done(const struct tkp_steplearn *l);

#endif
