/* Graph topology: what runs when a graph is launched.
 *
 * Kernels inside a CUDA graph are never launched by the host one by one; a replay is a single
 * cudaGraphLaunch. So the shim walks the graph once when it is instantiated (driver queries,
 * off the launch path) and keeps node -> kernel, grid, block, dependencies. The writer emits the
 * topology in every chunk that launches the graph, so chunks stay self-contained.
 *
 * Instantiation must not disturb a capture in progress: the walk uses only graph queries, which
 * are capture-safe. */
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/real.h"
#include "core/state.h"
#include "gpu/activity.h"
#include "gpu/graph.h"
#include "record/symtab.h"
#include "tokprof/format.h"

#define GRAPHS_MAX 4096
#define GRAPH_NODES_MAX 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tkp_graph graphs[GRAPHS_MAX];
static uint32_t ngraphs, next_id;
static uint64_t next_node;

typedef CUresult (*get_nodes_fn)(CUgraph, CUgraphNode *, size_t *);
typedef CUresult (*node_type_fn)(CUgraphNode, CUgraphNodeType *);
typedef CUresult (*kparams_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*deps_v2_fn)(CUgraphNode, CUgraphNode *, CUgraphEdgeData *, size_t *);
typedef CUresult (*deps_v1_fn)(CUgraphNode, CUgraphNode *, size_t *);

static void free_graph(struct tkp_graph *g)
{
    for (uint32_t i = 0; i < g->n; i++) free(g->nodes[i].deps);
    free(g->nodes);
    free(g->cupti);
    memset(g, 0, sizeof *g); /* exec 0: a free slot */
}

static size_t node_deps(CUgraphNode node, CUgraphNode **out, deps_v2_fn v2, deps_v1_fn v1)
{
    size_t n = 0;
    *out = NULL;
    if (v2 ? v2(node, NULL, NULL, &n) : v1 ? v1(node, NULL, &n) : CUDA_ERROR_NOT_FOUND) return 0;
    if (!n) return 0;
    CUgraphNode *d = calloc(n, sizeof *d);
    if (!d) return 0;
    if (v2 ? v2(node, d, NULL, &n) : v1(node, d, &n)) {
        free(d);
        return 0;
    }
    *out = d;
    return n;
}

/* Versions of one exec kept for the writer, which may encode a launch a writer period after it
 * happened: an exec updated every token for more than this many tokens inside one period loses
 * its oldest versions (their launches are then expanded into the oldest version kept). */
#define VERSIONS_KEPT 8

/* Under the lock: a slot for a new version of exec (a free one, or exec's oldest when it has
 * VERSIONS_KEPT), and exec's current version in *cur (or NULL). */
static struct tkp_graph *new_version(uint64_t exec, struct tkp_graph **cur)
{
    struct tkp_graph *oldest = NULL, *free_slot = NULL;
    uint32_t versions = 0;
    *cur = NULL;
    for (uint32_t i = 0; i < ngraphs; i++) {
        struct tkp_graph *g = &graphs[i];
        if (!g->exec) {
            if (!free_slot) free_slot = g;
            continue;
        }
        if (g->exec != exec) continue;
        versions++;
        if (!*cur || g->since >= (*cur)->since) *cur = g;
        if (!oldest || g->since < oldest->since) oldest = g;
    }
    if (versions >= VERSIONS_KEPT) {
        free_graph(oldest);
        return oldest;
    }
    if (free_slot) return free_slot;
    return ngraphs < GRAPHS_MAX ? &graphs[ngraphs++] : NULL;
}

