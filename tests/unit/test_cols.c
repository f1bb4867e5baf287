/* Columns (docs/FORMAT.md, "Columns"): a COLS decodes to exactly the GPU_KERNEL and GPU_COPY
 * records it stands for, against the same records written one by one (a differential test over
 * seeded random records with extreme values, split into COLS at random points), every rule of
 * the section makes the chunk bad with a reason while the chunk before stays whole, extra fields
 * and elements are ignored, and COLS records read in a merged read. The COLS encoder here is
 * written from FORMAT.md alone (never shim/gpu/activity.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capgot.h"
#include "base/err.h"
#include "capture/multireader.h"
#include "capture/reader.h"

#define KERNEL TKP_REC_GPU_KERNEL
#define COPY TKP_REC_GPU_COPY

/* One GPU record: its type and its fields after the type, in payload order. */
struct grec {
    int type;
    uint64_t v[17];
};

static unsigned nfields(int type)
{
    return type == KERNEL ? 17 : 13;
}

/* graph and node: -1 (all bits) or an id */
static int is_id_field(int type, unsigned k)
{
    return type == KERNEL ? k == 9 || k == 10 : k == 11 || k == 12;
}

/* ---- writing ---- */

/* The record as msgpack: -1 for a graph or node of all bits, else unsigned ints. */
static void pack_plain(struct capw *w, const struct grec *g, unsigned extra)
{
    msgpack_packer *pk = capw_pk(w);
    unsigned nf = nfields(g->type);
    msgpack_pack_array(pk, 1 + nf + extra);
    msgpack_pack_uint64(pk, (uint64_t)g->type);
    for (unsigned k = 0; k < nf; k++) {
        if (is_id_field(g->type, k) && g->v[k] == UINT64_MAX)
            msgpack_pack_int64(pk, -1);
        else
            msgpack_pack_uint64(pk, g->v[k]);
    }
    for (unsigned k = 0; k < extra; k++) msgpack_pack_uint64(pk, k);
}

/* [29, type, n, nfields, cols...] from the raw columns given, then `extra` str elements. */
static void pack_cols_raw(struct capw *w, uint64_t type, uint64_t n, uint64_t nf, unsigned ncols,
                          const struct col *c, unsigned extra)
{
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 4 + ncols + extra);
    msgpack_pack_uint64(pk, TKP_REC_COLS);
    msgpack_pack_uint64(pk, type);
    msgpack_pack_uint64(pk, n);
    msgpack_pack_uint64(pk, nf);
    for (unsigned k = 0; k < ncols; k++) {
        msgpack_pack_bin(pk, c[k].n);
        msgpack_pack_bin_body(pk, c[k].p, c[k].n);
    }
    for (unsigned k = 0; k < extra; k++) msgpack_pack_str_with_body(pk, "x", 1);
}

/* The n records g[] (one type) as a COLS with `xf` extra fields (each its own column of
 * varying values) and `extra` elements after the columns. */
static void pack_cols(struct capw *w, const struct grec *g, size_t n, unsigned xf, unsigned extra)
{
    unsigned nf = nfields(g[0].type);
    struct col c[64] = {{0}};
    cr_assert(nf + xf <= 64);
    for (unsigned k = 0; k < nf + xf; k++) {
        uint64_t prev = 0;
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(g[i].type, g[0].type);
            uint64_t v = k < nf ? g[i].v[k] : (uint64_t)(i * 977 + k) << (k % 50);
            col_var(&c[k], zz((int64_t)(v - prev)));
            prev = v;
        }
    }
    pack_cols_raw(w, (uint64_t)g[0].type, n, nf + xf, nf + xf, c, extra);
    for (unsigned k = 0; k < nf + xf; k++) free(c[k].p);
}

/* ---- random records with extreme values ---- */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A 64-bit value: small, near 2^64, near 2^63, or anything. */
static uint64_t r64(uint64_t *s)
{
    switch (rng(s) % 6) {
    case 0: return rng(s) % 100;
    case 1: return UINT64_MAX - rng(s) % 100;
    case 2: return (1ull << 63) + rng(s) % 200 - 100;
    case 3: return rng(s);
    default: return 0;
    }
}

static uint32_t r32(uint64_t *s)
{
    switch (rng(s) % 5) {
    case 0: return (uint32_t)(rng(s) % 10);
    case 1: return UINT32_MAX - (uint32_t)(rng(s) % 3);
    case 2: return (uint32_t)rng(s);
    default: return 1u << (rng(s) % 32);
    }
}

