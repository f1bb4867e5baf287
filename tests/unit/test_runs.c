/* Runs (docs/FORMAT.md, "Runs"): a RUN decodes to exactly the LAUNCH_T and LIB_CALL_T records it
 * stands for (every field, across the reader's batches and the dt chain), a differential test
 * against the same records written one by one (version 2), every rule of the section makes the
 * chunk bad with a reason, and names and threads redefined between runs resolve as for single
 * records. The RUN encoder here is written from FORMAT.md alone (never shim/writer.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capgot.h"
#include "base/err.h"
#include "capture/multireader.h"
#include "capture/reader.h"
#include "model/classes.h"
#include "model/model.h"

/* ---- templates whose fields vary with their id ---- */

static void tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t name, uint32_t gx)
{
    const uint32_t grid[3] = {gx, 2, 3}, block[3] = {128, 1, 1 + id % 2};
    capw_tmpl(w, id, thread, name, 0x5000 + id, 1 + id % 3, grid, block, 4096 + id);
}

static void lib_tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t op, uint64_t n)
{
    const struct capw_lib c = {.lib = 1 + id % 3, .op = op, .m = 4096, .n = n, .k = 1024 + id,
                               .batch = 1, .atype = 14, .btype = 2, .ctype = 0, .compute = 68,
                               .transa = (int32_t)(id % 2), .transb = -1, .stream = 0x7000 + id,
                               .a_ptr = 0xdead0000ull + id, .status = id % 5, .flags = id % 2};
    capw_lib_tmpl(w, id, thread, &c);
}

static void launch_t(struct capw *w, int64_t dt, uint64_t step, uint32_t id, uint32_t call,
                     uint32_t stack)
{
    capw_launch_t(w, dt, step, id, stack ? 2 : call ? 1 : 0, call, stack);
}

/* ---- RUN ---- */

/* A RUN being filled: its records, then emitted by run_end(). */
struct run {
    uint64_t step;
    uint32_t n;
    int64_t call0; /* the RUN's `call`: the base of its calls column */
    int64_t call;  /* the last library call's id in the run, call0 before the first */
    struct col c[5]; /* kinds, dts, tmpls, calls, host_ns */
    /* Version 4: with `rep`, a RUN whose kinds and tmpls equal the chunk's last RUN's is written
     * as repeating it (kinds and tmpls nil, dts and host_ns as differences against its values).
     * The caller sets pn = 0 when a chunk begins. */
    int rep;
    uint32_t libs, pn, reps;       /* library calls; the last RUN's records; RUNs written repeating */
    int64_t *dt, *pdt;             /* the values of this run and of the last RUN */
    uint64_t *host, *phost;
    size_t vcap;
    struct col pk, pt;             /* the last RUN's kinds and tmpls */
};

static void run_free(struct run *u)
{
    for (int i = 0; i < 5; i++) free(u->c[i].p);
    free(u->dt), free(u->pdt), free(u->host), free(u->phost), free(u->pk.p), free(u->pt.p);
    memset(u, 0, sizeof(*u));
}

/* The values of record u->n (before it is added). */
static void run_value(struct run *u, int64_t dt)
{
    if (u->n == u->vcap) {
        u->vcap = u->vcap ? u->vcap * 2 : 256;
        u->dt = realloc(u->dt, u->vcap * sizeof(*u->dt));
        u->pdt = realloc(u->pdt, u->vcap * sizeof(*u->pdt));
        u->host = realloc(u->host, u->vcap * sizeof(*u->host));
        u->phost = realloc(u->phost, u->vcap * sizeof(*u->phost));
        cr_assert(u->dt && u->pdt && u->host && u->phost);
    }
    u->dt[u->n] = dt;
}

static void run_launch(struct run *u, int64_t dt, uint32_t id, uint32_t call)
{
    run_value(u, dt);
    col_byte(&u->c[0], 0);
    col_var(&u->c[1], zz(dt));
    col_var(&u->c[2], id);
    col_var(&u->c[3], call ? zz((int64_t)call - u->call - 1) + 1 : 0);
    u->n++;
}

static void run_lib(struct run *u, int64_t dt, uint32_t id, uint32_t call, uint64_t host_ns)
{
    run_value(u, dt);
    u->host[u->libs++] = host_ns;
    col_byte(&u->c[0], 1);
    col_var(&u->c[1], zz(dt));
    col_var(&u->c[2], id);
    col_var(&u->c[3], zz((int64_t)call - u->call - 1));
    col_var(&u->c[4], host_ns);
    u->call = call;
    u->n++;
}

/* RUN of base call id `call` and the columns c, with `extra` elements after them and column
 * str_col a str (or -1). */
static void pack_run_ex(struct capw *w, uint64_t step, uint64_t n, uint64_t call,
                        const struct col c[5], int extra, int str_col)
{
    const uint8_t *p[5];
    size_t len[5];
    for (int i = 0; i < 5; i++) p[i] = c[i].p, len[i] = c[i].n;
    capw_run(w, step, n, call, p, len, extra, str_col);
}

static void pack_run(struct capw *w, uint64_t step, uint64_t n, const struct col c[5])
{
    pack_run_ex(w, step, n, 0, c, 0, -1);
}

/* Emits the run (if it holds any record) and empties it for the next one, of step `step`. The
 * next run's base call id is this one's last library call (as the shim's writer's base is near
 * its calls), so that runs after the first have bases other than 0. */
static int same_col(const struct col *a, const struct col *b)
{
    return a->n == b->n && (!a->n || !memcmp(a->p, b->p, a->n));
}

static void col_copy(struct col *to, const struct col *from)
{
    to->n = 0;
    for (size_t i = 0; i < from->n; i++) col_byte(to, from->p[i]);
}

static void run_end(struct capw *w, struct run *u, uint64_t next_step)
{
    if (u->n && u->rep && u->pn == u->n && same_col(&u->c[0], &u->pk) &&
        same_col(&u->c[2], &u->pt)) { /* it repeats the last RUN */
        struct col d = {0}, h = {0};
        for (uint32_t i = 0; i < u->n; i++)
            col_var(&d, zz((int64_t)((uint64_t)u->dt[i] - (uint64_t)u->pdt[i])));
        for (uint32_t j = 0; j < u->libs; j++) col_var(&h, zz((int64_t)(u->host[j] - u->phost[j])));
        const uint8_t *p[5] = {NULL, d.p, NULL, u->c[3].p, h.p};
        size_t len[5] = {CAPW_NIL, d.n, CAPW_NIL, u->c[3].n, h.n};
        capw_run(w, u->step, u->n, (uint64_t)u->call0, p, len, 0, -1);
        free(d.p), free(h.p);
        u->reps++;
    } else if (u->n) {
        pack_run_ex(w, u->step, u->n, (uint64_t)u->call0, u->c, 0, -1);
        col_copy(&u->pk, &u->c[0]);
        col_copy(&u->pt, &u->c[2]);
    }
    if (u->n) {
        memcpy(u->pdt, u->dt, u->n * sizeof(*u->dt));
        memcpy(u->phost, u->host, u->libs * sizeof(*u->host));
        u->pn = u->n;
    }
    for (int i = 0; i < 5; i++) u->c[i].n = 0;
    u->n = u->libs = 0;
    u->call0 = u->call;
    u->step = next_step;
}

static void head(struct capw *w, uint64_t base)
{
    capw_chunk_begin(w, base);
    capw_thread(w, 3, 777);
    capw_name(w, 5, "gemm_kernel");
    capw_name(w, 6, "cublasLtMatmul");
}

/* ---- expansion ---- */

Test(runs, every_field_of_launches_and_library_calls)
{
    struct capw *w = capw_new();
    struct run u = {.step = (1ull << 33) + 5};
    struct got g;
    head(w, 1000);
    tmpl(w, 0, 3, 5, 64);
    tmpl(w, 200, 3, 5, 7);       /* a 2-byte template id */
    lib_tmpl(w, 131, 3, 6, 8);   /* a 2-byte library template id */
    run_launch(&u, 10, 0, 0);           /* 1010, outside any call */
    run_launch(&u, -3, 200, 42);        /* 1007, inside call 42 (before the call's record) */
    run_lib(&u, 20000, 131, 42, 333);   /* 21007, call 42: dt >= 2^14, a 3-byte varint */
    run_launch(&u, 1ll << 35, 0, 43);   /* + 2^35, inside the next call */
    run_lib(&u, -(1ll << 35), 131, 7, UINT64_MAX); /* back; a call id below the last one */
    run_launch(&u, 1, 200, 0);
    run_lib(&u, 0, 131, 0xffffffffu, 0); /* the largest call id */
    run_launch(&u, 0, 0, 1);             /* a launch far below the last call */
    run_end(w, &u, 0);
    capw_marker(w, 5, 3, 9, 0, -1); /* the dt chain goes on after the run */
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 10, "CHUNK, 8 run records, MARKER (got %zu)", g.n);
    const struct seen *s = g.s;
    uint64_t t[8] = {1010, 1007, 21007, 21007 + (1ull << 35), 21007, 21008, 21008, 21008};
    uint64_t call[8] = {0, 42, 42, 43, 7, 0, 0xffffffffu, 1};
    int lib[8] = {0, 0, 1, 0, 1, 0, 1, 0};
    for (int i = 0; i < 8; i++) {
        const struct seen *r = &s[1 + i];
        cr_assert_eq(r->type, lib[i] ? TKP_REC_LIB_CALL : TKP_REC_LAUNCH, "record %d", i);
        cr_assert_eq(r->host_ns, t[i], "record %d: host_ns %llu", i,
                     (unsigned long long)r->host_ns);
        cr_assert_eq(r->step, (1ull << 33) + 5, "record %d: step", i);
        cr_assert_eq(r->thread, 3);
        cr_assert_eq(r->tid, 777);
        cr_assert_str_eq(r->name, lib[i] ? "cublasLtMatmul" : "gemm_kernel");
        cr_assert_eq(r->x[lib[i] ? 0 : 10], call[i], "record %d: call %llu", i,
                     (unsigned long long)r->x[lib[i] ? 0 : 10]);
    }
    /* launch template 200: name 5, stream 0x50c8, via 3, grid {7,2,3}, block {128,1,1}, smem */
    uint64_t l200[12] = {5, 0x5000 + 200, 3, 7, 2, 3, 128, 1, 1, 4096 + 200, 42, 0};
    for (int k = 0; k < 12; k++) cr_assert_eq(s[2].x[k], l200[k], "launch field %d", k);
    cr_assert_eq(s[1].x[3], 64);
    cr_assert_eq(s[1].x[8], 1, "block z of template 0");
    /* library template 131: lib 3, status 1, flags 1, op 6, m n k batch, stream, a_ptr, host */
    uint64_t c131[12] = {42, 3, 1, 1, 6, 4096, 8, 1024 + 131, 1, 0x7000 + 131,
                         0xdead0000ull + 131, 333};
    for (int k = 0; k < 12; k++) cr_assert_eq(s[3].x[k], c131[k], "call field %d", k);
    cr_assert_eq(s[5].x[11], UINT64_MAX, "host_ns of 10 bytes");
    cr_assert_eq(s[7].x[11], 0);
    cr_assert_eq(s[9].type, TKP_REC_MARKER);
    cr_assert_eq(s[9].host_ns, 21013);
    cr_assert_eq(g.stats.missing_names, 0);
    cr_assert_eq(g.stats.missing_threads, 0);
    cr_assert_eq(g.stats.records, 13, "CHUNK, THREAD, 2 NAME, 8, MARKER: not templates or RUNs");
    got_free(&g);
    run_free(&u);
    capw_free(w);
}

