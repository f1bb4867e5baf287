/* Tier 2: GPU time, the side that runs on application threads and on CUPTI's. CUPTI activity
 * records (exact start/end of every kernel, copy and memset, graph nodes and library-internal
 * kernels included), joined to the host records of tier 1.
 *
 * libcupti is dlopen'ed at capture start, never linked: without it (or when it is taken by nsys
 * or torch.profiler, or when there is no GPU) the capture goes on with tier 1 alone, after one
 * warning line, and a GPU_INFO record says why GPU time is missing.
 *
 * The join. CUPTI gives every API call a correlation id, shared by the GPU records it caused
 * (all nodes of a graph launch share the graph launch's). We enable CUPTI *callbacks* for the
 * launch, graph-launch, copy and memset API ids only (runtime and driver domains). Our own hooks
 * have already recorded the host record and counted it in the thread's segment when CUPTI calls
 * back from inside the real call, so the callback knows the record's (thread, step, ordinal) by
 * reading the thread's step state, and pushes one ring event {correlation, join kind, step,
 * ordinal}. No CUPTI call is made per launch; the cost is CUPTI's own callback dispatch plus
 * one ring slot. The writer thread's side (gpuenc.c) turns those events into a correlation table
 * and encodes the GPU records; it reads this file's buffers, filter and node map through the
 * hand-over functions of activity.h, and nothing here calls it. Graph kernels carry CUPTI's
 * graphNodeId; graph.c registers cuptiGetGraphNodeId of every node at instantiation, which maps it
 * to our capture-local graph and node ids.
 *
 * Buffers CUPTI hands back are pushed on a lock-free list and walked by the writer thread, never
 * in CUPTI's thread. Their total is capped (TOKPROF_GPU_BUFFER_MB): past it the request callback
 * declines and CUPTI counts drops, which we record. */
#include "gpu/activity.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/grow.h"
#include "core/log.h"
#include "core/map.h"
#include "core/real.h"
#include "core/state.h"
#include "record/ring.h"
#include "record/step.h"
#include "tokprof/format.h"

/* Kernel records are read through the prefix common to Kernel5..Kernel10 (notes §2.1), so a
 * CUPTI 12 (Kernel9) or a later one works the same. */
_Static_assert(offsetof(CUpti_ActivityKernel10, start) == 16, "kernel start");
_Static_assert(offsetof(CUpti_ActivityKernel10, end) == 24, "kernel end");
_Static_assert(offsetof(CUpti_ActivityKernel10, deviceId) == 40, "kernel deviceId");
_Static_assert(offsetof(CUpti_ActivityKernel10, streamId) == 48, "kernel streamId");
_Static_assert(offsetof(CUpti_ActivityKernel10, gridX) == 52, "kernel gridX");
_Static_assert(offsetof(CUpti_ActivityKernel10, correlationId) == 92, "kernel correlationId");
_Static_assert(offsetof(CUpti_ActivityKernel10, name) == 104, "kernel name");
_Static_assert(offsetof(CUpti_ActivityKernel10, graphNodeId) == 144, "kernel graphNodeId");
_Static_assert(offsetof(CUpti_ActivityKernel10, graphId) == 156, "kernel graphId");

#define BUF_SIZE (256u << 10)
#define NODEMAP_MAX (1u << 20)
#define RANGES_MAX 256

enum gpu_mode {
    MODE_ALWAYS = TKP_GPUMODE_ALWAYS,
    MODE_WINDOW = TKP_GPUMODE_WINDOW,
    MODE_TRIGGER = TKP_GPUMODE_TRIGGER,
    MODE_OFF = TKP_GPUMODE_OFF
};

/* ---- CUPTI entry points (dlsym'ed) ---- */
static struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*register_ts)(CUpti_TimestampCallbackFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*flush_period)(uint32_t);
    CUptiResult (*node_id)(CUgraphNode, uint64_t *);
} api;