/* Times that mostly advance (the usual capture) and sometimes jump anywhere. */
static void gen(uint64_t *s, struct grec *g, int type, uint64_t *clock)
{
    memset(g, 0, sizeof(*g));
    g->type = type;
    uint64_t *v = g->v;
    if (rng(s) % 8 == 0)
        *clock = r64(s);
    else
        *clock += rng(s) % 20000;
    v[0] = *clock;
    v[1] = rng(s) % 8 == 0 ? r64(s) : *clock + rng(s) % 5000;
    static const uint32_t threads[] = {0, 1, 2, 3, 10, 65535, TKP_GPU_THREAD_NONE};
    uint32_t thread = threads[rng(s) % 7];
    uint64_t step = rng(s) % 4 ? rng(s) % 50 : r64(s);
    uint64_t graph = rng(s) % 3 ? UINT64_MAX : r64(s), node = rng(s) % 3 ? UINT64_MAX : r64(s);
    uint32_t stream = rng(s) % 3 ? 7 : r32(s), corr = r32(s), join = r32(s) % 4, index = r32(s);
    if (type == KERNEL) {
        uint64_t name = rng(s) % 9 ? rng(s) % 8 : 1000 + rng(s) % 3; /* 8..: never defined */
        uint64_t f[17] = {v[0],  v[1],  name,   stream, corr,   thread, step,   join, index,
                          graph, node,  r32(s), r32(s), r32(s), r32(s), r32(s), r32(s)};
        memcpy(v, f, sizeof(f));
    } else {
        uint64_t f[13] = {v[0],   v[1],  rng(s) % 2, rng(s) % 5, r64(s), stream, corr,
                          thread, step,  join,       index,      graph,  node};
        memcpy(v, f, sizeof(f));
    }
}

static void chunk_head(struct capw *w, uint64_t base)
{
    static const char *const names[8] = {"gemm", "softmax", "rmsnorm", "rope",
                                         "attn", "silu",    "add",     "embed"};
    capw_chunk_begin(w, base);
    for (uint32_t t = 0; t < 4; t++) capw_thread(w, t, 700 + t);
    capw_thread(w, 65535, 9999);
    for (uint64_t k = 0; k < 8; k++) capw_name(w, k, names[k]);
}

/* A capture of `nrec` random GPU records (and a MARKER now and then) in chunks: `cols` 0 writes
 * each record on its own, 1 writes runs of one type as COLS split at random points (with extra
 * fields and elements now and then), some records still on their own. */
static void write_capture(struct capw *w, uint64_t seed, size_t nrec, int cols)
{
    uint64_t s = seed, clock = 1000;
    uint64_t cs = seed ^ 0x5555; /* the COLS choices: their own stream, so records stay equal */
    struct grec *g = calloc(nrec, sizeof(*g));
    cr_assert(g);
    int type = KERNEL;
    for (size_t i = 0; i < nrec; i++) {
        if (rng(&s) % 50 == 0) type = type == KERNEL ? COPY : KERNEL;
        gen(&s, &g[i], type, &clock);
    }
    size_t i = 0;
    int chunk = 0;
    while (i < nrec) {
        chunk_head(w, 1000 * (uint64_t)++chunk);
        size_t end = i + 1 + rng(&s) % 3000;
        if (end > nrec) end = nrec;
        while (i < end) {
            if (rng(&s) % 40 == 0) capw_marker(w, (int64_t)(rng(&s) % 1000) - 500, 1, 3, 0, 7);
            size_t j = i + 1;
            while (j < end && g[j].type == g[i].type && j - i < 1 + rng(&s) % 400) j++;
            if (!cols) {
                for (; i < j; i++) pack_plain(w, &g[i], 0);
                continue;
            }
            switch (rng(&cs) % 8) {
            case 0: /* on their own */
                for (; i < j; i++) pack_plain(w, &g[i], rng(&cs) % 3 == 0 ? 2 : 0);
                break;
            case 1:
                pack_cols(w, &g[i], j - i, 1 + (unsigned)(rng(&cs) % 3), 0);
                i = j;
                break;
            case 2:
                pack_cols(w, &g[i], j - i, 0, 1 + (unsigned)(rng(&cs) % 20));
                i = j;
                break;
            default:
                pack_cols(w, &g[i], j - i, 0, 0);
                i = j;
                break;
            }
        }
        capw_chunk_end(w);
    }
    free(g);
}

