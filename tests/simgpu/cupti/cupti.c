/* simgpu fake libcupti.so.13: the subset of CUPTI a tracer uses (activity buffers, callbacks,
 * timestamps, graph node ids), fed by the simulator's truth instead of by a GPU.
 *
 * The real CUPTI is called by the driver at every API entry/exit and reads GPU timestamps from
 * device buffers. Here the simulated driver reports the same two facts through its private
 * observer (simgpu_ext.h): the driver calls that enqueue work (-> callbacks, correlation ids)
 * and every executed op with its simulated start/end (-> activity records). Records use the real
 * 13.0 layouts (CUpti_ActivityKernel10, Memcpy6, Memset4), so a client reading them through the
 * common-prefix offsets reads what it would read on a GPU.
 *
 * Behaviour a client must survive, as on a real CUPTI:
 *   - one subscriber per process: a second cuptiSubscribe answers
 *     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; SIMGPU_CUPTI=multiple_subscribers answers it
 *     to the first too (a process under nsys), SIMGPU_CUPTI=unknown answers CUPTI_ERROR_UNKNOWN
 *     to subscribe and every activity call (no GPU);
 *   - records are dropped (and counted, cuptiActivityGetNumDroppedRecords) when the request
 *     callback declines (NULL) or hands out a buffer too small for one record;
 *   - without a registered timestamp callback, times are CLOCK_REALTIME (CUPTI's default on
 *     Linux); with one, they are on the callback's clock — simulated times are CLOCK_MONOTONIC,
 *     so a client that registers a CLOCK_MONOTONIC callback gets the truth exactly.
 * A buffer is completed when the next record does not fit, by cuptiActivityFlushAll, and,
 * once cuptiActivityFlushPeriod(ms > 0) was called, every ms milliseconds when it holds records
 * (a thread of the fake's own; 0 stops it). Completion callbacks run in the thread that filled
 * the buffer, the flushing thread or the period thread (real CUPTI uses its own thread; a client
 * must not care). */
#include <cupti.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "simgpu_ext.h"

#define EXPORT __attribute__((visibility("default")))
#define ALIGN8(x) (((x) + 7u) & ~(size_t)7u)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int mode; /* 0 normal, 1 multiple subscribers, 2 unknown (no GPU), 3 late (no flush period) */
static int subscribed;
static CUpti_CallbackFunc cb_fn;
static void *cb_user;
static unsigned char cb_enabled[CUPTI_CB_DOMAIN_SIZE][1024];
static CUpti_BuffersCallbackRequestFunc req_fn;
static CUpti_BuffersCallbackCompleteFunc done_fn;
static CUpti_TimestampCallbackFunc ts_fn;
static _Atomic uint64_t kinds; /* bit per enabled kind (values below 64) */
static unsigned char api_off[1024]; /* cuptiActivityEnableDriverApi(cbid, 0): no DRIVER record */
static _Atomic size_t dropped;
static _Atomic uint32_t next_corr;
static uint8_t *buf;
static size_t buf_size, buf_used;
static __thread uint32_t cur_corr; /* correlation id of the calling thread's API call */
static __thread int api_depth;
static __thread long long api_start_ns; /* CLOCK_MONOTONIC at the outermost API entry */
#define EXT_KINDS 8                      /* CUpti_ExternalCorrelationKind values kept */
#define EXT_DEPTH 64
static __thread uint64_t ext_stack[EXT_KINDS][EXT_DEPTH];
static __thread int ext_depth[EXT_KINDS];
static int64_t realtime_offset;
/* A timestamp callback on another clock than CLOCK_MONOTONIC (Kineto's TSC): its rate per ns,
 * measured at registration; 0 when the callback is CLOCK_MONOTONIC itself (exact). */
static double ts_rate;
static long long ts_m0; /* the map's anchor: CLOCK_MONOTONIC ... */
static uint64_t ts_c0;  /* ... and the callback's clock at the same instant */

