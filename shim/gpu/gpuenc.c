/* Tier 2, the writer thread's side: the GPU records of the buffers CUPTI completed, encoded into
 * the writer's chunks (gpuenc.h). Nothing here runs on an application thread or on CUPTI's: the
 * buffers, the window/trigger filter and the graph node map belong to activity.c, which this file
 * reads through activity.h's hand-over functions and never the other way round.
 *
 * The join. Every launch, graph launch, copy and memset the CUPTI callback saw left a
 * TKP_EV_GPU_CORR event in its thread's ring {correlation, join kind, step, ordinal}. The writer
 * hands each one to tkp_gpuenc_note() while it drains the rings, which keeps them in a
 * correlation table (direct-mapped on the id, writer-private); the GPU records of buffers taken
 * before that drain are encoded after it, so a GPU record always finds its launch's event
 * (causality: the buffer completed after the call). */
#include "gpu/gpuenc.h"

#include <cupti.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/base.h"
#include "gpu/activity.h"
#include "record/col.h"
#include "tokprof/format.h"

#define CORR_SLOTS (1u << 17) /* correlation ids remembered by the writer (3 MiB) */

/* The GPU mode may leave records out (tkp_cupti_filters), as of this batch. */
static int filters;

/* What was encoded, for GPU_INFO. */
static struct {
    uint64_t records, bad_time, unjoined, filtered;
    uint64_t info_sig; /* counters last emitted in GPU_INFO */
    int info_sent;
} counts;

/* The open COLS ("columns", below). room: records every column has room for (ROOM_RECS * 10
 * bytes were made free at once), so that adding a record checks one counter, not 17 columns. */
#define COLS_FIELDS 17
#define ROOM_RECS 256u
static struct {
    int type; /* of the open COLS */
    uint32_t n, nf, room;
    uint64_t prev[COLS_FIELDS];
    struct tkp_col c[COLS_FIELDS];
} cols;

/* ---- the correlation table ---- */
struct corr {
    uint32_t id, thread, step, join_idx;
    uint64_t stamp; /* the callback's: which version of an updated graph the launch replayed */
}; /* join_idx: join << 28 | index */
static struct corr *corrs;

struct tkp_gpu_batch {
    struct tkp_cupti_buf *head;
    CUpti_Activity *rec; /* the last record encoded in head; NULL: none yet */
};
static struct tkp_gpu_batch batch;

struct tkp_gpu_batch *tkp_gpuenc_take(void)
{
    /* Buffers a previous call left unfinished come first: they completed earlier. */
    struct tkp_cupti_buf *more = tkp_cupti_take();
    if (!batch.head) {
        batch.head = more;
        batch.rec = NULL;
    } else if (more) {
        tkp_cupti_append(batch.head, more);
    }
    return &batch;
}

void tkp_gpuenc_note(const struct tkp_ev *e, uint32_t thread)
{
    if (!corrs && !(corrs = calloc(CORR_SLOTS, sizeof *corrs))) return;
    struct corr *c = &corrs[e->a & (CORR_SLOTS - 1)];
    uint32_t ji = (uint32_t)e->sub << 28 | (e->u[0] & 0x0fffffffu);
    /* runtime and driver callbacks of one call both note; the first (outermost) wins */
    if (c->id == (uint32_t)e->a && c->thread == thread) return;
    *c = (struct corr){(uint32_t)e->a, thread, e->step, ji, e->ts};
}

static const struct corr *corr_find(uint32_t id)
{
    const struct corr *c = corrs ? &corrs[id & (CORR_SLOTS - 1)] : NULL;
    return c && c->id == id && id ? c : NULL;
}

static int dir_of(uint8_t copy_kind)
{
    switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return TKP_DIR_HTOD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return TKP_DIR_DTOH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return TKP_DIR_DTOD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return TKP_DIR_HTOH;
    default:
        return TKP_DIR_DEFAULT;
    }
}

