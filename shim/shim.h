/* Internal declarations shared by the shim's files. Nothing here is exported: the only exported
 * symbols are the interposed entry points, marked TKP_EXPORT (see exports.txt). */
#ifndef TKP_SHIM_H
#define TKP_SHIM_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#define TKP_EXPORT __attribute__((visibility("default")))
#define TKP_LIKELY(x) __builtin_expect(!!(x), 1)
#define TKP_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The dlsym interposer's path (dlsym.S -> tkp_dlsym_hook -> tkp_real_dlsym): it can run before
 * any constructor, the ASan runtime's included (its interceptors are set up with dlsym), when
 * there is no shadow memory yet. Not instrumented by ASan in the sanitizer build; no effect
 * otherwise. */
#define TKP_EARLY __attribute__((no_sanitize_address))

/* ---- clock ------------------------------------------------------------------------------- */
/* CLOCK_MONOTONIC through the vDSO: no syscall. */
static inline uint64_t tkp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- record timestamps (clock.c) --------------------------------------------------------- */
/* Records carry stamps: raw TSC ticks where the kernel trusts the TSC, else CLOCK_MONOTONIC ns.
 * The writer turns them into ns (tkp_stamp_ns); everything in a capture is ns. */
extern int tkp_clock_tsc;
static inline uint64_t tkp_stamp(void)
{
    if (TKP_LIKELY(tkp_clock_tsc)) return __builtin_ia32_rdtsc();
    return tkp_now_ns();
}
void tkp_clock_init(void);            /* at capture start, before any record */
void tkp_clock_anchor(void);          /* writer: a new (tsc, ns) anchor, once per cycle */
uint64_t tkp_stamp_ns(uint64_t stamp); /* writer: a stamp as CLOCK_MONOTONIC ns */
uint64_t tkp_stamp_dur_ns(uint64_t ticks); /* writer: a difference of stamps as ns */

/* ---- logging (log.c) --------------------------------------------------------------------- */
enum tkp_log_level { TKP_LOG_QUIET = 0, TKP_LOG_WARN = 1, TKP_LOG_DEBUG = 2 };
extern int tkp_log_level;
/* Formats into a stack buffer and write(2)s one line to stderr, prefixed "tokprof: ". Never
 * allocates; silent below the configured level. */
void tkp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define tkp_warn(...) tkp_log(TKP_LOG_WARN, __VA_ARGS__)
#define tkp_debug(...) tkp_log(TKP_LOG_DEBUG, __VA_ARGS__)

/* ---- configuration (config.c) ------------------------------------------------------------ */
enum tkp_step_mode {
    TKP_STEPMODE_AUTO, TKP_STEPMODE_SYNC, TKP_STEPMODE_GRAPH, TKP_STEPMODE_NVTX,
    TKP_STEPMODE_KERNEL, TKP_STEPMODE_MARKER,
};
struct tkp_config {
    int disabled;
    char out_dir[512];
    int step_mode;
    char step_regex[256]; /* nvtx:RE / kernel:RE */
    unsigned buffer_mb;   /* per-thread ring budget, all threads together */
    unsigned ring_kb;     /* one thread's ring */
    unsigned flush_ms;
    uint64_t step_copy_max; /* auto: largest DtoH copy that can end a step */
};
extern struct tkp_config tkp_cfg;
/* Reads TOKPROF_* once; a bad value gets one warning line and the default. */
void tkp_config_load(void);
/* 1 in a secure-execution process (AT_SECURE: setuid, setgid, file capabilities): the shim then
 * reads no variable and records nothing (config.c says why). */
int tkp_secure_exec(void);
/* getenv for TOKPROF_* variables: secure_getenv(3), NULL in a secure-execution process. */
const char *tkp_env(const char *name);

/* ---- per-thread rings (ring.c) ------------------------------------------------------------ */
/* One fixed-size event. Field use per type is in ring.c's comment. */
struct tkp_ev {
    uint8_t type;   /* enum tkp_rec */
    uint8_t sub;    /* via / copy kind / sync kind / nvtx kind / step kind */
    uint16_t flags; /* LAUNCH: key kind; COPY: dir | flags<<8 */
    uint32_t step;
    uint64_t ts;
    uint64_t a, b;
    uint32_t u[8];
};
_Static_assert(sizeof(struct tkp_ev) == 64, "ring events are one cache line");

struct tkp_ring; /* per thread; ring.c */

/* What the shim knows about the calling thread; initial-exec TLS kept tiny (see notes: a shim
 * reached through NVTX_INJECTION64_PATH is dlopen'ed and must fit the static TLS surplus). */
struct tkp_tls {
    struct tkp_ring *ring;
    uint32_t depth; /* reentrancy: >0 inside one of our hooks */
    uint32_t lib_depth; /* >0 inside a cuBLAS/cuBLASLt/cuDNN call (hooks_lib.c) */
    uint32_t lib_call;  /* id of the library call in progress, 0 none: LAUNCH records carry it */
    uint32_t lib_seq;   /* last library call id of this thread */
    uint32_t stk_left;  /* TOKPROF_STACKS=sample:N: launches until the next sampled one */
};
extern __thread struct tkp_tls tkp_tls __attribute__((tls_model("initial-exec")));

