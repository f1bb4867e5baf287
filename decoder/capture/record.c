/* tokprof decoder: msgpack record -> struct tkp_record (docs/FORMAT.md, "Record types").
 *
 * A known type with too few elements or a wrongly typed element is an error of its chunk;
 * extra trailing elements are skipped, so a later writer may append fields. */
#include "capture/record.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "capture/gputmpl.h"

struct dec {
    struct tkp_mp *c;
    const char *rec; /* record type name, for messages */
    char *why;
    size_t whylen;
    uint32_t nelem; /* elements after the type */
    uint32_t used;  /* of them, read past the type's minimum (COLS: its columns) */
};

static int fail(struct dec *d, const char *fmt, ...)
{
    int n = snprintf(d->why, d->whylen, "%s record: ", d->rec);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < d->whylen) vsnprintf(d->why + n, d->whylen - n, fmt, ap);
    va_end(ap);
    return TKP_ERR_RECORD;
}

/* A value of the wanted type that still fails to read declares more than the payload holds. */
static int bad_type(struct dec *d, const char *field, const char *want, enum tkp_mp_type t)
{
    enum tkp_mp_type got = tkp_mp_peek(d->c);
    if (got == t)
        return fail(d, "field '%s': %s longer than the payload", field, tkp_mp_type_name(t));
    return fail(d, "field '%s': expected %s, got %s", field, want, tkp_mp_type_name(got));
}

static int u64f(struct dec *d, const char *field, uint64_t *v)
{
    return tkp_mp_u64(d->c, v) ? bad_type(d, field, "an unsigned int", TKP_MP_UINT) : 0;
}

static int u32f(struct dec *d, const char *field, uint32_t *v)
{
    uint64_t u;
    if (tkp_mp_u64(d->c, &u)) return bad_type(d, field, "an unsigned int", TKP_MP_UINT);
    if (u > UINT32_MAX)
        return fail(d, "field '%s': %llu does not fit 32 bits", field, (unsigned long long)u);
    *v = (uint32_t)u;
    return 0;
}

static int i64f(struct dec *d, const char *field, int64_t *v)
{
    return tkp_mp_i64(d->c, v) ? bad_type(d, field, "an int64", TKP_MP_INT) : 0;
}

static int threadf(struct dec *d, uint32_t *v)
{
    int err = u32f(d, "thread", v);
    if (!err && *v >= TKP_THREADS_MAX)
        return fail(d, "thread index %u above the limit %u", *v, TKP_THREADS_MAX - 1);
    return err;
}

/* dt, thread, step: the common head of the timed records */
static int head(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    if (i64f(d, "dt", &b->dt) || threadf(d, &r->thread) || u64f(d, "step", &r->step))
        return TKP_ERR_RECORD;
    return 0;
}

static int dim3(struct dec *d, const char *field, uint32_t v[3])
{
    for (int i = 0; i < 3; i++)
        if (u32f(d, field, &v[i])) return TKP_ERR_RECORD;
    return 0;
}

/* LIB_CALL enum fields: a CUDA enum value or -1 (unknown) */
static int enumf(struct dec *d, const char *field, int32_t *v)
{
    int64_t x;
    if (i64f(d, field, &x)) return TKP_ERR_RECORD;
    if (x < -1 || x > INT32_MAX)
        return fail(d, "field '%s': %lld out of range", field, (long long)x);
    *v = (int32_t)x;
    return 0;
}

/* The checked decode of a fixed-layout record (include/tokprof/records.def): its head, then each
 * field with its wire name in the reason a malformed one gets. dec_TYPE() reads the fields after
 * the head (a TMPL's are a LAUNCH's). */
static int anythreadf(struct dec *d, uint32_t *v)
{
    if (u32f(d, "thread", v)) return TKP_ERR_RECORD;
    if (*v != TKP_THREAD_NONE && *v >= TKP_THREADS_MAX)
        return fail(d, "thread index %u above the limit %u", *v, TKP_THREADS_MAX - 1);
    return 0;
}
#define DEC_HEAD_HOST head(d, r, b)
#define DEC_HEAD_STEP u64f(d, "step", &r->step) || threadf(d, &r->thread)
#define DEC_HEAD_ANYTHREAD anythreadf(d, &r->thread) /* LOSS of threads that never got a ring */
#define DEC_u32(wire, m) u32f(d, wire, &(m))
#define DEC_u64(wire, m) u64f(d, wire, &(m))
#define DEC_i64(wire, m) i64f(d, wire, &(m))
#define DEC_dim3(wire, m) dim3(d, wire, m)
#define DEC_cenum(wire, m) enumf(d, wire, &(m))
#define DEC_F(kind, name, wire) || DEC_##kind(wire, x_->name)
#define DEC_X(ctype, name)
#define DEC_FIELDS(T, member, head, fields, extra)                                                 \
    static inline int dec_##T(struct dec *d, __typeof__(((struct tkp_record *)0)->member) *x_)     \
    {                                                                                              \
        return 0 fields;                                                                           \
    }
TKP_RECORDS_FIXED(DEC_FIELDS, DEC_F, DEC_X)
#define DEC_R(T, member, head, fields, extra)                                                      \
    case TKP_REC_##T:                                                                              \
        return DEC_HEAD_##head || dec_##T(d, &r->member);

/* Copies a msgpack str into dst, truncated to cap-1 bytes, NUL bytes replaced. */
static void copy_str(char *dst, size_t cap, const char *s, uint32_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = s[i] ? s[i] : '?';
    dst[n] = 0;
}

static int graph_nodes(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint32_t n, ndeps = 0;
    if (tkp_mp_array(d->c, &n)) return bad_type(d, "nodes", "an array", TKP_MP_ARRAY);
    if (n > TKP_GRAPH_MAX_NODES)
        return fail(d, "%u nodes, above the limit %u", n, TKP_GRAPH_MAX_NODES);
    if (TKP_GROW_FROM(b->nodes, b->nodes_cap, n, 64)) return TKP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        struct tkp_graph_node *g = &b->nodes[i];
        uint32_t m, k;
        memset(g, 0, sizeof(*g));
        if (tkp_mp_array(d->c, &m)) return bad_type(d, "nodes[]", "an array", TKP_MP_ARRAY);
        if (m < 10) return fail(d, "node %u has %u fields, expected 10", i, m);
        if (u64f(d, "node", &g->node) || u32f(d, "node type", &g->type) ||
            u64f(d, "node name", &g->name_id) || dim3(d, "node grid", g->grid) ||
            dim3(d, "node block", g->block))
            return TKP_ERR_RECORD;
        if (tkp_mp_array(d->c, &k)) return bad_type(d, "deps", "an array", TKP_MP_ARRAY);
        if (k > TKP_GRAPH_MAX_DEPS - ndeps)
            return fail(d, "more than %u dependency edges", TKP_GRAPH_MAX_DEPS);
        if (TKP_GROW_FROM(b->deps, b->deps_cap, (size_t)ndeps + k, 64)) return TKP_ERR_NOMEM;
        /* deps stays an offset until the buffer stops moving */
        g->deps = (const uint64_t *)(uintptr_t)ndeps;
        g->ndeps = k;
        for (uint32_t j = 0; j < k; j++)
            if (u64f(d, "deps[]", &b->deps[ndeps++])) return TKP_ERR_RECORD;
        for (m -= 10; m; m--)
            if (tkp_mp_skip(d->c)) return fail(d, "node %u: unreadable extra field", i);
    }
    for (uint32_t i = 0; i < n; i++) /* no edge at all: deps may still be NULL (no offset on it) */
        b->nodes[i].deps = b->deps ? b->deps + (uintptr_t)b->nodes[i].deps : NULL;
    r->graph.nnodes = n;
    r->graph.nodes = b->nodes;
    return 0;
}