static struct {
    int mode;
    unsigned win_n, win_m, trigger_steps;
    uint64_t buffer_cap;
    /* The status (enum tkp_gpu_status), why it is not on (enum why) and CUPTI's result code, in
     * one word (say()): the writer thread reads them (tkp_cupti_status) while tkp_cupti_start,
     * which runs after the writer has started, or a hand-over sets them. */
    _Atomic uint64_t said;
    char mode_text[48]; /* mode as GPU_INFO says it (config) */
    int loaded; /* CUPTI loaded and subscribed in this process */
    void *lib;  /* its handle */
    CUpti_SubscriberHandle sub;
    _Atomic int yielded; /* handed over to another tool (tkp_cupti_yield) */
    _Atomic int active; /* records are being collected */
    _Atomic int kinds_on;
    _Atomic uint32_t main_thread; /* capture-local index of the stepping thread, or none */
    _Atomic uint32_t cur_seg;     /* its current segment */
    _Atomic unsigned armed;       /* trigger: steps to trace from the next boundary */
    uint32_t range_from[RANGES_MAX], range_to[RANGES_MAX];
    _Atomic uint32_t nranges;
    /* buffers */
    _Atomic uint64_t buf_bytes, buf_peak;
    struct gbuf *_Atomic done_list;
    _Atomic uint64_t cupti_dropped;
} gpu = {.main_thread = UINT32_MAX, .said = TKP_GPU_OFF, .mode_text = "always"};

/* Why GPU time is off or partial: GPU_INFO's reason (why_text). */
enum why {
    WHY_NONE,
    WHY_CONFIG_OFF,
    WHY_TAKEN,
    WHY_NO_CUPTI,
    WHY_NO_ACTIVITY_API,
    WHY_SUBSCRIBE,    /* with CUPTI's result code */
    WHY_ACTIVITY_API, /* with CUPTI's result code */
    WHY_ENABLE,
    WHY_HANDED_OVER,
    WHY_FORK
};

static void why_text(char *buf, size_t n, enum why why, int rc)
{
    static const char *const text[] = {
        [WHY_NONE] = "",
        [WHY_CONFIG_OFF] = "TOKPROF_GPU=off",
        [WHY_TAKEN] = "CUPTI is taken by another tool (nsys, torch.profiler, ...)",
        [WHY_NO_CUPTI] = "libcupti.so.13 not found",
        [WHY_NO_ACTIVITY_API] = "libcupti.so.13 lacks the activity API",
        [WHY_SUBSCRIBE] = "cuptiSubscribe failed",
        [WHY_ACTIVITY_API] = "CUPTI activity API failed",
        [WHY_ENABLE] = "cuptiActivityEnable failed",
        [WHY_HANDED_OVER] = "CUPTI handed over to another tool (torch.profiler, nsys, ...) that "
                            "asked for it mid-run",
        [WHY_FORK] = "fork child: CUPTI is not inherited",
    };
    if (why == WHY_SUBSCRIBE || why == WHY_ACTIVITY_API)
        snprintf(buf, n, "%s (%d)%s", text[why], rc,
                 rc == CUPTI_ERROR_UNKNOWN ? ": no GPU or no driver" : "");
    else
        snprintf(buf, n, "%s", text[why]);
}

/* Sets the status and its reason at once (release: tkp_cupti_status acquires). */
static void say(int status, enum why why, int rc)
{
    uint64_t w = (uint64_t)(uint8_t)status | (uint64_t)why << 8 | (uint64_t)(uint32_t)rc << 32;
    atomic_store_explicit(&gpu.said, w, memory_order_release);
}

static void mode_str(char *buf, size_t n);

/* A buffer handed to CUPTI; struct tkp_cupti_buf to the writer's side. */
struct gbuf {
    struct gbuf *next;
    size_t valid;
    uint8_t data[] __attribute__((aligned(8)));
};

/* ---- configuration ---- */

