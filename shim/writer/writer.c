/* The writer: one background thread that drains the rings, encodes msgpack, compresses each
 * chunk as one zstd frame and appends it to the capture file.
 *
 * Chunks are self-contained (docs/FORMAT.md): every name, thread and graph topology a chunk uses
 * is defined in it, so a capture cut anywhere decodes up to its last whole chunk. A launch or
 * library call whose configuration was seen before is written as a template id (TMPL, LIB_TMPL
 * once per chunk) plus what changes: its time, step and call. The thread
 * drains often (so rings rarely fill) and writes a chunk at least every TOKPROF_FLUSH_MS, which
 * bounds what os._exit or SIGKILL can lose. It runs with every signal blocked, and never calls
 * into CUDA except cuFuncGetName-style name queries and device queries for the metadata. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <msgpack.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/state.h"
#include "gpu/gpuenc.h"
#include "gpu/graph.h"
#include "record/col.h"
#include "record/libcall.h"
#include "record/ring.h"
#include "record/stacks.h"
#include "record/symtab.h"
#include "sink/sink.h"
#include "tokprof/format.h"
#include "writer/fixed.h"
#include "writer/meta.h"
#include "writer/rep.h"
#include "writer/tables.h"
#include "writer/writer.h"

#define CHUNK_SOFT_MAX (4u << 20) /* raw bytes that force a chunk before the flush period */
#define POLL_MS_MAX 20
#define GPU_SLICE 2048u /* GPU records encoded between two drains of the rings */

enum { RUN_KIND, RUN_DT, RUN_TMPL, RUN_CALL, RUN_HOST, RUN_COLS };

static struct {
    int fd;
    pthread_t thread;
    int running;
    _Atomic int stop;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    ZSTD_CCtx *cctx;
    void *zbuf;
    size_t zcap;
    uint32_t seq;
    int chunk_open;
    uint64_t chunk_events; /* ring events encoded into the open chunk */
    uint64_t prev_ns;
    uint64_t last_flush_ns;
    int meta_written;
    const struct tkp_sink *sink; /* where chunks go (sink/sink.h) */
    struct tkp_names names;
    /* threads and graphs defined in the current chunk */
    struct tkp_gen threads, graphs;
    /* launch and library-call templates (FORMAT.md, "Templates") */
    struct tkp_tmpl launch_tm, lib_tm;
    /* the open RUN (FORMAT.md, "Runs"): launches and library calls of one step as columns */
    struct tkp_col run[RUN_COLS]; /* kinds, dts, tmpls, calls, host_ns */
    uint32_t run_n, run_step; /* records; their step */
    uint32_t run_call0, run_call; /* the base of the calls column (set: run_based), the last call */
    int run_based;
    /* The chunk's last RUN (prev_n records, 0: none yet), which a RUN with the same kinds and
     * template ids repeats (FORMAT.md, "Runs", version 4): its kinds and tmpls columns and its
     * values; the open run's values (dt by record, host_ns by library call) */
    struct tkp_col prev_kind, prev_tmpl, rep_dt, rep_host;
    uint32_t prev_n, run_libs;
    struct tkp_run_v { int64_t dt; uint64_t host; } *run_v, *prev_v;
    uint32_t run_vcap, prev_vcap;
    /* the first records of the open run, which a short run's LAUNCH_T / LIB_CALL_T come from */
    struct { uint32_t tmpl, call; uint8_t lib; } run_first[8];
    int failed;
    uint64_t events, cpu_ns; /* ring events drained by the thread, its CPU time (at its end) */
    char path[PATH_MAX];
} writer = {.fd = -1, .launch_tm = {.nw = 6}, .lib_tm = {.nw = 10}};

static uint64_t start_realtime_ns, start_monotonic_ns;

/* ---- encoding -------------------------------------------------------------------------------- */

static void emit_meta(void)
{
    tkp_meta_pack(&writer.pk, writer.sink, start_realtime_ns, start_monotonic_ns);
    writer.meta_written = 1;
}

static void chunk_begin(void)
{
    if (writer.chunk_open) return;
    writer.chunk_open = 1;
    writer.prev_n = 0; /* a RUN repeats one of its own chunk */
    tkp_wrep_chunk();  /* and a REP records of it */
    writer.prev_ns = tkp_now_ns();
    int first; /* writer.seq counts chunks over the process; a file counts its own (the sink) */
    uint32_t seq = writer.sink->chunk_begin(writer.seq, &first);
    msgpack_pack_array(&writer.pk, 3);
    msgpack_pack_int(&writer.pk, TKP_REC_CHUNK);
    msgpack_pack_uint32(&writer.pk, seq);
    msgpack_pack_uint64(&writer.pk, writer.prev_ns);
    if (first) emit_meta(); /* every file, rotated ones included, starts with its META */
    writer.chunk_events = 0;
}

/* A stamp (clock.c) as the ns a capture holds, and a difference of stamps: rounded down to
 * TOKPROF_TIME_NS (1, exact, unless set: docs/OPERATIONS.md "Budgets"). Rounding down keeps
 * a host time at or before the moment it stamps, so never after a GPU time it caused. */
static uint64_t grain(uint64_t ns)
{
    return TKP_UNLIKELY(tkp_cfg.time_ns > 1) ? ns - ns % tkp_cfg.time_ns : ns;
}

static uint64_t host_ns(uint64_t stamp)
{
    return grain(tkp_stamp_ns(stamp));
}

static uint64_t dur_ns(uint64_t ticks)
{
    return grain(tkp_stamp_dur_ns(ticks));
}

