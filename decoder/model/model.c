/* tokprof decoder: the step model (see model.h for the join, the watermark and the bounds). */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/mp.h"
#include "capture/reader.h"
#include "model/libcalls.h"
#include "capture/record.h"
#include "base/sort.h"

/* A thread whose segment index jumps further than this past its largest one is malformed input:
 * the record is ignored (counted in bad_joins) rather than growing the table. */
#define SEG_JUMP_MAX (1u << 20)

struct okernel {
    uint64_t start, end;
    uint32_t slot, index;
    uint32_t join;
};

struct olaunch {
    uint64_t host_ns;
    uint32_t slot;
};

struct ograph {
    uint64_t host_ns, graph, min_start;
};

struct tkp_mopen {
    struct tkp_mopen *next_spare;
    struct okernel *k;
    size_t nk, capk;
    struct olaunch *l;
    size_t nl, capl;
    struct ograph *g;
    size_t ng, capg;
    int has_rec;
    uint64_t last_gpu_end;
    /* the verdict's launch time folded while the launches come (tkp_model_add_run; close_step
     * does the rest): the gaps between l[0..pdone) taken, from the thread's min1 pmin1_0, with
     * the state it left (pmin1, ppaced). close_step keeps it only when the thread's min1 at the
     * close is pmin1_0 (the steps of a thread closed in the order their launches came), else
     * walks the launches from the start as before. */
    size_t pdone;
    uint64_t pmin1_0, pmin1, ppaced;
};

struct tkp_mthread {
    uint32_t *seg2step; /* step index + 1; 0: not seen */
    uint64_t cap;
    uint64_t max_seg;
    int64_t tokens; /* token STEP records read so far: the next token index */
    uint64_t gpu_seg; /* 1 + the highest segment a joined GPU record named (0: none yet) */
    uint64_t sync_seg, sync_ns; /* syncs of a segment before its step exists (its first launch) */
    uint64_t lgap_min1;         /* the smallest launch gap so far + 1 (figures.h) */
    uint64_t pmin1;             /* ... as the fold of the launches so far left it (tkp_mopen) */
};

struct tkp_mgraph {
    uint64_t graph;
    uint32_t n;
    uint32_t *slots; /* name slots of its kernel nodes */
};



void tkp_model_init(struct tkp_model *m, const struct tkp_model_opts *opts)
{
    memset(m, 0, sizeof(*m));
    m->opts = *opts;
    m->nclasses = tkp_classes_count(opts->classes);
    m->late_ns = TKP_MODEL_LATE_NS;
}

/* ---- names ---- */

static int eq_name(const void *ctx, uint32_t id, const void *key)
{
    return ((const struct tkp_model *)ctx)->names[id].name_id == *(const uint64_t *)key;
}

/* Name ids below this (a writer numbers them from 0) are looked up in a direct table. */
#define TKP_MODEL_DIRECT_IDS (1u << 16)

static int name_slot_hashed(struct tkp_model *m, uint64_t id, const char *name, uint32_t *slot);

/* The slot of a name id (ids are stable within a file), created on first sight. */
static inline int name_slot(struct tkp_model *m, uint64_t id, const char *name, uint32_t *slot)
{
    if (id < m->id2slot_cap && m->id2slot[id]) {
        *slot = m->id2slot[id] - 1;
        return 0;
    }
    int err = name_slot_hashed(m, id, name, slot);
    if (!err && id < TKP_MODEL_DIRECT_IDS) {
        if (id >= m->id2slot_cap) {
            size_t cap = m->id2slot_cap;
            if (tkp_grow_to((void **)&m->id2slot, &cap, id + 1, sizeof(*m->id2slot), 16, 0))
                return 0; /* the hash still answers */
            memset(m->id2slot + m->id2slot_cap, 0, (cap - m->id2slot_cap) * sizeof(*m->id2slot));
            m->id2slot_cap = cap;
        }
        m->id2slot[id] = *slot + 1;
    }
    return err;
}

static int name_slot_hashed(struct tkp_model *m, uint64_t id, const char *name, uint32_t *slot)
{
    if (tkp_map_reserve(&m->name_ix, m->nnames + 1)) return TKP_ERR_NOMEM;
    struct tkp_map_slot *ms = tkp_map_probe(&m->name_ix, tkp_mix64(id), eq_name, m, &id);
    if (ms->id1) {
        *slot = ms->id1 - 1;
        return 0;
    }
    if (!m->cls && !(m->cls = calloc((size_t)m->nclasses, sizeof(*m->cls)))) return TKP_ERR_NOMEM;
    if (TKP_GROW(m->names, m->cap_names, m->nnames + 1)) return TKP_ERR_NOMEM;
    struct tkp_mname *n = &m->names[m->nnames];
    memset(n, 0, sizeof(*n));
    n->name_id = id;
    if (!(n->name = strdup(name ? name : TKP_NAME_MISSING))) return TKP_ERR_NOMEM;
    n->cls = tkp_classes_match(m->opts.classes, n->name);
    if ((n->tok_cols = tkp_kernel_token_cols(n->name))) m->has_tok_cols = 1;
    tkp_map_put(&m->name_ix, ms, tkp_mix64(id), (uint32_t)m->nnames);
    *slot = (uint32_t)m->nnames++;
    return 0;
}

/* ---- steps ---- */

static int thread_at(struct tkp_model *m, uint32_t t, struct tkp_mthread **out)
{
    if (t >= TKP_THREADS_MAX) return 1;
    if (t >= m->nthreads) {
        size_t cap = m->nthreads;
        if (tkp_grow_zeroed((void **)&m->threads, &cap, (size_t)t + 1, sizeof(*m->threads)))
            return TKP_ERR_NOMEM;
        m->nthreads = (uint32_t)cap;
    }
    *out = &m->threads[t];
    return 0;
}

static int step_find(struct tkp_model *m, uint32_t thread, uint32_t tid, uint64_t seg, int lib,
                     size_t *idx);

/* The step of record r (thread, step), created open on first sight (lib_only when a LIB_CALL
 * creates it, and a LIB_CALL never sets its tid). Returns 0 with *out, 1 when the record is
 * malformed (ignored), or NOMEM. */
static inline int step_at(struct tkp_model *m, const struct tkp_record *r, int lib,
                          struct tkp_mstep **out)
{
    struct tkp_mstep *s = m->last;
    if (s && s->thread == r->thread && s->seg == r->step) {
        /* the usual case: the step of the previous record */
        if (!lib && !s->tid && r->tid) s->tid = r->tid;
    } else {
        size_t i;
        m->pid = r->pid; /* for a step step_find creates */
        int err = step_find(m, r->thread, lib ? 0 : r->tid, r->step, lib, &i);
        if (err) return err;
        s = m->last = &m->steps[i]; /* steps move only in step_find and at the finish */
    }
    if (!lib) s->lib_only = 0;
    *out = s;
    return 0;
}