void tkp_cupti_config(void)
{
    /* TOKPROF_GPU, TOKPROF_GPU_TRIGGER_STEPS, TOKPROF_GPU_BUFFER_MB (core/config.c) */
    gpu.mode = tkp_cfg.gpu_mode;
    gpu.win_n = tkp_cfg.gpu_win_n;
    gpu.win_m = tkp_cfg.gpu_win_m;
    gpu.trigger_steps = tkp_cfg.gpu_trigger_steps;
    gpu.buffer_cap = (uint64_t)tkp_cfg.gpu_buffer_mb << 20;
    mode_str(gpu.mode_text, sizeof gpu.mode_text);
    if (gpu.mode == MODE_OFF) say(TKP_GPU_OFF, WHY_CONFIG_OFF, 0);
}

static void mode_str(char *buf, size_t n)
{
    switch (gpu.mode) {
    case MODE_WINDOW:
        snprintf(buf, n, "window:%u/%u", gpu.win_n, gpu.win_m);
        break;
    case MODE_TRIGGER:
        snprintf(buf, n, "trigger:%u", gpu.trigger_steps);
        break;
    case MODE_OFF:
        snprintf(buf, n, "off");
        break;
    default:
        snprintf(buf, n, "always");
        break;
    }
}

/* ---- which steps are traced ---- */

/* window: the window's steps, and (like trigger) the steps a trigger armed (tkp_gpu_arm: the
 * flight recorder's snapshot asks for GPU time of the steps after an incident) */
