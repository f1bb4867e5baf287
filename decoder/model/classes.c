/* tokprof decoder: kernel classes (see classes.h).
 *
 * Kernel names drift across library versions (docs: /work/shared/notes/serving-loops.md §1.3,
 * §4.2, §5.2, §6.1), so the rules match families, not names. Their order matters, and is what
 * resolves the collisions real names have:
 *   - kv-cache writes first: vLLM's `reshape_and_cache_flash_kernel` contains "flash";
 *   - explicit sampling words (sampl, argmax, top-k/top-p samplers) before moe, whose routing
 *     kernels are named topk... and topkGatingSoftmax;
 *   - moe before gemm (`cutlass_moe_mm`, `fused_moe_kernel`) and communication before everything
 *     (`cross_device_reduce` must not fall into a generic "reduce");
 *   - attention before gemm (`fmha_*_sm90_kernel`, `cutlass::device_kernel<flash::...>`) and
 *     before the generic "cache" rule (FlashInfer's `BatchDecodeWithPagedKVCacheKernel`);
 *   - rope before norm and embedding (llama.cpp `rope_norm`, vLLM `rotary_embedding_kernel`).
 * llama.cpp's ggml-cuda: `mul_mat_vec_q`/`mul_mat_q`/`mul_mat_vec_f` are gemm, and so is
 * `k_compute_batched_ptrs` (it only feeds cublasGemmBatchedEx); the activation (de)quantizers
 * around them (`quantize_q8_1`, `quantize_mmq_q8_1`, `dequantize_block*`) are format conversions,
 * copy, like `convert_unary`; `k_bin_bcast` (residual adds, norm weights), `unary_op_kernel` of
 * no family and `scale_f32` are elementwise.
 * Plain "softmax" is left to "other" on purpose: it is attention's softmax in llama.cpp's non-FA
 * path (`soft_max_f32`), the sampler's in HF eager, the router's in MoE (caught by the moe rule
 * first; ggml's unfused MoE router is `soft_max_f32` too).
 * Generic kernels (ATen's `vectorized_elementwise_kernel<..., CUDAFunctor_add>`, `reduce_kernel`,
 * `indexSelectSmallIndex`, Inductor's `triton_poi_fused_*` / `triton_red_*` / `triton_per_*`) are
 * "elementwise", decided after every other rule has had both the base and the full name: the
 * functor in the template arguments (silu, rsqrt, cos) names a family when there is one.
 * vLLM's Model Runner V2 (0.33's default) prepares each step's inputs and updates its request
 * state in Triton kernels: `_compute_slot_mappings_kernel` is kv-cache (where each token's K/V
 * goes), the sampler's logit processors (`_temperature_kernel`, `_bias_kernel`, `_bad_words_kernel`,
 * the logprob `_ranks_kernel`) sampling, and the gathers and scatters of ids, positions and lengths
 * (`_prepare_prefill_inputs_kernel`, `_prepare_pos_seq_lens_kernel`, `_post_update_kernel`,
 * `_apply_write_kernel` of staged writes) elementwise.
 * Words that name no family (`fill_random_kernel`) are "other". */
#include "model/classes.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

struct builtin_rule {
    int cls;
    const char *re;
};

static const struct builtin_rule builtin[] = {
    {TKP_CLASS_COMM, "nccl|all_?reduce|cross_device_reduce|all_?gather|reduce_?scatter|"
                     "all_?to_?all|deep_?ep"},
    {TKP_CLASS_KVCACHE, "reshape_and_cache|concat_and_cache|kv_?cache_update|set_rows|"
                        "copy_blocks|swap_blocks|slot_mapping"},
    {TKP_CLASS_SAMPLING, "sampl|argmax|top_?k_?top_?p|top_?p_|min_?p_|penalt|bad_words|"
                         "temperature|logit_?bias|^_bias_kernel$|^_ranks_kernel$"},
    {TKP_CLASS_MOE, "moe|expert|topk|gating"},
    {TKP_CLASS_ATTENTION, "flash|fmha|attn|attention|splitkv|sdpa|paged|"
                          "(decode|prefill)with.*kv|diag_mask"},
    {TKP_CLASS_GEMM, "gemm|gemv|nvjet|xmma|splitkreduce|mul_mat|matmul|cublas|cutlass|"
                     "batched_ptrs"},
    {TKP_CLASS_ROPE, "rotary|rope"},
    {TKP_CLASS_NORM, "norm|rsqrt"},
    {TKP_CLASS_ACTIVATION, "silu|gelu|act_and_mul|swiglu|geglu|relu|activation"},
    {TKP_CLASS_EMBEDDING, "embed|get_rows"},
    {TKP_CLASS_KVCACHE, "cache"},
    {TKP_CLASS_SAMPLING, "top_k|logits"},
    /* ggml's broadcast binary ops (residual adds, norm weights): "bcast" is no cast */
    {TKP_CLASS_ELEMENTWISE, "bin_bcast"},
    /* not "nocast": ATen's elementwise_kernel<gpu_kernel_impl_nocast<MulFunctor>> is no copy */
    {TKP_CLASS_COPY, "memcpy|memset|catarray|copy|cpy|transpose|(^|[^o])cast|convert|quantize"},
};
#define NBUILTIN (sizeof(builtin) / sizeof(*builtin))

