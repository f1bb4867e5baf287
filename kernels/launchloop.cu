// launchloop: the host cost of a kernel launch, for scripts/bench.sh.
//
// Launches an empty kernel N times through the nvcc 13 stub path (__cudaLaunchKernel), syncing
// every 1024 launches, and prints the mean host nanoseconds per launch. On the simulated GPU in
// zero-cost mode (SIMGPU_ZERO=1) this is the cost of the runtime/driver path itself, so running it
// with and without LD_PRELOAD=libtokprof.so gives the shim's cost per launch.
//
// Launches come in batches of B with a pause of P microseconds between them (not timed): a
// serving loop launches in bursts, and the pause lets the shim's writer drain as it would there,
// so the figure is the cost of the launch path rather than of a ring overflowing.
//
// usage: launchloop [N [B [P]]] (defaults 1000000 launches, batches of 10000, 2000 us pauses)
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

__global__ void empty_kernel(int x)
{
    (void)x;
}

static double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    long batch = argc > 2 ? atol(argv[2]) : 10000;
    long pause_us = argc > 3 ? atol(argv[3]) : 2000;
    if (n < 1 || batch < 1 || pause_us < 0) {
        fprintf(stderr, "usage: launchloop [N [BATCH [PAUSE_US]]]\n");
        return 2;
    }
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) {
        fprintf(stderr, "launchloop: no CUDA device\n");
        return 2;
    }
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s>>>(i); // warm-up
    cudaStreamSynchronize(s);
    double timed = 0;
    for (long done = 0; done < n;) {
        long todo = n - done < batch ? n - done : batch;
        double t0 = now_ns();
        for (long i = 0; i < todo; i++) empty_kernel<<<1, 32, 0, s>>>((int)i);
        cudaStreamSynchronize(s);
        timed += now_ns() - t0;
        done += todo;
        if (pause_us) usleep(pause_us);
    }
    printf("%.2f ns/launch (%ld launches)\n", timed / n, n);
    return 0;
}