/* 0 when the window/trigger filter drops the record: it belongs to a step of the stepping
 * thread that is not traced (CUPTI was switched on early or off late around it). */
static int keep(uint32_t corr)
{
    if (!filters) return 1;
    const struct corr *c = corr_find(corr);
    if (c && tkp_cupti_untraced(c->thread, c->step)) {
        counts.filtered++;
        return 0;
    }
    return 1;
}

/* thread, step, join, index, graph, node of a GPU record: v[0..5] */
static void join_fields(uint64_t *v, uint32_t corr, uint64_t graph_node)
{
    const struct corr *c = corr_find(corr);
    if (c) {
        v[0] = c->thread;
        v[1] = c->step;
        v[2] = c->join_idx >> 28;
        v[3] = c->join_idx & 0x0fffffffu;
    } else {
        counts.unjoined++;
        v[0] = TKP_GPU_THREAD_NONE;
        v[1] = 0;
        v[2] = TKP_JOIN_NONE;
        v[3] = 0;
    }
    uint32_t g;
    uint64_t n;
    if (graph_node && tkp_cupti_node_lookup(graph_node, c ? c->stamp : UINT64_MAX, &g, &n)) {
        v[4] = g;
        v[5] = n;
    } else {
        v[4] = v[5] = UINT64_MAX; /* -1 */
    }
}

/* ---- columns (FORMAT.md, "Columns") ----
 * The GPU records of one writer cycle are written as COLS records: each field a column of
 * zigzag deltas against the same field of the record before, so that start and end times take
 * two bytes, the join and the dimensions (which repeat kernel after kernel) one. A COLS holds
 * records of one type; a record of the other type ends it, and so does the end of
 * tkp_gpuenc_encode, so GPU records keep their order and no COLS spans two chunks. NAME records
 * of kernel names are written as the records are added, before the COLS that uses them. */
/* (cols, the open COLS, is declared above.) */

static void cols_flush(const struct tkp_enc *enc)
{
    if (!cols.n) return;
    msgpack_packer *pk = enc->packer(enc->ctx);
    msgpack_pack_array(pk, 4 + cols.nf);
    msgpack_pack_int(pk, TKP_REC_COLS);
    msgpack_pack_int(pk, cols.type);
    msgpack_pack_uint32(pk, cols.n);
    msgpack_pack_uint32(pk, cols.nf);
    tkp_cols_pack(pk, cols.c, cols.nf);
    cols.n = 0;
    cols.room = 0; /* the columns are empty again: made room for anew at the next record */
}

/* The zigzag deltas of a record's fields, then their bytes. Start, end, name, correlation and
 * the grid and block dimensions (GPU_KERNEL fields 0 to 2, 4, 11 to 16) change from kernel to
 * kernel, often by more than a byte holds; the others (stream, thread, step, join, index, graph,
 * node) repeat or step by one, so they are checked together and nearly always written as one
 * byte each. Unrolled for the constant count of a GPU_KERNEL: no loop control per field. A
 * GPU_COPY (rare) takes the plain loop. */
#define COLS_WIDE(k) ((k) < 3 || (k) == 4 || (k) > 10)
static inline void cols_put(const uint64_t *v, uint32_t nf)
{
    for (uint32_t k = 0; k < nf; k++) {
        tkp_col_put(&cols.c[k], tkp_zigzag((int64_t)(v[k] - cols.prev[k])));
        cols.prev[k] = v[k];
    }
}
static inline void cols_put_kernel(const uint64_t *v)
{
    uint64_t z[17], any = 0;
#pragma GCC unroll 17
    for (uint32_t k = 0; k < 17; k++) {
        uint64_t d = v[k] - cols.prev[k];
        z[k] = (d << 1) ^ (0 - (d >> 63));
        cols.prev[k] = v[k];
        if (!COLS_WIDE(k)) any |= z[k];
    }
#pragma GCC unroll 17
    for (uint32_t k = 0; k < 17; k++)
        if (COLS_WIDE(k)) tkp_col_put(&cols.c[k], z[k]);
    if (TKP_LIKELY(any < 0x80)) {
#pragma GCC unroll 17
        for (uint32_t k = 0; k < 17; k++) {
            if (COLS_WIDE(k)) continue;
            struct tkp_col *c = &cols.c[k];
            uint32_t n = c->n;
            c->p[n] = (uint8_t)z[k];
            c->n = n + 1;
        }
        return;
    }
    for (uint32_t k = 0; k < 17; k++)
        if (!COLS_WIDE(k)) tkp_col_put(&cols.c[k], z[k]);
}

