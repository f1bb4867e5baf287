/* tokprof decoder: steps, step classes, moe and records as column tables (arrow_table.h). */
#include "views/arrow_table.h"

#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "model/columns.h"
#include "capture/enums.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "model/libcalls.h"
#include "model/model.h"
#include "model/moe.h"
#include "capture/reader.h"

/* ---- steps ---- */

static void opt_i64(struct tkp_acol *c, int has, int64_t v)
{
    if (has) tkp_acol_i64(c, v);
    else tkp_acol_null(c);
}

/* The columns of specs (n of them) into t, the local views' ones for which skip is 0; c[k]: spec
 * k's column (left NULL for the others). */
static int spec_cols(struct tkp_atab *t, const struct tkp_colspec *specs, int n, const char *skip,
                     struct tkp_acol **c)
{
    size_t ncols = 0;
    for (int k = 0; k < n; k++) ncols += !skip[k] && tkp_col_local(&specs[k]);
    int err = tkp_atab_init(t, ncols);
    ncols = 0;
    for (int k = 0; !err && k < n; k++) {
        if (skip[k] || !tkp_col_local(&specs[k])) continue;
        tkp_atab_col(t, ncols, specs[k].name, specs[k].type == TKP_CT_STR ? TKP_A_STR : TKP_A_I64,
                     specs[k].nullable);
        c[k] = &t->cols[ncols++];
    }
    return err;
}

/* One cell into column c (NULL: not shown): has, v, s as tkp_steprow_cell's. */
static void spec_cell(struct tkp_acol *c, const struct tkp_colspec *spec, int has, int64_t v,
                      const char *s)
{
    if (!c) return;
    if (spec->type == TKP_CT_STR) tkp_acol_str(c, has ? s : NULL);
    else opt_i64(c, has, v);
}

/* Every number an int64 (as steps --json's). */
int tkp_table_steps(const struct tkp_model *m, const struct tkp_acc *acc, struct tkp_atab *t)
{
    struct tkp_steprows x;
    struct tkp_acol *c[TKP_SC_COUNT] = {0};
    char skip[TKP_SC_COUNT];
    int err = tkp_steprows_init(&x, m, acc);
    if (err) return err;
    for (int k = 0; k < TKP_SC_COUNT; k++) skip[k] = !x.gpu && tkp_col_gpu(&tkp_step_cols[k]);
    if ((err = spec_cols(t, tkp_step_cols, TKP_SC_COUNT, skip, c))) {
        tkp_steprows_free(&x);
        return err;
    }
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_steprow r;
        tkp_steprows_at(&x, i, &r);
        for (int k = 0; k < TKP_SC_COUNT; k++) {
            int64_t v = 0;
            const char *s = NULL;
            int has = tkp_steprow_cell(&r, k, &v, &s);
            spec_cell(c[k], &tkp_step_cols[k], has, v, s);
        }
        t->nrows++;
    }
    tkp_steprows_free(&x);
    return t->oom ? TKP_ERR_NOMEM : 0;
}

/* m made with opts.class_counts (the kernels column) and finished; acc: the steps' tokens. */
int tkp_table_step_classes(const struct tkp_model *m, const struct tkp_acc *acc, struct tkp_atab *t)
{
    struct tkp_steprows x;
    struct tkp_acol *c[TKP_CC_COUNT] = {0};
    char skip[TKP_CC_COUNT] = {0};
    int err = tkp_steprows_init(&x, m, acc);
    if (err) return err;
    if ((err = spec_cols(t, tkp_class_cols, TKP_CC_COUNT, skip, c))) {
        tkp_steprows_free(&x);
        return err;
    }
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_classrow r = {m, &m->steps[i], 0, x.tok[i], x.src[i]};
        for (r.cls = 0; r.cls < m->nclasses; r.cls++) {
            if (!tkp_classrow_is(m, r.s, r.cls)) continue;
            for (int k = 0; k < TKP_CC_COUNT; k++) {
                int64_t v = 0;
                const char *s = NULL;
                int has = tkp_classrow_cell(&r, k, &v, &s);
                spec_cell(c[k], &tkp_class_cols[k], has, v, s);
            }
            t->nrows++;
        }
    }
    tkp_steprows_free(&x);
    return t->oom ? TKP_ERR_NOMEM : 0;
}