static void differential(uint64_t seed, size_t nrec)
{
    struct capw *a = capw_new(), *b = capw_new();
    struct got ga, gb;
    write_capture(a, seed, nrec, 0);
    write_capture(b, seed, nrec, 1);
    read_all(a, &ga);
    read_all(b, &gb);
    cr_assert_eq(ga.end, 0, "%s", ga.err.msg);
    cr_assert_gt(ga.n, nrec, "every record and the chunks");
    char what[64];
    snprintf(what, sizeof what, "seed %llu", (unsigned long long)seed);
    same(&ga, &gb, what);
    got_free(&ga);
    got_free(&gb);
    capw_free(a);
    capw_free(b);
}

Test(cols, differential_against_single_records)
{
    for (uint64_t seed = 1; seed <= 10; seed++) differential(seed * 0x9e3779b97f4a7c15ull, 20000);
}

/* The values the generator may miss, each in a COLS and on its own. */
Test(cols, extreme_values_read_as_single_records_do)
{
    static const struct grec g[] = {
        {KERNEL, {UINT64_MAX, UINT64_MAX, 0, UINT32_MAX, UINT32_MAX, TKP_GPU_THREAD_NONE,
                  UINT64_MAX, 0, 0, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
                  UINT32_MAX, UINT32_MAX, UINT32_MAX}},
        {KERNEL, {0, 1, 3, 0, 0, 65535, 0, 1, UINT32_MAX, UINT64_MAX - 1, 1ull << 63, 0, 0, 0, 0,
                  0, 0}},
        {KERNEL, {1ull << 63, (1ull << 63) - 1, 5, 1, 2, 0, 1ull << 63, 3, 4, 0, 0, 1, 1, 1, 1, 1,
                  1}},
        {KERNEL, {UINT64_MAX, 0, 7, UINT32_MAX, 0, 3, 2, 0, 0, UINT64_MAX, 0, 2, UINT32_MAX, 2,
                  UINT32_MAX, 0, UINT32_MAX}},
    };
    struct capw *a = capw_new(), *b = capw_new();
    struct got ga, gb;
    chunk_head(a, 5);
    chunk_head(b, 5);
    for (size_t i = 0; i < 4; i++) pack_plain(a, &g[i], 0);
    pack_cols(b, g, 4, 0, 0);
    capw_chunk_end(a);
    capw_chunk_end(b);
    read_all(a, &ga);
    read_all(b, &gb);
    cr_assert_eq(ga.end, 0, "%s", ga.err.msg);
    cr_assert_eq(ga.n, 5);
    same(&ga, &gb, "extremes");
    cr_assert_eq(gb.s[1].thread, TKP_GPU_THREAD_NONE);
    cr_assert_eq(gb.s[1].tid, 0);
    cr_assert_eq(gb.s[1].x[7], TKP_GRAPH_UNKNOWN, "graph -1");
    cr_assert_eq(gb.s[2].tid, 9999, "thread 65535 is a thread");
    cr_assert_eq(gb.s[2].x[8], 1ull << 63);
    cr_assert_str_eq(gb.s[2].name, "rope");
    cr_assert_eq(gb.s[1].x[0], UINT64_MAX);
    got_free(&ga);
    got_free(&gb);
    capw_free(a);
    capw_free(b);
}

/* A COLS of the most records, across the reader's batches, with a copy COLS after it. */
Test(cols, the_largest_cols)
{
    struct grec *g = calloc(TKP_COLS_MAX, sizeof(*g));
    cr_assert(g);
    uint64_t s = 77, clock = 0;
    for (size_t i = 0; i < TKP_COLS_MAX; i++) gen(&s, &g[i], KERNEL, &clock);
    struct grec c;
    gen(&s, &c, COPY, &clock);
    struct capw *a = capw_new(), *b = capw_new();
    struct got ga, gb;
    chunk_head(a, 5);
    chunk_head(b, 5);
    for (size_t i = 0; i < TKP_COLS_MAX; i++) pack_plain(a, &g[i], 0);
    pack_plain(a, &c, 0);
    pack_cols(b, g, TKP_COLS_MAX, 0, 0);
    pack_cols(b, &c, 1, 0, 0);
    capw_chunk_end(a);
    capw_chunk_end(b);
    read_all(a, &ga);
    read_all(b, &gb);
    cr_assert_eq(gb.end, 0, "%s", gb.err.msg);
    cr_assert_eq(gb.n, TKP_COLS_MAX + 2);
    same(&ga, &gb, "65536");
    got_free(&ga);
    got_free(&gb);
    capw_free(a);
    capw_free(b);
    free(g);
}