/* Adds a record of type with fields v[0..nf) to the open COLS; 0 when memory ran out (the
 * caller writes it as a record of its own). The writer's cost per GPU record is mostly here:
 * one counter for the room, then per field a delta, a zigzag and (nearly always) one byte. */
static int cols_add(const struct tkp_enc *enc, int type, const uint64_t *v, uint32_t nf)
{
    if (cols.n && (cols.type != type || cols.n == TKP_COLS_MAX)) cols_flush(enc);
    if (TKP_UNLIKELY(!cols.room)) {
        for (uint32_t k = 0; k < COLS_FIELDS; k++)
            if (tkp_col_reserve(&cols.c[k], ROOM_RECS * 10)) {
                cols_flush(enc);
                return 0;
            }
        cols.room = ROOM_RECS;
    }
    if (!cols.n) {
        cols.type = type;
        cols.nf = nf;
        memset(cols.prev, 0, sizeof cols.prev);
    }
    if (type == TKP_REC_GPU_KERNEL) cols_put_kernel(v);
    else cols_put(v, nf);
    cols.n++;
    cols.room--;
    return 1;
}

/* The record as msgpack, after the open COLS (out of memory for columns). */
static void pack_plain(const struct tkp_enc *enc, int type, const uint64_t *v, uint32_t nf)
{
    cols_flush(enc);
    msgpack_packer *pk = enc->packer(enc->ctx);
    msgpack_pack_array(pk, 1 + nf);
    msgpack_pack_int(pk, type);
    uint32_t graph = type == TKP_REC_GPU_KERNEL ? 9 : 11; /* graph, node: -1 or an id */
    for (uint32_t k = 0; k < nf; k++) {
        if ((k == graph || k == graph + 1) && v[k] == UINT64_MAX)
            msgpack_pack_int(pk, -1);
        else
            msgpack_pack_uint64(pk, v[k]);
    }
}

static void encode_record(const struct tkp_enc *enc, const CUpti_Activity *a)
{
    const uint8_t *p = (const uint8_t *)a;
    uint64_t start, end;
    uint32_t corr;
    uint64_t gnode;
    if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        memcpy(&start, p + 16, 8);
        memcpy(&end, p + 24, 8);
        memcpy(&corr, p + 92, 4);
        memcpy(&gnode, p + 144, 8);
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *m = (const void *)a;
        start = m->start, end = m->end, corr = m->correlationId, gnode = m->graphNodeId;
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const CUpti_ActivityMemset4 *m = (const void *)a;
        start = m->start, end = m->end, corr = m->correlationId, gnode = m->graphNodeId;
    } else {
        return;
    }
    if (!start || end < start) { /* seen in the wild (device buffers exhausted) */
        counts.bad_time++;
        return;
    }
    if (!keep(corr)) return;
    counts.records++;
    uint64_t v[COLS_FIELDS];
    v[0] = start;
    v[1] = end;
    if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY || a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        int set = a->kind == CUPTI_ACTIVITY_KIND_MEMSET;
        const CUpti_ActivityMemcpy6 *m = (const void *)a;
        const CUpti_ActivityMemset4 *s = (const void *)a;
        v[2] = set ? TKP_COPY_MEMSET : TKP_COPY_MEMCPY;
        v[3] = (uint64_t)(set ? TKP_DIR_DEFAULT : dir_of(m->copyKind));
        v[4] = set ? s->bytes : m->bytes;
        v[5] = set ? s->streamId : m->streamId;
        v[6] = corr;
        join_fields(v + 7, corr, gnode);
        if (!cols_add(enc, TKP_REC_GPU_COPY, v, 13)) pack_plain(enc, TKP_REC_GPU_COPY, v, 13);
        return;
    }
    const char *name;
    uint32_t stream;
    int32_t dims[6];
    memcpy(&name, p + 104, sizeof name);
    memcpy(&stream, p + 48, 4);
    memcpy(dims, p + 52, sizeof dims);
    v[2] = enc->name(enc->ctx, name ? name : "?");
    v[3] = stream;
    v[4] = corr;
    join_fields(v + 5, corr, gnode);
    for (int i = 0; i < 6; i++)
        v[11 + i] = (uint32_t)dims[i];
    if (!cols_add(enc, TKP_REC_GPU_KERNEL, v, 17)) pack_plain(enc, TKP_REC_GPU_KERNEL, v, 17);
}

