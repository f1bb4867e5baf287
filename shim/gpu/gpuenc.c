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
#include "core/map.h"
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

/* The writer's packer, asked once per tkp_gpuenc_encode() call: asking opens the chunk and
 * ends the writer's open RUN, and nothing else packs records while the encoder runs, so later
 * asks would do nothing (but cost ~190 instructions each). */
static msgpack_packer *pk_now;
/* TOKPROF_TEST_GPU, in settings.def's order of its words */
enum { TEST_ON, TEST_COLS, TEST_SHADOW, TEST_PLAIN };
static int test_mode;
static msgpack_packer *packer(const struct tkp_enc *enc)
{
    if (!pk_now) pk_now = enc->packer(enc->ctx);
    return pk_now;
}

/* The open COLS ("columns", below). room: records every column has room for (ROOM_RECS * 10
 * bytes were made free at once), so that adding a record checks one counter, not 17 columns. */
#define COLS_FIELDS 17
#define ROOM_RECS 256u
#define ASIDE 4u /* GPU_COPYs held aside: a COLS of so few is packed in one pass (held_pack) */
struct colset {
    int type;       /* of the open COLS */
    uint32_t aside; /* its first records, only in held: held_pack if no more come */
    uint32_t n, nf, room;
    uint64_t prev[COLS_FIELDS];
    struct tkp_col c[COLS_FIELDS];
    uint64_t held[ASIDE][COLS_FIELDS];
};
/* shadow: TOKPROF_TEST_GPU=shadow's COLS of the kernels of the open GPU_RUN ("templates") */
static struct colset cols, shadow;

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

