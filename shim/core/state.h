/* Process and thread state every floor reads (state.c): is the capture on, the calling thread's
 * small TLS, how many streams capture a graph. Starting a capture wires every floor together, so
 * it is done above them (shim/init.c), which hands its start function down here once. */
#ifndef TKP_CORE_STATE_H
#define TKP_CORE_STATE_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/base.h"

struct tkp_ring; /* record/ring_types.h */

/* What the shim knows about the calling thread; initial-exec TLS kept tiny (see notes: a shim
 * reached through NVTX_INJECTION64_PATH is dlopen'ed and must fit the static TLS surplus). */
struct tkp_tls {
    struct tkp_ring *ring;
    uint32_t depth;     /* reentrancy: >0 inside one of our hooks */
    uint32_t lib_depth; /* >0 inside a cuBLAS/cuBLASLt/cuDNN call (hooks/hooks_lib.c) */
    uint32_t lib_call;  /* id of the library call in progress, 0 none: LAUNCH records carry it */
    uint32_t lib_seq;   /* last library call id of this thread */
    uint32_t stk_left;  /* TOKPROF_STACKS=sample:N: launches until the next sampled one */
};
extern __thread struct tkp_tls tkp_tls __attribute__((tls_model("initial-exec")));

/* 0 not started, 1 capturing, 2 starting, -1 off (disabled or failed). */
extern _Atomic int tkp_state;
/* Number of streams currently capturing a graph: while non-zero, launches on a capturing stream
 * are topology, not executions. */
extern _Atomic int tkp_captures_active;

/* The capture's start (shim/init.c hands it down from its constructor): returns 1 when
 * capturing. */
typedef int (*tkp_start_fn)(void);
void tkp_state_set_start(tkp_start_fn fn);
/* Starts capture at the first CUDA call of the process (or the fork child); errno is kept.
 * Returns 1 when capturing. A call before the shim's constructor ran (another library's
 * constructor) is not recorded and starts nothing. */
int tkp_start_slow(void);
static inline int tkp_active(void)
{
    int s = atomic_load_explicit(&tkp_state, memory_order_acquire);
    if (TKP_LIKELY(s == 1)) return 1;
    if (s < 0) return 0;
    return tkp_start_slow();
}

#endif
