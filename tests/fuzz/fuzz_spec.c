/* Fuzz target for the spec parser, compiler and monitor (libFuzzer's entry point).
 * regression_driver.c replays its corpus (corpus/spec/ and the specs of tests/e2e/spec/) in CTest;
 * run_fuzz.sh builds it with libFuzzer to fuzz for real (FUZZ_TARGET=spec).
 *
 * A spec that parses is compiled; one that compiles is run over a small synthetic capture (a
 * set-up segment and three token steps of launches inside a cuBLASLt call, copies, syncs, GPU
 * records), once with GPU time and once without, and its reports are written. A compile error
 * must say why, and never "internal error" (issue 19: a valid spec hit one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/reader.h"
#include "check/ast.h"
#include "check/bulk.h"
#include "check/compile.h"
#include "check/monitor.h"
#include "check/parse.h"
#include "check/prog.h"
#include "check/results.h"

/* With `bulk`, launches and library calls go to the monitor as a RUN's records do
 * (tkp_mon_feed_run: up to TKP_LAUNCH_BULK of one thread and segment at a time), the rest one by
 * one. */
static int bulk;
static struct tkp_run_full bulk_b;
static struct tkp_launch_tmpl bulk_lt[TKP_LAUNCH_BULK]; /* record i's template: i */
static struct tkp_lib_tmpl bulk_ct[TKP_LAUNCH_BULK];
static uint32_t bulk_tmpl[TKP_LAUNCH_BULK];
static uint8_t bulk_kind[TKP_LAUNCH_BULK]; /* the columns b points at (the reader's batch) */
static uint64_t bulk_host[TKP_LAUNCH_BULK], bulk_call_ns[TKP_LAUNCH_BULK];
static uint32_t bulk_call[TKP_LAUNCH_BULK];
static size_t bulk_n;

static void flush(struct tkp_mon *m)
{
    bulk_b.kind = bulk_kind, bulk_b.host_ns = bulk_host, bulk_b.call = bulk_call;
    bulk_b.call_ns = bulk_call_ns, bulk_b.tmpl = bulk_tmpl, bulk_b.lt = bulk_lt, bulk_b.ct = bulk_ct;
    if (bulk_n) tkp_mon_feed_run(m, &bulk_b, bulk_n);
    bulk_n = 0;
}

static void put(struct tkp_mon *m, const struct tkp_record *r)
{
    int run = r->type == TKP_REC_LAUNCH || r->type == TKP_REC_LIB_CALL;
    if (!bulk || !run) {
        flush(m);
        tkp_mon_feed(m, r);
        return;
    }
    if (bulk_n && (bulk_n == TKP_LAUNCH_BULK || bulk_b.thread != r->thread ||
                   bulk_b.step != r->step || bulk_b.pid != r->pid))
        flush(m);
    size_t i = bulk_n++;
    bulk_b.thread = r->thread, bulk_b.tid = r->tid, bulk_b.step = r->step, bulk_b.pid = r->pid;
    bulk_b.offset = r->offset, bulk_host[i] = r->host_ns;
    if (r->type == TKP_REC_LAUNCH) {
        bulk_lt[i].launch = r->launch, bulk_lt[i].launch.call = 0;
        bulk_tmpl[i] = (uint32_t)i, bulk_kind[i] = 0, bulk_call[i] = r->launch.call;
    } else {
        bulk_ct[i].lib = r->lib_call, bulk_ct[i].lib.call = 0, bulk_ct[i].lib.call_ns = 0;
        bulk_tmpl[i] = (uint32_t)i, bulk_kind[i] = 1, bulk_call[i] = r->lib_call.call;
        bulk_call_ns[i] = r->lib_call.call_ns;
    }
}

/* The synthetic capture: thread 0 of process 1, segment 0 set-up, 1..3 token steps; a token
 * step ends with a launch after its sync. */
