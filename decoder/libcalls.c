/* tokprof decoder: the library-call model (libcalls.h has the token rule). */
#include "libcalls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "reader.h"
#include "tokprof/format.h"
#include "sort.h"

/* ---- words ------------------------------------------------------------------------------------ */

const char *tkp_dtype_str(int32_t t, char *buf)
{
    static const char *const names[] = {
        [0] = "f32",    [1] = "f64",    [2] = "f16",     [3] = "i8",      [4] = "c32",
        [5] = "c64",    [6] = "c16",    [7] = "ci8",     [8] = "u8",      [9] = "cu8",
        [10] = "i32",   [11] = "ci32",  [12] = "u32",    [13] = "cu32",   [14] = "bf16",
        [15] = "cbf16", [16] = "i4",    [17] = "ci4",    [18] = "u4",     [19] = "cu4",
        [20] = "i16",   [21] = "ci16",  [22] = "u16",    [23] = "cu16",   [24] = "i64",
        [25] = "ci64",  [26] = "u64",   [27] = "cu64",   [28] = "e4m3",   [29] = "e5m2",
        [30] = "ue8m0", [31] = "e2m3",  [32] = "e3m2",   [33] = "e2m1",
    };
    if (t < 0) return "?";
    if ((size_t)t < sizeof(names) / sizeof(*names) && names[t]) return names[t];
    snprintf(buf, 24, "unknown(%d)", t);
    return buf;
}

const char *tkp_compute_str(int32_t t, char *buf)
{
    switch (t) {
    case -1: return "?";
    case 64: return "16F";
    case 65: return "16F_PEDANTIC";
    case 68: return "32F";
    case 69: return "32F_PEDANTIC";
    case 70: return "64F";
    case 71: return "64F_PEDANTIC";
    case 72: return "32I";
    case 73: return "32I_PEDANTIC";
    case 74: return "32F_FAST_16F";
    case 75: return "32F_FAST_16BF";
    case 77: return "32F_FAST_TF32";
    case 78: return "32F_EMULATED_16BFX9";
    case 79: return "64F_EMULATED_FIXEDPOINT";
    }
    /* legacy GemmEx callers pass a cudaDataType as the compute type */
    return tkp_dtype_str(t, buf);
}

const char *tkp_trans_str(int32_t t, char *buf)
{
    static const char *const names[] = {"N", "T", "C", "CONJG"};
    if (t < 0) return "?";
    if (t < 4) return names[t];
    snprintf(buf, 24, "unknown(%d)", t);
    return buf;
}

const char *tkp_lib_str(uint32_t lib, char *buf)
{
    switch (lib) {
    case TKP_LIB_CUBLAS: return "cublas";
    case TKP_LIB_CUBLASLT: return "cublasLt";
    case TKP_LIB_CUDNN: return "cudnn";
    }
    snprintf(buf, 24, "unknown(%u)", lib);
    return buf;
}

const char *tkp_step_class_str(int kind)
{
    static const char *const names[] = {"unknown", "prefill", "decode", "mixed"};
    return kind >= 0 && kind < 4 ? names[kind] : "unknown";
}

int tkp_call_executed(const struct tkp_call *c)
{
    return c->status == 0 && !(c->flags & TKP_LIBF_CAPTURED) && c->m && c->n && c->k;
}

double tkp_call_flops(const struct tkp_call *c)
{
    if (!c->m || !c->n || !c->k) return 0;
    return 2.0 * (double)c->m * (double)c->n * (double)c->k * (double)(c->batch ? c->batch : 1);
}

/* ---- loading ---------------------------------------------------------------------------------- */

struct ref { /* a launch inside a call, or a step's counters */
    uint32_t thread, call;
    uint64_t step;
    uint32_t launches, graph_launches;
};

struct vec {
    void *p;
    uint32_t n, cap;
};

static void *push(struct vec *v, size_t size)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 256;
        void *q = realloc(v->p, (size_t)cap * size);
        if (!q) return NULL;
        v->p = q;
        v->cap = cap;
    }
    char *e = (char *)v->p + (size_t)v->n++ * size;
    memset(e, 0, size);
    return e;
}