/* A record's stamp, as ns delta-encoded against the previous record. */
static int64_t next_dt(uint64_t stamp)
{
    uint64_t ts = host_ns(stamp);
    int64_t dt = (int64_t)(ts - writer.prev_ns);
    writer.prev_ns = ts;
    return dt;
}

/* ---- groups (writer/rep.h; FORMAT.md "Repeats") ----
 * Every record of a groupable type is packed through gpk() and then gadded(): it goes into the
 * group, which becomes a REP when it repeats the records of the step before. */
static msgpack_packer *gpk(void)
{
    return tkp_wrep_on() ? tkp_wrep_packer() : &writer.pk;
}

static void gadded(void)
{
    if (tkp_wrep_on()) tkp_wrep_added(writer.prev_ns);
}

/* ---- runs (FORMAT.md, "Runs") ----
 * A step's LAUNCH_T and LIB_CALL_T records go into one RUN record as columns: the times alone in
 * one column, the template ids (which repeat step after step) in another, so that zstd finds long
 * matches and the reader walks arrays instead of msgpack. Every other record ends the open run
 * first (run_flush), so the payload keeps the order of the timed records and their dt chain;
 * definitions (TMPL, NAME, THREAD, STACK) may come between, before the RUN that uses them. */

static void pack_col(msgpack_packer *pk, struct tkp_col *c)
{
    msgpack_pack_bin(pk, c->n);
    msgpack_pack_bin_body(pk, c->p, c->n);
    c->n = 0;
}

/* A decode loop's step repeats the previous step's launches: its RUN then has the same kinds and
 * template ids as the chunk's last RUN and is written as repeating it (kinds and tmpls nil), its
 * dts and host_ns as differences against that RUN's (the same layer's launch gap, step after
 * step: a few hundred ns of jitter instead of the gap itself). */
/* Shorter RUNs are written whole: on minillm --graphs a step's three launches around its graph
 * launch repeat, but their gaps follow the graph and the sync before them, not the last step's,
 * and differences made that capture 3 % larger (docs/BENCH.md, "Capture size"). */
#define RUN_REPEAT_MIN 8u

static void run_to_group(void);

static void run_flush(void)
{
    uint32_t n = writer.run_n, libs = writer.run_libs;
    if (!n) return;
    if (n < RUN_REPEAT_MIN && tkp_wrep_on()) { /* a short run: its records join the group */
        run_to_group();
        return;
    }
    tkp_wrep_flush(); /* its records came before the run's */
    struct tkp_col *c = writer.run;
    int rep = writer.prev_n == n && n >= RUN_REPEAT_MIN && c[RUN_KIND].n == writer.prev_kind.n &&
              c[RUN_TMPL].n == writer.prev_tmpl.n &&
              !memcmp(c[RUN_KIND].p, writer.prev_kind.p, n) &&
              !memcmp(c[RUN_TMPL].p, writer.prev_tmpl.p, c[RUN_TMPL].n) &&
              !tkp_col_reserve(&writer.rep_dt, n * 10) && !tkp_col_reserve(&writer.rep_host, libs * 10);
    msgpack_packer *pk = &writer.pk;
    msgpack_pack_array(pk, 9);
    msgpack_pack_int(pk, TKP_REC_RUN);
    msgpack_pack_uint32(pk, writer.run_step);
    msgpack_pack_uint32(pk, n);
    msgpack_pack_uint32(pk, writer.run_call0);
    if (rep) {
        const struct tkp_run_v *v = writer.run_v, *p = writer.prev_v;
        for (uint32_t i = 0; i < n; i++)
            tkp_col_put(&writer.rep_dt, tkp_zigzag((int64_t)((uint64_t)v[i].dt - (uint64_t)p[i].dt)));
        for (uint32_t j = 0; j < libs; j++)
            tkp_col_put(&writer.rep_host, tkp_zigzag((int64_t)(v[j].host - p[j].host)));
        msgpack_pack_nil(pk);
        pack_col(pk, &writer.rep_dt);
        msgpack_pack_nil(pk);
        pack_col(pk, &c[RUN_CALL]);
        pack_col(pk, &writer.rep_host);
        c[RUN_KIND].n = c[RUN_TMPL].n = c[RUN_DT].n = c[RUN_HOST].n = 0;
    } else { /* kinds and tmpls become the ones a next RUN may repeat */
        uint32_t kn = c[RUN_KIND].n, tn = c[RUN_TMPL].n;
        tkp_cols_pack(pk, c, RUN_COLS); /* empties them; the bytes stay */
        struct tkp_col t = writer.prev_kind;
        writer.prev_kind = c[RUN_KIND], c[RUN_KIND] = t;
        t = writer.prev_tmpl;
        writer.prev_tmpl = c[RUN_TMPL], c[RUN_TMPL] = t;
        writer.prev_kind.n = kn, writer.prev_tmpl.n = tn;
        c[RUN_KIND].n = c[RUN_TMPL].n = 0;
    }
    struct tkp_run_v *v = writer.prev_v; /* its values, the ones the next RUN differs from */
    uint32_t cap = writer.prev_vcap;
    writer.prev_v = writer.run_v, writer.prev_vcap = writer.run_vcap;
    writer.run_v = v, writer.run_vcap = cap;
    writer.prev_n = n;
    writer.run_n = 0;
}

/* A short run as LAUNCH_T and LIB_CALL_T records in the group (the columns are dropped): on
 * minillm --graphs a step's three launches around its graph launch, which repeat with it. */