static void init_once(void)
{
    const char *m = getenv("SIMGPU_CUPTI");
    mode = !m                                ? 0
           : !strcmp(m, "multiple_subscribers") ? 1
           : !strcmp(m, "unknown")              ? 2
           : !strcmp(m, "late")                 ? 3
                                                : 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &b);
    realtime_offset = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
}
static pthread_once_t once = PTHREAD_ONCE_INIT;
#define INIT() pthread_once(&once, init_once)
#define NO_GPU() (INIT(), mode == 2)

/* The driver API names the simulator reports, with their real callback ids. */
static const struct {
    const char *name;
    int cbid;
} cbids[] = {
#define C(n) {#n, CUPTI_DRIVER_TRACE_CBID_##n}
    C(cuLaunchKernel), C(cuLaunchKernel_ptsz), C(cuLaunchKernelEx), C(cuLaunchKernelEx_ptsz),
    C(cuGraphLaunch), C(cuGraphLaunch_ptsz), C(cuMemcpy), C(cuMemcpy_ptds), C(cuMemcpyAsync),
    C(cuMemcpyAsync_ptsz), C(cuMemcpyHtoD_v2), C(cuMemcpyHtoD_v2_ptds), C(cuMemcpyDtoH_v2),
    C(cuMemcpyDtoH_v2_ptds), C(cuMemcpyDtoD_v2), C(cuMemcpyDtoD_v2_ptds),
    C(cuMemcpyHtoDAsync_v2), C(cuMemcpyHtoDAsync_v2_ptsz), C(cuMemcpyDtoHAsync_v2),
    C(cuMemcpyDtoHAsync_v2_ptsz), C(cuMemcpyDtoDAsync_v2), C(cuMemcpyDtoDAsync_v2_ptsz),
    C(cuMemsetD8_v2), C(cuMemsetD8_v2_ptds), C(cuMemsetD32_v2), C(cuMemsetD32_v2_ptds),
    C(cuMemsetD8Async), C(cuMemsetD8Async_ptsz), C(cuMemsetD32Async), C(cuMemsetD32Async_ptsz),
#undef C
};

static int cbid_of(const char *name)
{
    for (size_t i = 0; i < sizeof cbids / sizeof cbids[0]; i++)
        if (!strcmp(cbids[i].name, name)) return cbids[i].cbid;
    return -1;
}

static void callback(int site, const char *func)
{
    int cbid = cbid_of(func);
    if (!cb_fn || cbid < 0 || !cb_enabled[CUPTI_CB_DOMAIN_DRIVER_API][cbid]) return;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = site ? CUPTI_API_EXIT : CUPTI_API_ENTER;
    d.functionName = func;
    d.correlationId = cur_corr;
    cb_fn(cb_user, CUPTI_CB_DOMAIN_DRIVER_API, (CUpti_CallbackId)cbid, &d);
}

static long long mono_ns(void);
static void ext_records(uint32_t corr);
static void api_record(const char *func, uint32_t corr);

static void on_api(int site, const char *func)
{
    if (site == 0) {
        if (api_depth++ == 0) {
            cur_corr = atomic_fetch_add(&next_corr, 1) + 1;
            api_start_ns = mono_ns();
            ext_records(cur_corr);
        }
        callback(0, func);
    } else {
        callback(1, func);
        if (--api_depth == 0) {
            api_record(func, cur_corr);
            cur_corr = 0;
        }
    }
}

static long long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static uint64_t stamp(long long sim_ns)
{
    /* With a timestamp callback, CUPTI puts GPU times on the callback's clock. A CLOCK_MONOTONIC
     * callback (a tracer's) gets the simulated times exactly; another clock (Kineto's TSC) gets
     * them mapped through "now" on both clocks at the measured rate. Without one, realtime. */
    if (!ts_fn) return (uint64_t)(sim_ns + realtime_offset);
    if (ts_rate == 0) return (uint64_t)sim_ns;
    if (ts_rate == 1) return ts_c0 + (uint64_t)(sim_ns - ts_m0);
    return ts_c0 + (uint64_t)llround((double)(sim_ns - ts_m0) * ts_rate);
}