static int traced(uint32_t seg)
{
    if (gpu.mode == MODE_WINDOW && seg % gpu.win_m < gpu.win_n) return 1;
    if (gpu.mode == MODE_TRIGGER || gpu.mode == MODE_WINDOW) {
        uint32_t n = atomic_load_explicit(&gpu.nranges, memory_order_acquire);
        for (uint32_t i = n > RANGES_MAX ? n - RANGES_MAX : 0; i < n; i++)
            if (seg >= gpu.range_from[i % RANGES_MAX] && seg < gpu.range_to[i % RANGES_MAX])
                return 1;
        return 0;
    }
    return 1;
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

/* Switches the activity kinds; the subscription and callbacks stay (no teardown per window). */
static void set_kinds(int on)
{
    if (atomic_exchange(&gpu.kinds_on, on) == on) return;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        (on ? api.enable : api.disable)(kinds[i]);
}

void tkp_gpu_arm(unsigned steps)
{
    atomic_store(&gpu.armed, steps ? steps : gpu.trigger_steps);
}

static void on_sigusr2(int sig)
{
    (void)sig;
    tkp_gpu_arm(gpu.trigger_steps);
}

void tkp_cupti_on_segment(uint32_t seg)
{
    if (!atomic_load_explicit(&gpu.active, memory_order_relaxed) || gpu.mode == MODE_ALWAYS) return;
    struct tkp_ring *r = tkp_tls.ring;
    if (!r) return;
    uint32_t none = UINT32_MAX;
    atomic_compare_exchange_strong(&gpu.main_thread, &none, r->thread_idx);
    if (atomic_load(&gpu.main_thread) != r->thread_idx) return;
    atomic_store(&gpu.cur_seg, seg);
    unsigned armed = atomic_exchange(&gpu.armed, 0);
    if (armed) {
        uint32_t n = atomic_load(&gpu.nranges);
        gpu.range_from[n % RANGES_MAX] = seg;
        gpu.range_to[n % RANGES_MAX] = seg + armed;
        atomic_store_explicit(&gpu.nranges, n + 1, memory_order_release);
    }
    /* Switched on eagerly: the segment's first launch must be seen. Switched off lazily, at the
     * next launch (the callback), so that the previous step's last copy, issued after its
     * boundary was detected, is still traced. The writer drops what falls outside. */
    if (traced(seg)) tkp_tls.depth++, set_kinds(1), tkp_tls.depth--;
}

/* ---- callbacks (application threads) ---- */

static uint8_t cb_join[3][1024]; /* [domain][cbid] -> enum tkp_gpu_join */

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                            const void *data)
{
    (void)ud;
    const CUpti_CallbackData *d = data;
    if (d->callbackSite != CUPTI_API_ENTER || (unsigned)dom > 2 || cbid >= 1024) return;
    int join = cb_join[dom][cbid];
    struct tkp_ring *r = tkp_tls.ring;
    if (!join || !r || !atomic_load_explicit(&gpu.active, memory_order_relaxed)) return;
    struct tkp_stepstate *s = tkp_step_state(r);
    uint32_t step = s->seg, idx;
    if (join == TKP_JOIN_LAUNCH) {
        if (!s->launches) return;
        idx = s->launches - 1;
    } else if (join == TKP_JOIN_GRAPH_LAUNCH) {
        if (!s->graph_launches) return;
        idx = s->graph_launches - 1;
    } else if (s->copies) {
        idx = s->copies - 1;
    } else if (s->npending && s->last_marked + 1 == (int64_t)s->seg) {
        /* the copy that ended the previous segment (auto mode): counted there */
        const struct tkp_pending *p =
            &s->pending[(s->pending_head + s->npending - 1) % TKP_PENDING_MAX];
        if (!p->copies) return;
        step = p->seg;
        idx = p->copies - 1;
    } else {
        return;
    }
    /* The lazy switch-off (tkp_cupti_on_segment): not by the call that belongs to a traced step
     * (the copy that ended a window's last step: the segment after it is already the next), nor
     * by one in a segment a window begins (the copy that ended the step before it) */
    if (gpu.mode != MODE_ALWAYS && atomic_load_explicit(&gpu.kinds_on, memory_order_relaxed) &&
        atomic_load_explicit(&gpu.main_thread, memory_order_relaxed) == r->thread_idx &&
        !traced(step) && !traced(s->seg))
        set_kinds(0);
    /* Outside a window nothing will need the join: no ring slot, and the writer's table keeps
     * its slots for the correlations that will */
    if (!atomic_load_explicit(&gpu.kinds_on, memory_order_relaxed)) return;
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return;
    e->type = TKP_EV_GPU_CORR;
    e->sub = (uint8_t)join;
    e->step = step;
    e->ts = tkp_stamp(); /* picks the graph version a replay's nodes join (graph.h) */
    e->a = d->correlationId;
    e->u[0] = idx;
    tkp_ring_commit(r);
}