Test(runs, extreme_times_wrap_as_single_records_do)
{
    struct capw *w = capw_new();
    struct run u = {.step = 1};
    struct got g;
    head(w, 1000);
    tmpl(w, 0, 3, 5, 64);
    run_launch(&u, INT64_MAX, 0, 0);
    run_launch(&u, INT64_MIN, 0, 0);
    run_launch(&u, -1000, 0, 0);
    run_end(w, &u, 1);
    launch_t(w, 2, 1, 0, 0, 0); /* the chain through an ordinary record, then a run again */
    run_launch(&u, 3, 0, 0);
    run_end(w, &u, 1);
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 6);
    uint64_t t0 = 1000 + (uint64_t)INT64_MAX, t1 = t0 + (uint64_t)INT64_MIN;
    cr_assert_eq(g.s[1].host_ns, t0);
    cr_assert_eq(g.s[2].host_ns, t1);
    cr_assert_eq(g.s[3].host_ns, t1 - 1000);
    cr_assert_eq(g.s[4].host_ns, t1 - 998);
    cr_assert_eq(g.s[5].host_ns, t1 - 995);
    got_free(&g);
    run_free(&u);
    capw_free(w);
}

/* A reader released in the middle of a RUN's batch (tkp_reader_release) delivers nothing more:
 * its fast path reads the batch only while the chunk is open. */
Test(runs, a_reader_released_inside_a_run_delivers_nothing_more)
{
    struct capw *w = capw_new();
    struct run u = {.step = 1};
    struct tkp_record rec;
    head(w, 1000);
    tmpl(w, 0, 3, 5, 64);
    for (int i = 0; i < 5; i++) run_launch(&u, 10, 0, 0);
    run_end(w, &u, 1);
    capw_chunk_end(w);
    struct tkp_reader *r = capr_open(w);
    int k;
    while ((k = tkp_reader_next(r, &rec)) == 1 && rec.type != TKP_REC_LAUNCH) continue;
    cr_assert_eq(k, 1, "the RUN's first launch");
    cr_assert_eq(rec.host_ns, 1010);
    tkp_reader_release(r);
    cr_assert_eq(tkp_reader_next(r, &rec), 0, "released: the end");
    cr_assert_eq(tkp_reader_stats(r)->records, 5, "CHUNK, THREAD, 2 NAME, 1 launch");
    tkp_reader_close(r);
    run_free(&u);
    capw_free(w);
}

/* A run of n records, launches with a library call every 7th: more than one batch of the
 * reader, the call base carried from batch to batch. */
static void long_run(uint32_t n, int *end, size_t *got, uint64_t *last_ns, uint32_t *last_call)
{
    struct capw *w = capw_new();
    struct run u = {.step = 4};
    struct got g;
    head(w, 0);
    tmpl(w, 0, 3, 5, 64);
    tmpl(w, 300, 3, 5, 65);
    lib_tmpl(w, 1, 3, 6, 8);
    for (uint32_t i = 0; i < n; i++) {
        if (i % 7 == 6)
            run_lib(&u, 1, 1, 100 + i / 7, i);
        else
            run_launch(&u, 1, i % 2 ? 300 : 0, 100 + i / 7);
    }
    run_end(w, &u, 0);
    capw_chunk_end(w);
    read_all(w, &g);
    *end = g.end;
    *got = g.n;
    if (g.end == 0) {
        for (uint32_t i = 0; i < n; i++) {
            const struct seen *s = &g.s[1 + i];
            cr_assert_eq(s->host_ns, i + 1, "record %u", i);
            cr_assert_eq(s->type, i % 7 == 6 ? TKP_REC_LIB_CALL : TKP_REC_LAUNCH, "record %u", i);
            cr_assert_eq(s->x[i % 7 == 6 ? 0 : 10], 100 + i / 7, "record %u: call", i);
            if (i % 7 == 6) cr_assert_eq(s->x[11], i, "record %u: host_ns", i);
            else cr_assert_eq(s->x[3], i % 2 ? 65 : 64, "record %u: template", i);
        }
        *last_ns = g.s[n].host_ns;
        *last_call = (uint32_t)g.s[n].x[g.s[n].type == TKP_REC_LIB_CALL ? 0 : 10];
    } else {
        cr_assert(strstr(g.err.msg, "65537 records, expected 1 to 65536"), "%s", g.err.msg);
    }
    got_free(&g);
    run_free(&u);
    capw_free(w);
}

Test(runs, runs_longer_than_a_batch)
{
    int end;
    size_t n;
    uint64_t ns;
    uint32_t call;
    long_run(1000, &end, &n, &ns, &call);
    cr_assert_eq(end, 0);
    cr_assert_eq(n, 1001);
    long_run(65536, &end, &n, &ns, &call);
    cr_assert_eq(end, 0);
    cr_assert_eq(n, 65537);
    cr_assert_eq(ns, 65536);
    cr_assert_eq(call, 100 + 65535 / 7);
    long_run(65537, &end, &n, &ns, &call);
    cr_assert_eq(end, TKP_ERR_RECORD);
    cr_assert_eq(n, 0);
}

Test(runs, extra_elements_after_host_ns_are_skipped)
{
    struct capw *w = capw_new();
    struct run u = {.step = 2};
    struct got g;
    head(w, 0);
    tmpl(w, 0, 3, 5, 64);
    lib_tmpl(w, 0, 3, 6, 8);
    run_launch(&u, 1, 0, 1);
    run_lib(&u, 1, 0, 1, 9);
    pack_run_ex(w, u.step, u.n, 0, u.c, 3, -1); /* elements of a later writer */
    pack_run_ex(w, u.step, u.n, 0, u.c, 8, -1); /* 16 elements: an array16 header */
    capw_marker(w, 1, 3, 2, 1, 5);
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 6, "CHUNK, 2 + 2 records, MARKER (got %zu)", g.n);
    for (int i = 1; i <= 4; i++) cr_assert_eq(g.s[i].host_ns, (uint64_t)i, "record %d", i);
    cr_assert_eq(g.s[4].x[11], 9);
    cr_assert_eq(g.s[5].type, TKP_REC_MARKER);
    cr_assert_eq(g.s[5].host_ns, 5);
    got_free(&g);
    run_free(&u);
    capw_free(w);
}

/* ---- errors: the chunk is bad, the one before it whole ---- */

/* A capture whose first chunk (a run of one launch) is good, and a second chunk begun with
 * launch template 0 and library template 0 defined. */
static struct capw *good_first_chunk(void)
{
    struct capw *w = capw_new();
    struct run u = {.step = 1};
    head(w, 0);
    tmpl(w, 0, 3, 5, 64);
    run_launch(&u, 1, 0, 0);
    run_end(w, &u, 0);
    capw_chunk_end(w);
    head(w, 100);
    tmpl(w, 0, 3, 5, 64);
    lib_tmpl(w, 0, 3, 6, 8);
    run_free(&u);
    return w;
}

static void expect_bad_second_chunk(struct capw *w, const char *what, const char *msg)
{
    struct got g;
    expect_bad_last_chunk(w, what, "RUN record", msg, 2, &g); /* CHUNK and its launch */
    cr_assert_eq(g.s[1].type, TKP_REC_LAUNCH, "%s", what);
    got_free(&g);
}

#define B(s) {(uint8_t *)(s), sizeof(s) - 1, sizeof(s) - 1}

struct bad_case {
    const char *what;
    uint64_t n;
    struct col c[5];
    const char *msg;
};

/* The usual columns of 2 records (a launch, then library call 1 at dt 2 and 2): kinds
 * "\0\1", dts "\4\4", tmpls "\0\0", calls "\0\0", host_ns "\5". */