static void record(void *exec, void *graph, int update)
{
    static get_nodes_fn get_nodes;
    static node_type_fn node_type;
    static kparams_fn kparams;
    static deps_v2_fn deps_v2;
    static deps_v1_fn deps_v1;
    if (!get_nodes) {
        get_nodes = (get_nodes_fn)tkp_real_driver("cuGraphGetNodes");
        node_type = (node_type_fn)tkp_real_driver("cuGraphNodeGetType");
        kparams = (kparams_fn)tkp_real_driver("cuGraphKernelNodeGetParams_v2");
        deps_v2 = (deps_v2_fn)tkp_real_driver("cuGraphNodeGetDependencies_v2");
        if (!deps_v2) deps_v1 = (deps_v1_fn)tkp_real_driver("cuGraphNodeGetDependencies");
    }
    if (!get_nodes || !node_type) return;
    uint64_t since = tkp_stamp(); /* after the call: launches before it have older stamps */
    tkp_tls.depth++;
    size_t n = 0;
    CUgraphNode *nodes = NULL;
    struct tkp_gnode *out = NULL;
    uint64_t *cupti = NULL, *inherited = NULL;
    if (get_nodes((CUgraph)graph, NULL, &n) || n == 0 || n > GRAPH_NODES_MAX) goto done;
    nodes = calloc(n, sizeof *nodes);
    out = calloc(n, sizeof *out);
    cupti = calloc(n, sizeof *cupti);
    if (!nodes || !out || !cupti || get_nodes((CUgraph)graph, nodes, &n)) goto done;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
        node_type(nodes[i], &t);
        struct tkp_gnode *g = &out[i];
        g->type = t == CU_GRAPH_NODE_TYPE_KERNEL   ? TKP_NODE_KERNEL
                  : t == CU_GRAPH_NODE_TYPE_MEMCPY ? TKP_NODE_MEMCPY
                  : t == CU_GRAPH_NODE_TYPE_MEMSET ? TKP_NODE_MEMSET
                                                   : TKP_NODE_OTHER;
        if (g->type == TKP_NODE_KERNEL && kparams) {
            CUDA_KERNEL_NODE_PARAMS p;
            memset(&p, 0, sizeof p);
            if (kparams(nodes[i], &p) == CUDA_SUCCESS) {
                g->key = p.func ? (uint64_t)(uintptr_t)p.func : (uint64_t)(uintptr_t)p.kern;
                g->key_kind = p.func ? TKP_KEY_FUNCTION : TKP_KEY_KERNEL;
                g->grid[0] = p.gridDimX, g->grid[1] = p.gridDimY, g->grid[2] = p.gridDimZ;
                g->block[0] = p.blockDimX, g->block[1] = p.blockDimY, g->block[2] = p.blockDimZ;
            }
        }
        CUgraphNode *d;
        size_t nd = node_deps(nodes[i], &d, deps_v2, deps_v1);
        if (nd) {
            g->deps = calloc(nd, sizeof *g->deps);
            for (size_t j = 0; g->deps && j < nd; j++)
                for (size_t k = 0; k < n; k++)
                    if (nodes[k] == d[j]) {
                        g->deps[g->ndeps++] = (uint32_t)k;
                        break;
                    }
            free(d);
        }
        cupti[i] = tkp_cupti_node_id(nodes[i]);
    }
    pthread_mutex_lock(&lock);
    struct tkp_graph *cur, *slot = new_version((uint64_t)(uintptr_t)exec, &cur);
    /* an update pairs the new graph's nodes with the exec's in order (CUDA's rule) */
    if (update && cur && cur->n == n && cur->cupti && (inherited = calloc(n, sizeof *inherited)))
        memcpy(inherited, cur->cupti, n * sizeof *inherited);
    if (slot) {
        slot->exec = (uint64_t)(uintptr_t)exec;
        slot->id = next_id++;
        slot->node_base = next_node;
        next_node += n;
        slot->n = (uint32_t)n;
        slot->nodes = out;
        slot->since = since;
        slot->cupti = inherited ? inherited : cupti;
        out = NULL;
    }
    uint32_t gid = slot ? slot->id : UINT32_MAX;
    uint64_t base = slot ? slot->node_base : 0;
    pthread_mutex_unlock(&lock);
    /* CUPTI's node ids, so that GPU records of a replay find their node (0 without CUPTI) */
    for (size_t i = 0; gid != UINT32_MAX && i < n; i++) {
        tkp_cupti_graph_node(cupti[i], gid, base + i, since);
        if (inherited && inherited[i] != cupti[i])
            tkp_cupti_graph_node(inherited[i], gid, base + i, since);
    }
    if (!slot) free(inherited);
    if (slot && !inherited) cupti = NULL; /* the slot owns it */
done:
    if (out) {
        for (size_t i = 0; i < n; i++) free(out[i].deps);
        free(out);
    }
    free(cupti);
    free(nodes);
    tkp_tls.depth--;
}

void tkp_graph_instantiated(void *exec, void *graph)
{
    record(exec, graph, 0);
}

void tkp_graph_updated(void *exec, void *graph)
{
    record(exec, graph, 1);
}

int tkp_graph_with(uint64_t exec, uint64_t stamp, void (*fn)(void *, const struct tkp_graph *),
                   void *ctx)
{
    pthread_mutex_lock(&lock);
    const struct tkp_graph *best = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < ngraphs; i++) {
        const struct tkp_graph *g = &graphs[i];
        if (g->exec != exec) continue;
        if (!oldest || g->since < oldest->since) oldest = g;
        if (g->since <= stamp && (!best || g->since > best->since)) best = g;
    }
    if (!best) best = oldest; /* launched before every version kept */
    if (best) fn(ctx, best);
    pthread_mutex_unlock(&lock);
    return best ? 0 : -1;
}

void tkp_graph_reset_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
}
