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

#endif
