/* tokprof decoder: the step dependency model and its replay (see critpath.h for the rules). */
#include "model/critpath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "base/sort.h"
#include "capture/reader.h"
#include "model/model.h"

#define NODE_NONE UINT64_MAX        /* a GPU record that is not a graph node */
#define NODE_COUNT (UINT64_MAX - 1) /* the entry counting a replay's node records */
#define FIFO_MAX (1u << 22) /* host records waiting for GPU records: past it, the oldest goes */
#define SEG_SLOTS 8         /* segments of a thread whose record ordinals are counted at once */
#define CHECKPOINTS 256     /* a thread's last call returns, where a STEP's end_ns is looked up */

/* A u64 -> index table (base/map.h; its value is index + 1). */
struct map {
    struct tkp_map64 m;
};

static int map_get(const struct map *m, uint64_t key)
{
    const uint64_t *v = tkp_map64_get(&m->m, key);
    return v ? (int)(*v - 1) : -1;
}

static int map_put(struct map *m, uint64_t key, uint32_t idx)
{
    uint64_t *v = tkp_map64_at(&m->m, key, 1);
    if (!v) return TKP_ERR_NOMEM;
    *v = (uint64_t)idx + 1;
    return 0;
}

static void map_free(struct map *m)
{
    tkp_map64_free(&m->m);
}

/* A GPU record waiting for its host record: the join's key, its times and factor. */
struct gpu {
    uint64_t seg, node, start, end;
    uint32_t thread, join, index;
    double f;
};

struct stream {
    uint64_t obs, pred; /* the tail: observed, predicted */
    int unknown;        /* an op without its GPU record is in it */
};

struct event {
    uint64_t obs, pred;
    int unknown, set;
};

struct node {
    uint64_t id;
    uint32_t type, ndeps;
    uint32_t *deps; /* indices into the graph's nodes (topological order) */
};

struct graph {
    uint32_t n, expect; /* nodes; those with a GPU record (kernels, copies, memsets) */
    struct node *nodes; /* topological order, stable (the simulator's and the driver's order) */
};

/* A host record waiting to be replayed. */
struct ev {
    uint64_t host_ns, seg, a, b; /* a, b: stream/event/handle/graph, wait_ns or end_ns */
    uint32_t thread, idx;        /* idx: ordinal among its type's records of (thread, seg) */
    uint32_t type, kind;
};

struct segslot {
    uint64_t seg;
    uint32_t nl, ng, nc, used;
};

struct checkpoint {
    uint64_t obs, pred;
    uint32_t taint;
};

struct thread {
    uint64_t pid;
    int started;
    uint64_t obs_ret, pred_ret; /* the last call's return: observed, predicted */
    uint64_t gpu_seg;           /* 1 + the highest segment a GPU record named */
    uint32_t taint;             /* TKP_CRIT_ bits of missing inputs since the last sync */
    int prev_launch;            /* the last record was a launch */
    int prev_graph;             /* the last record was a graph launch */
    int prev_graphed;           /* graphs: the last record was a launch replayed in the graph */
    uint64_t closed;            /* segments below it have all their records pushed */
    uint64_t gseg, gpred;       /* graphs: the segment replayed as a graph and its start */
    int gon;
    uint64_t gend_seg; /* graph_end_before: 1 + the segment of the thread's last launch, */
    int gend_match;    /* and whether it matched graph_end */
    struct segslot seg[SEG_SLOTS];
    struct checkpoint cp[CHECKPOINTS];
    uint32_t ncp, cp_next;
};

struct tkp_crit {
    struct tkp_crit_change ch;
    uint64_t lat, min_gap; /* UINT64_MAX until seen */
    uint64_t *ggaps;       /* the gaps after each GRAPH_LAUNCH (its host cost and what follows) */
    size_t nggaps, cap_ggaps, ggaps_at; /* ggaps_at: how many the cached median is of */
    uint64_t graph_gap;    /* their median (UINT64_MAX until one is seen) */
    int gpu_on, final;     /* gpu_on: -1 until GPU_INFO or the second chunk says */
    uint64_t chunks;
    uint64_t now_ns, late_ns; /* the capture's host clock so far; how late a GPU record may be */
    struct thread *threads;
    size_t nthreads;
    struct ev *fifo;
    size_t fcap, fhead, flen; /* a ring */
    struct gpu *g;            /* the GPU records waiting for their host records, by id */
    size_t gcap, gn;          /* gn: ids handed out (live or in gfree) */
    struct tkp_map gix;       /* their index by join key; removed once replayed */
    uint32_t *gfree;          /* ids removed, to reuse */
    size_t nfree;
    struct stream *streams;
    size_t nstreams, cap_streams;
    struct map stream_map;
    struct event *events;
    size_t nevents, cap_events;
    struct map event_map;
    struct graph *graphs;
    size_t ngraphs, cap_graphs;
    struct map graph_map;
    double *factor; /* by name id (NAN: not asked yet) */
    size_t nfactor;
    struct tkp_crit_step *steps;
    size_t nsteps, cap_steps;
    struct map step_map;
    struct map end_map;  /* graphs: (thread, seg) -> how many of its launches the graph holds */
    signed char *ends;   /* graph_end by name id (-1: not asked yet) */
    size_t nends;
    uint64_t *scratch; /* a replay's node ends, observed and predicted */
    size_t cap_scratch;
};