/* ---- moe ---- */

struct moe_cols {
    struct tkp_atab *t;
    struct tkp_acol **c;
};

static int moe_row(void *ctx, const struct tkp_moerow *r)
{
    const struct moe_cols *mc = ctx;
    for (int k = 0; k < TKP_MC_COUNT; k++) {
        int64_t v = 0;
        const char *s = NULL;
        int has = tkp_moerow_cell(r, k, &v, &s);
        spec_cell(mc->c[k], &tkp_moe_cols[k], has, v, s);
    }
    mc->t->nrows++;
    return mc->t->oom ? TKP_ERR_NOMEM : 0;
}

int tkp_table_moe(const struct tkp_libmodel *lm, const struct tkp_model *m, struct tkp_atab *t)
{
    struct tkp_acol *c[TKP_MC_COUNT] = {0};
    char skip[TKP_MC_COUNT] = {0};
    struct moe_cols mc = {t, c};
    int err = spec_cols(t, tkp_moe_cols, TKP_MC_COUNT, skip, c);
    for (uint32_t s0 = 0, s1; !err && s0 < lm->nsteps; s0 = s1) {
        struct tkp_moe x = {0};
        s1 = tkp_libmodel_thread_end(lm, s0);
        if (!(err = tkp_moe_find(lm, s0, s1, 0, &x)))
            err = tkp_moerows_each(lm, m, &x, moe_row, &mc);
        tkp_moe_free(&x);
    }
    return err ? err : t->oom ? TKP_ERR_NOMEM : 0;
}

/* ---- records ---- */

static const char *const rec_cols[TKP_DEC_COL_COUNT] = {
    "type", "pid", "thread", "tid", "step", "host_ns", "name", "stream", "start_ns", "end_ns",
    "graph", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "bytes", "m", "n",
    "k", "batch", "wait_ns", "value",
};

const char *tkp_table_col_name(int col)
{
    return col >= 0 && col < TKP_DEC_COL_COUNT ? rec_cols[col] : NULL;
}

/* Kernel and op names into the name column's dictionary, each distinct string once. Looked up
 * by the string's address first (name strings live as long as the reader, so an address is one
 * name), then by content (several files of a merged reader define the same names). */
struct names {
    struct tkp_map64 by_ptr; /* address -> index + 1 */
    char **str;              /* contents (copies), in order added */
    int32_t *str_idx;
    size_t sn, scap;
    struct tkp_map by_str; /* str by content */
};

static int eq_str(const void *ctx, uint32_t id, const void *key)
{
    return !strcmp(((const struct names *)ctx)->str[id], key);
}

/* The dictionary index of the string content s, added when new; -1 when out of memory. */
static int32_t names_content(struct names *nm, struct tkp_acol *col, const char *s)
{
    uint64_t h = tkp_fnv64_str(TKP_FNV64_SEED, s);
    if (tkp_map_reserve(&nm->by_str, nm->sn + 1)) return -1;
    struct tkp_map_slot *ms = tkp_map_probe(&nm->by_str, h, eq_str, nm, s);
    if (ms->id1) return nm->str_idx[ms->id1 - 1];
    size_t cap = nm->scap;
    if (TKP_GROW_FROM(nm->str, nm->scap, nm->sn + 1, 1024)) return -1;
    if (TKP_GROW_FROM(nm->str_idx, cap, nm->sn + 1, 1024)) return -1;
    if (!(nm->str[nm->sn] = strdup(s))) return -1;
    tkp_map_put(&nm->by_str, ms, h, (uint32_t)nm->sn);
    return nm->str_idx[nm->sn++] = tkp_acol_dict_add(col, s);
}

/* The index of a name string that lives as long as the reader. */
static int32_t names_ptr(struct names *nm, struct tkp_acol *col, const char *s)
{
    uint64_t *v = tkp_map64_at(&nm->by_ptr, (uintptr_t)s, 1);
    if (!v) return -1;
    if (*v) return (int32_t)(*v - 1);
    int32_t idx = names_content(nm, col, s);
    if (idx < 0) return -1;
    *v = (uint64_t)idx + 1;
    return idx;
}