/* META: a map; known keys of the wrong type are ignored like unknown keys (it is metadata, not
 * a fact the analyses depend on). */
static int meta(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    struct tkp_meta *m = &r->meta;
    const uint8_t *start = d->c->p;
    uint32_t n;
    if (tkp_mp_map(d->c, &n)) return bad_type(d, "map", "a map", TKP_MP_MAP);
    b->program[0] = b->hostname[0] = b->version[0] = 0;
    m->program = b->program;
    m->hostname = b->hostname;
    m->tokprof_version = b->version;
    while (n--) {
        const char *k, *s;
        uint32_t klen, slen;
        if (tkp_mp_str(d->c, &k, &klen)) {
            if (tkp_mp_skip(d->c) || tkp_mp_skip(d->c)) return fail(d, "unreadable map entry");
            continue;
        }
#define KEY(name) (klen == sizeof(name) - 1 && !memcmp(k, name, klen))
        char *dst = KEY("program")           ? b->program
                    : KEY("hostname")        ? b->hostname
                    : KEY("tokprof_version") ? b->version
                                             : NULL;
        uint64_t *num = KEY("pid")                    ? &m->pid
                        : KEY("ppid")                 ? &m->ppid
                        : KEY("start_realtime_ns")    ? &m->start_realtime_ns
                        : KEY("start_monotonic_ns")   ? &m->start_monotonic_ns
                        : KEY("cuda_runtime_version") ? &m->cuda_runtime_version
                        : KEY("cuda_driver_version")  ? &m->cuda_driver_version
                                                      : NULL;
#undef KEY
        /* peek says the type; reading it can still fail (a length past the payload's end) */
        if (dst && tkp_mp_peek(d->c) == TKP_MP_STR) {
            if (tkp_mp_str(d->c, &s, &slen)) return fail(d, "unreadable string in META");
            copy_str(dst,
                     dst == b->program    ? sizeof(b->program)
                     : dst == b->hostname ? sizeof(b->hostname)
                                          : sizeof(b->version),
                     s, slen);
        } else if (num && tkp_mp_peek(d->c) == TKP_MP_UINT) {
            if (tkp_mp_u64(d->c, num)) return fail(d, "unreadable integer in META");
        } else if (tkp_mp_skip(d->c)) {
            return fail(d, "unreadable value of key '%.*s'", (int)(klen > 40 ? 40 : klen), k);
        }
    }
    m->map = start;
    m->map_len = (size_t)(d->c->p - start);
    return 0;
}

static const char *const type_names[] = {
    [TKP_REC_CHUNK] = "CHUNK",
    [TKP_REC_NAME] = "NAME",
    [TKP_REC_META] = "META",
    [TKP_REC_THREAD] = "THREAD",
    [TKP_REC_LAUNCH] = "LAUNCH",
    [TKP_REC_GRAPH_LAUNCH] = "GRAPH_LAUNCH",
    [TKP_REC_GRAPH] = "GRAPH",
    [TKP_REC_COPY] = "COPY",
    [TKP_REC_SYNC] = "SYNC",
    [TKP_REC_EVENT_RECORD] = "EVENT_RECORD",
    [TKP_REC_STREAM_WAIT] = "STREAM_WAIT",
    [TKP_REC_STEP] = "STEP",
    [TKP_REC_NVTX] = "NVTX",
    [TKP_REC_LOSS] = "LOSS",
    [TKP_REC_MARKER] = "MARKER",
    [TKP_REC_LIB_CALL] = "LIB_CALL",
    [TKP_REC_STACK] = "STACK",
    [TKP_REC_MODULE] = "MODULE",
    [TKP_REC_GPU_KERNEL] = "GPU_KERNEL",
    [TKP_REC_GPU_COPY] = "GPU_COPY",
    [TKP_REC_GPU_INFO] = "GPU_INFO",
    [TKP_REC_LAUNCH_T] = "LAUNCH_T",
    [TKP_REC_TMPL] = "TMPL",
    [TKP_REC_LIB_CALL_T] = "LIB_CALL_T",
    [TKP_REC_LIB_TMPL] = "LIB_TMPL",
    [TKP_REC_RUN] = "RUN",
    [TKP_REC_COLS] = "COLS",
    [TKP_REC_GPU_TMPL] = "GPU_TMPL",
    [TKP_REC_GPU_RUN] = "GPU_RUN",
};

const char *tkp_record_type_name(uint64_t type)
{
    return type < sizeof(type_names) / sizeof(*type_names) ? type_names[type] : NULL;
}

/* Elements after the type, per type: a record with fewer is malformed. */
static const uint8_t min_fields[] = {
    [TKP_REC_CHUNK] = 2,        [TKP_REC_NAME] = 2,        [TKP_REC_META] = 1,
    [TKP_REC_THREAD] = 2,       [TKP_REC_LAUNCH] = 13,     [TKP_REC_GRAPH_LAUNCH] = 6,
    [TKP_REC_GRAPH] = 2,        [TKP_REC_COPY] = 8,        [TKP_REC_SYNC] = 6,
    [TKP_REC_EVENT_RECORD] = 5, [TKP_REC_STREAM_WAIT] = 5, [TKP_REC_STEP] = 10,
    [TKP_REC_NVTX] = 6,         [TKP_REC_LOSS] = 2,        [TKP_REC_MARKER] = 5,
    [TKP_REC_LIB_CALL] = 21,    [TKP_REC_STACK] = 2,       [TKP_REC_MODULE] = 5,
    [TKP_REC_GPU_KERNEL] = 17,  [TKP_REC_GPU_COPY] = 13,   [TKP_REC_GPU_INFO] = 10,
    [TKP_REC_LAUNCH_T] = 3,     [TKP_REC_TMPL] = 12,       [TKP_REC_LIB_CALL_T] = 5,
    [TKP_REC_LIB_TMPL] = 18,    [TKP_REC_RUN] = 8,         [TKP_REC_COLS] = 3,
    [TKP_REC_GPU_TMPL] = 13,    [TKP_REC_GPU_RUN] = 5,
};

