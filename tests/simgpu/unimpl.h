/* The "unimplemented" path of the fakes' generated stubs (gen_stubs.py), compiled into each fake
 * library (hidden there, so each library keeps its own copy and its own once-per-name state). */
#ifndef SIMGPU_UNIMPL_H
#define SIMGPU_UNIMPL_H

/* A stub is weak: a fake's own (strong) definition of the same name wins at link time. */
#define SIMGPU_STUB __attribute__((weak, visibility("default")))

/* Writes "simgpu: unimplemented NAME" on stderr the first time (*seen is 0), and one line
 * "PID NAME" per call to the file $SIMGPU_UNIMPL_LOG names (appended); returns status. */
int simgpu_unimpl(const char *name, int *seen, int status);

/* What a stub returning a string answers. */
extern const char simgpu_unimpl_string[];

/* cuGetProcAddress's fallback (driver only): every name cuda.h declares, and cuda.h's base names
 * with the symbol each one means by default and with the per-thread default stream. */
struct simgpu_named_proc {
    const char *name;
    void *fn;
};
struct simgpu_base_proc {
    const char *base, *sym, *sym_ptsz;
};
extern const struct simgpu_named_proc simgpu_all_procs[];
extern const struct simgpu_base_proc simgpu_base_procs[];

#endif