static const struct bad_case bad_cases[] = {
    {"n 0", 0, {B(""), B(""), B(""), B(""), B("")}, "0 records, expected 1 to 65536"},
    {"n 65537", 65537, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")},
     "65537 records, expected 1 to 65536"},
    {"kinds shorter", 2, {B("\0"), B("\4\4"), B("\0\0"), B("\0\0"), B("")}, "kinds"},
    {"kind 2", 2, {B("\0\2"), B("\4\4"), B("\0\0"), B("\0\0"), B("")},
     "record 1: kind 2, expected 0 or 1"},
    {"dts ends early", 2, {B("\0\1"), B("\4"), B("\0\0"), B("\0\0"), B("\5")},
     "record 1: column 'dts' ends early"},
    {"tmpls ends early", 2, {B("\0\1"), B("\4\4"), B(""), B("\0\0"), B("\5")},
     "record 0: column 'tmpls' ends early"},
    {"calls ends early", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0"), B("\5")},
     "record 1: column 'calls' ends early"},
    {"host_ns one value short", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("")},
     "record 0: column 'host_ns' ends early"},
    {"an 11-byte varint", 2,
     {B("\0\1"), B("\4\4"), B("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\0\0"), B("\0\0"),
      B("\5")},
     "record 0: column 'tmpls' has a varint above 64 bits"},
    {"a 10-byte varint above 64 bits", 2,
     {B("\0\1"), B("\4\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"), B("\0\0"), B("\0\0"), B("\5")},
     "record 1: column 'dts' has a varint above 64 bits"},
    {"a 10-byte host_ns above 64 bits", 2,
     {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x03")},
     "record 0: column 'host_ns' has a varint above 64 bits"},
    {"bytes after dts", 2, {B("\0\1"), B("\4\4\0"), B("\0\0"), B("\0\0"), B("\5")},
     "column 'dts' has bytes after its 2 values"},
    /* a whole word of varints of one and two bytes whose last byte opens one more */
    {"a word of dts ending inside a fifth", 4,
     {B("\0\0\0\1"), B("\x81\x01\x81\x01\x81\x01\4\x80"), B("\0\0\0\0"), B("\0\0\0\0"),
      B("\5")},
     "column 'dts' has bytes after its 4 values"},
    /* a word of one- and two-byte varints whose last byte opens a varint of ten bytes, the tenth
     * above bit 63: the byte open at the word's end counts */
    {"a word of dts, then a varint above 64 bits across words", 5,
     {B("\0\0\0\0\1"), B("\x81\x01\x81\x01\x81\x01\5\x80\x80\x80\x80\x80\x80\x80\x80\x80\2"),
      B("\0\0\0\0\0"), B("\0\0\0\0\0"), B("\5")},
     "record 4: column 'dts' has a varint above 64 bits"},
    {"bytes after tmpls", 2, {B("\0\1"), B("\4\4"), B("\0\0\x81"), B("\0\0"), B("\5")},
     "column 'tmpls' has bytes after its 2 values"},
    {"bytes after calls", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0\0"), B("\5")},
     "column 'calls' has bytes after its 2 values"},
    {"host_ns one value too many", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5\6")},
     "column 'host_ns' has bytes after its 1 values"},
    {"host_ns for launches only", 2, {B("\0\0"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")},
     "column 'host_ns' has bytes after its 0 values"},
    {"template never defined", 2, {B("\0\1"), B("\4\4"), B("\0\7"), B("\0\0"), B("\5")},
     "record 1: template 7 not defined in this chunk"},
    {"launch template 1 in the library id space", 2,
     {B("\0\0"), B("\4\4"), B("\0\1"), B("\0\0"), B("")},
     "record 1: template 1 not defined in this chunk"},
    /* two-byte ids: the reader's usual path checks them per chunk (record.c, run_small) */
    {"two-byte template never defined", 2,
     {B("\0\1"), B("\4\4"), B("\0\x80\x01"), B("\0\0"), B("\5")},
     "record 1: template 128 not defined in this chunk"},
    {"template id 65536", 2, {B("\0\1"), B("\4\4"), B("\x80\x80\x04\0"), B("\0\0"), B("\5")},
     "record 0: template id 65536 above the limit 65535"},
    {"template id 2^64-1", 2,
     {B("\0\1"), B("\4\4"), B("\0\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), B("\0\0"), B("\5")},
     "record 1: template id 18446744073709551615 above the limit 65535"},
    /* a launch's call: 0 + 1 + unzigzag(x - 1); x 2: 1 - 1 = 0, inside no call */
    {"launch call 0 by a nonzero field", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\2\0"), B("\5")},
     "record 0: call id out of range"},
    /* zigzag(2^32 - 1) + 1 = 2^33 - 1: call 2^32 */
    {"launch call 2^32", 2,
     {B("\0\1"), B("\4\4"), B("\0\0"), B("\xff\xff\xff\xff\x1f\0"), B("\5")},
     "record 0: call id out of range"},
    /* after library call 2^32 - 1 (zigzag(2^32 - 2) = 2^33 - 4), a launch of the next call */
    {"launch call one past the largest call", 2,
     {B("\1\0"), B("\4\4"), B("\0\0"), B("\xfc\xff\xff\xff\x1f\1"), B("\5")},
     "record 1: call id out of range"},
    {"library call 2^32", 2,
     {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\xfe\xff\xff\xff\x1f"), B("\5")},
     "record 1: call id out of range"},
    {"library call -1", 2, {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\3"), B("\5")},
     "record 1: call id out of range"},
    {"a calls varint of 2^64-1", 2,
     {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
      B("\5")},
     "record 1: call id out of range"},
};

static void bad_chunks(const struct bad_case *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct capw *w = good_first_chunk();
        pack_run(w, 1, b[i].n, b[i].c);
        expect_bad_second_chunk(w, b[i].what, b[i].msg);
        capw_free(w);
    }
}

Test(runs, every_rule_makes_the_chunk_bad)
{
    bad_chunks(bad_cases, sizeof(bad_cases) / sizeof(bad_cases[0]));
}

/* One-byte call steps above 1 near the largest call id: the range run_small bounds them by
 * must not accept what run_values refuses (base UINT32_MAX - 4, two library calls 2 + 1 apart:
 * UINT32_MAX - 1, then UINT32_MAX + 2). */
Test(runs, one_byte_call_steps_past_the_largest_call)
{
    static const struct col c[5] = {B("\1\1"), B("\4\4"), B("\0\0"), B("\4\4"), B("\5\5")};
    struct capw *w = good_first_chunk();
    pack_run_ex(w, 1, 2, UINT32_MAX - 4, c, 0, -1);
    expect_bad_second_chunk(w, "call steps", "record 1: call id out of range");
    capw_free(w);
}

/* The same columns are good: the cases above differ from it in one thing only. */
Test(runs, the_columns_the_bad_cases_change_are_good)
{
    static const struct col c[5] = {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")};
    struct capw *w = good_first_chunk();
    struct got g;
    pack_run(w, 1, 2, c);
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 5, "CHUNK, launch, CHUNK, launch, library call");
    cr_assert_eq(g.s[4].x[0], 1, "library call 1");
    cr_assert_eq(g.s[4].x[11], 5);
    cr_assert_eq(g.s[4].host_ns, 104);
    got_free(&g);
    capw_free(w);
}

/* Reasons that once named the wrong thing (decoder/capture/record.c):
 * "kinds has %u bytes" printed the length of the last column read (host_ns), not of kinds;
 * a column that ends inside a varint was reported as "has a varint above 64 bits" (tkp_uvar()
 *   leaves the cursor at the varint's start) instead of "ends early". */
static const struct bad_case bug_cases[] = {
    {"kinds longer", 2, {B("\0\0\0"), B("\4\4"), B("\0\0"), B("\0\0"), B("")},
     "kinds has 3 bytes for 2 records"},
    {"dts ends inside a varint", 2,
     {B("\0\1"), B("\4\x80"), B("\0\0"), B("\0\0"), B("\5")},
     "record 1: column 'dts' ends early"},
};

Test(runs, the_reason_gives_the_length_of_kinds)
{
    bad_chunks(&bug_cases[0], 1);
}

Test(runs, a_column_ending_inside_a_varint_ends_early)
{
    bad_chunks(&bug_cases[1], 1);
}

Test(runs, a_column_that_is_not_a_bin)
{
    for (int k = 0; k < 5; k++) {
        static const char *const name[5] = {"kinds", "dts", "tmpls", "calls", "host_ns"};
        static const struct col c[5] = {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")};
        struct capw *w = good_first_chunk();
        pack_run_ex(w, 1, 2, 0, c, 0, k);
        char want[64];
        snprintf(want, sizeof(want), "field '%s': expected a bin", name[k]);
        expect_bad_second_chunk(w, name[k], want);
        capw_free(w);
    }
}

Test(runs, a_template_of_an_earlier_chunk_or_defined_after_the_run)
{
    static const struct col c[5] = {B("\0"), B("\4"), B("\1"), B("\0"), B("")};
    struct capw *w = good_first_chunk();
    tmpl(w, 1, 3, 5, 64); /* a first chunk that defines template 1 too */
    capw_chunk_end(w);
    head(w, 200); /* chunk 3: template 1 not defined here */
    pack_run(w, 1, 1, c);
    capw_chunk_end(w);
    struct got g;
    read_all(w, &g);
    cr_assert_eq(g.end, TKP_ERR_RECORD);
    cr_assert_eq(g.n, 3, "chunks 1 and 2 whole (got %zu)", g.n);
    cr_assert(strstr(g.err.msg, "record 0: template 1 not defined in this chunk"), "%s",
              g.err.msg);
    got_free(&g);
    capw_free(w);

    w = good_first_chunk();
    pack_run(w, 1, 1, c);
    tmpl(w, 1, 3, 5, 64); /* after the run */
    expect_bad_second_chunk(w, "defined after", "record 0: template 1 not defined in this chunk");
    capw_free(w);
}

/* ---- names and threads between runs ---- */

/* Both forms of one sequence: v2 (records one by one) and v3 (RUNs), built side by side. */
struct pair {
    struct capw *v2, *v3;
    struct run u;
};

static void pair_init(struct pair *p)
{
    memset(p, 0, sizeof(*p));
    p->v2 = capw_new();
    p->v3 = capw_new();
}

static void pair_free(struct pair *p)
{
    capw_free(p->v2);
    capw_free(p->v3);
    run_free(&p->u);
}

/* The open run ends (a record that is not part of a run follows, or a split). */
static void pair_flush(struct pair *p)
{
    run_end(p->v3, &p->u, p->u.step);
}

/* Room for a record of `step` in the open run. */
static void pair_room(struct pair *p, uint64_t step)
{
    if (p->u.n && (p->u.step != step || p->u.n == TKP_RUN_MAX)) pair_flush(p);
    p->u.step = step;
}

static void pair_launch(struct pair *p, int64_t dt, uint64_t step, uint32_t id, uint32_t call)
{
    launch_t(p->v2, dt, step, id, call, 0);
    pair_room(p, step);
    run_launch(&p->u, dt, id, call);
}

static void pair_lib(struct pair *p, int64_t dt, uint64_t step, uint32_t id, uint32_t call,
                     uint64_t host_ns)
{
    capw_lib_call_t(p->v2, dt, step, call, id, host_ns);
    pair_room(p, step);
    run_lib(&p->u, dt, id, call, host_ns);
}

static size_t bulk_taken; /* launches bulk_read() took in bulk, for the tests to see it did */
static size_t bulk_libs;  /* library calls, with tkp_reader_peek_full */

/* Record j of a RUN taken in bulk (tkp_reader_peek_full) against x, the record by record reading:
 * every field, names, thread, tid and step included, from the columns and the templates. */
static void bulk_full(const struct tkp_run_full *rb, size_t j, const struct seen *x,
                      const char *what, size_t i)
{
    struct tkp_record rec;
    memset(&rec, 0, sizeof(rec));
    rec.host_ns = rb->host_ns[j];
    rec.thread = rb->thread, rec.tid = rb->tid, rec.step = rb->step;
    if (rb->kind[j]) {
        rec.type = TKP_REC_LIB_CALL;
        rec.lib_call = *tkp_run_lib(rb, j);
        cr_assert_eq(rec.lib_call.call, 0, "%s: record %zu: a template's call", what, i);
        rec.lib_call.call = rb->call[j];
        rec.lib_call.call_ns = rb->call_ns[j];
        bulk_libs++;
    } else {
        rec.type = TKP_REC_LAUNCH;
        rec.launch = *tkp_run_launch(rb, j);
        rec.launch.call = rb->call[j];
    }
    struct got one = {0};
    note(&one, &rec);
    const struct seen *y = &one.s[0];
    cr_assert_eq(y->type, x->type, "%s: record %zu taken in bulk: type", what, i);
    cr_assert_eq(y->host_ns, x->host_ns, "%s: record %zu: host_ns", what, i);
    cr_assert_eq(y->step, x->step, "%s: record %zu: step", what, i);
    cr_assert_eq(y->thread, x->thread, "%s: record %zu: thread", what, i);
    cr_assert_eq(y->tid, x->tid, "%s: record %zu: tid", what, i);
    cr_assert_eq(memcmp(y->x, x->x, sizeof(x->x)), 0, "%s: record %zu: fields", what, i);
    cr_assert_str_eq(y->name, x->name, "%s: record %zu: name", what, i);
    cr_assert_neq(x->name[0], '?', "%s: record %zu: an unresolved name in bulk", what, i);
    got_free(&one);
}

/* Reads w as drain() does, but takes launches in bulk (reader.h, tkp_reader_peek_launches), or
 * launches and library calls with every field (tkp_reader_peek_full), where it can, a random number of those
 * peeked (seed), and checks every record against want, the record by record reading: a launch
 * taken in bulk by its time, step, thread and name id. */
static void bulk_read(struct capw *w, const struct got *want, uint64_t seed, const char *what)
{
    struct tkp_reader *r = capr_open(w);
    struct tkp_run_full rb;
    struct tkp_launch_bulk lb;
    struct tkp_record rec;
    size_t i = 0, taken = 0;
    int end;
    for (;;) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        int run = seed >> 40 & 1; /* tkp_reader_peek_full */
        size_t n = !(seed % 4) ? 0 : run ? tkp_reader_peek_full(r, &rb) : tkp_reader_peek_launches(r, &lb);
        cr_assert_leq(n, TKP_LAUNCH_BULK);
        if (n) {
            size_t k = 1 + (seed >> 8) % n;
            for (size_t j = 0; j < k; j++, i++) {
                cr_assert_lt(i, want->n, "%s: more records in bulk than one by one", what);
                const struct seen *x = &want->s[i];
                if (run) {
                    bulk_full(&rb, j, x, what, i);
                    continue;
                }
                cr_assert_eq(lb.host_ns[j], x->host_ns, "%s: record %zu: host_ns", what, i);
                cr_assert_eq(lb.step, x->step, "%s: record %zu: step", what, i);
                cr_assert_eq(lb.thread, x->thread, "%s: record %zu: thread", what, i);
                cr_assert_eq(x->type, TKP_REC_LAUNCH, "%s: record %zu taken in bulk", what, i);
                cr_assert_eq(lb.name_id[j], x->x[0], "%s: record %zu: name id", what, i);
                cr_assert_neq(x->name[0], '?', "%s: record %zu: an unresolved name in bulk", what, i);
            }
            if (run)
                tkp_reader_take_full(r, &rb, k);
            else
                tkp_reader_take(r, &lb, k);
            taken += k;
            continue;
        }
        if ((end = tkp_reader_next(r, &rec)) != 1) break;
        if (rec.type == TKP_REC_NAME || rec.type == TKP_REC_THREAD) continue;
        cr_assert_lt(i, want->n, "%s: more records than one by one", what);
        struct got one = {0};
        note(&one, &rec);
        const struct seen *x = &want->s[i++], *y = &one.s[0];
        cr_assert_eq(y->type, x->type, "%s: record %zu: type", what, i - 1);
        cr_assert_eq(y->host_ns, x->host_ns, "%s: record %zu: host_ns", what, i - 1);
        cr_assert_eq(memcmp(y->x, x->x, sizeof(x->x)), 0, "%s: record %zu: fields", what, i - 1);
        cr_assert_str_eq(y->name, x->name, "%s: record %zu: name", what, i - 1);
        got_free(&one);
    }
    cr_assert_eq(end, want->end, "%s: end", what);
    cr_assert_eq(i, want->n, "%s: %zu records, want %zu", what, i, want->n);
    const struct tkp_reader_stats *st = tkp_reader_stats(r);
    cr_assert_eq(st->records, want->stats.records, "%s: stats.records", what);
    cr_assert_eq(st->missing_names, want->stats.missing_names, "%s: missing_names", what);
    cr_assert_eq(st->missing_threads, want->stats.missing_threads, "%s: missing_threads", what);
    tkp_reader_close(r);
    bulk_taken += taken;
}

static size_t model_bulk; /* records model_same() fed to the model in bulk */

/* w read into a model record by record (tkp_model_add) and, as summary reads it, with a RUN's
 * launches and library calls in bulk (tkp_reader_peek_full, tkp_model_add_run): the same steps,
 * names, GEMM figures and weights. */
static void model_same(struct capw *w, const char *what)
{
    struct tkp_classes *cl;
    struct tkp_model m[2];
    struct tkp_run_full rb;
    struct tkp_record rec;
    cr_assert_eq(tkp_classes_new(NULL, &cl, NULL, 0), 0);
    struct tkp_model_opts o = {.classes = cl, .from = -1, .to = -1};
    for (int b = 0; b < 2; b++) {
        struct tkp_reader *r = capr_open(w);
        size_t n;
        tkp_model_init(&m[b], &o);
        for (;;) {
            if (b && (n = tkp_reader_peek_full(r, &rb)) && (n = tkp_model_add_run(&m[b], &rb, n))) {
                /* the figures summary takes of the records taken: least time above 0, greatest,
                 * library calls */
                uint64_t lo = 0, hi = 0, libs = 0;
                for (size_t j = 0; j < n; j++) {
                    uint64_t ns = rb.host_ns[j];
                    if (ns && (!lo || ns < lo)) lo = ns;
                    if (ns > hi) hi = ns;
                    libs += rb.kind[j];
                }
                cr_assert_eq(m[b].run_hi, hi, "%s: run_hi", what);
                cr_assert_eq(m[b].run_libs, libs, "%s: run_libs", what);
                if (hi) cr_assert_eq(m[b].run_lo1 + 1, lo, "%s: run_lo1", what);
                tkp_reader_take_full(r, &rb, n);
                model_bulk += n;
                continue;
            }
            if (tkp_reader_next(r, &rec) != 1) break;
            cr_assert_eq(tkp_model_add(&m[b], &rec), 0);
        }
        cr_assert_eq(tkp_model_finish(&m[b]), 0);
        tkp_reader_close(r);
    }
    cr_assert_eq(m[0].nsteps, m[1].nsteps, "%s: steps", what);
    for (size_t i = 0; i < m[0].nsteps; i++) {
        const struct tkp_mstep *x = &m[0].steps[i], *y = &m[1].steps[i];
        uint64_t a[] = {x->thread, x->seg, (uint64_t)x->kind, x->launches, x->gemm_max_n,
                        x->gemm_max_m, x->gemm_last_n, x->gemm_last_m, x->gemm_last_ns,
                        x->launch_ns, x->begin_ns, x->end_ns, (uint64_t)x->index};
        uint64_t c[] = {y->thread, y->seg, (uint64_t)y->kind, y->launches, y->gemm_max_n,
                        y->gemm_max_m, y->gemm_last_n, y->gemm_last_m, y->gemm_last_ns,
                        y->launch_ns, y->begin_ns, y->end_ns, (uint64_t)y->index};
        for (size_t k = 0; k < sizeof(a) / sizeof(a[0]); k++)
            cr_assert_eq(a[k], c[k], "%s: step %zu: field %zu", what, i, k);
    }
    cr_assert_eq(m[0].nnames, m[1].nnames, "%s: names", what);
    for (size_t i = 0; i < m[0].nnames; i++)
        cr_assert_eq(m[0].names[i].launches, m[1].names[i].launches, "%s: name %zu", what, i);
    cr_assert_eq(m[0].nw, m[1].nw, "%s: weights", what);
    for (size_t j = 0; j < m[0].nw; j++) {
        const struct tkp_mweight *x = &m[0].w[j], *y = &m[1].w[j];
        cr_assert(x->a == y->a && x->m == y->m && x->n == y->n && x->mvar == y->mvar &&
                      x->nvar == y->nvar,
                  "%s: weight %zu", what, j);
    }
    cr_assert_eq(m[0].has_tokens, m[1].has_tokens, "%s: has_tokens", what);
    cr_assert_eq(m[0].token_dim_m, m[1].token_dim_m, "%s: token_dim_m", what);
    cr_assert_eq(m[0].now_ns, m[1].now_ns, "%s: now_ns", what);
    for (int b = 0; b < 2; b++) tkp_model_free(&m[b]);
    tkp_classes_free(cl);
}

/* A library call's template with the fields the model reads (lib_tmpl's vary with its id). */
static void gemm_tmpl(struct capw *w, uint32_t id, uint64_t m, uint64_t n, uint64_t batch,
                      uint64_t a_ptr, uint32_t status, uint32_t flags)
{
    const struct capw_lib c = {.lib = 1, .op = 6, .m = m, .n = n, .k = 256, .batch = batch,
                               .atype = 14, .btype = 14, .ctype = 14, .compute = 68,
                               .stream = 0x7000, .a_ptr = a_ptr, .status = status, .flags = flags};
    capw_lib_tmpl(w, id, 3, &c);
}

/* Reads both and checks they deliver the same, and the RUN form with launches taken in bulk;
 * returns the v3 reading (free it). */
static struct got pair_read(struct pair *p, const char *what)
{
    struct got a, b;
    pair_flush(p);
    read_all(p->v2, &a);
    read_all(p->v3, &b);
    same(&a, &b, what);
    got_free(&a);
    for (uint64_t seed = 1; seed <= 3; seed++) bulk_read(p->v3, &b, seed * 0x9e3779b97f4a7c15ull, what);
    model_same(p->v3, what);
    return b;
}

/* A definition the open run may precede (it only adds meaning): in both forms. */
#define DEF(p, call)                                                                              \
    do {                                                                                          \
        struct capw *w_ = (p)->v2;                                                                \
        call;                                                                                     \
        w_ = (p)->v3;                                                                             \
        call;                                                                                     \
    } while (0)
/* A record of its own or a definition that changes a meaning: the open run ends first. */
#define BOTH(p, call)                                                                             \
    do {                                                                                          \
        pair_flush(p);                                                                            \
        DEF(p, call);                                                                             \
    } while (0)

Test(runs, names_and_threads_redefined_between_runs)
{
    struct pair p;
    pair_init(&p);
    DEF(&p, capw_chunk_begin(w_, 0));
    DEF(&p, capw_thread(w_, 3, 777));
    DEF(&p, capw_name(w_, 5, "old_kernel"));
    DEF(&p, capw_name(w_, 6, "old_op"));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, lib_tmpl(w_, 0, 3, 6, 8));
    pair_launch(&p, 1, 0, 0, 1);
    pair_lib(&p, 1, 0, 0, 1, 10);
    BOTH(&p, capw_name(w_, 5, "new_kernel")); /* a meaning changes within the chunk */
    pair_launch(&p, 1, 0, 0, 2);
    BOTH(&p, capw_thread(w_, 3, 888));
    pair_lib(&p, 1, 0, 0, 2, 10);
    BOTH(&p, capw_name(w_, 6, "new_op"));
    pair_launch(&p, 1, 0, 0, 0);
    pair_lib(&p, 1, 0, 0, 3, 10);
    BOTH(&p, capw_chunk_end(w_));
    /* chunk 2: the first meanings again, templates defined after them: cached, not stale */
    DEF(&p, capw_chunk_begin(w_, 0));
    DEF(&p, capw_thread(w_, 3, 777));
    DEF(&p, capw_name(w_, 5, "old_kernel"));
    DEF(&p, capw_name(w_, 6, "old_op"));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, lib_tmpl(w_, 0, 3, 6, 8));
    pair_launch(&p, 1, 0, 0, 0);
    pair_lib(&p, 1, 0, 0, 1, 10);
    BOTH(&p, capw_thread(w_, 3, 999)); /* the only change in this chunk */
    pair_launch(&p, 1, 0, 0, 0);
    pair_lib(&p, 1, 0, 0, 2, 10);
    BOTH(&p, capw_chunk_end(w_));
    struct got g = pair_read(&p, "names");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 12, "2 CHUNKs, 10 records (got %zu)", g.n);
    static const char *const name[] = {"",           "old_kernel", "old_op", "new_kernel",
                                       "old_op",     "new_kernel", "new_op", "",
                                       "old_kernel", "old_op",     "old_kernel", "old_op"};
    static const uint32_t tid[] = {0, 777, 777, 777, 888, 888, 888, 0, 777, 777, 999, 999};
    for (size_t i = 0; i < g.n; i++) {
        cr_assert_str_eq(g.s[i].name, name[i], "record %zu", i);
        cr_assert_eq(g.s[i].tid, tid[i], "record %zu: tid %u", i, g.s[i].tid);
    }
    cr_assert_eq(g.stats.missing_names, 0);
    got_free(&g);
    pair_free(&p);
}

/* A template defined before its NAME and THREAD: uses before them miss (counted as for LAUNCH_T,
 * once per use), uses after them resolve. */
Test(runs, names_and_threads_defined_after_the_template)
{
    struct pair p;
    pair_init(&p);
    DEF(&p, capw_chunk_begin(w_, 0));
    DEF(&p, tmpl(w_, 1, 4, 9, 64));
    DEF(&p, lib_tmpl(w_, 2, 4, 10, 8));
    for (int i = 0; i < 3; i++) pair_launch(&p, 1, 7, 1, 0);
    pair_lib(&p, 1, 7, 2, 1, 5);
    BOTH(&p, capw_name(w_, 9, "late_kernel")); /* in a run, it would apply to all of it */
    pair_launch(&p, 1, 7, 1, 0);
    pair_flush(&p);
    DEF(&p, capw_thread(w_, 4, 4444));
    DEF(&p, capw_name(w_, 10, "late_op"));
    for (int i = 0; i < 2; i++) pair_launch(&p, 1, 7, 1, 0);
    pair_lib(&p, 1, 7, 2, 2, 5);
    BOTH(&p, capw_chunk_end(w_));
    struct got g = pair_read(&p, "late names");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 9);
    static const char *const name[] = {"",  "?",           "?",           "?",
                                       "?", "late_kernel", "late_kernel", "late_kernel",
                                       "late_op"};
    for (size_t i = 0; i < g.n; i++) cr_assert_str_eq(g.s[i].name, name[i], "record %zu", i);
    cr_assert_eq(g.stats.missing_names, 4);
    cr_assert_eq(g.stats.missing_threads, 5);
    cr_assert_eq(g.s[6].tid, 4444);
    cr_assert_eq(g.s[8].tid, 4444);
    got_free(&g);
    pair_free(&p);
}

/* ---- repeating RUNs (version 4) ---- */

/* A RUN whose kinds and template ids are the chunk's last RUN's is written repeating it: its dts
 * and host_ns are differences against that RUN's values (a chain of repeats included, values
 * wrapping), a RUN longer or shorter than the last is written whole, and so is the first RUN of
 * a chunk (a RUN repeats only one of its own chunk). Differential against single records. */
Test(runs, repeating_runs_decode_as_their_records)
{
    struct pair p;
    pair_init(&p);
    p.u.rep = 1;
    DEF(&p, head(w_, 5000));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, tmpl(w_, 200, 3, 5, 7)); /* a 2-byte id: the tmpls column is not one byte a record */
    DEF(&p, lib_tmpl(w_, 1, 3, 6, 8));
    /* A: launch, launch in call 7, the call, launch */
    int64_t dt[5][4] = {{10, 20, -15, 40},
                        {12, 18, -14, 43},                      /* B repeats A */
                        {INT64_MAX, INT64_MIN, 3, -1},          /* C repeats B: wrapping */
                        {5, 5, -5, 5},                          /* D repeats C */
                        {1, 2, 3, 4}};                          /* E: one record more */
    uint64_t host[5] = {100, 90, UINT64_MAX, 0, 7};
    for (int r = 0; r < 5; r++) {
        uint32_t call = 7 + (uint32_t)r;
        pair_launch(&p, dt[r][0], 1, 0, 0);
        pair_launch(&p, dt[r][1], 1, 200, call);
        pair_lib(&p, dt[r][2], 1, 1, call, host[r]);
        pair_launch(&p, dt[r][3], 1, 0, 0);
        if (r == 4) pair_launch(&p, 9, 1, 0, 0);
        pair_flush(&p);
    }
    /* F: one record fewer than E, then G repeating F */
    for (int r = 0; r < 2; r++) {
        pair_launch(&p, 3 + r, 1, 0, 0);
        pair_lib(&p, -2, 1, 1, 20 + (uint32_t)r, 50 + (uint64_t)r * 1000);
        pair_launch(&p, 30 * r, 1, 200, 0);
        pair_flush(&p);
    }
    BOTH(&p, capw_marker(w_, 5, 3, 1, 0, 1)); /* the dt chain goes on after the runs */
    BOTH(&p, capw_chunk_end(w_));
    cr_assert_eq(p.u.reps, 4, "B, C, D and G repeat (%u)", p.u.reps);
    /* the next chunk's first RUN has the last RUN's sequence but is written whole */
    DEF(&p, head(w_, 9000));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, lib_tmpl(w_, 1, 3, 6, 8));
    DEF(&p, tmpl(w_, 200, 3, 5, 7));
    p.u.pn = 0;
    pair_launch(&p, 1, 2, 0, 0);
    pair_lib(&p, 1, 2, 1, 30, 5);
    pair_launch(&p, 1, 2, 200, 0);
    pair_flush(&p);
    BOTH(&p, capw_chunk_end(w_));
    cr_assert_eq(p.u.reps, 4);
    struct got g = pair_read(&p, "repeating runs");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 1 + 4 * 4 + 5 + 3 + 3 + 1 + 1 + 3, "%zu records", g.n);
    /* spot checks against the values written (the differential checks every field) */
    cr_assert_eq(g.s[1 + 4 + 2].host_ns, 5000 + 10 + 20 - 15 + 40 + 12 + 18 - 14, "B's call");
    cr_assert_eq(g.s[1 + 4 + 2].x[11], 90, "B's host_ns");
    cr_assert_eq(g.s[1 + 8 + 2].x[11], UINT64_MAX, "C's host_ns");
    cr_assert_eq(g.s[1 + 12 + 2].x[11], 0, "D's host_ns");
    cr_assert_eq(g.s[1 + 12 + 2].x[0], 10, "D's call id");
    cr_assert_eq(g.s[1 + 16 + 5 + 3 + 1].x[11], 1050, "G's host_ns");
    got_free(&g);
    pair_free(&p);
}

