/* tokprof decoder: the rows of one capture (tkp_tab_capture, table.h).
 *
 * Pass 1 feeds the step model (model.h: it counts each step's kernels per class too,
 * opts.class_counts) and its per-step extras (analysis.h), launches in bulk when no table looks at
 * them one by one (reader.h, tkp_reader_peek_launches), and in the same pass collects, from
 * GPU_KERNEL records, durations per (hour, kernel name); steps (its columns and values:
 * model/columns.h), step_classes and kernels come from it. The calls table is streamed in the
 * same pass; moe, when the capture may hold experts,
 * loads the library-call model (libcalls.h) in a second pass (by windows when it is large) and
 * finds the experts (tkp_moe_find). */
#include <stdlib.h>
#include <string.h>

#include "model/analysis.h"
#include "model/classes.h"
#include "model/columns.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "model/libcalls.h"
#include "model/model.h"
#include "model/moe.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "fleet/table.h"
#include "fleet/table_rows.h"
#include "fleet/table_calls.h"
#include "tokprof/tokprof.h"

#define HOUR_NS 3600000000000ull

static uint64_t epoch(const struct tkp_rows_pass *p, uint64_t mono)
{
    return mono ? mono - p->mono0 + p->rt0 : 0;
}

/* Kernel name ids are small and dense: their classes in a direct table below DIRECT_IDS, in the
 * map above (classified once per name either way). */
#define DIRECT_IDS (1u << 16)

static int kernel_class(struct tkp_rows_pass *p, const struct tkp_record *r, int *cls)
{
    uint64_t id = r->gpu.name_id;
    if (id < p->ncd && p->cd[id]) {
        *cls = p->cd[id] - 1;
        return 0;
    }
    uint64_t *s = tkp_map64_at(&p->cls_of, id, 1);
    if (!s) return TKP_ERR_NOMEM;
    if (!*s) *s = (uint64_t)tkp_classes_match(p->cl, r->gpu.name) + 1;
    *cls = (int)*s - 1;
    if (id < DIRECT_IDS && *s <= UINT8_MAX) {
        if (id >= p->ncd) {
            if (TKP_GROW_ZEROED_FROM(p->cd, p->ncd, id + 1, 256)) return TKP_ERR_NOMEM;
        }
        p->cd[id] = (uint8_t)*s;
    }
    return 0;
}

static int on_kernel(struct tkp_rows_pass *p, const struct tkp_record *r)
{
    int cls, err;
    if ((err = kernel_class(p, r, &cls))) return err;
    if (r->gpu.end_ns < r->gpu.start_ns) return 0;
    uint64_t hour = epoch(p, r->gpu.start_ns) / HOUR_NS * HOUR_NS,
             ns = r->gpu.end_ns - r->gpu.start_ns;
    uint64_t *s = tkp_map64_at(&p->hn_at, tkp_mix64(hour) ^ r->gpu.name_id, 1);
    if (!s) return TKP_ERR_NOMEM;
    size_t i = *s ? *s - 1 : p->nhn;
    if (i < p->nhn && (p->hn[i].hour_ns != hour || strcmp(p->hn[i].name, r->gpu.name)))
        for (i = 0; i < p->nhn && (p->hn[i].hour_ns != hour || strcmp(p->hn[i].name, r->gpu.name));)
            i++; /* two (hour, name) pairs on one key: rare, searched */
    if (i == p->nhn) {
        if (TKP_GROW(p->hn, p->caphn, p->nhn + 1)) return TKP_ERR_NOMEM;
        struct tkp_rows_hname *h = &p->hn[p->nhn];
        memset(h, 0, sizeof(*h));
        h->hour_ns = hour, h->cls = cls;
        if (!(h->name = strdup(r->gpu.name))) return TKP_ERR_NOMEM;
        if (!*s) *s = p->nhn + 1;
        p->nhn++;
    }
    struct tkp_dist *d = &p->hn[i].d;
    if (!d->hist && !(d->hist = calloc(TKP_HIST_BUCKETS, sizeof(*d->hist)))) return TKP_ERR_NOMEM;
    if (!d->count || ns < d->min_ns) d->min_ns = ns;
    if (ns > d->max_ns) d->max_ns = ns;
    d->count++, d->total_ns += ns;
    d->hist[tkp_hist_bucket(ns)]++;
    return 0;
}

