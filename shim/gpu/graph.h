/* Graph topologies (graph.c): recorded at instantiation and at cudaGraphExecUpdate on
 * application threads, read by the writer. An exec has versions: each instantiation or update of
 * one exec handle is a new graph (its own id and node ids) that holds from its stamp on, so a
 * launch is expanded into the topology the exec had when it was launched, however late the
 * writer encodes it. */
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
    uint64_t since;    /* tkp_stamp() when this version became the exec's */
    uint64_t *cupti;   /* CUPTI node id per node (0 without CUPTI) */
};

/* Records the topology of an instantiated graph (not on the launch path). */
void tkp_graph_instantiated(void *exec, void *graph);
/* Records exec's new topology after a successful cudaGraphExecUpdate from graph: a new version.
 * The exec's nodes keep their identity (CUPTI may name a replayed node by the node the exec was
 * first instantiated from, or by its partner in graph): both map to the new version from now. */
void tkp_graph_updated(void *exec, void *graph);
/* Calls fn, under the table lock, with the version of exec current at `stamp` (a launch's
 * tkp_stamp()); returns -1 when exec is unknown. */
int tkp_graph_with(uint64_t exec, uint64_t stamp, void (*fn)(void *ctx, const struct tkp_graph *g),
                   void *ctx);
void tkp_graph_reset_after_fork(void);

#endif
