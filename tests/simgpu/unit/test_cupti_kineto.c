/* The fake CUPTI serves torch.profiler: the calls libkineto's CuptiActivityApi makes, in its
 * order (no cuptiSubscribe; timestamp callback; buffer callbacks; per-cbid driver filter; kinds
 * CONCURRENT_KERNEL, DRIVER, EXTERNAL_CORRELATION; external ids pushed around work; a forced
 * flush), and what Kineto reads back: each kernel joined to its cuLaunchKernel record and its
 * external ids by one correlation id, the ext records first, durations on the callback's clock. */
#include <cupti.h>

#include "unit_util.h"

static uint8_t *bufs[16];
static size_t valid[16];
static int nbufs;

static void CUPTIAPI req(uint8_t **b, size_t *size, size_t *max)
{
    *size = 1 << 16;
    *b = aligned_alloc(8, *size);
    *max = 0;
}

static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t v)
{
    (void)c, (void)s, (void)size;
    if (nbufs < 16) bufs[nbufs] = b, valid[nbufs++] = v;
}

static long long mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* A clock of its own, as Kineto's TSC: 3 ticks per ns, another origin */
static uint64_t CUPTIAPI tsc3(void) { return (uint64_t)(mono() + 123456789) * 3; }

struct got {
    int n_ext, n_api, n_kern;
    CUpti_ActivityExternalCorrelation ext[8];
    CUpti_ActivityAPI api[8];
    CUpti_ActivityKernel10 kern[8];
    int order[32]; /* kinds in delivery order */
};

static void collect(struct got *g)
{
    memset(g, 0, sizeof *g);
    int k = 0;
    for (int i = 0; i < nbufs; i++) {
        CUpti_Activity *r = NULL;
        while (cuptiActivityGetNextRecord(bufs[i], valid[i], &r) == CUPTI_SUCCESS) {
            if (k < 32) g->order[k++] = r->kind;
            if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION && g->n_ext < 8)
                memcpy(&g->ext[g->n_ext++], r, sizeof g->ext[0]);
            else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER && g->n_api < 8)
                memcpy(&g->api[g->n_api++], r, sizeof g->api[0]);
            else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g->n_kern < 8)
                memcpy(&g->kern[g->n_kern++], r, sizeof g->kern[0]);
        }
    }
}

static void kineto_start(CUpti_TimestampCallbackFunc ts)
{
    cr_assert_eq(cuptiActivityRegisterTimestampCallback(ts), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityRegisterCallbacks(req, done), CUPTI_SUCCESS);
    size_t sz = sizeof(size_t), v = 8 << 20;
    cr_assert_eq(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, 0), CUPTI_SUCCESS);
}

Test(kineto, records_joined_by_correlation)
{
    unit_setup(NULL);
    kineto_start(NULL);
    CUfunction f = kernel("rmsnorm_kernel"); /* norm: 1500 + 4*10 ns */
    cr_assert_eq(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42), CUPTI_SUCCESS);
    cr_assert_eq(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 7), CUPTI_SUCCESS);
    launch(f, 10, NULL);
    uint64_t last = 0;
    cr_assert_eq(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &last), CUPTI_SUCCESS);
    cr_assert_eq(last, 7);
    cr_assert_eq(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last), CUPTI_SUCCESS);
    cr_assert_eq(last, 42);
    cr_assert_eq(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL),
                 CUPTI_ERROR_QUEUE_EMPTY);
    launch(f, 10, NULL); /* no id pushed: no ext record */
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 64));
    CK(cuMemsetD8(d, 0, 64)); /* left out by cuptiActivityEnableDriverApi(cbid, 0) */
    cr_assert_eq(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    struct got g;
    collect(&g);
    cr_assert_eq(g.n_kern, 2);
    cr_assert_eq(g.n_api, 2, "one DRIVER record per launch, none for the filtered memset");
    cr_assert_eq(g.n_ext, 2);
    cr_assert_eq(g.order[0], CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "ext records come first");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(g.ext[i].correlationId, g.kern[0].correlationId);
        cr_assert_eq(g.ext[i].externalId, g.ext[i].externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 ? 42u : 7u);
    }
    for (int i = 0; i < 2; i++) {
        const char *name = NULL;
        cr_assert_eq(g.api[i].correlationId, g.kern[i].correlationId);
        cr_assert_eq(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, g.api[i].cbid, &name), CUPTI_SUCCESS);
        cr_assert_str_eq(name, "cuLaunchKernel");
        cr_assert_eq(g.api[i].processId, (uint32_t)getpid());
        cr_assert(g.api[i].start <= g.api[i].end && g.api[i].start <= g.kern[i].start,
                  "the call starts before its kernel");
        cr_assert_eq(g.kern[i].end - g.kern[i].start, 1540);
    }
    cr_assert_neq(g.kern[0].correlationId, g.kern[1].correlationId);
}

Test(kineto, own_clock_mapped)
{
    unit_setup(NULL);
    kineto_start(tsc3);
    CUfunction f = kernel("rmsnorm_kernel");
    long long before = mono();
    launch(f, 10, NULL); /* starts at enqueue + latency_ns (2000), whenever that is */
    long long after = mono();
    cr_assert_eq(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    struct got g;
    collect(&g);
    cr_assert_eq(g.n_kern, 1);
    long long dur = (long long)(g.kern[0].end - g.kern[0].start);
    cr_assert(dur >= 3 * 1540 - 2 && dur <= 3 * 1540 + 2, "duration %lld ticks, want 3 x 1540", dur);
    /* the map's anchor is off by at most half the narrowest of 5 bracketing reads: 20 us is slack */
    long long start = (long long)g.kern[0].start, lo = (before + 2000 + 123456789) * 3 - 3 * 20000,
              hi = (after + 2000 + 123456789) * 3 + 3 * 20000;
    cr_assert(start >= lo && start <= hi, "start %lld ticks, not in [%lld, %lld]: not on the callback's clock",
              start, lo, hi);
}