static int cmp_call(const void *a, const void *b)
{
    const struct tkp_call *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->call < y->call ? -1 : x->call > y->call;
}

static int cmp_ref_call(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->call < y->call ? -1 : x->call > y->call;
}

static int cmp_ref_step(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->step < y->step ? -1 : x->step > y->step;
}

/* Token-dimension vote, by operand A: under "tokens are n" A is the weight, whose m and k never
 * change, while the same weight meets different token counts (n varies); under "tokens are m" A
 * is the activation, whose m varies. Votes: A operands with more than one m, against A operands
 * with more than one n. A weight never seen with two token counts votes for neither. */
struct vkey {
    uint64_t a, m, n;
};

static int cmp_vkey(const void *x_, const void *y_)
{
    const struct vkey *x = x_, *y = y_;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->m != y->m) return x->m < y->m ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

static int vote_token_dim(const struct tkp_call *c, uint32_t n)
{
    struct vkey *v = calloc(n ? n : 1, sizeof(*v));
    uint32_t k = 0, vm = 0, vn = 0;
    if (!v) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (tkp_call_executed(&c[i]) && c[i].batch <= 1 && c[i].a_ptr)
            v[k++] = (struct vkey){c[i].a_ptr, c[i].m, c[i].n};
    tkp_sort(v, k, sizeof(*v), cmp_vkey);
    for (uint32_t i = 0; i < k;) {
        uint32_t j = i + 1, dm = 0, dn = 0;
        for (; j < k && v[j].a == v[i].a; j++) {
            if (v[j].m != v[i].m) dm = 1;
            if (v[j].m == v[j - 1].m && v[j].n != v[j - 1].n) dn = 1;
        }
        vm += dm, vn += dn;
        i = j;
    }
    free(v);
    return vm > vn;
}

static void classify(struct tkp_libmodel *m)
{
    uint32_t thread = UINT32_MAX;
    int had_decode = 0, prev_decode = 0;
    uint64_t prev_seqs = 0;
    for (uint32_t i = 0; i < m->nsteps; i++) {
        struct tkp_lstep *s = &m->steps[i];
        if (s->thread != thread) thread = s->thread, had_decode = prev_decode = 0, prev_seqs = 0;
        const struct tkp_call *last = NULL;
        for (uint32_t j = s->first; j < s->first + s->ncalls; j++) {
            const struct tkp_call *c = &m->calls[j];
            if (!tkp_call_executed(c)) continue;
            s->flops += (uint64_t)tkp_call_flops(c);
            if (c->batch > 1) continue;
            if (c->tokens > s->tokens) s->tokens = c->tokens;
            last = c;
        }
        if (last) {
            s->seqs = last->tokens;
            s->kind = s->tokens == s->seqs ? TKP_KIND_DECODE
                      : had_decode          ? TKP_KIND_MIXED
                                            : TKP_KIND_PREFILL;
        } else if (s->graph_launches && prev_decode) {
            s->kind = TKP_KIND_DECODE; /* a replayed forward without any eager GEMM */
            s->tokens = s->seqs = prev_seqs;
        }
        prev_decode = s->kind == TKP_KIND_DECODE;
        if (prev_decode) had_decode = 1, prev_seqs = s->seqs;
    }
}

