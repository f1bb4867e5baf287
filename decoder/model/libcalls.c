/* tokprof decoder: the library-call model (libcalls.h has the token rule). */
#include "model/libcalls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/reader.h"
#include "tokprof/format.h"
#include "base/sort.h"

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

/* After "<prefix>" a template argument list: a ggml_type, then an int; returns the int, -2 none. */
static int second_int(const char *p)
{
    /* mangled: L9ggml_type8ELi4E... ; demangled: (ggml_type)8, 4, ... */
    if (!strncmp(p, "L9ggml_type", 11)) {
        p += 11;
        while (*p >= '0' && *p <= '9') p++;
        if (strncmp(p, "ELi", 3)) return -2;
        p += 3;
    } else if (!strncmp(p, "(ggml_type)", 11)) {
        p += 11;
        while (*p >= '0' && *p <= '9') p++;
        if (strncmp(p, ", ", 2)) return -2;
        p += 2;
    } else {
        return -2;
    }
    int v = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++) v = v * 10 + (*p - '0');
    return digits ? v : -2;
}

int tkp_kernel_token_cols(const char *name)
{
    if (!name) return 0;
    const char *p;
    if ((p = strstr(name, "mul_mat_vec_q"))) { /* not mul_mat_vec_q8_1 or the like: <, I */
        p += 13;
        int v = *p == 'I' ? second_int(p + 1) : *p == '<' ? second_int(p + 1) : -2;
        return v >= 1 && v <= 8 ? v : 0;
    }
    if ((p = strstr(name, "mul_mat_q")) && (p[9] == 'I' || p[9] == '<')) return -1;
    return 0;
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

/* GPU time per call. A GPU_KERNEL joins its LAUNCH by (thread, step, ordinal of the LAUNCH among
 * the step's LAUNCH records, in payload order: docs/FORMAT.md "The join"). The load counts the
 * ordinals per (thread, step) in a hash of steps; each step keeps a bit per ordinal that is a
 * library launch and, in ordinal order, those launches' call ids and GPU time. A GPU kernel's
 * duration is added to its launch when the launch was read (most: one probe and a bit test drop
 * the non-library ones); one read before its launch (the writer drained CUPTI first) waits in a
 * pending list, matched at the end. Memory: O(steps + library launches), never O(launches). */
struct lref { /* a launch inside a library call */
    uint32_t ord, call;
    uint64_t ns;
};

struct sordinal { /* one (thread, step) */
    uint64_t step;
    uint32_t thread, n, used, nwords; /* n: launches counted so far */
    uint64_t *lib;                    /* nwords words: bit per ordinal, a library launch */
    struct lref *lr;                  /* the library launches, ordinals ascending */
    uint32_t nlr, caplr;
};

struct pgpu { /* a GPU kernel read before its launch */
    uint64_t step, ns;
    uint32_t thread, ord;
};

struct gpujoin {
    struct sordinal *so; /* in order added */
    size_t nso, capso;
    struct tkp_map ix;      /* so by (thread, step) */
    struct sordinal *last;  /* the entry of the previous launch: runs of one step are the rule */
    struct sordinal *glast; /* and of the previous GPU kernel (both reset by a rehash) */
    struct tkp_array pend;
};

struct sokey {
    uint32_t thread;
    uint64_t step;
};

static int eq_so(const void *ctx, uint32_t id, const void *key)
{
    const struct sordinal *e = &((const struct gpujoin *)ctx)->so[id];
    const struct sokey *k = key;
    return e->thread == k->thread && e->step == k->step;
}

/* The entry of (thread, step), created when `add`; NULL when absent (or NOMEM with add). */
static struct sordinal *gj_step(struct gpujoin *g, uint32_t thread, uint64_t step, int add)
{
    struct sokey k = {thread, step};
    uint64_t h = tkp_hash_pair(thread, step);
    if (!add) {
        int64_t id = tkp_map_find(&g->ix, h, eq_so, g, &k);
        return id < 0 ? NULL : &g->so[id];
    }
    if (tkp_map_reserve(&g->ix, g->nso + 1)) return NULL;
    struct tkp_map_slot *ms = tkp_map_probe(&g->ix, h, eq_so, g, &k);
    if (ms->id1) return &g->so[ms->id1 - 1];
    struct sordinal *old = g->so;
    if (TKP_GROW_FROM(g->so, g->capso, g->nso + 1, 1024)) return NULL;
    if (g->so != old) g->last = g->glast = NULL; /* they pointed into the old array */
    tkp_map_put(&g->ix, ms, h, (uint32_t)g->nso);
    g->so[g->nso] = (struct sordinal){.step = step, .thread = thread, .used = 1};
    return &g->so[g->nso++];
}

/* Counts a LAUNCH of (thread, step); `call` its library call or 0. 0 or NOMEM. */
static int gj_launch(struct gpujoin *g, uint32_t thread, uint64_t step, uint32_t call)
{
    struct sordinal *e = g->last;
    if (!e || e->thread != thread || e->step != step) {
        if (!(e = gj_step(g, thread, step, 1))) return TKP_ERR_NOMEM;
        g->last = e;
    }
    uint32_t ord = e->n++;
    if (!call) return 0;
    if (TKP_GROW_ZEROED_FROM(e->lib, e->nwords, ord / 64 + 1, 4)) return TKP_ERR_NOMEM;
    e->lib[ord / 64] |= 1ull << (ord % 64);
    if (TKP_GROW_FROM(e->lr, e->caplr, e->nlr + 1, 16)) return TKP_ERR_NOMEM;
    e->lr[e->nlr++] = (struct lref){ord, call, 0};
    return 0;
}

/* Adds ns to launch `ord` of step e when it is a library launch. */
static void gj_add(struct sordinal *e, uint32_t ord, uint64_t ns)
{
    if (ord / 64 >= e->nwords || !(e->lib[ord / 64] >> (ord % 64) & 1)) return;
    uint32_t lo = 0, hi = e->nlr;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e->lr[mid].ord < ord) lo = mid + 1;
        else hi = mid;
    }
    if (lo < e->nlr && e->lr[lo].ord == ord) e->lr[lo].ns += ns;
}

