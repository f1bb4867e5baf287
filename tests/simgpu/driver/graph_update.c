/* simgpu cuGraphExecUpdate: new parameters for an instantiated graph of the same topology.
 *
 * llama.cpp re-captures its decode graph when a tensor's shape or address changes and then
 * updates the exec it already has; when the update is refused
 * (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) it destroys the exec and instantiates again. Like CUDA,
 * the nodes of the new graph are paired with the exec's in order (here: the stable topological
 * order instantiation uses, which follows creation order, i.e. capture order). The update is
 * refused when the node count, a node's type or a node's dependencies differ; otherwise every
 * exec node takes its partner's parameters (kernel, grid, block, shared memory, launch info;
 * copy and memset arguments) and keeps its id, so the truth log's graph_node of a replay is the
 * id of the node the exec was first instantiated from (as an exec node keeps its identity on a
 * GPU). SIMGPU_GRAPH_UPDATE=fail refuses every update (CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED),
 * so a test can drive a client's re-instantiation path. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int update_refused(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("SIMGPU_GRAPH_UPDATE");
        mode = e && !strcmp(e, "fail");
    }
    return mode;
}

static int same_deps(const struct sim_gexec *a, const struct sim_gexec *b, size_t i)
{
    if (a->nodes[i].ndeps != b->nodes[i].ndeps)
        return 0;
    for (size_t d = 0; d < a->nodes[i].ndeps; d++)
        if (a->dep_idx[i][d] != b->dep_idx[i][d])
            return 0;
    return 1;
}

/* Compares x with y (a fresh exec of the new graph) under sim_lock; returns the update result. */
static CUgraphExecUpdateResult compare(const struct sim_gexec *x, const struct sim_gexec *y,
                                       size_t *bad)
{
    *bad = 0;
    if (x->n != y->n)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < x->n; i++) {
        *bad = i;
        if (x->nodes[i].type != y->nodes[i].type)
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (!same_deps(x, y, i))
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    }
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static CUresult exec_update(CUgraphExec hExec, CUgraph hGraph, CUgraphExecUpdateResult *result)
{
    struct sim_gexec *x = (struct sim_gexec *)hExec;
    *result = CU_GRAPH_EXEC_UPDATE_ERROR;
    if (!x || x->magic != MAGIC_GEXEC)
        return CUDA_ERROR_INVALID_VALUE;
    if (update_refused()) {
        *result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    CUgraphExec fresh;
    CUresult r = graph_instantiate(&fresh, hGraph); /* validates hGraph, orders it */
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gexec *y = (struct sim_gexec *)fresh;
    size_t bad;
    pthread_mutex_lock(&sim_lock);
    *result = compare(x, y, &bad);
    if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS)
        for (size_t i = 0; i < x->n; i++) {
            uint64_t id = x->nodes[i].id;
            x->nodes[i] = y->nodes[i];
            x->nodes[i].id = id;
        }
    pthread_mutex_unlock(&sim_lock);
    graph_exec_destroy(fresh);
    return *result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

SIM_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *info)
{
    if (!info)
        return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof *info);
    return exec_update(hExec, hGraph, &info->result);
}

SIM_EXPORT CUresult cuGraphExecUpdate(CUgraphExec hExec, CUgraph hGraph, CUgraphNode *errNode,
                                      CUgraphExecUpdateResult *result)
{
    if (!errNode || !result)
        return CUDA_ERROR_INVALID_VALUE;
    *errNode = NULL;
    return exec_update(hExec, hGraph, result);
}
