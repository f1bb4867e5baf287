/* Graph topologies (graph.c): recorded at instantiation on application threads, read by the
 * writer. */
#ifndef TKP_GPU_GRAPH_H
#define TKP_GPU_GRAPH_H

#include <stdint.h>

struct tkp_gnode {
    int type;          /* enum tkp_graph_node_type */
    int key_kind;      /* enum tkp_key_kind, for kernel nodes */
    uint64_t key;      /* CUfunction or CUkernel */
    unsigned grid[3], block[3];
    uint32_t ndeps;
    uint32_t *deps;    /* indices into the graph's node array */
};

struct tkp_graph {
    uint64_t exec;
    uint32_t id;       /* capture-local */
    uint64_t node_base; /* node ids are node_base + index */
    uint32_t n;
    struct tkp_gnode *nodes;
};

/* Records the topology of an instantiated graph (not on the launch path). */
void tkp_graph_instantiated(void *exec, void *graph);
/* Calls fn with the topology of exec under the table lock; returns -1 when unknown. */
int tkp_graph_with(uint64_t exec, void (*fn)(void *ctx, const struct tkp_graph *g), void *ctx);
void tkp_graph_reset_after_fork(void);

#endif
