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
    uint32_t entry_point; /* >0 inside cudaGetDriverEntryPoint*: driver pointers for the program */
    uint32_t ringless;    /* refused a ring: record/ring.c's count of freed rings then, plus 1 */
};
extern __thread struct tkp_tls tkp_tls __attribute__((tls_model("initial-exec")));

/* The launch gate (issue 32): the capture's state, the number of capturing streams and the
 * settings that take launches off the fast path, in one 64-bit word, so that the launch fast path
 * asks "capturing, no capture in progress, plain settings" with one compare (tkp_gate_open). Each
 * part is its own atomic, written as before; only the fast path reads the word whole.
 *   state     0 not started, 1 capturing, 2 starting, -1 off (disabled or failed)
 *   captures  streams capturing a graph now: while non-zero, launches on a capturing stream are
 *             topology, not executions
 *   slow_cfg  TKP_GATE_* bits, set at capture start before state becomes 1 */
union tkp_gate {
    uint64_t word;
    struct {
        _Atomic int state;
        _Atomic int16_t captures;
        _Atomic uint16_t slow_cfg;
    } f;
};
_Static_assert(sizeof(union tkp_gate) == 8, "the gate is one word");
extern union tkp_gate tkp_gate;
#define tkp_state (tkp_gate.f.state)
#define tkp_captures_active (tkp_gate.f.captures)
enum {
    TKP_GATE_CLOCK = 1,  /* stamps from clock_gettime (no TSC) */
    TKP_GATE_KSTEP = 2,  /* TOKPROF_STEP=kernel:RE: each launch asks whether it begins a step */
    TKP_GATE_STACKS = 4, /* TOKPROF_STACKS: launches may sample a stack */
};
/* 1 when a launch may take the fast path as far as process-wide state goes: capturing, no stream
 * capturing a graph, no TKP_GATE_* setting. The word is 1 exactly then (little-endian x86-64:
 * state is its low half). hooks_rt.c's launch exports read it in assembly. */
static inline int tkp_gate_open(void)
{
    return __atomic_load_n(&tkp_gate.word, __ATOMIC_ACQUIRE) == 1;
}

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
