/* Tokens per step (decoder/model/analysis.h, tkp_step_tokens) on records fed to the model in
 * memory: a step whose forward ran as several graph launches (vLLM's piecewise CUDA graphs) has
 * unknown tokens, never the count its eager GEMM (the lm_head over the sampled rows) gives; a step
 * with one graph launch and that GEMM keeps the shapes' count (a FULL-graph decode step). */
#include <criterion/criterion.h>
#include <string.h>

#include "capture/reader.h"
#include "model/analysis.h"
#include "model/classes.h"
#include "model/libcalls.h"
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

/* A model with the built-in classes, fed by the test; tokens() finishes it and applies the rule. */
static struct tkp_classes *cl;
static struct tkp_model m;
static void model_open(void)
{
    cr_assert_eq(tkp_classes_new(NULL, &cl, NULL, 0), 0);
    struct tkp_model_opts o = {.classes = cl, .from = -1, .to = -1};
    tkp_model_init(&m, &o);
}
static void tokens_of(size_t n, uint64_t *tokens, int *src)
{
    cr_assert_eq(tkp_model_finish(&m), 0);
    struct tkp_acc *a;
    cr_assert_eq(tkp_acc_bind(&m, &a), 0);
    cr_assert_eq(m.nsteps, n);
    tkp_step_tokens(&m, a, tokens, src);
    tkp_acc_free(a);
    tkp_model_free(&m);
    tkp_classes_free(cl);
}

Test(tokens, piecewise_graph_step_is_unknown)
{
    model_open();
    uint64_t t = 1000;
    step(&m, 0, 3, 1, &t); /* a prefill of 8 tokens in piecewise graphs: only the 1-row lm_head */
    step(&m, 1, 1, 8, &t); /* decode of 8 sequences in one FULL graph + the 8-row lm_head */
    step(&m, 2, 0, 24, &t); /* an eager step: its GEMMs say 24 */
    uint64_t tokens[3];
    int src[3];
    tokens_of(3, tokens, src);
    cr_expect_eq(src[0], TKP_TOK_NONE, "piecewise: unknown, not %lu", (unsigned long)tokens[0]);
    cr_expect_eq(tokens[1], 8);
    cr_expect_eq(src[1], TKP_TOK_SHAPES);
    cr_expect_eq(tokens[2], 24);
}

/* ggml-cuda's kernel names carry the token count: mul_mat_vec_q<type, ncols_dst, ...> is one
 * column per token up to 8, mul_mat_q<type, mmq_x, ...> is a larger micro-batch. */
Test(tokens, kernel_names_that_carry_tokens)
{
    cr_expect_eq(tkp_kernel_token_cols("_Z13mul_mat_vec_qIL9ggml_type8ELi1ELb0EEvPKvS2_PKiPfRK22ggml_"
                                       "cuda_mm_fusion_argsjjjjjjjjjjjjj"),
                 1);
    cr_expect_eq(tkp_kernel_token_cols("_Z13mul_mat_vec_qIL9ggml_type12ELi8ELb1EEvPKv"), 8);
    cr_expect_eq(tkp_kernel_token_cols("void mul_mat_vec_q<(ggml_type)8, 5, false>(void const*)"), 5);
    cr_expect_eq(tkp_kernel_token_cols("_Z9mul_mat_qIL9ggml_type8ELi64ELb0EEvPKcPKiS4_"), -1);
    cr_expect_eq(tkp_kernel_token_cols("_Z13mul_mat_vec_qIL9ggml_type8ELi12ELb0EEv"), 0, "past 8");
    cr_expect_eq(tkp_kernel_token_cols("_Z15quantize_q8_1PKfPvlll"), 0);
    cr_expect_eq(tkp_kernel_token_cols("ampere_sgemm_128x64_nn"), 0);
    cr_expect_eq(tkp_kernel_token_cols(NULL), 0);
}

/* Step seg of kind `kind` whose one launch is kernel `name_id` (NAME `name`), then its STEP. */
static void kstep(struct tkp_model *mm, uint64_t seg, int kind, uint64_t name_id, const char *name,
                  uint64_t *t)
{
    struct tkp_record r;
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_LAUNCH, r.thread = 0, r.tid = 7, r.step = seg, r.host_ns = ++*t;
    r.launch.name_id = name_id, r.launch.name = name;
    feed(mm, &r);
    memset(&r, 0, sizeof(r));
    r.type = TKP_REC_STEP, r.thread = 0, r.tid = 7, r.step = seg;
    r.step_rec.kind = (uint32_t)kind, r.step_rec.begin_ns = *t - 1, r.step_rec.mark_ns = *t;
    r.step_rec.end_ns = ++*t, r.step_rec.launches = 1;
    feed(mm, &r);
}

/* llama.cpp's server: a prompt step (mul_mat_q: unknown), decode steps of 1 and 8 sequences
 * (mul_mat_vec_q<.., 1|8>), and a decode split into two micro-batches (a part of 3 tokens, then
 * its token step of 5): 8 for the token step, none for the part. */
Test(tokens, kernel_names_and_parts)
{
    static const char *mmq = "_Z9mul_mat_qIL9ggml_type8ELi64ELb0EEv";
    static const char *v1 = "_Z13mul_mat_vec_qIL9ggml_type8ELi1ELb0EEv";
    static const char *v3 = "_Z13mul_mat_vec_qIL9ggml_type8ELi3ELb0EEv";
    static const char *v5 = "_Z13mul_mat_vec_qIL9ggml_type8ELi5ELb0EEv";
    static const char *v8 = "_Z13mul_mat_vec_qIL9ggml_type8ELi8ELb0EEv";
    model_open();
    uint64_t t = 1000;
    kstep(&m, 0, TKP_STEP_TOKEN, 1, mmq, &t);
    kstep(&m, 1, TKP_STEP_TOKEN, 2, v1, &t);
    kstep(&m, 2, TKP_STEP_TOKEN, 3, v8, &t);
    kstep(&m, 3, TKP_STEP_PART, 4, v3, &t);
    kstep(&m, 4, TKP_STEP_TOKEN, 5, v5, &t);
    kstep(&m, 5, TKP_STEP_PART, 1, mmq, &t); /* a part of unknown tokens: its token's unknown */
    kstep(&m, 6, TKP_STEP_TOKEN, 2, v1, &t);
    uint64_t tokens[7];
    int src[7];
    tokens_of(7, tokens, src);
    cr_expect_eq(src[0], TKP_TOK_NONE, "mul_mat_q: more than 8, unknown (not %lu)",
                 (unsigned long)tokens[0]);
    cr_expect_eq(src[1], TKP_TOK_KERNELS);
    cr_expect_eq(tokens[1], 1);
    cr_expect_eq(tokens[2], 8);
    cr_expect_eq(src[3], TKP_TOK_NONE, "a part's tokens are its token step's");
    cr_expect_eq(tokens[4], 8, "3 + 5, not %lu", (unsigned long)tokens[4]);
    cr_expect_eq(src[4], TKP_TOK_KERNELS);
    cr_expect_eq(src[6], TKP_TOK_NONE, "a part of unknown tokens: unknown (not %lu)",
                 (unsigned long)tokens[6]);
}