static void enable_callbacks(CUpti_SubscriberHandle sub)
{
    static const struct { int dom, cbid, join; } ids[] = {
#define RT(n, j) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##n, j}
#define DR(n, j) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##n, j}
        RT(cudaLaunchKernel_v7000, 1), RT(cudaLaunchKernel_ptsz_v7000, 1),
        RT(cudaLaunchKernelExC_v11060, 1), RT(cudaLaunchKernelExC_ptsz_v11060, 1),
        RT(__cudaLaunchKernel_v13000, 1), RT(__cudaLaunchKernel_ptsz_v13000, 1),
        RT(cudaLaunchCooperativeKernel_v9000, 1), RT(cudaLaunchCooperativeKernel_ptsz_v9000, 1),
        RT(cudaGraphLaunch_v10000, 2), RT(cudaGraphLaunch_ptsz_v10000, 2),
        RT(cudaMemcpy_v3020, 3), RT(cudaMemcpy_ptds_v7000, 3), RT(cudaMemcpyAsync_v3020, 3),
        RT(cudaMemcpyAsync_ptsz_v7000, 3), RT(cudaMemset_v3020, 3), RT(cudaMemset_ptds_v7000, 3),
        RT(cudaMemsetAsync_v3020, 3), RT(cudaMemsetAsync_ptsz_v7000, 3),
        DR(cuLaunchKernel, 1), DR(cuLaunchKernel_ptsz, 1), DR(cuLaunchKernelEx, 1),
        DR(cuLaunchKernelEx_ptsz, 1), DR(cuLaunchCooperativeKernel, 1),
        DR(cuLaunchCooperativeKernel_ptsz, 1), DR(cuGraphLaunch, 2), DR(cuGraphLaunch_ptsz, 2),
        DR(cuMemcpy, 3), DR(cuMemcpy_ptds, 3), DR(cuMemcpyAsync, 3), DR(cuMemcpyAsync_ptsz, 3),
        DR(cuMemcpyHtoD_v2, 3), DR(cuMemcpyHtoD_v2_ptds, 3), DR(cuMemcpyDtoH_v2, 3),
        DR(cuMemcpyDtoH_v2_ptds, 3), DR(cuMemcpyDtoD_v2, 3), DR(cuMemcpyDtoD_v2_ptds, 3),
        DR(cuMemcpyHtoDAsync_v2, 3), DR(cuMemcpyHtoDAsync_v2_ptsz, 3),
        DR(cuMemcpyDtoHAsync_v2, 3), DR(cuMemcpyDtoHAsync_v2_ptsz, 3),
        DR(cuMemcpyDtoDAsync_v2, 3), DR(cuMemcpyDtoDAsync_v2_ptsz, 3), DR(cuMemsetD8_v2, 3),
        DR(cuMemsetD8_v2_ptds, 3), DR(cuMemsetD32_v2, 3), DR(cuMemsetD32_v2_ptds, 3),
        DR(cuMemsetD8Async, 3), DR(cuMemsetD8Async_ptsz, 3), DR(cuMemsetD32Async, 3),
        DR(cuMemsetD32Async_ptsz, 3),
#undef RT
#undef DR
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (ids[i].cbid >= 1024) continue;
        cb_join[ids[i].dom][ids[i].cbid] = (uint8_t)ids[i].join;
        api.enable_callback(1, sub, (CUpti_CallbackDomain)ids[i].dom,
                            (CUpti_CallbackId)ids[i].cbid);
    }
}

/* ---- buffers (CUPTI's threads) ---- */

static uint64_t CUPTIAPI clock_ns(void)
{
    return tkp_now_ns(); /* GPU times land on the capture's CLOCK_MONOTONIC */
}

/* Released buffers kept for the next requests (the writer releases, CUPTI's callbacks request:
 * an exchange per slot, no lock): free() of a 256 KiB block cost the writer up to ~18 000
 * instructions when glibc trimmed the heap (the block came from another thread's arena). At
 * most SPARES × 256 KiB kept, outside TOKPROF_GPU_BUFFER_MB (which counts buffers CUPTI holds). */
#define SPARES 4
static _Atomic(struct gbuf *) spare[SPARES];

static void CUPTIAPI buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    uint64_t total = atomic_fetch_add(&gpu.buf_bytes, BUF_SIZE) + BUF_SIZE;
    if (total > gpu.buffer_cap) { /* declined: CUPTI drops and counts */
        atomic_fetch_sub(&gpu.buf_bytes, BUF_SIZE);
        return;
    }
    struct gbuf *b = NULL;
    for (int i = 0; i < SPARES && !b; i++)
        b = atomic_exchange(&spare[i], NULL);
    if (!b) b = malloc(sizeof *b + BUF_SIZE);
    if (!b) {
        atomic_fetch_sub(&gpu.buf_bytes, BUF_SIZE);
        return;
    }
    uint64_t peak = atomic_load(&gpu.buf_peak);
    while (total > peak && !atomic_compare_exchange_weak(&gpu.buf_peak, &peak, total)) {
    }
    *buffer = b->data;
    *size = BUF_SIZE;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                  size_t valid)
{
    (void)ctx, (void)size;
    size_t n = 0;
    if (api.dropped && api.dropped(NULL, stream, &n) == CUPTI_SUCCESS && n)
        atomic_fetch_add(&gpu.cupti_dropped, n);
    if (!buffer) return;
    struct gbuf *b = (struct gbuf *)(buffer - offsetof(struct gbuf, data));
    b->valid = valid;
    b->next = atomic_load(&gpu.done_list);
    while (!atomic_compare_exchange_weak(&gpu.done_list, &b->next, b)) {
    }
}

