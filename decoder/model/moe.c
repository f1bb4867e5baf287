/* tokprof decoder: MoE experts from per-expert GEMM calls (moe.h). */
#include "model/moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "base/err.h"
#include "base/grow.h"
#include "capture/reader.h"
#include "base/sort.h"
#include "model/libcalls.h"

/* ---- MoE experts ------------------------------------------------------------------------------ */

#define MOE_MAX_LAYERS 512

struct wt { /* one weight (GEMM operand A) */
    uint64_t ptr, m, k;
    int32_t at;
    uint32_t steps, cls; /* steps it appears in */
    uint64_t last;       /* the step (segment) + 1 last counted */
    int expert;
};

struct wclass {
    uint64_t m, k;
    int32_t at;
    uint32_t steps;
    uint64_t last;
};

struct moectx {
    const struct tkp_libmodel *m;
    struct wt *w; /* the distinct weights, in order seen */
    size_t nw, wcap;
    struct tkp_map ix; /* w by ptr */
    struct wclass *cl;
    uint32_t ncl, capcl;
    /* per layer: the expert class, its lowest address and stride, experts; distinct weights */
    uint64_t cls_m[MOE_MAX_LAYERS], cls_k[MOE_MAX_LAYERS], base[MOE_MAX_LAYERS];
    uint64_t stride[MOE_MAX_LAYERS];
    uint32_t nexp[MOE_MAX_LAYERS], layers;
    struct tkp_array lw[MOE_MAX_LAYERS]; /* uint64_t pointers */
};

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static int eq_w(const void *ctx, uint32_t id, const void *key)
{
    return ((const struct moectx *)ctx)->w[id].ptr == *(const uint64_t *)key;
}

static struct wt *w_find(const struct moectx *e, uint64_t ptr)
{
    int64_t id = tkp_map_find(&e->ix, tkp_mix64(ptr), eq_w, e, &ptr);
    return id < 0 ? NULL : &e->w[id];
}

static struct wt *w_add(struct moectx *e, const struct tkp_call *c)
{
    struct wt *w = w_find(e, c->a_ptr);
    if (w) return w;
    if (TKP_GROW_FROM(e->w, e->wcap, e->nw + 1, 256)) return NULL;
    uint32_t k;
    for (k = 0; k < e->ncl; k++)
        if (e->cl[k].m == c->m && e->cl[k].k == c->k && e->cl[k].at == c->atype) break;
    if (k == e->ncl) {
        if (TKP_GROW_FROM(e->cl, e->capcl, e->ncl + 1, 16)) return NULL;
        e->cl[e->ncl++] = (struct wclass){c->m, c->k, c->atype, 0, 0};
    }
    if (tkp_map_add(&e->ix, tkp_mix64(c->a_ptr), (uint32_t)e->nw)) return NULL;
    e->w[e->nw] = (struct wt){c->a_ptr, c->m, c->k, c->atype, 0, k, 0, 0};
    return &e->w[e->nw++];
}

/* A call that can be an expert GEMM: executed, unbatched, not the step's last (lm_head). */
static int moe_usable(const struct tkp_lstep *s, const struct tkp_call *c, uint32_t j)
{
    return tkp_call_executed(c) && c->batch <= 1 && c->a_ptr && j + 1 < s->first + s->ncalls;
}

/* Step 1: which weights are experts. */
static int moe_experts(struct moectx *e, uint32_t s0, uint32_t s1)
{
    const struct tkp_libmodel *m = e->m;
    for (uint32_t i = s0; i < s1; i++) {
        const struct tkp_lstep *s = &m->steps[i];
        for (uint32_t j = s->first; j < s->first + s->ncalls; j++) {
            const struct tkp_call *c = &m->calls[j];
            if (!moe_usable(s, c, j)) continue;
            struct wt *w = w_add(e, c);
            if (!w) return TKP_ERR_NOMEM;
            /* by the step's segment, not its index: a window of the steps has its own indices */
            if (w->last != s->step + 1) w->last = s->step + 1, w->steps++;
            struct wclass *k = &e->cl[w->cls];
            if (k->last != s->step + 1) k->last = s->step + 1, k->steps++;
            if (c->tokens < s->tokens) w->expert = 1;
        }
    }
    return 0;
}

/* Step 1's end: absent from a step where its class was called. */
static void moe_experts_end(struct moectx *e)
{
    for (size_t a = 0; a < e->nw; a++)
        if (e->w[a].ptr && e->w[a].steps < e->cl[e->w[a].cls].steps) e->w[a].expert = 1;
}

