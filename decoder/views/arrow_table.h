/* tokprof decoder: captures as column tables (arrow.h), for the decoder library
 * (tokprof/decoder.h) — the steps of the step model, their per-class GPU time, and the records
 * themselves. Nothing here knows the command line: the callers open readers and build models. */
#ifndef TKP_TABLE_H
#define TKP_TABLE_H

#include <stdint.h>

#include "views/arrow.h"

struct tkp_model;
struct tkp_acc;
struct tkp_reader;

/* The steps of a finished model with tokens from its acc (analysis.h), one row each, the
 * columns and values of `tokprof steps --json` in its key order (decoder/cmd/steps.c); the GPU
 * columns only when the model has GPU records. t is initialised here. Returns 0 or NOMEM. */
int tkp_table_steps(const struct tkp_model *m, const struct tkp_acc *acc, struct tkp_atab *t);

/* One row per (step, class) with kernels or kernel time: the columns of model/columns.def's
 * TKP_COLS_STEP_CLASSES. m made with opts.class_counts and finished; acc: the steps' tokens. */
int tkp_table_step_classes(const struct tkp_model *m, const struct tkp_acc *acc,
                           struct tkp_atab *t);

/* One row per (step, MoE layer, expert) of the library-call model lm's threads (their steps in
 * the finished model m): the columns of model/columns.def's TKP_COLS_MOE, times monotonic.
 * 0 or NOMEM. */
struct tkp_libmodel;
int tkp_table_moe(const struct tkp_libmodel *lm, const struct tkp_model *m, struct tkp_atab *t);

/* Reads r to its end, one row per record whose type is in `types` (a mask of 1 << enum
 * tkp_rec; 0: all), with the columns of `columns` (1 << enum tkp_dec_col; 0: all). A reader
 * that stops at a bad or torn chunk ends the table there (the caller asks the reader why).
 * Returns 0 or NOMEM. */
int tkp_table_records(struct tkp_reader *r, uint64_t types, uint64_t columns, struct tkp_atab *t);

/* The records table's column names, by enum tkp_dec_col; NULL past the last. */
const char *tkp_table_col_name(int col);

#endif