static void names_free(struct names *nm)
{
    for (size_t i = 0; i < nm->sn; i++)
        free(nm->str[i]);
    free(nm->str);
    free(nm->str_idx);
    tkp_map_free(&nm->by_str);
    tkp_map64_free(&nm->by_ptr);
}

/* One record's values by column; `have` says which are not null. */
struct rowv {
    int64_t v[TKP_DEC_COL_COUNT];
    uint32_t have;
    const char *name; /* the name column's string */
    int name_lives;   /* name is a reader name string (vs. valid until the next record) */
};

#define SET(c, x) (row->v[c] = (int64_t)(x), row->have |= 1u << (c))

static void dims(struct rowv *row, const uint32_t g[3], const uint32_t b[3])
{
    SET(TKP_DEC_COL_GRID_X, g[0]);
    SET(TKP_DEC_COL_GRID_Y, g[1]);
    SET(TKP_DEC_COL_GRID_Z, g[2]);
    SET(TKP_DEC_COL_BLOCK_X, b[0]);
    SET(TKP_DEC_COL_BLOCK_Y, b[1]);
    SET(TKP_DEC_COL_BLOCK_Z, b[2]);
}

/* full: any column but type, pid and host_ns is asked for (else the switch is skipped: a light
 * table costs what the reader costs) */
static void row_of(const struct tkp_record *r, struct rowv *row, int full)
{
    row->have = 1u << TKP_DEC_COL_TYPE | 1u << TKP_DEC_COL_PID;
    row->name = NULL;
    row->name_lives = 1;
    SET(TKP_DEC_COL_PID, r->pid);
    if (tkp_record_has_time(r->type)) SET(TKP_DEC_COL_HOST_NS, r->host_ns);
    if (!full) return;
    switch (r->type) {
    case TKP_REC_LAUNCH:
        row->name = r->launch.name;
        SET(TKP_DEC_COL_STREAM, r->launch.stream);
        dims(row, r->launch.grid, r->launch.block);
        break;
    case TKP_REC_GRAPH_LAUNCH:
        SET(TKP_DEC_COL_GRAPH, r->graph_launch.graph);
        SET(TKP_DEC_COL_STREAM, r->graph_launch.stream);
        break;
    case TKP_REC_COPY:
        SET(TKP_DEC_COL_BYTES, r->copy.bytes);
        SET(TKP_DEC_COL_STREAM, r->copy.stream);
        break;
    case TKP_REC_SYNC: SET(TKP_DEC_COL_WAIT_NS, r->sync.wait_ns); break;
    case TKP_REC_EVENT_RECORD: SET(TKP_DEC_COL_STREAM, r->event_record.stream); break;
    case TKP_REC_STREAM_WAIT: SET(TKP_DEC_COL_STREAM, r->stream_wait.stream); break;
    case TKP_REC_STEP:
        SET(TKP_DEC_COL_START_NS, r->step_rec.begin_ns);
        SET(TKP_DEC_COL_END_NS, r->step_rec.end_ns);
        break;
    case TKP_REC_NVTX: row->name = r->nvtx.name; break;
    case TKP_REC_NAME:
        row->name = r->name.str;
        row->name_lives = 0;
        break;
    case TKP_REC_MARKER: SET(TKP_DEC_COL_VALUE, r->marker.value); break;
    case TKP_REC_LOSS: SET(TKP_DEC_COL_VALUE, r->loss.dropped); break;
    case TKP_REC_LIB_CALL:
        row->name = r->lib_call.op;
        row->name_lives = 0;
        SET(TKP_DEC_COL_STREAM, r->lib_call.stream);
        SET(TKP_DEC_COL_M, r->lib_call.m);
        SET(TKP_DEC_COL_N, r->lib_call.n);
        SET(TKP_DEC_COL_K, r->lib_call.k);
        SET(TKP_DEC_COL_BATCH, r->lib_call.batch);
        break;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        row->name = r->gpu.name;
        SET(TKP_DEC_COL_START_NS, r->gpu.start_ns);
        SET(TKP_DEC_COL_END_NS, r->gpu.end_ns);
        SET(TKP_DEC_COL_STREAM, r->gpu.stream);
        if (r->gpu.graph != TKP_GRAPH_UNKNOWN) SET(TKP_DEC_COL_GRAPH, r->gpu.graph);
        if (r->type == TKP_REC_GPU_KERNEL) dims(row, r->gpu.grid, r->gpu.block);
        else SET(TKP_DEC_COL_BYTES, r->gpu.bytes);
        break;
    default: break;
    }
    /* thread and step: the records that belong to a thread's step (GPU ones only when joined) */
    if (r->type >= TKP_REC_LAUNCH && r->type != TKP_REC_GRAPH && r->type != TKP_REC_STACK &&
        r->type != TKP_REC_MODULE && r->type != TKP_REC_GPU_INFO &&
        r->thread != TKP_GPU_THREAD_NONE) {
        SET(TKP_DEC_COL_THREAD, r->thread);
        SET(TKP_DEC_COL_TID, r->tid);
        if (r->type != TKP_REC_LOSS) SET(TKP_DEC_COL_STEP, r->step);
    } else if (r->type == TKP_REC_THREAD) {
        SET(TKP_DEC_COL_THREAD, r->thread);
        SET(TKP_DEC_COL_TID, r->tid);
    }
}