/* Steps' class times come from zeroed blocks of CLASS_BLOCK steps, never moved, freed together:
 * one allocation per thousand steps. */
#define CLASS_BLOCK 1024

struct tkp_mcblock {
    struct tkp_mcblock *next;
    uint64_t v[];
};

static uint64_t *class_alloc(struct tkp_model *m)
{
    size_t n = m->nclasses > 0 ? (size_t)m->nclasses : 1;
    if (m->cls_left < n) {
        struct tkp_mcblock *b = calloc(1, sizeof(*b) + CLASS_BLOCK * n * sizeof(*b->v));
        if (!b) return NULL;
        b->next = m->cblocks;
        m->cblocks = b;
        m->cls_next = b->v;
        m->cls_left = CLASS_BLOCK * n;
    }
    uint64_t *p = m->cls_next;
    m->cls_next += n, m->cls_left -= n;
    return p;
}

/* Open steps' records come from zeroed blocks of OPEN_BLOCK, never moved, freed together (a
 * closed step's go to the next step that opens: m->spare). */
#define OPEN_BLOCK 256

struct tkp_moblock {
    struct tkp_moblock *next;
    size_t used;
    struct tkp_mopen o[OPEN_BLOCK];
};

static struct tkp_mopen *mopen_new(struct tkp_model *m)
{
    struct tkp_moblock *b = m->oblocks;
    if (!b || b->used == OPEN_BLOCK) {
        if (!(b = calloc(1, sizeof(*b)))) return NULL;
        b->next = m->oblocks;
        m->oblocks = b;
    }
    return &b->o[b->used++];
}

static int step_find(struct tkp_model *m, uint32_t thread, uint32_t tid, uint64_t seg, int lib,
                     size_t *idx)
{
    struct tkp_mthread *t;
    int err = thread_at(m, thread, &t);
    if (err) return err;
    if (seg > t->max_seg + SEG_JUMP_MAX) return 1;
    if (seg >= t->cap) {
        size_t cap = t->cap;
        if (tkp_grow_to((void **)&t->seg2step, &cap, seg + 1, sizeof(*t->seg2step), 16, 0))
            return TKP_ERR_NOMEM;
        memset(t->seg2step + t->cap, 0, (cap - t->cap) * sizeof(*t->seg2step));
        t->cap = cap;
    }
    if (seg > t->max_seg && !lib) t->max_seg = seg;
    if (t->seg2step[seg]) {
        *idx = t->seg2step[seg] - 1;
        if (tid && !m->steps[*idx].tid) m->steps[*idx].tid = tid;
        return 0;
    }
    if (TKP_GROW(m->steps, m->cap_steps, m->nsteps + 1) || TKP_GROW(m->openlist, m->cap_open, m->nopen + 1))
        return TKP_ERR_NOMEM;
    struct tkp_mstep *s = &m->steps[m->nsteps];
    memset(s, 0, sizeof(*s));
    s->thread = thread;
    s->tid = tid;
    s->pid = m->pid;
    s->seg = seg;
    s->index = -1;
    s->kind = TKP_MSTEP_OPEN;
    s->lib_only = lib;
    if (t->sync_ns && t->sync_seg == seg) s->sync_ns = t->sync_ns, t->sync_ns = 0;
    if (!(s->class_ns = class_alloc(m))) return TKP_ERR_NOMEM;
    if (m->opts.class_counts && !(s->class_n = class_alloc(m))) return TKP_ERR_NOMEM;
    if ((s->open = m->spare)) { /* a closed step's buffers, emptied */
        m->spare = s->open->next_spare;
        s->open->next_spare = NULL;
    } else if (!(s->open = mopen_new(m))) {
        return TKP_ERR_NOMEM;
    }
    /* sized like the last step that ended: a step's records grow its buffers without realloc */
    struct tkp_mopen *o = s->open;
    if (TKP_GROW(o->l, o->capl, m->hint_l) || TKP_GROW(o->g, o->capg, m->hint_g) ||
        TKP_GROW(o->k, o->capk, m->hint_k)) {
        o->next_spare = m->spare;
        m->spare = o;
        return TKP_ERR_NOMEM;
    }
    m->openlist[m->nopen++] = m->nsteps;
    *idx = m->nsteps++;
    t->seg2step[seg] = (uint32_t)*idx + 1;
    return 0;
}

/* Whether a step feeds the per-name and per-class figures (opts filters). */
static int step_counts(const struct tkp_model *m, const struct tkp_mstep *s)
{
    if (m->opts.tid && (!s || s->tid != m->opts.tid)) return 0;
    if (m->opts.from < 0 && m->opts.to < 0) return 1;
    if (!s || s->kind != TKP_STEP_TOKEN) return 0;
    return (m->opts.from < 0 || s->index >= m->opts.from) && (m->opts.to < 0 || s->index <= m->opts.to);
}

/* A counted kernel's duration into its name's figures (its class's are their sum: finish). */
static int kernel_counted(struct tkp_model *m, uint32_t slot, uint64_t dur)
{
    m->kernel_ns_total += dur;
    return tkp_dist_add(&m->names[slot].d, dur, tkp_hist_bucket(dur));
}

static int eq_graph(const void *ctx, uint32_t id, const void *key)
{
    return ((const struct tkp_model *)ctx)->graphs[id].graph == *(const uint64_t *)key;
}

static const struct tkp_mgraph *graph_find(const struct tkp_model *m, uint64_t graph)
{
    int64_t id = tkp_map_find(&m->graph_ix, tkp_mix64(graph), eq_graph, m, &graph);
    return id < 0 ? NULL : &m->graphs[id];
}