/* A repeating RUN has its RUN's template ids, but a template defined between them may stand for
 * another thread (or an unresolved name) now: its records in bulk are the templates' of now (the
 * peek tells a RUN's templates once and reuses the answer for the RUNs repeating it). */
Test(runs, a_repeating_run_after_its_template_is_redefined)
{
    struct pair p;
    pair_init(&p);
    p.u.rep = 1;
    DEF(&p, head(w_, 5000));
    DEF(&p, capw_thread(w_, 4, 888));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, lib_tmpl(w_, 1, 3, 6, 8));
    for (int r = 0; r < 5; r++) {
        if (r == 1) BOTH(&p, tmpl(w_, 0, 4, 5, 64));  /* B: launches on thread 4 */
        if (r == 2) BOTH(&p, tmpl(w_, 0, 3, 5, 64));  /* C: thread 3 again */
        if (r == 3) BOTH(&p, tmpl(w_, 0, 3, 7, 64));  /* D: a name not defined */
        if (r == 4) BOTH(&p, capw_name(w_, 7, "late_kernel")); /* E: defined now */
        pair_launch(&p, 10, 1, 0, 0);
        pair_lib(&p, 5, 1, 1, 7 + (uint32_t)r, 100);
        pair_launch(&p, 3, 1, 0, 7 + (uint32_t)r);
        pair_flush(&p);
    }
    BOTH(&p, capw_chunk_end(w_));
    cr_assert_eq(p.u.reps, 4, "B, C, D and E repeat A (%u)", p.u.reps);
    size_t taken = bulk_taken;
    struct got g = pair_read(&p, "redefined template");
    cr_assert_gt(bulk_taken, taken, "records were taken in bulk");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 1 + 5 * 3, "%zu records", g.n);
    cr_assert_eq(g.s[1 + 3].thread, 4, "B's launch");
    cr_assert_eq(g.s[1 + 3].tid, 888, "B's launch");
    cr_assert_eq(g.s[1 + 4].thread, 3, "B's library call");
    cr_assert_eq(g.s[1 + 6].thread, 3, "C's launch");
    cr_assert_str_eq(g.s[1 + 9].name, "?", "D's launch");
    cr_assert_str_eq(g.s[1 + 12].name, "late_kernel", "E's launch");
    got_free(&g);
    pair_free(&p);
}