/* GPU records: graph and node are -1 when the work was not a graph node */
static int idf(struct dec *d, const char *field, uint64_t *v)
{
    if (tkp_mp_peek(d->c) == TKP_MP_INT) {
        int64_t x;
        if (i64f(d, field, &x) || x != -1) return fail(d, "field '%s': negative id", field);
        *v = TKP_GRAPH_UNKNOWN;
        return 0;
    }
    return u64f(d, field, v);
}

static int strf(struct dec *d, const char *field, char *dst, size_t cap)
{
    const char *s;
    uint32_t n;
    if (tkp_mp_str(d->c, &s, &n)) return bad_type(d, field, "a str", TKP_MP_STR);
    copy_str(dst, cap, s, n);
    return 0;
}

/* ---- GPU_KERNEL and GPU_COPY: integer fields, from msgpack or from COLS columns ----
 * Both sources give each field as a 64-bit value; the checks below are the only ones. */
enum gpu_kind {
    GF_U64,    /* any unsigned 64-bit value */
    GF_U32,    /* below 2^32 */
    GF_THREAD, /* below TKP_THREADS_MAX, or TKP_GPU_THREAD_NONE */
    GF_ID,     /* graph, node: unsigned 64-bit, or -1 (TKP_GRAPH_UNKNOWN, all bits set) */
};
struct gpu_field {
    const char *name;
    uint8_t kind;
};
static const struct gpu_field kernel_fields[17] = {
    {"start_ns", GF_U64}, {"end_ns", GF_U64},  {"name", GF_U64},  {"stream", GF_U32},
    {"correlation", GF_U32}, {"thread", GF_THREAD}, {"step", GF_U64}, {"join", GF_U32},
    {"index", GF_U32},    {"graph", GF_ID},    {"node", GF_ID},   {"grid", GF_U32},
    {"grid", GF_U32},     {"grid", GF_U32},    {"block", GF_U32}, {"block", GF_U32},
    {"block", GF_U32},
};
static const struct gpu_field copy_fields[13] = {
    {"start_ns", GF_U64},    {"end_ns", GF_U64}, {"kind", GF_U32},       {"dir", GF_U32},
    {"bytes", GF_U64},       {"stream", GF_U32}, {"correlation", GF_U32}, {"thread", GF_THREAD},
    {"step", GF_U64},        {"join", GF_U32},   {"index", GF_U32},      {"graph", GF_ID},
    {"node", GF_ID},
};
_Static_assert(sizeof(kernel_fields) / sizeof(*kernel_fields) == TKP_COLS_FIELDS, "COLS fields");

unsigned tkp_cols_fields(uint64_t type)
{
    return type == TKP_REC_GPU_KERNEL ? 17 : type == TKP_REC_GPU_COPY ? 13 : 0;
}

void tkp_cols_begin(struct tkp_cols *u, uint32_t type, uint32_t n, const uint8_t *const *col,
                    const uint32_t *len)
{
    u->type = type;
    u->nf = tkp_cols_fields(type);
    u->left = n;
    u->i = u->n = 0;
    u->small = 0;
    u->first = 1;
    u->gpu_run = 0;
    for (uint32_t k = 0; k < u->nf; k++) {
        const uint8_t *q = col[k];
        tkp_uvar_ok(&q);
        u->col[k] = col[k];
        u->prev[k] = 0;
        u->small |= (uint32_t)(len[k] - (uint32_t)(q - col[k]) == n - 1) << k;
    }
}

static const struct gpu_field *gpu_fields(uint64_t type)
{
    return type == TKP_REC_GPU_KERNEL ? kernel_fields : copy_fields;
}

static inline int gpu_value_ok(unsigned kind, uint64_t v)
{
    if (kind == GF_U32) return v <= UINT32_MAX;
    if (kind == GF_THREAD) return v < TKP_THREADS_MAX || v == TKP_GPU_THREAD_NONE;
    return 1;
}

/* The reason value v of field f is refused (gpu_value_ok said it is); `at` prefixes it. */
static int gpu_value_fail(struct dec *d, const char *at, const struct gpu_field *f, uint64_t v)
{
    if (v > UINT32_MAX)
        return fail(d, "%sfield '%s': %llu does not fit 32 bits", at, f->name,
                    (unsigned long long)v);
    return fail(d, "%sthread index %u above the limit %u", at, (unsigned)v, TKP_THREADS_MAX - 1);
}

static int gpu_rec(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    if (r->type == TKP_REC_GPU_INFO) {
        struct tkp_record *x = r;
        x->gpu_info.mode = b->gpu_str[0];
        x->gpu_info.reason = b->gpu_str[1];
        x->gpu_info.clock = b->gpu_str[2];
        return u32f(d, "status", &x->gpu_info.status) ||
               strf(d, "mode", b->gpu_str[0], sizeof b->gpu_str[0]) ||
               strf(d, "reason", b->gpu_str[1], sizeof b->gpu_str[1]) ||
               strf(d, "clock", b->gpu_str[2], sizeof b->gpu_str[2]) ||
               u64f(d, "records", &x->gpu_info.records) ||
               u64f(d, "dropped", &x->gpu_info.dropped) ||
               u64f(d, "bad_time", &x->gpu_info.bad_time) ||
               u64f(d, "unjoined", &x->gpu_info.unjoined) ||
               u64f(d, "filtered", &x->gpu_info.filtered) ||
               u64f(d, "buffer_bytes_peak", &x->gpu_info.buffer_bytes_peak);
    }
    const struct gpu_field *f = gpu_fields(r->type);
    unsigned nf = tkp_cols_fields(r->type);
    uint64_t v[TKP_COLS_FIELDS];
    for (unsigned i = 0; i < nf; i++) {
        if (f[i].kind == GF_ID ? idf(d, f[i].name, &v[i]) : u64f(d, f[i].name, &v[i])) return 1;
        if (!gpu_value_ok(f[i].kind, v[i])) return gpu_value_fail(d, "", &f[i], v[i]);
    }
    tkp_gpu_store(r, r->type, v);
    return 0;
}

/* The fields of a LIB_CALL after lib and op that a LIB_TMPL holds too: m .. a_ptr */
static int lib_shape(struct dec *d, struct tkp_record *x)
{
    return u64f(d, "m", &x->lib_call.m) || u64f(d, "n", &x->lib_call.n) ||
           u64f(d, "k", &x->lib_call.k) || u64f(d, "batch", &x->lib_call.batch) ||
           enumf(d, "atype", &x->lib_call.atype) || enumf(d, "btype", &x->lib_call.btype) ||
           enumf(d, "ctype", &x->lib_call.ctype) || enumf(d, "compute", &x->lib_call.compute) ||
           enumf(d, "transa", &x->lib_call.transa) || enumf(d, "transb", &x->lib_call.transb) ||
           u64f(d, "stream", &x->lib_call.stream) || u64f(d, "a_ptr", &x->lib_call.a_ptr);
}

