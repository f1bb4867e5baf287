/* tokprof decoder library (libtokprof_decoder.so): captures as Arrow tables, for bindings (the
 * Python package `tokprof` loads it with ctypes) and for C programs.
 *
 * Tables cross by the Arrow C Data Interface (https://arrow.apache.org/docs/format/CDataInterface.html):
 * a struct ArrowArray of type struct (one child per column) and its struct ArrowSchema, both
 * filled by the library and owned by the caller from then on; the consumer (pyarrow's
 * RecordBatch._import_from_c, nanoarrow, DuckDB, ...) calls their release callbacks. No libarrow
 * is linked: the two structs are the whole ABI.
 *
 *     struct ArrowArray a; struct ArrowSchema s;
 *     const char *paths[] = {"run/"};
 *     char why[512], *warn = NULL;
 *     if (tkp_dec_steps(paths, 1, &a, &s, &warn, why, sizeof(why)) < 0) puts(why);
 *     ...; a.release(&a); s.release(&s); tkp_dec_free(warn);
 *
 * Every function takes the captures as paths (files or directories, merged as the CLI merges
 * them), returns 0 or a negative code (the CLI's error codes: -3 not a capture, -9 usage, -12 a
 * check violation, ...) with a one-line reason in why ("PATH: not a tokprof capture (bad magic)"),
 * and hands back non-fatal warnings (a torn tail) in *warn: NULL or a malloc'd string of lines,
 * freed with tkp_dec_free. The library keeps no state between calls. */
#ifndef TOKPROF_DECODER_H
#define TOKPROF_DECODER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* "0.1.0": the version of the library (and of the CLI it was built with). */
const char *tkp_dec_version(void);

/* Opens the captures and reads their headers: 0 when every path is a capture or a directory of
 * captures, else the reason. */
int tkp_dec_probe(const char *const *paths, size_t n, char *why, size_t whylen);

/* One row per step, the columns and values of `tokprof steps --json` (decoder/cmd/steps.c); the
 * GPU columns only when the capture has GPU records. classes: a rules file as `--classes`
 * (NULL: built-in classes only). */
int tkp_dec_steps(const char *const *paths, size_t n, const char *classes, struct ArrowArray *out,
                  struct ArrowSchema *schema, char **warn, char *why, size_t whylen);

/* One row per (step, kernel class) with kernels or GPU time in it: thread, tid, pid, seg, step,
 * begin_ns, class, kernels, gpu_ns, tokens (the fleet step_classes table's columns, and tid, pid)
 * — the breakdown behind steps' top_class. */
int tkp_dec_step_classes(const char *const *paths, size_t n, const char *classes,
                         struct ArrowArray *out, struct ArrowSchema *schema, char **warn,
                         char *why, size_t whylen);

/* One row per (step, MoE layer, expert) of one process's captures: thread, tid, pid, seg, step,
 * begin_ns, layer, expert, tokens (routed to the expert in that layer), expert_gpu_ns (the fleet
 * moe table's columns, and tid, pid; times monotonic). From per-expert GEMMs, as `tokprof moe`:
 * no rows when there are none (fused MoE kernels hide the per-expert load). */
int tkp_dec_moe(const char *const *paths, size_t n, struct ArrowArray *out,
                struct ArrowSchema *schema, char **warn, char *why, size_t whylen);

/* The records themselves, one row each, in the merged reader's order. types: a mask of
 * 1 << enum tkp_rec (tokprof/format.h; 0: every type); columns: a mask of 1 << TKP_DEC_COL_*
 * (0: all). Memory is proportional to the rows times the columns asked for. */
enum tkp_dec_col {
    TKP_DEC_COL_TYPE, TKP_DEC_COL_PID, TKP_DEC_COL_THREAD, TKP_DEC_COL_TID, TKP_DEC_COL_STEP,
    TKP_DEC_COL_HOST_NS, TKP_DEC_COL_NAME, TKP_DEC_COL_STREAM, TKP_DEC_COL_START_NS,
    TKP_DEC_COL_END_NS, TKP_DEC_COL_GRAPH, TKP_DEC_COL_GRID_X, TKP_DEC_COL_GRID_Y,
    TKP_DEC_COL_GRID_Z, TKP_DEC_COL_BLOCK_X, TKP_DEC_COL_BLOCK_Y, TKP_DEC_COL_BLOCK_Z,
    TKP_DEC_COL_BYTES, TKP_DEC_COL_M, TKP_DEC_COL_N, TKP_DEC_COL_K, TKP_DEC_COL_BATCH,
    TKP_DEC_COL_WAIT_NS, TKP_DEC_COL_VALUE, TKP_DEC_COL_COUNT
};
/* The column's name ("type", "host_ns", ...), NULL past the last. */
const char *tkp_dec_col_name(int col);
/* The record type's word ("launch", "gpu_kernel": the dump's), NULL for an unknown type. */
const char *tkp_dec_type_name(int type);
int tkp_dec_records(const char *const *paths, size_t n, uint64_t types, uint64_t columns,
                    struct ArrowArray *out, struct ArrowSchema *schema, char **warn, char *why,
                    size_t whylen);

/* Runs a CLI subcommand (argv[0] its name: "summary", "kernels", "check", ...) in-process with
 * its output in *out (malloc'd, NUL-terminated; *out is set even when the command fails or a
 * check is violated). Returns what the command returned. */
int tkp_dec_command(int argc, const char *const *argv, char **out, char **warn, char *why,
                    size_t whylen);

/* Frees what the functions above handed back (accepts NULL). */
void tkp_dec_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