/* ---- rules ---- */

/* The two good records every case starts from: kernels of thread 1, name 2. */
static const struct grec good2[2] = {
    {KERNEL, {100, 150, 2, 7, 40, 1, 3, 1, 0, UINT64_MAX, UINT64_MAX, 64, 1, 1, 128, 1, 1}},
    {KERNEL, {160, 230, 2, 7, 41, 1, 3, 1, 1, UINT64_MAX, UINT64_MAX, 64, 1, 1, 128, 1, 1}},
};

/* good2's columns, column k replaced by `bad` (k < 0: none). */
static void good_columns(struct col *c, unsigned ncols, int k, const struct col *bad)
{
    memset(c, 0, sizeof(*c) * ncols);
    for (unsigned f = 0; f < ncols; f++) {
        uint64_t prev = 0;
        for (int i = 0; i < 2; i++) {
            uint64_t v = f < 17 ? good2[i].v[f] : 9;
            col_var(&c[f], zz((int64_t)(v - prev)));
            prev = v;
        }
    }
    if (k >= 0) {
        free(c[k].p);
        c[k].p = malloc(bad->n + 1);
        memcpy(c[k].p, bad->p, bad->n);
        c[k].n = c[k].cap = bad->n;
    }
}

static struct capw *good_first_chunk(void)
{
    struct capw *w = capw_new();
    chunk_head(w, 0);
    pack_cols(w, good2, 2, 0, 0);
    capw_chunk_end(w);
    chunk_head(w, 100);
    return w;
}

static void expect_bad_second_chunk(struct capw *w, const char *what, const char *msg)
{
    struct got g;
    expect_bad_last_chunk(w, what, "COLS record", msg, 3, &g); /* CHUNK and its 2 kernels */
    cr_assert_eq(g.s[2].type, KERNEL, "%s", what);
    cr_assert_eq(g.s[2].x[4], 41, "%s", what);
    cr_assert_str_eq(g.s[2].name, "rmsnorm", "%s", what);
    got_free(&g);
}

#define B(s) {(uint8_t *)(s), sizeof(s) - 1, sizeof(s) - 1}

struct bad_case {
    const char *what;
    uint64_t type, n, nfields;
    unsigned ncols;
    int k;          /* the column replaced, or -1 */
    struct col bad; /* by this */
    const char *msg;
};

/* zigzag deltas: 2 -> +1, 1 -> -1; 0x80 0x80 0x80 0x80 0x20 = 2^33 (zigzag of 2^32) */
static const struct bad_case bad_cases[] = {
    {"a LAUNCH as columns", TKP_REC_LAUNCH, 2, 17, 17, -1, {0}, "type 10 (LAUNCH), only"},
    {"GPU_INFO as columns", TKP_REC_GPU_INFO, 2, 17, 17, -1, {0}, "GPU_INFO), only GPU_KERNEL"},
    {"an unknown type", 99, 2, 17, 17, -1, {0}, "type 99, only GPU_KERNEL and GPU_COPY"},
    {"COLS of COLS", TKP_REC_COLS, 2, 17, 17, -1, {0}, "type 29 (COLS), only"},
    {"16 fields for a kernel", KERNEL, 2, 16, 16, -1, {0},
     "16 fields for GPU_KERNEL, expected at least 17"},
    {"12 fields for a copy", COPY, 2, 12, 12, -1, {0}, "12 fields for GPU_COPY, expected at least 13"},
    {"no records", KERNEL, 0, 17, 17, -1, {0}, "0 records, expected 1 to 65536"},
    {"65537 records", KERNEL, 65537, 17, 17, -1, {0}, "65537 records, expected 1 to 65536"},
    {"a column missing", KERNEL, 2, 17, 16, -1, {0}, "16 columns, nfields says 17"},
    {"nfields 2^32-1", KERNEL, 2, UINT32_MAX, 17, -1, {0}, "17 columns, nfields says 4294967295"},
    {"start_ns one value short", KERNEL, 2, 17, 17, 0, B("\xc8\x01"),
     "record 1: column '1 (start_ns)' ends early"},
    {"a column ending inside a varint", KERNEL, 2, 17, 17, 1, B("\x01\x81"),
     "record 1: column '2 (end_ns)' ends early"},
    {"bytes after the values", KERNEL, 2, 17, 17, 4, B("\x50\x02\x00"),
     "column '5 (correlation)' has bytes after its 2 values"},
    {"an 11-byte varint", KERNEL, 2, 17, 17, 6,
     B("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00\x00"),
     "record 0: column '7 (step)' has a varint above 64 bits"},
    {"a 10-byte varint above 64 bits", KERNEL, 2, 17, 17, 6,
     B("\x06\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"),
     "record 1: column '7 (step)' has a varint above 64 bits"},
    {"an extra column ends early", KERNEL, 2, 18, 18, 17, B("\x02"),
     "record 1: column '18 (extra)' ends early"},
    {"stream 2^32", KERNEL, 2, 17, 17, 3, B("\x80\x80\x80\x80\x20\x00"),
     "record 0: field 'stream': 4294967296 does not fit 32 bits"},
    {"stream -1", KERNEL, 2, 17, 17, 3, B("\x00\x01"),
     "record 1: field 'stream': 18446744073709551615 does not fit 32 bits"},
    {"block z 2^32 on the second record", KERNEL, 2, 17, 17, 16, B("\x02\xfe\xff\xff\xff\x1f"),
     "record 1: field 'block': 4294967296 does not fit 32 bits"},
    {"index 2^64-1 by wrapping", KERNEL, 2, 17, 17, 8, B("\x00\x01"),
     "record 1: field 'index'"},
    {"thread 65536", KERNEL, 2, 17, 17, 5, B("\x80\x80\x08\x00"),
     "record 0: thread index 65536 above the limit 65535"},
    {"thread 4294967294", KERNEL, 2, 17, 17, 5, B("\xfc\xff\xff\xff\x1f\x00"),
     "record 0: thread index 4294967294 above the limit 65535"},
    {"thread 2^32", KERNEL, 2, 17, 17, 5, B("\x02\xfe\xff\xff\xff\x1f"),
     "record 1: field 'thread': 4294967296 does not fit 32 bits"},
};

