/* 64 threads make their first CUDA call at once: a plain C program on simgpu's runtime (no nvcc),
 * the way nvcc's stubs would register and launch two kernels, `step_begin` and `work`.
 *
 * usage: first_launch THREADS STEPS [nvtx]
 * Each thread waits on one barrier, then makes STEPS steps of one `step_begin` and two `work`
 * launches (with nvtx: each step inside an NVTX range "decode_step"). Under
 * TOKPROF_STEP=kernel:^step_begin$ or nvtx:^decode_step$ every thread's first launch (or range)
 * is the step detector's first use of its regex: issue 33 found it compiled there, lazily, by
 * whichever threads got there first, racing on one regex_t. The ThreadSanitizer build
 * (TOKPROF_TSAN) reports such a race; first_launch_check.py also counts the steps. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What nvcc's generated registration code calls (crt/host_runtime.h; not in a public header). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);

/* The host stubs: their addresses are the kernels' keys. */
static void step_begin_stub(void) {}
static void work_stub(void) {}

static pthread_barrier_t go;
static int steps, use_nvtx;

static int launch(void (*stub)(void))
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    return cudaLaunchKernel((const void *)stub, g, b, NULL, 0, 0) != cudaSuccess;
}

static void *thread_main(void *arg)
{
    (void)arg;
    int bad = 0;
    pthread_barrier_wait(&go);
    for (int s = 0; s < steps; s++) {
        if (use_nvtx) nvtxRangePushA("decode_step");
        bad |= launch(step_begin_stub);
        bad |= launch(work_stub);
        bad |= launch(work_stub);
        if (use_nvtx) nvtxRangePop();
    }
    bad |= cudaStreamSynchronize(0) != cudaSuccess;
    return bad ? (void *)1 : NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: first_launch THREADS STEPS [nvtx]\n");
        return 2;
    }
    int n = atoi(argv[1]);
    steps = atoi(argv[2]);
    use_nvtx = argc > 3 && !strcmp(argv[3], "nvtx");
    static char fatbin[16];
    void **h = __cudaRegisterFatBinary(fatbin);
    __cudaRegisterFunction(h, (const char *)step_begin_stub, "step_begin", "step_begin", -1, NULL,
                           NULL, NULL, NULL, NULL);
    __cudaRegisterFunction(h, (const char *)work_stub, "work", "work", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterFatBinaryEnd(h);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t || pthread_barrier_init(&go, NULL, (unsigned)n)) return 1;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, thread_main, NULL)) return 1;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    free(t);
    if (bad) fprintf(stderr, "first_launch: a CUDA call failed\n");
    return bad;
}