static void emit_info(const struct tkp_enc *enc, const struct tkp_cupti_status *st, int final)
{
    uint64_t dropped = st->dropped;
    uint64_t sig = counts.records * 31 + dropped * 17 + counts.bad_time * 13 + counts.unjoined * 7 +
                   counts.filtered;
    if (counts.info_sent && sig == counts.info_sig && !final) return;
    counts.info_sent = 1;
    counts.info_sig = sig;
    msgpack_packer *pk = enc->packer(enc->ctx);
    msgpack_pack_array(pk, 11);
    msgpack_pack_int(pk, TKP_REC_GPU_INFO);
    msgpack_pack_int(pk, st->status);
    const char *m = st->mode, *why = st->reason;
    msgpack_pack_str(pk, strlen(m));
    msgpack_pack_str_body(pk, m, strlen(m));
    msgpack_pack_str(pk, strlen(why));
    msgpack_pack_str_body(pk, why, strlen(why));
    msgpack_pack_str(pk, 9);
    msgpack_pack_str_body(pk, "monotonic", 9);
    msgpack_pack_uint64(pk, counts.records);
    msgpack_pack_uint64(pk, dropped);
    msgpack_pack_uint64(pk, counts.bad_time);
    msgpack_pack_uint64(pk, counts.unjoined);
    msgpack_pack_uint64(pk, counts.filtered);
    msgpack_pack_uint64(pk, st->buf_peak);
}

int tkp_gpuenc_encode(struct tkp_gpu_batch *b, int final, uint32_t max,
                      const struct tkp_enc *enc)
{
    filters = tkp_cupti_filters();
    uint32_t done = 0;
    while (b->head) {
        while (tkp_cupti_next_record(b->head, &b->rec)) {
            encode_record(enc, b->rec);
            if (++done >= max && !final) {
                cols_flush(enc); /* the writer packs host records next */
                return 1;
            }
        }
        b->head = tkp_cupti_release(b->head);
        b->rec = NULL;
    }
    cols_flush(enc); /* before any other record, and within this chunk */
    struct tkp_cupti_status st;
    tkp_cupti_status(&st);
    if (st.status != TKP_GPU_OFF || st.reason[0] || final) emit_info(enc, &st, final);
    return 0;
}

uint64_t tkp_gpuenc_records(void)
{
    return counts.records;
}

void tkp_gpuenc_after_fork(void)
{
    cols.n = 0; /* a COLS the parent's writer was filling */
    cols.room = 0;
    batch.head = NULL; /* the parent's buffers (not freed: CUPTI's memory state is the parent's) */
    batch.rec = NULL;
    for (int k = 0; k < COLS_FIELDS; k++)
        cols.c[k].n = 0;
    counts.info_sent = 0;
}