int tkp_table_records(struct tkp_reader *r, uint64_t types, uint64_t columns, struct tkp_atab *t)
{
    int sel[TKP_DEC_COL_COUNT], nsel = 0, err;
    int32_t type_idx[64];
    struct names nm = {0};
    struct tkp_record rec;
    struct rowv row;
    if (!columns) columns = ~0ull;
    if (!types) types = ~0ull;
    int full = (columns & ~(1ull << TKP_DEC_COL_TYPE | 1ull << TKP_DEC_COL_PID |
                            1ull << TKP_DEC_COL_HOST_NS)) != 0;
    for (int k = 0; k < TKP_DEC_COL_COUNT; k++)
        if (columns >> k & 1) sel[nsel++] = k;
    if ((err = tkp_atab_init(t, (size_t)nsel))) return err;
    for (int i = 0; i < nsel; i++) {
        int k = sel[i];
        int kind = k == TKP_DEC_COL_TYPE || k == TKP_DEC_COL_NAME ? TKP_A_DICT
                   : k == TKP_DEC_COL_VALUE                       ? TKP_A_I64
                                                                  : TKP_A_U64;
        tkp_atab_col(t, (size_t)i, rec_cols[k], kind, k != TKP_DEC_COL_TYPE && k != TKP_DEC_COL_PID);
    }
    /* the type column's dictionary: every type this reader knows, in enum order */
    struct tkp_acol *tcol = NULL;
    for (int i = 0; i < nsel; i++)
        if (sel[i] == TKP_DEC_COL_TYPE) tcol = &t->cols[i];
    for (int k = 0; k < 64; k++) {
        const char *s = tkp_rec_str((uint32_t)k);
        if (!s) types &= ~(1ull << k); /* a type without a word is not one the reader delivers */
        type_idx[k] = s && tcol ? tkp_acol_dict_add(tcol, s) : 0;
    }
    while (tkp_reader_next(r, &rec) == 1) {
        if ((unsigned)rec.type >= 64 || !(types >> rec.type & 1)) continue;
        row_of(&rec, &row, full);
        for (int i = 0; i < nsel; i++) {
            int k = sel[i];
            struct tkp_acol *c = &t->cols[i];
            if (k == TKP_DEC_COL_TYPE) {
                tkp_acol_dict(c, type_idx[rec.type]);
            } else if (k == TKP_DEC_COL_NAME) {
                int32_t idx = !row.name       ? -2
                              : row.name_lives ? names_ptr(&nm, c, row.name)
                                               : names_content(&nm, c, row.name);
                if (idx == -1) t->oom = 1;
                if (idx < 0) tkp_acol_null(c);
                else tkp_acol_dict(c, idx);
            } else if (row.have >> k & 1) {
                tkp_acol_i64(c, row.v[k]); /* u64 columns take the same 8 bytes */
            } else {
                tkp_acol_null(c);
            }
        }
        t->nrows++;
        if (t->oom) break;
    }
    names_free(&nm);
    return t->oom ? TKP_ERR_NOMEM : 0;
}
