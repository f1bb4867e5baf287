// A decode-like loop whose steps are visible only to a chosen TOKPROF_STEP mode: each step is
// wrapped in an NVTX range "decode_step" and in tokprof_step_begin/end markers (looked up with
// dlsym, as a program that does not link tokprof would), begins with a `step_begin_kernel`,
// launches K more kernels, and ends with a stream sync. There is no device-to-host copy, so
// `auto` finds no token steps; `sync`, `kernel:^step_begin`, `nvtx:^decode_step` and `marker`
// must each find exactly N steps of K+1 launches. With API "domain" the ranges go through NVTX's
// domain API with a registered string, as the `nvtx` PyPI package (vLLM's NVTX scopes) does.
//
// usage: stepmodes N K [core|domain]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

extern "C" __global__ void step_begin_kernel(int s) { (void)s; }
extern "C" __global__ void work_kernel(int i) { (void)i; }

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5, k = argc > 2 ? atoi(argv[2]) : 3;
    bool domain = argc > 3 && !strcmp(argv[3], "domain");
    nvtxDomainHandle_t d = domain ? nvtxDomainCreateA("stepmodes") : NULL;
    nvtxEventAttributes_t attr = {};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = domain ? nvtxDomainRegisterStringA(d, "decode_step") : NULL;
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_begin");
    void (*end)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_end");
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int step = 0; step < n; step++) {
        if (domain) nvtxDomainRangePushEx(d, &attr);
        else nvtxRangePushA("decode_step");
        if (begin) begin();
        step_begin_kernel<<<1, 32, 0, s>>>(step);
        for (int i = 0; i < k; i++) work_kernel<<<2, 64, 0, s>>>(i);
        cudaStreamSynchronize(s);
        if (end) end();
        if (domain) nvtxDomainRangePop(d);
        else nvtxRangePop();
    }
    printf("stepmodes: %d steps of %d launches, markers %s\n", n, k + 1, begin ? "found" : "absent");
    return 0;
}
