/* simgpu driver: streams, the legacy stream, per-thread streams, events, synchronisation, cost
 * model and fault knobs. All comparisons are of simulated times, exactly; work is queued behind
 * a 10 s "gate" kernel so its start times do not depend on the host's speed. */
#include <pthread.h>

#include "unit_util.h"

static struct rec R[256];

/* Default cost model (README "Cost model"): base + per_block * blocks. */
Test(cost, default_families)
{
    unit_setup(NULL);
    launch(kernel("rmsnorm_kernel"), 10, NULL);     /* norm: 1500 + 4*10 */
    launch(kernel("flash_attn_fwd"), 8, NULL);      /* attention: 6000 + 40*8 */
    launch(kernel("_Z8mystery1v"), 6, NULL);        /* other: 2000 + 5*6 */
    launch(kernel("embed_tokens"), 1, NULL);        /* embedding: 1500 + 3 */
    launch(kernel("silu_and_mul"), 100, NULL);      /* activation: 1000 + 2*100 */
    struct simgpu_launch_info li = {SIMGPU_VIA_LIBRARY, 989000.0 * 1000, 4800.0 * 500};
    simgpu_set_launch_info_fn set;
    CK(cuGetProcAddress(SIMGPU_SET_LAUNCH_INFO_NAME, (void **)&set, 13000, 0, NULL));
    set(&li);
    launch(kernel("cublas_gemm_bf16"), 64, NULL);   /* roofline: 4000 + max(1000, 500) */
    int n = read_log(R, 256);
    cr_assert_eq(n, 6);
    long long want[] = {1540, 6320, 2030, 1503, 1200, 5000};
    for (int i = 0; i < n; i++)
        cr_assert_eq(R[i].end - R[i].start, want[i], "%s: %lld", R[i].name, R[i].end - R[i].start);
    cr_assert_str_eq(R[5].via, "library");
    cr_assert_str_eq(R[0].via, "driver");
    cr_assert_eq(R[5].flops, 989000.0 * 1000);
}

Test(cost, cost_file_overrides)
{
    unit_setup("mine ^my_ 100 10\nset latency_ns 0\nset pageable_bw 10");
    launch(kernel("my_norm"), 3, NULL); /* file families come first: 100 + 10*3 */
    launch(kernel("rmsnorm"), 3, NULL); /* defaults still apply: 1500 + 4*3 */
    static char buf[1000];
    CUdeviceptr d;
    CK(cuMemAlloc(&d, sizeof buf));
    CK(cuMemcpyHtoD(d, buf, sizeof buf)); /* pageable: 1500 + 1000/10 */
    int n = read_log(R, 256);
    cr_assert_eq(n, 3);
    cr_assert_eq(R[0].end - R[0].start, 130);
    cr_assert_eq(R[1].end - R[1].start, 1512);
    cr_assert_eq(R[2].end - R[2].start, 1600);
    cr_assert_str_eq(R[2].kind, "copy");
    cr_assert_str_eq(R[2].dir, "HtoD");
    cr_assert(!R[2].pinned);
}

Test(stream, fifo_order)
{
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    launch(kernel("gate"), 1, s);
    for (int i = 1; i <= 5; i++)
        launch(kernel("rmsnorm"), (unsigned)i, s);
    int n = read_log(R, 256);
    cr_assert_eq(n, 6);
    for (int i = 1; i < n; i++) {
        cr_assert_eq(R[i].start, R[i - 1].end, "op %d starts when op %d ends", i, i - 1);
        cr_assert_eq(R[i].stream, 1);
        cr_assert_eq(R[i].seq, R[i - 1].seq + 1);
    }
    cr_assert_eq(R[0].end - R[0].start, GATE_NS);
}

Test(stream, legacy_vs_blocking_and_nonblocking)
{
    unit_setup(NULL);
    CUstream blocking, nonblocking;
    CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    launch(kernel("gate"), 1, blocking);        /* 0 */
    launch(kernel("norm_a"), 1, NULL);          /* 1: legacy waits for the blocking stream */
    launch(kernel("norm_b"), 1, blocking);      /* 2: blocking waits for the legacy op */
    launch(kernel("gate"), 1, nonblocking);     /* 3 */
    launch(kernel("norm_c"), 1, CU_STREAM_LEGACY); /* 4: does not wait for the non-blocking gate */
    launch(kernel("norm_d"), 1, nonblocking);   /* 5: nor does the non-blocking stream wait for legacy */
    long long host = now_ns();
    int n = read_log(R, 256);
    cr_assert_eq(n, 6);
    cr_assert_eq(R[1].start, R[0].end);
    cr_assert_eq(R[1].stream, 0);
    cr_assert_eq(R[2].start, R[1].end);
    cr_assert_eq(R[4].start, R[2].end, "legacy waits for the blocking stream's tail only");
    cr_assert_eq(R[5].start, R[3].end);
    cr_assert_lt(R[3].start, host + 10000000LL);
    cr_assert_str_eq(R[4].handle, "0x1");
    cr_assert_str_eq(R[1].handle, "0x0");
}