/* Two chunks of one layout whose RUNs differ in their template ids only: the second chunk's
 * payload lies where the first's did (the reader's buffer reused), so its RUN's one-byte ids
 * widened for the repeating RUN after it (record_fast.c, run_t32) must be its own. */
Test(runs, a_repeating_run_in_the_next_chunk_at_the_same_place)
{
    struct pair p;
    pair_init(&p);
    p.u.rep = 1;
    for (uint32_t k = 0; k < 2; k++) {
        DEF(&p, head(w_, 5000));
        p.u.pn = 0; /* no RUN before in this chunk */
        DEF(&p, tmpl(w_, 1 + 2 * k, 3, 5, 64));
        DEF(&p, tmpl(w_, 2 + 2 * k, 3, 5, 64));
        for (int r = 0; r < 2; r++) {
            for (uint32_t i = 0; i < 6; i++) pair_launch(&p, 10 + r, 1, 1 + 2 * k + i % 2, 0);
            pair_flush(&p);
        }
        BOTH(&p, capw_chunk_end(w_));
    }
    cr_assert_eq(p.u.reps, 2, "a repeating RUN in each chunk (%u)", p.u.reps);
    struct got g = pair_read(&p, "the next chunk at the same place");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    got_free(&g);
    pair_free(&p);
}

