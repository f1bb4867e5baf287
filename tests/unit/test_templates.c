/* Templates (docs/FORMAT.md, "Templates"): LAUNCH_T and LIB_CALL_T decode to exactly the LAUNCH
 * and LIB_CALL they stand for; a template is per chunk, its id bounded, its latest definition
 * wins; and a use the chunk does not define makes the chunk bad, not a guess. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "capread.h"
#include "base/err.h"
#include "capture/reader.h"

#define MAXREC 32

struct got { /* CHUNK, LAUNCH and LIB_CALL records */
    int n, end;
    struct tkp_record rec[MAXREC];
    char names[MAXREC][64];
    struct tkp_reader_err err;
    struct tkp_reader_stats stats;
};

static void read_all(struct capw *w, struct got *g)
{
    memset(g, 0, sizeof(*g));
    struct tkp_reader *r = capr_open(w);
    struct tkp_record rec;
    while ((g->end = tkp_reader_next(r, &rec)) == 1) {
        if (rec.type == TKP_REC_NAME || rec.type == TKP_REC_THREAD) continue; /* head() */
        cr_assert_lt(g->n, MAXREC);
        const char *s = rec.type == TKP_REC_LAUNCH     ? rec.launch.name
                        : rec.type == TKP_REC_LIB_CALL ? rec.lib_call.op
                                                       : "";
        snprintf(g->names[g->n], sizeof(g->names[0]), "%s", s);
        g->rec[g->n++] = rec;
    }
    if (tkp_reader_error(r)) g->err = *tkp_reader_error(r);
    g->stats = *tkp_reader_stats(r);
    tkp_reader_close(r);
}

static void tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t name, uint64_t stream,
                 uint32_t gx)
{
    const uint32_t grid[3] = {gx, 2, 3}, block[3] = {128, 1, 1};
    capw_tmpl(w, id, thread, name, stream, 1, grid, block, 4096);
}

#define launch_t capw_launch_t
#define lib_call_t capw_lib_call_t

static void lib_tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t op, uint64_t n)
{
    const struct capw_lib c = {2, op, 4096, n, 1024, 1, 14, 14, 14, 68, 1, -1, 0x7000,
                               0xdead0000ull, 0, 1};
    capw_lib_tmpl(w, id, thread, &c);
}

static void head(struct capw *w)
{
    capw_chunk_begin(w, 1000);
    capw_thread(w, 3, 777);
    capw_name(w, 5, "gemm_kernel");
    capw_name(w, 6, "cublasLtMatmul");
}

Test(templates, expand_to_the_records_they_stand_for)
{
    struct capw *w = capw_new();
    struct got g;
    head(w);
    tmpl(w, 0, 3, 5, 0x5000, 64);
    lib_tmpl(w, 9, 3, 6, 8);
    launch_t(w, 10, 70000, 0, 0, 0, 0);  /* 1010 */
    launch_t(w, 5, 70000, 0, 1, 42, 0);  /* 1015, inside call 42 */
    lib_call_t(w, -7, 70000, 42, 9, 333); /* 1008 */
    launch_t(w, 100, 70001, 0, 2, 0, 7); /* 1108, stack 7 */
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 5, "CHUNK, 3 launches, 1 call: templates are not delivered");
    cr_assert_eq(g.stats.unknown_records, 0);
    const struct tkp_record *l = &g.rec[1];
    cr_assert_eq(l->type, TKP_REC_LAUNCH);
    cr_assert_eq(l->host_ns, 1010);
    cr_assert_eq(l->thread, 3);
    cr_assert_eq(l->tid, 777);
    cr_assert_eq(l->step, 70000);
    cr_assert_str_eq(g.names[1], "gemm_kernel");
    cr_assert_eq(l->launch.stream, 0x5000);
    cr_assert_eq(l->launch.via, 1);
    cr_assert_eq(l->launch.grid[0], 64);
    cr_assert_eq(l->launch.grid[2], 3);
    cr_assert_eq(l->launch.block[0], 128);
    cr_assert_eq(l->launch.smem, 4096);
    cr_assert_eq(l->launch.call, 0);
    cr_assert_eq(g.rec[2].host_ns, 1015);
    cr_assert_eq(g.rec[2].launch.call, 42);
    const struct tkp_record *c = &g.rec[3];
    cr_assert_eq(c->type, TKP_REC_LIB_CALL);
    cr_assert_eq(c->host_ns, 1008);
    cr_assert_eq(c->thread, 3);
    cr_assert_eq(c->tid, 777);
    cr_assert_str_eq(g.names[3], "cublasLtMatmul");
    cr_assert_eq(c->lib_call.call, 42);
    cr_assert_eq(c->lib_call.call_ns, 333);
    cr_assert_eq(c->lib_call.lib, 2);
    cr_assert_eq(c->lib_call.m, 4096);
    cr_assert_eq(c->lib_call.n, 8);
    cr_assert_eq(c->lib_call.k, 1024);
    cr_assert_eq(c->lib_call.compute, 68);
    cr_assert_eq(c->lib_call.transa, 1);
    cr_assert_eq(c->lib_call.transb, -1);
    cr_assert_eq(c->lib_call.stream, 0x7000);
    cr_assert_eq(c->lib_call.a_ptr, 0xdead0000ull);
    cr_assert_eq(c->lib_call.flags, 1);
    cr_assert_eq(g.rec[4].host_ns, 1108);
    cr_assert_eq(g.rec[4].step, 70001);
    cr_assert_eq(g.rec[4].launch.call, 0);
    cr_assert_eq(g.rec[4].launch.stack, 7);
    capw_free(w);
}