void tkp_crit_change_init(struct tkp_crit_change *ch)
{
    memset(ch, 0, sizeof(*ch));
    ch->host = 1;
    ch->launch_ns = -1;
    ch->graph_ns = 0; /* measured */
}

int tkp_crit_new(const struct tkp_crit_change *ch, struct tkp_crit **out)
{
    struct tkp_crit *c = calloc(1, sizeof(*c));
    if (!c) return TKP_ERR_NOMEM;
    c->ch = *ch;
    c->lat = c->min_gap = c->graph_gap = UINT64_MAX;
    c->late_ns = TKP_MODEL_LATE_NS;
    c->gpu_on = -1;
    *out = c;
    return 0;
}

static uint64_t lat(const struct tkp_crit *c)
{
    return c->lat == UINT64_MAX ? 0 : c->lat;
}

static uint64_t umax(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t scale_ns(uint64_t ns, double f)
{
    return f == 1 ? ns : (uint64_t)floor((double)ns * f + 0.5);
}

/* ---- tables ---- */

static struct thread *thread_at(struct tkp_crit *c, uint32_t t)
{
    if (t >= TKP_THREADS_MAX) return NULL;
    if (t >= c->nthreads &&
        tkp_grow_zeroed((void **)&c->threads, &c->nthreads, (size_t)t + 1, sizeof(*c->threads)))
        return NULL;
    return &c->threads[t];
}

static struct tkp_crit_step *step_at(struct tkp_crit *c, uint32_t thread, uint64_t seg)
{
    uint64_t key = (uint64_t)thread << 40 ^ seg;
    int i = map_get(&c->step_map, key);
    if (i >= 0) return &c->steps[i];
    if (TKP_GROW(c->steps, c->cap_steps, c->nsteps + 1) ||
        map_put(&c->step_map, key, (uint32_t)c->nsteps))
        return NULL;
    struct tkp_crit_step *s = &c->steps[c->nsteps++];
    memset(s, 0, sizeof(*s));
    s->thread = thread, s->seg = seg;
    s->why = TKP_CRIT_OPEN; /* until its STEP record */
    return s;
}

/* The element of key in a table (map -> index into *arr of *n elements of sz bytes), created
 * zeroed on first sight; NULL when out of memory. */
static void *slot_at(struct map *m, void **arr, size_t *n, size_t *cap, size_t sz, uint64_t key)
{
    int i = map_get(m, key);
    if (i >= 0) return (char *)*arr + (size_t)i * sz;
    if (tkp_grow_to(arr, cap, *n + 1, sz, 16, 0) || map_put(m, key, (uint32_t)*n)) return NULL;
    void *e = (char *)*arr + *n * sz;
    memset(e, 0, sz);
    (*n)++;
    return e;
}

static struct stream *stream_at(struct tkp_crit *c, uint64_t pid, uint64_t handle)
{
    return slot_at(&c->stream_map, (void **)&c->streams, &c->nstreams, &c->cap_streams,
                   sizeof(*c->streams), tkp_hash_pair(pid, handle));
}

static struct event *event_at(struct tkp_crit *c, uint64_t pid, uint64_t handle)
{
    return slot_at(&c->event_map, (void **)&c->events, &c->nevents, &c->cap_events,
                   sizeof(*c->events), tkp_hash_pair(pid, handle));
}

static double factor_of(struct tkp_crit *c, uint64_t id, const char *name)
{
    if (!c->ch.scale) return 1;
    if (id >= c->nfactor) {
        size_t old = c->nfactor, cap = old;
        if (id >= (1u << 24) ||
            tkp_grow_to((void **)&c->factor, &cap, id + 1, sizeof(*c->factor), 16, 0))
            return c->ch.scale(c->ch.scale_arg, name ? name : "");
        for (size_t i = old; i < cap; i++)
            c->factor[i] = NAN;
        c->nfactor = cap;
    }
    if (isnan(c->factor[id])) c->factor[id] = c->ch.scale(c->ch.scale_arg, name ? name : "");
    return c->factor[id];
}

/* ---- GPU records by their join ---- */

static uint64_t gkey(uint32_t thread, uint64_t seg, uint32_t join, uint32_t index, uint64_t node)
{
    return tkp_hash_pair(tkp_hash_pair((uint64_t)thread << 32 | join, seg),
                         (uint64_t)index ^ tkp_mix64(node));
}

/* The join's key of a GPU record. */
struct gkey {
    uint64_t seg, node;
    uint32_t thread, join, index;
};

static int gpu_eq(const void *ctx, uint32_t id, const void *key)
{
    const struct gpu *g = &((const struct gpu *)ctx)[id];
    const struct gkey *k = key;
    return g->thread == k->thread && g->seg == k->seg && g->join == k->join &&
           g->index == k->index && g->node == k->node;
}

static struct gpu *gpu_find(struct tkp_crit *c, uint32_t thread, uint64_t seg, uint32_t join,
                            uint32_t index, uint64_t node)
{
    struct gkey k = {seg, node, thread, join, index};
    int64_t id = tkp_map_find(&c->gix, gkey(thread, seg, join, index, node), gpu_eq, c->g, &k);
    return id < 0 ? NULL : &c->g[id];
}

/* Removes a GPU record that has been replayed (its id reused by the next one). */
static void gpu_del(struct tkp_crit *c, struct gpu *g)
{
    struct gkey k = {g->seg, g->node, g->thread, g->join, g->index};
    tkp_map_del(&c->gix, tkp_map_probe(&c->gix, gkey(g->thread, g->seg, g->join, g->index, g->node),
                                       gpu_eq, c->g, &k));
    c->gfree[c->nfree++] = (uint32_t)(g - c->g);
}

/* Enters v, replacing the record of the same key. */
static int gpu_put(struct tkp_crit *c, const struct gpu *v)
{
    struct gkey k = {v->seg, v->node, v->thread, v->join, v->index};
    uint64_t h = gkey(v->thread, v->seg, v->join, v->index, v->node);
    if (tkp_map_reserve(&c->gix, c->gix.n + 1)) return TKP_ERR_NOMEM;
    struct tkp_map_slot *s = tkp_map_probe(&c->gix, h, gpu_eq, c->g, &k);
    if (s->id1) {
        c->g[s->id1 - 1] = *v;
        return 0;
    }
    uint32_t id;
    if (c->nfree) {
        id = c->gfree[--c->nfree];
    } else {
        size_t cap = c->gcap; /* gfree holds at most every id: grown with the records */
        if (TKP_GROW(c->g, cap, c->gn + 1)) return TKP_ERR_NOMEM;
        cap = c->gcap;
        if (TKP_GROW(c->gfree, cap, c->gn + 1)) return TKP_ERR_NOMEM;
        c->gcap = cap;
        id = (uint32_t)c->gn++;
    }
    c->g[id] = *v;
    tkp_map_put(&c->gix, s, h, id);
    return 0;
}

static int add_gpu(struct tkp_crit *c, const struct tkp_record *r)
{
    if (r->thread == TKP_GPU_THREAD_NONE || r->gpu.join == TKP_JOIN_NONE) return 0;
    struct thread *t = thread_at(c, r->thread);
    if (!t) return r->thread >= TKP_THREADS_MAX ? 0 : TKP_ERR_NOMEM;
    if (t->gpu_seg < r->step + 1) t->gpu_seg = r->step + 1;
    double f = r->type == TKP_REC_GPU_KERNEL ? factor_of(c, r->gpu.name_id, r->gpu.name) : 1;
    int graph = r->gpu.join == TKP_JOIN_GRAPH_LAUNCH;
    struct gpu v = {r->step,
                    graph ? r->gpu.node : NODE_NONE,
                    r->gpu.start_ns,
                    r->gpu.end_ns,
                    r->thread,
                    r->gpu.join,
                    r->gpu.index,
                    f};
    int err = gpu_put(c, &v);
    if (err || !graph) return err;
    struct gpu *n =
        gpu_find(c, r->thread, r->step, TKP_JOIN_GRAPH_LAUNCH, r->gpu.index, NODE_COUNT);
    if (n) return n->start++, 0;
    struct gpu cnt = {r->step, NODE_COUNT, 1, 0, r->thread, TKP_JOIN_GRAPH_LAUNCH, r->gpu.index, 1};
    return gpu_put(c, &cnt);
}

/* ---- graphs ---- */

static void graph_clear(struct graph *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        free(g->nodes[i].deps);
    free(g->nodes);
}

/* GRAPH: its nodes in a stable topological order (Kahn's, lowest index first), deps as indices. */
static int add_graph(struct tkp_crit *c, const struct tkp_record *r)
{
    if (map_get(&c->graph_map, r->graph.graph) >= 0) return 0; /* repeated in every chunk */
    uint32_t n = r->graph.nnodes;
    const struct tkp_graph_node *in = r->graph.nodes;
    struct graph g = {n, 0, calloc(n ? n : 1, sizeof(struct node))};
    uint32_t *order = calloc(n ? n : 1, sizeof(*order)), *pos = calloc(n ? n : 1, sizeof(*pos));
    char *done = calloc(n ? n : 1, 1);
    int err = !g.nodes || !order || !pos || !done ? TKP_ERR_NOMEM : 0;
    uint32_t k = 0;
    while (!err && k < n) { /* O(n^2 deps) at most once per graph */
        uint32_t before = k;
        for (uint32_t i = 0; i < n && k < n; i++) {
            if (done[i]) continue;
            int ready = 1;
            for (uint32_t d = 0; d < in[i].ndeps && ready; d++)
                for (uint32_t j = 0; j < n; j++)
                    if (in[j].node == in[i].deps[d] && !done[j]) ready = 0;
            if (ready) done[i] = 1, pos[i] = k, order[k++] = i;
        }
        if (k == before) /* a cycle (malformed): the rest in record order */
            for (uint32_t i = 0; i < n; i++)
                if (!done[i]) done[i] = 1, pos[i] = k, order[k++] = i;
    }
    for (uint32_t p = 0; !err && p < n; p++) {
        const struct tkp_graph_node *src = &in[order[p]];
        struct node *d = &g.nodes[p];
        d->id = src->node, d->type = src->type;
        if (src->type <= 2) g.expect++;
        if (src->ndeps && !(d->deps = calloc(src->ndeps, sizeof(*d->deps)))) {
            err = TKP_ERR_NOMEM;
            break;
        }
        for (uint32_t e = 0; e < src->ndeps; e++)
            for (uint32_t j = 0; j < n; j++)
                if (in[j].node == src->deps[e] && pos[j] < p) d->deps[d->ndeps++] = pos[j];
    }
    free(order), free(pos), free(done);
    if (!err && TKP_GROW(c->graphs, c->cap_graphs, c->ngraphs + 1)) err = TKP_ERR_NOMEM;
    if (!err && (err = map_put(&c->graph_map, r->graph.graph, (uint32_t)c->ngraphs)) == 0)
        c->graphs[c->ngraphs++] = g;
    if (err) graph_clear(&g);
    return err;
}

/* ---- the replay ---- */

static uint32_t *seg_counter(struct thread *t, uint64_t seg, uint32_t type)
{
    struct segslot *s = NULL, *old = &t->seg[0];
    for (int i = 0; i < SEG_SLOTS && !s; i++) {
        if (t->seg[i].used && t->seg[i].seg == seg)
            s = &t->seg[i];
        else if (!t->seg[i].used || t->seg[i].seg < old->seg || !old->used)
            old = &t->seg[i];
    }
    if (!s) *old = (struct segslot){seg, 0, 0, 0, 1}, s = old;
    return type == TKP_REC_LAUNCH ? &s->nl : type == TKP_REC_GRAPH_LAUNCH ? &s->ng : &s->nc;
}

static void checkpoint(struct thread *t, uint64_t obs, uint64_t pred, uint32_t taint)
{
    t->cp[t->cp_next] = (struct checkpoint){obs, pred, taint};
    t->cp_next = (t->cp_next + 1) % CHECKPOINTS;
    if (t->ncp < CHECKPOINTS) t->ncp++;
}

/* The GPU records a host record waits for: 1 all there, 0 not yet (and not settled). */
static int ready(struct tkp_crit *c, const struct ev *e)
{
    if (c->final || c->gpu_on == 0 || c->flen > FIFO_MAX) return 1;
    if (c->gpu_on < 0) return 0;                       /* GPU_INFO (first chunk) not read yet */
    if (c->now_ns > e->host_ns + c->late_ns) return 1; /* past the window: it will not come */
    switch (e->type) {
    case TKP_REC_LAUNCH:
        if (c->ch.graphs && c->ch.graph_end && e->seg >= c->threads[e->thread].closed)
            return 0; /* where its step's graph ends is not known yet */
        return gpu_find(c, e->thread, e->seg, TKP_JOIN_LAUNCH, e->idx, NODE_NONE) != NULL;
    case TKP_REC_COPY:
        return gpu_find(c, e->thread, e->seg, TKP_JOIN_COPY, e->idx, NODE_NONE) != NULL;
    case TKP_REC_GRAPH_LAUNCH: {
        int gi = map_get(&c->graph_map, e->a);
        if (gi < 0) return 1;
        struct gpu *n = gpu_find(c, e->thread, e->seg, TKP_JOIN_GRAPH_LAUNCH, e->idx, NODE_COUNT);
        return n && n->start >= c->graphs[gi].expect;
    }
    default:
        return 1;
    }
}

/* An op with duration on stream st: its start against the host call (h_obs, h_pred) and the
 * tail; g its GPU record (NULL: missing). hp: the predicted host call (graphs mode: the replay's).
 */
static void op(struct tkp_crit *c, struct stream *st, struct tkp_crit_step *s, struct thread *t,
               const struct gpu *g, uint64_t h_obs, uint64_t hp, int keep_resid)
{
    if (g && g->start >= h_obs && g->start - h_obs < c->lat) c->lat = g->start - h_obs;
    uint64_t pbase = hp + lat(c);
    if (!g) {
        s->why |= TKP_CRIT_NO_GPU, t->taint |= TKP_CRIT_NO_GPU;
        st->unknown = 1;
        st->obs = umax(st->obs, h_obs + lat(c)), st->pred = umax(st->pred, pbase);
        return;
    }
    uint64_t base = umax(h_obs + lat(c), st->obs);
    uint64_t resid = keep_resid && g->start > base ? g->start - base : 0;
    uint64_t dur = g->end - g->start, pdur = scale_ns(dur, g->f);
    uint64_t start = umax(pbase, st->pred) + resid;
    st->obs = umax(st->obs, g->end);
    st->pred = start + pdur;
    st->unknown = 0;
    s->obs_gpu += dur, s->pred_gpu += pdur;
}

static int replay_graph(struct tkp_crit *c, const struct ev *e, struct stream *st,
                        struct tkp_crit_step *s, struct thread *t, uint64_t h_obs, uint64_t h_pred)
{
    int gi = e->a == TKP_GRAPH_UNKNOWN ? -1 : map_get(&c->graph_map, e->a);
    if (gi < 0) {
        op(c, st, s, t, NULL, h_obs, h_pred, 1);
        return 0;
    }
    const struct graph *g = &c->graphs[gi];
    if (TKP_GROW(c->scratch, c->cap_scratch, 2 * (size_t)g->n + 2)) return TKP_ERR_NOMEM;
    uint64_t *oend = c->scratch, *pend = c->scratch + g->n;
    for (uint32_t i = 0; i < g->n; i++) { /* the latency from the replay's earliest node */
        struct gpu *r =
            gpu_find(c, e->thread, e->seg, TKP_JOIN_GRAPH_LAUNCH, e->idx, g->nodes[i].id);
        if (r && r->start >= h_obs && r->start - h_obs < c->lat) c->lat = r->start - h_obs;
    }
    uint64_t bobs = umax(h_obs + lat(c), st->obs), bpred = umax(h_pred + lat(c), st->pred);
    uint64_t tobs = bobs, tpred = bpred;
    for (uint32_t i = 0; i < g->n; i++) {
        const struct node *nd = &g->nodes[i];
        uint64_t ro = bobs, rp = bpred;
        for (uint32_t d = 0; d < nd->ndeps; d++)
            ro = umax(ro, oend[nd->deps[d]]), rp = umax(rp, pend[nd->deps[d]]);
        struct gpu *r = gpu_find(c, e->thread, e->seg, TKP_JOIN_GRAPH_LAUNCH, e->idx, nd->id);
        if (!r) {
            if (nd->type <= 2) s->why |= TKP_CRIT_NO_GPU, t->taint |= TKP_CRIT_NO_GPU;
            oend[i] = ro, pend[i] = rp;
        } else {
            uint64_t resid = r->start > ro ? r->start - ro : 0, dur = r->end - r->start;
            uint64_t pdur = scale_ns(dur, r->f);
            oend[i] = umax(r->end, ro), pend[i] = rp + resid + pdur;
            s->obs_gpu += dur, s->pred_gpu += pdur;
            gpu_del(c, r);
        }
        tobs = umax(tobs, oend[i]), tpred = umax(tpred, pend[i]);
    }
    struct gpu *n = gpu_find(c, e->thread, e->seg, TKP_JOIN_GRAPH_LAUNCH, e->idx, NODE_COUNT);
    if (n) gpu_del(c, n);
    st->obs = tobs, st->pred = tpred;
    return 0;
}

/* The predicted time the host saw `end_ns` (a STEP's end) and the taint of that point. */
static uint64_t pred_at(const struct tkp_crit *c, const struct thread *t, uint64_t end_ns,
                        uint32_t *taint)
{
    *taint = 0;
    for (uint32_t k = 0; k < t->ncp; k++) {
        const struct checkpoint *p = &t->cp[(t->cp_next + CHECKPOINTS - 1 - k) % CHECKPOINTS];
        if (p->obs <= end_ns) {
            *taint = p->taint;
            return p->pred + scale_ns(end_ns - p->obs, c->ch.host);
        }
    }
    if (!t->started) return end_ns;
    *taint = TKP_CRIT_NO_EVENT; /* older than every checkpoint: not knowable here */
    return end_ns + (t->pred_ret - t->obs_ret);
}

/* graphs: a replay's host cost, given or measured (the smallest gap after a graph launch). */
static uint64_t graph_cost(struct tkp_crit *c)
{
    if (c->ch.graph_ns) return c->ch.graph_ns;
    size_t n = c->nggaps;
    if (n != c->ggaps_at && (!(n & (n - 1)) || !(n % 4096) || c->final) && /* O(n log n) */
        !TKP_GROW(c->scratch, c->cap_scratch, n)) { /* out of memory: the last median */
        memcpy(c->scratch, c->ggaps, n * sizeof(*c->ggaps));
        tkp_sort_u64(c->scratch, n);
        c->graph_gap = tkp_pct_sorted(c->scratch, n, 0.5), c->ggaps_at = n;
    }
    return c->graph_gap != UINT64_MAX ? c->graph_gap : TKP_CRIT_GRAPH_NS;
}

/* graphs: whether launch e is in its step's graph (at or before the step's last graph_end
 * launch, or before its last run of them with graph_end_before; every launch when the step has
 * none). */
static int in_graph(const struct tkp_crit *c, const struct ev *e)
{
    if (!c->ch.graph_end) return 1;
    int n = map_get(&c->end_map, (uint64_t)e->thread << 40 ^ e->seg);
    return n < 0 || e->idx < (uint32_t)n;
}

/* graphs: whether a launched name ends the captured part (graph_end, asked once per name id). */
static int ends_graph(struct tkp_crit *c, uint64_t id, const char *name)
{
    if (id >= c->nends) {
        size_t old = c->nends, cap = old;
        if (id >= (1u << 24) ||
            tkp_grow_to((void **)&c->ends, &cap, id + 1, sizeof(*c->ends), 16, 0))
            return c->ch.graph_end(c->ch.scale_arg, name ? name : "");
        memset(c->ends + old, -1, cap - old);
        c->nends = cap;
    }
    if (c->ends[id] < 0) c->ends[id] = (signed char)c->ch.graph_end(c->ch.scale_arg, name ? name : "");
    return c->ends[id];
}

/* The part of a gap after a call that is that call's own cost: the smallest gap seen before a
 * launch, at most the gap. */
static uint64_t call_in(const struct tkp_crit *c, uint64_t gap)
{
    uint64_t c0 = c->min_gap == UINT64_MAX ? 0 : c->min_gap;
    return gap < c0 ? gap : c0;
}

static int replay(struct tkp_crit *c, const struct ev *e)
{
    struct thread *t = &c->threads[e->thread];
    struct tkp_crit_step *s = step_at(c, e->thread, e->seg);
    if (!s) return TKP_ERR_NOMEM;
    if (e->type == TKP_REC_STEP) {
        uint32_t taint = 0;
        s->token = e->kind == TKP_STEP_TOKEN;
        s->obs_end = e->a;
        s->why &= ~(uint32_t)TKP_CRIT_OPEN;
        s->pred_end = e->a ? pred_at(c, t, e->a, &taint) : 0;
        if (!e->a) s->why |= TKP_CRIT_OPEN;
        s->why |= taint;
        return 0;
    }
    int first = !t->started; /* the thread's first record: no segment before it */
    if (first) t->started = 1, t->obs_ret = t->pred_ret = e->host_ns;
    uint64_t h_obs = e->host_ns, gap = h_obs > t->obs_ret ? h_obs - t->obs_ret : 0;
    uint64_t pg = scale_ns(gap, c->ch.host), pret_extra = 0;
    int launch = e->type == TKP_REC_LAUNCH || e->type == TKP_REC_GRAPH_LAUNCH;
    if (launch && t->prev_launch && gap < c->min_gap) c->min_gap = gap;
    if (t->prev_graph && e->type != TKP_REC_SYNC) {
        if (TKP_GROW(c->ggaps, c->cap_ggaps, c->nggaps + 1)) return TKP_ERR_NOMEM;
        c->ggaps[c->nggaps++] = gap;
    }
    if (launch && !first && (c->ch.launch_ns >= 0 || c->ch.host != 1)) {
        /* the gap before a launch holds the launch call's own cost (the smallest gap seen before
         * a launch): --host scales the host code around it, the call stays, or is launch_ns */
        uint64_t call = call_in(c, gap);
        pg = scale_ns(gap - call, c->ch.host) +
             (c->ch.launch_ns >= 0 ? (uint64_t)c->ch.launch_ns : call);
    }
    int graphed = c->ch.graphs && e->type == TKP_REC_LAUNCH && in_graph(c, e);
    if (graphed && t->gon && t->gseg == e->seg) pg = 0; /* inside the replay */
    if (!graphed && t->prev_graphed && t->gon && t->gseg == e->seg) {
        /* the first record after the replayed launches: its gap begins with the last of them's
         * own call (the smallest gap before a launch), which the replay's cost stands for */
        pg = scale_ns(gap - call_in(c, gap), c->ch.host);
    }
    t->prev_graphed = graphed;
    uint64_t h_pred = t->pred_ret + pg;
    if (graphed && !(t->gon && t->gseg == e->seg)) {
        t->gon = 1, t->gseg = e->seg, t->gpred = h_pred;
        pret_extra = graph_cost(c);
        s->graph = c->ch.graph_end && map_get(&c->end_map, (uint64_t)e->thread << 40 ^ e->seg) < 0
                       ? 2 /* no launch of its graph_end: replayed whole */
                       : 1;
    }
    s->obs_host += gap, s->pred_host += pg + pret_extra;
    uint64_t obs_ret = h_obs, pred_ret = h_pred + pret_extra;
    t->prev_launch = launch, t->prev_graph = e->type == TKP_REC_GRAPH_LAUNCH;
    switch (e->type) {
    case TKP_REC_LAUNCH: {
        struct stream *st = stream_at(c, t->pid, e->a);
        if (!st) return TKP_ERR_NOMEM;
        struct gpu *g = gpu_find(c, e->thread, e->seg, TKP_JOIN_LAUNCH, e->idx, NODE_NONE);
        op(c, st, s, t, g, h_obs, graphed ? t->gpred : h_pred, !graphed);
        if (g) gpu_del(c, g);
        break;
    }
    case TKP_REC_COPY: {
        struct stream *st = stream_at(c, t->pid, e->a);
        if (!st) return TKP_ERR_NOMEM;
        struct gpu *g = gpu_find(c, e->thread, e->seg, TKP_JOIN_COPY, e->idx, NODE_NONE);
        op(c, st, s, t, g, h_obs, h_pred, 1);
        if (g) gpu_del(c, g);
        break;
    }
    case TKP_REC_GRAPH_LAUNCH: {
        struct stream *st = stream_at(c, t->pid, e->b);
        if (!st) return TKP_ERR_NOMEM;
        int err = replay_graph(c, e, st, s, t, h_obs, h_pred);
        if (err) return err;
        break;
    }
    case TKP_REC_EVENT_RECORD: {
        struct stream *st = stream_at(c, t->pid, e->b);
        struct event *ev = event_at(c, t->pid, e->a);
        if (!st || !ev) return TKP_ERR_NOMEM;
        ev->obs = umax(h_obs + lat(c), st->obs), ev->pred = umax(h_pred + lat(c), st->pred);
        ev->unknown = st->unknown, ev->set = 1;
        break;
    }
    case TKP_REC_STREAM_WAIT: {
        struct stream *st = stream_at(c, t->pid, e->a);
        struct event *ev = event_at(c, t->pid, e->b);
        if (!st || !ev) return TKP_ERR_NOMEM;
        if (ev->set)
            st->obs = umax(st->obs, ev->obs), st->pred = umax(st->pred, ev->pred),
            st->unknown |= ev->unknown;
        break;
    }
    case TKP_REC_SYNC: {
        uint64_t ro = 0, rp = 0;
        int unknown = 0;
        obs_ret = h_obs + e->b;
        if (e->kind == TKP_SYNC_EVENT || e->kind == TKP_SYNC_EVENT_QUERY) {
            struct event *ev = event_at(c, t->pid, e->a);
            if (!ev) return TKP_ERR_NOMEM;
            if (!ev->set)
                unknown = TKP_CRIT_NO_EVENT;
            else
                ro = ev->obs, rp = ev->pred, unknown = ev->unknown ? TKP_CRIT_NO_GPU : 0;
        } else if (e->kind == TKP_SYNC_DEVICE || e->kind == TKP_SYNC_CTX) {
            for (size_t i = 0; i < c->nstreams; i++) {
                ro = umax(ro, c->streams[i].obs), rp = umax(rp, c->streams[i].pred);
                if (c->streams[i].unknown) unknown = TKP_CRIT_NO_GPU;
            }
        } else {
            struct stream *st = stream_at(c, t->pid, e->a);
            if (!st) return TKP_ERR_NOMEM;
            ro = st->obs, rp = st->pred, unknown = st->unknown ? TKP_CRIT_NO_GPU : 0;
        }
        if (unknown) { /* as long as it was: not a prediction */
            pred_ret = h_pred + e->b;
            t->taint |= (uint32_t)unknown;
        } else {
            uint64_t wake = obs_ret > umax(h_obs, ro) ? obs_ret - umax(h_obs, ro) : 0;
            pred_ret = umax(h_pred, rp) + wake;
        }
        s->obs_wait += obs_ret - h_obs, s->pred_wait += pred_ret - h_pred;
        checkpoint(t, obs_ret, pred_ret, t->taint);
        t->taint = 0;
        t->obs_ret = obs_ret, t->pred_ret = pred_ret;
        return 0;
    }
    default:
        break;
    }
    t->obs_ret = umax(t->obs_ret, obs_ret), t->pred_ret = pred_ret;
    checkpoint(t, t->obs_ret, t->pred_ret, 0);
    return 0;
}

static int drain(struct tkp_crit *c)
{
    while (c->flen) {
        const struct ev *e = &c->fifo[c->fhead];
        if (!ready(c, e)) return 0;
        int err = replay(c, e);
        if (err) return err;
        c->fhead = (c->fhead + 1) % c->fcap;
        c->flen--;
    }
    return 0;
}

static int push(struct tkp_crit *c, const struct ev *e)
{
    if (c->flen == c->fcap) { /* grow the ring, unrolled to start at 0 */
        size_t cap = c->fcap ? c->fcap * 2 : 4096;
        struct ev *f = malloc(cap * sizeof(*f));
        if (!f) return TKP_ERR_NOMEM;
        for (size_t i = 0; i < c->flen; i++)
            f[i] = c->fifo[(c->fhead + i) % c->fcap];
        free(c->fifo);
        c->fifo = f, c->fcap = cap, c->fhead = 0;
    }
    c->fifo[(c->fhead + c->flen) % c->fcap] = *e;
    c->flen++;
    return 0;
}

int tkp_crit_add(struct tkp_crit *c, const struct tkp_record *r)
{
    struct ev e = {r->host_ns, r->step, 0, 0, r->thread, 0, r->type, 0};
    if (tkp_record_has_time(r->type) && r->host_ns > c->now_ns) c->now_ns = r->host_ns;
    switch (r->type) {
    case TKP_REC_CHUNK:
        if (r->chunk.base_ns > c->now_ns) c->now_ns = r->chunk.base_ns;
        if (++c->chunks == 2 && c->gpu_on < 0) c->gpu_on = 0; /* no GPU_INFO: no CUPTI support */
        return drain(c);
    case TKP_REC_META: {
        uint64_t f = tkp_meta_flush_ms(r);
        if (f && f <= 600000) c->late_ns = f * 1000000ull * TKP_MODEL_LATE_FLUSHES;
        return 0;
    }
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY: {
        int err = add_gpu(c, r);
        return err ? err : drain(c);
    }
    case TKP_REC_GPU_INFO:
        c->gpu_on = r->gpu_info.status == TKP_GPU_ON;
        return drain(c);
    case TKP_REC_GRAPH:
        return add_graph(c, r);
    case TKP_REC_LAUNCH:
        e.a = r->launch.stream;
        break;
    case TKP_REC_COPY:
        e.a = r->copy.stream;
        break;
    case TKP_REC_GRAPH_LAUNCH:
        e.a = r->graph_launch.graph, e.b = r->graph_launch.stream;
        break;
    case TKP_REC_EVENT_RECORD:
        e.a = r->event_record.event, e.b = r->event_record.stream;
        break;
    case TKP_REC_STREAM_WAIT:
        e.a = r->stream_wait.stream, e.b = r->stream_wait.event;
        break;
    case TKP_REC_SYNC:
        e.a = r->sync.handle, e.b = r->sync.wait_ns, e.kind = r->sync.kind;
        break;
    case TKP_REC_STEP:
        e.host_ns = r->step_rec.end_ns, e.a = r->step_rec.end_ns, e.kind = r->step_rec.kind;
        break;
    default:
        return 0; /* LIB_CALL, NVTX, MARKER: host time between the calls around them */
    }
    struct thread *t = thread_at(c, r->thread);
    if (!t) return r->thread >= TKP_THREADS_MAX ? 0 : TKP_ERR_NOMEM;
    if (!t->pid) t->pid = r->pid;
    if (r->type == TKP_REC_LAUNCH || r->type == TKP_REC_GRAPH_LAUNCH || r->type == TKP_REC_COPY)
        e.idx = (*seg_counter(t, r->step, r->type))++;
    if (r->step > t->closed) t->closed = r->step; /* the segments before it are complete */
    if (r->type == TKP_REC_STEP && r->step + 1 > t->closed) t->closed = r->step + 1;
    if (r->type == TKP_REC_LAUNCH && c->ch.graphs && c->ch.graph_end) {
        int m = ends_graph(c, r->launch.name_id, r->launch.name);
        uint64_t key = (uint64_t)e.thread << 40 ^ e.seg;
        if (c->ch.graph_end_before) { /* a run of matches begins: the graph ends before it */
            int run = t->gend_seg == e.seg + 1 && t->gend_match;
            t->gend_seg = e.seg + 1, t->gend_match = m;
            if (m && !run && map_put(&c->end_map, key, e.idx)) return TKP_ERR_NOMEM;
        } else if (m && map_put(&c->end_map, key, e.idx + 1)) {
            return TKP_ERR_NOMEM;
        }
    }
    int err = push(c, &e);
    return err ? err : drain(c);
}

static int cmp_step(const void *a, const void *b)
{
    const struct tkp_crit_step *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->seg < y->seg ? -1 : x->seg > y->seg;
}

int tkp_crit_finish(struct tkp_crit *c)
{
    c->final = 1;
    int err = drain(c);
    if (err) return err;
    if (c->nsteps) qsort(c->steps, c->nsteps, sizeof(*c->steps), cmp_step);
    return 0;
}

const struct tkp_crit_step *tkp_crit_steps(const struct tkp_crit *c, size_t *n)
{
    *n = c->nsteps;
    return c->steps;
}

int tkp_crit_intervals(const struct tkp_crit *c, uint64_t **obs, uint64_t **pred, size_t *n,
                       size_t *skipped)
{
    *n = *skipped = 0;
    *obs = malloc((c->nsteps + 1) * sizeof(**obs));
    *pred = malloc((c->nsteps + 1) * sizeof(**pred));
    if (!*obs || !*pred) return free(*obs), free(*pred), *obs = *pred = NULL, TKP_ERR_NOMEM;
    for (size_t i = 1; i < c->nsteps; i++) {
        const struct tkp_crit_step *p = &c->steps[i - 1], *s = &c->steps[i];
        if (!s->token || !p->token || p->thread != s->thread || !s->obs_end || !p->obs_end)
            continue;
        if (s->why | p->why) {
            (*skipped)++;
            continue;
        }
        (*obs)[*n] = s->obs_end - p->obs_end;
        (*pred)[(*n)++] = s->pred_end > p->pred_end ? s->pred_end - p->pred_end : 0;
    }
    return 0;
}

uint64_t tkp_crit_latency_ns(const struct tkp_crit *c)
{
    return lat(c);
}

uint64_t tkp_crit_launch_cost_ns(const struct tkp_crit *c)
{
    return c->min_gap == UINT64_MAX ? 0 : c->min_gap;
}

size_t tkp_crit_graph_whole(const struct tkp_crit *c, size_t *graphed)
{
    size_t whole = 0;
    *graphed = 0;
    for (size_t i = 0; i < c->nsteps; i++)
        if (c->steps[i].token && c->steps[i].graph)
            (*graphed)++, whole += c->steps[i].graph == 2;
    return whole;
}

uint64_t tkp_crit_graph_ns(struct tkp_crit *c, int *measured)
{
    *measured = !c->ch.graph_ns && c->nggaps;
    return graph_cost(c); /* after finish: the median of every gap */
}

void tkp_crit_free(struct tkp_crit *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->ngraphs; i++)
        graph_clear(&c->graphs[i]);
    map_free(&c->stream_map), map_free(&c->event_map), map_free(&c->graph_map);
    map_free(&c->step_map), map_free(&c->end_map);
    tkp_map_free(&c->gix), free(c->gfree);
    free(c->threads), free(c->fifo), free(c->g), free(c->streams), free(c->events);
    free(c->graphs), free(c->factor), free(c->ends), free(c->ggaps), free(c->steps), free(c->scratch);
    free(c);
}