/* The same, corrs allocated (tkp_gpuenc_encode's fast path). */
static inline const struct corr *corr_at(uint32_t id)
{
    const struct corr *c = &corrs[id & (CORR_SLOTS - 1)];
    return c->id == id && id ? c : NULL;
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
    if (graph_node && tkp_cupti_node_lookup(graph_node, c ? c->stamp : UINT64_MAX, &g, &n, NULL)) {
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

/* tag, then v as n big-endian bytes (n: 1, 2, 4, 8), at q; returns the end. */
static inline uint8_t *mp_be(uint8_t *q, uint8_t tag, uint64_t v, int n)
{
    uint64_t b = __builtin_bswap64(v) >> (64 - 8 * n);
    q[0] = tag;
    memcpy(q + 1, &b, 8); /* the buffer has room: callers size it 8 past the last value */
    return q + 1 + n;
}

/* An unsigned integer as msgpack packs it (the smallest form), at q; returns the end. */
static inline uint8_t *mp_uint(uint8_t *q, uint64_t v)
{
    if (v < 0x80) {
        *q = (uint8_t)v;
        return q + 1;
    }
    return v <= 0xff ? mp_be(q, 0xcc, v, 1) : v <= 0xffff ? mp_be(q, 0xcd, v, 2)
           : v <= 0xffffffffu ? mp_be(q, 0xce, v, 4) : mp_be(q, 0xcf, v, 8);
}

/* The header of a msgpack bin of n bytes, at q; returns the end. */
static inline uint8_t *mp_bin(uint8_t *q, uint32_t n)
{
    return n <= 0xff ? mp_be(q, 0xc4, n, 1) : n <= 0xffff ? mp_be(q, 0xc5, n, 2)
                                                         : mp_be(q, 0xc6, n, 4);
}

/* A record as msgpack [type, v...] (graph, node: -1 or an id), the same bytes msgpack-c's packer
 * writes, appended at once: a tenth of the instructions of a pack call per field. */
static void plain_pack(msgpack_packer *pk, int type, const uint64_t *v, uint32_t nf)
{
    uint8_t b[3 + COLS_FIELDS * 9 + 8], *q = b;
    if (1 + nf <= 15) *q++ = (uint8_t)(0x90 | (1 + nf)); /* fixarray: a GPU_COPY's 14 */
    else q = mp_be(q, 0xdc, 1 + nf, 2);                  /* array 16: a GPU_KERNEL's 18 */
    *q++ = (uint8_t)type;                                /* positive fixint */
    uint32_t graph = type == TKP_REC_GPU_KERNEL ? 9 : 11, k;
    for (k = 0; k < graph; k++)
        q = mp_uint(q, v[k]);
    for (; k < graph + 2; k++) { /* graph, node: -1 or an id */
        if (v[k] == UINT64_MAX) *q++ = 0xff;
        else q = mp_uint(q, v[k]);
    }
    for (; k < nf; k++)
        q = mp_uint(q, v[k]);
    msgpack_pack_bin_body(pk, b, (size_t)(q - b)); /* the raw bytes */
}

/* The records held aside as the COLS that cols_put and cols_pack would write, the same bytes,
 * made here in one pass and appended at once. */
static void held_pack(msgpack_packer *pk, const struct colset *cs)
{
    uint8_t b[16 + COLS_FIELDS * (5 + ASIDE * 10) + 8], *q = b;
    q = mp_be(q, 0xdc, 4 + cs->nf, 2); /* array 16: more than 15 elements */
    *q++ = TKP_REC_COLS;
    *q++ = (uint8_t)cs->type;
    q = mp_uint(q, cs->aside);
    q = mp_uint(q, cs->nf);
    for (uint32_t k = 0; k < cs->nf; k++) { /* a bin8 each: at most ASIDE * 10 bytes */
        uint8_t *w = q + 2;
        uint64_t prev = 0;
        for (uint32_t i = 0; i < cs->aside; i++) {
            w = tkp_varint_at(w, tkp_zigzag((int64_t)(cs->held[i][k] - prev)));
            prev = cs->held[i][k];
        }
        q[0] = 0xc4;
        q[1] = (uint8_t)(w - q - 2);
        q = w;
    }
    msgpack_pack_bin_body(pk, b, (size_t)(q - b)); /* the raw bytes */
}

static void cols_pack(msgpack_packer *pk, struct colset *cs)
{
    if (cs->aside) {
        held_pack(pk, cs);
        cs->n = cs->aside = 0;
        return;
    }
    msgpack_pack_array(pk, 4 + cs->nf);
    msgpack_pack_int(pk, TKP_REC_COLS);
    msgpack_pack_int(pk, cs->type);
    msgpack_pack_uint32(pk, cs->n);
    msgpack_pack_uint32(pk, cs->nf);
    tkp_cols_pack(pk, cs->c, cs->nf);
    cs->n = 0;
    cs->room = 0; /* the columns are empty again: made room for anew at the next record */
}

static void run_flush(const struct tkp_enc *enc);

static void cols_flush(const struct tkp_enc *enc)
{
    if (cols.n) cols_pack(packer(enc), &cols);
}

/* The zigzag deltas of a record's fields, then their bytes. Start, end, name, correlation and
 * the grid and block dimensions (GPU_KERNEL fields 0 to 2, 4, 11 to 16) change from kernel to
 * kernel, often by more than a byte holds; the others (stream, thread, step, join, index, graph,
 * node) repeat or step by one, so they are checked together and nearly always written as one
 * byte each. Unrolled for the constant count of a GPU_KERNEL: no loop control per field. A
 * GPU_COPY (rare) takes the plain loop. */
#define COLS_WIDE(k) ((k) < 3 || (k) == 4 || (k) > 10)
static inline void cols_put(struct colset *cs, const uint64_t *v, uint32_t nf)
{
    for (uint32_t k = 0; k < nf; k++) {
        tkp_col_put(&cs->c[k], tkp_zigzag((int64_t)(v[k] - cs->prev[k])));
        cs->prev[k] = v[k];
    }
}
static inline void cols_put_kernel(struct colset *cs, const uint64_t *v)
{
    uint64_t z[17], any = 0;
#pragma GCC unroll 17
    for (uint32_t k = 0; k < 17; k++) {
        uint64_t d = v[k] - cs->prev[k];
        z[k] = (d << 1) ^ (0 - (d >> 63));
        cs->prev[k] = v[k];
        if (!COLS_WIDE(k)) any |= z[k];
    }
#pragma GCC unroll 17
    for (uint32_t k = 0; k < 17; k++)
        if (COLS_WIDE(k)) tkp_col_put(&cs->c[k], z[k]);
    if (TKP_LIKELY(any < 0x80)) {
#pragma GCC unroll 17
        for (uint32_t k = 0; k < 17; k++) {
            if (COLS_WIDE(k)) continue;
            struct tkp_col *c = &cs->c[k];
            uint32_t n = c->n;
            c->p[n] = (uint8_t)z[k];
            c->n = n + 1;
        }
        return;
    }
    for (uint32_t k = 0; k < 17; k++)
        if (!COLS_WIDE(k)) tkp_col_put(&cs->c[k], z[k]);
}

/* Adds a record of type with fields v[0..nf) to the open COLS; 0 when memory ran out (the
 * caller writes it as a record of its own). The writer's cost per GPU record is mostly here:
 * one counter for the room, then per field a delta, a zigzag and (nearly always) one byte. */
static int colset_add(struct colset *cs, int type, const uint64_t *v, uint32_t nf)
{
    /* copies come one or two between kernels (a step's output and the next one's input) */
    if (type == TKP_REC_GPU_COPY && cs->n == cs->aside && cs->aside < ASIDE) {
        cs->type = type;
        cs->nf = nf;
        memcpy(cs->held[cs->aside++], v, nf * sizeof *v);
        cs->n++;
        return 1;
    }
    if (TKP_UNLIKELY(cs->room <= ASIDE)) {
        for (uint32_t k = 0; k < COLS_FIELDS; k++)
            if (tkp_col_reserve(&cs->c[k], ROOM_RECS * 10)) return 0;
        cs->room = ROOM_RECS;
    }
    if (!cs->n) {
        cs->type = type;
        cs->nf = nf;
        memset(cs->prev, 0, sizeof cs->prev);
    } else if (cs->aside) { /* one more: those held go into the columns first */
        memset(cs->prev, 0, sizeof cs->prev);
        for (uint32_t i = 0; i < cs->aside; i++)
            cols_put(cs, cs->held[i], nf);
        cs->room -= cs->aside;
        cs->aside = 0;
    }
    if (type == TKP_REC_GPU_KERNEL) cols_put_kernel(cs, v);
    else cols_put(cs, v, nf);
    cs->n++;
    cs->room--;
    return 1;
}

static int cols_add(const struct tkp_enc *enc, int type, const uint64_t *v, uint32_t nf)
{
    if (TKP_UNLIKELY(test_mode == TEST_PLAIN)) return 0; /* as when out of memory: plain records */
    run_flush(enc); /* GPU records keep their order */
    if (cols.n && (cols.type != type || cols.n == TKP_COLS_MAX)) cols_flush(enc);
    if (colset_add(&cols, type, v, nf)) return 1;
    cols_flush(enc);
    return 0;
}

/* The record as msgpack, after the open COLS (out of memory for columns). */
static void pack_plain(const struct tkp_enc *enc, int type, const uint64_t *v, uint32_t nf)
{
    run_flush(enc);
    cols_flush(enc);
    plain_pack(packer(enc), type, v, nf);
}


/* ---- GPU templates (FORMAT.md, "GPU templates", version 6) ----
 * What a kernel's records share from launch to launch (its name, stream, thread, join kind,
 * graph node and dimensions: its launch site) is one id, a GPU_TMPL defined once per chunk; a
 * GPU_RUN holds the kernels of a writer cycle as that id and what varies: the start (against the
 * previous record's end), the duration, and the correlation, step and index, which nearly
 * always follow the previous record's (TKP_GMODE_*, two bits beside the id).
 *
 * Finding a kernel's template (gt_find): a program launches the same kernels step after step, so
 * the template is predicted and the prediction checked, the key 7 words taken nearly as they lie
 * in the CUPTI record: first the template of the launch with the same ordinal in its thread's
 * step last time (byidx: the launch's join gives thread and index), then the one that followed
 * the previous kernel last time (next: graph nodes, which share their launch's index).
 * Only when both miss (the first steps, a shape that changed, unjoined records) is the key hashed
 * and probed (gt_lookup). Then two or three varints, mostly one or two bytes each. */
struct gt_key {
    uint64_t name;     /* CUPTI's name pointer; the NAME id is asked once per chunk */
    uint64_t sd[3];    /* stream gx, gy gz, bx by: the record's bytes 48 to 71 */
    uint64_t bz_join;  /* bz | join << 32 */
    uint64_t th_graph; /* thread | graph << 32 (graph as 32 bits, -1: none) */
    uint64_t node;
};
static struct {
    struct gt_def {
        struct gt_key k;
        uint32_t name, seq1; /* its NAME id; the chunk (seq + 1) that defined it, 0: none */
        uint32_t next;       /* the template that followed it last; UINT32_MAX: none yet */
    } *def;                  /* TKP_GPU_TMPL_MAX of them, after a sentinel (gt_ready) */
    uint32_t n;              /* templates */
    int failed;              /* no memory for the table: COLS as before */
} gt;
static uint32_t chunk_seq1; /* the chunk this tkp_gpuenc_encode() call packs into, + 1 */

/* The open GPU_RUN: tmpls, starts, durs, joins; the previous record's end, correlation, step
 * and index (0 before the first). */
static struct {
    uint32_t n, room;
    uint64_t end, corr, step, index;
    struct tkp_col c[4];
    uint8_t *w[3]; /* where the next varint of tmpls, starts, durs goes while n > 0 (c[k].n is
                    * set from it at run_open and run_flush) */
} run;

static inline int gt_same(const struct gt_key *a, const struct gt_key *b)
{
    return ((a->name ^ b->name) | (a->sd[0] ^ b->sd[0]) | (a->sd[1] ^ b->sd[1]) |
            (a->sd[2] ^ b->sd[2]) | (a->bz_join ^ b->bz_join) | (a->th_graph ^ b->th_graph) |
            (a->node ^ b->node)) == 0;
}

/* The template id of key, entered when new; -1 when the table is full or out of memory. An
 * open-addressed table of ids whose keys are gt.def's, compared inline: core/map.h's tkp_map
 * (its find out of line, an eq callback) took 148 instructions a lookup against 79 here. */
#define GT_SLOTS (2 * TKP_GPU_TMPL_MAX) /* open addressing, at most half full */
static uint32_t gt_slot[GT_SLOTS]; /* id + 1; 0: empty (static: zero pages, no memset) */
static inline uint32_t gt_hash(const struct gt_key *k)
{
    uint64_t h = tkp_hash_u64(k->name ^ k->sd[0] ^ k->sd[1] << 3 ^ k->sd[2] << 5 ^
                              k->bz_join << 7 ^ k->th_graph << 11 ^ k->node << 13);
    return (uint32_t)(h >> 40) & (GT_SLOTS - 1);
}
static int64_t __attribute__((noinline)) gt_lookup(const struct gt_key *k)
{
    if (TKP_UNLIKELY(!gt.def)) return -1;
    for (uint32_t i = gt_hash(k);; i = (i + 1) & (GT_SLOTS - 1)) {
        uint32_t id1 = gt_slot[i];
        if (TKP_LIKELY(id1)) {
            if (TKP_LIKELY(gt_same(&gt.def[id1 - 1].k, k))) return id1 - 1;
            continue;
        }
        if (gt.n == TKP_GPU_TMPL_MAX) return -1;
        gt.def[gt.n] = (struct gt_def){*k, 0, 0, UINT32_MAX};
        gt_slot[i] = gt.n + 1;
        return gt.n++;
    }
}

/* The table, allocated at the first encode; 0 when there is no memory for it (COLS then).
 * gt.def[-1] is a template no key equals (join 2^32 - 1: a key's join is join_idx >> 28), so
 * that the slot of a prediction not made yet (0: id + 1) leads to it, and kernel_tmpl need not
 * test for one. */
static int gt_ready(void)
{
    if (TKP_LIKELY(gt.def)) return 1;
    if (gt.failed) return 0;
    struct gt_def *base = malloc((TKP_GPU_TMPL_MAX + 1) * sizeof *base);
    if (!base) {
        gt.failed = 1;
        return 0;
    }
    base[0] = (struct gt_def){{0, {0, 0, 0}, UINT64_MAX, 0, 0}, 0, 0, UINT32_MAX};
    gt.def = base + 1;
    return 1;
}

/* The predictions (kernel_tmpl checks the first): the template the launch with the same ordinal
 * in its thread's step had last time (byidx), and the one that followed the thread's previous
 * kernel (of any thread) last time (next). */
#define GT_BYIDX 4096 /* slots of (thread, index) */
static uint16_t gt_byidx[GT_BYIDX];  /* id + 1; 0: none */
static uint16_t gt_last;             /* the previous kernel's, id + 1; 0: none */

/* The template id of key when byidx missed: next, or looked up; by and prev are its slots. */
static int64_t __attribute__((noinline)) gt_find(const struct gt_key *k, uint16_t *by,
                                                 uint16_t *prev)
{
    int64_t id = -1;
    if (*prev) {
        uint32_t next = gt.def[*prev - 1].next;
        if (next != UINT32_MAX && gt_same(&gt.def[next].k, k)) id = next;
    }
    if (id < 0) {
        id = gt_lookup(k);
        if (TKP_UNLIKELY(id < 0)) return -1;
        if (*prev) gt.def[*prev - 1].next = (uint32_t)id;
    }
    *by = *prev = (uint16_t)(id + 1);
    return id;
}

/* GPU_TMPL id in the current chunk: [35, gtmpl, name, stream, thread, join, graph, node, gx, gy,
 * gz, bx, by, bz] (its NAME first). */
static void gt_define(const struct tkp_enc *enc, uint32_t id)
{
    struct gt_def *d = &gt.def[id];
    const struct gt_key *k = &d->k;
    const char *name = (const char *)(uintptr_t)k->name;
    d->name = enc->name(enc->ctx, name ? name : "?");
    d->seq1 = chunk_seq1;
    uint8_t buf[2 + 12 * 9 + 8], *q = buf;
    *q++ = 0x90 | 14; /* fixarray */
    *q++ = TKP_REC_GPU_TMPL;
    q = mp_uint(q, id);
    q = mp_uint(q, d->name);
    q = mp_uint(q, (uint32_t)k->sd[0]);
    q = mp_uint(q, (uint32_t)k->th_graph);
    q = mp_uint(q, (uint32_t)(k->bz_join >> 32));
    uint32_t graph = (uint32_t)(k->th_graph >> 32);
    if (graph == UINT32_MAX) *q++ = 0xff; /* -1 */
    else q = mp_uint(q, graph);
    if (k->node == UINT64_MAX) *q++ = 0xff;
    else q = mp_uint(q, k->node);
    /* gx, gy, gz, bx, by, bz: the record's six 32-bit words from byte 52 */
    q = mp_uint(q, (uint32_t)(k->sd[0] >> 32));
    q = mp_uint(q, (uint32_t)k->sd[1]);
    q = mp_uint(q, (uint32_t)(k->sd[1] >> 32));
    q = mp_uint(q, (uint32_t)k->sd[2]);
    q = mp_uint(q, (uint32_t)(k->sd[2] >> 32));
    q = mp_uint(q, (uint32_t)k->bz_join);
    msgpack_pack_bin_body(packer(enc), buf, (size_t)(q - buf)); /* the raw bytes */
}

/* The column lengths from the cursors (a run with kernels). */
static void run_sync(void)
{
    for (uint32_t k = 0; k < 3; k++)
        run.c[k].n = (uint32_t)(run.w[k] - run.c[k].p);
}

/* [36, n, tmpls, starts, durs, joins], and in shadow mode the same kernels as a COLS after it
 * in a record [34, bin] (readers skip it; tests/e2e/shim/unrep.c puts it in the GPU_RUN's
 * place). */
static void run_flush(const struct tkp_enc *enc)
{
    if (!run.n) return;
    run_sync();
    msgpack_packer *pk = packer(enc);
    uint8_t h[2 + 5 + 5 + 8], *q = h;
    *q++ = 0x90 | 6; /* fixarray */
    *q++ = TKP_REC_GPU_RUN;
    q = mp_uint(q, run.n);
    /* each column a bin, its header as bytes (msgpack's); the next header goes after a
     * column's bytes when there is room, as there nearly always is: five appends, not eight */
    q = mp_bin(q, run.c[0].n);
    msgpack_pack_bin_body(pk, h, (size_t)(q - h));
    for (uint32_t k = 0; k < 4; k++) {
        struct tkp_col *c = &run.c[k];
        uint32_t n = c->n;
        if (k < 3 && c->cap - n >= 5 + 8) { /* mp_be stores 8 bytes past the tag */
            n = (uint32_t)(mp_bin(c->p + n, run.c[k + 1].n) - c->p);
            msgpack_pack_bin_body(pk, c->p, n);
        } else {
            msgpack_pack_bin_body(pk, c->p, n);
            if (k < 3) {
                q = mp_bin(h, run.c[k + 1].n);
                msgpack_pack_bin_body(pk, h, (size_t)(q - h));
            }
        }
        c->n = 0;
    }
    run.n = run.room = 0;
    run.end = run.corr = run.step = run.index = 0;
    if (shadow.n) {
        msgpack_sbuffer sb;
        msgpack_packer spk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&spk, &sb, msgpack_sbuffer_write);
        cols_pack(&spk, &shadow);
        msgpack_pack_array(pk, 2);
        msgpack_pack_int(pk, 34); /* TKP_REC_REP_SHADOW */
        msgpack_pack_bin(pk, sb.size);
        msgpack_pack_bin_body(pk, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    }
}

/* Room in the GPU_RUN's columns for ROOM_RECS more kernels (ending it at its size limit) and no
 * COLS open; 0 when memory ran out. */
static int __attribute__((noinline)) run_open(const struct tkp_enc *enc)
{
    if (run.n == TKP_GPU_RUN_MAX) run_flush(enc);
    if (run.n) run_sync();
    for (uint32_t k = 0; k < 4; k++)
        if (tkp_col_reserve(&run.c[k], ROOM_RECS * (k == 3 ? 30 : 10))) return 0;
    for (uint32_t k = 0; k < 3; k++) /* reserving may have moved the bytes */
        run.w[k] = run.c[k].p + run.c[k].n;
    run.room = TKP_GPU_RUN_MAX - run.n < ROOM_RECS ? TKP_GPU_RUN_MAX - run.n : ROOM_RECS;
    if (cols.n) cols_flush(enc);
    return 1;
}

static void __attribute__((noinline)) run_joins(uint64_t dc, uint64_t ds, uint64_t di)
{
    struct tkp_col *c = &run.c[3];
    uint8_t *w = c->p + c->n;
    w = tkp_varint_at(w, tkp_zigzag((int64_t)dc));
    w = tkp_varint_at(w, tkp_zigzag((int64_t)ds));
    w = tkp_varint_at(w, tkp_zigzag((int64_t)di));
    c->n = (uint32_t)(w - c->p);
}

/* Adds a kernel of template id to the open GPU_RUN; 0 when memory ran out. run.room is 0 while
 * the run is empty (run_flush), and so whenever a COLS is open (cols_add flushes the run): one
 * test for room, the GPU_RUN's size limit and the COLS. The bytes are stored last: a byte store
 * may alias anything, and the compiler would load the run's fields again after each. */
static inline __attribute__((always_inline)) int run_add(const struct tkp_enc *enc, uint32_t id, uint64_t start, uint64_t end,
                          uint64_t corr, uint64_t step, uint64_t index)
{
    if (TKP_UNLIKELY(!run.room) && !run_open(enc)) return 0;
    uint64_t dc = corr - run.corr, di = index - run.index, ds = step - run.step;
    uint64_t gap = tkp_zigzag((int64_t)(start - run.end)), dur = end - start;
    uint32_t mode = TKP_GMODE_JOINS;
    if (TKP_LIKELY(ds == 0)) {
        if (dc == 1) mode = di == 1 ? TKP_GMODE_NEXT : di == 0 ? TKP_GMODE_CORR : mode;
        else if (dc == 0 && di == 0) mode = TKP_GMODE_SAME;
    }
    run.end = end;
    run.corr = corr;
    run.step = step;
    run.index = index;
    run.n++;
    run.room--;
    if (TKP_UNLIKELY(mode == TKP_GMODE_JOINS)) run_joins(dc, ds, di);
    uint8_t *w0 = run.w[0], *w1 = run.w[1], *w2 = run.w[2];
    uint64_t t = (uint64_t)id << 2 | mode;
    if (TKP_LIKELY(t < 0x80)) *w0++ = (uint8_t)t;
    else w0 = tkp_varint_at(w0, t); /* ids < 4096: at most two bytes */
    run.w[0] = w0;
    run.w[1] = tkp_varint_at(w1, gap);
    run.w[2] = tkp_varint_at(w2, dur);
    return 1;
}

/* A graph kernel's graph and node ids ({UINT32_MAX, UINT64_MAX}: none known); graph UINT64_MAX
 * when they are ids that would read as -1. Returned in two registers. */
struct gnode_ids {
    uint64_t graph, node;
};
/* The last ids of CUPTI node ids (direct-mapped): valid for stamps from `from` on while the
 * versions are those of gen (activity.c's lookup takes a lock and a map probe). `from` guards a
 * record of an older version that completes after the newer one's (another stream); gen an
 * update after the entry was made (e2e_shim_graph_update's "between" run fails without it).
 * Entries of ids that read as -1 are not kept. */
#define NODE_CACHE 1024
static struct node_cached {
    uint64_t cupti, gen, from, node;
    uint32_t graph;
} node_cache[NODE_CACHE];
static uint64_t node_gen; /* tkp_cupti_node_gen() as of this tkp_gpuenc_encode() call */

static struct gnode_ids __attribute__((noinline)) node_lookup(uint64_t gnode, uint64_t stamp,
                                                              struct node_cached *e)
{
    uint32_t g;
    uint64_t n, from;
    if (!tkp_cupti_node_lookup(gnode, stamp, &g, &n, &from))
        return (struct gnode_ids){UINT32_MAX, UINT64_MAX};
    if (g == UINT32_MAX || n == UINT64_MAX) return (struct gnode_ids){UINT64_MAX, 0};
    if (from != UINT64_MAX) *e = (struct node_cached){gnode, node_gen, from, n, g};
    return (struct gnode_ids){g, n};
}

static inline __attribute__((always_inline)) struct gnode_ids node_ids(uint64_t gnode,
                                                                       const struct corr *c)
{
    uint64_t stamp = c ? c->stamp : UINT64_MAX;
    struct node_cached *e = &node_cache[(gnode ^ gnode >> 10) & (NODE_CACHE - 1)];
    if (TKP_LIKELY(e->cupti == gnode && e->gen == node_gen && stamp >= e->from))
        return (struct gnode_ids){e->graph, e->node};
    return node_lookup(gnode, stamp, e);
}

/* A kernel: by its template into the GPU_RUN; 0 when it has none (table full, no memory), then
 * the caller writes it as COLS. */
static inline __attribute__((always_inline)) int
kernel_tmpl(const struct tkp_enc *enc, const uint8_t *p, uint64_t start, uint64_t end,
            uint32_t corr, uint64_t gnode, int shadowed, int tables)
{
    uint64_t step, index;
    uint32_t thread, join;
    const struct corr *c = tables || corrs ? corr_at(corr) : NULL; /* tables: corrs is */
    if (TKP_LIKELY(c)) {
        thread = c->thread;
        step = c->step;
        join = c->join_idx >> 28;
        index = c->join_idx & 0x0fffffffu;
    } else {
        thread = TKP_GPU_THREAD_NONE;
        step = index = 0;
        join = TKP_JOIN_NONE;
    }
    uint64_t g = UINT32_MAX, n = UINT64_MAX;
    if (TKP_UNLIKELY(gnode)) {
        struct gnode_ids ids = node_ids(gnode, c);
        if (ids.graph == UINT64_MAX) return 0; /* ids that read as -1: COLS */
        g = ids.graph, n = ids.node;
    }
    uint32_t bz;
    memcpy(&bz, p + 72, 4);
    uint64_t bj = bz | (uint64_t)join << 32, tg = thread | g << 32;
    /* a graph's kernels share their launch's ordinal: theirs is predicted by node */
    uint16_t *by = &gt_byidx[((TKP_UNLIKELY(gnode) ? n ^ GT_BYIDX / 2 : index) ^ thread << 7) &
                             (GT_BYIDX - 1)];
    uint32_t id1 = *by, id;
    /* the record's words are read where the compare needs them, not kept (registers are few) */
#define REC_WORD(off) (*(const uint64_t *)__builtin_assume_aligned(p + (off), 8))
    const struct gt_key *t = &(gt.def - 1)[id1].k; /* id1 0: the sentinel */
    uint64_t diff = (t->name ^ REC_WORD(104)) | (t->sd[0] ^ REC_WORD(48)) |
                    (t->sd[1] ^ REC_WORD(56)) | (t->sd[2] ^ REC_WORD(64)) | (t->bz_join ^ bj) |
                    (t->th_graph ^ tg);
    /* graph none (in tg) means node none in every template: the node is compared for graphs */
    if (TKP_UNLIKELY(gnode)) diff |= t->node ^ n;
    if (diff == 0) {
        id = id1 - 1;
        gt_last = (uint16_t)id1;
    } else {
        struct gt_key k = {REC_WORD(104), {REC_WORD(48), REC_WORD(56), REC_WORD(64)}, bj, tg, n};
        int64_t r = gt_find(&k, by, &gt_last);
        if (TKP_UNLIKELY(r < 0)) return 0;
        id = (uint32_t)r;
    }
#undef REC_WORD
    /* defined before the GPU_RUN that uses it, which is packed later */
    if (TKP_UNLIKELY(gt.def[id].seq1 != chunk_seq1)) gt_define(enc, id);
    if (!run_add(enc, id, start, end, corr, step, index)) return 0;
    if (!c) counts.unjoined++;
    if (shadowed) { /* the same kernel as the COLS of before */
        const char *s;
        memcpy(&s, p + 104, sizeof s);
        uint64_t v[COLS_FIELDS];
        v[0] = start, v[1] = end;
        v[2] = enc->name(enc->ctx, s ? s : "?");
        memcpy(&v[3], p + 48, 4);
        v[3] = (uint32_t)v[3], v[4] = corr;
        join_fields(v + 5, corr, gnode);
        counts.unjoined -= !c; /* join_fields counted it */
        for (int i = 0; i < 6; i++) {
            int32_t d;
            memcpy(&d, p + 52 + 4 * i, 4);
            v[11 + i] = (uint32_t)d;
        }
        colset_add(&shadow, TKP_REC_GPU_KERNEL, v, 17);
    }
    return 1;
}

/* A kernel (out of templates) or a copy as a COLS record. */
static void __attribute__((noinline))
encode_cols(const struct tkp_enc *enc, const CUpti_Activity *a, uint64_t start, uint64_t end,
            uint32_t corr, uint64_t gnode)
{
    const uint8_t *p = (const uint8_t *)a;
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

/* Any record the kernel path does not take: copies, bad times, the window filter, COLS. */
static void __attribute__((noinline)) encode_other(const struct tkp_enc *enc,
                                                   const CUpti_Activity *a)
{
    const uint8_t *p = (const uint8_t *)a;
    uint64_t start, end;
    uint32_t corr;
    uint64_t gnode;
    int kernel = a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
                 a->kind == CUPTI_ACTIVITY_KIND_KERNEL;
    if (kernel) {
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
    if (kernel && (test_mode == TEST_ON || test_mode == TEST_SHADOW) && gt_ready() &&
        kernel_tmpl(enc, p, start, end, corr, gnode, test_mode == TEST_SHADOW, 0))
        return;
    encode_cols(enc, a, start, end, corr, gnode);
}

/* A record when there is no window filter, templates are on, without shadow COLS, with the
 * tables allocated (tkp_gpuenc_encode's fast): a kernel straight to its template. */
static inline __attribute__((always_inline)) void encode_fast(const struct tkp_enc *enc,
                                                              const CUpti_Activity *a, int fast)
{
    const uint8_t *p = (const uint8_t *)a;
    if (TKP_LIKELY(fast && (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
                            a->kind == CUPTI_ACTIVITY_KIND_KERNEL))) {
        uint64_t start, end, gnode;
        uint32_t corr;
        memcpy(&start, p + 16, 8);
        memcpy(&end, p + 24, 8);
        memcpy(&corr, p + 92, 4);
        memcpy(&gnode, p + 144, 8);
        if (TKP_LIKELY(start && end >= start)) {
            counts.records++;
            if (TKP_LIKELY(kernel_tmpl(enc, p, start, end, corr, gnode, 0, 1))) return;
            encode_cols(enc, a, start, end, corr, gnode);
            return;
        }
    }
    encode_other(enc, a);
}

static void emit_info(const struct tkp_enc *enc, const struct tkp_cupti_status *st, int final)
{
    uint64_t dropped = st->dropped;
    uint64_t sig = counts.records * 31 + dropped * 17 + counts.bad_time * 13 + counts.unjoined * 7 +
                   counts.filtered;
    if (counts.info_sent && sig == counts.info_sig && !final) return;
    counts.info_sent = 1;
    counts.info_sig = sig;
    msgpack_packer *pk = packer(enc);
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

/* The records of b's first buffer after b->rec, until lim are done (1) or the buffer's end (0);
 * fast is a constant in each of the two copies (the test leaves the loop). */
static inline __attribute__((always_inline)) int walk(const struct tkp_enc *enc,
                                                      struct tkp_gpu_batch *b,
                                                      tkp_cupti_next_fn next, uint8_t *data,
                                                      size_t valid, int fast, uint32_t *done,
                                                      uint32_t lim)
{
    uint32_t left = lim - *done; /* > 0 */
    while (next(data, valid, &b->rec) == CUPTI_SUCCESS) {
        encode_fast(enc, b->rec, fast);
        if (TKP_UNLIKELY(!--left)) {
            *done = lim;
            return 1;
        }
    }
    *done = lim - left;
    return 0;
}

int tkp_gpuenc_encode(struct tkp_gpu_batch *b, int final, uint32_t max,
                      const struct tkp_enc *enc)
{
    filters = tkp_cupti_filters();
    chunk_seq1 = enc->chunk(enc->ctx) + 1;
    pk_now = NULL;
    node_gen = tkp_cupti_node_gen(); /* after tkp_gpuenc_take (tkp_cupti_take) */
    test_mode = enc->test;
    uint32_t done = 0, lim = final ? UINT32_MAX : max;
    if (!corrs) corrs = calloc(CORR_SLOTS, sizeof *corrs);
    int fast = !filters && test_mode == TEST_ON && corrs && gt_ready();
    while (b->head) {
        uint8_t *data;
        size_t valid;
        tkp_cupti_next_fn next = tkp_cupti_records(b->head, &data, &valid);
        if (next && (fast ? walk(enc, b, next, data, valid, 1, &done, lim)
                          : walk(enc, b, next, data, valid, 0, &done, lim))) {
            run_flush(enc); /* the writer packs host records next */
            cols_flush(enc);
            return 1;
        }
        b->head = tkp_cupti_release(b->head);
        b->rec = NULL;
    }
    run_flush(enc); /* before any other record, and within this chunk */
    cols_flush(enc);
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
    cols.n = cols.aside = 0; /* a COLS the parent's writer was filling */
    cols.room = 0;
    batch.head = NULL; /* the parent's buffers (not freed: CUPTI's memory state is the parent's) */
    batch.rec = NULL;
    for (int k = 0; k < COLS_FIELDS; k++)
        cols.c[k].n = shadow.c[k].n = 0;
    shadow.n = shadow.room = 0;
    run.n = run.room = 0; /* and a GPU_RUN */
    run.end = run.corr = run.step = run.index = 0;
    for (int k = 0; k < 4; k++)
        run.c[k].n = 0;
    for (uint32_t i = 0; i < gt.n; i++) /* the child numbers its chunks from 0 again */
        gt.def[i].seq1 = 0;
    counts.info_sent = 0;
}
