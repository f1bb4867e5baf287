/* A program that brings its own CUPTI client mid-run, as torch.profiler does when a profile
 * starts (Kineto: cuptiActivityRegisterCallbacks, no cuptiSubscribe): 3 kernels, then its client,
 * then 2 kernels it traces itself. With `early`, its client comes before any CUDA call (before
 * the shim's capture starts) and traces all 5. Linked to libcupti.so.13 like libtorch, so under the shim its
 * calls reach the shim's interposers first. Prints what its own client received. */
#include <cuda.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kernels_seen;

static void CUPTIAPI req(uint8_t **b, size_t *size, size_t *max)
{
    *size = 1 << 16;
    *b = malloc(*size);
    *max = 0;
}

static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid)
{
    (void)c, (void)s, (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
        kernels_seen += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    free(b);
}

#define CK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed\n", #x); return 1; } } while (0)

int main(int argc, char **argv)
{
    int early = argc > 1 && !strcmp(argv[1], "early");
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    if (early) {
        CK(cuptiActivityRegisterCallbacks(req, done));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    }
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, "handover-image"));
    CK(cuModuleGetFunction(&f, mod, "rmsnorm_kernel"));
    for (int i = 0; i < 3; i++) CK(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
    if (!early) {
        CK(cuptiActivityRegisterCallbacks(req, done));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    }
    for (int i = 0; i < 2; i++) CK(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
    CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    printf("own CUPTI client: %d kernel records\n", kernels_seen);
    return kernels_seen == (early ? 5 : 2) ? 0 : 3;
}