static void feed(struct tkp_mon *m, int gpu)
{
    static const char *const kern[] = {"fill_random_kernel", "paged_attention_decode_kernel",
                                       "nvjet_tst_128x8_64x8", "argmax_sampling_kernel"};
    struct tkp_record r;
    uint64_t t = 1000000, g = 5000000;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_THREAD, r.pid = 1, r.tid = 42;
    put(m, &r);
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_GPU_INFO, r.pid = 1, r.gpu_info.status = gpu ? TKP_GPU_ON : TKP_GPU_OFF;
    put(m, &r);
    for (uint64_t seg = 0; seg < 4; seg++) {
        uint64_t begin = t;
        for (int k = seg ? 1 : 0; k < (seg ? 4 : 1); k++) {
            memset(&r, 0, sizeof(r));
            r.pid = 1, r.tid = 42, r.step = seg, r.host_ns = t += 1000;
            if (k == 2) { /* a GEMM: the library call is written after its launch */
                r.type = TKP_REC_LAUNCH, r.launch.name = kern[k], r.launch.call = (uint32_t)seg;
                r.launch.grid[0] = r.launch.block[0] = 8, r.launch.grid[1] = r.launch.grid[2] = 1;
                r.launch.block[1] = r.launch.block[2] = 1;
                put(m, &r);
                r.type = TKP_REC_LIB_CALL, r.lib_call.call = (uint32_t)seg;
                r.lib_call.lib = TKP_LIB_CUBLASLT, r.lib_call.op = "cublasLtMatmul";
                r.lib_call.m = seg == 3 ? 4096 : 1024, r.lib_call.n = seg == 1 ? 8 : 1;
                r.lib_call.k = 256, r.lib_call.batch = 1, r.host_ns = t += 1000;
            } else {
                r.type = TKP_REC_LAUNCH, r.launch.name = kern[k];
                r.launch.grid[0] = r.launch.grid[1] = r.launch.grid[2] = 1;
                r.launch.block[0] = r.launch.block[1] = r.launch.block[2] = 32;
            }
            put(m, &r);
        }
        memset(&r, 0, sizeof(r));
        r.type = TKP_REC_COPY, r.pid = 1, r.tid = 42, r.step = seg, r.host_ns = t += 1000;
        r.copy.kind = TKP_COPY_MEMCPY, r.copy.dir = seg ? TKP_DIR_DTOH : TKP_DIR_HTOD;
        r.copy.bytes = seg ? 4 : 1 << 20;
        put(m, &r);
        r.type = TKP_REC_SYNC, r.sync.wait_ns = 500, r.host_ns = t += 1000;
        put(m, &r);
        if (seg) {
            memset(&r, 0, sizeof(r));
            r.type = TKP_REC_LAUNCH, r.pid = 1, r.tid = 42, r.step = seg, r.host_ns = t += 1000;
            r.launch.name = kern[0];
            r.launch.grid[0] = r.launch.grid[1] = r.launch.grid[2] = 1;
            r.launch.block[0] = r.launch.block[1] = r.launch.block[2] = 32;
            put(m, &r);
        }
        memset(&r, 0, sizeof(r));
        r.type = TKP_REC_STEP, r.pid = 1, r.tid = 42, r.step = seg;
        r.step_rec.kind = seg ? TKP_STEP_TOKEN : TKP_STEP_OUTSIDE;
        r.step_rec.begin_ns = begin, r.step_rec.mark_ns = r.step_rec.end_ns = t += 1000;
        r.step_rec.launches = seg ? 3 : 1, r.step_rec.copies = 1;
        put(m, &r);
        for (int k = 0; gpu && k < 3; k++) {
            memset(&r, 0, sizeof(r));
            r.type = TKP_REC_GPU_KERNEL, r.pid = 1, r.step = seg, r.gpu.name = kern[k + 1];
            r.gpu.start_ns = g += 300, r.gpu.end_ns = g += 2000 * (seg + 1);
            put(m, &r);
        }
    }
    flush(m);
    tkp_mon_finish(m);
}

/* The reports (table and JSON) of a spec over the synthetic capture, in a malloc'd string; with
 * `general`, by the general interpreter alone (check/prog.h tkp_check_general); with `in_bulk`,
 * launches and library calls fed in bulk. */
static char *reports(const struct tkp_spec *sp, int gpu, int general, int in_bulk)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    tkp_check_general = general;
    struct tkp_mon *m = NULL;
    if (!tkp_mon_new(sp, &m)) {
        bulk = in_bulk;
        feed(m, gpu);
        bulk = 0;
        tkp_report_table(f, sp, m);
        tkp_report_json(f, sp, m);
    }
    tkp_mon_free(m);
    tkp_check_general = 0;
    fclose(f);
    return buf;
}

/* Runs a compiled spec over the synthetic capture, with and without GPU time: the fast paths
 * (numeric programs, verdicts and `prev` updates by shape, launches in bulk) must report what
 * the general interpreter does, byte for byte. */
static void run_spec(const struct tkp_spec *sp)
{
    FILE *null = fopen("/dev/null", "w");
    if (!null) return;
    tkp_report_explain(null, sp);
    fclose(null);
    for (int gpu = 0; gpu < 2; gpu++) {
        char *general = reports(sp, gpu, 1, 0);
        for (int in_bulk = 0; in_bulk < 2; in_bulk++) {
            char *fast = reports(sp, gpu, 0, in_bulk);
            if (fast && general && strcmp(fast, general)) {
                fprintf(stderr,
                        "fuzz_spec: the fast paths%s and the general interpreter disagree "
                        "(%s GPU time)\n--- fast\n%s--- general\n%s", in_bulk ? " in bulk" : "",
                        gpu ? "with" : "without", fast, general);
                abort();
            }
            free(fast);
        }
        free(general);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct tkp_spec *sp = NULL;
    struct tkp_spec_err e;
    int rc = tkp_spec_parse(text, "fuzz", &sp, &e); /* sp owns text from here */
    if (!rc) rc = tkp_spec_compile(sp, &e);
    if (!rc) {
        run_spec(sp);
    } else if (e.msg[0] == 0 || !strncmp(e.msg, "internal error", 14)) {
        /* every failure must say why, and a valid spec must not reach an internal error */
        fprintf(stderr, "fuzz_spec: %u:%u: %s\n", e.line, e.col, e.msg[0] ? e.msg : "(no reason)");
        abort();
    }
    tkp_spec_free(sp);
    return 0;
}