/* Takes the filled buffer out (caller completes it after unlocking). */
static uint8_t *take_buffer(size_t *size, size_t *valid)
{
    uint8_t *b = buf;
    *size = buf_size;
    *valid = buf_used;
    buf = NULL;
    buf_size = buf_used = 0;
    return b;
}

static void complete(uint8_t *b, size_t size, size_t valid)
{
    if (b && done_fn) done_fn(NULL, 0, b, size, valid);
}

/* Appends one record to the current buffer (requesting one, completing a full one). */
static void append(const void *r, size_t sz)
{
    uint8_t *full = NULL;
    size_t full_size = 0, full_valid = 0;
    pthread_mutex_lock(&lock);
    if (buf && buf_used + ALIGN8(sz) > buf_size) full = take_buffer(&full_size, &full_valid);
    if (!buf) {
        uint8_t *nb = NULL;
        size_t size = 0, maxrec = 0;
        req_fn(&nb, &size, &maxrec);
        if (nb && size >= ALIGN8(sz)) {
            buf = nb;
            buf_size = size;
        } else if (nb) {
            /* too small to hold a record: handed back empty, the record is lost */
            pthread_mutex_unlock(&lock);
            complete(full, full_size, full_valid);
            complete(nb, size, 0);
            atomic_fetch_add(&dropped, 1);
            return;
        }
    }
    if (buf) {
        memcpy(buf + buf_used, r, sz);
        buf_used += ALIGN8(sz);
    } else {
        atomic_fetch_add(&dropped, 1);
    }
    pthread_mutex_unlock(&lock);
    complete(full, full_size, full_valid);
}

#define KIND_ON(k) ((atomic_load(&kinds) >> (k)) & 1u)

/* EXTERNAL_CORRELATION records at the outermost API entry: one per kind with a pushed id, the
 * top of the calling thread's stack, before the records of the work the call enqueues. */
