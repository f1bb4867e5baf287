/* simgpu graphs: stream capture, explicit graphs, instantiation and replay.
 *
 * A graph is a list of nodes with dependency lists; node ids come from a process-wide counter
 * and are what the truth log reports, so a profiler that reads the topology back
 * (cuGraphGetNodes, cuGraphKernelNodeGetParams, cuFuncGetName) can match its view with the
 * simulator's. An exec is a snapshot in topological order. At launch every node runs at
 * max(launch time + latency, stream tail, its dependencies' ends) and the stream tail becomes the
 * last node's end. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static struct sim_graph *graph_of(CUgraph g)
{
    struct sim_graph *gr = (struct sim_graph *)g;
    return gr && gr->magic == MAGIC_GRAPH ? gr : NULL;
}

static struct sim_node *node_of(CUgraphNode n)
{
    struct sim_node *nd = (struct sim_node *)n;
    return nd && nd->magic == MAGIC_NODE ? nd : NULL;
}

static struct sim_graph *new_graph(void)
{
    struct sim_graph *g = calloc(1, sizeof *g);
    if (!g)
        abort();
    g->magic = MAGIC_GRAPH;
    g->id = sim_next_id();
    return g;
}

struct sim_node *graph_new_node(struct sim_graph *g, CUgraphNodeType type, const CUgraphNode *deps,
                                size_t ndeps)
{
    struct sim_node *n = calloc(1, sizeof *n);
    if (!n)
        abort();
    n->magic = MAGIC_NODE;
    n->id = sim_next_id();
    n->type = type;
    n->graph = g;
    if (ndeps) {
        n->deps = malloc(ndeps * sizeof *n->deps);
        if (!n->deps)
            abort();
        for (size_t i = 0; i < ndeps; i++)
            n->deps[i] = (struct sim_node *)deps[i];
        n->ndeps = ndeps;
    }
    g->nodes = sim_grow(g->nodes, &g->cap, g->n + 1, sizeof *g->nodes);
    g->nodes[g->n++] = n;
    return n;
}

struct sim_node *graph_capture_node(struct sim_stream *s, CUgraphNodeType type)
{
    struct sim_node *n = graph_new_node(s->cap->graph, type, (const CUgraphNode *)s->deps, s->ndeps);
    s->deps = sim_grow(s->deps, &s->capdeps, 1, sizeof *s->deps);
    s->deps[0] = n;
    s->ndeps = 1;
    return n;
}

/* ---- capture ---- */

static struct sim_capture *all_captures; /* never freed, but reachable (see end_capture) */

static CUresult begin_capture(CUstream h, int ptsz)
{
    sim_ensure_init();
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    CUresult r = CUDA_SUCCESS;
    if (!s)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (s->kind == STREAM_LEGACY)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (s->cap)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else {
        struct sim_capture *cap = calloc(1, sizeof *cap);
        if (!cap)
            abort();
        cap->id = sim_next_id();
        cap->graph = new_graph();
        cap->origin = s;
        cap->next = all_captures;
        all_captures = cap;
        s->cap = cap;
        s->ndeps = 0;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) { (void)mode; return begin_capture(h, 0); }
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) { (void)mode; return begin_capture(h, 1); }
SIM_EXPORT CUresult cuStreamBeginCapture(CUstream h) { return begin_capture(h, 0); }
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream h) { return begin_capture(h, 1); }

/* Capture objects are never freed: events recorded during a capture keep pointing at them
 * (graph == NULL marks an ended capture). */
static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptsz)
{
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    CUresult r = CUDA_SUCCESS;
    if (!s)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (!s->cap)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (s->cap->origin != s)
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    else {
        struct sim_capture *cap = s->cap;
        *phGraph = (CUgraph)cap->graph;
        tl_end_capture(cap);
        cap->graph = NULL;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *g) { return end_capture(h, g, 0); }
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g) { return end_capture(h, g, 1); }