Test(templates, the_latest_definition_wins)
{
    struct capw *w = capw_new();
    struct got g;
    head(w);
    tmpl(w, 1, 3, 5, 0x5000, 64);
    launch_t(w, 1, 1, 1, 0, 0, 0);
    tmpl(w, 1, 3, 5, 0x6000, 32); /* redefined: later uses see this one */
    launch_t(w, 1, 1, 1, 0, 0, 0);
    capw_chunk_end(w);
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 3);
    cr_assert_eq(g.rec[1].launch.grid[0], 64);
    cr_assert_eq(g.rec[1].launch.stream, 0x5000);
    cr_assert_eq(g.rec[2].launch.grid[0], 32);
    cr_assert_eq(g.rec[2].launch.stream, 0x6000);
    capw_free(w);
}

/* The chunk with the bad use delivers nothing; the chunk before it is whole. */
static void expect_bad_second_chunk(struct capw *w, const char *msg)
{
    struct got g;
    read_all(w, &g);
    cr_assert_eq(g.end, TKP_ERR_RECORD, "%d", g.end);
    cr_assert_eq(g.n, 2, "only the first chunk: CHUNK and its launch (got %d)", g.n);
    cr_assert(strstr(g.err.msg, msg), "%s", g.err.msg);
}

/* A capture whose first chunk is good, and a second chunk begun. */
static struct capw *good_first_chunk(void)
{
    struct capw *w = capw_new();
    head(w);
    tmpl(w, 0, 3, 5, 0x5000, 64);
    launch_t(w, 1, 1, 0, 0, 0, 0);
    capw_chunk_end(w);
    head(w);
    return w;
}

Test(templates, defined_in_an_earlier_chunk_only_is_an_error)
{
    struct capw *w = good_first_chunk();
    launch_t(w, 1, 1, 0, 0, 0, 0); /* chunks are independent: template 0 is not defined here */
    capw_chunk_end(w);
    expect_bad_second_chunk(w, "template 0 not defined in this chunk");
    capw_free(w);
}

Test(templates, used_before_its_definition_is_an_error)
{
    struct capw *w = good_first_chunk();
    lib_call_t(w, 1, 1, 1, 4, 10);
    lib_tmpl(w, 4, 3, 6, 8);
    capw_chunk_end(w);
    expect_bad_second_chunk(w, "template 4 not defined in this chunk");
    capw_free(w);
}

Test(templates, id_above_the_limit_is_an_error)
{
    struct capw *w = good_first_chunk();
    tmpl(w, TKP_TMPL_MAX, 3, 5, 0x5000, 64);
    capw_chunk_end(w);
    expect_bad_second_chunk(w, "template id 65536 above the limit 65535");
    capw_free(w);
}

Test(templates, bad_thread_in_a_template_is_an_error)
{
    struct capw *w = good_first_chunk();
    tmpl(w, 1, TKP_THREADS_MAX, 5, 0x5000, 64);
    launch_t(w, 1, 1, 1, 0, 0, 0);
    capw_chunk_end(w);
    expect_bad_second_chunk(w, "thread index 65536 above the limit");
    capw_free(w);
}
