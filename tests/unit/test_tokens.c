/* Tokens per step (decoder/model/analysis.h, tkp_step_tokens) on records fed to the model in
 * memory: a step whose forward ran as several graph launches (vLLM's piecewise CUDA graphs) has
 * unknown tokens, never the count its eager GEMM (the lm_head over the sampled rows) gives; a step
 * with one graph launch and that GEMM keeps the shapes' count (a FULL-graph decode step). */
#include <criterion/criterion.h>
#include <string.h>

#include "capture/reader.h"
#include "model/analysis.h"
#include "model/classes.h"
#include "model/model.h"

static void feed(struct tkp_model *m, struct tkp_record *r)
{
    cr_assert_eq(tkp_model_add(m, r), 0);
}

/* Step seg: `graphs` graph launches, one eager GEMM of m rows (n 512, k 128), then its STEP. */
static void step(struct tkp_model *m, uint64_t seg, int graphs, uint64_t rows, uint64_t *t)
{
    struct tkp_record r;
    for (int g = 0; g < graphs; g++) {
        memset(&r, 0, sizeof(r));
        r.type = TKP_REC_GRAPH_LAUNCH, r.thread = 0, r.tid = 7, r.step = seg, r.host_ns = ++*t;
        r.graph_launch.graph = 1 + (uint64_t)g;
        feed(m, &r);
    }
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_LIB_CALL, r.thread = 0, r.tid = 7, r.step = seg, r.host_ns = ++*t;
    r.lib_call.m = rows, r.lib_call.n = 512, r.lib_call.k = 128, r.lib_call.batch = 1;
    r.lib_call.a_ptr = 0x1000; /* one weight, m varying: m is the token dimension */
    feed(m, &r);
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_STEP, r.thread = 0, r.tid = 7, r.step = seg;
    r.step_rec.kind = TKP_STEP_TOKEN, r.step_rec.begin_ns = *t - 2, r.step_rec.mark_ns = *t;
    r.step_rec.end_ns = ++*t, r.step_rec.graph_launches = (uint64_t)graphs;
    feed(m, &r);
}

Test(tokens, piecewise_graph_step_is_unknown)
{
    struct tkp_classes *cl;
    cr_assert_eq(tkp_classes_new(NULL, &cl, NULL, 0), 0);
    struct tkp_model_opts o = {.classes = cl, .from = -1, .to = -1};
    struct tkp_model m;
    tkp_model_init(&m, &o);
    uint64_t t = 1000;
    step(&m, 0, 3, 1, &t); /* a prefill of 8 tokens in piecewise graphs: only the 1-row lm_head */
    step(&m, 1, 1, 8, &t); /* decode of 8 sequences in one FULL graph + the 8-row lm_head */
    step(&m, 2, 0, 24, &t); /* an eager step: its GEMMs say 24 */
    cr_assert_eq(tkp_model_finish(&m), 0);
    struct tkp_acc *a;
    cr_assert_eq(tkp_acc_bind(&m, &a), 0);
    uint64_t tokens[3];
    int src[3];
    cr_assert_eq(m.nsteps, 3);
    tkp_step_tokens(&m, a, tokens, src);
    cr_expect_eq(src[0], TKP_TOK_NONE, "piecewise: unknown, not %lu", (unsigned long)tokens[0]);
    cr_expect_eq(tokens[1], 8);
    cr_expect_eq(src[1], TKP_TOK_SHAPES);
    cr_expect_eq(tokens[2], 24);
    tkp_acc_free(a);
    tkp_model_free(&m);
    tkp_classes_free(cl);
}
