/* tokprof decoder: the calls table streamed (see table_calls.h). */
#include "fleet/table_calls.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "capture/reader.h"
#include "tokprof/format.h"

struct wstep { /* a step's launches: the library call of each (0: none) */
    uint64_t seg;
    int used;
    uint32_t *call;
    size_t n, cap;
};

struct wcall {
    uint32_t call, row; /* row + 1; 0 free */
    uint64_t flops;     /* the call's, counted in its row's timed_flops at its first kernel */
    int timed;          /* a GPU record of its kernels came */
};

struct wthread {
    struct wstep *steps; /* TKP_TCALLS_STEPS, by seg % that */
    struct wcall *calls; /* TKP_TCALLS_CALLS, by call % that */
};

struct tkp_tcalls {
    struct tkp_callrow *rows;
    size_t nrows, caprows;
    struct tkp_map ix; /* rows by their key */
    struct wthread *th;
    size_t nth;
    uint64_t late;
    int sorted;
};

int tkp_tcalls_new(struct tkp_tcalls **out)
{
    return (*out = calloc(1, sizeof(**out))) ? 0 : TKP_ERR_NOMEM;
}

void tkp_tcalls_free(struct tkp_tcalls *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->nrows; i++)
        free(c->rows[i].op);
    for (size_t t = 0; t < c->nth; t++) {
        for (size_t s = 0; c->th[t].steps && s < TKP_TCALLS_STEPS; s++)
            free(c->th[t].steps[s].call);
        free(c->th[t].steps), free(c->th[t].calls);
    }
    tkp_map_free(&c->ix);
    free(c->rows), free(c->th), free(c);
}

static int same(const struct tkp_callrow *a, const struct tkp_callrow *b)
{
    return a->hour_ns == b->hour_ns && a->lib == b->lib && a->m == b->m && a->n == b->n &&
           a->k == b->k && a->batch == b->batch && a->atype == b->atype && a->btype == b->btype &&
           a->ctype == b->ctype && a->compute == b->compute && a->transa == b->transa &&
           a->transb == b->transb && !strcmp(a->op, b->op);
}

static uint64_t hash(const struct tkp_callrow *a)
{
    const uint64_t v[] = {a->hour_ns,
                          a->lib,
                          a->m,
                          a->n,
                          a->k,
                          a->batch,
                          (uint64_t)(uint32_t)a->atype << 32 | (uint32_t)a->btype,
                          (uint64_t)(uint32_t)a->ctype << 32 | (uint32_t)a->compute,
                          (uint64_t)(uint32_t)a->transa << 32 | (uint32_t)a->transb};
    return tkp_fnv64_str(tkp_fnv64(TKP_FNV64_SEED, v, sizeof(v)), a->op);
}

static int eq_row(const void *ctx, uint32_t id, const void *key)
{
    return same(&((const struct tkp_tcalls *)ctx)->rows[id], key);
}

/* The row of key (created when new): its index, or -1 when out of memory. */
static long row_of(struct tkp_tcalls *c, const struct tkp_callrow *key)
{
    uint64_t h = hash(key);
    if (tkp_map_reserve(&c->ix, c->nrows + 1)) return -1;
    struct tkp_map_slot *s = tkp_map_probe(&c->ix, h, eq_row, c, key);
    if (s->id1) return (long)s->id1 - 1;
    if (TKP_GROW(c->rows, c->caprows, c->nrows + 1)) return -1;
    struct tkp_callrow *r = &c->rows[c->nrows];
    *r = *key;
    if (!(r->op = strdup(key->op))) return -1;
    tkp_map_put(&c->ix, s, h, (uint32_t)c->nrows);
    return (long)c->nrows++;
}

static struct wthread *thread_at(struct tkp_tcalls *c, uint32_t t)
{
    if (t >= TKP_THREADS_MAX) return NULL;
    if (TKP_GROW_ZEROED_FROM(c->th, c->nth, (size_t)t + 1, 4)) return NULL;
    struct wthread *w = &c->th[t];
    if (!w->steps) {
        w->steps = calloc(TKP_TCALLS_STEPS, sizeof(*w->steps));
        w->calls = calloc(TKP_TCALLS_CALLS, sizeof(*w->calls));
        if (!w->steps || !w->calls) {
            free(w->steps), free(w->calls);
            w->steps = NULL, w->calls = NULL;
            return NULL;
        }
    }
    return w;
}

