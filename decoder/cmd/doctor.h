/* tokprof doctor (cmd/doctor.c): what a capture on this host will do, checked before it runs.
 * `tokprof run --check` (cmd/run.c) asks the same questions about the run it would start. */
#ifndef TKP_CMD_DOCTOR_H
#define TKP_CMD_DOCTOR_H

#include <stddef.h>

struct tkp_ctx;

/* The libtokprof.so to preload: `given` (--shim, TOKPROF_SHIM; NULL: none), else the one next to
 * this tokprof (build tree: build/decoder/tokprof -> build/shim/; install: PREFIX/bin/tokprof ->
 * PREFIX/lib/). Its real path into out (outlen bytes). Returns 0, or TKP_ERR_NOSHIM with the
 * reason in ctx->why. */
int tkp_doctor_find_shim(struct tkp_ctx *ctx, const char *given, char *out, size_t outlen);

/* What to judge: the environment as it is, with what `tokprof run` would change in it. */
struct tkp_doctor_opts {
    const char *shim;    /* --shim or TOKPROF_SHIM; NULL: the one next to tokprof */
    const char *out_dir; /* tokprof run -o DIR (it sets TOKPROF_OUT); NULL: TOKPROF_OUT */
    const char *step;    /* tokprof run --step MODE (it sets TOKPROF_STEP); NULL: TOKPROF_STEP */
    char *const *prog;   /* the command line to run (NULL: none): checked for AT_SECURE */
    int json;            /* --json: one JSON object instead of the text */
    int run;             /* 1 for tokprof run --check: run sets NVTX_INJECTION64_PATH itself */
};

/* Runs every check and writes the report to ctx->out. Returns 0 when a capture will work as set,
 * TKP_ERR_VIOLATION (exit 1) when not: the report then has one "problem" line per problem and
 * ctx->why counts them. */
int tkp_doctor(struct tkp_ctx *ctx, const struct tkp_doctor_opts *o);

#endif
