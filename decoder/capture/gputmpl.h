/* tokprof decoder: the records of an open COLS or GPU_RUN (docs/FORMAT.md "Columns", "GPU
 * templates"), a batch at a time. Internal to the reader. */
#ifndef TKP_GPUTMPL_H
#define TKP_GPUTMPL_H

#include "capture/record.h"
#include "tokprof/format.h"

/* Decodes the next batch of the COLS or GPU_RUN open in b->cols (b->cols.left > 0) into
 * b->cols.bv, each record's 17 GPU_KERNEL (or 13 GPU_COPY) fields in payload order. The record
 * was checked whole when it was opened (tkp_record_decode). */
void tkp_cols_batch(struct tkp_decode_buf *b);

/* A GPU_RUN record's correlation, step and index from the previous record's by its mode
 * (TKP_GMODE_*), mode 3 taking three differences from the joins column at *jo (checked). */
static inline void tkp_gpu_joins_next(uint64_t mode, const uint8_t **jo, uint64_t *corr,
                                      uint64_t *step, uint64_t *index)
{
    if (mode == TKP_GMODE_NEXT) {
        ++*corr, ++*index;
    } else if (mode == TKP_GMODE_CORR) {
        ++*corr;
    } else if (mode == TKP_GMODE_JOINS) {
        *corr += (uint64_t)tkp_unzigzag(tkp_uvar_ok(jo));
        *step += (uint64_t)tkp_unzigzag(tkp_uvar_ok(jo));
        *index += (uint64_t)tkp_unzigzag(tkp_uvar_ok(jo));
    } /* TKP_GMODE_SAME: as they were */
}

#endif