/* ---- start, stop ---- */

static void off(int status, enum why why, int rc)
{
    say(status, why, rc);
    char text[160];
    why_text(text, sizeof text, why, rc);
    tkp_warn("GPU time off: %s; host capture continues", text);
}

void tkp_cupti_start(void)
{
    if (gpu.mode == MODE_OFF || gpu.loaded) return; /* the mode: tkp_cupti_config() */
    if (atomic_load(&gpu.yielded)) { /* the program's own client came first: never take it back */
        off(TKP_GPU_BUSY, WHY_TAKEN, 0);
        return;
    }
    tkp_tls.depth++; /* CUPTI's own CUDA calls are not the program's */
    /* A secure-execution process never dlopens a path from its environment (it never starts
     * capture at all: init.c; and the settings are read with secure_getenv, a second lock). */
    void *h = dlopen(tkp_cfg.cupti_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        off(TKP_GPU_NO_CUPTI, WHY_NO_CUPTI, 0);
        goto out;
    }
#define SYM(f, n) *(void **)&api.f = tkp_real_dlsym(h, n)
    SYM(subscribe, "cuptiSubscribe");
    SYM(unsubscribe, "cuptiUnsubscribe");
    SYM(enable_callback, "cuptiEnableCallback");
    SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYM(register_ts, "cuptiActivityRegisterTimestampCallback");
    SYM(enable, "cuptiActivityEnable");
    SYM(disable, "cuptiActivityDisable");
    SYM(next, "cuptiActivityGetNextRecord");
    SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    SYM(flush_all, "cuptiActivityFlushAll");
    SYM(flush_period, "cuptiActivityFlushPeriod");
    SYM(node_id, "cuptiGetGraphNodeId");
#undef SYM
    if (!api.subscribe || !api.enable_callback || !api.register_callbacks || !api.register_ts ||
        !api.enable || !api.disable || !api.next || !api.flush_all) {
        off(TKP_GPU_NO_CUPTI, WHY_NO_ACTIVITY_API, 0);
        goto out;
    }
    CUpti_SubscriberHandle sub;
    CUptiResult rc = api.subscribe(&sub, on_api, NULL);
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        off(TKP_GPU_BUSY, WHY_TAKEN, 0);
        goto out;
    }
    if (rc != CUPTI_SUCCESS) {
        off(rc == CUPTI_ERROR_UNKNOWN ? TKP_GPU_NO_DEVICE : TKP_GPU_ERROR, WHY_SUBSCRIBE, (int)rc);
        goto out;
    }
    gpu.loaded = 1;
    gpu.lib = h;
    gpu.sub = sub;
    /* The timestamp callback first: it must be in place before any kind is enabled. */
    if ((rc = api.register_ts(clock_ns)) != CUPTI_SUCCESS ||
        (rc = api.register_callbacks(buf_request, buf_complete)) != CUPTI_SUCCESS) {
        off(rc == CUPTI_ERROR_UNKNOWN ? TKP_GPU_NO_DEVICE : TKP_GPU_ERROR, WHY_ACTIVITY_API,
            (int)rc);
        goto out;
    }
    enable_callbacks(sub);
    if (api.flush_period) api.flush_period(tkp_cfg.flush_ms);
    say(TKP_GPU_ON, WHY_NONE, 0);
    atomic_store(&gpu.active, 1);
    if (gpu.mode == MODE_TRIGGER) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        /* only when the program left SIGUSR2 alone: never take a signal from it */
        if (sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
            sa.sa_handler = on_sigusr2;
            sa.sa_flags = SA_RESTART;
            sigaction(SIGUSR2, &sa, NULL);
        }
    }
    if (gpu.mode == MODE_ALWAYS || (gpu.mode == MODE_WINDOW && traced(0))) set_kinds(1);
    if (atomic_load(&gpu.kinds_on) == 0 && gpu.mode == MODE_ALWAYS) {
        off(TKP_GPU_ERROR, WHY_ENABLE, 0);
        atomic_store(&gpu.active, 0);
    }