static int cmp_kernel(const void *a, const void *b)
{
    const struct okernel *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* One kernel's tok_cols into a step's largest token count and its "more than that" flag. */
static void tok_cols_fold(int c, int *kt, int *many)
{
    if (c > *kt) *kt = c;
    else if (c < 0) *many = 1;
}

/* One gap between consecutive launches of a step into the verdict's launch time (close_step's
 * loop, tkp_launch_paced): m1 is min1 - 1 (wrapping: UINT64_MAX while none), so that
 * "!min1 || gap + 1 < min1" is "gap + 1 <= m1" for every gap, UINT64_MAX's included. */
#define PACED_FOLD(prev, ns, m1, cap, paced, back)                                                \
    do {                                                                                          \
        if ((ns) >= (prev)) {                                                                     \
            uint64_t gap_ = (ns) - (prev);                                                        \
            if (gap_ + 1 <= (m1)) (m1) = gap_, (cap) = tkp_launch_cap(gap_ + 1);                  \
            (paced) += gap_ < (cap) ? gap_ : (cap);                                               \
        } else {                                                                                  \
            back;                                                                                 \
        }                                                                                         \
    } while (0)

/* PACED_FOLD over the gaps of l[from - 1 .. nl) (from >= 1). */
static inline void paced_walk(const struct olaunch *l, size_t from, size_t nl, uint64_t *m1,
                              uint64_t *cap, uint64_t *paced)
{
    uint64_t m1_ = *m1, cap_ = *cap, paced_ = *paced; /* in locals: l could alias them */
    for (size_t i = from; i < nl; i++)
        PACED_FOLD(l[i - 1].host_ns, l[i].host_ns, m1_, cap_, paced_, (void)0);
    *m1 = m1_, *cap = cap_, *paced = paced_;
}

static int close_step(struct tkp_model *m, struct tkp_mstep *s)
{
    struct tkp_mopen *o = s->open;
    int counted = step_counts(m, s), err = 0, dists = counted && !m->opts.no_dists;
    size_t n = 1; /* one stream's kernels arrive in start order: sort only when they did not */
    while (n < o->nk && o->k[n - 1].start <= o->k[n].start)
        n++;
    if (n < o->nk) tkp_sort(o->k, o->nk, sizeof(*o->k), cmp_kernel);
    uint64_t cur_s = 0, cur_e = 0, idle_e = 0;
    m->hint_k = o->nk;
    for (size_t i = 0; i < o->nk && !err; i++) {
        const struct okernel *k = &o->k[i];
        uint64_t dur = k->end - k->start;
        /* the idle split (analysis.h): a gap is a launch gap when the kernel that ends it was
         * launched after the GPU went idle, else a host wait */
        if (i > 0 && k->start > idle_e) {
            uint64_t gap = k->start - idle_e, h = 0;
            int known = (k->join == TKP_JOIN_LAUNCH && k->index < o->nl &&
                         (h = o->l[k->index].host_ns, 1)) ||
                        (k->join == TKP_JOIN_GRAPH_LAUNCH && k->index < o->ng &&
                         (h = o->g[k->index].host_ns, 1));
            if (known && h > idle_e) s->launch_gap_ns += gap;
            else s->wait_ns += gap;
        }
        if (i == 0 || k->end > idle_e) idle_e = k->end;
        if (!s->gpu_kernels || k->start < s->gpu_first_ns) s->gpu_first_ns = k->start;
        if (k->end > s->gpu_last_ns) s->gpu_last_ns = k->end;
        s->gpu_kernels++;
        /* the sweep: intervals sorted by start, merged while they overlap */
        if (i == 0 || k->start > cur_e) {
            s->busy_ns += cur_e - cur_s;
            cur_s = k->start, cur_e = k->end;
        } else if (k->end > cur_e) {
            cur_e = k->end;
        }
        s->class_ns[m->names[k->slot].cls] += dur;
        if (s->class_n) s->class_n[m->names[k->slot].cls]++;
        if (k->join == TKP_JOIN_LAUNCH && k->index < o->nl && k->start >= o->l[k->index].host_ns) {
            uint64_t lat = k->start - o->l[k->index].host_ns;
            s->lat_n++, s->lat_sum_ns += lat;
            if (lat > s->lat_max_ns) s->lat_max_ns = lat;
        } else if (k->join == TKP_JOIN_GRAPH_LAUNCH && k->index < o->ng) {
            struct ograph *g = &o->g[k->index];
            if (!g->min_start || k->start < g->min_start) g->min_start = k->start;
        }
        if (dists) err = kernel_counted(m, k->slot, dur);
    }
    s->busy_ns += cur_e - cur_s;
    /* a graph replay's latency: its launch to its first node's start */
    for (size_t i = 0; i < o->ng; i++) {
        const struct ograph *g = &o->g[i];
        if (g->min_start && g->min_start >= g->host_ns) {
            uint64_t lat = g->min_start - g->host_ns;
            s->lat_n++, s->lat_sum_ns += lat;
            if (lat > s->lat_max_ns) s->lat_max_ns = lat;
        }
    }
    if (m->has_tok_cols) { /* tokens its kernels' names carry (ggml's mul_mat_vec_q) */
        int many = 0, kt = 0;
        for (size_t i = 0; i < o->nl; i++)
            tok_cols_fold(m->names[o->l[i].slot].tok_cols, &kt, &many);
        for (size_t i = 0; i < o->ng; i++) {
            const struct tkp_mgraph *g = graph_find(m, o->g[i].graph);
            for (uint32_t j = 0; g && j < g->n; j++)
                tok_cols_fold(m->names[g->slots[j]].tok_cols, &kt, &many);
        }
        s->kern_tokens = (uint32_t)kt, s->kern_many = many;
    }
    /* the verdict's launch time (tkp_launch_paced, its cap kept while min1 holds; written apart
     * from PACED_FOLD, so that unit_runs' model_same sets one against the other); in locals: the
     * stores could alias o->l for the compiler */
    uint64_t min1 = m->threads[s->thread].lgap_min1, paced = 0;
    size_t from = 1;
    if (o->pdone && o->pmin1_0 == min1) /* the fold while they came holds: its rest only */
        min1 = o->pmin1, paced = o->ppaced, from = o->pdone;
    uint64_t cap = min1 ? tkp_launch_cap(min1) : 0;
    const struct olaunch *l = o->l;
    for (size_t i = from, nl = o->nl; i < nl; i++) {
        if (l[i].host_ns < l[i - 1].host_ns) continue;
        uint64_t gap = l[i].host_ns - l[i - 1].host_ns;
        if (!min1 || gap + 1 < min1) min1 = gap + 1, cap = tkp_launch_cap(min1);
        paced += gap < cap ? gap : cap;
    }
    m->threads[s->thread].lgap_min1 = min1;
    s->launch_ns += paced;
    if (!counted) /* counted when added (tkp_model_add), as most steps are */
        for (size_t i = 0; i < o->nl; i++)
            m->names[o->l[i].slot].launches--;
    if (counted) {
        for (size_t i = 0; i < o->ng; i++) {
            const struct tkp_mgraph *g = graph_find(m, o->g[i].graph);
            for (uint32_t j = 0; g && j < g->n; j++)
                m->names[g->slots[j]].launches++;
        }
    }
    /* the buffers go to the next step that opens: no allocation per step in a steady stream */
    o->nk = o->nl = o->ng = o->pdone = 0;
    o->has_rec = 0;
    o->last_gpu_end = 0;
    o->next_spare = m->spare;
    m->spare = o;
    s->open = NULL;
    if (m->fast == o) m->fast = NULL;
    return err;
}

/* Whether a step the watermark has passed should stay open for GPU records still to come: GPU
 * tracing is on, fewer of its kernels have arrived than it launched (its LAUNCH records plus the
 * kernel nodes of its graph replays), no GPU record of a later step of its thread has arrived yet
 * (CUPTI delivers in completion order, so past that point the missing ones were dropped or not
 * traced: a window, a trigger), and fewer than TKP_MODEL_AWAIT_MAX steps are open. */
static int awaits_gpu(const struct tkp_model *m, const struct tkp_mstep *s)
{
    const struct tkp_mopen *o = s->open;
    if (!m->has_gpu_info || m->gpu_status != 0 || m->nopen > TKP_MODEL_AWAIT_MAX) return 0;
    if (m->threads[s->thread].gpu_seg > s->seg + 1) return 0;
    uint64_t expected = o->nl;
    for (size_t i = 0; i < o->ng && expected <= o->nk; i++) {
        const struct tkp_mgraph *g = graph_find(m, o->g[i].graph);
        if (g) expected += g->n;
    }
    return o->nk < expected;
}

/* Closes the open steps the watermark has passed (all of them when final). */
static int sweep(struct tkp_model *m, int final)
{
    size_t w = 0;
    int err = 0;
    for (size_t i = 0; i < m->nopen; i++) {
        struct tkp_mstep *s = &m->steps[m->openlist[i]];
        uint64_t ref = s->end_ns > s->open->last_gpu_end ? s->end_ns : s->open->last_gpu_end;
        if (!err && (final || (s->open->has_rec && m->now_ns >= ref + m->late_ns &&
                               !awaits_gpu(m, s))))
            err = close_step(m, s);
        else
            m->openlist[w++] = m->openlist[i];
    }
    m->nopen = w;
    return err;
}

/* META config.flush_ms, 0 when absent: how often the shim hands over GPU records. */
uint64_t tkp_meta_flush_ms(const struct tkp_record *r)
{
    return tkp_meta_config_uint(r, "flush_ms", 0);
}

static int add_graph(struct tkp_model *m, const struct tkp_record *r)
{
    if (graph_find(m, r->graph.graph)) return 0; /* re-emitted in every chunk that replays it */
    /* hostile input can define graphs without end: past the caps, a graph's launches count as
     * of unknown topology (a real server instantiates tens to a few thousand) */
    if (m->ngraphs >= TKP_MODEL_GRAPHS_MAX ||
        m->graph_nodes + r->graph.nnodes > TKP_MODEL_GRAPH_NODES_MAX)
        return 0;
    if (TKP_GROW(m->graphs, m->cap_graphs, m->ngraphs + 1)) return TKP_ERR_NOMEM;
    struct tkp_mgraph *g = &m->graphs[m->ngraphs];
    g->graph = r->graph.graph;
    g->n = 0;
    if (!(g->slots = malloc((r->graph.nnodes + 1) * sizeof(*g->slots)))) return TKP_ERR_NOMEM;
    if (tkp_map_add(&m->graph_ix, tkp_mix64(g->graph), (uint32_t)m->ngraphs)) return TKP_ERR_NOMEM;
    m->ngraphs++;
    m->graph_nodes += r->graph.nnodes;
    for (uint32_t i = 0; i < r->graph.nnodes; i++) {
        const struct tkp_graph_node *n = &r->graph.nodes[i];
        if (n->type != TKP_NODE_KERNEL) continue;
        if (name_slot(m, n->name_id, n->name, &g->slots[g->n])) return TKP_ERR_NOMEM;
        g->n++;
    }
    return 0;
}

/* GPU_KERNEL (out of line: tkp_model_add()'s launch path keeps no stack frame). */
static __attribute__((noinline)) int add_gpu_kernel(struct tkp_model *m,
                                                    const struct tkp_record *r)
{
    uint32_t slot;
    uint64_t dur = r->gpu.end_ns - r->gpu.start_ns;
    struct tkp_mstep *s;
    m->gpu_records++;
    if (name_slot(m, r->gpu.name_id, r->gpu.name, &slot)) return TKP_ERR_NOMEM;
    if (r->thread == TKP_GPU_THREAD_NONE || r->gpu.join == TKP_JOIN_NONE) {
        m->unjoined++;
        return step_counts(m, NULL) && !m->opts.no_dists ? kernel_counted(m, slot, dur) : 0;
    }
    /* the step of the previous GPU kernel first (GPU records come between the host records of a
     * later step: m->last is that one's), as step_at() takes the step of the previous record */
    s = m->gpu_step ? &m->steps[m->gpu_step - 1] : NULL;
    if (s && s->thread == r->thread && s->seg == r->step) {
        if (!s->tid && r->tid) s->tid = r->tid;
        s->lib_only = 0;
        m->last = s;
    } else {
        int err = step_at(m, r, 0, &s);
        if (err) return err < 0 ? err : (m->bad_joins++, 0);
        m->gpu_step = (size_t)(s - m->steps) + 1;
    }
    if (m->threads[s->thread].gpu_seg < s->seg + 1) m->threads[s->thread].gpu_seg = s->seg + 1;
    if (!s->open) { /* late: after its step closed (model.h) */
        m->late++;
        s->gpu_kernels++;
        s->busy_ns += dur;
        s->class_ns[m->names[slot].cls] += dur;
        if (s->class_n) s->class_n[m->names[slot].cls]++;
        if (r->gpu.start_ns < s->gpu_first_ns) s->gpu_first_ns = r->gpu.start_ns;
        if (r->gpu.end_ns > s->gpu_last_ns) s->gpu_last_ns = r->gpu.end_ns;
        return step_counts(m, s) && !m->opts.no_dists ? kernel_counted(m, slot, dur) : 0;
    }
    struct tkp_mopen *o = s->open;
    if (TKP_GROW(o->k, o->capk, o->nk + 1)) return TKP_ERR_NOMEM;
    o->k[o->nk++] = (struct okernel){r->gpu.start_ns, r->gpu.end_ns, slot, r->gpu.index, r->gpu.join};
    if (r->gpu.end_ns > o->last_gpu_end) o->last_gpu_end = r->gpu.end_ns;
    return 0;
}

static int add_step(struct tkp_model *m, const struct tkp_record *r, struct tkp_mstep *s)
{
    struct tkp_mthread *t = &m->threads[s->thread]; /* step_at made it */
    s->kind = r->step_rec.kind <= TKP_STEP_PART ? (int)r->step_rec.kind : TKP_STEP_OUTSIDE;
    if (s->kind == TKP_STEP_TOKEN) s->index = t->tokens++;
    s->closed_by = r->step_rec.closed_by;
    s->begin_ns = r->step_rec.begin_ns;
    s->mark_ns = r->step_rec.mark_ns;
    s->end_ns = r->step_rec.end_ns;
    s->launches = r->step_rec.launches;
    s->graph_launches = r->step_rec.graph_launches;
    s->copies = r->step_rec.copies;
    if (s->open) s->open->has_rec = 1, m->hint_l = s->open->nl, m->hint_g = s->open->ng;
    if (s->end_ns > m->now_ns) m->now_ns = s->end_ns;
    return 0;
}

/* LAUNCH, any case (out of line: the fast path in tkp_model_add() needs no stack frame). */
static __attribute__((noinline)) int add_launch(struct tkp_model *m, const struct tkp_record *r)
{
    struct tkp_mstep *s;
    uint32_t slot;
    int err = step_at(m, r, 0, &s);
    if (err) return err < 0 ? err : (m->bad_joins++, 0);
    struct tkp_mopen *o = s->open;
    if (name_slot(m, r->launch.name_id, r->launch.name, &slot)) return TKP_ERR_NOMEM;
    if (!o) return 0; /* host records after their STEP record: malformed, ignored */
    if (o->nl == o->capl && TKP_GROW(o->l, o->capl, o->nl + 1)) return TKP_ERR_NOMEM;
    o->l[o->nl++] = (struct olaunch){r->host_ns, slot};
    m->names[slot].launches++;
    if (s->tid) m->fast = o, m->fast_thread = s->thread, m->fast_seg = s->seg;
    return 0;
}

/* GRAPH_LAUNCH, GPU_COPY and STEP: the other records of a known step. */
static int add_step_record(struct tkp_model *m, const struct tkp_record *r)
{
    struct tkp_mstep *s;
    int err = step_at(m, r, 0, &s);
    if (err) return err < 0 ? err : (m->bad_joins++, 0);
    struct tkp_mopen *o = s->open;
    switch (r->type) {
    case TKP_REC_STEP:
        return add_step(m, r, s);
    case TKP_REC_GRAPH_LAUNCH:
        if (!o) return 0;
        if (TKP_GROW(o->g, o->capg, o->ng + 1)) return TKP_ERR_NOMEM;
        o->g[o->ng++] = (struct ograph){r->host_ns, r->graph_launch.graph, 0};
        return 0;
    case TKP_REC_GPU_COPY:
        if (m->threads[s->thread].gpu_seg < s->seg + 1) m->threads[s->thread].gpu_seg = s->seg + 1;
        s->gpu_copies++;
        s->copy_ns += r->gpu.end_ns - r->gpu.start_ns;
        return 0;
    default:
        return 0;
    }
}

/* Room for one more GEMM weight. 0 or NOMEM. */
static __attribute__((noinline)) int weights_grow(struct tkp_model *m)
{
    if (TKP_GROW_FROM(m->w, m->wcap, m->nw + 1, 256)) return TKP_ERR_NOMEM;
    return tkp_map_reserve(&m->w_ix, m->nw + 1);
}

/* Whether one more weight needs weights_grow(). */
static inline int weights_full(const struct tkp_model *m)
{
    return m->nw + 1 > m->wcap || (m->nw + 1) * 2 > m->w_ix.cap;
}

static int eq_weight(const void *ctx, uint32_t id, const void *key)
{
    return ((const struct tkp_model *)ctx)->w[id].a == *(const uint64_t *)key;
}

/* A weight's slot in w_recent (bits 8..15 xor 16..23 of its address, as before, put 10 of the 29
 * weights of a minillm step in 5 pairs that evicted each other at every call). */
static inline uint32_t weight_recent(uint64_t ptr)
{
    return tkp_hash_fib(ptr, 8);
}

/* The vote of one executed GEMM (weights_grow() made room): whether its weight a_ptr (not 0) was
 * seen with another m or n. */
static inline void weight_vote(struct tkp_model *m, uint64_t ptr, uint64_t mm, uint64_t n)
{
    /* a model's weights repeat every step: the last one seen at its recent slot first, the
     * table when it is another */
    uint32_t *recent = &m->w_recent[weight_recent(ptr)];
    struct tkp_mweight *w = *recent ? &m->w[*recent - 1] : NULL;
    if (!w || w->a != ptr) {
        uint64_t h = tkp_mix64(ptr);
        struct tkp_map_slot *ms = tkp_map_probe(&m->w_ix, h, eq_weight, m, &ptr);
        if (!ms->id1) {
            m->w[m->nw] = (struct tkp_mweight){ptr, mm, n, 0, 0};
            tkp_map_put(&m->w_ix, ms, h, (uint32_t)m->nw++);
            *recent = (uint32_t)m->nw;
            return;
        }
        *recent = ms->id1;
        w = &m->w[ms->id1 - 1];
    }
    if (w->m != mm) w->mvar = 1;
    if (w->n != n) w->nvar = 1;
}

static inline void gemm_add(struct tkp_mstep *s, uint64_t ns, uint64_t gm, uint64_t gn)
{
    if (gn > s->gemm_max_n) s->gemm_max_n = gn;
    if (gm > s->gemm_max_m) s->gemm_max_m = gm;
    if (ns >= s->gemm_last_ns) s->gemm_last_ns = ns, s->gemm_last_n = gn, s->gemm_last_m = gm;
}

/* add_lib_call() for any step and any state of the weights table. */
static __attribute__((noinline)) int add_lib_call_slow(struct tkp_model *m,
                                                       const struct tkp_record *r)
{
    struct tkp_mstep *s;
    int err = step_at(m, r, 1, &s);
    if (err < 0) return err;
    if (!err) gemm_add(s, r->host_ns, r->lib_call.m, r->lib_call.n);
    m->has_tokens = 1;
    if (!r->lib_call.a_ptr) return 0;
    if (weights_full(m) && weights_grow(m)) return TKP_ERR_NOMEM;
    weight_vote(m, r->lib_call.a_ptr, r->lib_call.m, r->lib_call.n);
    return 0;
}

/* LIB_CALL: an executed unbatched GEMM feeds its step's token figures (libcalls.h's rule) and the
 * capture-wide vote on the token dimension. A call in the previous record's step with room in
 * the weights table takes the path without a stack frame. */
static inline int lib_call_take(struct tkp_model *m, const __typeof__(((struct tkp_record *)0)->lib_call) *c,
                                uint64_t ns, uint32_t thread, uint64_t step)
{
    uint64_t gm = c->m, gn = c->n, ptr = c->a_ptr;
    struct tkp_mstep *s = m->last;
    if (c->status || (c->flags & TKP_LIBF_CAPTURED) || !gm || !gn || !c->k) return 1;
    if (c->batch > 1) return 1; /* attention bmm: not a projection */
    if (!s || s->thread != thread || s->seg != step || (ptr && weights_full(m))) return 0;
    gemm_add(s, ns, gm, gn);
    m->has_tokens = 1;
    if (ptr) weight_vote(m, ptr, gm, gn);
    return 1;
}

static __attribute__((noinline)) int add_lib_call(struct tkp_model *m, const struct tkp_record *r)
{
    if (r->host_ns > m->now_ns) m->now_ns = r->host_ns;
    return lib_call_take(m, &r->lib_call, r->host_ns, r->thread, r->step) ? 0
                                                                          : add_lib_call_slow(m, r);
}

static __attribute__((noinline)) int add_other(struct tkp_model *m, const struct tkp_record *r);

int tkp_model_add(struct tkp_model *m, const struct tkp_record *r)
{
    if (r->type == TKP_REC_LAUNCH) {
        /* most records: a launch of the step of the previous launch (open, its tid known, not
         * only LIB_CALL), of a known name, with room in the step's buffer, takes this path
         * (add_launch() does the same for any launch and sets m->fast) */
        struct tkp_mopen *o = m->fast;
        uint64_t id = r->launch.name_id;
        if (r->host_ns > m->now_ns) m->now_ns = r->host_ns;
        if (o && m->fast_seg == r->step && m->fast_thread == r->thread && o->nl < o->capl &&
            id < m->id2slot_cap && m->id2slot[id]) {
            uint32_t slot = m->id2slot[id] - 1;
            o->l[o->nl++] = (struct olaunch){r->host_ns, slot};
            m->names[slot].launches++; /* taken back if the step is not counted (close_step) */
            return 0;
        }
        return add_launch(m, r);
    }
    if (r->type == TKP_REC_LIB_CALL) return add_lib_call(m, r);
    if (r->type == TKP_REC_GPU_KERNEL) return add_gpu_kernel(m, r);
    return add_other(m, r);
}

/* n launches of (thread, step) in bulk, while tkp_model_add()'s first branch would take them:
 * how many it took. */
static inline size_t launches_take(struct tkp_model *m, uint32_t thread, uint64_t step,
                                   const uint64_t *name_id, const uint64_t *host_ns, size_t n)
{
    struct tkp_mopen *o = m->fast; /* the conditions of tkp_model_add()'s first branch */
    if (!o || m->fast_seg != step || m->fast_thread != thread) return 0;
    if (n > o->capl - o->nl) n = o->capl - o->nl;
    /* in locals: the stores below could alias the model's fields for the compiler */
    const uint32_t *id2slot = m->id2slot;
    const size_t cap = o ? m->id2slot_cap : 0;
    struct tkp_mname *names = m->names;
    struct olaunch *l = o->l + o->nl;
    uint64_t now = m->now_ns;
    size_t i = 0;
    for (; i < n; i++) {
        uint64_t id = name_id[i], ns = host_ns[i];
        if (id >= cap || !id2slot[id]) break;
        uint32_t slot = id2slot[id] - 1;
        now = ns > now ? ns : now;
        l[i] = (struct olaunch){ns, slot};
        names[slot].launches++;
    }
    m->now_ns = now;
    o->nl += i;
    return i;
}

size_t tkp_model_add_launches(struct tkp_model *m, const struct tkp_launch_bulk *b, size_t n)
{
    return launches_take(m, b->thread, b->step, b->name_id, b->host_ns, n);
}

/* The vote of a weight weight_vote() would not find in w_recent (noinline: rare in a steady
 * stream, whose weights repeat every step). 1 when it entered the weight. */
static __attribute__((noinline)) int weight_vote_table(struct tkp_model *m, uint64_t ptr,
                                                       uint64_t mm, uint64_t n)
{
    size_t nw = m->nw;
    weight_vote(m, ptr, mm, n);
    return m->nw != nw;
}

size_t tkp_model_add_run(struct tkp_model *m, const struct tkp_run_full *b, size_t n)
{
    const uint32_t thread = b->thread;
    const uint64_t step = b->step;
    struct tkp_mopen *o = m->fast; /* launches: the conditions of tkp_model_add()'s first branch */
    if (o && (m->fast_seg != step || m->fast_thread != thread || !o->nl)) o = NULL;
    /* each record takes at most one place in the step's launches: no more records than there
     * is room for; without the step, library calls only (no name id is below a cap of 0) */
    if (o && n > o->capl - o->nl) n = o->capl - o->nl;
    if (n > TKP_LAUNCH_BULK) n = TKP_LAUNCH_BULK; /* libpos */
    /* the launch time's fold (struct tkp_mopen): the launches that came another way first */
    uint64_t m1 = UINT64_MAX, cap = 0, paced = 0, prev = 0;
    if (o) {
        struct tkp_mthread *t = &m->threads[thread];
        size_t i = o->pdone;
        uint64_t min1 = i ? o->pmin1 : (o->pmin1_0 = t->pmin1);
        paced = i ? o->ppaced : 0;
        m1 = min1 - 1, cap = min1 ? tkp_launch_cap(min1) : 0;
        paced_walk(o->l, i ? i : 1, o->nl, &m1, &cap, &paced);
        prev = o->l[o->nl - 1].host_ns;
    }
    const uint64_t m1_0 = m1, cap_0 = cap, paced_0 = paced;
    /* Two passes, so that each loop has registers enough: the launches first (up to the first
     * that cannot be taken), the library calls among them noted; then those calls, which take
     * back the launches after the first of them that cannot be taken (rare). In locals: the
     * stores below could alias the model's fields and b's for the compiler. */
    const uint32_t *id2slot = m->id2slot;
    const size_t idcap = o ? m->id2slot_cap : 0;
    const uint8_t *kind = b->kind;
    const uint64_t *host_ns = b->host_ns;
    const uint32_t *tmpl = b->tmpl;
    const struct tkp_launch_tmpl *lt = b->lt;
    struct tkp_mname *names = m->names;
    struct olaunch *to = o ? o->l + o->nl : NULL, *const from = to;
    uint8_t libpos[TKP_LAUNCH_BULK];
    size_t i = 0, libs = 0;
    int back = 0; /* a launch earlier than the one before it */
    for (; i < n; i++) {
        uint64_t ns = host_ns[i];
        if (kind[i]) {
            libpos[libs++] = (uint8_t)i;
            continue;
        }
        uint64_t id = lt[tmpl[i]].launch.name_id;
        uint32_t s1 = id < idcap ? id2slot[id] : 0;
        if (!s1) break;
        *to++ = (struct olaunch){ns, s1 - 1};
        names[s1 - 1].launches++; /* taken back if the step is not counted (close_step) */
        PACED_FOLD(prev, ns, m1, cap, paced, back = 1);
        prev = ns;
    }
    /* the library calls (lib_call_take's conditions, once): the step of the last record looked
     * up, room for wroom more weights */
    uint64_t hi = 0, lo1 = UINT64_MAX;
    if (libs) {
        const struct tkp_lib_tmpl *ct = b->ct;
        struct tkp_mstep *ls = m->last;
        if (ls && (ls->thread != thread || ls->seg != step)) ls = NULL;
        size_t wlim = m->w_ix.cap / 2 < m->wcap ? m->w_ix.cap / 2 : m->wcap;
        size_t wroom = wlim > m->nw ? wlim - m->nw : 0;
        uint64_t gmax_n = 0, gmax_m = 0, glast_ns = 0, glast_n = 0, glast_m = 0;
        if (ls)
            gmax_n = ls->gemm_max_n, gmax_m = ls->gemm_max_m, glast_ns = ls->gemm_last_ns,
            glast_n = ls->gemm_last_n, glast_m = ls->gemm_last_m;
        int tokens = 0;
        size_t j = 0;
        for (; j < libs; j++) {
            size_t at = libpos[j];
            uint64_t ns = host_ns[at];
            const __typeof__(ct->lib) *c = &ct[tmpl[at]].lib;
            uint64_t gm = c->m, gn = c->n, ptr = c->a_ptr;
            /* an executed unbatched GEMM (lib_call_take's rule); the others count only */
            if (!c->status && !(c->flags & TKP_LIBF_CAPTURED) && gm && gn && c->k && c->batch <= 1) {
                if (!ls || (ptr && !wroom)) break;
                if (gn > gmax_n) gmax_n = gn;
                if (gm > gmax_m) gmax_m = gm;
                if (ns >= glast_ns) glast_ns = ns, glast_n = gn, glast_m = gm;
                tokens = 1;
                if (ptr) { /* weight_vote(), its usual case inline */
                    uint32_t r1 = m->w_recent[weight_recent(ptr)];
                    struct tkp_mweight *w = r1 ? &m->w[r1 - 1] : NULL;
                    if (w && w->a == ptr) {
                        if (w->m != gm) w->mvar = 1;
                        if (w->n != gn) w->nvar = 1;
                    } else {
                        wroom -= (size_t)weight_vote_table(m, ptr, gm, gn);
                    }
                }
            }
            hi = ns > hi ? ns : hi;
            lo1 = ns - 1 < lo1 ? ns - 1 : lo1; /* a time of 0 wraps to the greatest */
        }
        if (tokens) {
            m->has_tokens = 1;
            ls->gemm_max_n = gmax_n, ls->gemm_max_m = gmax_m, ls->gemm_last_ns = glast_ns;
            ls->gemm_last_n = glast_n, ls->gemm_last_m = glast_m;
        }
        if (j < libs) { /* call j stops the run: the launches after it are not taken */
            i = libpos[j], libs = j; /* a subset of launches in order stays in order */
            if (o) { /* i - j launches before it */
                struct olaunch *keep = from + (i - j);
                for (struct olaunch *x = keep; x < to; x++) names[x->slot].launches--;
                to = keep;
                m1 = m1_0, cap = cap_0, paced = paced_0; /* the fold again over those kept */
                paced_walk(o->l, o->nl, o->nl + (i - j), &m1, &cap, &paced);
            }
        }
    }
    if (to != from) { /* the launches': in time order, their first and last, else each */
        uint64_t a = from->host_ns, z = to[-1].host_ns;
        if (!back && a) {
            hi = z > hi ? z : hi;
            lo1 = a - 1 < lo1 ? a - 1 : lo1;
        } else {
            for (const struct olaunch *x = from; x < to; x++) {
                hi = x->host_ns > hi ? x->host_ns : hi;
                lo1 = x->host_ns - 1 < lo1 ? x->host_ns - 1 : lo1;
            }
        }
    }
    if (o) {
        o->nl += (size_t)(to - from);
        o->pdone = o->nl, o->pmin1 = m1 + 1, o->ppaced = paced;
        m->threads[thread].pmin1 = m1 + 1;
    }
    if (hi > m->now_ns) m->now_ns = hi;
    m->run_lo1 = lo1, m->run_hi = hi, m->run_libs = libs;
    return i;
}

/* SYNC: its wait to its step (figures.h's verdict); held on the thread until the step exists
 * (a sync before the segment's first launch), never making a step of its own. */
static int add_sync(struct tkp_model *m, const struct tkp_record *r)
{
    struct tkp_mthread *t;
    int err = thread_at(m, r->thread, &t);
    if (err) return err < 0 ? err : 0;
    if (r->step < t->cap && t->seg2step[r->step]) {
        m->steps[t->seg2step[r->step] - 1].sync_ns += r->sync.wait_ns;
    } else {
        if (t->sync_seg != r->step) t->sync_seg = r->step, t->sync_ns = 0;
        t->sync_ns += r->sync.wait_ns;
    }
    return 0;
}

/* Every record but LAUNCH and LIB_CALL. */
static __attribute__((noinline)) int add_other(struct tkp_model *m, const struct tkp_record *r)
{
    if (tkp_record_has_time(r->type) && r->host_ns > m->now_ns) m->now_ns = r->host_ns;
    switch (r->type) {
    case TKP_REC_CHUNK:
        if (r->chunk.base_ns > m->now_ns) m->now_ns = r->chunk.base_ns;
        m->chunks++;
        return sweep(m, 0);
    case TKP_REC_GRAPH:
        return add_graph(m, r);
    case TKP_REC_META: {
        uint64_t f = tkp_meta_flush_ms(r);
        if (f && f <= 600000) m->late_ns = f * 1000000ull * TKP_MODEL_LATE_FLUSHES;
        return 0;
    }
    case TKP_REC_GRAPH_LAUNCH:
    case TKP_REC_STEP:
        return add_step_record(m, r);
    case TKP_REC_GPU_COPY:
        m->gpu_records++;
        if (r->thread == TKP_GPU_THREAD_NONE || r->gpu.join == TKP_JOIN_NONE) {
            m->unjoined++;
            return 0;
        }
        return add_step_record(m, r);
    case TKP_REC_SYNC:
        return add_sync(m, r);
    case TKP_REC_GPU_INFO:
        m->has_gpu_info = 1;
        m->gpu_status = r->gpu_info.status;
        m->gpu_dropped = r->gpu_info.dropped;
        snprintf(m->gpu_mode, sizeof(m->gpu_mode), "%s", r->gpu_info.mode ? r->gpu_info.mode : "");
        snprintf(m->gpu_reason, sizeof(m->gpu_reason), "%s",
                 r->gpu_info.reason ? r->gpu_info.reason : "");
        return 0;
    default:
        return 0;
    }
}

static int cmp_step(const void *a, const void *b)
{
    const struct tkp_mstep *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    return x->seg < y->seg ? -1 : x->seg > y->seg;
}

void tkp_model_vote(struct tkp_model *m)
{
    size_t vm = 0, vn = 0;
    for (size_t j = 0; j < m->nw; j++)
        vm += m->w[j].mvar, vn += m->w[j].nvar;
    m->token_dim_m = vm > vn;
}

int tkp_model_finish(struct tkp_model *m)
{
    if (!m->cls && !(m->cls = calloc((size_t)m->nclasses, sizeof(*m->cls)))) return TKP_ERR_NOMEM;
    int err = sweep(m, 1);
    if (err) return err;
    for (size_t i = 0; i < m->nnames; i++) /* a class's kernels are its names' */
        if (tkp_dist_merge(&m->cls[m->names[i].cls], &m->names[i].d)) return TKP_ERR_NOMEM;
    size_t w = 0;
    for (size_t i = 0; i < m->nsteps; i++) { /* steps seen only through LIB_CALL are none */
        if (!m->steps[i].lib_only) m->steps[w++] = m->steps[i];
    }
    m->nsteps = w;
    size_t i = 1; /* created in order on one thread: mostly sorted already */
    while (i < m->nsteps && cmp_step(&m->steps[i - 1], &m->steps[i]) < 0)
        i++;
    if (i < m->nsteps) tkp_sort(m->steps, m->nsteps, sizeof(*m->steps), cmp_step);
    m->last = NULL, m->gpu_step = 0; /* steps moved */
    tkp_model_vote(m);
    m->finished = 1;
    for (size_t i = 0; i + 1 < m->nsteps; i++) {
        struct tkp_mstep *s = &m->steps[i], *n = &m->steps[i + 1];
        if (s->thread != n->thread || !s->end_ns || !n->begin_ns) continue;
        s->has_gap = 1;
        s->gap_ns = (int64_t)(n->begin_ns - s->end_ns);
    }
    const struct tkp_mstep *prev = NULL; /* the thread's previous token step */
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_mstep *s = &m->steps[i];
        if (prev && prev->thread != s->thread) prev = NULL;
        if (s->kind != TKP_STEP_TOKEN) continue;
        s->itl_ns = tkp_itl_ns(prev ? prev->end_ns : 0, s->end_ns);
        prev = s;
    }
    for (uint32_t t = 0; t < m->nthreads; t++) /* segment lookups end with the stream */
        free(m->threads[t].seg2step), m->threads[t].seg2step = NULL;
    return 0;
}