int tkp_libmodel_load(struct tkp_reader *r, struct tkp_libmodel *m)
{
    struct vec calls = {0}, refs = {0}, steps = {0};
    struct tkp_record rec;
    int err = 0;
    memset(m, 0, sizeof(*m));
    while (tkp_reader_next(r, &rec) == 1) {
        if (rec.type == TKP_REC_LIB_CALL) {
            struct tkp_call *c = push(&calls, sizeof(*c));
            if (!c) goto nomem;
            c->thread = rec.thread, c->call = rec.lib_call.call, c->lib = rec.lib_call.lib;
            c->status = rec.lib_call.status, c->flags = rec.lib_call.flags, c->step = rec.step;
            c->host_ns = rec.host_ns, c->call_ns = rec.lib_call.call_ns, c->op = rec.lib_call.op;
            c->m = rec.lib_call.m, c->n = rec.lib_call.n, c->k = rec.lib_call.k;
            c->batch = rec.lib_call.batch;
            c->atype = rec.lib_call.atype, c->btype = rec.lib_call.btype;
            c->ctype = rec.lib_call.ctype, c->compute = rec.lib_call.compute;
            c->transa = rec.lib_call.transa, c->transb = rec.lib_call.transb;
            c->stream = rec.lib_call.stream, c->a_ptr = rec.lib_call.a_ptr;
        } else if (rec.type == TKP_REC_LAUNCH || rec.type == TKP_REC_GRAPH_LAUNCH) {
            struct ref *s = push(&steps, sizeof(*s));
            if (!s) goto nomem;
            s->thread = rec.thread, s->step = rec.step;
            if (rec.type == TKP_REC_LAUNCH) s->launches = 1;
            else s->graph_launches = 1;
            if (rec.type == TKP_REC_LAUNCH && rec.launch.call) {
                struct ref *x = push(&refs, sizeof(*x));
                if (!x) goto nomem;
                x->thread = rec.thread, x->call = rec.launch.call;
            }
        }
    }
    m->calls = calls.p, m->ncalls = calls.n;
    tkp_sort(m->calls, m->ncalls, sizeof(*m->calls), cmp_call);
    /* kernels per call: merge the sorted launch references */
    struct ref *x = refs.p;
    tkp_sort(x, refs.n, sizeof(*x), cmp_ref_call);
    for (uint32_t i = 0, j = 0; i < refs.n; i++) {
        while (j < m->ncalls && cmp_ref_call(&(struct ref){m->calls[j].thread, m->calls[j].call, 0, 0, 0}, &x[i]) < 0) j++;
        if (j < m->ncalls && m->calls[j].thread == x[i].thread && m->calls[j].call == x[i].call)
            m->calls[j].kernels++;
        else
            m->unmatched_launches++;
    }
    free(refs.p);
    m->token_dim_m = vote_token_dim(m->calls, m->ncalls);
    for (uint32_t i = 0; i < m->ncalls; i++)
        m->calls[i].tokens = m->token_dim_m ? m->calls[i].m : m->calls[i].n;
    /* steps: those with launches or calls, ordered; a call's step never decreases on its thread */
    for (uint32_t i = 0; i < m->ncalls; i++) {
        struct ref *s = push(&steps, sizeof(*s));
        if (!s) goto nomem;
        s->thread = m->calls[i].thread, s->step = m->calls[i].step;
    }
    struct ref *sr = steps.p;
    tkp_sort(sr, steps.n, sizeof(*sr), cmp_ref_step);
    m->steps = calloc(steps.n ? steps.n : 1, sizeof(*m->steps));
    if (!m->steps) goto nomem;
    for (uint32_t i = 0, c = 0; i < steps.n;) {
        struct tkp_lstep *s = &m->steps[m->nsteps++];
        s->thread = sr[i].thread, s->step = sr[i].step;
        for (; i < steps.n && sr[i].thread == s->thread && sr[i].step == s->step; i++)
            s->launches += sr[i].launches, s->graph_launches += sr[i].graph_launches;
        while (c < m->ncalls && (m->calls[c].thread < s->thread ||
                                 (m->calls[c].thread == s->thread && m->calls[c].step < s->step)))
            c++;
        s->first = c;
        while (c < m->ncalls && m->calls[c].thread == s->thread && m->calls[c].step == s->step)
            c++, s->ncalls++;
    }
    free(steps.p);
    classify(m);
    return 0;
nomem:
    free(calls.p);
    free(refs.p);
    free(steps.p);
    memset(m, 0, sizeof(*m));
    err = TKP_ERR_NOMEM;
    return err;
}

void tkp_libmodel_free(struct tkp_libmodel *m)
{
    free(m->calls);
    free(m->steps);
    memset(m, 0, sizeof(*m));
}