static void run_to_group(void)
{
    uint32_t n = writer.run_n;
    int64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) sum += writer.run_v[i].dt;
    uint64_t end = writer.prev_ns; /* the run's last record's host time */
    writer.prev_ns = end - (uint64_t)sum;
    uint32_t lib = 0;
    for (uint32_t i = 0; i < n; i++) {
        msgpack_packer *pk = gpk();
        int64_t dt = writer.run_v[i].dt;
        writer.prev_ns += (uint64_t)dt;
        uint32_t c = writer.run_first[i].call;
        if (writer.run_first[i].lib) { /* [LIB_CALL_T, dt, step, call, tmpl, host_ns] */
            msgpack_pack_array(pk, 6);
            msgpack_pack_int(pk, TKP_REC_LIB_CALL_T);
            msgpack_pack_int64(pk, dt);
            msgpack_pack_uint32(pk, writer.run_step);
            msgpack_pack_uint32(pk, c);
            msgpack_pack_uint32(pk, writer.run_first[i].tmpl);
            msgpack_pack_uint64(pk, writer.run_v[lib++].host);
        } else { /* [LAUNCH_T, dt, step, tmpl] [, call] */
            msgpack_pack_array(pk, c ? 5 : 4);
            msgpack_pack_int(pk, TKP_REC_LAUNCH_T);
            msgpack_pack_int64(pk, dt);
            msgpack_pack_uint32(pk, writer.run_step);
            msgpack_pack_uint32(pk, writer.run_first[i].tmpl);
            if (c) msgpack_pack_uint32(pk, c);
        }
        gadded();
    }
    for (int k = 0; k < RUN_COLS; k++) writer.run[k].n = 0;
    writer.run_n = 0; /* the chunk's previous RUN stays the one a next RUN may repeat */
}

/* Every record before the one to be packed now is in the chunk: the open run, then the group. */
static void pending_flush(void)
{
    run_flush();
    tkp_wrep_flush();
}

/* Room for one more record in every column; 0 when memory ran out (the caller writes the
 * record on its own, as LAUNCH_T / LIB_CALL_T). */
static int run_room(uint32_t step)
{
    if (writer.run_n && (step != writer.run_step || writer.run_n == TKP_RUN_MAX)) run_flush();
    if (tkp_cols_room(writer.run, RUN_COLS)) {
        run_flush();
        return 0;
    }
    if (writer.run_n >= writer.run_vcap &&
        tkp_grow((void **)&writer.run_v, &writer.run_vcap, writer.run_n, sizeof *writer.run_v, 256)) {
        run_flush();
        return 0;
    }
    if (!writer.run_n) {
        writer.run_libs = 0;
        writer.run_step = step;
        writer.run_call0 = writer.run_call = 0;
        writer.run_based = 0;
    }
    return 1;
}

/* Adds a launch (lib 0: call 0 outside any library call) or a library call (lib 1, host_ns its
 * time inside) of template tmpl to the open run. */
static void run_add(int lib, uint64_t stamp, uint32_t tmpl, uint32_t call, uint64_t host_ns)
{
    int64_t dt = next_dt(stamp);
    if (writer.run_n < 8)
        writer.run_first[writer.run_n].tmpl = tmpl, writer.run_first[writer.run_n].call = call,
        writer.run_first[writer.run_n].lib = (uint8_t)lib;
    writer.run[RUN_KIND].p[writer.run[RUN_KIND].n++] = (uint8_t)lib;
    tkp_col_put(&writer.run[RUN_DT], tkp_zigzag(dt));
    writer.run_v[writer.run_n].dt = dt;
    tkp_col_put(&writer.run[RUN_TMPL], tmpl);
    if (call && !writer.run_based) { /* the first call id of the run: the column counts from it */
        writer.run_call0 = writer.run_call = call - 1;
        writer.run_based = 1;
    }
    uint64_t d = tkp_zigzag((int64_t)call - ((int64_t)writer.run_call + 1));
    if (lib) {
        tkp_col_put(&writer.run[RUN_CALL], d);
        tkp_col_put(&writer.run[RUN_HOST], host_ns);
        writer.run_v[writer.run_libs++].host = host_ns;
        writer.run_call = call;
    } else {
        tkp_col_put(&writer.run[RUN_CALL], call ? d + 1 : 0);
    }
    writer.run_n++;
}

/* The id of a string, defined in the current chunk before it is returned. */
static uint32_t name_id(const char *s)
{
    return tkp_names_id(&writer.names, &writer.pk, writer.seq, s);
}

static uint32_t key_name_id(uint64_t key, int kind)
{
    return tkp_names_key(&writer.names, &writer.pk, writer.seq, key, kind, tkp_sym_name);
}

static void define_thread(uint32_t idx, int os_tid)
{
    if (tkp_gen_mark(&writer.threads, idx, writer.seq) <= 0) return;
    msgpack_pack_array(&writer.pk, 3);
    msgpack_pack_int(&writer.pk, TKP_REC_THREAD);
    msgpack_pack_uint32(&writer.pk, idx);
    msgpack_pack_int(&writer.pk, os_tid);
}