static int is_expert(const struct moectx *e, const struct tkp_call *c)
{
    const struct wt *w = w_find(e, c->a_ptr);
    return w && w->expert;
}

/* Step 3: per layer, the class with the fewest distinct weights holds one weight per expert. */
static void moe_layer(struct moectx *e, uint32_t l)
{
    uint64_t *p = e->lw[l].p;
    uint32_t n = e->lw[l].n, best = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const struct wt *w = w_find(e, p[i]);
        uint32_t cnt = 0;
        for (uint32_t j = 0; j < n; j++) {
            const struct wt *x = w_find(e, p[j]);
            cnt += x->m == w->m && x->k == w->k;
        }
        if (cnt <= best) /* ties: the later class (the down projection) */
            best = cnt, e->cls_m[l] = w->m, e->cls_k[l] = w->k;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct wt *w = w_find(e, p[i]);
        if (w->m == e->cls_m[l] && w->k == e->cls_k[l]) p[k++] = p[i];
    }
    tkp_sort_u64(p, k);
    uint64_t g = 0;
    for (uint32_t i = 1; i < k; i++)
        g = gcd(g, p[i] - p[0]);
    e->base[l] = k ? p[0] : 0;
    e->stride[l] = g;
    e->nexp[l] = g ? (uint32_t)((p[k - 1] - p[0]) / g + 1) : k;
    if (e->nexp[l] > TKP_MOE_MAX_EXPERTS) e->nexp[l] = TKP_MOE_MAX_EXPERTS;
}

static int expert_of(const struct moectx *e, uint32_t l, const struct tkp_call *c)
{
    if (c->m != e->cls_m[l] || c->k != e->cls_k[l]) return -1;
    if (!e->stride[l]) return 0;
    uint64_t d = c->a_ptr - e->base[l];
    if (c->a_ptr < e->base[l] || d % e->stride[l]) return -1;
    uint64_t i = d / e->stride[l];
    return i < e->nexp[l] ? (int)i : -1;
}

/* Calls fn for each layer run of each step: the run's expert-weight calls calls[run[0..n)]. */
typedef int run_fn(struct moectx *e, struct tkp_moe *out, uint32_t step, uint32_t layer,
                   const uint32_t *run, uint32_t n);
static int moe_walk(struct moectx *e, struct tkp_moe *out, uint32_t s0, uint32_t s1, run_fn *fn)
{
    const struct tkp_libmodel *m = e->m;
    struct tkp_array run = {0};
    int err = 0;
    for (uint32_t i = s0; i < s1 && !err; i++) {
        const struct tkp_lstep *s = &m->steps[i];
        uint32_t layer = 0;
        run.n = 0;
        for (uint32_t j = s->first; j <= s->first + s->ncalls && !err; j++) {
            int end = j == s->first + s->ncalls;
            const struct tkp_call *c = end ? NULL : &m->calls[j];
            if (!end && !moe_usable(s, c, j)) continue;
            if (!end && is_expert(e, c)) {
                uint32_t *x = tkp_array_push(&run, sizeof(*x));
                if (!x) err = TKP_ERR_NOMEM;
                else *x = j;
            } else if (run.n) {
                if (layer < MOE_MAX_LAYERS) err = fn(e, out, i, layer, run.p, run.n);
                layer++, run.n = 0;
            }
        }
    }
    free(run.p);
    return err;
}

static int collect(struct moectx *e, struct tkp_moe *out, uint32_t step, uint32_t l,
                   const uint32_t *run, uint32_t n)
{
    (void)out, (void)step;
    if (l + 1 > e->layers) e->layers = l + 1;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t ptr = e->m->calls[run[r]].a_ptr, *p = e->lw[l].p;
        uint32_t i;
        for (i = 0; i < e->lw[l].n && p[i] != ptr; i++) {}
        if (i < e->lw[l].n || e->lw[l].n >= 2 * TKP_MOE_MAX_EXPERTS) continue;
        uint64_t *x = tkp_array_push(&e->lw[l], sizeof(*x));
        if (!x) return TKP_ERR_NOMEM;
        *x = ptr;
    }
    return 0;
}