void tkp_rows_gstep_close(struct tkp_rows_pass *p, struct tkp_rows_gstep *g)
{
    if (g->count > 1 && g->prev_count > 1 && g->count != g->prev_count) p->moe_hint = 1;
    if (g->count > 1 && g->min_n < g->max_n) p->moe_hint = 1;
    if (g->count) g->prev_count = g->count;
    if (g->count > p->max_count) p->max_count = g->count;
}

static int on_gemm(struct tkp_rows_pass *p, const struct tkp_record *r)
{
    const typeof(r->lib_call) *l = &r->lib_call;
    if (p->moe_hint || l->status || (l->flags & TKP_LIBF_CAPTURED) || !l->n || l->batch > 1 ||
        r->thread >= TKP_THREADS_MAX)
        return 0;
    if (TKP_GROW_ZEROED_FROM(p->gs, p->ngs, (size_t)r->thread + 1, 4)) return TKP_ERR_NOMEM;
    if (l->a_ptr && !tkp_map64_at(&p->weights, l->a_ptr, 1)) return TKP_ERR_NOMEM;
    struct tkp_rows_gstep *g = &p->gs[r->thread];
    if (!g->used || g->seg != r->step) {
        if (g->used) tkp_rows_gstep_close(p, g);
        *g = (struct tkp_rows_gstep){r->step, 0, g->prev_count, 0, UINT64_MAX, 0, 1};
    }
    if (g->count && g->last_n < g->min_n) g->min_n = g->last_n; /* that one was not the last */
    if (l->n > g->max_n) g->max_n = l->n;
    g->last_n = l->n;
    g->count++;
    return 0;
}

int tkp_rows_on_record_slow(struct tkp_rows_pass *p, const struct tkp_record *r)
{
    if (r->type == TKP_REC_CHUNK && p->is_snap && !p->snap && r->chunk.seq > 0)
        p->snap = r->chunk.seq;
    if (r->type == TKP_REC_META && !p->has_meta) {
        p->has_meta = 1;
        p->rt0 = r->meta.start_realtime_ns, p->mono0 = r->meta.start_monotonic_ns;
        p->pid = r->meta.pid;
        snprintf(p->hostbuf, sizeof(p->hostbuf), "%s", r->meta.hostname ? r->meta.hostname : "");
        if (!p->rt0) p->mono0 = 0; /* no clock pair: times stay monotonic */
    }
    if (p->calls && (r->type == TKP_REC_LIB_CALL || r->type == TKP_REC_LAUNCH ||
                     r->type == TKP_REC_GPU_KERNEL)) {
        uint64_t hour = r->type == TKP_REC_LIB_CALL ? epoch(p, r->host_ns) / HOUR_NS * HOUR_NS : 0;
        int err = tkp_tcalls_add(p->calls, r, hour);
        if (err) return err;
    }
    if (r->type == TKP_REC_LIB_CALL) return p->want_moe ? on_gemm(p, r) : 0;
    if (r->type == TKP_REC_GPU_KERNEL && p->want_k) return on_kernel(p, r);
    return 0;
}

/* The record types the tables look at (a bit per type, all below 64): most records (launches,
 * copies, syncs) concern none of them and leave on one test, without a call (the table costs no
 * more than `tokprof summary`: docs/BENCH.md). */
void tkp_rows_pass_types(struct tkp_rows_pass *p)
{
    p->types = TKP_ROWS_TYPE_BIT(TKP_REC_CHUNK) | TKP_ROWS_TYPE_BIT(TKP_REC_META);
    if (p->want_k || p->calls) p->types |= TKP_ROWS_TYPE_BIT(TKP_REC_GPU_KERNEL);
    if (p->calls)
        p->types |= TKP_ROWS_TYPE_BIT(TKP_REC_LAUNCH) | TKP_ROWS_TYPE_BIT(TKP_REC_LIB_CALL);
    if (p->want_moe) p->types |= TKP_ROWS_TYPE_BIT(TKP_REC_LIB_CALL);
}

