/* tokprof decoder: the rows of a live capture for the fleet tables (tail.c), as its steps close. */
#ifndef TKP_TAIL_H
#define TKP_TAIL_H

#include <stdint.h>

#include "fleet/table.h"

struct tkp_classes;
struct tkp_record;

/* A live capture: its records as they are written (the follow reader's, one process's), and the
 * rows of steps and step_classes of each step once it closed, each once.
 *
 *     tkp_tab_tail_new(cl, &t);
 *     tkp_tab_tail_add(t, &rec) ...          // every record of the capture, in order
 *     tkp_tab_tail_rows(t, &id, outs, 0);    // rows of the steps closed since the last call
 *     ...
 *     tkp_tab_tail_rows(t, &id, outs, 1);    // the capture ended: every step left, kernels, calls
 *
 * A step's rows are written once the step model closed it (model.h: its STEP record read and the
 * watermark past it, so no GPU record is still to come), per thread in segment order: an open
 * step holds back its thread's later ones. Figures judged against the capture (steps' anomaly and
 * cause, tokens' dimension) use what was read up to the call, so the rows of a call are a
 * function of the records added before it: the same records give the same rows (a restarted
 * ingest rebuilds a batch by adding the same records again). moe needs a second pass over the
 * files (tkp_tab_capture with only its out), when tkp_tab_tail_moe_hint says so.
 * Memory: that of tkp_tab_capture's first pass. */
struct tkp_tab_tail;
int tkp_tab_tail_new(const struct tkp_classes *cl, struct tkp_tab_tail **t); /* 0 or NOMEM */
int tkp_tab_tail_add(struct tkp_tab_tail *t, const struct tkp_record *r);    /* 0 or NOMEM */
/* 1 and *id once the capture's META was added (capture_id as tkp_tab_capture's), else 0. */
int tkp_tab_tail_id(const struct tkp_tab_tail *t, uint64_t *id);
/* Writes the rows due (see above) to the outs that are not NULL (a NULL out: the rows are counted
 * as written, not written: a batch already stored). final: the capture ended (no more adds);
 * kernels and calls then too. Returns 0 or a tkp_err (NOMEM, a sink's). */
int tkp_tab_tail_rows(struct tkp_tab_tail *t, const struct tkp_tab_ident *id,
                      struct tkp_tab_out *const *outs, int final);
/* After the final rows: whether the capture may hold per-expert GEMMs (the moe pass is due). */
int tkp_tab_tail_moe_hint(struct tkp_tab_tail *t);
void tkp_tab_tail_free(struct tkp_tab_tail *t); /* accepts NULL */

#endif
