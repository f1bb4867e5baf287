// A decode-like loop whose steps are visible only to a chosen TOKPROF_STEP mode: each step is
// wrapped in an NVTX range "decode_step" and in tokprof_step_begin/end markers (looked up with
// dlsym, as a program that does not link tokprof would), begins with a `step_begin_kernel`,
// launches K more kernels, and ends with a stream sync. There is no device-to-host copy, so
// `auto` finds no token steps; `sync`, `kernel:^step_begin`, `nvtx:^decode_step` and `marker`
// must each find exactly N steps of K+1 launches.
//
// usage: stepmodes N K
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

extern "C" __global__ void step_begin_kernel(int s) { (void)s; }
extern "C" __global__ void work_kernel(int i) { (void)i; }

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5, k = argc > 2 ? atoi(argv[2]) : 3;
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_begin");
    void (*end)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_end");
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int step = 0; step < n; step++) {
        nvtxRangePushA("decode_step");
        if (begin) begin();
        step_begin_kernel<<<1, 32, 0, s>>>(step);
        for (int i = 0; i < k; i++) work_kernel<<<2, 64, 0, s>>>(i);
        cudaStreamSynchronize(s);
        if (end) end();
        nvtxRangePop();
    }
    printf("stepmodes: %d steps of %d launches, markers %s\n", n, k + 1, begin ? "found" : "absent");
    return 0;
}
