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

#include "core/real.h"
#include "core/state.h"
#include "gpu/cupti.h"
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
    g->nodes = NULL;
    g->n = 0;
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

void tkp_graph_instantiated(void *exec, void *graph)
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
    tkp_tls.depth++;
    size_t n = 0;
    CUgraphNode *nodes = NULL;
    struct tkp_gnode *out = NULL;
    if (get_nodes((CUgraph)graph, NULL, &n) || n == 0 || n > GRAPH_NODES_MAX) goto done;
    nodes = calloc(n, sizeof *nodes);
    out = calloc(n, sizeof *out);
    if (!nodes || !out || get_nodes((CUgraph)graph, nodes, &n)) goto done;
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
    }
    pthread_mutex_lock(&lock);
    struct tkp_graph *slot = NULL;
    for (uint32_t i = 0; i < ngraphs; i++)
        if (graphs[i].exec == (uint64_t)(uintptr_t)exec) slot = &graphs[i];
    if (!slot && ngraphs < GRAPHS_MAX) slot = &graphs[ngraphs++];
    if (slot) {
        free_graph(slot);
        slot->exec = (uint64_t)(uintptr_t)exec;
        slot->id = next_id++;
        slot->node_base = next_node;
        next_node += n;
        slot->n = (uint32_t)n;
        slot->nodes = out;
        out = NULL;
    }
    uint32_t gid = slot ? slot->id : UINT32_MAX;
    uint64_t base = slot ? slot->node_base : 0;
    pthread_mutex_unlock(&lock);
    /* CUPTI's node ids, so that GPU records of a replay find their node (0 without CUPTI) */
    for (size_t i = 0; gid != UINT32_MAX && i < n; i++)
        tkp_cupti_graph_node(tkp_cupti_node_id(nodes[i]), gid, base + i);
done:
    if (out) {
        for (size_t i = 0; i < n; i++) free(out[i].deps);
        free(out);
    }
    free(nodes);
    tkp_tls.depth--;
}

int tkp_graph_with(uint64_t exec, void (*fn)(void *, const struct tkp_graph *), void *ctx)
{
    int rc = -1;
    pthread_mutex_lock(&lock);
    for (uint32_t i = 0; i < ngraphs; i++)
        if (graphs[i].exec == exec) {
            fn(ctx, &graphs[i]);
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

void tkp_graph_reset_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
}