static void *thread_launch(void *arg)
{
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    launch(kernel("norm_thread"), 1, CU_STREAM_PER_THREAD);
    *(int *)arg = 1;
    return NULL;
}

Test(stream, per_thread_default_stream)
{
    unit_setup(NULL);
    launch(kernel("gate"), 1, NULL);                            /* 0: legacy */
    launch(kernel("norm_pt"), 1, CU_STREAM_PER_THREAD);         /* 1: waits for legacy */
    __typeof__(&cuLaunchKernel) launch_ptsz; /* cuLaunchKernel_ptsz, as cudart gets it */
    CK(cuGetProcAddress("cuLaunchKernel", (void **)&launch_ptsz, 12000,
                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CK(launch_ptsz(kernel("norm_pt2"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)); /* 2 */
    int done = 0;
    pthread_t t;
    pthread_create(&t, NULL, thread_launch, &done);             /* 3: another thread's stream */
    pthread_join(t, NULL);
    cr_assert(done);
    int n = read_log(R, 256);
    cr_assert_eq(n, 4);
    cr_assert_eq(R[0].stream, 0);
    cr_assert_neq(R[1].stream, 0);
    cr_assert_eq(R[2].stream, R[1].stream, "0 in a _ptsz call is the per-thread stream");
    cr_assert_neq(R[3].stream, R[1].stream);
    cr_assert_eq(R[1].start, R[0].end, "per-thread streams are blocking");
    cr_assert_eq(R[2].start, R[1].end);
    cr_assert_eq(R[3].start, R[0].end);
    cr_assert_str_eq(R[1].handle, "0x2");
}

Test(event, elapsed_time_equals_model)
{
    unit_setup("wait ^waitgate 200000000 0"); /* a 200 ms gate: short enough to sync on */
    CUstream s;
    CUevent a, b;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    launch(kernel("waitgate"), 1, s);
    CK(cuEventRecord(a, s));           /* recorded when the stream reaches it: the gate's end */
    launch(kernel("rmsnorm"), 100, s); /* 1900 */
    launch(kernel("rope"), 10, s);     /* 1230 */
    CK(cuEventRecord(b, s));
    CK(cuEventSynchronize(b));
    float ms;
    CK(cuEventElapsedTime(&ms, a, b));
    cr_assert_eq(ms, (float)(3130 / 1e6));
    int n = read_log(R, 256);
    cr_assert_eq(n, 3);
    cr_assert_eq(R[1].start, R[0].end);
    cr_assert_eq(R[2].end - R[1].start, 1900 + 1230);
    CK(cuEventQuery(b));
}

Test(event, query_not_ready_until_time_passes)
{
    unit_setup(NULL);
    CUstream s;
    CUevent e;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e, 0));
    launch(kernel("gate"), 1, s);
    CK(cuEventRecord(e, s));
    cr_assert_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    cr_assert_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    float ms;
    CUevent e2;
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e2, s));
    cr_assert_eq(cuEventElapsedTime(&ms, e, e2), CUDA_ERROR_INVALID_HANDLE);
}

Test(event, wait_event_orders_streams)
{
    unit_setup(NULL);
    CUstream s1, s2;
    CUevent e;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    launch(kernel("gate"), 1, s1);
    CK(cuEventRecord(e, s1));
    CK(cuStreamWaitEvent(s2, e, 0));
    launch(kernel("rmsnorm"), 1, s2);
    int n = read_log(R, 256);
    cr_assert_eq(n, 2);
    cr_assert_eq(R[1].start, R[0].end);
    cr_assert_eq(R[1].stream, 2);
}

/* Host-blocking calls return only once the simulated end has passed on CLOCK_MONOTONIC:
 * deterministic, since the wait is an absolute sleep. */
