/* tokprof public API: the version, and the step markers a program may call.
 *
 * A program need not link libtokprof.so to use the markers: look them up with
 * dlsym(RTLD_DEFAULT, "tokprof_step_begin") and call them when found. */
#ifndef TOKPROF_TOKPROF_H
#define TOKPROF_TOKPROF_H

#define TOKPROF_VERSION_MAJOR 0
#define TOKPROF_VERSION_MINOR 1
#define TOKPROF_VERSION_PATCH 0
#define TOKPROF_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Step markers, for TOKPROF_STEP=marker (and recorded as MARKER records in every mode): call
 * tokprof_step_begin() when the server starts a generation step and tokprof_step_end() when its
 * tokens are on the host. Thread-safe; each thread has its own sequence of steps. Cheap (one
 * ring slot); do nothing when the shim is not loaded or capture is off. */
void tokprof_step_begin(void);
void tokprof_step_end(void);

/* Flight recorder (TOKPROF_MODE=flight): asks for a snapshot of the last seconds of capture, as
 * an incident happens (an SLO miss the server noticed itself). `why` (accepts NULL; the first 63
 * bytes are kept, copied before return) is written in the snapshot's META. Async-signal-safe and
 * never blocking; the snapshot is written by the shim's own thread. Rate-limited by
 * TOKPROF_TRIGGER_MIN_S: calls within the period are counted, not snapshotted. Does nothing in
 * stream mode, before capture starts, or when the shim is not loaded (look it up with dlsym). */
void tokprof_trigger(const char *why);

#ifdef __cplusplus
}
#endif

#endif