static void bad_case_run(const struct bad_case *b)
{
    struct capw *w = good_first_chunk();
    struct col c[24];
    good_columns(c, b->ncols, b->k, &b->bad);
    pack_cols_raw(w, b->type, b->n, b->nfields, b->ncols, c, 0);
    for (unsigned k = 0; k < b->ncols; k++) free(c[k].p);
    expect_bad_second_chunk(w, b->what, b->msg);
    capw_free(w);
}

Test(cols, every_rule_makes_the_chunk_bad)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
        bad_case_run(&bad_cases[i]);
}

/* The columns the cases above change are good as they are, and so are their limits. */
Test(cols, the_columns_the_bad_cases_change_are_good)
{
    struct capw *w = good_first_chunk();
    struct col c[24];
    good_columns(c, 18, -1, NULL);
    pack_cols_raw(w, KERNEL, 2, 18, 18, c, 0);
    for (unsigned k = 0; k < 18; k++) free(c[k].p);
    struct col th = {0}, st = {0}; /* threads 65535 and 4294967295; streams 2^32-1 and 2^32-2 */
    col_var(&th, zz(65535));
    col_var(&th, zz((int64_t)TKP_GPU_THREAD_NONE - 65535));
    col_var(&st, zz(UINT32_MAX));
    col_var(&st, zz(-1));
    good_columns(c, 17, 5, &th);
    pack_cols_raw(w, KERNEL, 2, 17, 17, c, 0);
    for (unsigned k = 0; k < 17; k++) free(c[k].p);
    good_columns(c, 17, 3, &st);
    pack_cols_raw(w, KERNEL, 2, 17, 17, c, 0);
    for (unsigned k = 0; k < 17; k++) free(c[k].p);
    free(th.p);
    free(st.p);
    capw_chunk_end(w);
    struct got g;
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 3 + 1 + 6, "%zu", g.n);
    cr_assert_eq(g.s[6].thread, 65535);
    cr_assert_eq(g.s[6].tid, 9999);
    cr_assert_eq(g.s[7].thread, TKP_GPU_THREAD_NONE);
    cr_assert_eq(g.s[7].tid, 0);
    cr_assert_eq(g.s[8].x[3], UINT32_MAX);
    cr_assert_eq(g.s[9].x[3], UINT32_MAX - 1);
    got_free(&g);
    capw_free(w);
}