void tkp_model_free(struct tkp_model *m)
{
    for (size_t i = 0; i < m->nsteps; i++) {
        struct tkp_mstep *s = &m->steps[i];
        if (s->open) free(s->open->k), free(s->open->l), free(s->open->g);
    }
    for (size_t i = 0; i < m->nnames; i++)
        free(m->names[i].name), free(m->names[i].d.hist);
    for (int i = 0; m->cls && i < m->nclasses; i++)
        free(m->cls[i].hist);
    for (uint32_t t = 0; t < m->nthreads; t++)
        free(m->threads[t].seg2step);
    for (size_t i = 0; i < m->ngraphs; i++)
        free(m->graphs[i].slots);
    while (m->spare) {
        struct tkp_mopen *o = m->spare;
        m->spare = o->next_spare;
        free(o->k), free(o->l), free(o->g);
    }
    while (m->oblocks) {
        struct tkp_moblock *b = m->oblocks;
        m->oblocks = b->next;
        free(b);
    }
    while (m->cblocks) {
        struct tkp_mcblock *b = m->cblocks;
        m->cblocks = b->next;
        free(b);
    }
    free(m->id2slot);
    free(m->w);
    tkp_map_free(&m->w_ix);
    free(m->steps);
    free(m->names);
    free(m->cls);
    free(m->threads);
    free(m->openlist);
    tkp_map_free(&m->name_ix);
    free(m->graphs);
    tkp_map_free(&m->graph_ix);
    memset(m, 0, sizeof(*m));
}

