/* tokprof decoder: spec monitors for the live commands (serve --spec, check --follow), one per
 * followed process (cmd/live_spec.c). */
#ifndef TKP_CMD_LIVE_SPEC_H
#define TKP_CMD_LIVE_SPEC_H

#include <stdint.h>

#include "cmd/live.h"

/* Loads and compiles a spec for a live command. A spec with run-level assertions (percentiles
 * or counts over the whole run) is refused: their state grows with the run, and a live
 * follow must stay bounded over days. Returns 0 or an error with ctx->why set. */
int tkp_live_load_spec(struct tkp_ctx *ctx, const char *path, struct tkp_spec **sp);

/* One streaming monitor per process (monitor.h), created at its first record. on_viol (may be
 * NULL) is called for each violation of assertion `as` as soon as the monitor judges it (its
 * step closed), with the violation and its witness (n = 1); violations beyond the
 * TKP_LIVE_WITNESS kept in full at one record come as one call with v NULL and their count n. */
#define TKP_LIVE_WITNESS 64
typedef void tkp_live_viol_fn(void *arg, uint64_t pid, const struct tkp_spec *sp, int as,
                              const struct tkp_viol *v, uint64_t n);
int tkp_live_mons_new(const struct tkp_spec *sp, tkp_live_viol_fn *on_viol, void *arg,
                      struct tkp_live_mons **out);
void tkp_live_mons_free(struct tkp_live_mons *ms); /* accepts NULL */
int tkp_live_mons_feed(struct tkp_live_mons *ms, const struct tkp_record *rec);
/* The process ended: its monitor closes its last steps (their violations are reported). */
int tkp_live_mons_exited(struct tkp_live_mons *ms, uint64_t pid);
/* Violations of assertion `as` in process pid so far (0: no monitor). */
uint64_t tkp_live_mons_violations(void *ms, uint64_t pid, int as);
/* Error-severity violations in all processes so far. */
uint64_t tkp_live_mons_errors(const struct tkp_live_mons *ms);
void tkp_live_mons_forget(struct tkp_live_mons *ms, uint64_t pid);
/* The spec's assertions: how many, the id of one (and *warn: its severity is warn), freeing. */
int tkp_live_spec_nas(const struct tkp_spec *sp);
const char *tkp_live_spec_id(const struct tkp_spec *sp, int as, int *warn);
void tkp_live_spec_free(struct tkp_spec *sp); /* accepts NULL */

#endif