/* ---- templates (FORMAT.md, "Templates") ---- */

static int tmplf(struct dec *d, uint32_t *id)
{
    if (u32f(d, "tmpl", id)) return TKP_ERR_RECORD;
    if (*id >= TKP_TMPL_MAX) return fail(d, "template id %u above the limit %u", *id, TKP_TMPL_MAX - 1);
    return 0;
}

/* A template slot for id, the table grown to hold it. */
static void *tmpl_slot(void **tab, uint32_t *cap, uint32_t id, size_t size)
{
    if (tkp_grow_to32(tab, cap, (size_t)id + 1, size, 64, 1)) return NULL;
    return (char *)*tab + (size_t)id * size;
}

/* TMPL and LIB_TMPL: decoded into a record of the type they stand for, then stored. */
static int tmpl_def(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint32_t id;
    if (tmplf(d, &id) || threadf(d, &r->thread)) return TKP_ERR_RECORD;
    if (r->type == TKP_REC_TMPL) {
        if (dec_LAUNCH(d, &r->launch)) return TKP_ERR_RECORD;
        struct tkp_launch_tmpl *t =
            tmpl_slot((void **)&b->ltmpl, &b->ltmpl_cap, id, sizeof(*b->ltmpl));
        if (!t) return TKP_ERR_NOMEM;
        *t = (struct tkp_launch_tmpl){.gen = b->gen, .thread = r->thread, .launch = r->launch};
        b->tmpl_id = id;
        return 0;
    }
    if (u32f(d, "lib", &r->lib_call.lib) || u64f(d, "op", &r->lib_call.op_id) ||
        lib_shape(d, r) || u32f(d, "status", &r->lib_call.status) ||
        u32f(d, "flags", &r->lib_call.flags))
        return TKP_ERR_RECORD;
    struct tkp_lib_tmpl *t = tmpl_slot((void **)&b->ctmpl, &b->ctmpl_cap, id, sizeof(*b->ctmpl));
    if (!t) return TKP_ERR_NOMEM;
    *t = (struct tkp_lib_tmpl){.gen = b->gen, .thread = r->thread, .lib = r->lib_call};
    b->tmpl_id = id;
    return 0;
}

/* LAUNCH_T and LIB_CALL_T: the record their template stands for, with their own fields. */
static int tmpl_use(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint32_t id, call = 0;
    uint64_t call_ns = 0;
    if (i64f(d, "dt", &b->dt) || u64f(d, "step", &r->step)) return TKP_ERR_RECORD;
    if (r->type == TKP_REC_LIB_CALL_T && u32f(d, "call", &call)) return TKP_ERR_RECORD;
    if (tmplf(d, &id)) return TKP_ERR_RECORD;
    if (r->type == TKP_REC_LAUNCH_T) {
        if (id >= b->ltmpl_cap || b->ltmpl[id].gen != b->gen)
            return fail(d, "template %u not defined in this chunk", id);
        r->type = TKP_REC_LAUNCH;
        r->thread = b->ltmpl[id].thread;
        r->launch = b->ltmpl[id].launch;
        return 0;
    }
    if (id >= b->ctmpl_cap || b->ctmpl[id].gen != b->gen)
        return fail(d, "template %u not defined in this chunk", id);
    if (u64f(d, "host_ns", &call_ns)) return TKP_ERR_RECORD;
    r->type = TKP_REC_LIB_CALL;
    r->thread = b->ctmpl[id].thread;
    r->lib_call = b->ctmpl[id].lib;
    r->lib_call.call = call;
    r->lib_call.call_ns = call_ns;
    return 0;
}

/* ---- runs (FORMAT.md, "Runs") ---- */

/* Where column [p, end) of n varints goes wrong (tkp_varints_ok said it does), as a reason. */
static int column_fail(struct dec *d, const char *name, const uint8_t *p, const uint8_t *end,
                       uint32_t n)
{
    uint64_t v;
    for (uint32_t i = 0; i < n; i++)
        if (!tkp_uvar(&p, end, &v)) { /* tkp_uvar leaves p at the varint's start */
            const uint8_t *q = p;
            while (q < end && *q & 0x80) q++;
            return fail(d, "record %u: column '%s' %s", i, name,
                        q < end ? "has a varint above 64 bits" : "ends early");
        }
    return fail(d, "column '%s' has bytes after its %u values", name, n);
}

static int run_small(struct tkp_decode_buf *b, const uint8_t *kinds, const uint8_t *tm,
                     const uint8_t *tm_end, const uint8_t *ca, const uint8_t *ca_end, uint32_t n,
                     uint32_t call0, int rep);
static int run_values(struct dec *d, const struct tkp_decode_buf *b, const uint8_t *kinds,
                      const uint8_t *tm, const uint8_t *ca, uint32_t n, uint32_t call0);

/* RUN: [step, n, call, kinds, dts, tmpls, calls, host_ns] (run_check checks it). */
static int run_check(struct dec *d, struct tkp_decode_buf *b, uint64_t step, uint32_t n,
                     uint32_t call0, const uint8_t **p, const uint8_t **end, int rep);

static int run_open(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    static const char *const col[5] = {"kinds", "dts", "tmpls", "calls", "host_ns"};
    const uint8_t *p[5], *end[5];
    uint32_t n, len, call0;
    if (u64f(d, "step", &r->step) || u32f(d, "n", &n) || u32f(d, "call", &call0))
        return TKP_ERR_RECORD;
    if (n == 0 || n > TKP_RUN_MAX) return fail(d, "%u records, expected 1 to %u", n, TKP_RUN_MAX);
    int rep = 0; /* kinds and tmpls nil: it repeats the chunk's last RUN (version 4) */
    for (int i = 0; i < 5; i++) {
        if ((i == 0 || i == 2) && tkp_mp_peek(d->c) == TKP_MP_NIL) {
            if (i == 2 && !rep) return fail(d, "tmpls is nil, kinds is not");
            tkp_mp_skip(d->c);
            rep = 1;
            continue;
        }
        if (i == 2 && rep) return fail(d, "kinds is nil, tmpls is not");
        if (tkp_mp_bin(d->c, &p[i], &len)) return bad_type(d, col[i], "a bin", TKP_MP_BIN);
        end[i] = p[i] + len;
    }
    return run_check(d, b, r->step, n, call0, p, end, rep);
}