static void ext_records(uint32_t corr)
{
    if (!req_fn || !KIND_ON(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) return;
    for (int k = 0; k < EXT_KINDS; k++) {
        if (!ext_depth[k]) continue;
        CUpti_ActivityExternalCorrelation e;
        memset(&e, 0, sizeof e);
        e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        e.externalKind = (CUpti_ExternalCorrelationKind)k;
        e.externalId = ext_stack[k][(ext_depth[k] > EXT_DEPTH ? EXT_DEPTH : ext_depth[k]) - 1];
        e.correlationId = corr;
        append(&e, sizeof e);
    }
}

/* A DRIVER record at the outermost API exit (the simulator sees driver calls only: the fake
 * runtime is a thin layer over them, so there are no RUNTIME records). */
static void api_record(const char *func, uint32_t corr)
{
    int cbid = cbid_of(func);
    if (!req_fn || cbid < 0 || api_off[cbid] || !KIND_ON(CUPTI_ACTIVITY_KIND_DRIVER)) return;
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = (CUpti_CallbackId)cbid;
    a.start = stamp(api_start_ns);
    a.end = stamp(mono_ns());
    a.processId = (uint32_t)getpid();
    a.threadId = (uint32_t)syscall(SYS_gettid);
    a.correlationId = corr;
    append(&a, sizeof a);
}

static void on_op(const struct simgpu_op_view *op)
{
    uint64_t k = atomic_load(&kinds);
    int want = op->kind == 0 ? (k & (1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL |
                                     1ull << CUPTI_ACTIVITY_KIND_KERNEL)) != 0
               : op->kind == 1 ? (k & 1ull << CUPTI_ACTIVITY_KIND_MEMCPY) != 0
                               : (k & 1ull << CUPTI_ACTIVITY_KIND_MEMSET) != 0;
    if (!want || !req_fn) return;
    union {
        CUpti_ActivityKernel10 k;
        CUpti_ActivityMemcpy6 c;
        CUpti_ActivityMemset4 s;
    } r;
    size_t sz;
    memset(&r, 0, sizeof r);
    if (op->kind == 0) {
        r.k.kind = (k & 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                       ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                       : CUPTI_ACTIVITY_KIND_KERNEL;
        r.k.start = stamp(op->start_ns);
        r.k.end = stamp(op->end_ns);
        r.k.completed = r.k.end;
        r.k.streamId = (uint32_t)op->stream_id;
        r.k.gridX = (int32_t)op->grid[0], r.k.gridY = (int32_t)op->grid[1];
        r.k.gridZ = (int32_t)op->grid[2];
        r.k.blockX = (int32_t)op->block[0], r.k.blockY = (int32_t)op->block[1];
        r.k.blockZ = (int32_t)op->block[2];
        r.k.correlationId = cur_corr;
        r.k.name = op->name; /* simulator names live as long as their module: the process */
        r.k.graphNodeId = op->graph_node;
        r.k.graphId = (uint32_t)op->graph_exec;
        sz = sizeof r.k;
    } else if (op->kind == 1) {
        static const uint8_t kinds_of_dir[] = {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                               CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
                                               CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
                                               CUPTI_ACTIVITY_MEMCPY_KIND_HTOH};
        r.c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r.c.copyKind = kinds_of_dir[op->dir & 3];
        r.c.bytes = op->bytes;
        r.c.start = stamp(op->start_ns);
        r.c.end = stamp(op->end_ns);
        r.c.streamId = (uint32_t)op->stream_id;
        r.c.correlationId = cur_corr;
        r.c.graphNodeId = op->graph_node;
        r.c.graphId = (uint32_t)op->graph_exec;
        sz = sizeof r.c;
    } else {
        r.s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r.s.bytes = op->bytes;
        r.s.start = stamp(op->start_ns);
        r.s.end = stamp(op->end_ns);
        r.s.streamId = (uint32_t)op->stream_id;
        r.s.correlationId = cur_corr;
        r.s.graphNodeId = op->graph_node;
        r.s.graphId = (uint32_t)op->graph_exec;
        sz = sizeof r.s;
    }
    append(&r, sz);
}

static const struct simgpu_observer observer = {on_api, on_op};

/* Hooks into the simulated driver: the same dlopen + cuGetProcAddress path the fakes use. Once
 * per process, by the first cuptiSubscribe or activity call (Kineto traces activity without a
 * subscription when another tool holds it). */
static CUresult attached = CUDA_ERROR_NOT_INITIALIZED;
static void attach_once(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
            dlsym(h, "cuGetProcAddress_v2");
    void *fn = NULL;
    if (!gpa || gpa(SIMGPU_SET_OBSERVER_NAME, &fn, 13000, 0, NULL) != CUDA_SUCCESS || !fn)
        return;
    attached = ((simgpu_set_observer_fn)fn)(&observer);
}
static pthread_once_t attach_ctl = PTHREAD_ONCE_INIT;
static CUresult attach_driver(void)
{
    pthread_once(&attach_ctl, attach_once);
    return attached;
}

/* ---- the CUPTI API subset ------------------------------------------------------------------ */

EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
    if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    *str = result == CUPTI_SUCCESS                                   ? "CUPTI_SUCCESS"
           : result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
           : result == CUPTI_ERROR_UNKNOWN                           ? "CUPTI_ERROR_UNKNOWN"
                                                                     : "CUPTI_ERROR_INVALID_PARAMETER";
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    if (!ts) return CUPTI_ERROR_INVALID_PARAMETER;
    if (ts_fn) {
        *ts = ts_fn();
    } else {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        *ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
    }
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *user)
{
    INIT();
    if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
    if (mode == 2) return CUPTI_ERROR_UNKNOWN;
    if (mode == 1) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    pthread_mutex_lock(&lock);
    if (subscribed) {
        pthread_mutex_unlock(&lock);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    subscribed = 1;
    cb_fn = fn;
    cb_user = user;
    pthread_mutex_unlock(&lock);
    if (attach_driver() != CUDA_SUCCESS) {
        subscribed = 0;
        return CUPTI_ERROR_UNKNOWN;
    }
    *sub = (CUpti_SubscriberHandle)&subscribed;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    if (sub != (CUpti_SubscriberHandle)&subscribed || !subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
    subscribed = 0;
    cb_fn = NULL;
    memset(cb_enabled, 0, sizeof cb_enabled);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (sub != (CUpti_SubscriberHandle)&subscribed || domain <= 0 ||
        domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= 1024)
        return CUPTI_ERROR_INVALID_PARAMETER;
    cb_enabled[domain][cbid] = enable != 0;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub,
                                     CUpti_CallbackDomain domain)
{
    if (sub != (CUpti_SubscriberHandle)&subscribed || domain <= 0 || domain >= CUPTI_CB_DOMAIN_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    memset(cb_enabled[domain], enable != 0, sizeof cb_enabled[domain]);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                  CUpti_BuffersCallbackCompleteFunc done)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    if (attach_driver() != CUDA_SUCCESS) return CUPTI_ERROR_UNKNOWN;
    req_fn = req;
    done_fn = done;
    return CUPTI_SUCCESS;
}

/* One (CLOCK_MONOTONIC, f()) pair: the best of 5 tries, the one whose two monotonic readings
 * around f() are closest (a preempted try is thrown away), at their midpoint. */
static void calibrate(CUpti_TimestampCallbackFunc f, long long *m, uint64_t *c)
{
    long long best = -1;
    for (int i = 0; i < 5; i++) {
        long long a = mono_ns();
        uint64_t v = f();
        long long b = mono_ns();
        if (best < 0 || b - a < best) {
            best = b - a;
            *m = a + (b - a) / 2;
            *c = v;
        }
    }
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    ts_rate = 0;
    if (f) {
        /* CLOCK_MONOTONIC itself when its reading lies between two of ours; otherwise one fixed
         * affine map, its rate measured over 10 ms (registration happens once per trace): a map
         * that moved with every record would make back-to-back kernels overlap */
        long long m0 = mono_ns(), mb;
        uint64_t c0 = f();
        if (c0 < (uint64_t)m0 || c0 > (uint64_t)(mb = mono_ns())) {
            calibrate(f, &ts_m0, &ts_c0);
            long long m2;
            uint64_t c2;
            do calibrate(f, &m2, &c2);
            while (m2 - ts_m0 < 10000000);
            ts_rate = (double)(c2 - ts_c0) / (double)(m2 - ts_m0);
            if (ts_rate > 0.9999 && ts_rate < 1.0001) ts_rate = 1; /* a ns clock: realtime's */
            if (ts_rate <= 0) ts_rate = 1;
        }
    }
    ts_fn = f;
    return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, int on)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if ((unsigned)kind >= 64) return CUPTI_ERROR_NOT_COMPATIBLE;
    if (on) atomic_fetch_or(&kinds, 1ull << kind);
    else atomic_fetch_and(&kinds, ~(1ull << kind));
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { return set_kind(kind, 1); }
EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) { return set_kind(kind, 0); }

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
    if (!buffer || !rec) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*rec) {
        uint8_t *p = (uint8_t *)*rec;
        CUpti_ActivityKind k = (*rec)->kind;
        size_t sz = k == CUPTI_ACTIVITY_KIND_MEMCPY   ? sizeof(CUpti_ActivityMemcpy6)
                    : k == CUPTI_ACTIVITY_KIND_MEMSET ? sizeof(CUpti_ActivityMemset4)
                    : k == CUPTI_ACTIVITY_KIND_DRIVER ? sizeof(CUpti_ActivityAPI)
                    : k == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
                        ? sizeof(CUpti_ActivityExternalCorrelation)
                        : sizeof(CUpti_ActivityKernel10);
        off = (size_t)(p - buffer) + ALIGN8(sz);
    }
    if (off + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(buffer + off);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
    (void)ctx, (void)stream;
    if (!n) return CUPTI_ERROR_INVALID_PARAMETER;
    *n = atomic_exchange(&dropped, 0);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    size_t size, valid;
    pthread_mutex_lock(&lock);
    uint8_t *b = take_buffer(&size, &valid);
    pthread_mutex_unlock(&lock);
    complete(b, size, valid);
    return CUPTI_SUCCESS;
}

static _Atomic uint32_t period_ms;
static pthread_once_t period_once = PTHREAD_ONCE_INIT;

/* Completes the current buffer every period_ms when it holds records (0: sleeps and checks). */
static void *period_thread(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t ms = atomic_load(&period_ms);
        struct timespec ts = {(ms ? ms : 100) / 1000, (long)((ms ? ms : 100) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (!atomic_load(&period_ms))
            continue;
        size_t size = 0, valid = 0;
        uint8_t *b = NULL;
        pthread_mutex_lock(&lock);
        if (buf && buf_used)
            b = take_buffer(&size, &valid);
        pthread_mutex_unlock(&lock);
        complete(b, size, valid);
    }
    return NULL;
}

static void period_start(void)
{
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* CUPTI's thread takes no signals */
    pthread_create(&t, &a, period_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t ms)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if (mode == 3) return CUPTI_SUCCESS; /* SIMGPU_CUPTI=late: buffers complete only when full */
    atomic_store(&period_ms, ms);
    if (ms)
        pthread_once(&period_once, period_start);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *id)
{
    static simgpu_node_id_fn node_id;
    if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
    if (!node_id) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
            h ? (CUresult(*)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *))dlsym(h, "cuGetProcAddress_v2")
              : NULL;
        void *fn = NULL;
        if (gpa) gpa(SIMGPU_NODE_ID_NAME, &fn, 13000, 0, NULL);
        node_id = (simgpu_node_id_fn)fn;
        if (h) dlclose(h);
    }
    unsigned long long v = 0;
    if (!node_id || node_id(node, &v) != CUDA_SUCCESS) return CUPTI_ERROR_INVALID_PARAMETER;
    *id = v;
    return CUPTI_SUCCESS;
}

