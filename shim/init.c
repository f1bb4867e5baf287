/* Process-level state of the shim: lazy start at the first CUDA call, exit, fork, and the public
 * step markers.
 *
 * The constructor does nothing costly: every child of a traced server inherits LD_PRELOAD
 * (compilers, shells, nvidia-smi), and those must pay nothing and write nothing. Capture starts
 * at the first hooked CUDA call that wants to record something. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "cupti.h"
#include "graph.h"
#include "stacks.h"
#include "ring.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

_Atomic int tkp_state;          /* 0 not started, 1 capturing, 2 starting, -1 off */
_Atomic int tkp_captures_active;
static int atexit_registered;
static pid_t started_pid;

void *tkp_resolve_real_dlsym(void);

__attribute__((constructor)) static void tkp_on_load(void)
{
    tkp_resolve_real_dlsym(); /* so dlsym.S's fast path is ready before any library asks */
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
    tkp_cupti_after_fork();
    tkp_stacks_after_fork();
    atomic_store(&tkp_state, 0);
}

static int start_slow(void);

/* Starting runs inside the program's first CUDA call: files, a thread, maybe a directory. None of
 * that may leak into the errno the program sees. */
int tkp_start_slow(void)
{
    int saved = errno;
    int rc = start_slow();
    errno = saved;
    return rc;
}

static int start_slow(void)
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
    tkp_config_load();
    if (tkp_cfg.disabled) {
        atomic_store(&tkp_state, -1);
        return 0;
    }
    tkp_clock_init();
    started_pid = getpid();
    tkp_stacks_start(); /* TOKPROF_STACKS: the unwinder is loaded here, never on a launch */
    if (tkp_writer_start()) {
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
    atomic_store(&tkp_state, 1);
    return 1;
}

/* ---- public markers (include/tokprof/tokprof.h) --------------------------------------------- */

static void marker(int kind)
{
    if (!tkp_active()) return;
    struct tkp_ring *r = tkp_ring_self();
    if (!r) return;
    uint64_t ts = tkp_stamp();
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (e) {
        e->type = TKP_REC_MARKER;
        e->sub = (uint8_t)kind;
        e->step = tkp_step_current(r);
        e->ts = ts;
        e->a = 0;
        tkp_ring_commit(r);
    }
    if (tkp_cfg.step_mode == TKP_STEPMODE_MARKER) tkp_step_on_marker(r, kind, ts);
}

TKP_EXPORT void tokprof_step_begin(void)
{
    marker(TKP_MARK_STEP_BEGIN);
}

TKP_EXPORT void tokprof_step_end(void)
{
    marker(TKP_MARK_STEP_END);
}