/* ---- rows ---- */

void tkp_rows_idcache_free(struct tkp_rows_idcache *ic)
{
    for (int i = 0; i <= TKP_TAB_COUNT; i++)
        free(ic[i].text);
}

static void ident(struct tkp_tab_out *o, const struct tkp_rows_emit *e, uint64_t tid)
{
    struct tkp_rows_idcache *c = NULL;
    for (int i = 0; !c && i < TKP_TAB_COUNT; i++)
        if (e->ic[i].o == o || !e->ic[i].o) c = &e->ic[i], c->o = o;
    if (c && c->valid && c->tid == tid) {
        tkp_tab_row_again(o, c->text, c->len, c->ncols);
        return;
    }
    tkp_tab_str(o, e->id->host ? e->id->host : e->p->hostbuf);
    tkp_tab_str(o, e->id->model);
    tkp_tab_strs(o, e->id->keys, e->id->nlabels);
    tkp_tab_strs(o, e->id->values, e->id->nlabels);
    tkp_tab_u64(o, e->capture_id);
    tkp_tab_u64(o, e->p->pid);
    tkp_tab_u64(o, tid);
    tkp_tab_str(o, TOKPROF_VERSION_STRING);
    tkp_tab_u64(o, e->id->batch);
    size_t len;
    int ncols;
    const void *t = tkp_tab_row_text(o, &len, &ncols);
    if (!c || !t || ncols != TKP_TAB_IDENT_COLS) return;
    c->valid = 0;
    if (TKP_GROW(c->text, c->cap, len)) return;
    memcpy(c->text, t, len);
    c->len = len, c->ncols = ncols, c->tid = tid, c->valid = 1;
}

/* One cell of spec c (has, v, str: as tkp_steprow_cell's) in the fleet's encoding: nothing when
 * LOCAL, a GPU number's null as NULL, other nulls as fleet_null (words as ''), host times as
 * epoch ns. */
static void fleet_cell(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                       const struct tkp_colspec *c, int has, int64_t v, const char *str)
{
    if (!tkp_col_fleet(c)) return;
    if (!has && c->where == TKP_CW_GPU && c->nullable && c->type != TKP_CT_STR) {
        tkp_tab_null(o);
        return;
    }
    if (c->type == TKP_CT_STR) tkp_tab_str(o, has ? str : "");
    else if (!has) v = c->fleet_null;
    else if (c->where == TKP_CW_TIME) v = (int64_t)epoch(e->p, (uint64_t)v);
    if (c->type == TKP_CT_U64) tkp_tab_u64(o, (uint64_t)v);
    else if (c->type == TKP_CT_I64) tkp_tab_i64(o, v);
}

/* One row of steps: the identity, the columns of model/columns.def that are not LOCAL. */
int tkp_rows_step(struct tkp_tab_out *o, const struct tkp_rows_emit *e, const struct tkp_steprow *r)
{
    ident(o, e, r->s->tid);
    for (int k = 0; k < TKP_SC_COUNT; k++) {
        int64_t v = 0;
        const char *str = NULL;
        int has = tkp_steprow_cell(r, k, &v, &str);
        fleet_cell(o, e, &tkp_step_cols[k], has, v, str);
    }
    return tkp_tab_row_end(o);
}

static int rows_steps(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                      const struct tkp_steprows *x)
{
    int err = 0;
    for (size_t i = 0; !err && i < x->m->nsteps; i++) {
        struct tkp_steprow r;
        tkp_steprows_at(x, i, &r);
        err = tkp_rows_step(o, e, &r);
    }
    return err;
}

/* The class row r's cells from column k0 to k1 (not included). */
static void class_cells(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                        const struct tkp_classrow *r, int k0, int k1)
{
    for (int k = k0; k < k1; k++) {
        int64_t v = 0;
        const char *str = NULL;
        int has = tkp_classrow_cell(r, k, &v, &str);
        fleet_cell(o, e, &tkp_class_cols[k], has, v, str);
    }
}

/* The rows of step_classes of step s: the identity and the step's columns (those before class)
 * written once and repeated on its other rows. */