/* A repeating RUN that breaks a rule of version 4 makes its chunk bad. */
static void bad_repeat_calls(const char *what, int first, uint32_t n, int nil, const char *host,
                             const uint8_t *calls, const char *msg)
{
    struct capw *w = good_first_chunk();
    if (!first) { /* a RUN of a launch and a library call before it */
        static const struct col c[5] = {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")};
        pack_run(w, 1, 2, c);
    }
    static const uint8_t dts[3] = {2, 2, 2}, zeros[3] = {0, 0, 0}, kinds[3] = {0, 1, 0};
    const uint8_t *p[5] = {kinds, dts, kinds, calls ? calls : zeros, (const uint8_t *)host};
    size_t len[5] = {CAPW_NIL, n, CAPW_NIL, n, strlen(host)};
    if (nil == 1) len[2] = n; /* tmpls a bin (of template 0s), kinds nil */
    if (nil == 2) len[0] = n; /* kinds a bin, tmpls nil */
    capw_run(w, 1, n, 0, p, len, 0, -1);
    capw_chunk_end(w);
    struct got g;
    expect_bad_last_chunk(w, what, "RUN record", msg, 2, &g);
    got_free(&g);
    capw_free(w);
}
static void bad_repeat(const char *what, int first, uint32_t n, int nil, const char *host,
                       const char *msg)
{
    bad_repeat_calls(what, first, n, nil, host, NULL, msg);
}

Test(runs, a_repeating_run_breaking_a_rule_makes_the_chunk_bad)
{
    /* the first RUN of a chunk (the last RUN is the previous chunk's) */
    bad_repeat("first in its chunk", 1, 1, 0, "", "repeats a RUN, none before it in the chunk");
    bad_repeat("longer than the last", 0, 3, 0, "\1", "repeats a RUN of 2 records with 3");
    bad_repeat("shorter than the last", 0, 1, 0, "\1", "repeats a RUN of 2 records with 1");
    bad_repeat("kinds nil, tmpls a bin", 0, 2, 1, "\1", "kinds is nil, tmpls is not");
    bad_repeat("tmpls nil, kinds a bin", 0, 2, 2, "\1", "tmpls is nil, kinds is not");
    /* host_ns has a value per library call of the RUN repeated (one) */
    bad_repeat("host_ns of two values", 0, 2, 0, "\1\1", "column 'host_ns' has bytes after its 1 values");
    bad_repeat("host_ns empty", 0, 2, 0, "", "record 0: column 'host_ns' ends early");
    /* its call ids are checked, though its template ids were checked with the RUN it repeats:
     * the library call 1 + unzigzag(3) = -1 from call 0; a launch's step 5 in a run that is
     * otherwise fine */
    static const uint8_t below[2] = {0, 3}, launch_below[2] = {6, 0};
    bad_repeat_calls("a call id below 0", 0, 2, 0, "\1", below, "record 1: call id out of range");
    bad_repeat_calls("a launch's call id below 1", 0, 2, 0, "\1", launch_below,
                     "record 0: call id out of range");
}

/* The same repeating RUN, with a RUN before it in its chunk and one host_ns value, is good. */
Test(runs, the_repeating_run_the_bad_cases_change_is_good)
{
    struct capw *w = good_first_chunk();
    static const struct col c[5] = {B("\0\1"), B("\4\4"), B("\0\0"), B("\0\0"), B("\5")};
    pack_run(w, 1, 2, c);
    static const uint8_t dts[2] = {2, 3}, calls[2] = {0, 0}, host[1] = {3};
    const uint8_t *p[5] = {NULL, dts, NULL, calls, host};
    size_t len[5] = {CAPW_NIL, 2, CAPW_NIL, 2, 1};
    capw_run(w, 1, 2, 0, p, len, 0, -1);
    capw_chunk_end(w);
    struct got g;
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 7, "CHUNK, launch, CHUNK, launch, library call, launch, library call");
    cr_assert_eq(g.s[3].host_ns, 102);
    cr_assert_eq(g.s[4].host_ns, 104);
    cr_assert_eq(g.s[5].host_ns, 104 + 2 + 1, "dt 2 + unzigzag(2) = 3");
    cr_assert_eq(g.s[6].host_ns, 107 + 2 - 2, "dt 2 + unzigzag(3) = 0");
    cr_assert_eq(g.s[6].type, TKP_REC_LIB_CALL);
    cr_assert_eq(g.s[6].x[11], 5 - 2, "host_ns 5 + unzigzag(3) = 3");
    got_free(&g);
    capw_free(w);
}