out:
    tkp_tls.depth--;
}

void tkp_cupti_stop(void)
{
    if (!gpu.loaded || atomic_load(&gpu.yielded)) return;
    tkp_tls.depth++;
    /* Forced: records still in CUPTI's incomplete buffers are delivered too. */
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    tkp_tls.depth--;
}

/* Another tool in the process registers its own CUPTI clients (torch.profiler's Kineto calls
 * cuptiActivityRegisterCallbacks at each profile's start, without subscribing; nsys subscribes):
 * CUPTI has one set of buffer callbacks and one subscriber per process, so the shim gives its
 * up, once, at the first such call: its kinds off, its records flushed to itself (forced: a buffer
 * still held would go to the new owner), its subscription ended, one warning; tier 1 goes on.
 * Returns the real function, from the library the shim loaded or from the one the caller did. */
void *tkp_cupti_yield(const char *fn)
{
    if (!atomic_exchange(&gpu.yielded, 1) && gpu.loaded) {
        tkp_tls.depth++;
        atomic_store(&gpu.active, 0);
        set_kinds(0);
        api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        if (api.unsubscribe) api.unsubscribe(gpu.sub);
        off(TKP_GPU_BUSY, WHY_HANDED_OVER, 0);
        tkp_tls.depth--;
    }
    void *h = gpu.lib ? gpu.lib : dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    return h ? tkp_real_dlsym(h, fn) : NULL;
}

void tkp_cupti_after_fork(void)
{
    /* CUPTI does not follow a fork: the child keeps tier 1 only, and says so. */
    atomic_store(&gpu.active, 0);
    atomic_store(&gpu.done_list, NULL);
    if (gpu.loaded) say(TKP_GPU_ERROR, WHY_FORK, 0);
}

/* ---- graph nodes ---- */

static pthread_mutex_t node_lock = PTHREAD_MUTEX_INITIALIZER;
/* dense ids; prev: the entry of the same CUPTI node's previous version (UINT32_MAX: none) */
static struct nodeent {
    uint64_t cupti, since, node;
    uint32_t graph, prev;
} *nodes;
static uint32_t nodes_cap, nnodes;
static struct tkp_map nodemap; /* CUPTI node id -> index in nodes of its newest version */
static _Atomic uint64_t node_gen; /* versions added so far: the writer's node cache's key */

uint64_t tkp_cupti_node_id(void *node)
{
    uint64_t id = 0;
    if (!gpu.loaded || !api.node_id || api.node_id((CUgraphNode)node, &id) != CUPTI_SUCCESS)
        return 0;
    return id;
}

static int node_eq(const void *ctx, uint32_t id, const void *key)
{
    (void)ctx;
    return nodes[id].cupti == *(const uint64_t *)key;
}

void tkp_cupti_graph_node(uint64_t cupti, uint32_t graph, uint64_t node, uint64_t since)
{
    if (!cupti) return;
    uint64_t h = tkp_hash_u64(cupti);
    pthread_mutex_lock(&node_lock);
    int64_t id = tkp_map_find(&nodemap, h, node_eq, NULL, &cupti);
    if (nnodes < NODEMAP_MAX &&
        !tkp_grow((void **)&nodes, &nodes_cap, nnodes, sizeof *nodes, 4096)) {
        if (id >= 0) { /* the map keeps naming the head: the old version moves out of it */
            nodes[nnodes++] = nodes[id];
            nodes[id] = (struct nodeent){cupti, since, node, graph, nnodes - 1};
        } else if (!tkp_map_add(&nodemap, h, nnodes)) {
            nodes[nnodes++] = (struct nodeent){cupti, since, node, graph, UINT32_MAX};
        }
    }
    atomic_fetch_add_explicit(&node_gen, 1, memory_order_release);
    pthread_mutex_unlock(&node_lock);
}

