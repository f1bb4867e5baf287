// Many threads launching into tiny rings: every launch is either recorded or counted as dropped,
// never lost and never blocking. Threads exit while the writer runs, so rings are reused.
//
// usage: stress THREADS LAUNCHES_PER_THREAD
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

extern "C" __global__ void stress_kernel(int i) { (void)i; }

static long per_thread;

static void *worker(void *arg)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (long i = 0; i < per_thread; i++) stress_kernel<<<1, 32, 0, s>>>((int)(long)arg);
    return nullptr;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    per_thread = argc > 2 ? atol(argv[2]) : 100000;
    pthread_t t[1024];
    if (n < 1 || n > 1024) return 2;
    for (int i = 0; i < n; i++) pthread_create(&t[i], nullptr, worker, (void *)(long)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], nullptr);
    cudaDeviceSynchronize();
    printf("stress: %d threads x %ld launches = %ld\n", n, per_thread, n * per_thread);
    return 0;
}