/* ---- differential: random sequences, as single records and as RUNs split at random ---- */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17; /* xorshift64 */
    return *s;
}

static int64_t rnd_dt(uint64_t *s)
{
    uint64_t r = rnd(s) % 100;
    if (r < 60) return (int64_t)(rnd(s) % 1000);
    if (r < 80) return -(int64_t)(rnd(s) % 1000);
    if (r < 90) return (int64_t)(rnd(s) % (1u << 20)) - (1 << 19);
    if (r < 95) return (rnd(s) & 1 ? 1 : -1) * (int64_t)(1ull << 40);
    if (r < 97) return rnd(s) & 1 ? INT64_MAX : INT64_MIN;
    return (int64_t)rnd(s);
}

static uint64_t rnd_host(uint64_t *s)
{
    uint64_t r = rnd(s) % 10;
    return r < 7 ? rnd(s) % 100000 : r < 8 ? UINT64_MAX : rnd(s);
}

/* Template ids: 1 and 2 bytes, 3 bytes, and the largest. */
static const uint32_t pool[] = {0, 1, 2, 3, 5, 8, 127, 128, 129, 300, 1000, 16383, 16384, 65535};
#define NPOOL (sizeof(pool) / sizeof(pool[0]))

static uint32_t repeats_seen; /* repeating RUNs the differential wrote */
/* The writer's usual RUNs only (the reader's own loop for them, record_fast.c run_batch_usual):
 * one-byte template ids, each launch's call 0 or the next call's id, each library call's the
 * last + 1 or the last again (call steps 0 and 1) */
static int usual_only;

/* A launch (lib 0) or library call of template id with a random call id near the last call's. */
static void rnd_record(struct pair *p, uint64_t *s, int lib, int64_t dt, uint64_t step, uint32_t id,
                       uint32_t *last)
{
    uint64_t c = rnd(s) % 10;
    if (usual_only) {
        if (lib) {
            uint32_t call = c < 7 ? *last + 1 : *last;
            pair_lib(p, dt, step, id, call, rnd_host(s));
            *last = call;
        } else {
            pair_launch(p, dt, step, id, c < 5 ? 0 : *last + 1);
        }
        return;
    }
    if (lib) {
        uint32_t call = c < 8 ? *last + 1 : c < 9 ? (uint32_t)rnd(s) : *last / 2;
        pair_lib(p, dt, step, id, call, rnd_host(s));
        *last = call;
    } else {
        uint32_t call = c < 5 ? 0 : c < 9 ? *last + 1 : (uint32_t)rnd(s);
        pair_launch(p, dt, step, id, call);
    }
}

static void differential(uint64_t seed, int nrec)
{
    struct pair p;
    uint64_t s = seed, step = seed % 3;
    uint32_t last = 0; /* the last library call's id */
    int in_chunk = 0, burst = 0;
    uint8_t ldef[NPOOL], cdef[NPOOL]; /* defined in this chunk */
    pair_init(&p);
    p.u.rep = (int)(seed & 1); /* version 4's repeating RUNs, or version 3's RUNs only */
    for (int i = 0; i < nrec; i++) {
        if (!in_chunk) {
            uint64_t base = rnd(&s) % (1ull << 40); /* DEF evaluates its call twice */
            DEF(&p, capw_chunk_begin(w_, base));
            p.u.pn = 0; /* no RUN before in this chunk */
            for (uint32_t t = 0; t < 3; t++) /* thread 3 is never mapped */
                if (rnd(&s) % 8) DEF(&p, capw_thread(w_, t, 100 + t));
            for (int k = 0; k < 7; k++) { /* name 7 is never defined */
                char str[32];
                snprintf(str, sizeof(str), "name%d", k);
                if (rnd(&s) % 8) DEF(&p, capw_name(w_, (uint64_t)k, str));
            }
            memset(ldef, 0, sizeof(ldef));
            memset(cdef, 0, sizeof(cdef));
            in_chunk = 1;
        }
        uint64_t r = burst ? (burst--, 99) : rnd(&s) % 100;
        size_t k = rnd(&s) % (usual_only ? 7 : NPOOL); /* pool[0..6]: one byte */
        uint32_t th = (uint32_t)(rnd(&s) % 4), nm = (uint32_t)(rnd(&s) % 8);
        if (r < 3) {
            step = rnd(&s) % 4 ? step + 1 : step + (1ull << 32);
        } else if (r < 8) { /* a template: a redefinition changes records of the open run */
            int lib = rnd(&s) & 1;
            uint8_t *def = lib ? cdef : ldef;
            uint32_t shape = (uint32_t)rnd(&s);
            if (def[k]) pair_flush(&p);
            if (lib)
                DEF(&p, lib_tmpl(w_, pool[k], th, nm, shape % 5000));
            else
                DEF(&p, tmpl(w_, pool[k], th, nm, shape));
            def[k] = 1;
        } else if (r < 10) {
            char str[32];
            snprintf(str, sizeof(str), "name%u_%d", nm, i);
            BOTH(&p, capw_name(w_, nm, str));
        } else if (r < 11) {
            uint32_t tid = (uint32_t)rnd(&s);
            BOTH(&p, capw_thread(w_, th, tid));
        } else if (r < 14) {
            int64_t dt = rnd_dt(&s);
            BOTH(&p, capw_marker(w_, dt, th, step, 0, i));
        } else if (r < 15 && ldef[k]) { /* a launch with a stack: a record of its own */
            int64_t dt = rnd_dt(&s);
            uint32_t stack = 1 + (uint32_t)(rnd(&s) % 9);
            BOTH(&p, launch_t(w_, dt, step, pool[k], last + 1, stack));
        } else if (r < 17) {
            pair_flush(&p); /* a split */
        } else if (r < 18) {
            BOTH(&p, capw_chunk_end(w_));
            in_chunk = 0;
        } else if (r < 19) {
            burst = (int)(rnd(&s) % 400);
        } else if (r < 21 && p.u.pn) { /* the last RUN's kinds and templates again, new values */
            pair_flush(&p);
            uint32_t m = p.u.pn;
            uint8_t *kind = malloc(m);
            uint32_t *id = malloc(m * sizeof(*id));
            cr_assert(kind && id);
            const uint8_t *tp = p.u.pt.p;
            for (uint32_t j = 0; j < m; j++) {
                kind[j] = p.u.pk.p[j];
                uint64_t v = 0;
                for (int sh = 0;; sh += 7) {
                    v |= (uint64_t)(*tp & 0x7f) << sh;
                    if (!(*tp++ & 0x80)) break;
                }
                id[j] = (uint32_t)v;
            }
            int64_t shift = rnd_dt(&s); /* the same gaps moved, or new ones */
            for (uint32_t j = 0; j < m; j++) {
                int64_t dt = rnd(&s) % 2 ? (int64_t)((uint64_t)p.u.pdt[j] + (uint64_t)(shift % 64))
                                         : rnd_dt(&s);
                if (usual_only && rnd(&s) % 2) /* each one-byte difference, and some of two */
                    dt = (int64_t)((uint64_t)p.u.pdt[j] + (uint64_t)((int64_t)(rnd(&s) % 161) - 80));
                rnd_record(&p, &s, kind[j], dt, step, id[j], &last);
            }
            pair_flush(&p);
            free(kind), free(id);
        } else {
            int lib = rnd(&s) % 4 == 0;
            uint8_t *def = lib ? cdef : ldef;
            if (!def[k]) { /* defined first, maybe inside the open run */
                if (lib)
                    DEF(&p, lib_tmpl(w_, pool[k], th, nm, 8));
                else
                    DEF(&p, tmpl(w_, pool[k], th, nm, 64));
                def[k] = 1;
            }
            rnd_record(&p, &s, lib, rnd_dt(&s), step, pool[k], &last);
        }
    }
    if (in_chunk) BOTH(&p, capw_chunk_end(w_));
    char what[64];
    snprintf(what, sizeof(what), "seed %llu", (unsigned long long)seed);
    struct got g = pair_read(&p, what);
    cr_assert_eq(g.end, 0, "%s: %s", what, g.err.msg);
    cr_assert_gt(g.n, (size_t)nrec / 2, "%s: %zu records", what, g.n);
    if (p.u.rep) cr_assert_gt(p.u.reps, 20, "%s: %u repeating RUNs", what, p.u.reps);
    repeats_seen += p.u.reps;
    got_free(&g);
    pair_free(&p);
}

Test(runs, differential_against_single_records)
{
    for (uint64_t seed = 1; seed <= 12; seed++) differential(seed * 0x9e3779b97f4a7c15ull, 20000);
    cr_assert_gt(bulk_taken, 10000, "launches taken in bulk: %zu", bulk_taken);
    cr_assert_gt(bulk_libs, 1000, "library calls taken in bulk: %zu", bulk_libs);
    cr_assert_gt(model_bulk, 10000, "records the model took in bulk: %zu", model_bulk);
    cr_assert_gt(repeats_seen, 500, "repeating RUNs: %u", repeats_seen);
}

/* The model's RUN path (tkp_model_add_run) at its edges, against the records one by one
 * (model_same): the verdict's launch time folded while the launches come (a gap one below the
 * smallest so far, then one past the cap it makes; a time going back; a gap of UINT64_MAX; a
 * thread back in an earlier step, whose fold close_step must not keep), and the library calls
 * (the rule's exclusions, two calls at one time, a call without a weight, two weights that meet
 * in the vote's cache, one of them with another n). */
