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

#include "col.h"
#include "cupti.h"
#include "graph.h"
#include "flight.h"
#include "lib.h"
#include "output.h"
#include "ring.h"
#include "stacks.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

#define CHUNK_SOFT_MAX (4u << 20) /* raw bytes that force a chunk before the flush period */
#define POLL_MS_MAX 20

struct strmap { /* open addressing, writer-private */
    char **keys;
    uint32_t *vals;
    uint32_t cap, n;
};
struct ptrmap {
    uint64_t *keys;
    uint32_t *vals;
    uint32_t cap, n;
};
struct tmap {
    uint32_t nw;     /* words per key */
    uint64_t *keys;  /* id -> its nw words */
    uint32_t *gen;   /* id -> chunk seq + 1 when defined in that chunk */
    uint32_t n, ids_cap;
    uint32_t *slots; /* open addressing: id + 1, 0 empty */
    uint32_t slot_cap;
};

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
    uint64_t prev_ns;
    uint64_t last_flush_ns;
    int meta_written;
    /* names */
    struct strmap names;   /* string -> id */
    struct ptrmap keyname; /* launch key -> id */
    char **name_str;       /* id -> string */
    uint32_t *name_gen;    /* id -> chunk seq + 1 when defined in that chunk */
    uint32_t nnames, names_cap;
    /* threads and graphs defined in the current chunk */
    uint32_t *thread_gen;
    uint32_t threads_cap;
    uint32_t *graph_gen;
    uint32_t graphs_cap;
    /* launch and library-call templates (FORMAT.md, "Templates") */
    struct tmap launch_tm, lib_tm;
    /* the open RUN (FORMAT.md, "Runs"): launches and library calls of one step as columns */
    struct tkp_col run[RUN_COLS]; /* kinds, dts, tmpls, calls, host_ns */
    uint32_t run_n, run_step; /* records; their step */
    uint32_t run_call0, run_call; /* the base of the calls column (set: run_based), the last call */
    int run_based;
    int failed;
    char path[PATH_MAX];
} W = {.fd = -1, .launch_tm = {.nw = 6}, .lib_tm = {.nw = 10}};

static uint64_t start_realtime_ns, start_monotonic_ns;

/* ---- small maps ------------------------------------------------------------------------------ */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int grow_gen(uint32_t **arr, uint32_t *cap, uint32_t need)
{
    if (need < *cap) return 0;
    uint32_t c = *cap ? *cap : 256;
    while (c <= need) c *= 2;
    uint32_t *p = realloc(*arr, c * sizeof *p);
    if (!p) return -1;
    memset(p + *cap, 0, (c - *cap) * sizeof *p);
    *arr = p;
    *cap = c;
    return 0;
}

static int strmap_get(struct strmap *m, const char *s, uint32_t *out)
{
    if (!m->cap) return 0;
    for (uint64_t i = hash_str(s);; i++) {
        char *k = m->keys[i & (m->cap - 1)];
        if (!k) return 0;
        if (!strcmp(k, s)) {
            *out = m->vals[i & (m->cap - 1)];
            return 1;
        }
    }
}

static int strmap_put(struct strmap *m, char *s, uint32_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 1024;
        char **nk = calloc(nc, sizeof *nk);
        uint32_t *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) return free(nk), free(nv), -1;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                for (uint64_t j = hash_str(m->keys[i]);; j++)
                    if (!nk[j & (nc - 1)]) {
                        nk[j & (nc - 1)] = m->keys[i];
                        nv[j & (nc - 1)] = m->vals[i];
                        break;
                    }
        free(m->keys), free(m->vals);
        m->keys = nk, m->vals = nv, m->cap = nc;
    }
    for (uint64_t i = hash_str(s);; i++)
        if (!m->keys[i & (m->cap - 1)]) {
            m->keys[i & (m->cap - 1)] = s;
            m->vals[i & (m->cap - 1)] = v;
            m->n++;
            return 0;
        }
}

static uint64_t mix(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 17; }

static int ptrmap_get(struct ptrmap *m, uint64_t key, uint32_t *out)
{
    if (!m->cap) return 0;
    for (uint64_t i = mix(key);; i++) {
        uint64_t k = m->keys[i & (m->cap - 1)];
        if (!k) return 0;
        if (k == key) {
            *out = m->vals[i & (m->cap - 1)];
            return 1;
        }
    }
}

static void ptrmap_put(struct ptrmap *m, uint64_t key, uint32_t v)
{
    if (!key) return;
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 1024;
        uint64_t *nk = calloc(nc, sizeof *nk);
        uint32_t *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) return (void)(free(nk), free(nv));
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                for (uint64_t j = mix(m->keys[i]);; j++)
                    if (!nk[j & (nc - 1)]) {
                        nk[j & (nc - 1)] = m->keys[i];
                        nv[j & (nc - 1)] = m->vals[i];
                        break;
                    }
        free(m->keys), free(m->vals);
        m->keys = nk, m->vals = nv, m->cap = nc;
    }
    for (uint64_t i = mix(key);; i++)
        if (!m->keys[i & (m->cap - 1)]) {
            m->keys[i & (m->cap - 1)] = key;
            m->vals[i & (m->cap - 1)] = v;
            m->n++;
            return;
        }
}