/* 0 until started, 1 capturing, -1 off (disabled or failed). */
extern _Atomic int tkp_state;
/* Starts capture at the first CUDA call of the process (or the fork child). Cheap after the
 * first call. Returns 1 when capturing. */
int tkp_start_slow(void);
static inline int tkp_active(void)
{
    int s = atomic_load_explicit(&tkp_state, memory_order_acquire);
    if (TKP_LIKELY(s == 1)) return 1;
    if (s < 0) return 0;
    return tkp_start_slow();
}

/* The calling thread's ring, registering it on first use (one mmap per thread lifetime).
 * NULL when no ring can be had; the caller counts a drop. */
struct tkp_ring *tkp_ring_get_slow(void);
static inline struct tkp_ring *tkp_ring_self(void)
{
    struct tkp_ring *r = tkp_tls.ring;
    return TKP_LIKELY(r != NULL) ? r : tkp_ring_get_slow();
}
/* tkp_ring_reserve / tkp_ring_commit (inline, ring.h): the next slot, or NULL when full. */
void tkp_ring_count_drop(struct tkp_ring *r);
/* Drops counted for threads that could not get a ring at all. */
extern _Atomic uint64_t tkp_ringless_drops;

/* Consumer side, writer thread only. */
typedef void (*tkp_drain_fn)(void *ctx, const struct tkp_ev *ev, uint32_t thread_idx,
                             int os_tid);
/* Drains every ring; returns the number of events. */
size_t tkp_rings_drain(tkp_drain_fn fn, void *ctx);
/* thread index -> (os tid, dropped so far); returns the number of rings ever registered. */
uint32_t tkp_rings_count(void);
int tkp_ring_info(uint32_t idx, int *os_tid, uint64_t *dropped);
/* Fork child: forget every ring but the caller's, which is emptied. */
void tkp_rings_reset_after_fork(void);

/* ---- kernel symbols (symtab.c) ------------------------------------------------------------ */
enum tkp_key_kind { TKP_KEY_HOSTFUN = 0, TKP_KEY_KERNEL = 1, TKP_KEY_FUNCTION = 2 };
/* Registration (runs in constructors, before capture starts: static storage only). */
void tkp_sym_register(const void *host_fun, const char *device_name);
/* __cudaGetKernel: a kernel handle stands for a host stub. */
void tkp_sym_alias(const void *kernel, const void *host_fun);
/* Writer / slow paths: the kernel name behind a key, resolving through the driver when the
 * registration table does not know it. Returns a string valid for the process lifetime, or NULL. */
const char *tkp_sym_name(uint64_t key, int key_kind);

/* ---- step detection (step.c) -------------------------------------------------------------- */
/* Each hook reports what it saw; the detector tags records with the current segment. */
uint32_t tkp_step_on_copy(struct tkp_ring *r, uint64_t ts, int dir, uint64_t bytes, int async);
void tkp_step_on_copy_return(struct tkp_ring *r, uint64_t ts, int marked);
uint32_t tkp_step_current(struct tkp_ring *r);
void tkp_step_on_event_record(struct tkp_ring *r, uint64_t event);
void tkp_step_on_sync(struct tkp_ring *r, int kind, uint64_t handle, uint64_t end_ts);
void tkp_step_on_marker(struct tkp_ring *r, int kind, uint64_t ts);
void tkp_step_on_nvtx(struct tkp_ring *r, int kind, const char *name, uint64_t ts);
int tkp_step_launch_boundary(struct tkp_ring *r, uint64_t key, int key_kind, uint64_t ts);
void tkp_step_flush_thread(struct tkp_ring *r, uint64_t ts);

/* ---- capture state ------------------------------------------------------------------------ */
/* Number of streams currently capturing a graph: while non-zero, launches on a capturing stream
 * are topology, not executions. */
extern _Atomic int tkp_captures_active;

/* ---- graphs (graph.c) ---------------------------------------------------------------------- */
/* Records the topology of an instantiated graph (not on the launch path). */
void tkp_graph_instantiated(void *exec, void *graph);

/* ---- writer (writer.c) --------------------------------------------------------------------- */
int tkp_writer_start(void);
void tkp_writer_stop(void);         /* final drain and close */
void tkp_writer_after_fork(void);   /* child: forget the parent's file and thread */

/* ---- real functions (real.c) ------------------------------------------------------------- */
void *tkp_real_dlsym(void *handle, const char *name);
/* The next definition of a runtime symbol for a given major (12 or 13), cached by the caller. */
void *tkp_real_cudart(const char *name, const char *version);
/* The definition of name@node in the library whose soname is node ("libcublas.so.13"), found
 * through RTLD_NEXT or a RTLD_NOLOAD handle, else unversioned; NULL when absent. */
void *tkp_real_lib(const char *name, const char *node);
/* The real libcuda's export (dlopen'ed RTLD_NOLOAD first, then loaded), or NULL. */
void *tkp_real_driver(const char *name);

#endif
