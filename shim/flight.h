/* The flight recorder (flight.c) and its triggers (trigger.c). Internal to the shim.
 *
 * In flight mode (TOKPROF_MODE=flight) the writer encodes and compresses chunks as in stream
 * mode, but output.c hands them to tkp_flight_put(), which keeps the last TOKPROF_FLIGHT_BEFORE_S
 * seconds of them (at most TOKPROF_FLIGHT_MB) in memory. A trigger writes a snapshot file: a META
 * chunk, the retained chunks, then the chunks of the next TOKPROF_FLIGHT_AFTER_S seconds. Every
 * function here runs on the writer thread, except tokprof_trigger() and the signal handler. */
#ifndef TKP_FLIGHT_H
#define TKP_FLIGHT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

enum tkp_trigger_kind {
    TKP_TRIG_NONE = 0, TKP_TRIG_STEP = 1, TKP_TRIG_SIGNAL = 2, TKP_TRIG_FILE = 3, TKP_TRIG_API = 4,
};

/* ---- flight.c ------------------------------------------------------------------------------- */
/* Installs the triggers. Called when the capture starts (before CUPTI: see trigger.c). */
void tkp_flight_start(void);
/* Keeps a finished chunk (copied); evicts what is older than the before-window or over the
 * memory cap; appends it to a snapshot in progress. 0, or -1 when a snapshot write failed and
 * the capture stopped. */
int tkp_flight_put(const void *frame, size_t zn, uint32_t raw, uint32_t seq, uint64_t t_begin,
                   uint64_t t_end);
/* Takes a pending trigger: starts a snapshot, or counts it as suppressed (rate limit). */
void tkp_flight_poll(uint64_t now);
/* Finishes a snapshot in progress (process exit). */
void tkp_flight_close(void);
void tkp_flight_after_fork(void);
int tkp_flight_meta_keys(void);
void tkp_flight_meta_pack(msgpack_packer *pk);

/* ---- trigger.c ------------------------------------------------------------------------------ */
/* Signal handler (only if the program left the signal at its default) and the file's baseline. */
void tkp_trigger_start(void);
/* The writer encoded a STEP record: a token step slower than TOKPROF_TRIGGER becomes pending. */
void tkp_trigger_on_step(int kind, uint64_t begin_ns, uint64_t end_ns);
/* The oldest pending trigger, if any: returns its kind (TKP_TRIG_NONE when none) and fills when
 * it happened and a short description. Triggers that arrive together are merged; *merged
 * counts the extra ones. */
int tkp_trigger_take(uint64_t now, uint64_t *at_ns, char *why, size_t cap, unsigned *merged);
void tkp_trigger_after_fork(void);
const char *tkp_trigger_name(int kind);

#endif