const struct tkp_mstep *tkp_model_step(const struct tkp_model *m, uint32_t thread, uint64_t seg)
{
    if (m->finished) { /* sorted by (thread, seg) */
        size_t lo = 0, hi = m->nsteps;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const struct tkp_mstep *s = &m->steps[mid];
            if (s->thread == thread && s->seg == seg) return s;
            if (s->thread < thread || (s->thread == thread && s->seg < seg)) lo = mid + 1;
            else hi = mid;
        }
        return NULL;
    }
    if (thread >= m->nthreads) return NULL;
    const struct tkp_mthread *t = &m->threads[thread];
    return seg < t->cap && t->seg2step[seg] ? &m->steps[t->seg2step[seg] - 1] : NULL;
}

int tkp_model_launch_ns(const struct tkp_model *m, uint32_t thread, uint64_t seg, uint32_t join,
                        uint32_t index, uint64_t *ns)
{
    const struct tkp_mstep *s = tkp_model_step(m, thread, seg);
    const struct tkp_mopen *o = s ? s->open : NULL;
    if (!o) return 0;
    if (join == TKP_JOIN_LAUNCH && index < o->nl) return *ns = o->l[index].host_ns, 1;
    if (join == TKP_JOIN_GRAPH_LAUNCH && index < o->ng) return *ns = o->g[index].host_ns, 1;
    return 0;
}