static CUresult capture_info(CUstream h, int ptsz, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                             size_t *ndeps)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (status)
        *status = s->cap ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (s->cap) {
        if (id)
            *id = s->cap->id;
        if (graph)
            *graph = (CUgraph)s->cap->graph;
        if (deps)
            *deps = (const CUgraphNode *)s->deps;
        if (ndeps)
            *ndeps = s->ndeps;
    }
    if (edges)
        *edges = NULL;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(h, 0, st, NULL, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(h, 1, st, NULL, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
    return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
    return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                              CUgraph *g, const CUgraphNode **deps, size_t *n)
{
    return capture_info(h, 0, st, id, g, deps, NULL, n);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                                   CUgraph *g, const CUgraphNode **deps, size_t *n)
{
    return capture_info(h, 1, st, id, g, deps, NULL, n);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                              CUgraph *g, const CUgraphNode **deps,
                                              const CUgraphEdgeData **e, size_t *n)
{
    return capture_info(h, 0, st, id, g, deps, e, n);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                                                   CUgraph *g, const CUgraphNode **deps,
                                                   const CUgraphEdgeData **e, size_t *n)
{
    return capture_info(h, 1, st, id, g, deps, e, n);
}

/* ---- explicit graphs ---- */

SIM_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    (void)flags;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ensure_init();
    *phGraph = (CUgraph)new_graph();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    struct sim_graph *g = graph_of(hGraph);
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    for (size_t i = 0; i < g->n; i++) {
        g->nodes[i]->magic = 0;
        free(g->nodes[i]->deps);
        free(g->nodes[i]);
    }
    free(g->nodes);
    g->magic = 0;
    free(g);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeType type, struct sim_node **node)
{
    struct sim_graph *g = graph_of(hGraph);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < ndeps; i++) {
        struct sim_node *d = node_of(deps[i]);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&sim_lock);
    *node = graph_new_node(g, type, deps, ndeps);
    *out = (CUgraphNode)*node;
    return CUDA_SUCCESS; /* caller fills the node, then unlocks */
}

static CUresult add_kernel_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                CUfunction func, const unsigned grid[3], const unsigned block[3],
                                unsigned shmem, void **params)
{
    struct sim_func *f = mod_func(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_write wr[SIM_MAX_WRITES];
    int nwr = writes_resolve(f->name, params, grid, wr);
    struct sim_node *n;
    CUresult r = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL, &n);
    if (r != CUDA_SUCCESS)
        return r;
    n->func = f;
    memcpy(n->grid, grid, sizeof n->grid);
    memcpy(n->block, block, sizeof n->block);
    n->shmem = shmem;
    n->info.via = SIMGPU_VIA_DRIVER;
    memcpy(n->writes, wr, sizeof wr);
    n->nwrites = nwr;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                            const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    return add_kernel_node(out, g, deps, ndeps, p->func ? p->func : (CUfunction)p->kern, grid, block,
                           p->sharedMemBytes, p->kernelParams);
}

SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                         const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    return add_kernel_node(out, g, deps, ndeps, p->func, grid, block, p->sharedMemBytes, p->kernelParams);
}

SIM_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps)
{
    struct sim_node *n;
    CUresult r = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_EMPTY, &n);
    if (r == CUDA_SUCCESS)
        pthread_mutex_unlock(&sim_lock);
    return r;
}

static CUresult add_deps(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    struct sim_graph *g = graph_of(hGraph);
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    for (size_t i = 0; i < n; i++) {
        struct sim_node *f = node_of(from[i]), *t = node_of(to[i]);
        if (!f || !t || f->graph != g || t->graph != g) {
            pthread_mutex_unlock(&sim_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
        size_t cap = t->ndeps; /* exact-size array: grow by one */
        struct sim_node **d = realloc(t->deps, (cap + 1) * sizeof *d);
        if (!d)
            abort();
        d[t->ndeps++] = f;
        t->deps = d;
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                              const CUgraphEdgeData *edgeData, size_t n)
{
    (void)edgeData;
    return add_deps(g, from, to, n);
}

SIM_EXPORT CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    return add_deps(g, from, to, n);
}

/* CUDA's array convention: nodes == NULL asks the count; otherwise fill up to *n entries, NULL
 * the rest, and return the number filled. */
static CUresult list_nodes(CUgraph hGraph, CUgraphNode *nodes, size_t *num, int roots_only)
{
    struct sim_graph *g = graph_of(hGraph);
    if (!num)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (roots_only && g->nodes[i]->ndeps)
            continue;
        if (nodes && k < *num)
            nodes[k] = (CUgraphNode)g->nodes[i];
        k++;
    }
    if (nodes) {
        for (size_t i = k; i < *num; i++)
            nodes[i] = NULL;
        if (k > *num)
            k = *num;
    }
    *num = k;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) { return list_nodes(g, nodes, n, 0); }
SIM_EXPORT CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode *nodes, size_t *n) { return list_nodes(g, nodes, n, 1); }

SIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    struct sim_node *n = node_of(hNode);
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    if (!n)
        return CUDA_ERROR_INVALID_HANDLE;
    *type = n->type;
    return CUDA_SUCCESS;
}

static CUresult node_deps(CUgraphNode hNode, CUgraphNode *deps, CUgraphEdgeData *edges, size_t *num)
{
    struct sim_node *n = node_of(hNode);
    if (!num)
        return CUDA_ERROR_INVALID_VALUE;
    if (!n)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    if (deps) {
        size_t k = n->ndeps < *num ? n->ndeps : *num;
        for (size_t i = 0; i < *num; i++) {
            deps[i] = i < k ? (CUgraphNode)n->deps[i] : NULL;
            if (edges)
                memset(&edges[i], 0, sizeof edges[i]);
        }
        *num = k;
    } else {
        *num = n->ndeps;
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode n, CUgraphNode *deps, CUgraphEdgeData *e, size_t *num)
{
    return node_deps(n, deps, e, num);
}

SIM_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode n, CUgraphNode *deps, size_t *num)
{
    return node_deps(n, deps, NULL, num);
}

SIM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
    struct sim_node *n = node_of(hNode);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!n || n->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)n->func;
    p->kern = (CUkernel)n->func;
    p->gridDimX = n->grid[0];
    p->gridDimY = n->grid[1];
    p->gridDimZ = n->grid[2];
    p->blockDimX = n->block[0];
    p->blockDimY = n->block[1];
    p->blockDimZ = n->block[2];
    p->sharedMemBytes = n->shmem;
    return CUDA_SUCCESS; /* kernelParams are not kept: no device code ever reads them */
}

SIM_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v2;
    CUresult r = cuGraphKernelNodeGetParams_v2(hNode, p ? &v2 : NULL);
    if (r == CUDA_SUCCESS)
        memcpy(p, &v2, sizeof *p); /* v1 is a prefix of v2 */
    return r;
}

/* ---- instantiate and launch ---- */

CUresult graph_instantiate(CUgraphExec *out, CUgraph hGraph)
{
    struct sim_graph *g = graph_of(hGraph);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    size_t n = g->n;
    struct sim_gexec *x = calloc(1, sizeof *x);
    size_t *order = calloc(n + 1, sizeof *order), *pos = calloc(n + 1, sizeof *pos);
    char *done = calloc(n + 1, 1);
    x->nodes = calloc(n + 1, sizeof *x->nodes);
    x->dep_idx = calloc(n + 1, sizeof *x->dep_idx);
    if (!x || !order || !pos || !done || !x->nodes || !x->dep_idx)
        abort();
    /* Stable topological order: repeatedly take the first node (in creation order) whose
     * dependencies are all placed. Quadratic, fine for test-sized graphs. */
    size_t k = 0;
    while (k < n) {
        size_t before = k;
        for (size_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            int ready = 1;
            for (size_t d = 0; d < g->nodes[i]->ndeps && ready; d++) {
                size_t j;
                for (j = 0; j < n && g->nodes[j] != g->nodes[i]->deps[d]; j++) {
                }
                ready = j < n && done[j];
            }
            if (ready) {
                done[i] = 1;
                pos[i] = k;
                order[k++] = i;
            }
        }
        if (k == before) { /* a cycle */
            free(order), free(pos), free(done), free(x->nodes), free(x->dep_idx), free(x);
            pthread_mutex_unlock(&sim_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t k2 = 0; k2 < n; k2++) {
        struct sim_node *src = g->nodes[order[k2]];
        x->nodes[k2] = *src;
        x->nodes[k2].deps = NULL;
        x->nodes[k2].ndeps = src->ndeps;
        x->dep_idx[k2] = calloc(src->ndeps + 1, sizeof(size_t));
        if (!x->dep_idx[k2])
            abort();
        for (size_t d = 0; d < src->ndeps; d++)
            for (size_t j = 0; j < n; j++)
                if (g->nodes[j] == src->deps[d])
                    x->dep_idx[k2][d] = pos[j];
    }
    x->n = n;
    x->magic = MAGIC_GEXEC;
    x->id = sim_next_id();
    free(order), free(pos), free(done);
    pthread_mutex_unlock(&sim_lock);
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    (void)flags;
    return graph_instantiate(out, g);
}

SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *errNode, char *log, size_t logSize)
{
    if (errNode)
        *errNode = NULL;
    if (log && logSize)
        log[0] = 0;
    return graph_instantiate(out, g);
}

SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph g, CUgraphNode *errNode, char *log, size_t logSize)
{
    return cuGraphInstantiate_v2(out, g, errNode, log, logSize);
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult r = graph_instantiate(out, g);
    if (p) {
        p->hErrNode_out = NULL;
        p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    }
    return r;
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return instantiate_params(out, g, p);
}

SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return instantiate_params(out, g, p);
}

CUresult graph_exec_destroy(CUgraphExec hExec)
{
    struct sim_gexec *x = (struct sim_gexec *)hExec;
    if (!x || x->magic != MAGIC_GEXEC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    for (size_t i = 0; i < x->n; i++)
        free(x->dep_idx[i]);
    free(x->dep_idx);
    free(x->nodes);
    x->magic = 0;
    free(x);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hExec) { return graph_exec_destroy(hExec); }

static CUresult graph_launch_body(CUgraphExec hExec, CUstream h, int ptsz)
{
    struct sim_gexec *x = (struct sim_gexec *)hExec;
    if (!x || x->magic != MAGIC_GEXEC)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_ensure_init();
    sim_take_launch_info(); /* nodes are "graph"; whatever was set applies to nothing */
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = tl_resolve(h, ptsz);
    if (!s || s->cap) {
        pthread_mutex_unlock(&sim_lock);
        return s ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_ERROR_INVALID_HANDLE;
    }
    simtime_t base = tl_ready(s, sim_now() + cost_latency()), last = base;
    simtime_t *ends = calloc(x->n + 1, sizeof *ends);
    if (!ends)
        abort();
    for (size_t i = 0; i < x->n; i++) {
        struct sim_node *n = &x->nodes[i];
        simtime_t start = base;
        for (size_t d = 0; d < n->ndeps; d++)
            if (ends[x->dep_idx[i][d]] > start)
                start = ends[x->dep_idx[i][d]];
        struct sim_op op = {.stream = s, .handle = h, .via = SIM_VIA_GRAPH, .graph_node = n->id,
                            .graph_exec = x->id};
        simtime_t dur = 0, stall = 0;
        switch (n->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
            op.kind = 0;
            op.name = n->func->name;
            memcpy(op.grid, n->grid, sizeof op.grid);
            memcpy(op.block, n->block, sizeof op.block);
            op.flops = n->info.flops;
            op.bytes = n->info.bytes;
            dur = cost_kernel(n->func, n->grid, &n->info, &stall, &op.faulted);
            writes_apply(n->writes, n->nwrites);
            break;
        case CU_GRAPH_NODE_TYPE_MEMCPY:
            op.kind = 1;
            op.name = "memcpy";
            op.bytes = (double)n->bytes;
            op.dir = n->dir;
            op.pinned = n->pinned;
            mem_do_copy(n->dst, n->src, n->bytes);
            dur = cost_copy(n->bytes, n->dir, n->pinned);
            break;
        case CU_GRAPH_NODE_TYPE_MEMSET:
            op.kind = 2;
            op.name = "memset";
            op.bytes = (double)n->bytes;
            mem_do_set(n->dst, n->value, n->elemsize, n->bytes / (n->elemsize ? n->elemsize : 1));
            dur = cost_memset(n->bytes);
            break;
        default: /* empty node: a pure dependency point */
            ends[i] = start;
            continue;
        }
        op.start = start + stall;
        op.end = op.start + dur;
        ends[i] = op.end;
        if (op.end > last)
            last = op.end;
        tlog_write(&op);
    }
    free(ends);
    tl_commit(s, last);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec x, CUstream h, int ptsz)
{
    const char *api = ptsz ? "cuGraphLaunch_ptsz" : "cuGraphLaunch";
    sim_api(0, api);
    CUresult r = graph_launch_body(x, h, ptsz);
    sim_api(1, api);
    return r;
}

SIM_EXPORT CUresult simgpuNodeId(CUgraphNode n, unsigned long long *id)
{
    struct sim_node *p = node_of(n);
    if (!p || !id)
        return CUDA_ERROR_INVALID_HANDLE;
    *id = p->id;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec x, CUstream h) { return graph_launch(x, h, 0); }
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream h) { return graph_launch(x, h, 1); }