/* The RUN whose header tkp_run_head() read, checked as run_open() checks it. Returns 1 when its
 * header was read and it is good, a negative code when it is bad, 0 to read it the general way. */
static int run_fast(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b, char *why,
                    size_t whylen)
{
    struct tkp_run_head h;
    const uint8_t *after, *p[5], *end[5];
    if (!tkp_run_head(c->p, c->end, &h, &after) || h.n > UINT32_MAX || h.call > UINT32_MAX)
        return 0;
    struct dec d = {c, "RUN", why, whylen, 8, 0};
    for (int k = 0; k < 5; k++) /* kinds and tmpls NULL when it repeats */
        p[k] = h.col[k], end[k] = h.col[k] ? h.col[k] + h.len[k] : NULL;
    int err = run_check(&d, b, h.step, (uint32_t)h.n, (uint32_t)h.call, p, end, h.rep);
    if (err) return err;
    r->type = TKP_REC_RUN;
    r->step = h.step;
    c->p = after;
    return 1;
}

/* A RUN of n records from call0 with columns [p, end) (kinds and tmpls unset when rep), every
 * column read to its end here, so that delivering its records (tkp_record_run_batch) needs no
 * check. The templates it uses must be defined at this point of the chunk, as for LAUNCH_T and
 * LIB_CALL_T. */
static int run_check(struct dec *d, struct tkp_decode_buf *b, uint64_t step, uint32_t n,
                     uint32_t call0, const uint8_t **p, const uint8_t **end, int rep)
{
    static const char *const col[5] = {"kinds", "dts", "tmpls", "calls", "host_ns"};
    uint32_t libs = 0;
    if (n == 0 || n > TKP_RUN_MAX) return fail(d, "%u records, expected 1 to %u", n, TKP_RUN_MAX);
    if (rep) { /* the columns of the RUN it repeats, which was checked */
        struct tkp_run *u = &b->run;
        if (!u->pn) return fail(d, "repeats a RUN, none before it in the chunk");
        if (u->pn != n) return fail(d, "repeats a RUN of %u records with %u", u->pn, n);
        uint32_t l[5];
        tkp_run_repeat(u, p, l);
        end[0] = p[0] + l[0], end[2] = p[2] + l[2];
    }
    if (TKP_GROW_FROM(b->run.pv, b->run.pcap, n, 64)) return TKP_ERR_NOMEM;
    if (end[0] - p[0] != n)
        return fail(d, "kinds has %u bytes for %u records", (uint32_t)(end[0] - p[0]), n);
    const uint8_t *kinds = p[0];
    if (rep) {
        libs = b->run.plibs; /* the repeated RUN's kinds and tmpls were checked with it */
    } else {
        uint64_t badkind = 0;
        uint32_t i = 0;
        for (; i + 8 <= n; i += 8) { /* eight kinds at a time: their sum is the library calls */
            uint64_t w = tkp_load64(kinds + i);
            badkind |= w & 0xfefefefefefefefeull;
            libs += (uint32_t)((w * 0x0101010101010101ull) >> 56);
        }
        for (; i < n; i++) {
            badkind |= kinds[i] & 0xfe;
            libs += kinds[i] & 1;
        }
        if (badkind)
            for (i = 0; i < n; i++)
                if (kinds[i] > 1)
                    return fail(d, "record %u: kind %u, expected 0 or 1", i, kinds[i]);
    }
    for (int c = 1; c < 5; c++)
        if (!(c == 2 && rep) && !tkp_varints_ok(p[c], end[c], c == 4 ? libs : n))
            return column_fail(d, col[c], p[c], end[c], c == 4 ? libs : n);
    /* the columns are whole: the values that have limits */
    if (!run_small(b, kinds, p[2], end[2], p[3], end[3], n, call0, rep)) {
        int err = run_values(d, b, kinds, p[2], p[3], n, call0);
        if (err) return err;
    }
    uint32_t lens[5];
    for (int c = 0; c < 5; c++) lens[c] = (uint32_t)(end[c] - p[c]);
    tkp_run_begin(&b->run, n, step, call0, p, lens, rep);
    b->run.plibs = libs;
    return 0;
}

/* A run's template and call steps in range, the usual way: call steps of one byte each (the
 * column is n bytes long) and template ids below TKP_TMPL_OK_IDS. A call step x moves a call id
 * by at most (x + 1) / 2 from the last library call's id + 1 (zigzag; a launch's x - 1), so every
 * call id lies within call0 - S .. call0 + n + 1 + S, S the sum of those bounds over the run:
 * when that range is within 1..UINT32_MAX no call id is out of range. Each template is looked up
 * once a chunk. Returns 1 when the run is such and good, 0 to check it value by value
 * (run_values, which says which value is out). */
static int run_small(struct tkp_decode_buf *b, const uint8_t *kinds, const uint8_t *tm,
                     const uint8_t *tm_end, const uint8_t *ca, const uint8_t *ca_end, uint32_t n,
                     uint32_t call0, int rep)
{
    if (ca_end - ca != n) return 0;
    /* a template defined in this chunk stays defined in it */
    if (b->tmpl_ok_gen != b->gen) {
        memset(b->tmpl_ok, 0, sizeof(b->tmpl_ok));
        b->tmpl_ok_gen = b->gen;
    }
    unsigned calls = 0;
    if (rep) { /* the template ids of the RUN it repeats, which were checked with it */
        uint64_t w = 0;
        uint32_t i = 0;
        for (; i + 8 <= n; i += 8)
            w |= tkp_load64(ca + i);
        for (; i < n; i++)
            w |= ca[i];
        calls = (w & 0xfefefefefefefefeull) ? 2 : (unsigned)(w != 0);
    } else if (tm_end - tm == n) { /* one-byte ids (< 128): the ids used, then each looked up */
        uint64_t used[2][2] = {{0, 0}, {0, 0}}; /* by kind */
        for (uint32_t i = 0; i < n; i++) {
            used[kinds[i]][tm[i] >> 6] |= 1ull << (tm[i] & 63);
            calls |= ca[i];
        }
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++)
                for (uint64_t w = used[k][j] & ~b->tmpl_ok[k][j]; w; w &= w - 1) {
                    unsigned id = (unsigned)(j * 64 + __builtin_ctzll(w));
                    if (k ? id >= b->ctmpl_cap || b->ctmpl[id].gen != b->gen
                          : id >= b->ltmpl_cap || b->ltmpl[id].gen != b->gen)
                        return 0;
                    b->tmpl_ok[k][j] |= 1ull << (id & 63);
                }
    } else { /* longer ids (the column is whole: tkp_uvar_ok) */
        for (uint32_t i = 0; i < n; i++) {
            uint64_t id = tkp_uvar_ok(&tm);
            unsigned k = kinds[i];
            calls |= ca[i];
            if (id >= TKP_TMPL_OK_IDS) return 0;
            uint64_t bit = 1ull << (id & 63), *ok = &b->tmpl_ok[k][id >> 6];
            if (*ok & bit) continue;
            if (k ? id >= b->ctmpl_cap || b->ctmpl[id].gen != b->gen
                  : id >= b->ltmpl_cap || b->ltmpl[id].gen != b->gen)
                return 0;
            *ok |= bit;
        }
    }
    if (calls > 1) {
        uint64_t moves = 0;
        for (uint32_t i = 0; i < n; i++)
            moves += (ca[i] + 1u) >> 1;
        return call0 >= moves + 1 && (uint64_t)call0 + n + 1 + moves <= UINT32_MAX;
    }
    return (uint64_t)call0 + n <= UINT32_MAX; /* steps of 0 and 1: within call0 .. call0 + n */
}