/* ---- what Kineto (torch.profiler) calls besides ------------------------------------------- */

EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                          uint64_t id)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if ((unsigned)kind >= EXT_KINDS || kind == CUPTI_EXTERNAL_CORRELATION_KIND_INVALID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (ext_depth[kind] < EXT_DEPTH) ext_stack[kind][ext_depth[kind]] = id;
    ext_depth[kind]++;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                         uint64_t *last)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if ((unsigned)kind >= EXT_KINDS || !ext_depth[kind]) return CUPTI_ERROR_QUEUE_EMPTY;
    int d = --ext_depth[kind];
    if (last) *last = d < EXT_DEPTH ? ext_stack[kind][d] : 0;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    if (cbid >= 1024) return CUPTI_ERROR_INVALID_PARAMETER;
    api_off[cbid] = !enable;
    return CUPTI_SUCCESS;
}

/* No RUNTIME records are made (api_record), so there is nothing to filter. */
EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    (void)cbid, (void)enable;
    return NO_GPU() ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
}

/* Event records are zero-length ops whose times the simulator knows: nothing to switch on. */
EXPORT CUptiResult cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable)
{
    (void)enable;
    return NO_GPU() ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
}

/* Buffer sizes, pool limits, per-thread buffers: accepted and ignored (one global buffer). */
EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    (void)attr;
    if (NO_GPU()) return CUPTI_ERROR_UNKNOWN;
    return size && value ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
    if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        for (size_t i = 0; i < sizeof cbids / sizeof cbids[0]; i++)
            if ((uint32_t)cbids[i].cbid == cbid) {
                *name = cbids[i].name;
                return CUPTI_SUCCESS;
            }
    return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiFinalize(void)
{
    return CUPTI_SUCCESS;
}