int tkp_model_gpu(const struct tkp_model *m, char *why, size_t n)
{
    const char *base;
    if (m->gpu_records) return 1;
    if (!m->has_gpu_info)
        base = "the capture has no GPU records (no GPU_INFO: written without CUPTI support)";
    else
        switch (m->gpu_status) {
        case TKP_GPU_ON:
            base = "GPU tracing was on but no GPU records were written";
            break;
        case TKP_GPU_OFF:
            base = "GPU tracing off (TOKPROF_GPU=off)";
            break;
        case TKP_GPU_NO_CUPTI:
            base = "no CUPTI library (libcupti.so.13 not found)";
            break;
        case TKP_GPU_BUSY:
            base = "CUPTI taken by another subscriber (nsys, torch.profiler)";
            break;
        case TKP_GPU_NO_DEVICE:
            base = "no GPU (CUPTI_ERROR_UNKNOWN)";
            break;
        default:
            base = "CUPTI error";
            break;
        }
    if (m->has_gpu_info && m->gpu_reason[0] && !strstr(base, m->gpu_reason)) /* not twice */
        snprintf(why, n, "%s: %s", base, m->gpu_reason);
    else
        snprintf(why, n, "%s", base);
    return 0;
}

uint64_t tkp_mstep_host_ns(const struct tkp_mstep *s)
{
    return s->end_ns > s->begin_ns && s->begin_ns ? s->end_ns - s->begin_ns : 0;
}

uint64_t tkp_mstep_span_ns(const struct tkp_mstep *s)
{
    return s->gpu_kernels ? s->gpu_last_ns - s->gpu_first_ns : 0;
}

int tkp_mstep_top_class(const struct tkp_model *m, const struct tkp_mstep *s)
{
    int best = -1;
    for (int c = 0; c < m->nclasses; c++)
        if (s->class_ns[c] && (best < 0 || s->class_ns[c] > s->class_ns[best])) best = c;
    return best;
}

const char *tkp_mstep_kind_str(int kind)
{
    return kind == TKP_STEP_TOKEN     ? "token"
           : kind == TKP_STEP_OUTSIDE ? "outside"
           : kind == TKP_STEP_WARMUP  ? "warmup"
           : kind == TKP_STEP_PART    ? "part"
                                      : "open";
}
