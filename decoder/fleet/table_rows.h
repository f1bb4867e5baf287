/* tokprof decoder: the rows of one capture for the fleet tables (table.h has the columns, the
 * identity and the sinks; this file reads a capture and fills them). */
#ifndef TKP_TABLE_ROWS_H
#define TKP_TABLE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "base/map.h"
#include "capture/reader.h"
#include "fleet/table.h"
#include "model/columns.h"
#include "model/hist.h"
#include "tokprof/format.h"

struct tkp_classes;
struct tkp_record;
struct tkp_model;
struct tkp_mstep;
struct tkp_tcalls;

/* Reads one capture (files[0..n): one process's files, or a snapshot) and writes the rows of
 * every table whose outs[] is not NULL. Returns 0 (a torn tail is not an error: info->torn) or a
 * tkp_err with why ("PATH: not a tokprof capture (bad magic)", "out of memory", a sink error). */
int tkp_tab_capture(const char *const *files, size_t n, const struct tkp_classes *cl,
                    const struct tkp_tab_ident *id, struct tkp_tab_out *const *outs,
                    struct tkp_tab_info *info, char *why, size_t whylen);

/* The capture_id of the capture whose (first) file is path, from its META alone. 0 or the
 * reader's error. */
int tkp_tab_capture_id(const char *path, uint64_t *id);

/* ---- for the live capture's rows (tail.c): one pass over a capture's records and the writers
 * of its rows. Not for other callers. ---- */

#define TKP_ROWS_TYPE_BIT(t) (1ull << (t))

struct tkp_rows_hname { /* durations of one kernel name in one hour */
    uint64_t hour_ns;
    char *name;
    int cls;
    struct tkp_dist d;
};

struct tkp_rows_pass { /* what one read of a capture collects */
    const struct tkp_classes *cl;
    int ncls, want_steps, want_sc, want_k, want_moe; /* want_moe: the moe hint is looked for */
    uint64_t rt0, mono0;                             /* META clock pair */
    int has_meta, is_snap;
    uint64_t snap;    /* a snapshot's first recorder chunk seq (capture_id) */
    const char *host; /* META hostname, copied */
    char hostbuf[256];
    uint64_t pid;
    struct tkp_map64 cls_of; /* name id -> class + 1 */
    uint8_t *cd; /* the same, direct, for ids below table_rows.c's DIRECT_IDS (0: not yet) */
    size_t ncd;
    struct tkp_map64 hn_at; /* hash(hour, name id) -> hn index + 1 */
    struct tkp_rows_hname *hn;
    size_t nhn, caphn;
    struct tkp_tcalls *calls;  /* NULL: the calls table is not wanted */
    struct tkp_rows_gstep *gs; /* per thread: its current step's GEMMs (moe_hint) */
    size_t ngs;
    struct tkp_map64 weights; /* the GEMMs' distinct A operands (weights) */
    uint64_t max_count;       /* the most GEMMs a step called */
    int moe_hint;
    uint64_t types; /* the record types tkp_rows_on_record() looks at (tkp_rows_pass_types) */
};

/* Whether the capture may hold per-expert GEMMs, so that the moe table's second pass (the
 * whole library-call model, O(calls)) is worth running: some step of a thread calls a number of
 * executed unbatched GEMMs (more than one) other than its previous step did (experts absent in
 * one step, present in another), or one of its GEMMs but the last (lm_head) sees fewer tokens
 * (n) than another (an expert's share of the batch), or the capture has more distinct weights
 * (operand A) than any step called GEMMs (experts that are not called in every step). A dense
 * model's steps call each weight once with the same n: no second pass; a false hint only costs
 * that pass. */
struct tkp_rows_gstep {
    uint64_t seg, count, prev_count, max_n, min_n, last_n;
    int used;
};

/* The text of a table's identity columns for one tid (text formats), written again for every row
 * of that tid rather than encoded again. */
struct tkp_rows_idcache {
    const struct tkp_tab_out *o;
    uint64_t tid;
    char *text;
    size_t len, cap;
    int ncols, valid;
};

struct tkp_rows_emit {
    const struct tkp_tab_ident *id;
    const struct tkp_rows_pass *p;
    uint64_t capture_id;
    struct tkp_rows_idcache
        *ic; /* [TKP_TAB_COUNT + 1]: by out, then a scratch for a step's columns */
};

/* The record types the pass looks at, from its want_ flags and calls (into p->types). */
void tkp_rows_pass_types(struct tkp_rows_pass *p);
int tkp_rows_on_record_slow(struct tkp_rows_pass *p, const struct tkp_record *r); /* 0 or NOMEM */
/* One record to the pass (types: p->types, in a register): most leave on one test. */
static inline int tkp_rows_on_record(struct tkp_rows_pass *p, uint64_t types,
                                     const struct tkp_record *r)
{
    return (unsigned)r->type < 64 && (types & TKP_ROWS_TYPE_BIT(r->type))
               ? tkp_rows_on_record_slow(p, r)
               : 0;
}
void tkp_rows_pass_free(struct tkp_rows_pass *p);
/* Closes the GEMM count of a thread's step g for the moe hint. */
void tkp_rows_gstep_close(struct tkp_rows_pass *p, struct tkp_rows_gstep *g);
void tkp_rows_idcache_free(struct tkp_rows_idcache *ic); /* [TKP_TAB_COUNT + 1] */
/* The row of steps of r; the rows of step_classes of step s with tokens tok (their source src:
 * enum tkp_tok_src); the rows of kernels
 * and of calls. 0 or a sink's error. */
int tkp_rows_step(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                  const struct tkp_steprow *r);
int tkp_rows_step_classes(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                          struct tkp_rows_pass *p, const struct tkp_model *m,
                          const struct tkp_mstep *s, uint64_t tok, int src);
int tkp_rows_kernels(struct tkp_tab_out *o, const struct tkp_rows_emit *e, struct tkp_rows_pass *p);
int tkp_rows_calls(struct tkp_tab_out *o, const struct tkp_rows_emit *e, struct tkp_tcalls *tc);
/* FNV-1a 64 of (host, pid, rt0[, snap]): table.h's capture_id. */
uint64_t tkp_rows_capture_id(const char *host, uint64_t pid, uint64_t rt0, uint64_t snap);

#endif