static int on_call(struct tkp_tcalls *c, const struct tkp_record *r, uint64_t hour)
{
    const typeof(r->lib_call) *l = &r->lib_call;
    struct tkp_callrow key = {hour,      l->lib,     (char *)(l->op ? l->op : ""),
                            l->m,      l->n,       l->k,
                            l->batch,  l->atype,   l->btype,
                            l->ctype,  l->compute, l->transa,
                            l->transb, 0,          0,
                            0,         0,          0,
                            0};
    long i = row_of(c, &key);
    struct wthread *w = thread_at(c, r->thread);
    if (i < 0 || !w) return TKP_ERR_NOMEM;
    struct tkp_callrow *row = &c->rows[i];
    row->calls++;
    row->host_ns += l->call_ns;
    /* FLOPs of executed GEMMs only (libcalls.h: tkp_call_executed) */
    uint64_t flops = 0;
    if (!l->status && !(l->flags & TKP_LIBF_CAPTURED) && l->m && l->n && l->k)
        flops = 2 * l->m * l->n * l->k * (l->batch ? l->batch : 1);
    row->flops += flops;
    w->calls[l->call % TKP_TCALLS_CALLS] = (struct wcall){l->call, (uint32_t)i + 1, flops, 0};
    return 0;
}

static int on_launch(struct tkp_tcalls *c, const struct tkp_record *r)
{
    struct wthread *w = thread_at(c, r->thread);
    if (!w) return TKP_ERR_NOMEM;
    struct wstep *s = &w->steps[r->step % TKP_TCALLS_STEPS];
    if (!s->used || s->seg != r->step) s->used = 1, s->seg = r->step, s->n = 0;
    if (TKP_GROW(s->call, s->cap, s->n + 1)) return TKP_ERR_NOMEM;
    s->call[s->n++] = r->launch.call;
    return 0;
}

static void on_kernel(struct tkp_tcalls *c, const struct tkp_record *r)
{
    if (r->gpu.join != TKP_JOIN_LAUNCH || r->thread >= c->nth || !c->th[r->thread].steps ||
        r->gpu.end_ns < r->gpu.start_ns)
        return;
    struct wthread *w = &c->th[r->thread];
    const struct wstep *s = &w->steps[r->step % TKP_TCALLS_STEPS];
    if (!s->used || s->seg != r->step || r->gpu.index >= s->n) {
        c->late++;
        return;
    }
    uint32_t call = s->call[r->gpu.index];
    if (!call) return; /* a launch outside any library call */
    struct wcall *wc = &w->calls[call % TKP_TCALLS_CALLS];
    if (wc->call != call || !wc->row) {
        c->late++;
        return;
    }
    struct tkp_callrow *row = &c->rows[wc->row - 1];
    row->gpu_ns += r->gpu.end_ns - r->gpu.start_ns;
    if (!wc->timed) /* its first kernel: a timed call (TOKPROF_GPU=window:N/M times some) */
        wc->timed = 1, row->timed_calls++, row->timed_flops += wc->flops;
}

int tkp_tcalls_add(struct tkp_tcalls *c, const struct tkp_record *r, uint64_t hour_ns)
{
    switch (r->type) {
    case TKP_REC_LIB_CALL:
        return on_call(c, r, hour_ns);
    case TKP_REC_LAUNCH:
        return on_launch(c, r);
    case TKP_REC_GPU_KERNEL:
        on_kernel(c, r);
        return 0;
    default:
        return 0;
    }
}

static int cmp_row(const void *a, const void *b)
{
    const struct tkp_callrow *x = a, *y = b;
    const uint64_t vx[] = {x->hour_ns, x->lib}, vy[] = {y->hour_ns, y->lib};
    for (int i = 0; i < 2; i++)
        if (vx[i] != vy[i]) return vx[i] < vy[i] ? -1 : 1;
    int s = strcmp(x->op, y->op);
    if (s) return s;
    const uint64_t dx[] = {x->m, x->n, x->k, x->batch}, dy[] = {y->m, y->n, y->k, y->batch};
    for (int i = 0; i < 4; i++)
        if (dx[i] != dy[i]) return dx[i] < dy[i] ? -1 : 1;
    const int32_t tx[] = {x->atype, x->btype, x->ctype, x->compute, x->transa, x->transb},
                  ty[] = {y->atype, y->btype, y->ctype, y->compute, y->transa, y->transb};
    for (int i = 0; i < 6; i++)
        if (tx[i] != ty[i]) return tx[i] < ty[i] ? -1 : 1;
    return 0;
}

const struct tkp_callrow *tkp_tcalls_rows(struct tkp_tcalls *c, size_t *n)
{
    if (!c->sorted) { /* the hash indices die with the order: no more adds after this */
        qsort(c->rows, c->nrows, sizeof(*c->rows), cmp_row);
        c->sorted = 1;
    }
    *n = c->nrows;
    return c->rows;
}

uint64_t tkp_tcalls_late(const struct tkp_tcalls *c)
{
    return c->late;
}