/* Each template id and call id of a run against its limits, with the reason of the first that
 * is out (the columns are whole). */
static int run_values(struct dec *d, const struct tkp_decode_buf *b, const uint8_t *kinds,
                      const uint8_t *tm, const uint8_t *ca, uint32_t n, uint32_t call0)
{
    int64_t call = call0; /* the last library call's id */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = tkp_uvar_ok(&tm), x = tkp_uvar_ok(&ca);
        unsigned kind = kinds[i];
        if (__builtin_expect(id >= TKP_TMPL_MAX, 0))
            return fail(d, "record %u: template id %llu above the limit %u", i,
                        (unsigned long long)id, TKP_TMPL_MAX - 1);
        if (kind ? id >= b->ctmpl_cap || b->ctmpl[id].gen != b->gen
                 : id >= b->ltmpl_cap || b->ltmpl[id].gen != b->gen)
            return fail(d, "record %u: template %u not defined in this chunk", i, (unsigned)id);
        if (!kind && !x) continue; /* a launch outside any library call */
        /* the call's distance from the last library call's id + 1, zigzag; launches + 1 */
        int64_t got;
        if (__builtin_add_overflow(call + 1, tkp_unzigzag(x - !kind), &got) || got < !kind ||
            got > UINT32_MAX)
            return fail(d, "record %u: call id out of range", i);
        if (kind) call = got;
    }
    return 0;
}

/* ---- columns (FORMAT.md, "Columns") ---- */

/* Whether the n values of a column of varints (whole, len bytes) are all within field f's
 * limits: the prefix sums of its zigzag deltas. When every varint after the first is one byte
 * (a field that moves by less than 64 from record to record: most do) they are read as bytes. */
#define COLS_SUMS(next, ok)                                                                        \
    do {                                                                                           \
        for (uint32_t i = 0; i < m; i++) {                                                         \
            v += (uint64_t)tkp_unzigzag(next);                                                     \
            bad |= !(ok);                                                                          \
        }                                                                                          \
    } while (0)
static int cols_values_ok(const struct gpu_field *f, const uint8_t *p, uint32_t len, uint32_t n)
{
    const uint8_t *end = p + len;
    uint64_t v = (uint64_t)tkp_unzigzag(tkp_uvar_ok(&p)), bad = !gpu_value_ok(f->kind, v);
    uint32_t m = n - 1; /* the values after the first */
    int small = end - p == m;
    if (small && !bad) {
        /* one-byte deltas (|d| <= 64): the values lie within [v - down, v + up], sums that do
         * not depend on each other (vectorised); only when those bounds are out are the values
         * summed one by one */
        uint32_t up = 0, down = 0;
        for (uint32_t i = 0; i < m; i++) {
            uint32_t x = p[i];
            up += x & 1 ? 0 : x >> 1;
            down += x & 1 ? (x + 1) >> 1 : 0;
        }
        if (f->kind == GF_U32 ? v >= down && v + up <= UINT32_MAX
                              : (v >= down && v + up < TKP_THREADS_MAX) || (!up && !down))
            return 1;
    }
    if (f->kind == GF_U32) {
        if (small)
            COLS_SUMS(p[i], v <= UINT32_MAX);
        else
            COLS_SUMS(tkp_uvar_ok(&p), v <= UINT32_MAX);
    } else if (small) { /* GF_THREAD */
        COLS_SUMS(p[i], gpu_value_ok(GF_THREAD, v));
    } else {
        COLS_SUMS(tkp_uvar_ok(&p), gpu_value_ok(GF_THREAD, v));
    }
    return !bad;
}
#undef COLS_SUMS

/* COLS: [type, n, nfields, col_1 .. col_nfields], every column read to its end and every value
 * with a limit checked here, so that delivering its records needs no check. */
static int cols_open(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint64_t type;
    uint32_t n, nf;
    if (u64f(d, "type", &type) || u32f(d, "n", &n) || u32f(d, "nfields", &nf))
        return TKP_ERR_RECORD;
    unsigned known = tkp_cols_fields(type);
    const char *tname = tkp_record_type_name(type);
    if (!known)
        return fail(d, "records of type %llu%s%s%s, only GPU_KERNEL and GPU_COPY may be columns",
                    (unsigned long long)type, tname ? " (" : "", tname ? tname : "",
                    tname ? ")" : "");
    if (nf < known) return fail(d, "%u fields for %s, expected at least %u", nf, tname, known);
    if (n == 0 || n > TKP_COLS_MAX)
        return fail(d, "%u records, expected 1 to %u", n, TKP_COLS_MAX);
    if (d->nelem - 3 < nf)
        return fail(d, "%u columns, nfields says %u", d->nelem - 3, nf);
    const struct gpu_field *f = gpu_fields(type);
    const uint8_t *col[TKP_COLS_FIELDS];
    uint32_t lens[TKP_COLS_FIELDS];
    char cname[48]; /* a column's name, for a reason */
#define CNAME(k) (snprintf(cname, sizeof cname, "%u (%s)", (k) + 1, (k) < known ? f[k].name : "extra"), cname)
    for (uint32_t k = 0; k < nf; k++) {
        const uint8_t *p;
        uint32_t len;
        if (tkp_mp_bin(d->c, &p, &len)) return bad_type(d, CNAME(k), "a bin", TKP_MP_BIN);
        if (!tkp_varints_ok(p, p + len, n)) return column_fail(d, CNAME(k), p, p + len, n);
        if (k >= known) continue;
        col[k] = p;
        lens[k] = len;
        if (f[k].kind != GF_U32 && f[k].kind != GF_THREAD) continue; /* every 64-bit value is one */
        if (cols_values_ok(&f[k], p, len, n)) continue;
        uint64_t v = 0; /* the first value out: the reason, as for a record of its own */
        for (uint32_t i = 0;; i++) {
            v += (uint64_t)tkp_unzigzag(tkp_uvar_ok(&p));
            if (!gpu_value_ok(f[k].kind, v)) {
                char at[32];
                snprintf(at, sizeof at, "record %u: ", i);
                return gpu_value_fail(d, at, &f[k], v);
            }
        }
    }
#undef CNAME
    d->used = nf;
    r->type = TKP_REC_COLS;
    tkp_cols_begin(&b->cols, (uint32_t)type, n, col, lens);
    return 0;
}