/* Tried last (base name, then full name), after every rule above. */
static const char generic_elementwise[] =
    "elementwise|reduce_kernel|index_?select|indexselect|scatter|gather|arange|triton_(poi|red|per)_|"
    "unary_op|scale_f32|prepare_(prefill_inputs|pos_seq_lens)|post_update|apply_write";

static const char *const builtin_names[TKP_CLASS_BUILTIN] = {
    "attention", "gemm", "moe", "norm", "activation", "rope", "kv-cache",
    "sampling",  "communication", "copy", "embedding", "elementwise", "other"};

struct rule {
    int cls;
    regex_t re;
};

struct tkp_classes {
    struct rule builtin[NBUILTIN];
    regex_t elementwise;
    struct rule *user;
    int nuser;
    char names[TKP_CLASSES_MAX][TKP_CLASS_NAME_MAX];
    int nclasses;
};

void tkp_classes_free(struct tkp_classes *c)
{
    if (!c) return;
    for (size_t i = 0; i < NBUILTIN; i++)
        regfree(&c->builtin[i].re);
    regfree(&c->elementwise);
    for (int i = 0; i < c->nuser; i++)
        regfree(&c->user[i].re);
    free(c->user);
    free(c);
}

int tkp_classes_find(const struct tkp_classes *c, const char *name)
{
    for (int i = 0; i < c->nclasses; i++)
        if (!strcmp(c->names[i], name)) return i;
    return -1;
}

static int fail(char *why, size_t n, int err, const char *path, int line, const char *msg)
{
    if (why && n) snprintf(why, n, "%s:%d: %s", path, line, msg);
    return err;
}

/* One `CLASS REGEX` line (already trimmed, not a comment). */
static int add_user_rule(struct tkp_classes *c, char *s, const char *path, int line, char *why,
                         size_t whylen)
{
    char *re = s;
    while (*re && !isspace((unsigned char)*re))
        re++;
    if (!*re) return fail(why, whylen, TKP_ERR_USAGE, path, line, "expected 'CLASS REGEX'");
    *re++ = 0;
    while (isspace((unsigned char)*re))
        re++;
    if (strlen(s) >= TKP_CLASS_NAME_MAX)
        return fail(why, whylen, TKP_ERR_USAGE, path, line, "class name too long");
    int cls = tkp_classes_find(c, s);
    if (cls < 0) {
        if (c->nclasses >= TKP_CLASSES_MAX)
            return fail(why, whylen, TKP_ERR_USAGE, path, line, "too many classes");
        cls = c->nclasses++;
        snprintf(c->names[cls], TKP_CLASS_NAME_MAX, "%s", s);
    }
    if (c->nuser >= TKP_CLASS_RULES_MAX)
        return fail(why, whylen, TKP_ERR_USAGE, path, line, "too many rules");
    struct rule *r = &c->user[c->nuser];
    if (regcomp(&r->re, re, REG_EXTENDED | REG_ICASE | REG_NOSUB))
        return fail(why, whylen, TKP_ERR_USAGE, path, line, "bad regular expression");
    r->cls = cls;
    c->nuser++;
    return 0;
}

static int load_user_rules(struct tkp_classes *c, const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (why && whylen) snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return TKP_ERR_IO;
    }
    c->user = calloc(TKP_CLASS_RULES_MAX, sizeof(*c->user));
    if (!c->user) {
        fclose(f);
        return TKP_ERR_NOMEM;
    }
    char buf[1024];
    int line = 0, err = 0;
    while (!err && fgets(buf, sizeof(buf), f)) {
        line++;
        char *s = buf, *e = buf + strlen(buf);
        while (e > s && isspace((unsigned char)e[-1]))
            *--e = 0;
        while (isspace((unsigned char)*s))
            s++;
        if (*s && *s != '#') err = add_user_rule(c, s, path, line, why, whylen);
    }
    fclose(f);
    return err;
}