static void emit_graph(void *ctx, const struct tkp_graph *g)
{
    (void)ctx;
    if (tkp_gen_mark(&writer.graphs, g->id, writer.seq) <= 0) return;
    uint32_t *ids = calloc(g->n ? g->n : 1, sizeof *ids);
    if (!ids) return;
    for (uint32_t i = 0; i < g->n; i++)
        ids[i] = g->nodes[i].type == TKP_NODE_KERNEL
                     ? key_name_id(g->nodes[i].key, g->nodes[i].key_kind)
                     : name_id(g->nodes[i].type == TKP_NODE_MEMCPY   ? "memcpy"
                               : g->nodes[i].type == TKP_NODE_MEMSET ? "memset"
                                                                     : "node");
    msgpack_pack_array(&writer.pk, 3);
    msgpack_pack_int(&writer.pk, TKP_REC_GRAPH);
    msgpack_pack_uint32(&writer.pk, g->id);
    msgpack_pack_array(&writer.pk, g->n);
    for (uint32_t i = 0; i < g->n; i++) {
        const struct tkp_gnode *n = &g->nodes[i];
        msgpack_pack_array(&writer.pk, 10);
        msgpack_pack_uint64(&writer.pk, g->node_base + i);
        msgpack_pack_int(&writer.pk, n->type);
        msgpack_pack_uint32(&writer.pk, ids[i]);
        for (int k = 0; k < 3; k++) msgpack_pack_uint32(&writer.pk, n->grid[k]);
        for (int k = 0; k < 3; k++) msgpack_pack_uint32(&writer.pk, n->block[k]);
        msgpack_pack_array(&writer.pk, n->ndeps);
        for (uint32_t d = 0; d < n->ndeps; d++)
            msgpack_pack_uint64(&writer.pk, g->node_base + n->deps[d]);
    }
    free(ids);
}

struct gl_ctx { uint32_t id; };
static void emit_graph_and_id(void *ctx, const struct tkp_graph *g)
{
    ((struct gl_ctx *)ctx)->id = g->id;
    emit_graph(NULL, g);
}

/* LIB_CALL (ring layout in lib.h): unknown types are 0xff / 0xf in the ring, -1 in the file.
 * What repeats from step to step (the shape, types, operands, stream) goes in a LIB_TMPL record
 * once per chunk; each call is then a LIB_CALL_T of its time, step, call id and template.
 * A library call's fields (records.def's LIB_CALL) from its ring event (ring_types.h). */
static struct tkp_fixed_LIB_CALL lib_fields(const struct tkp_ev *e, uint32_t op)
{
    int32_t ty[6];
    for (int i = 0; i < 4; i++) { /* atype, btype, ctype, compute */
        unsigned t = (e->u[5] >> (8 * i)) & 0xff;
        ty[i] = t == TKP_LIB_UNKNOWN8 ? -1 : (int32_t)t;
    }
    for (int i = 0; i < 2; i++) { /* transa, transb */
        unsigned t = (e->u[6] >> (4 * i)) & 0xf;
        ty[4 + i] = t == TKP_LIB_UNKNOWN4 ? -1 : (int32_t)t;
    }
    return (struct tkp_fixed_LIB_CALL){.call = e->u[4],
                                       .lib = e->sub,
                                       .op_id = op,
                                       .m = e->u[0],
                                       .n = e->u[1],
                                       .k = e->u[2],
                                       .batch = e->u[3],
                                       .atype = ty[0],
                                       .btype = ty[1],
                                       .ctype = ty[2],
                                       .compute = ty[3],
                                       .transa = ty[4],
                                       .transb = ty[5],
                                       .stream = e->a,
                                       .a_ptr = e->b,
                                       .call_ns = dur_ns(e->u[7]),
                                       .status = e->u[6] >> 16,
                                       .flags = (e->u[6] >> 8) & 0xff};
}

/* A LIB_TMPL's fields: a LIB_CALL's from lib to a_ptr, then status and flags. */
static void pack_lib_tmpl(const struct tkp_fixed_LIB_CALL *v)
{
    msgpack_packer *pk = &writer.pk;
    msgpack_pack_uint32(pk, v->lib);
    msgpack_pack_uint64(pk, v->op_id);
    msgpack_pack_uint64(pk, v->m);
    msgpack_pack_uint64(pk, v->n);
    msgpack_pack_uint64(pk, v->k);
    msgpack_pack_uint64(pk, v->batch);
    msgpack_pack_int32(pk, v->atype);
    msgpack_pack_int32(pk, v->btype);
    msgpack_pack_int32(pk, v->ctype);
    msgpack_pack_int32(pk, v->compute);
    msgpack_pack_int32(pk, v->transa);
    msgpack_pack_int32(pk, v->transb);
    msgpack_pack_uint64(pk, v->stream);
    msgpack_pack_uint64(pk, v->a_ptr);
    msgpack_pack_uint32(pk, v->status);
    msgpack_pack_uint32(pk, v->flags);
}

