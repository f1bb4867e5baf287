/* The top floor: the only file that knows every folder. It wires them together (the calls that
 * go upward at run time are callbacks set here: the ring's thread hooks, the step detector's
 * segment hook, the capture's start function, the writer's sink), and owns the process-level
 * life of a capture: lazy start at the first CUDA call, exit, fork.
 *
 * The constructor does nothing costly: every child of a traced server inherits LD_PRELOAD
 * (compilers, shells, nvidia-smi), and those must pay nothing and write nothing. Capture starts
 * at the first hooked CUDA call that wants to record something. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/real.h"
#include "core/state.h"
#include "gpu/activity.h"
#include "gpu/gpuenc.h"
#include "gpu/graph.h"
#include "record/ring.h"
#include "record/stacks.h"
#include "record/step.h"
#include "sink/flight.h"
#include "sink/stream.h"
#include "tokprof/format.h"
#include "writer/writer.h"

static int atexit_registered;
#define GPU_RING_SCALE 4

static pid_t started_pid;

static int start(void);

__attribute__((constructor)) static void tkp_on_load(void)
{
    tkp_resolve_real_dlsym(); /* so dlsym.S's fast path is ready before any library asks */
    tkp_config_note_program(); /* before the program can rename itself (setproctitle) */
    /* What reaches upward at run time, handed down once. */
    tkp_rings_set_hooks(tkp_step_thread_init, tkp_step_flush_thread);
    tkp_step_set_segment_hook(tkp_cupti_on_segment);
    tkp_state_set_start(start);
}

static void on_exit_flush(void)
{
    if (atomic_load(&tkp_state) != 1 || getpid() != started_pid) return;
    struct tkp_ring *r = tkp_tls.ring;
    if (r) tkp_step_flush_thread(r, tkp_stamp());
    atomic_store(&tkp_state, -1); /* late CUDA calls from other atexit handlers: not recorded */
    tkp_cupti_stop();             /* CUPTI's last buffers, before the writer's final drain */
    tkp_writer_stop();
}

static void after_fork_child(void)
{
    /* A fork child (vLLM's EngineCore, multiprocessing workers) gets its own capture, started
     * lazily at its first CUDA call like any process. */
    tkp_rings_reset_after_fork();
    tkp_graph_reset_after_fork();
    tkp_writer_after_fork();
    tkp_stream_after_fork();
    tkp_flight_after_fork();
    tkp_cupti_after_fork();
    tkp_gpuenc_after_fork();
    tkp_stacks_after_fork();
    atomic_store(&tkp_state, 0);
}

/* The program's first CUDA call (through tkp_start_slow, which keeps errno): files, a thread,
 * maybe a directory. Returns 1 when capturing. */
static int start(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&tkp_state, &expect, 2)) {
        /* Another thread is starting the capture (once per process: config, one file, one
         * thread). Wait for it rather than lose this record silently; if it takes implausibly
         * long (a hung filesystem), count the record as dropped and go on. */
        for (int i = 0; i < 200000 && atomic_load(&tkp_state) == 2; i++) sched_yield();
        if (atomic_load(&tkp_state) == 1) return 1;
        if (atomic_load(&tkp_state) == 2) atomic_fetch_add(&tkp_ringless_drops, 1);
        return 0;
    }
    /* A setuid / setgid / file-capability process: its environment is not to be trusted, and
     * the shim is a guest with its privileges. Before any variable is read (config.c). */
    if (tkp_secure_exec()) {
        atomic_store(&tkp_state, -1);
        return 0;
    }
    tkp_config_load(); /* every TOKPROF_* variable, TOKPROF_STEP's regex compiled: before any
                        * hook records (the others wait for tkp_state) */
    tkp_stacks_config(); /* the settings the floors keep themselves, before the writer runs */
    tkp_cupti_config();
    if (tkp_cfg.disabled) {
        atomic_store(&tkp_state, -1);
        return 0;
    }
    tkp_clock_init();
    started_pid = getpid();
    tkp_stacks_start(); /* TOKPROF_STACKS: the unwinder is loaded here, never on a launch */
    if (tkp_writer_start(tkp_prod.flight ? &tkp_flight_sink : &tkp_stream_sink)) {
        atomic_store(&tkp_state, -1);
        return 0;
    }
    if (!atexit_registered) {
        atexit_registered = 1;
        /* Registered now, after the CUDA runtime registered its own teardown at load: handlers
         * run in reverse, so ours flushes before CUDA goes away. */
        atexit(on_exit_flush);
        pthread_atfork(NULL, NULL, after_fork_child);
    }
    tkp_cupti_start(); /* tier 2; fails soft to tier 1 */
    /* With GPU time a launch fills two ring slots (its record and CUPTI's correlation) and costs
     * the writer a GPU record besides: rings four times the size ride out the same writer
     * latency (docs/BENCH.md, "Writer"). */
    struct tkp_cupti_status gst;
    tkp_cupti_status(&gst);
    tkp_rings_set_scale(gst.status == TKP_GPU_ON ? GPU_RING_SCALE : 1);
    /* the settings a launch's fast path cannot serve (hooks.h): such launches take the full path */
    atomic_store(&tkp_gate.f.slow_cfg,
                 (uint16_t)((tkp_clock_tsc ? 0 : TKP_GATE_CLOCK) |
                            (tkp_cfg.step_mode == TKP_STEPMODE_KERNEL ? TKP_GATE_KSTEP : 0) |
                            (tkp_stacks_mode != TKP_STACKS_OFF ? TKP_GATE_STACKS : 0)));
    atomic_store(&tkp_state, 1);
    return 1;
}