Test(sync, calls_wait_for_simulated_end)
{
    unit_setup("long ^long_ 20000000 0"); /* 20 ms */
    CUstream s;
    CUevent e;
    CK(cuStreamCreate(&s, 0));
    CK(cuEventCreate(&e, 0));
    launch(kernel("long_a"), 1, s);
    CK(cuStreamSynchronize(s));
    long long t1 = now_ns();
    launch(kernel("long_b"), 1, s);
    CK(cuEventRecord(e, s));
    CK(cuEventSynchronize(e));
    long long t2 = now_ns();
    launch(kernel("long_c"), 1, NULL);
    CK(cuCtxSynchronize());
    long long t3 = now_ns();
    static char host[4096];
    CUdeviceptr d;
    CK(cuMemAlloc(&d, sizeof host));
    launch(kernel("long_d"), 1, NULL);
    CK(cuMemcpyDtoH(host, d, sizeof host)); /* queued behind long_d on the legacy stream */
    long long t4 = now_ns();
    int n = read_log(R, 256);
    cr_assert_eq(n, 5);
    cr_assert_geq(t1, R[0].end);
    cr_assert_geq(t2, R[1].end);
    cr_assert_geq(t3, R[2].end);
    cr_assert_eq(R[4].start, R[3].end);
    cr_assert_geq(t4, R[4].end);
    cr_assert_eq(cuStreamQuery(s), CUDA_SUCCESS);
    cr_assert_eq(cuEventQuery(e), CUDA_SUCCESS);
}

Test(fault, slow_from_nth_launch)
{
    setenv("SIMGPU_SLOW", "norm:2:3", 1);
    unit_setup(NULL);
    for (int i = 0; i < 4; i++)
        launch(kernel("rmsnorm"), 10, NULL);
    launch(kernel("rope"), 10, NULL);
    int n = read_log(R, 256);
    cr_assert_eq(n, 5);
    long long want[] = {1540, 1540, 4620, 4620, 1230};
    for (int i = 0; i < n; i++)
        cr_assert_eq(R[i].end - R[i].start, want[i], "launch %d", i);
    cr_assert(!R[1].faulted);
    cr_assert(R[2].faulted);
}

Test(fault, jitter_bounded_and_flagged)
{
    setenv("SIMGPU_JITTER", "7:10", 1);
    unit_setup(NULL);
    for (int i = 0; i < 20; i++)
        launch(kernel("rmsnorm"), 10, NULL);
    int n = read_log(R, 256);
    cr_assert_eq(n, 20);
    int differs = 0;
    for (int i = 0; i < n; i++) {
        long long d = R[i].end - R[i].start;
        cr_assert(d >= 1386 && d <= 1694, "%lld outside 1540 +-10%%", d);
        cr_assert(R[i].faulted);
        differs |= d != 1540;
    }
    cr_assert(differs);
}

Test(fault, stall_every_kth_embed)
{
    setenv("SIMGPU_STALL", "3:100000", 1);
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    launch(kernel("gate"), 1, s);
    for (int i = 0; i < 6; i++) {
        launch(kernel("embed_tokens"), 1, s);
        launch(kernel("rmsnorm"), 1, s);
    }
    int n = read_log(R, 256);
    cr_assert_eq(n, 13);
    for (int i = 1; i < n; i++) {
        int embed_no = (i + 1) / 2; /* 1-based count of embed launches */
        long long gap = (i % 2 == 1 && embed_no % 3 == 0) ? 100000 : 0;
        cr_assert_eq(R[i].start - R[i - 1].end, gap, "op %d (%s)", i, R[i].name);
    }
}

/* SIMGPU_API_NS: a launch call, a graph launch and a copy call each return no earlier than NS
 * after their entry (a lower bound: no timing luck), and GPU time is not moved by it (the kernels
 * behind the gate start at its end as without the knob). */
Test(fault, api_ns_holds_each_launch_call)
{
    setenv("SIMGPU_API_NS", "3000000", 1);
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CUfunction gate = kernel("gate"), norm = kernel("rmsnorm");
    long long t0 = now_ns();
    launch(gate, 1, s);
    long long t1 = now_ns();
    launch(norm, 1, s);
    long long t2 = now_ns();
    static char buf[64];
    CUdeviceptr d;
    CK(cuMemAlloc(&d, sizeof buf));
    long long t2a = now_ns();
    CK(cuMemcpyHtoDAsync(d, buf, sizeof buf, s));
    long long t3 = now_ns();
    cr_assert_geq(t1 - t0, 3000000, "launch call %lld ns", t1 - t0);
    cr_assert_geq(t2 - t1, 3000000, "launch call %lld ns", t2 - t1);
    cr_assert_geq(t3 - t2a, 3000000, "copy call %lld ns", t3 - t2a);
    int n = read_log(R, 256);
    cr_assert_eq(n, 3);
    cr_assert_eq(R[1].start, R[0].end, "rmsnorm queued behind the gate as without the knob");
}

Test(zero, zero_mode_costs_nothing)
{
    setenv("SIMGPU_ZERO", "1", 1);
    unit_setup(NULL);
    launch(kernel("gate"), 1, NULL);
    launch(kernel("rmsnorm"), 1000, NULL);
    CK(cuCtxSynchronize()); /* would take 10 s otherwise */
    int n = read_log(R, 256);
    cr_assert_eq(n, 2);
    cr_assert_eq(R[0].end, R[0].start);
    cr_assert_eq(R[1].end, R[1].start);
}