Test(cols, a_column_that_is_not_a_bin)
{
    struct capw *w = good_first_chunk();
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 4 + 17);
    msgpack_pack_uint64(pk, TKP_REC_COLS);
    msgpack_pack_uint64(pk, KERNEL);
    msgpack_pack_uint64(pk, 1);
    msgpack_pack_uint64(pk, 17);
    for (int k = 0; k < 17; k++) {
        if (k == 9)
            msgpack_pack_str_with_body(pk, "\x01", 1);
        else
            msgpack_pack_bin_with_body(pk, "\x02", 1);
    }
    expect_bad_second_chunk(w, "str column", "field '10 (graph)': expected a bin, got str");
    capw_free(w);
}

/* ---- extra fields and elements ---- */

Test(cols, extra_fields_and_elements_are_skipped)
{
    struct capw *a = capw_new(), *b = capw_new();
    struct got ga, gb;
    struct grec c[3];
    uint64_t s = 5, clock = 10;
    for (int i = 0; i < 3; i++) gen(&s, &c[i], COPY, &clock);
    chunk_head(a, 5);
    chunk_head(b, 5);
    for (int i = 0; i < 2; i++) pack_plain(a, &good2[i], 0);
    for (int i = 0; i < 3; i++) pack_plain(a, &c[i], 0);
    for (int i = 0; i < 2; i++) pack_plain(a, &good2[i], 0);
    capw_marker(a, 1, 1, 3, 0, 9);
    pack_cols(b, good2, 2, 3, 0);  /* 20 fields */
    pack_cols(b, c, 3, 40, 2);     /* 53 fields, 2 elements after: an array32 of 59 */
    pack_cols(b, good2, 2, 0, 16); /* array16 */
    capw_marker(b, 1, 1, 3, 0, 9);
    capw_chunk_end(a);
    capw_chunk_end(b);
    read_all(a, &ga);
    read_all(b, &gb);
    cr_assert_eq(gb.end, 0, "%s", gb.err.msg);
    cr_assert_eq(gb.n, 1 + 7 + 1);
    same(&ga, &gb, "extras");
    cr_assert_str_eq(gb.s[3].name, c[0].v[2] == TKP_COPY_MEMSET ? "memset" : "memcpy");
    got_free(&ga);
    got_free(&gb);
    capw_free(a);
    capw_free(b);
}

/* ---- COLS in a merged read of two processes ---- */

Test(cols, in_a_merged_read)
{
    char dir[] = "/tmp/tkp_cols_XXXXXX", path[64];
    cr_assert(mkdtemp(dir));
    for (int k = 0; k < 2; k++) {
        struct capw *w = capw_new();
        struct grec g[100];
        capw_chunk_begin(w, 1000 + 5 * (uint64_t)k);
        capw_meta(w, "prog", 100 + (uint64_t)k);
        capw_thread(w, 0, 500 + (uint32_t)k);
        capw_name(w, 1, k ? "b_kernel" : "a_kernel");
        for (int i = 0; i < 100; i++) {
            uint64_t t = 1000 + 5 * (uint64_t)k + 10 * (uint64_t)(i + 1);
            g[i] = (struct grec){KERNEL, {t, t + 3, 1, 7, 1 + (uint64_t)i, 0, 4, 1, (uint64_t)i,
                                          UINT64_MAX, UINT64_MAX, 8, 1, 1, 32, 1, 1}};
        }
        pack_cols(w, g, 60, 0, 0);
        pack_cols(w, g + 60, 40, 0, 0);
        capw_marker(w, 2000, 0, 4, 0, 1);
        capw_chunk_end(w);
        snprintf(path, sizeof(path), "%s/prog.%d.tokprof", dir, 100 + k);
        cr_assert_eq(capw_write_file(w, path), 0);
        capw_free(w);
    }
    struct got g;
    read_merged(dir, &g);
    size_t n[2] = {0, 0};
    for (size_t i = 0; i < g.n; i++) {
        const struct seen *x = &g.s[i];
        if (x->type != KERNEL) continue;
        int k = (x->x[0] % 10) == 5;
        cr_assert_str_eq(x->name, k ? "b_kernel" : "a_kernel", "record %zu", i);
        cr_assert_eq(x->tid, 500 + (uint32_t)k, "record %zu", i);
        cr_assert_eq(x->x[4], 1 + n[k], "record %zu: correlation in order", i);
        cr_assert_eq(x->x[0], 1000 + 5 * (uint64_t)k + 10 * (n[k] + 1), "record %zu", i);
        n[k]++;
    }
    cr_assert_eq(n[0], 100);
    cr_assert_eq(n[1], 100);
    got_free(&g);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    cr_assert_eq(system(path), 0);
}