uint64_t tkp_cupti_node_gen(void)
{
    return atomic_load_explicit(&node_gen, memory_order_acquire);
}

int tkp_cupti_node_lookup(uint64_t cupti, uint64_t stamp, uint32_t *graph, uint64_t *node,
                          uint64_t *from)
{
    pthread_mutex_lock(&node_lock);
    int64_t id = tkp_map_find(&nodemap, tkp_hash_u64(cupti), node_eq, NULL, &cupti);
    /* the newest version if it is not newer than the launch: any later stamp gets it too */
    if (from) *from = id >= 0 && nodes[id].since <= stamp ? nodes[id].since : UINT64_MAX;
    /* the newest version not newer than the launch; the oldest when all are */
    while (id >= 0 && nodes[id].since > stamp && nodes[id].prev != UINT32_MAX) id = nodes[id].prev;
    if (id >= 0) {
        *graph = nodes[id].graph;
        *node = nodes[id].node;
    }
    pthread_mutex_unlock(&node_lock);
    return id >= 0;
}

/* ---- the hand-over to the writer thread (gpuenc.c) ---- */

struct tkp_cupti_buf *tkp_cupti_take(void)
{
    struct gbuf *l = atomic_exchange(&gpu.done_list, NULL), *rev = NULL;
    while (l) { /* the list is LIFO; buffers are encoded in completion order */
        struct gbuf *n = l->next;
        l->next = rev;
        rev = l;
        l = n;
    }
    return (struct tkp_cupti_buf *)rev;
}

void tkp_cupti_append(struct tkp_cupti_buf *list, struct tkp_cupti_buf *more)
{
    struct gbuf *g = (struct gbuf *)list;
    while (g->next) g = g->next;
    g->next = (struct gbuf *)more;
}

tkp_cupti_next_fn tkp_cupti_records(struct tkp_cupti_buf *b, uint8_t **data, size_t *valid)
{
    struct gbuf *g = (struct gbuf *)b;
    *data = g->data;
    *valid = g->valid;
    return api.next;
}

struct tkp_cupti_buf *tkp_cupti_release(struct tkp_cupti_buf *b)
{
    struct gbuf *g = (struct gbuf *)b, *n = g->next;
    int kept = 0;
    for (int i = 0; i < SPARES && !kept; i++) {
        struct gbuf *none = NULL;
        kept = atomic_compare_exchange_strong(&spare[i], &none, g);
    }
    if (!kept) free(g);
    atomic_fetch_sub(&gpu.buf_bytes, BUF_SIZE);
    return (struct tkp_cupti_buf *)n;
}

int tkp_cupti_filters(void)
{
    return gpu.mode != MODE_ALWAYS;
}

int tkp_cupti_untraced(uint32_t thread, uint32_t step)
{
    uint32_t main = atomic_load(&gpu.main_thread);
    return gpu.mode != MODE_ALWAYS && (main == UINT32_MAX || thread == main) && !traced(step);
}

void tkp_cupti_status(struct tkp_cupti_status *st)
{
    uint64_t w = atomic_load_explicit(&gpu.said, memory_order_acquire);
    st->status = (int)(w & 0xff);
    st->mode = gpu.mode_text;
    why_text(st->reason, sizeof st->reason, (enum why)(w >> 8 & 0xff), (int)(uint32_t)(w >> 32));
    st->dropped = atomic_load(&gpu.cupti_dropped);
    st->buf_peak = atomic_load(&gpu.buf_peak);
}