static int gj_kernel(struct gpujoin *g, const struct tkp_record *r)
{
    if (r->gpu.join != TKP_JOIN_LAUNCH || r->thread == TKP_GPU_THREAD_NONE) return 0;
    uint64_t ns = r->gpu.end_ns > r->gpu.start_ns ? r->gpu.end_ns - r->gpu.start_ns : 0;
    struct sordinal *e = g->glast;
    if (!e || e->thread != r->thread || e->step != r->step)
        if ((e = gj_step(g, r->thread, r->step, 0))) g->glast = e;
    if (e && r->gpu.index < e->n) { /* its launch was read */
        gj_add(e, r->gpu.index, ns);
        return 0;
    }
    struct pgpu *p = tkp_array_push(&g->pend, sizeof(*p));
    if (!p) return TKP_ERR_NOMEM;
    *p = (struct pgpu){r->step, ns, r->thread, r->gpu.index};
    return 0;
}

/* Adds every library launch's GPU time to its call (calls sorted by (thread, call)). */
static void gj_finish(struct gpujoin *g, struct tkp_call *calls, uint32_t ncalls)
{
    const struct pgpu *p = g->pend.p;
    for (uint32_t i = 0; i < g->pend.n; i++) {
        struct sordinal *e = gj_step(g, p[i].thread, p[i].step, 0);
        if (e && p[i].ord < e->n) gj_add(e, p[i].ord, p[i].ns);
    }
    for (size_t i = 0; i < g->nso; i++)
        for (uint32_t k = 0; k < g->so[i].nlr; k++) {
            const struct sordinal *e = &g->so[i];
            if (!e->lr[k].ns) continue;
            uint32_t lo = 0, hi = ncalls, call = e->lr[k].call;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                const struct tkp_call *c = &calls[mid];
                if (c->thread < e->thread || (c->thread == e->thread && c->call < call)) lo = mid + 1;
                else hi = mid;
            }
            if (lo < ncalls && calls[lo].thread == e->thread && calls[lo].call == call)
                calls[lo].gpu_ns += e->lr[k].ns;
        }
}

