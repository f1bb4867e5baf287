/* tokprof decoder: GPU_RUN batches (docs/FORMAT.md "GPU templates", version 6). A GPU_RUN's
 * record is its GPU_TMPL's fields with the start, end, correlation, step and index the columns
 * give: start against the previous record's end, the duration, and the correlation, step and
 * index either predicted from the previous record's (the mode beside the template id) or given
 * as differences in the joins column. tkp_record_decode() has checked every value. */
#include "capture/gputmpl.h"

#include <string.h>

#include "capture/record_fast.h"
#include "tokprof/format.h"

static void gpu_run_batch(struct tkp_decode_buf *b)
{
    struct tkp_cols *u = &b->cols;
    uint32_t n = u->left < TKP_RUN_BATCH ? u->left : TKP_RUN_BATCH;
    const uint8_t *tm = u->col[0], *st = u->col[1], *du = u->col[2], *jo = u->col[3];
    uint64_t end = u->prev[0], corr = u->prev[1], step = u->prev[2], index = u->prev[3];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = tkp_uvar_ok(&tm);
        uint64_t *o = u->bv[i];
        memcpy(o, b->gtmpl[v >> 2].v, sizeof(b->gtmpl[0].v));
        tkp_gpu_joins_next(v & 3, &jo, &corr, &step, &index);
        uint64_t start = end + (uint64_t)tkp_unzigzag(tkp_uvar_ok(&st));
        end = start + tkp_uvar_ok(&du);
        o[0] = start;
        o[1] = end;
        o[4] = corr;
        o[6] = step;
        o[8] = index;
    }
    u->col[0] = tm, u->col[1] = st, u->col[2] = du, u->col[3] = jo;
    u->prev[0] = end, u->prev[1] = corr, u->prev[2] = step, u->prev[3] = index;
    u->left -= n;
    u->first = 0;
    u->i = 0;
    u->n = n;
}

void tkp_cols_batch(struct tkp_decode_buf *b)
{
    if (b->cols.gpu_run) gpu_run_batch(b);
    else tkp_record_cols_batch(b);
}