int tkp_rows_step_classes(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                          struct tkp_rows_pass *p, const struct tkp_model *m,
                          const struct tkp_mstep *s, uint64_t tok, int src)
{
    int err = 0, again = 0;
    struct tkp_classrow r = {m, s, 0, tok, src};
    struct tkp_rows_idcache *pre =
        &e->ic[TKP_TAB_COUNT]; /* the step's columns, the same on its rows */
    for (r.cls = 0; !err && r.cls < p->ncls; r.cls++) {
        if (!tkp_classrow_is(m, s, r.cls)) continue;
        if (again) {
            tkp_tab_row_again(o, pre->text, pre->len, pre->ncols);
        } else {
            ident(o, e, s->tid);
            class_cells(o, e, &r, 0, TKP_CC_class);
            size_t len;
            const void *t = tkp_tab_row_text(o, &len, &pre->ncols);
            if (t && !TKP_GROW(pre->text, pre->cap, len)) {
                memcpy(pre->text, t, len);
                pre->len = len, again = 1;
            }
        }
        class_cells(o, e, &r, TKP_CC_class, TKP_CC_COUNT);
        err = tkp_tab_row_end(o);
    }
    return err;
}

static int rows_step_classes(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                             struct tkp_rows_pass *p, const struct tkp_steprows *x)
{
    int err = 0;
    for (size_t i = 0; !err && i < x->m->nsteps; i++)
        err = tkp_rows_step_classes(o, e, p, x->m, &x->m->steps[i], x->tok[i], x->src[i]);
    return err;
}