static void encode_lib_call(const struct tkp_ev *e, uint32_t thread)
{
    msgpack_packer *pk = &writer.pk;
    uint32_t op = name_id(tkp_lib_op_name(e->flags));
    uint64_t key[10] = {thread | (uint64_t)op << 32, e->u[0], e->u[1], e->u[2], e->u[3],
                        e->u[5], e->u[6], e->a, e->b, (uint64_t)(uint32_t)e->sub};
    int fresh = 0;
    int64_t t = tkp_tmpl_id(&writer.lib_tm, key, writer.seq, &fresh);
    if (t < 0) { /* no template: the full form */
        pending_flush();
        struct tkp_fixed_head h = {next_dt(e->ts), thread, e->step};
        struct tkp_fixed_LIB_CALL v = lib_fields(e, op);
        tkp_fixed_pack_LIB_CALL(pk, &h, &v);
        return;
    }
    if (fresh) { /* once per chunk: the fields are unpacked only here */
        struct tkp_fixed_LIB_CALL v = lib_fields(e, op);
        msgpack_pack_array(pk, 19);
        msgpack_pack_int(pk, TKP_REC_LIB_TMPL);
        msgpack_pack_uint32(pk, (uint32_t)t);
        msgpack_pack_uint32(pk, thread);
        pack_lib_tmpl(&v);
    }
    if (run_room(e->step)) {
        run_add(1, e->ts, (uint32_t)t, e->u[4], dur_ns(e->u[7]));
        return;
    }
    pk = gpk(); /* LIB_CALL_T is groupable */
    msgpack_pack_array(pk, 6);
    msgpack_pack_int(pk, TKP_REC_LIB_CALL_T);
    msgpack_pack_int64(pk, next_dt(e->ts));
    msgpack_pack_uint32(pk, e->step);
    msgpack_pack_uint32(pk, e->u[4]);
    msgpack_pack_uint32(pk, (uint32_t)t);
    msgpack_pack_uint64(pk, dur_ns(e->u[7]));
    gadded();
}

static void encode_other(const struct tkp_ev *e, uint32_t thread);

/* A launch's fields (records.def's LAUNCH, a TMPL's too) from its ring event (ring_types.h). */
static struct tkp_fixed_LAUNCH launch_fields(const struct tkp_ev *e, uint32_t nm)
{
    const uint32_t *u = e->u;
    return (struct tkp_fixed_LAUNCH){.name_id = nm,
                                     .stream = e->b,
                                     .via = e->sub,
                                     .grid = {u[0], u[1], u[4]},
                                     .block = {u[2], u[3], u[5]},
                                     .smem = u[6]};
}

static void encode(void *ctx, const struct tkp_ev *e, uint32_t thread, int os_tid)
{
    (void)ctx;
    chunk_begin();
    writer.chunk_events++;
    define_thread(thread, os_tid);
    msgpack_packer *pk = &writer.pk;
    switch (e->type) {
    case TKP_REC_LAUNCH: {
        uint32_t nm = key_name_id(e->a, e->flags);
        uint32_t stk = tkp_stacks_encode(pk, writer.seq, thread, e->ts); /* STACK/MODULE first */
        const uint32_t *u = e->u;
        uint64_t key[6] = {thread | (uint64_t)nm << 32, e->b,
                           (uint32_t)e->sub | (uint64_t)u[6] << 32, u[0] | (uint64_t)u[1] << 32,
                           u[2] | (uint64_t)u[3] << 32, u[4] | (uint64_t)u[5] << 32};
        int fresh = 0;
        int64_t t = tkp_tmpl_id(&writer.launch_tm, key, writer.seq, &fresh);
        if (t >= 0) { /* the configuration once per chunk (TMPL), then LAUNCH_T per launch */
            if (fresh) { /* [TMPL, tmpl, thread, a LAUNCH's fields] */
                msgpack_pack_array(pk, 3 + TKP_FIXED_N_LAUNCH);
                msgpack_pack_int(pk, TKP_REC_TMPL);
                msgpack_pack_uint32(pk, (uint32_t)t);
                msgpack_pack_uint32(pk, thread);
                struct tkp_fixed_LAUNCH v = launch_fields(e, nm);
                tkp_fixed_fields_LAUNCH(pk, &v);
            }
            if (!stk && run_room(e->step)) {
                run_add(0, e->ts, (uint32_t)t, e->u[7], 0);
                break;
            }
            run_flush(); /* a launch with a stack is a record of its own, groupable */
            pk = gpk();
            msgpack_pack_array(pk, stk ? 6 : e->u[7] ? 5 : 4);
            msgpack_pack_int(pk, TKP_REC_LAUNCH_T);
            msgpack_pack_int64(pk, next_dt(e->ts));
            msgpack_pack_uint32(pk, e->step);
            msgpack_pack_uint32(pk, (uint32_t)t);
        } else {
            pending_flush();
            /* trailing `call` inside a library call (0 when only `stack` follows), then `stack` */
            struct tkp_fixed_head h = {next_dt(e->ts), thread, e->step};
            struct tkp_fixed_LAUNCH v = launch_fields(e, nm);
            tkp_fixed_pack_more_LAUNCH(pk, &h, &v, stk ? 2 : e->u[7] ? 1 : 0);
        }
        if (e->u[7] || stk) msgpack_pack_uint32(pk, e->u[7]);
        if (stk) msgpack_pack_uint32(pk, stk);
        if (t >= 0) gadded();
        break;
    }
    case TKP_REC_LIB_CALL:
        encode_lib_call(e, thread);
        break;
    case TKP_EV_GPU_CORR: /* not a record: feeds the GPU join (gpu/gpuenc.c) */
        tkp_gpuenc_note(e, thread);
        break;
    case TKP_EV_STACK: /* not a record: the next LAUNCH's stack (stacks.c) */
        tkp_stacks_note(e, thread);
        break;
    default:
        run_flush(); /* every other record ends the open run, keeping the payload's order */
        encode_other(e, thread);
        break;
    }
}

/* The fixed-layout records (writer/fixed.h, from include/tokprof/records.def): where each field
 * comes from in the ring event (record/ring_types.h). 0 when e is not one of them. */