Test(runs, the_model_takes_a_run_at_its_edges)
{
    struct pair p;
    size_t bulk0 = model_bulk;
    pair_init(&p);
    DEF(&p, head(w_, 5000));
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    DEF(&p, gemm_tmpl(w_, 1, 16, 4096, 1, 0x10000100, 0, 0));
    DEF(&p, gemm_tmpl(w_, 2, 16, 1024, 1, 0x10003d00, 0, 0)); /* the same cache slot as 1's */
    DEF(&p, gemm_tmpl(w_, 3, 99999, 99999, 2, 0x10000200, 0, 0)); /* batched: not counted */
    DEF(&p, gemm_tmpl(w_, 4, 88888, 88888, 1, 0x10000300, 0, TKP_LIBF_CAPTURED));
    DEF(&p, gemm_tmpl(w_, 5, 77777, 77777, 1, 0x10000400, 1, 0)); /* failed */
    DEF(&p, gemm_tmpl(w_, 6, 32, 512, 1, 0, 0, 0));                /* no weight */
    DEF(&p, gemm_tmpl(w_, 7, 17, 8192, 1, 0x10000100, 0, 0));      /* 1's weight, other m, n */
    for (int r = 0; r < 3; r++) {
        pair_launch(&p, 100, 1, 0, 0);
        pair_launch(&p, 20000, 1, 0, 0); /* the smallest gap: the cap 40000 */
        /* at one time, the step's last GEMM the last of them (2's) */
        for (uint32_t id = 6; id >= 3; id--) pair_lib(&p, 0, 1, id, id, 10);
        pair_lib(&p, 0, 1, 7, 7, 10); /* the weight first with 7's m and n */
        pair_lib(&p, 0, 1, 1, 8, 10); /* then 1's: both vary (its slot in the cache holds it) */
        pair_lib(&p, 0, 1, 2, 9, 10); /* 2's weight takes the slot */
        pair_launch(&p, 19999, 1, 0, 0); /* one below: the cap 39998 */
        pair_launch(&p, 39999, 1, 0, 0); /* past the cap by one */
        pair_launch(&p, -5, 1, 0, 0);    /* back in time: no gap */
        pair_launch(&p, 7, 1, 0, 0);
        pair_flush(&p);
        pair_launch(&p, 50, 2, 0, 0); /* the next step */
        pair_launch(&p, 60000, 2, 0, 0);
        pair_launch(&p, 3, 2, 0, 0);
        pair_flush(&p);
        pair_launch(&p, 9, 1, 0, 0); /* the thread back in step 1 */
        pair_launch(&p, 2, 1, 0, 0);
        pair_flush(&p);
        BOTH(&p, capw_chunk_end(w_));
        DEF(&p, head(w_, 0)); /* a chunk from time 0 */
        DEF(&p, tmpl(w_, 0, 3, 5, 64));
        for (uint32_t id = 1; id <= 7; id++)
            DEF(&p, gemm_tmpl(w_, id, 16 + id, 8192, 1, 0x10000100, 0, 0)); /* 7's n */
    }
    pair_launch(&p, 0, 9, 0, 0);
    pair_launch(&p, -1, 9, 0, 0); /* a gap of UINT64_MAX */
    pair_launch(&p, 1, 9, 0, 0);  /* back to 0 */
    pair_launch(&p, 5, 9, 0, 0);
    pair_launch(&p, 20000, 9, 0, 0);
    BOTH(&p, capw_chunk_end(w_));
    DEF(&p, head(w_, 0)); /* a run's launches in order from time 0: the least time above 0 */
    DEF(&p, tmpl(w_, 0, 3, 5, 64));
    for (int k = 0; k < 4; k++) pair_launch(&p, k < 2 ? 0 : 5, 10, 0, 0);
    BOTH(&p, capw_chunk_end(w_));
    struct got g = pair_read(&p, "the model's run path");
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    got_free(&g);
    pair_free(&p);
    cr_assert_gt(model_bulk - bulk0, 20, "records the model took in bulk: %zu", model_bulk - bulk0);
}

Test(runs, differential_on_the_writers_usual_runs)
{
    usual_only = 1;
    for (uint64_t seed = 1; seed <= 8; seed++) differential(seed * 0x2545f4914f6cdd1dull, 20000);
    usual_only = 0;
    cr_assert_gt(repeats_seen, 300, "repeating RUNs: %u", repeats_seen);
}

/* ---- a RUN in a merged read of two processes ---- */

Test(runs, in_a_merged_read)
{
    char dir[] = "/tmp/tkp_runs_XXXXXX", path[64];
    cr_assert(mkdtemp(dir));
    for (int k = 0; k < 2; k++) {
        struct capw *w = capw_new();
        struct run u = {.step = 3};
        capw_chunk_begin(w, 1000 + 5 * (uint64_t)k); /* process 1: 1010, 1020, ...; 2: 1015 */
        capw_meta(w, "prog", 100 + (uint64_t)k);
        capw_thread(w, 0, 500 + (uint32_t)k);
        capw_name(w, 1, k ? "b_kernel" : "a_kernel");
        capw_name(w, 2, "cublasGemmEx");
        tmpl(w, 200, 0, 1, 64);
        lib_tmpl(w, 0, 0, 2, 8);
        for (int i = 0; i < 100; i++) {
            if (i % 2)
                run_lib(&u, 10, 0, 1 + (uint32_t)i / 2, 7);
            else
                run_launch(&u, 10, 200, 1 + (uint32_t)i / 2);
        }
        run_end(w, &u, 0);
        capw_chunk_end(w);
        snprintf(path, sizeof(path), "%s/prog.%d.tokprof", dir, 100 + k);
        cr_assert_eq(capw_write_file(w, path), 0);
        run_free(&u);
        capw_free(w);
    }
    struct got g;
    read_merged(dir, &g);
    size_t n = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < g.n; i++) {
        const struct seen *x = &g.s[i];
        if (x->type != TKP_REC_LAUNCH && x->type != TKP_REC_LIB_CALL) continue;
        int k = (x->host_ns % 10) == 5, j = (int)((x->host_ns - 1000 - 5 * k) / 10) - 1;
        cr_assert_geq(x->host_ns, prev, "record %zu: merged by time", i);
        prev = x->host_ns;
        cr_assert_eq(x->type, j % 2 ? TKP_REC_LIB_CALL : TKP_REC_LAUNCH, "record %zu", i);
        cr_assert_str_eq(x->name, j % 2 ? "cublasGemmEx" : k ? "b_kernel" : "a_kernel");
        cr_assert_eq(x->tid, 500 + (uint32_t)k, "record %zu", i);
        cr_assert_eq(x->x[j % 2 ? 0 : 10], 1 + (uint64_t)j / 2, "record %zu: call", i);
        n++;
    }
    cr_assert_eq(n, 200);
    got_free(&g);
    snprintf(path, sizeof(path), "rm -rf %s", dir);
    cr_assert_eq(system(path), 0);
}

/* A model of every step (the built-in classes: free cl after it). */
static void model_new(struct tkp_model *m, struct tkp_classes **cl)
{
    cr_assert_eq(tkp_classes_new(NULL, cl, NULL, 0), 0);
    struct tkp_model_opts o = {.classes = *cl, .from = -1, .to = -1};
    tkp_model_init(m, &o);
}

/* The model's token vote with two weights whose addresses meet in its cache of recent weights
 * (model.c weight_recent: 0x10000100 and 0x10003d00 both hash to 207), alternating
 * step by step as a model's layers do: each keeps its own n, and its m (the tokens) varies, so
 * that the vote says m (taken for one another, the one weight would see n vary as much). */
Test(runs, the_token_vote_tells_weights_apart_in_its_cache)
{
    struct tkp_classes *cl;
    struct tkp_model m;
    model_new(&m, &cl);
    uint64_t ns = 1000;
    for (uint64_t step = 1; step <= 4; step++)
        for (int w = 0; w < 2; w++) {
            struct tkp_record r;
            memset(&r, 0, sizeof(r));
            r.type = TKP_REC_LIB_CALL, r.step = step, r.host_ns = ns += 1000;
            r.lib_call.lib = TKP_LIB_CUBLAS, r.lib_call.op = "cublasGemmEx";
            r.lib_call.a_ptr = w ? 0x10003d00 : 0x10000100;
            r.lib_call.m = step, r.lib_call.n = w ? 1024 : 4096, r.lib_call.k = 256;
            r.lib_call.batch = 1;
            cr_assert_eq(tkp_model_add(&m, &r), 0);
        }
    cr_assert_eq(m.nw, 2, "two weights, got %zu", m.nw);
    cr_assert_eq(tkp_model_finish(&m), 0);
    cr_assert(m.has_tokens);
    cr_assert_eq(m.token_dim_m, 1, "the tokens are m");
    tkp_model_free(&m);
    tkp_classes_free(cl);
}

/* Many steps open at once (none has its STEP record: all close at the finish), past the blocks
 * of open-step records the model allocates them from (model.c, OPEN_BLOCK): each keeps its own
 * launches and the launch-call time of its own gaps. */
Test(runs, the_model_keeps_a_thousand_open_steps_apart)
{
    struct tkp_classes *cl;
    struct tkp_model m;
    model_new(&m, &cl);
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_LAUNCH, r.tid = 77, r.launch.name = "k";
    for (uint64_t step = 0; step < 1000; step++)
        for (uint64_t k = 0; k < 3; k++) {
            r.step = step, r.host_ns = 1000000 * step + 20000 * k; /* gaps of 20 us: the cap */
            cr_assert_eq(tkp_model_add(&m, &r), 0);
        }
    cr_assert_eq(tkp_model_finish(&m), 0);
    cr_assert_eq(m.nsteps, 1000);
    for (size_t i = 0; i < m.nsteps; i++) {
        cr_assert_eq(m.steps[i].seg, i);
        cr_assert_eq(m.steps[i].launch_ns, 40000, "step %zu: %llu", i,
                     (unsigned long long)m.steps[i].launch_ns);
    }
    cr_assert_eq(m.names[0].launches, 3000);
    tkp_model_free(&m);
    tkp_classes_free(cl);
}