static void gj_free(struct gpujoin *g)
{
    for (size_t i = 0; i < g->nso; i++)
        free(g->so[i].lib), free(g->so[i].lr);
    free(g->so);
    tkp_map_free(&g->ix);
    free(g->pend.p);
}

int tkp_libmodel_load(struct tkp_reader *r, struct tkp_libmodel *m)
{
    return tkp_libmodel_load_window(r, NULL, m);
}

static int in_window(const struct tkp_lwindow *w, uint32_t thread, uint64_t step)
{
    return !w || (thread == w->thread && step >= w->lo && step < w->hi);
}

int tkp_libmodel_load_window(struct tkp_reader *r, const struct tkp_lwindow *w,
                             struct tkp_libmodel *m)
{
    struct tkp_array calls = {0}, refs = {0}, steps = {0};
    struct gpujoin gj = {0};
    struct tkp_record rec;
    int err = 0;
    memset(m, 0, sizeof(*m));
    while (tkp_reader_next(r, &rec) == 1) {
        if ((rec.type == TKP_REC_GPU_KERNEL || rec.type == TKP_REC_LIB_CALL ||
             rec.type == TKP_REC_LAUNCH || rec.type == TKP_REC_GRAPH_LAUNCH) &&
            !in_window(w, rec.thread, rec.step))
            continue;
        if (rec.type == TKP_REC_GPU_KERNEL) {
            if (gj_kernel(&gj, &rec)) goto nomem;
            continue;
        }
        if (rec.type == TKP_REC_LIB_CALL) {
            struct tkp_call *c = tkp_array_push(&calls, sizeof(*c));
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
            /* a step's launches are counted in one ref per run of records of that step */
            struct ref *s = steps.n ? (struct ref *)steps.p + steps.n - 1 : NULL;
            if (!s || s->thread != rec.thread || s->step != rec.step || s->call) {
                if (!(s = tkp_array_push(&steps, sizeof(*s)))) goto nomem;
                s->thread = rec.thread, s->step = rec.step;
            }
            if (rec.type == TKP_REC_GRAPH_LAUNCH) {
                s->graph_launches++;
                continue;
            }
            s->launches++;
            if (gj_launch(&gj, rec.thread, rec.step, rec.launch.call)) goto nomem;
            if (rec.launch.call) {
                struct ref *x = tkp_array_push(&refs, sizeof(*x));
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
    refs.p = NULL;
    gj_finish(&gj, m->calls, m->ncalls);
    gj_free(&gj);
    memset(&gj, 0, sizeof(gj));
    m->token_dim_m = w ? w->token_dim_m : vote_token_dim(m->calls, m->ncalls);
    for (uint32_t i = 0; i < m->ncalls; i++)
        m->calls[i].tokens = m->token_dim_m ? m->calls[i].m : m->calls[i].n;
    /* steps: those with launches or calls, ordered; a call's step never decreases on its thread */
    for (uint32_t i = 0; i < m->ncalls; i++) {
        struct ref *s = tkp_array_push(&steps, sizeof(*s));
        if (!s) goto nomem;
        s->thread = m->calls[i].thread, s->step = m->calls[i].step;
        s->call = 1; /* never extended by a launch run */
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
    gj_free(&gj);
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

uint32_t tkp_libmodel_thread_end(const struct tkp_libmodel *m, uint32_t s0)
{
    uint32_t s1 = s0;
    while (s1 < m->nsteps && m->steps[s1].thread == m->steps[s0].thread)
        s1++;
    return s1;
}

/* ---- a scan for windowed loads ---- */

/* The distinct (a, m, n), in order seen. */
struct vset {
    struct vkey *v;
    size_t n, cap;
    struct tkp_map ix;
};

static int eq_vkey(const void *ctx, uint32_t id, const void *key)
{
    const struct vkey *x = &((const struct vset *)ctx)->v[id], *k = key;
    return x->a == k->a && x->m == k->m && x->n == k->n;
}

static int vkey_add(struct vset *t, struct vkey k)
{
    uint64_t h = tkp_mix64(k.a ^ tkp_hash_pair((uint32_t)k.m, k.n));
    if (tkp_map_reserve(&t->ix, t->n + 1)) return TKP_ERR_NOMEM;
    struct tkp_map_slot *ms = tkp_map_probe(&t->ix, h, eq_vkey, t, &k);
    if (ms->id1) return 0;
    if (TKP_GROW_FROM(t->v, t->cap, t->n + 1, 1024)) return TKP_ERR_NOMEM;
    tkp_map_put(&t->ix, ms, h, (uint32_t)t->n);
    t->v[t->n++] = k;
    return 0;
}

int tkp_libmodel_scan(struct tkp_reader *r, struct tkp_lscan *sc)
{
    struct tkp_record rec;
    struct vset t = {0};
    size_t capt = 0;
    int err = 0;
    memset(sc, 0, sizeof(*sc));
    while (!err && tkp_reader_next(r, &rec) == 1) {
        if (rec.type != TKP_REC_GPU_KERNEL && rec.type != TKP_REC_LIB_CALL &&
            rec.type != TKP_REC_LAUNCH && rec.type != TKP_REC_GRAPH_LAUNCH)
            continue;
        if (rec.type == TKP_REC_GPU_KERNEL && rec.thread == TKP_GPU_THREAD_NONE) continue;
        struct tkp_lthread *th = NULL;
        for (uint32_t i = sc->nt; i-- > 0 && !th;)
            if (sc->t[i].thread == rec.thread) th = &sc->t[i];
        if (!th) {
            if (TKP_GROW_FROM(sc->t, capt, sc->nt + 1, 4)) {
                err = TKP_ERR_NOMEM;
                break;
            }
            th = &sc->t[sc->nt++];
            *th = (struct tkp_lthread){rec.thread, 0, 0};
        }
        th->records++;
        if (rec.step + 1 > th->segs) th->segs = rec.step + 1;
        if (rec.type != TKP_REC_LIB_CALL) continue;
        /* the token vote of vote_token_dim() over the distinct (a, m, n): duplicates change
         * neither of its two tests */
        struct tkp_call c = {.status = rec.lib_call.status, .flags = rec.lib_call.flags,
                             .m = rec.lib_call.m, .n = rec.lib_call.n, .k = rec.lib_call.k};
        if (tkp_call_executed(&c) && rec.lib_call.batch <= 1 && rec.lib_call.a_ptr)
            err = vkey_add(&t, (struct vkey){rec.lib_call.a_ptr, c.m, c.n});
    }
    if (!err) {
        struct tkp_call *c = calloc(t.n ? t.n : 1, sizeof(*c));
        if (!c) err = TKP_ERR_NOMEM;
        for (size_t i = 0; c && i < t.n; i++)
            c[i] = (struct tkp_call){.m = t.v[i].m, .n = t.v[i].n, .k = 1, .a_ptr = t.v[i].a};
        if (c) sc->token_dim_m = vote_token_dim(c, (uint32_t)t.n);
        free(c);
    }
    free(t.v);
    tkp_map_free(&t.ix);
    for (uint32_t i = 1; i < sc->nt; i++) /* by thread, as the model's steps */
        for (uint32_t j = i; j > 0 && sc->t[j - 1].thread > sc->t[j].thread; j--) {
            struct tkp_lthread x = sc->t[j];
            sc->t[j] = sc->t[j - 1], sc->t[j - 1] = x;
        }
    if (err) tkp_lscan_free(sc);
    return err;
}

void tkp_lscan_free(struct tkp_lscan *sc)
{
    free(sc->t);
    memset(sc, 0, sizeof(*sc));
}