int tkp_classes_new(const char *path, struct tkp_classes **out, char *why, size_t whylen)
{
    *out = NULL;
    struct tkp_classes *c = calloc(1, sizeof(*c));
    if (!c) return TKP_ERR_NOMEM;
    for (int i = 0; i < TKP_CLASS_BUILTIN; i++)
        snprintf(c->names[i], TKP_CLASS_NAME_MAX, "%s", builtin_names[i]);
    c->nclasses = TKP_CLASS_BUILTIN;
    for (size_t i = 0; i < NBUILTIN; i++) {
        c->builtin[i].cls = builtin[i].cls;
        if (regcomp(&c->builtin[i].re, builtin[i].re, REG_EXTENDED | REG_ICASE | REG_NOSUB)) {
            for (size_t j = 0; j < i; j++)
                regfree(&c->builtin[j].re);
            free(c);
            return TKP_ERR_NOMEM; /* the table is ours: only allocation can fail */
        }
    }
    if (regcomp(&c->elementwise, generic_elementwise, REG_EXTENDED | REG_ICASE | REG_NOSUB)) {
        for (size_t j = 0; j < NBUILTIN; j++)
            regfree(&c->builtin[j].re);
        free(c);
        return TKP_ERR_NOMEM;
    }
    int err = path ? load_user_rules(c, path, why, whylen) : 0;
    if (err) {
        tkp_classes_free(c);
        return err;
    }
    *out = c;
    return 0;
}

int tkp_classes_count(const struct tkp_classes *c)
{
    return c->nclasses;
}

const char *tkp_classes_name(const struct tkp_classes *c, int cls)
{
    return cls >= 0 && cls < c->nclasses ? c->names[cls] : "?";
}

static int match_builtin(const struct tkp_classes *c, const char *s)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (!regexec(&c->builtin[i].re, s, 0, NULL, 0)) return c->builtin[i].cls;
    return -1;
}

int tkp_classes_match(const struct tkp_classes *c, const char *name)
{
    char base[512];
    tkp_kernel_base_name(name, base, sizeof(base));
    for (int i = 0; i < c->nuser; i++)
        if (!regexec(&c->user[i].re, base, 0, NULL, 0) ||
            !regexec(&c->user[i].re, name, 0, NULL, 0))
            return c->user[i].cls;
    int cls = match_builtin(c, base);
    if (cls < 0) cls = match_builtin(c, name);
    if (cls < 0 && (!regexec(&c->elementwise, base, 0, NULL, 0) || !regexec(&c->elementwise, name, 0, NULL, 0)))
        cls = TKP_CLASS_ELEMENTWISE;
    return cls < 0 ? TKP_CLASS_OTHER : cls;
}

/* <len><identifier> at *p; returns the identifier's length (0 when malformed) and advances. */
static size_t source_name(const char **p, const char **id)
{
    char *end;
    unsigned long len = strtoul(*p, &end, 10);
    if (end == *p || len == 0 || len > strlen(end)) return 0;
    *id = end;
    *p = end + len;
    return len;
}

static char *copy_out(char *buf, size_t n, const char *s, size_t len)
{
    if (len >= n) len = n - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    return buf;
}

/* The Itanium ABI forms kernels have: _Z<source-name>..., _ZN[qualifiers]<prefix>...E...; a
 * nested name's components are source names, std:: abbreviations (St) or substitutions we do not
 * resolve (S_, S0_: they can only be earlier prefixes, never the last component we want). */
static const char *mangled_base(const char *name, size_t *len)
{
    const char *p = name + 2, *id = NULL;
    size_t n = 0;
    if (isdigit((unsigned char)*p)) {
        n = source_name(&p, &id);
        *len = n;
        return n ? id : NULL;
    }
    if (*p != 'N') return NULL;
    p++;
    while (*p == 'r' || *p == 'V' || *p == 'K' || *p == 'R' || *p == 'O')
        p++;
    for (;;) {
        if (isdigit((unsigned char)*p)) {
            const char *cid;
            size_t cn = source_name(&p, &cid);
            if (!cn) break;
            id = cid, n = cn;
        } else if (p[0] == 'S' && p[1] == 't') {
            p += 2;
        } else if (p[0] == 'S') {
            const char *q = strchr(p, '_');
            if (!q) break;
            p = q + 1;
        } else {
            break; /* 'I' template args, 'E' end, or something we do not parse */
        }
    }
    *len = n;
    return id;
}

char *tkp_kernel_base_name(const char *name, char *buf, size_t n)
{
    size_t len;
    if (!strncmp(name, "_Z", 2)) {
        const char *id = mangled_base(name, &len);
        if (id) return copy_out(buf, n, id, len);
        return copy_out(buf, n, name, strlen(name));
    }
    /* demangled: "void ns::kernel<T>(args)" -> "kernel" */
    const char *end = name + strcspn(name, "<(");
    const char *start = name;
    for (const char *p = name; p < end; p++) {
        if (p[0] == ':' && p[1] == ':') start = p + 2;
        else if (p[0] == ' ') start = p + 1;
    }
    if (start >= end) start = name, end = name + strlen(name);
    return copy_out(buf, n, start, (size_t)(end - start));
}