static int by_hour_name(const void *a, const void *b)
{
    const struct tkp_rows_hname *x = a, *y = b;
    if (x->hour_ns != y->hour_ns) return x->hour_ns < y->hour_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

int tkp_rows_kernels(struct tkp_tab_out *o, const struct tkp_rows_emit *e, struct tkp_rows_pass *p)
{
    int err = 0;
    qsort(p->hn, p->nhn, sizeof(*p->hn), by_hour_name);
    for (size_t i = 0; !err && i < p->nhn; i++) {
        const struct tkp_rows_hname *h = &p->hn[i];
        struct tkp_kernrow r = {.hour_ns = h->hour_ns, .name = h->name,
                                .cls = tkp_classes_name(p->cl, h->cls), .d = &h->d,
                                .count = h->d.count};
        ident(o, e, 0);
        for (int k = 0; k < TKP_KC_COUNT; k++) {
            int64_t v = 0;
            const char *str = NULL;
            int has = tkp_kernrow_cell(&r, k, &v, &str);
            fleet_cell(o, e, &tkp_kern_cols[k], has, v, str);
        }
        err = tkp_tab_row_end(o);
    }
    return err;
}

/* ---- calls and moe ---- */

int tkp_rows_calls(struct tkp_tab_out *o, const struct tkp_rows_emit *e, struct tkp_tcalls *tc)
{
    size_t n;
    const struct tkp_callrow *v = tkp_tcalls_rows(tc, &n);
    int err = 0;
    for (size_t i = 0; !err && i < n; i++) {
        ident(o, e, 0);
        for (int k = 0; k < TKP_LC_COUNT; k++) {
            int64_t x = 0;
            const char *str = NULL;
            char b[24];
            int has = tkp_callrow_cell(&v[i], k, &x, &str, b);
            fleet_cell(o, e, &tkp_call_cols[k], has, x, str);
        }
        err = tkp_tab_row_end(o);
    }
    return err;
}

struct moe_out {
    struct tkp_tab_out *o;
    const struct tkp_rows_emit *e;
};

static int moe_row(void *ctx, const struct tkp_moerow *r)
{
    const struct moe_out *mo = ctx;
    ident(mo->o, mo->e, r->ms ? r->ms->tid : 0);
    for (int k = 0; k < TKP_MC_COUNT; k++) {
        int64_t v = 0;
        const char *str = NULL;
        int has = tkp_moerow_cell(r, k, &v, &str);
        fleet_cell(mo->o, mo->e, &tkp_moe_cols[k], has, v, str);
    }
    return tkp_tab_row_end(mo->o);
}

/* The rows of x, the experts of steps [s0, s0 + ...) of lm. */
static int rows_moe_of(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                       const struct tkp_libmodel *lm, const struct tkp_model *m,
                       const struct tkp_moe *x)
{
    struct moe_out mo = {o, e};
    return tkp_moerows_each(lm, m, x, moe_row, &mo);
}

static int rows_moe(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                    const struct tkp_libmodel *lm, const struct tkp_model *m)
{
    int err = 0;
    for (uint32_t s0 = 0, s1; !err && s0 < lm->nsteps; s0 = s1) {
        struct tkp_moe x = {0};
        s1 = tkp_libmodel_thread_end(lm, s0);
        if (!(err = tkp_moe_find(lm, s0, s1, 0, &x))) err = rows_moe_of(o, e, lm, m, &x);
        tkp_moe_free(&x);
    }
    return err;
}

/* One window of a thread's steps, loaded from a fresh reader. */
static int load_window(const char *const *files, size_t n, const struct tkp_lwindow *w,
                       struct tkp_libmodel *lm, char *why, size_t wl)
{
    struct tkp_reader *r;
    int err = tkp_reader_open_many(files, n, &r, why, wl);
    if (!err) err = tkp_libmodel_load_window(r, w, lm);
    tkp_reader_close(r);
    return err;
}

/* moe of a capture too large for its whole library-call model: per thread, windows of its steps
 * of about `window` records each, read three times (tkp_moe_scan): memory bounded by
 * one window and the distinct weights, for one more read of the capture per window and phase. */
static int rows_moe_windows(struct tkp_tab_out *o, const struct tkp_rows_emit *e,
                            const char *const *files, size_t n, const struct tkp_model *m,
                            uint64_t window, char *why, size_t wl)
{
    struct tkp_reader *r;
    struct tkp_lscan sc;
    int err = tkp_reader_open_many(files, n, &r, why, wl);
    if (!err) err = tkp_libmodel_scan(r, &sc);
    tkp_reader_close(r);
    for (uint32_t t = 0; !err && t < sc.nt; t++) {
        const struct tkp_lthread *th = &sc.t[t];
        uint64_t k = (th->records + window - 1) / window;
        uint64_t span = k ? (th->segs + k - 1) / k : th->segs;
        struct tkp_moe_scan *ms;
        if (!span) continue;
        if ((err = tkp_moe_scan_new(&ms))) break;
        for (int phase = 0; !err && phase < 3; phase++) {
            for (uint64_t lo = 0; !err && lo < th->segs; lo += span) {
                struct tkp_lwindow w = {th->thread, lo, lo + span, sc.token_dim_m};
                struct tkp_libmodel lm = {0};
                struct tkp_moe x = {0};
                if ((err = load_window(files, n, &w, &lm, why, wl))) break;
                if (phase < 2)
                    err = tkp_moe_scan_add(ms, &lm, 0, lm.nsteps);
                else if (!(err = tkp_moe_scan_rows(ms, &lm, 0, lm.nsteps, &x)))
                    err = rows_moe_of(o, e, &lm, m, &x);
                tkp_moe_free(&x);
                tkp_libmodel_free(&lm);
            }
            if (!err && phase < 2) tkp_moe_scan_end(ms, 0);
        }
        tkp_moe_scan_free(ms);
    }
    tkp_lscan_free(&sc);
    return err;
}

/* ---- the capture ---- */

/* A snapshot (snap: the seq of its first recorder chunk, the process's chunk count then) is a
 * capture of its own; a streamed capture and its rotated files have snap 0. */
uint64_t tkp_rows_capture_id(const char *host, uint64_t pid, uint64_t rt0, uint64_t snap)
{
    uint64_t h = tkp_fnv64(TKP_FNV64_SEED, host, strlen(host) + 1);
    h = tkp_fnv64(h, &pid, sizeof(pid));
    h = tkp_fnv64(h, &rt0, sizeof(rt0));
    return snap ? tkp_fnv64(h, &snap, sizeof(snap)) : h;
}

int tkp_tab_capture_id(const char *path, uint64_t *id)
{
    struct tkp_reader *r;
    struct tkp_record rec;
    char host[256] = "";
    uint64_t pid = 0, rt0 = 0, snap = 0;
    int err = tkp_reader_open(path, &r, NULL, 0), k = 0, meta = 0;
    int is_snap = !err && (tkp_reader_flags(r) & TKP_FILE_SNAPSHOT);
    /* META is in the first chunk; a snapshot's first recorder chunk follows it */
    while (!err && (k = tkp_reader_next(r, &rec)) == 1) {
        if (rec.type == TKP_REC_META && !meta) {
            meta = 1, pid = rec.meta.pid, rt0 = rec.meta.start_realtime_ns;
            snprintf(host, sizeof(host), "%s", rec.meta.hostname ? rec.meta.hostname : "");
        }
        if (rec.type == TKP_REC_CHUNK && rec.chunk.seq > 0) {
            snap = is_snap ? rec.chunk.seq : 0;
            break;
        }
    }
    if (!err) *id = tkp_rows_capture_id(host, pid, rt0, snap);
    tkp_reader_close(r);
    return err;
}

static void note_torn(const struct tkp_reader *r, const char *const *files,
                      struct tkp_tab_info *info)
{
    for (size_t i = 0; i < tkp_reader_nfiles(r); i++) {
        const char *path;
        const struct tkp_reader_err *er = tkp_reader_file(r, i, &path, NULL);
        if (!er || info->torn) continue;
        info->torn = 1;
        snprintf(info->torn_why, sizeof(info->torn_why), "%s: %s at byte %llu (%s)",
                 path ? path : files[0], er->code == TKP_ERR_TORN ? "torn tail" : "bad chunk",
                 (unsigned long long)er->offset, er->msg);
    }
}

void tkp_rows_pass_free(struct tkp_rows_pass *p)
{
    tkp_map64_free(&p->cls_of), tkp_map64_free(&p->hn_at);
    free(p->cd);
    tkp_tcalls_free(p->calls);
    free(p->gs);
    tkp_map64_free(&p->weights);
    for (size_t i = 0; i < p->nhn; i++)
        free(p->hn[i].name), free(p->hn[i].d.hist);
    free(p->hn);
}

int tkp_tab_capture(const char *const *files, size_t n, const struct tkp_classes *cl,
                    const struct tkp_tab_ident *id, struct tkp_tab_out *const *outs,
                    struct tkp_tab_info *info, char *why, size_t whylen)
{
    struct tkp_rows_pass p = {.cl = cl, .ncls = tkp_classes_count(cl)};
    struct tkp_model m;
    /* the tables use the steps' figures, never the model's per-name distributions */
    struct tkp_model_opts mo = {.classes = cl, .from = -1, .to = -1, .no_dists = 1};
    struct tkp_rows_idcache ic[TKP_TAB_COUNT + 1] = {0};
    struct tkp_acc *a = NULL;
    struct tkp_reader *r;
    struct tkp_record rec;
    struct tkp_steprows x = {0};
    int err, k;
    uint64_t rows0[TKP_TAB_COUNT];
    memset(info, 0, sizeof(*info));
    info->nfiles = n;
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        rows0[t] = outs[t] ? tkp_tab_rows(outs[t]) : 0;
    p.want_steps = outs[TKP_TAB_STEPS] != NULL;
    p.want_sc = outs[TKP_TAB_STEP_CLASSES] != NULL;
    mo.class_counts = p.want_sc; /* step_classes' kernels per class, counted by the model */
    p.want_k = outs[TKP_TAB_KERNELS] != NULL;
    p.want_moe = outs[TKP_TAB_MOE] != NULL;
    if (outs[TKP_TAB_CALLS] && tkp_tcalls_new(&p.calls))
        return tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
    tkp_rows_pass_types(&p);
    if ((err = tkp_reader_open_many(files, n, &r, why, whylen))) {
        tkp_tcalls_free(p.calls);
        return err;
    }
    p.is_snap = (tkp_reader_flags(r) & TKP_FILE_SNAPSHOT) != 0;
    tkp_model_init(&m, &mo);
    if ((err = tkp_acc_bind(&m, &a))) goto nomem;
    const uint64_t types = p.types; /* in a register: p's address escapes */
    /* launches concern the model alone unless the calls table is wanted: in bulk, then */
    const int bulk = !(types & TKP_ROWS_TYPE_BIT(TKP_REC_LAUNCH));
    struct tkp_launch_bulk lb;
    rec.type = TKP_REC_CHUNK;
    for (;;) {
        size_t nb;
        /* a RUN's records follow one of its records (the first comes through the model's slow
         * path, which opens the step) */
        if (bulk && (rec.type == TKP_REC_LAUNCH || rec.type == TKP_REC_LIB_CALL) &&
            (nb = tkp_reader_peek_launches(r, &lb)) &&
            (nb = tkp_model_add_launches(&m, &lb, nb))) {
            tkp_reader_take(r, &lb, nb);
            continue;
        }
        if ((k = tkp_reader_next(r, &rec)) != 1) break;
        if ((err = tkp_model_add(&m, &rec)) || (err = tkp_rows_on_record(&p, types, &rec)))
            goto nomem;
    }
    note_torn(r, files, info);
    tkp_reader_close(r);
    r = NULL;
    if ((err = tkp_model_finish(&m))) goto nomem;
    snprintf(info->host, sizeof(info->host), "%s", id->host ? id->host : p.hostbuf);
    info->pid = p.pid;
    info->capture_id = tkp_rows_capture_id(p.hostbuf, p.pid, p.rt0, p.snap);
    struct tkp_rows_emit e = {id, &p, info->capture_id, ic};
    if (tkp_steprows_init(&x, &m, a)) goto nomem;
    if (!err && outs[TKP_TAB_STEPS]) err = rows_steps(outs[TKP_TAB_STEPS], &e, &x);
    if (!err && outs[TKP_TAB_STEP_CLASSES])
        err = rows_step_classes(outs[TKP_TAB_STEP_CLASSES], &e, &p, &x);
    if (!err && outs[TKP_TAB_KERNELS]) err = tkp_rows_kernels(outs[TKP_TAB_KERNELS], &e, &p);
    if (!err && outs[TKP_TAB_CALLS]) err = tkp_rows_calls(outs[TKP_TAB_CALLS], &e, p.calls);
    for (size_t t = 0; t < p.ngs; t++)
        if (p.gs[t].used) tkp_rows_gstep_close(&p, &p.gs[t]);
    if (p.max_count > 1 && p.weights.n > p.max_count) p.moe_hint = 1;
    uint64_t nrec = 0; /* what the library-call model of the capture would hold, about */
    for (size_t i = 0; i < m.nsteps; i++)
        nrec += m.steps[i].launches + m.steps[i].gpu_kernels;
    uint64_t window = id->moe_window ? id->moe_window : TKP_TAB_MOE_WINDOW;
    if (!err && outs[TKP_TAB_MOE] && p.moe_hint && window != UINT64_MAX && nrec > window / 2) {
        err = rows_moe_windows(outs[TKP_TAB_MOE], &e, files, n, &m, window, why, whylen);
        if (err == TKP_ERR_NOMEM) goto nomem;
    } else if (!err && outs[TKP_TAB_MOE] && p.moe_hint) { /* pass 2: the library-call model */
        struct tkp_libmodel lm = {0};
        if ((err = tkp_reader_open_many(files, n, &r, why, whylen))) goto out;
        err = tkp_libmodel_load(r, &lm);
        if (err == TKP_ERR_NOMEM) goto nomem;
        /* a torn tail: pass 1 noted it; the calls up to there stand */
        err = rows_moe(outs[TKP_TAB_MOE], &e, &lm, &m);
        tkp_libmodel_free(&lm);
    }
    for (int t = 0; t < TKP_TAB_COUNT; t++)
        info->rows[t] = outs[t] ? tkp_tab_rows(outs[t]) - rows0[t] : 0;
    if (err)
        tkp_why(why, whylen, err, "%s", err == TKP_ERR_NOMEM ? "out of memory" : tkp_strerror(err));
    goto out;
nomem:
    err = tkp_why(why, whylen, TKP_ERR_NOMEM, "out of memory");
out:
    tkp_reader_close(r);
    tkp_steprows_free(&x);
    tkp_acc_free(a);
    tkp_model_free(&m);
    tkp_rows_pass_free(&p);
    tkp_rows_idcache_free(ic);
    return err;
}
