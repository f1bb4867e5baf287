/* simgpu driver: stream capture (incl. fork/join across streams), explicit graphs, replay
 * timing, and the topology queries a profiler uses on captured graphs. */
#include "unit_util.h"

static struct rec R[256];

static const char *node_kernel_name(CUgraphNode n)
{
    CUDA_KERNEL_NODE_PARAMS p;
    CK(cuGraphKernelNodeGetParams(n, &p));
    const char *name = NULL;
    CK(cuFuncGetName(&name, p.func));
    return name;
}

Test(graph, capture_and_replay)
{
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 4096));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    launch(kernel("embed_tokens"), 1, s);
    launch(kernel("rmsnorm"), 2, s);
    CK(cuMemsetD32Async(d, 7, 1024, s));
    launch(kernel("flash_attn"), 4, s);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    cr_assert_eq(((unsigned *)(uintptr_t)d)[0], 0, "captured work does not execute");

    size_t nn = 0;
    CK(cuGraphGetNodes(g, NULL, &nn));
    cr_assert_eq(nn, 4);
    CUgraphNode nodes[4];
    CK(cuGraphGetNodes(g, nodes, &nn));
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(nodes[2], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_MEMSET);
    cr_assert_str_eq(node_kernel_name(nodes[0]), "embed_tokens");
    cr_assert_str_eq(node_kernel_name(nodes[3]), "flash_attn");
    CUgraphNode dep[2];
    size_t nd = 2;
    CK(cuGraphNodeGetDependencies(nodes[3], dep, NULL, &nd));
    cr_assert_eq(nd, 1);
    cr_assert_eq(dep[0], nodes[2]);

    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    launch(kernel("gate"), 1, s);
    CK(cuGraphLaunch(x, s));
    CK(cuGraphLaunch(x, s));
    int n = read_log(R, 256);
    cr_assert_eq(n, 9, "only the gate and the replayed nodes are logged");
    long long dur[] = {1503, 1508, 1001 /* 1000 + 4096/4800 */, 6160};
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < 4; i++) {
            struct rec *r = &R[1 + rep * 4 + i];
            cr_assert_str_eq(r->via, "graph");
            cr_assert_eq(r->end - r->start, dur[i], "node %d", i);
            cr_assert_eq(r->start, R[rep * 4 + i].end, "chain: node starts at its predecessor's end");
            cr_assert_eq(r->node, R[1 + i].node, "stable node ids across replays");
            cr_assert_neq(r->node, 0);
            cr_assert_eq(r->exec, R[1].exec);
        }
    cr_assert_str_eq(R[3].kind, "memset");
    cr_assert_eq(((unsigned *)(uintptr_t)d)[1023], 7, "replay executes the memset");
    cr_assert_neq(R[1].node, R[2].node);
}

Test(graph, capture_fork_join)
{
    unit_setup(NULL);
    CUstream s1, s2;
    CUevent fork, join;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(kernel("embed"), 1, s1);              /* A */
    CK(cuEventRecord(fork, s1));
    CK(cuStreamWaitEvent(s2, fork, 0));          /* s2 joins the capture */
    launch(kernel("rmsnorm"), 100, s1);          /* B: after A */
    launch(kernel("rope"), 1, s2);               /* C: after A, parallel to B */
    CK(cuEventRecord(join, s2));
    CK(cuStreamWaitEvent(s1, join, 0));
    launch(kernel("argmax"), 1, s1);             /* D: after B and C */
    CUgraph g;
    CK(cuStreamEndCapture(s1, &g));
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    size_t nn = 4;
    CUgraphNode nodes[4];
    CK(cuGraphGetNodes(g, nodes, &nn));
    cr_assert_eq(nn, 4);
    size_t nd = 0;
    CK(cuGraphNodeGetDependencies(nodes[3], NULL, NULL, &nd));
    cr_assert_eq(nd, 2);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    launch(kernel("gate"), 1, s1);
    CK(cuGraphLaunch(x, s1));
    int n = read_log(R, 256);
    cr_assert_eq(n, 5);
    cr_assert_eq(R[1].start, R[0].end);
    cr_assert_eq(R[2].start, R[1].end);
    cr_assert_eq(R[3].start, R[1].end, "B and C run concurrently");
    cr_assert_eq(R[4].start, R[2].end > R[3].end ? R[2].end : R[3].end);
    cr_assert_eq(R[4].end - R[4].start, 2510);
}