/* Templates: a fixed number of 64-bit words -> a dense id below TKP_TMPL_MAX, with the chunk
 * that last defined it. Writer-private, like the maps above. */
static uint64_t hash_words(const uint64_t *w, uint32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

/* The key's id, adding it when new; -1 when the table is full or out of memory (the caller
 * then writes the record in its full form). *fresh is 1 when it must be (re)defined in this
 * chunk, and marks it defined. */
static int64_t tmap_id(struct tmap *m, const uint64_t *key, uint32_t seq, int *fresh)
{
    uint32_t nw = m->nw;
    if (m->slot_cap) {
        for (uint64_t i = hash_words(key, nw);; i++) {
            uint32_t v = m->slots[i & (m->slot_cap - 1)];
            if (!v) break;
            if (!memcmp(m->keys + (size_t)(v - 1) * nw, key, nw * 8)) {
                *fresh = m->gen[v - 1] != seq + 1;
                m->gen[v - 1] = seq + 1;
                return v - 1;
            }
        }
    }
    if (m->n >= TKP_TMPL_MAX) return -1;
    if (m->n == m->ids_cap) {
        uint32_t nc = m->ids_cap ? m->ids_cap * 2 : 256;
        uint64_t *nk = realloc(m->keys, (size_t)nc * nw * sizeof *nk);
        if (!nk) return -1;
        m->keys = nk;
        uint32_t *ng = realloc(m->gen, nc * sizeof *ng);
        if (!ng) return -1;
        m->gen = ng;
        m->ids_cap = nc;
    }
    uint32_t first = m->n; /* the ids to enter in the slots: the new one, or all of them */
    if ((m->n + 1) * 2 > m->slot_cap) {
        uint32_t nc = m->slot_cap ? m->slot_cap * 2 : 256;
        uint32_t *ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        free(m->slots);
        m->slots = ns;
        m->slot_cap = nc;
        first = 0;
    }
    uint32_t id = m->n++;
    memcpy(m->keys + (size_t)id * nw, key, nw * 8);
    m->gen[id] = seq + 1;
    for (uint32_t j = first; j <= id; j++)
        for (uint64_t i = hash_words(m->keys + (size_t)j * nw, nw);; i++)
            if (!m->slots[i & (m->slot_cap - 1)]) {
                m->slots[i & (m->slot_cap - 1)] = j + 1;
                break;
            }
    *fresh = 1;
    return id;
}

/* ---- encoding -------------------------------------------------------------------------------- */

static void pack_str(const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(&W.pk, n);
    msgpack_pack_str_body(&W.pk, s, n);
}

static void emit_meta(void);

static void chunk_begin(void)
{
    if (W.chunk_open) return;
    W.chunk_open = 1;
    W.prev_ns = tkp_now_ns();
    int first; /* W.seq counts chunks over the process; a file counts its own (output.c) */
    uint32_t seq = tkp_out_chunk_begin(W.seq, &first);
    msgpack_pack_array(&W.pk, 3);
    msgpack_pack_int(&W.pk, TKP_REC_CHUNK);
    msgpack_pack_uint32(&W.pk, seq);
    msgpack_pack_uint64(&W.pk, W.prev_ns);
    if (first) emit_meta(); /* every file, rotated ones included, starts with its META */
}

/* A record's stamp (clock.c), as ns delta-encoded against the previous record. */
static int64_t next_dt(uint64_t stamp)
{
    uint64_t ts = tkp_stamp_ns(stamp);
    int64_t dt = (int64_t)(ts - W.prev_ns);
    W.prev_ns = ts;
    return dt;
}

static void pack_dt(uint64_t stamp)
{
    msgpack_pack_int64(&W.pk, next_dt(stamp));
}

/* ---- runs (FORMAT.md, "Runs") ----
 * A step's LAUNCH_T and LIB_CALL_T records go into one RUN record as columns: the times alone in
 * one column, the template ids (which repeat step after step) in another, so that zstd finds long
 * matches and the reader walks arrays instead of msgpack. Every other record ends the open run
 * first (run_flush), so the payload keeps the order of the timed records and their dt chain;
 * definitions (TMPL, NAME, THREAD, STACK) may come between, before the RUN that uses them. */

static void run_flush(void)
{
    if (!W.run_n) return;
    msgpack_packer *pk = &W.pk;
    msgpack_pack_array(pk, 9);
    msgpack_pack_int(pk, TKP_REC_RUN);
    msgpack_pack_uint32(pk, W.run_step);
    msgpack_pack_uint32(pk, W.run_n);
    msgpack_pack_uint32(pk, W.run_call0);
    tkp_cols_pack(pk, W.run, RUN_COLS);
    W.run_n = 0;
}

/* Room for one more record in every column; 0 when memory ran out (the caller writes the
 * record on its own, as LAUNCH_T / LIB_CALL_T). */
static int run_room(uint32_t step)
{
    if (W.run_n && (step != W.run_step || W.run_n == TKP_RUN_MAX)) run_flush();
    if (tkp_cols_room(W.run, RUN_COLS)) {
        run_flush();
        return 0;
    }
    if (!W.run_n) {
        W.run_step = step;
        W.run_call0 = W.run_call = 0;
        W.run_based = 0;
    }
    return 1;
}

/* Adds a launch (lib 0: call 0 outside any library call) or a library call (lib 1, host_ns its
 * time inside) of template tmpl to the open run. */
static void run_add(int lib, uint64_t stamp, uint32_t tmpl, uint32_t call, uint64_t host_ns)
{
    W.run[RUN_KIND].p[W.run[RUN_KIND].n++] = (uint8_t)lib;
    tkp_col_put(&W.run[RUN_DT], tkp_zigzag(next_dt(stamp)));
    tkp_col_put(&W.run[RUN_TMPL], tmpl);
    if (call && !W.run_based) { /* the first call id of the run: the column counts from it */
        W.run_call0 = W.run_call = call - 1;
        W.run_based = 1;
    }
    uint64_t d = tkp_zigzag((int64_t)call - ((int64_t)W.run_call + 1));
    if (lib) {
        tkp_col_put(&W.run[RUN_CALL], d);
        tkp_col_put(&W.run[RUN_HOST], host_ns);
        W.run_call = call;
    } else {
        tkp_col_put(&W.run[RUN_CALL], call ? d + 1 : 0);
    }
    W.run_n++;
}

/* The id of a string, defined in the current chunk before it is returned. */
static uint32_t name_id(const char *s)
{
    if (!s) s = "?";
    uint32_t id;
    if (!strmap_get(&W.names, s, &id)) {
        char *copy = strdup(s);
        if (!copy || grow_gen(&W.name_gen, &W.names_cap, W.nnames)) return 0;
        char **ns = realloc(W.name_str, W.names_cap * sizeof *ns);
        if (!ns) return 0;
        W.name_str = ns;
        id = W.nnames++;
        W.name_str[id] = copy;
        if (strmap_put(&W.names, copy, id)) return 0;
    }
    if (W.name_gen[id] != W.seq + 1) {
        W.name_gen[id] = W.seq + 1;
        msgpack_pack_array(&W.pk, 3);
        msgpack_pack_int(&W.pk, TKP_REC_NAME);
        msgpack_pack_uint32(&W.pk, id);
        pack_str(W.name_str[id]);
    }
    return id;
}

static uint32_t key_name_id(uint64_t key, int kind)
{
    uint32_t id;
    if (ptrmap_get(&W.keyname, key, &id)) {
        if (W.name_gen[id] != W.seq + 1) name_id(W.name_str[id]);
        return id;
    }
    id = name_id(tkp_sym_name(key, kind));
    ptrmap_put(&W.keyname, key, id);
    return id;
}

static void define_thread(uint32_t idx, int os_tid)
{
    if (grow_gen(&W.thread_gen, &W.threads_cap, idx)) return;
    if (W.thread_gen[idx] == W.seq + 1) return;
    W.thread_gen[idx] = W.seq + 1;
    msgpack_pack_array(&W.pk, 3);
    msgpack_pack_int(&W.pk, TKP_REC_THREAD);
    msgpack_pack_uint32(&W.pk, idx);
    msgpack_pack_int(&W.pk, os_tid);
}

static void emit_graph(void *ctx, const struct tkp_graph *g)
{
    (void)ctx;
    if (grow_gen(&W.graph_gen, &W.graphs_cap, g->id)) return;
    if (W.graph_gen[g->id] == W.seq + 1) return;
    W.graph_gen[g->id] = W.seq + 1;
    uint32_t *ids = calloc(g->n ? g->n : 1, sizeof *ids);
    if (!ids) return;
    for (uint32_t i = 0; i < g->n; i++)
        ids[i] = g->nodes[i].type == TKP_NODE_KERNEL ? key_name_id(g->nodes[i].key,
                                                                   g->nodes[i].key_kind)
                                                     : name_id(g->nodes[i].type == TKP_NODE_MEMCPY
                                                                   ? "memcpy"
                                                                   : g->nodes[i].type == TKP_NODE_MEMSET
                                                                         ? "memset"
                                                                         : "node");
    msgpack_pack_array(&W.pk, 3);
    msgpack_pack_int(&W.pk, TKP_REC_GRAPH);
    msgpack_pack_uint32(&W.pk, g->id);
    msgpack_pack_array(&W.pk, g->n);
    for (uint32_t i = 0; i < g->n; i++) {
        const struct tkp_gnode *n = &g->nodes[i];
        msgpack_pack_array(&W.pk, 10);
        msgpack_pack_uint64(&W.pk, g->node_base + i);
        msgpack_pack_int(&W.pk, n->type);
        msgpack_pack_uint32(&W.pk, ids[i]);
        for (int k = 0; k < 3; k++) msgpack_pack_uint32(&W.pk, n->grid[k]);
        for (int k = 0; k < 3; k++) msgpack_pack_uint32(&W.pk, n->block[k]);
        msgpack_pack_array(&W.pk, n->ndeps);
        for (uint32_t d = 0; d < n->ndeps; d++) msgpack_pack_uint64(&W.pk, g->node_base + n->deps[d]);
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
 * once per chunk; each call is then a LIB_CALL_T of its time, step, call id and template. */
static void pack_lib_fields(const struct tkp_ev *e, uint32_t op)
{
    msgpack_packer *pk = &W.pk;
    msgpack_pack_int(pk, e->sub);
    msgpack_pack_uint32(pk, op);
    for (int i = 0; i < 4; i++) msgpack_pack_uint64(pk, e->u[i]);
    for (int i = 0; i < 4; i++) {
        unsigned t = (e->u[5] >> (8 * i)) & 0xff;
        msgpack_pack_int(pk, t == TKP_LIB_UNKNOWN8 ? -1 : (int)t);
    }
    for (int i = 0; i < 2; i++) {
        unsigned t = (e->u[6] >> (4 * i)) & 0xf;
        msgpack_pack_int(pk, t == TKP_LIB_UNKNOWN4 ? -1 : (int)t);
    }
    msgpack_pack_uint64(pk, e->a);
    msgpack_pack_uint64(pk, e->b);
}

static void encode_lib_call(const struct tkp_ev *e, uint32_t thread)
{
    msgpack_packer *pk = &W.pk;
    uint32_t op = name_id(tkp_lib_op_name(e->flags));
    uint64_t key[10] = {thread | (uint64_t)op << 32, e->u[0], e->u[1], e->u[2], e->u[3],
                        e->u[5], e->u[6], e->a, e->b, (uint64_t)(uint32_t)e->sub};
    int fresh = 0;
    int64_t t = tmap_id(&W.lib_tm, key, W.seq, &fresh);
    if (t < 0) { /* no template: the full form */
        run_flush();
        msgpack_pack_array(pk, 22);
        msgpack_pack_int(pk, TKP_REC_LIB_CALL);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_uint32(pk, e->u[4]);
        pack_lib_fields(e, op);
        msgpack_pack_uint64(pk, tkp_stamp_dur_ns(e->u[7])); /* time inside the call */
        msgpack_pack_uint32(pk, e->u[6] >> 16);
        msgpack_pack_uint32(pk, (e->u[6] >> 8) & 0xff);
        return;
    }
    if (fresh) {
        msgpack_pack_array(pk, 19);
        msgpack_pack_int(pk, TKP_REC_LIB_TMPL);
        msgpack_pack_uint32(pk, (uint32_t)t);
        msgpack_pack_uint32(pk, thread);
        pack_lib_fields(e, op);
        msgpack_pack_uint32(pk, e->u[6] >> 16);
        msgpack_pack_uint32(pk, (e->u[6] >> 8) & 0xff);
    }
    if (run_room(e->step)) {
        run_add(1, e->ts, (uint32_t)t, e->u[4], tkp_stamp_dur_ns(e->u[7]));
        return;
    }
    msgpack_pack_array(pk, 6);
    msgpack_pack_int(pk, TKP_REC_LIB_CALL_T);
    pack_dt(e->ts);
    msgpack_pack_uint32(pk, e->step);
    msgpack_pack_uint32(pk, e->u[4]);
    msgpack_pack_uint32(pk, (uint32_t)t);
    msgpack_pack_uint64(pk, tkp_stamp_dur_ns(e->u[7]));
}

static void encode_other(const struct tkp_ev *e, uint32_t thread);

static void encode(void *ctx, const struct tkp_ev *e, uint32_t thread, int os_tid)
{
    (void)ctx;
    chunk_begin();
    define_thread(thread, os_tid);
    msgpack_packer *pk = &W.pk;
    switch (e->type) {
    case TKP_REC_LAUNCH: {
        uint32_t nm = key_name_id(e->a, e->flags);
        uint32_t stk = tkp_stacks_encode(pk, W.seq, thread, e->ts); /* STACK/MODULE first */
        const uint32_t *u = e->u;
        uint64_t key[6] = {thread | (uint64_t)nm << 32, e->b,
                           (uint32_t)e->sub | (uint64_t)u[6] << 32, u[0] | (uint64_t)u[1] << 32,
                           u[2] | (uint64_t)u[3] << 32, u[4] | (uint64_t)u[5] << 32};
        int fresh = 0;
        int64_t t = tmap_id(&W.launch_tm, key, W.seq, &fresh);
        if (t >= 0) { /* the configuration once per chunk (TMPL), then LAUNCH_T per launch */
            if (fresh) {
                msgpack_pack_array(pk, 13);
                msgpack_pack_int(pk, TKP_REC_TMPL);
                msgpack_pack_uint32(pk, (uint32_t)t);
                msgpack_pack_uint32(pk, thread);
                msgpack_pack_uint32(pk, nm);
                msgpack_pack_uint64(pk, e->b);
                msgpack_pack_int(pk, e->sub);
                for (int i = 0; i < 7; i++) msgpack_pack_uint32(pk, e->u[i]);
            }
            if (!stk && run_room(e->step)) {
                run_add(0, e->ts, (uint32_t)t, e->u[7], 0);
                break;
            }
            run_flush(); /* a launch with a stack is a record of its own */
            msgpack_pack_array(pk, stk ? 6 : e->u[7] ? 5 : 4);
            msgpack_pack_int(pk, TKP_REC_LAUNCH_T);
            pack_dt(e->ts);
            msgpack_pack_uint32(pk, e->step);
            msgpack_pack_uint32(pk, (uint32_t)t);
        } else {
            run_flush();
            /* trailing `call` inside a library call (0 when only `stack` follows), then `stack` */
            msgpack_pack_array(pk, stk ? 16 : e->u[7] ? 15 : 14);
            msgpack_pack_int(pk, TKP_REC_LAUNCH);
            pack_dt(e->ts);
            msgpack_pack_uint32(pk, thread);
            msgpack_pack_uint32(pk, e->step);
            msgpack_pack_uint32(pk, nm);
            msgpack_pack_uint64(pk, e->b);
            msgpack_pack_int(pk, e->sub);
            for (int i = 0; i < 7; i++) msgpack_pack_uint32(pk, e->u[i]);
        }
        if (e->u[7] || stk) msgpack_pack_uint32(pk, e->u[7]);
        if (stk) msgpack_pack_uint32(pk, stk);
        break;
    }
    case TKP_REC_LIB_CALL:
        encode_lib_call(e, thread);
        break;
    case TKP_EV_GPU_CORR: /* not a record: feeds the GPU join (cupti.c) */
        tkp_cupti_note(e, thread);
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

static void encode_other(const struct tkp_ev *e, uint32_t thread)
{
    msgpack_packer *pk = &W.pk;
    switch (e->type) {
    case TKP_REC_GRAPH_LAUNCH: {
        struct gl_ctx g = {UINT32_MAX};
        tkp_graph_with(e->a, emit_graph_and_id, &g);
        msgpack_pack_array(pk, 7);
        msgpack_pack_int(pk, TKP_REC_GRAPH_LAUNCH);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        if (g.id == UINT32_MAX) msgpack_pack_int(pk, -1); /* topology never seen */
        else msgpack_pack_uint32(pk, g.id);
        msgpack_pack_uint64(pk, e->b);
        msgpack_pack_int(pk, e->sub);
        break;
    }
    case TKP_REC_COPY:
        msgpack_pack_array(pk, 9);
        msgpack_pack_int(pk, TKP_REC_COPY);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_int(pk, e->sub);
        msgpack_pack_int(pk, e->flags & 0xff);
        msgpack_pack_uint64(pk, e->a);
        msgpack_pack_uint64(pk, e->b);
        msgpack_pack_int(pk, e->flags >> 8);
        break;
    case TKP_REC_SYNC:
        msgpack_pack_array(pk, 7);
        msgpack_pack_int(pk, TKP_REC_SYNC);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_int(pk, e->sub);
        msgpack_pack_uint64(pk, e->a);
        msgpack_pack_uint64(pk, tkp_stamp_dur_ns(e->b)); /* the wait */
        break;
    case TKP_REC_EVENT_RECORD:
    case TKP_REC_STREAM_WAIT:
        msgpack_pack_array(pk, 6);
        msgpack_pack_int(pk, e->type);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_uint64(pk, e->a);
        msgpack_pack_uint64(pk, e->b);
        break;
    case TKP_REC_STEP: {
        uint64_t begin = tkp_stamp_ns(e->ts), mark = tkp_stamp_ns(e->a), end = tkp_stamp_ns(e->b);
        tkp_trigger_on_step(e->sub, begin, end); /* flight mode: a slow step is a trigger */
        msgpack_pack_array(pk, 11);
        msgpack_pack_int(pk, TKP_REC_STEP);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_int(pk, e->sub);
        msgpack_pack_uint64(pk, begin);
        msgpack_pack_uint64(pk, mark);
        msgpack_pack_uint64(pk, end);
        msgpack_pack_uint32(pk, e->u[0]);
        msgpack_pack_uint32(pk, e->u[1]);
        msgpack_pack_uint32(pk, e->u[2]);
        msgpack_pack_uint32(pk, e->u[3]);
        break;
    }
    case TKP_REC_NVTX: {
        uint32_t nm = name_id((const char *)(uintptr_t)e->a);
        msgpack_pack_array(pk, 7);
        msgpack_pack_int(pk, TKP_REC_NVTX);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_int(pk, e->sub);
        msgpack_pack_uint32(pk, nm);
        msgpack_pack_uint32(pk, e->u[0]);
        break;
    }
    case TKP_REC_MARKER:
        msgpack_pack_array(pk, 6);
        msgpack_pack_int(pk, TKP_REC_MARKER);
        pack_dt(e->ts);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint32(pk, e->step);
        msgpack_pack_int(pk, e->sub);
        msgpack_pack_uint64(pk, e->a);
        break;
    case TKP_REC_LOSS: /* an exiting thread's final count (tkp_rings_drain) */
        msgpack_pack_array(pk, 3);
        msgpack_pack_int(pk, TKP_REC_LOSS);
        msgpack_pack_uint32(pk, thread);
        msgpack_pack_uint64(pk, e->a);
        break;
    default:
        break;
    }
}

/* For cupti.c, which encodes GPU records on this thread. */
msgpack_packer *tkp_writer_packer(void)
{
    chunk_begin();
    run_flush(); /* GPU records come after the run before them */
    return &W.pk;
}

/* GPU kernel names are strings CUPTI owns, the same few again and again: a string at an
 * address seen before is compared with the name it had (a strcmp, not a hash of it and a
 * table probe) before name_id() is asked. */
uint32_t tkp_writer_name(const char *s)
{
    static struct {
        const char *p;
        uint32_t id;
    } seen[64];
    chunk_begin();
    __typeof__(seen[0]) *c = &seen[((uintptr_t)s >> 4) & 63];
    if (c->p == s && c->id < W.nnames && !strcmp(W.name_str[c->id], s) &&
        W.name_gen[c->id] == W.seq + 1)
        return c->id; /* defined in this chunk already */
    uint32_t id = name_id(s);
    if (id < W.nnames && !strcmp(W.name_str[id], s)) c->p = s, c->id = id;
    return id;
}

/* ---- metadata, losses, chunks ---------------------------------------------------------------- */

static void pack_kv_str(const char *k, const char *v)
{
    pack_str(k);
    pack_str(v ? v : "");
}
static void pack_kv_int(const char *k, int64_t v)
{
    pack_str(k);
    msgpack_pack_int64(&W.pk, v);
}

typedef int (*drv_int_fn)(int *);
typedef int (*dev_get_fn)(int *, int);
typedef int (*dev_name_fn)(char *, int, int);
typedef int (*dev_uuid_fn)(unsigned char *, int);

static void pack_devices(void)
{
    /* Only a driver the program loaded and initialised is asked; none is loaded by us here. */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int count = 0;
    dev_name_fn get_name = NULL;
    dev_uuid_fn get_uuid = NULL;
    dev_get_fn dev_get = NULL;
    if (h) {
        drv_int_fn get_count = (drv_int_fn)tkp_real_dlsym(h, "cuDeviceGetCount");
        get_name = (dev_name_fn)tkp_real_dlsym(h, "cuDeviceGetName");
        get_uuid = (dev_uuid_fn)tkp_real_dlsym(h, "cuDeviceGetUuid_v2");
        dev_get = (dev_get_fn)tkp_real_dlsym(h, "cuDeviceGet");
        if (!get_count || get_count(&count) != 0 || count < 0 || count > 64) count = 0;
    }
    pack_str("devices");
    msgpack_pack_array(&W.pk, (size_t)count);
    for (int i = 0; i < count; i++) {
        char name[256] = "";
        unsigned char u[16] = {0};
        char uuid[48] = "";
        int dev = i;
        if (dev_get) dev_get(&dev, i);
        if (get_name) get_name(name, sizeof name - 1, dev);
        if (get_uuid && get_uuid(u, dev) == 0)
            snprintf(uuid, sizeof uuid,
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                     u[12], u[13], u[14], u[15]);
        msgpack_pack_map(&W.pk, 2);
        pack_kv_str("name", name);
        pack_kv_str("uuid", uuid);
    }
    if (h) dlclose(h);
}

static int driver_version(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int v = 0;
    if (h) {
        drv_int_fn f = (drv_int_fn)tkp_real_dlsym(h, "cuDriverGetVersion");
        if (!f || f(&v) != 0) v = 0;
        dlclose(h);
    }
    return v;
}

static int runtime_version(void)
{
    static const struct { const char *so; int v; } rt[] = {{"libcudart.so.13", 13000},
                                                           {"libcudart.so.12", 12000}};
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        void *h = dlopen(rt[i].so, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            dlclose(h);
            return rt[i].v;
        }
    }
    return 0;
}

static const char *step_mode_name(void)
{
    static char buf[300];
    switch (tkp_cfg.step_mode) {
    case TKP_STEPMODE_SYNC: return "sync";
    case TKP_STEPMODE_GRAPH: return "graph";
    case TKP_STEPMODE_MARKER: return "marker";
    case TKP_STEPMODE_NVTX: snprintf(buf, sizeof buf, "nvtx:%s", tkp_cfg.step_regex); return buf;
    case TKP_STEPMODE_KERNEL: snprintf(buf, sizeof buf, "kernel:%s", tkp_cfg.step_regex); return buf;
    default: return "auto";
    }
}

static void emit_meta(void)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    msgpack_pack_array(&W.pk, 2);
    msgpack_pack_int(&W.pk, TKP_REC_META);
    msgpack_pack_map(&W.pk, 11 + (size_t)tkp_out_meta_keys());
    pack_kv_str("program", program_invocation_short_name);
    pack_kv_int("pid", getpid());
    pack_kv_int("ppid", getppid());
    pack_kv_str("hostname", host);
    pack_kv_int("start_realtime_ns", (int64_t)start_realtime_ns);
    pack_kv_int("start_monotonic_ns", (int64_t)start_monotonic_ns);
    pack_kv_str("tokprof_version", TOKPROF_VERSION_STRING);
    pack_kv_int("cuda_runtime_version", runtime_version());
    pack_kv_int("cuda_driver_version", driver_version());
    pack_devices();
    pack_str("config");
    msgpack_pack_map(&W.pk, 11);
    pack_kv_str("mode", tkp_prod.flight ? "flight" : "stream");
    pack_kv_int("max_bytes", (int64_t)tkp_prod.max_bytes); /* the disk bounds: OPERATIONS.md */
    pack_kv_int("keep", tkp_prod.keep);
    pack_kv_int("min_free_bytes", (int64_t)tkp_prod.min_free_bytes);
    pack_kv_int("min_free_pct", tkp_prod.min_free_pct);
    pack_kv_str("stacks", tkp_stacks_desc());
    pack_kv_str("step", step_mode_name());
    pack_kv_int("buffer_mb", tkp_cfg.buffer_mb);
    pack_kv_int("ring_kb", tkp_cfg.ring_kb);
    pack_kv_int("flush_ms", tkp_cfg.flush_ms);
    pack_kv_str("out", tkp_cfg.out_dir);
    tkp_out_meta_pack(&W.pk); /* a flight snapshot says why it was taken */
    W.meta_written = 1;
}

void *tkp_writer_meta_payload(size_t *len)
{
    /* Packs into a buffer of its own: the chunk being encoded stays as it is. */
    msgpack_sbuffer saved = W.sb;
    int meta_written = W.meta_written;
    msgpack_sbuffer_init(&W.sb);
    msgpack_pack_array(&W.pk, 3);
    msgpack_pack_int(&W.pk, TKP_REC_CHUNK);
    msgpack_pack_uint32(&W.pk, 0);
    msgpack_pack_uint64(&W.pk, tkp_now_ns());
    emit_meta();
    *len = W.sb.size;
    void *p = msgpack_sbuffer_release(&W.sb);
    W.sb = saved;
    W.meta_written = meta_written;
    return p;
}

/* `stop`: the capture ends with this chunk (free space under the floor): the LOSS of threads
 * without a ring is written even when zero, with a trailing 1 that says so (FORMAT.md, LOSS). */
static void emit_losses(int stop)
{
    uint32_t n = tkp_rings_count();
    for (uint32_t i = 0; i < n; i++) {
        int tid;
        uint64_t dropped;
        int idx = tkp_ring_info(i, &tid, &dropped);
        if (idx < 0 || !dropped) continue;
        chunk_begin();
        define_thread((uint32_t)idx, tid);
        msgpack_pack_array(&W.pk, 3);
        msgpack_pack_int(&W.pk, TKP_REC_LOSS);
        msgpack_pack_uint32(&W.pk, (uint32_t)idx);
        msgpack_pack_uint64(&W.pk, dropped);
    }
    uint64_t ringless = atomic_load(&tkp_ringless_drops);
    if (ringless || stop) {
        chunk_begin();
        msgpack_pack_array(&W.pk, stop ? 4 : 3);
        msgpack_pack_int(&W.pk, TKP_REC_LOSS);
        msgpack_pack_uint32(&W.pk, UINT32_MAX); /* threads that got no ring */
        msgpack_pack_uint64(&W.pk, ringless);
        if (stop) msgpack_pack_uint32(&W.pk, 1);
    }
}

static void fail(const char *what)
{
    if (W.failed) return;
    W.failed = 1;
    tkp_warn("%s %s: %s; capture stopped, the program is unaffected", what, W.path,
             strerror(errno));
    atomic_store(&tkp_state, -1);
}

static void flush_chunk(void)
{
    uint64_t since = W.last_flush_ns;
    W.last_flush_ns = tkp_now_ns();
    if (!W.chunk_open || W.failed) return;
    /* Under the free-space floor (output.c, stream mode): recording stops now, what the rings
     * hold is drained into this chunk, which is the capture's last. */
    int stop = !tkp_prod.flight && tkp_out_low_space(W.sb.size, "capture stopped");
    if (stop) {
        atomic_store(&tkp_state, -1);
        tkp_rings_drain(encode, NULL);
    }
    run_flush();
    emit_losses(stop);
    size_t raw = W.sb.size;
    size_t bound = ZSTD_compressBound(raw);
    if (bound > W.zcap) {
        void *z = realloc(W.zbuf, bound);
        if (!z) return fail("out of memory compressing for");
        W.zbuf = z;
        W.zcap = bound;
    }
    ZSTD_CCtx_setPledgedSrcSize(W.cctx, raw);
    size_t zn = ZSTD_compress2(W.cctx, W.zbuf, W.zcap, W.sb.data, raw);
    if (ZSTD_isError(zn)) {
        tkp_warn("zstd: %s", ZSTD_getErrorName(zn));
        zn = 0;
    }
    /* to the file, or to the flight recorder; a failure was reported and stopped the capture */
    if (zn && tkp_out_chunk_put(W.zbuf, zn, (uint32_t)raw, since, W.last_flush_ns)) W.failed = 1;
    if (stop) W.failed = 1; /* nothing more is written */
    W.seq++;
    W.chunk_open = 0;
    msgpack_sbuffer_clear(&W.sb);
}

/* Returns the number of events drained. */
static size_t cycle(int force)
{
    if (!W.meta_written) {
        chunk_begin(); /* META, in stream mode */
        W.meta_written = 1;
    }
    /* GPU buffers completed before the drain: their launches' join events are in the rings. */
    struct tkp_gpu_batch *gpu = tkp_cupti_take();
    tkp_clock_anchor(); /* before the drain: the stamps drained next are converted against it */
    size_t n = tkp_rings_drain(encode, NULL);
    tkp_cupti_encode(gpu, force);
    uint64_t now = tkp_now_ns();
    if (force || W.sb.size >= CHUNK_SOFT_MAX ||
        now - W.last_flush_ns >= (uint64_t)tkp_cfg.flush_ms * 1000000ull)
        flush_chunk();
    tkp_out_poll(now); /* flight mode: triggers, snapshots */
    return n;
}

static void *writer_main(void *arg)
{
    (void)arg;
    unsigned poll = tkp_cfg.flush_ms < POLL_MS_MAX ? tkp_cfg.flush_ms : POLL_MS_MAX;
    struct timespec idle = {poll / 1000, (long)(poll % 1000) * 1000000L};
    struct timespec busy = {0, 2000000L};
    /* A drain that found a lot means the rings fill fast: come back sooner, so that a burst of
     * launches is drained rather than dropped. */
    size_t busy_at = ((size_t)tkp_cfg.ring_kb << 10) / sizeof(struct tkp_ev) / 8;
    size_t last = 0;
    tkp_tls.depth = 1; /* nothing this thread does is the program's */
    while (!atomic_load(&W.stop)) {
        nanosleep(last >= busy_at ? &busy : &idle, NULL);
        last = cycle(0);
    }
    return NULL;
}

int tkp_writer_start(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    start_monotonic_ns = tkp_now_ns();
    start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    if (tkp_out_open()) return -1; /* the first file, or the flight recorder (one warning) */
    snprintf(W.path, sizeof W.path, "%s", tkp_out_path());
    msgpack_sbuffer_init(&W.sb);
    msgpack_packer_init(&W.pk, &W.sb, msgpack_sbuffer_write);
    W.cctx = ZSTD_createCCtx();
    if (!W.cctx) return -1;
    ZSTD_CCtx_setParameter(W.cctx, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(W.cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(W.cctx, ZSTD_c_contentSizeFlag, 1);
    W.last_flush_ns = tkp_now_ns();
    atomic_store(&W.stop, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&W.thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        tkp_warn("cannot start the writer thread; capture off");
        return -1;
    }
    W.running = 1;
    tkp_debug("capturing to %s", W.path);
    return 0;
}

void tkp_writer_stop(void)
{
    if (!W.running) return;
    atomic_store(&W.stop, 1);
    pthread_join(W.thread, NULL);
    W.running = 0;
    int d = tkp_tls.depth;
    tkp_tls.depth = 1;
    tkp_out_last_chunk();
    cycle(1);
    tkp_tls.depth = d;
    tkp_out_close();
}

void tkp_writer_after_fork(void)
{
    /* The child has no writer thread; the parent's file and buffers are not ours to touch. */
    tkp_out_after_fork();
    W.running = 0;
    W.seq = 0;
    W.chunk_open = 0;
    W.meta_written = 0;
    W.failed = 0;
    if (W.sb.data) msgpack_sbuffer_clear(&W.sb);
    W.run_n = 0; /* the parent's open run was the parent's */
    for (int c = 0; c < RUN_COLS; c++) W.run[c].n = 0;
    if (W.names_cap) memset(W.name_gen, 0, W.names_cap * sizeof *W.name_gen);
    if (W.threads_cap) memset(W.thread_gen, 0, W.threads_cap * sizeof *W.thread_gen);
    if (W.graphs_cap) memset(W.graph_gen, 0, W.graphs_cap * sizeof *W.graph_gen);
    if (W.launch_tm.gen) memset(W.launch_tm.gen, 0, W.launch_tm.ids_cap * sizeof(uint32_t));
    if (W.lib_tm.gen) memset(W.lib_tm.gen, 0, W.lib_tm.ids_cap * sizeof(uint32_t));
    if (W.cctx) ZSTD_freeCCtx(W.cctx);
    W.cctx = NULL;
    if (W.sb.data) msgpack_sbuffer_destroy(&W.sb);
    memset(&W.sb, 0, sizeof W.sb);
}