static int fill(struct moectx *e, struct tkp_moe *out, uint32_t step, uint32_t l,
                const uint32_t *run, uint32_t n)
{
    size_t row = step - out->s0;
    /* the expert's GEMMs: its expert-class call and the run's calls up to the next one, on the
     * side the run starts from (gate, up, down: the down call ends each expert's group) */
    int starts = expert_of(e, l, &e->m->calls[run[0]]) >= 0;
    uint32_t from = 0;
    for (uint32_t r = 0; r < n; r++) {
        const struct tkp_call *c = &e->m->calls[run[r]];
        int ex = expert_of(e, l, c);
        if (ex < 0 || (uint32_t)ex >= out->width) continue;
        out->load[(row * out->layers + l) * out->width + (uint32_t)ex] = c->tokens;
        uint32_t a = from, b = r + 1; /* ends: [from, r]; starts: [r, next class call) */
        if (starts) {
            for (b = r + 1; b < n && expert_of(e, l, &e->m->calls[run[b]]) < 0; b++) {}
            a = r;
        }
        for (uint32_t x = a; x < b; x++) {
            out->calls[row * out->width + (uint32_t)ex]++;
            out->ns[row * out->width + (uint32_t)ex] += e->m->calls[run[x]].gpu_ns;
            if (e->m->calls[run[x]].gpu_ns) out->has_gpu = 1;
        }
        from = b;
    }
    return 0;
}

struct tkp_moe_scan {
    struct moectx e;
    int phase; /* the phase being added: 0 experts, 1 layers, 2 rows */
    int none;  /* no MoE data: tokens are m, or no layer or expert found */
    uint32_t width;
};

int tkp_moe_scan_new(struct tkp_moe_scan **out)
{
    return (*out = calloc(1, sizeof(**out))) ? 0 : TKP_ERR_NOMEM;
}

void tkp_moe_scan_free(struct tkp_moe_scan *sc)
{
    if (!sc) return;
    for (uint32_t l = 0; l < MOE_MAX_LAYERS; l++)
        free(sc->e.lw[l].p);
    free(sc->e.w);
    tkp_map_free(&sc->e.ix);
    free(sc->e.cl);
    free(sc);
}

int tkp_moe_scan_add(struct tkp_moe_scan *sc, const struct tkp_libmodel *m, uint32_t s0,
                     uint32_t s1)
{
    struct moectx *e = &sc->e;
    e->m = m;
    if (m->token_dim_m) sc->none = 1; /* the weight is operand B, not recorded: no experts */
    if (sc->none) return 0;
    return sc->phase == 0 ? moe_experts(e, s0, s1) : moe_walk(e, NULL, s0, s1, collect);
}

void tkp_moe_scan_end(struct tkp_moe_scan *sc, uint32_t min_width)
{
    struct moectx *e = &sc->e;
    if (sc->phase++ == 0) {
        moe_experts_end(e);
        return;
    }
    for (uint32_t l = 0; l < e->layers; l++) {
        moe_layer(e, l);
        if (e->nexp[l] > sc->width) sc->width = e->nexp[l];
    }
    if (!e->layers || !sc->width) sc->none = 1; /* no MoE data */
    else if (min_width > sc->width) sc->width = min_width;
}

int tkp_moe_scan_rows(struct tkp_moe_scan *sc, const struct tkp_libmodel *m, uint32_t s0,
                      uint32_t s1, struct tkp_moe *out)
{
    struct moectx *e = &sc->e;
    memset(out, 0, sizeof(*out));
    out->s0 = s0, out->s1 = s1;
    out->thread = s0 < s1 ? m->steps[s0].thread : 0;
    if (sc->none || m->token_dim_m) return 0;
    e->m = m;
    out->width = sc->width;
    out->layers = e->layers;
    size_t rows = s1 - s0;
    out->load = calloc(rows * out->layers * out->width, sizeof(*out->load));
    out->calls = calloc(rows * out->width, sizeof(*out->calls));
    out->ns = calloc(rows * out->width, sizeof(*out->ns));
    int err = !out->load || !out->calls || !out->ns ? TKP_ERR_NOMEM
                                                     : moe_walk(e, out, s0, s1, fill);
    if (err) tkp_moe_free(out);
    return err;
}

int tkp_moe_find(const struct tkp_libmodel *m, uint32_t s0, uint32_t s1, uint32_t min_width,
                 struct tkp_moe *out)
{
    struct tkp_moe_scan *sc;
    int err;
    memset(out, 0, sizeof(*out));
    if ((err = tkp_moe_scan_new(&sc))) return err;
    if (!(err = tkp_moe_scan_add(sc, m, s0, s1))) {
        tkp_moe_scan_end(sc, min_width);
        if (!(err = tkp_moe_scan_add(sc, m, s0, s1))) {
            tkp_moe_scan_end(sc, min_width);
            err = tkp_moe_scan_rows(sc, m, s0, s1, out);
        }
    }
    tkp_moe_scan_free(sc);
    return err;
}

void tkp_moe_free(struct tkp_moe *e)
{
    free(e->load);
    free(e->calls);
    free(e->ns);
    memset(e, 0, sizeof(*e));
}