static int encode_fixed(const struct tkp_ev *e, uint32_t thread)
{
    msgpack_packer *pk = gpk(); /* every type here but NVTX is groupable (tokprof/rep.h) */
    struct tkp_fixed_head h = {0, thread, e->step};
    switch (e->type) {
    case TKP_REC_COPY:
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_COPY(pk, &h,
                            &(struct tkp_fixed_COPY){.kind = e->sub, .dir = e->flags & 0xffu,
                                                     .bytes = e->a, .stream = e->b,
                                                     .flags = (uint32_t)e->flags >> 8});
        break;
    case TKP_REC_SYNC:
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_SYNC(pk, &h,
                            &(struct tkp_fixed_SYNC){.kind = e->sub, .handle = e->a,
                                                     .wait_ns = dur_ns(e->b)});
        break;
    case TKP_REC_EVENT_RECORD:
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_EVENT_RECORD(
            pk, &h, &(struct tkp_fixed_EVENT_RECORD){.event = e->a, .stream = e->b});
        break;
    case TKP_REC_STREAM_WAIT:
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_STREAM_WAIT(pk, &h,
                                   &(struct tkp_fixed_STREAM_WAIT){.stream = e->a, .event = e->b});
        break;
    case TKP_REC_STEP: { /* its times are absolute: no dt */
        struct tkp_fixed_STEP v = {.kind = e->sub, .begin_ns = host_ns(e->ts),
                                   .mark_ns = host_ns(e->a), .end_ns = host_ns(e->b),
                                   .closed_by = e->u[0], .launches = e->u[1],
                                   .graph_launches = e->u[2], .copies = e->u[3]};
        if (writer.sink->on_step)
            writer.sink->on_step(e->sub, v.begin_ns, v.end_ns); /* flight: slow? */
        tkp_fixed_pack_STEP(pk, &h, &v);
        break;
    }
    case TKP_REC_NVTX: { /* not groupable: into the chunk after the group */
        uint32_t nm = name_id((const char *)(uintptr_t)e->a); /* its NAME first */
        tkp_wrep_flush();
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_NVTX(&writer.pk, &h,
                            &(struct tkp_fixed_NVTX){.kind = e->sub, .name_id = nm,
                                                     .range_id = e->u[0]});
        return 1;
    }
    case TKP_REC_MARKER:
        h.dt = next_dt(e->ts);
        tkp_fixed_pack_MARKER(pk, &h,
                              &(struct tkp_fixed_MARKER){.kind = e->sub, .value = (int64_t)e->a});
        break;
    default:
        return 0;
    }
    gadded();
    return 1;
}

static void encode_other(const struct tkp_ev *e, uint32_t thread)
{
    if (encode_fixed(e, thread)) return;
    msgpack_packer *pk = &writer.pk;
    switch (e->type) {
    case TKP_REC_GRAPH_LAUNCH: { /* groupable; its GRAPH into the chunk before */
        struct gl_ctx g = {UINT32_MAX};
        tkp_graph_with(e->a, e->ts, emit_graph_and_id, &g);
        pk = gpk();
        msgpack_pack_array(pk, 7);
        msgpack_pack_int(pk, TKP_REC_GRAPH_LAUNCH);
        msgpack_pack_int64(pk, next_dt(e->ts));
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        if (g.id == UINT32_MAX) msgpack_pack_int(pk, -1); /* topology never seen */
        else msgpack_pack_uint32(pk, g.id);
        msgpack_pack_uint64(pk, e->b);
        msgpack_pack_int(pk, e->sub);
        gadded();
        break;
    }
    case TKP_REC_LOSS: /* an exiting thread's final count (tkp_rings_drain) */
        tkp_wrep_flush();
        tkp_fixed_pack_LOSS(pk, &(struct tkp_fixed_head){.thread = thread},
                            &(struct tkp_fixed_LOSS){.dropped = e->a});
        break;
    default:
        break;
    }
}

/* The encoder context handed to the GPU tier (gpu/gpuenc.h), which encodes its records on this
 * thread. */
static msgpack_packer *enc_packer(void *ctx)
{
    (void)ctx;
    chunk_begin();
    pending_flush(); /* GPU records come after the run and the group before them */
    return &writer.pk;
}

/* GPU kernel names are strings CUPTI owns, shared by every record of a kernel: the same few
 * addresses again and again. A string at an address seen before in this chunk is the name it
 * was then (one compare of the address); the first time in a chunk it is compared with that
 * name again (a strcmp, not a hash and a table probe) before name_id() is asked, so an address
 * CUPTI reused for another name is caught at the next chunk at the latest. */
static struct {
    const char *p;
    uint32_t id, seq; /* seq: the chunk (writer.seq + 1) in which p was last checked; 0 none */
} seen[256];

static uint32_t enc_name(void *ctx, const char *s)
{
    (void)ctx;
    chunk_begin();
    uintptr_t h = (uintptr_t)s;
    __typeof__(seen[0]) *c = &seen[((h >> 3) ^ (h >> 11)) & 255]; /* names sit close together */
    if (c->p == s && c->seq == writer.seq + 1) return c->id; /* checked in this chunk */
    const char *known = c->p == s ? tkp_names_str(&writer.names, c->id) : NULL;
    if (known && !strcmp(known, s) && tkp_names_defined(&writer.names, c->id, writer.seq)) {
        c->seq = writer.seq + 1;
        return c->id; /* defined in this chunk already */
    }
    uint32_t id = name_id(s);
    known = tkp_names_str(&writer.names, id);
    if (known && !strcmp(known, s)) c->p = s, c->id = id, c->seq = writer.seq + 1;
    else c->p = NULL;
    return id;
}