Test(graph, explicit_graph)
{
    unit_setup(NULL);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 32;
    CUgraphNode a, b, c, dnode;
    p.func = kernel("embed");
    CK(cuGraphAddKernelNode(&a, g, NULL, 0, &p));
    p.func = kernel("rmsnorm");
    p.gridDimX = 50;
    CK(cuGraphAddKernelNode(&b, g, &a, 1, &p));
    p.func = kernel("gemm");
    p.gridDimX = 10;
    CK(cuGraphAddKernelNode(&c, g, &a, 1, &p));
    p.func = kernel("argmax");
    p.gridDimX = 1;
    CK(cuGraphAddKernelNode(&dnode, g, NULL, 0, &p));
    CUgraphNode from[2] = {b, c}, to[2] = {dnode, dnode};
    CK(cuGraphAddDependencies(g, from, to, NULL, 2));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    launch(kernel("gate"), 1, s);
    CK(cuGraphLaunch(x, s));
    launch(kernel("rope"), 1, s); /* the stream tail is the last node's end */
    int n = read_log(R, 256);
    cr_assert_eq(n, 6);
    cr_assert_str_eq(R[1].name, "embed");
    cr_assert_str_eq(R[4].name, "argmax");
    cr_assert_eq(R[1].start, R[0].end);
    cr_assert_eq(R[2].start, R[1].end);
    cr_assert_eq(R[3].start, R[1].end);
    cr_assert_eq(R[3].end - R[3].start, 4250);
    cr_assert_eq(R[4].start, R[3].end); /* gemm (4250) ends after rmsnorm (1700) */
    cr_assert_eq(R[5].start, R[4].end);
    cr_assert_str_eq(R[5].via, "driver");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

Test(graph, capture_rejects_sync_calls)
{
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cuuint64_t id = 0;
    const CUgraphNode *deps;
    size_t nd = 9;
    CUgraph cg;
    CK(cuStreamGetCaptureInfo(s, NULL, &id, &cg, &deps, NULL, &nd));
    cr_assert_neq(id, 0);
    cr_assert_eq(nd, 0);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    cr_assert_eq(g, cg);
}

/* A capture of A(gx) -> B(gy) -> memset on s (llama.cpp's decode graph, in miniature). */
static CUgraph capture_chain(CUstream s, const char *a, unsigned gx, const char *b, unsigned gy,
                             CUdeviceptr d, int extra)
{
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch(kernel(a), gx, s);
    launch(kernel(b), gy, s);
    CK(cuMemsetD32Async(d, 5, 16, s));
    if (extra)
        launch(kernel("argmax"), 1, s);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    return g;
}

/* unit_setup, then a non-blocking stream and a 4 KiB buffer for capture_chain */
static CUstream chain_setup(CUdeviceptr *d)
{
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(d, 4096));
    return s;
}

Test(graph, exec_update)
{
    CUdeviceptr d;
    CUstream s = chain_setup(&d);
    CUgraph g1 = capture_chain(s, "rmsnorm", 2, "mul_mat_vec_q", 8, d, 0);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g1, 0));
    /* same topology, other kernels and grids: the exec takes them, its nodes keep their ids */
    CUgraph g2 = capture_chain(s, "rope", 3, "soft_max", 5, d, 0);
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate(x, g2, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    /* another topology: refused, the exec unchanged */
    CUgraph g3 = capture_chain(s, "embed", 1, "embed", 1, d, 1);
    cr_assert_eq(cuGraphExecUpdate(x, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    launch(kernel("gate"), 1, s);
    CK(cuGraphLaunch(x, s));
    int n = read_log(R, 256);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(R[1].name, "rope");
    cr_assert_eq(R[1].grid[0], 3);
    cr_assert_str_eq(R[2].name, "soft_max");
    cr_assert_eq(R[2].grid[0], 5);
    cr_assert_str_eq(R[3].kind, "memset");
    CUgraphNode nodes[3];
    size_t nn = 3;
    CK(cuGraphGetNodes(g1, nodes, &nn));
    CUresult (*node_id)(CUgraphNode, unsigned long long *);
    CK(cuGetProcAddress("simgpuNodeId", (void **)&node_id, 0, 0, NULL));
    for (int i = 0; i < 3; i++) {
        unsigned long long id;
        CK(node_id(nodes[i], &id));
        cr_assert_eq((long long)id, R[1 + i].node, "node %d keeps the id it was instantiated from", i);
    }
    /* the CUDA 11 form, as cuGetProcAddress answers a client built against CUDA 11 */
    CUresult (*v1)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
    CK(cuGetProcAddress("cuGraphExecUpdate", (void **)&v1, 11080, 0, NULL));
    CUgraphNode err;
    CUgraphExecUpdateResult res;
    cr_assert_eq(v1(x, g3, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(res, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
}

Test(graph, exec_update_refused_by_knob)
{
    setenv("SIMGPU_GRAPH_UPDATE", "fail", 1);
    CUdeviceptr d;
    CUstream s = chain_setup(&d);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, capture_chain(s, "rmsnorm", 2, "rope", 8, d, 0), 0));
    CUgraphExecUpdateResultInfo info;
    cr_assert_eq(cuGraphExecUpdate(x, capture_chain(s, "rmsnorm", 2, "rope", 9, d, 0), &info),
                 CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    launch(kernel("gate"), 1, s);
    CK(cuGraphLaunch(x, s));
    int n = read_log(R, 256);
    cr_assert_eq(n, 4);
    cr_assert_eq(R[2].grid[0], 8, "a refused update leaves the exec as it was");
}
