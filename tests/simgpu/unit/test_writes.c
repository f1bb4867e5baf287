/* SIMGPU_WRITES (README.md, "Kernel writes"): a named kernel writes its rule's values at the
 * pointer one of its parameters holds, at launch and at every replay of a graph node; nothing
 * else writes, and a bad destination or rule writes nothing. The values are read back with a
 * device-to-host copy, as a client reads them. */
#include "unit_util.h"

#define N 16

static int32_t host[N];

static CUdeviceptr fresh_buffer(int32_t fill)
{
    CUdeviceptr d;
    CK(cuMemAlloc(&d, N * sizeof(int32_t)));
    CK(cuMemsetD32(d, (unsigned)fill, N));
    return d;
}

static void read_back(CUdeviceptr d)
{
    CK(cuMemcpyDtoH(host, d, sizeof host));
}

/* Launches NAME with grid x GX and the parameters (other, d) as a Triton kernel would. */
static void launch_with(const char *name, unsigned gx, CUdeviceptr other, CUdeviceptr d, CUstream s)
{
    void *params[] = {&other, &d};
    CK(cuLaunchKernel(kernel(name), gx, 1, 1, 128, 1, 1, 0, s, params, NULL));
}

Test(writes, one_per_program)
{
    setenv("SIMGPU_WRITES", "num_sampled:1:i32:1", 1);
    unit_setup(NULL);
    CUdeviceptr other = fresh_buffer(-7), d = fresh_buffer(-7);
    launch_with("_get_num_sampled_and_rejected_kernel", 5, other, d, NULL);
    read_back(d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], i < 5 ? 1 : -7, "element %d: %d", i, host[i]);
    read_back(other); /* parameter 0 is not the rule's */
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], -7);
    CUdeviceptr e = fresh_buffer(-7);
    launch_with("rmsnorm_kernel", 5, other, e, NULL); /* a kernel the rule does not name */
    read_back(e);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], -7);
}

Test(writes, types_counts_and_several_rules)
{
    setenv("SIMGPU_WRITES", "pick:0:i64:-2:3,pick:1:f32:0.5,pick:1:i8:9:1", 1);
    unit_setup(NULL);
    CUdeviceptr a = fresh_buffer(0), b = fresh_buffer(0);
    launch_with("my_pick_kernel", 2, a, b, NULL);
    int64_t l[N / 2];
    CK(cuMemcpyDtoH(l, a, sizeof l));
    for (int i = 0; i < N / 2; i++)
        cr_assert_eq(l[i], i < 3 ? -2 : 0, "i64 element %d", i);
    float f[N];
    CK(cuMemcpyDtoH(f, b, sizeof f));
    unsigned char first = 9;
    cr_assert_eq(memcmp(&f[0], &first, 1), 0, "the later rule writes over the earlier one's first byte");
    cr_assert_eq(f[1], 0.5f);
    cr_assert_eq(f[2], 0.0f);
}

Test(writes, graph_node_writes_at_each_replay)
{
    setenv("SIMGPU_WRITES", "num_sampled:1:i32:1", 1);
    unit_setup(NULL);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr other = fresh_buffer(0), d = fresh_buffer(0);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch_with("num_sampled_kernel", 4, other, d, s);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    read_back(d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], 0, "a captured kernel does not execute");
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    for (int r = 0; r < 2; r++) {
        CK(cuMemsetD32(d, 0, N));
        CK(cuGraphLaunch(x, s));
        CK(cuStreamSynchronize(s));
        read_back(d);
        for (int i = 0; i < N; i++)
            cr_assert_eq(host[i], i < 4 ? 1 : 0, "replay %d element %d: %d", r, i, host[i]);
    }
}

Test(writes, bad_destination_writes_nothing)
{
    setenv("SIMGPU_WRITES", "num_sampled:1:i32:1", 1);
    unit_setup(NULL);
    CUdeviceptr other = fresh_buffer(0), d = fresh_buffer(0);
    launch_with("num_sampled", N + 1, other, d, NULL); /* one element past the allocation */
    read_back(d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], 0);
    int32_t mine[4] = {0};
    launch_with("num_sampled", 4, other, (CUdeviceptr)(uintptr_t)mine, NULL); /* not the driver's memory */
    cr_assert_eq(mine[0], 0);
    CK(cuLaunchKernel(kernel("num_sampled"), 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL)); /* no params */
    read_back(d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], 0);
}

/* A malformed SIMGPU_WRITES applies none of its rules, the well-formed one before it neither. */
static void expect_no_rule(const char *spec)
{
    setenv("SIMGPU_WRITES", spec, 1);
    unit_setup(NULL);
    CUdeviceptr other = fresh_buffer(0), d = fresh_buffer(0);
    launch_with("num_sampled", 4, other, d, NULL);
    read_back(d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host[i], 0, "%s: element %d written", spec, i);
}

Test(writes, bad_type_applies_none) { expect_no_rule("num_sampled:1:i32:1,num_sampled:1:u32:1"); }

Test(writes, sixth_field_applies_none) { expect_no_rule("num_sampled:1:i32:1,num_sampled:1:i32:1:4:9"); }