static uint32_t enc_chunk(void *ctx)
{
    (void)ctx;
    return writer.seq;
}

static struct tkp_enc gpu_enc = {NULL, enc_packer, enc_name, enc_chunk, 0};

/* ---- metadata, losses, chunks ---------------------------------------------------------------- */

/* The sink's way to a META chunk of its own (sink/sink.h). */
static void *meta_payload(size_t *len)
{
    /* Packs into a buffer of its own: the chunk being encoded stays as it is. */
    msgpack_sbuffer saved = writer.sb;
    int meta_written = writer.meta_written;
    msgpack_sbuffer_init(&writer.sb);
    msgpack_pack_array(&writer.pk, 3);
    msgpack_pack_int(&writer.pk, TKP_REC_CHUNK);
    msgpack_pack_uint32(&writer.pk, 0);
    msgpack_pack_uint64(&writer.pk, tkp_now_ns());
    emit_meta();
    *len = writer.sb.size;
    void *p = msgpack_sbuffer_release(&writer.sb);
    writer.sb = saved;
    writer.meta_written = meta_written;
    return p;
}

/* `stop`: the capture ends with this chunk (free space under the floor): the LOSS of threads
 * without a ring is written even when zero, with a trailing 1 that says so (FORMAT.md, LOSS). */
static void pack_stop_loss(uint64_t count, int stop);
static void fail(const char *what);

/* `extra`: records to count on the LOSS of thread 4294967295 besides those of ringless threads. */
static void emit_losses(int stop, uint64_t extra)
{
    uint32_t n = tkp_rings_count();
    for (uint32_t i = 0; i < n; i++) {
        int tid;
        uint64_t dropped;
        int idx = tkp_ring_info(i, &tid, &dropped);
        if (idx < 0 || !dropped) continue;
        chunk_begin();
        define_thread((uint32_t)idx, tid);
        tkp_fixed_pack_LOSS(&writer.pk, &(struct tkp_fixed_head){.thread = (uint32_t)idx},
                            &(struct tkp_fixed_LOSS){.dropped = dropped});
    }
    uint64_t ringless = atomic_load(&tkp_ringless_drops) + extra;
    if (ringless || stop) {
        chunk_begin();
        pack_stop_loss(ringless, stop);
    }
}

static void pack_stop_loss(uint64_t count, int stop)
{
    tkp_fixed_pack_more_LOSS(&writer.pk, /* threads that got no ring; then `stopped` */
                             &(struct tkp_fixed_head){.thread = UINT32_MAX},
                             &(struct tkp_fixed_LOSS){.dropped = count}, stop ? 1 : 0);
    if (stop) msgpack_pack_uint32(&writer.pk, 1);
}

/* zstd frame of the open chunk into writer.zbuf: its size, 0 after a warning. */
static size_t compress_chunk(void)
{
    size_t raw = writer.sb.size;
    size_t bound = ZSTD_compressBound(raw);
    if (bound > writer.zcap) {
        void *z = realloc(writer.zbuf, bound);
        if (!z) {
            fail("out of memory compressing for");
            return 0;
        }
        writer.zbuf = z;
        writer.zcap = bound;
    }
    ZSTD_CCtx_setPledgedSrcSize(writer.cctx, raw);
    size_t zn = ZSTD_compress2(writer.cctx, writer.zbuf, writer.zcap, writer.sb.data, raw);
    if (ZSTD_isError(zn)) {
        tkp_warn("zstd: %s", ZSTD_getErrorName(zn));
        zn = 0;
    }
    return zn;
}

static void fail(const char *what)
{
    if (writer.failed) return;
    writer.failed = 1;
    tkp_warn("%s %s: %s; capture stopped, the program is unaffected", what, writer.path,
             strerror(errno));
    atomic_store(&tkp_state, -1);
}

static void flush_chunk(void)
{
    uint64_t since = writer.last_flush_ns;
    writer.last_flush_ns = tkp_now_ns();
    if (!writer.chunk_open || writer.failed) return;
    /* Under the free-space floor (the stream sink; flight mode keeps its chunks in memory):
     * recording stops now, what the rings hold is drained into this chunk, the capture's last. */
    int stop = writer.sink->low_space && writer.sink->low_space(writer.sb.size, "capture stopped");
    if (stop) {
        atomic_store(&tkp_state, -1);
        tkp_rings_drain(encode, NULL);
    }
    pending_flush();
    emit_losses(stop, 0);
    size_t raw = writer.sb.size;
    size_t zn = compress_chunk();
    if (writer.failed) return;
    if (stop && zn && writer.sink->fits && !writer.sink->fits(zn)) {
        /* The last chunk (what the rings held at the stop) would itself cross the floor: it is
         * left out, its records counted on the LOSS that says the capture stopped, which is
         * written alone if even that fits (FORMAT.md, LOSS). */
        uint64_t lost = writer.chunk_events;
        msgpack_sbuffer_clear(&writer.sb);
        writer.chunk_open = 0;
        writer.seq++; /* a fresh chunk: THREAD and NAME records are defined again */
        emit_losses(1, lost);
        raw = writer.sb.size;
        zn = compress_chunk();
        if (writer.failed) return;
        if (zn && !writer.sink->fits(zn)) zn = 0; /* not even that: the file just ends */
    }
    /* to the file, or to the flight recorder; a failure was reported and stopped the capture */
    if (zn && writer.sink->put(writer.zbuf, zn, (uint32_t)raw, since, writer.last_flush_ns))
        writer.failed = 1;
    if (stop) writer.failed = 1; /* nothing more is written */
    writer.seq++;
    writer.chunk_open = 0;
    msgpack_sbuffer_clear(&writer.sb);
}