/* ---- GPU templates (FORMAT.md, "GPU templates", version 6) ---- */

/* GPU_TMPL: [gtmpl, name, stream, thread, join, graph, node, gx, gy, gz, bx, by, bz], checked as
 * a GPU_KERNEL's same fields and stored as one with the varying fields 0. */
static int gpu_tmpl_def(struct dec *d, struct tkp_decode_buf *b)
{
    static const uint8_t at[12] = {2, 3, 5, 7, 9, 10, 11, 12, 13, 14, 15, 16}; /* after gtmpl */
    uint32_t id;
    if (u32f(d, "gtmpl", &id)) return TKP_ERR_RECORD;
    if (id >= TKP_GPU_TMPL_MAX)
        return fail(d, "GPU template %u, above the limit %u", id, TKP_GPU_TMPL_MAX - 1);
    uint64_t v[TKP_COLS_FIELDS] = {0};
    for (unsigned i = 0; i < 12; i++) {
        const struct gpu_field *f = &kernel_fields[at[i]];
        if (f->kind == GF_ID ? idf(d, f->name, &v[at[i]]) : u64f(d, f->name, &v[at[i]]))
            return TKP_ERR_RECORD;
        if (!gpu_value_ok(f->kind, v[at[i]])) return gpu_value_fail(d, "", f, v[at[i]]);
    }
    struct tkp_gpu_tmpl *t = tmpl_slot((void **)&b->gtmpl, &b->gtmpl_cap, id, sizeof(*b->gtmpl));
    if (!t) return TKP_ERR_NOMEM;
    memcpy(t->v, v, sizeof v);
    t->gen = b->gen;
    b->tmpl_id = id;
    return 0;
}

/* GPU_RUN: [n, tmpls, starts, durs, joins], every column read to its end, every template
 * defined in the chunk and every correlation and index within 32 bits, so that delivering its
 * records (capture/gputmpl.c) needs no check. */
static int gpu_run_open(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    static const char *const cname[4] = {"tmpls", "starts", "durs", "joins"};
    uint32_t n, len[4];
    const uint8_t *col[4];
    if (u32f(d, "n", &n)) return TKP_ERR_RECORD;
    if (n == 0 || n > TKP_GPU_RUN_MAX)
        return fail(d, "%u records, expected 1 to %u", n, TKP_GPU_RUN_MAX);
    for (unsigned k = 0; k < 4; k++) {
        if (tkp_mp_bin(d->c, &col[k], &len[k])) return bad_type(d, cname[k], "a bin", TKP_MP_BIN);
        if (k < 3 && !tkp_varints_ok(col[k], col[k] + len[k], n))
            return column_fail(d, cname[k], col[k], col[k] + len[k], n);
    }
    const uint8_t *q = col[0];
    uint64_t joins = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = tkp_uvar_ok(&q), id = v >> 2;
        if (id >= b->gtmpl_cap || b->gtmpl[id].gen != b->gen)
            return fail(d, "record %u: GPU template %llu not defined in this chunk", i,
                        (unsigned long long)id);
        joins += (v & 3) == TKP_GMODE_JOINS;
    }
    if (!tkp_varints_ok(col[3], col[3] + len[3], 3 * joins))
        return column_fail(d, cname[3], col[3], col[3] + len[3], (uint32_t)(3 * joins));
    uint64_t corr = 0, step = 0, index = 0;
    const uint8_t *j = col[3];
    q = col[0];
    for (uint32_t i = 0; i < n; i++) {
        tkp_gpu_joins_next(tkp_uvar_ok(&q) & 3, &j, &corr, &step, &index);
        if (corr > UINT32_MAX || index > UINT32_MAX)
            return fail(d, "record %u: field '%s': %llu does not fit 32 bits", i,
                        corr > UINT32_MAX ? "correlation" : "index",
                        (unsigned long long)(corr > UINT32_MAX ? corr : index));
    }
    r->type = (enum tkp_rec)TKP_REC_GPU_RUN;
    struct tkp_cols *u = &b->cols;
    u->type = TKP_REC_GPU_KERNEL;
    u->nf = TKP_COLS_FIELDS;
    u->left = n;
    u->i = u->n = 0;
    u->small = 0;
    u->first = 1;
    u->gpu_run = 1;
    for (unsigned k = 0; k < 4; k++) {
        u->col[k] = col[k];
        u->prev[k] = 0;
    }
    return 0;
}

/* STACK: [id, [pc, ...]] */
static int stack(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint32_t n;
    if (u64f(d, "stack", &r->stack.id)) return TKP_ERR_RECORD;
    if (tkp_mp_array(d->c, &n)) return bad_type(d, "pcs", "an array", TKP_MP_ARRAY);
    if (n > TKP_STACK_MAX_FRAMES)
        return fail(d, "%u frames, above the limit %u", n, TKP_STACK_MAX_FRAMES);
    if (TKP_GROW_FROM(b->pcs, b->pcs_cap, n ? n : 1, 64)) return TKP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        if (u64f(d, "pcs[]", &b->pcs[i])) return TKP_ERR_RECORD;
    r->stack.n = n;
    r->stack.pcs = b->pcs;
    return 0;
}

