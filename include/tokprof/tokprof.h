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

#ifdef __cplusplus
}
#endif

#endif