/* Returns the number of events drained. */
static size_t cycle(int force)
{
    if (!writer.meta_written) {
        chunk_begin(); /* META, in stream mode */
        writer.meta_written = 1;
    }
    /* GPU buffers completed before the drain: their launches' join events are in the rings. */
    struct tkp_gpu_batch *gpu = tkp_gpuenc_take();
    tkp_clock_anchor(); /* before the drain: the stamps drained next are converted against it */
    size_t n = tkp_rings_drain(encode, NULL);
    /* The GPU records a slice at a time, the rings drained after each: an application thread
     * that launches fast while the writer encodes a large batch finds its ring emptied every
     * GPU_SLICE records, not once per batch. */
    while (tkp_gpuenc_encode(gpu, force, GPU_SLICE, &gpu_enc))
        n += tkp_rings_drain(encode, NULL);
    uint64_t now = tkp_now_ns();
    if (force || writer.sb.size >= CHUNK_SOFT_MAX ||
        now - writer.last_flush_ns >= (uint64_t)tkp_cfg.flush_ms * 1000000ull)
        flush_chunk();
    if (writer.sink->poll) writer.sink->poll(now); /* flight mode: triggers, snapshots */
    return n;
}

static void *writer_main(void *arg)
{
    (void)arg;
    unsigned poll = tkp_cfg.flush_ms < POLL_MS_MAX ? tkp_cfg.flush_ms : POLL_MS_MAX;
    uint64_t idle = (uint64_t)poll * 1000000ull, busy = 2000000ull;
    /* A drain that found a lot means the rings fill fast: come back sooner. A ring a quarter full
     * wakes the writer before either period ends (tkp_rings_wait), so the periods bound the
     * latency of a trickle, not what a burst can lose. */
    size_t busy_at = ((size_t)tkp_cfg.ring_kb << 10) / sizeof(struct tkp_ev) / 8;
    size_t last = 0;
    tkp_tls.depth = 1; /* nothing this thread does is the program's */
    while (!atomic_load(&writer.stop)) {
        tkp_rings_wait(last >= busy_at ? busy : idle);
        last = cycle(0);
        writer.events += last;
    }
    struct timespec cpu;
    if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu))
        writer.cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    return NULL;
}

int tkp_writer_start(const struct tkp_sink *sink)
{
    writer.sink = sink;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    start_monotonic_ns = tkp_now_ns();
    start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    if (sink->open(meta_payload)) return -1; /* the first file, or the flight recorder */
    snprintf(writer.path, sizeof writer.path, "%s", sink->path());
    msgpack_sbuffer_init(&writer.sb);
    msgpack_packer_init(&writer.pk, &writer.sb, msgpack_sbuffer_write);
    tkp_wrep_init(&writer.pk, tkp_prod.test_rep);
    gpu_enc.test = tkp_prod.test_gpu;
    writer.cctx = ZSTD_createCCtx();
    if (!writer.cctx) return -1;
    ZSTD_CCtx_setParameter(writer.cctx, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(writer.cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(writer.cctx, ZSTD_c_contentSizeFlag, 1);
    writer.last_flush_ns = tkp_now_ns();
    atomic_store(&writer.stop, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&writer.thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        tkp_warn("cannot start the writer thread; capture off");
        return -1;
    }
    writer.running = 1;
    tkp_debug("capturing to %s", writer.path);
    return 0;
}

void tkp_writer_stop(void)
{
    if (!writer.running) return;
    atomic_store(&writer.stop, 1);
    pthread_join(writer.thread, NULL);
    writer.running = 0;
    int d = tkp_tls.depth;
    tkp_tls.depth = 1;
    if (writer.sink->last_chunk) writer.sink->last_chunk();
    writer.events += cycle(1);
    tkp_tls.depth = d;
    /* scripts/bench.sh writer reads this line: the writer's throughput per core */
    tkp_debug("writer: %llu ring events, %llu GPU records, %.3f ms CPU on its thread",
              (unsigned long long)writer.events, (unsigned long long)tkp_gpuenc_records(),
              writer.cpu_ns / 1e6);
    writer.sink->close();
}

void tkp_writer_after_fork(void)
{
    /* The child has no writer thread; the parent's file and buffers are not ours to touch. */
    writer.running = 0;
    writer.events = writer.cpu_ns = 0;
    writer.seq = 0;
    writer.chunk_open = 0;
    writer.meta_written = 0;
    writer.failed = 0;
    if (writer.sb.data) msgpack_sbuffer_clear(&writer.sb);
    writer.run_n = 0; /* the parent's open run was the parent's */
    writer.prev_n = 0;
    for (int c = 0; c < RUN_COLS; c++) writer.run[c].n = 0;
    tkp_wrep_reset();
    tkp_gen_clear(&writer.names.gen);
    memset(seen, 0, sizeof seen); /* names the child's chunks have not defined */
    tkp_gen_clear(&writer.threads);
    tkp_gen_clear(&writer.graphs);
    tkp_gen_clear(&writer.launch_tm.gen);
    tkp_gen_clear(&writer.lib_tm.gen);
    if (writer.cctx) ZSTD_freeCCtx(writer.cctx);
    writer.cctx = NULL;
    if (writer.sb.data) msgpack_sbuffer_destroy(&writer.sb);
    memset(&writer.sb, 0, sizeof writer.sb);
}