static int body(struct dec *d, struct tkp_record *r, struct tkp_decode_buf *b)
{
    uint32_t tid;
    switch (r->type) {
    case TKP_REC_CHUNK:
        return u64f(d, "seq", &r->chunk.seq) || u64f(d, "base_ns", &r->chunk.base_ns);
    case TKP_REC_NAME:
        if (u64f(d, "id", &r->name.id)) return TKP_ERR_RECORD;
        if (tkp_mp_str(d->c, &b->name_raw, &b->name_len))
            return bad_type(d, "string", "a str", TKP_MP_STR);
        return 0;
    case TKP_REC_META:
        return meta(d, r, b);
    case TKP_REC_THREAD:
        if (threadf(d, &r->thread) || u32f(d, "os_tid", &tid)) return TKP_ERR_RECORD;
        r->tid = tid;
        return 0;
    case TKP_REC_GRAPH_LAUNCH:
        /* graph -1: a graph instantiated before capture started (topology unknown) */
        if (head(d, r, b)) return TKP_ERR_RECORD;
        if (tkp_mp_peek(d->c) == TKP_MP_INT) {
            int64_t g;
            if (i64f(d, "graph", &g) || g != -1) return fail(d, "graph id %lld", (long long)g);
            r->graph_launch.graph = TKP_GRAPH_UNKNOWN;
        } else if (u64f(d, "graph", &r->graph_launch.graph))
            return TKP_ERR_RECORD;
        return
               u64f(d, "stream", &r->graph_launch.stream) || u32f(d, "via", &r->graph_launch.via);
    case TKP_REC_GRAPH:
        if (u64f(d, "graph", &r->graph.graph)) return TKP_ERR_RECORD;
        return graph_nodes(d, r, b);
        /* LAUNCH (its trailing call and stack: tkp_record_decode), COPY, SYNC, EVENT_RECORD,
         * STREAM_WAIT, STEP, NVTX (its string: the reader), MARKER, LIB_CALL, LOSS */
        TKP_RECORDS_FIXED(DEC_R, DEC_F, DEC_X)
    case TKP_REC_STACK:
        return stack(d, r, b);
    case TKP_REC_MODULE:
        r->module.path = b->path;
        r->module.build_id = b->build_id;
        return u64f(d, "module", &r->module.id) || strf(d, "path", b->path, sizeof b->path) ||
               strf(d, "build_id", b->build_id, sizeof b->build_id) ||
               u64f(d, "base", &r->module.base) || u64f(d, "size", &r->module.size);
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
    case TKP_REC_GPU_INFO:
        return gpu_rec(d, r, b);
    case TKP_REC_TMPL:
    case TKP_REC_LIB_TMPL:
        return tmpl_def(d, r, b);
    case TKP_REC_LAUNCH_T:
    case TKP_REC_LIB_CALL_T:
        return tmpl_use(d, r, b);
    case TKP_REC_RUN:
        return run_open(d, r, b);
    case TKP_REC_COLS:
        return cols_open(d, r, b);
    }
    return TKP_ERR_RECORD;
}

int tkp_record_decode(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b, char *why,
                      size_t whylen)
{
    struct dec d = {c, "?", why, whylen, 0, 0};
    uint32_t n;
    uint64_t type;
    const uint8_t *start = c->p;
    int k = run_fast(c, r, b, why, whylen); /* most records of a capture are in RUNs */
    if (k) return k < 0 ? k : TKP_DECODE_RUN;
    if (tkp_mp_array(c, &n))
        return tkp_mp_peek(c) == TKP_MP_ARRAY
                   ? fail(&d, "array longer than the payload")
                   : fail(&d, "not an array (msgpack %s)", tkp_mp_type_name(tkp_mp_peek(c)));
    if (n == 0 || tkp_mp_u64(c, &type)) return fail(&d, "no record type");
    d.rec = tkp_record_type_name(type);
    if (!d.rec) {
        c->p = start; /* forward compatibility: a type we do not know is skipped whole */
        return tkp_mp_skip(c)
                   ? fail(&d, "unreadable record of unknown type %llu", (unsigned long long)type)
                   : 0;
    }
    if (n - 1 < min_fields[type])
        return fail(&d, "%u fields, expected %u", n - 1, min_fields[type]);
    memset(r, 0, sizeof(*r));
    r->type = (enum tkp_rec)type;
    b->dt = 0;
    d.nelem = n - 1;
    int err = type == TKP_REC_GPU_TMPL  ? gpu_tmpl_def(&d, b)
              : type == TKP_REC_GPU_RUN ? gpu_run_open(&d, r, b)
                                        : body(&d, r, b);
    if (err) return err < 0 ? err : TKP_ERR_RECORD;
    n -= 1 + min_fields[type] + d.used;
    /* LAUNCH's optional trailing `call` (inside a library call, else 0) and `stack` (a sampled
     * call stack); anything else there is an extra field of a later writer, skipped */
    if (n && r->type == TKP_REC_LAUNCH && tkp_mp_peek(c) == TKP_MP_UINT) {
        if (u32f(&d, "call", &r->launch.call)) return TKP_ERR_RECORD;
        n--;
        if (n && tkp_mp_peek(c) == TKP_MP_UINT) {
            if (u32f(&d, "stack", &r->launch.stack)) return TKP_ERR_RECORD;
            n--;
        }
    }
    for (; n; n--)
        if (tkp_mp_skip(c)) return fail(&d, "unreadable extra field");
    if (type == TKP_REC_RUN) return TKP_DECODE_RUN;
    if (type == TKP_REC_COLS || type == TKP_REC_GPU_RUN) return TKP_DECODE_COLS;
    return type == TKP_REC_TMPL || type == TKP_REC_LIB_TMPL || type == TKP_REC_GPU_TMPL
               ? TKP_DECODE_DEFINED
               : 1;
}

void tkp_decode_buf_free(struct tkp_decode_buf *b)
{
    free(b->nodes);
    free(b->deps);
    free(b->pcs);
    free(b->ltmpl);
    free(b->ctmpl);
    free(b->gtmpl);
    free(b->run.pv);
    b->run.pv = NULL;
    free(b->run.t32);
    b->run.t32 = NULL;
    b->run.t32_cap = 0;
    b->run.t32_col = NULL;
    b->run.pcap = 0;
    b->ltmpl = NULL;
    b->ctmpl = NULL;
    b->gtmpl = NULL;
    b->ltmpl_cap = b->ctmpl_cap = b->gtmpl_cap = 0;
    b->nodes = NULL;
    b->deps = NULL;
    b->pcs = NULL;
    b->pcs_cap = 0;
    b->nodes_cap = b->deps_cap = 0;
}

int tkp_meta_config(const struct tkp_record *r, const char *key, struct tkp_mp *c)
{
    uint32_t n, n2, len;
    const char *k;
    size_t kl = strlen(key);
    tkp_mp_init(c, r->meta.map, r->meta.map_len);
    if (!r->meta.map || tkp_mp_map(c, &n)) return 0;
    for (uint32_t i = 0; i < n; i++) {
        if (tkp_mp_peek(c) != TKP_MP_STR || tkp_mp_str(c, &k, &len)) return 0;
        if (len != 6 || memcmp(k, "config", 6) || tkp_mp_peek(c) != TKP_MP_MAP) {
            if (tkp_mp_skip(c)) return 0;
            continue;
        }
        if (tkp_mp_map(c, &n2)) return 0;
        for (uint32_t j = 0; j < n2; j++) {
            if (tkp_mp_peek(c) != TKP_MP_STR || tkp_mp_str(c, &k, &len)) return 0;
            if (len == kl && !memcmp(k, key, kl)) return 1;
            if (tkp_mp_skip(c)) return 0;
        }
        return 0;
    }
    return 0;
}

uint64_t tkp_meta_config_uint(const struct tkp_record *r, const char *key, uint64_t dflt)
{
    struct tkp_mp c;
    uint64_t v;
    if (!tkp_meta_config(r, key, &c) || tkp_mp_peek(&c) != TKP_MP_UINT || tkp_mp_u64(&c, &v))
        return dflt;
    return v;
}
