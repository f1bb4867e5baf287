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
//
// launchloop N B P paired: the shim's cost measured within one process. Batches alternate between
// two ways of making the very same call, __cudaLaunchKernel(kernel, 1, 32, args, 0, stream): as
// the program links it (under LD_PRELOAD, the shim's export) and through the address that
// libcudart.so.13 itself defines (dlsym on its handle, which a preload does not interpose). The
// order within each pair of batches alternates too. Two processes differ by a few ns per launch
// from where their code and data fall (the run-to-run spread on a VM is larger than the shim's
// cost); two batches a few ms apart in one process differ by the shim. Prints the hooked and
// direct means and the median over pairs of (hooked - direct) per launch.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <unistd.h>
#include <vector>

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

typedef cudaError_t (*launch_fn)(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);

static double batch_ns(launch_fn f, cudaKernel_t k, long todo, cudaStream_t s)
{
    int x = 0;
    void *args[] = {&x};
    double t0 = now_ns();
    for (long i = 0; i < todo; i++) f(k, dim3(1), dim3(32), args, 0, s);
    cudaStreamSynchronize(s);
    return now_ns() - t0;
}

static int run_paired(long n, long batch, long pause_us, cudaStream_t s)
{
    void *rt = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    launch_fn direct = rt ? (launch_fn)dlsym(rt, "__cudaLaunchKernel") : nullptr;
    cudaKernel_t k;
    if (!direct || __cudaGetKernel(&k, (const void *)empty_kernel) != cudaSuccess) {
        fprintf(stderr, "launchloop: no libcudart.so.13 __cudaLaunchKernel to call directly\n");
        return 2;
    }
    launch_fn hooked = __cudaLaunchKernel;
    std::vector<double> diff;
    double th = 0, td = 0;
    long pairs = n / (2 * batch) > 0 ? n / (2 * batch) : 1;
    for (long p = 0; p < pairs; p++) {
        double h, d;
        if (p & 1) {
            d = batch_ns(direct, k, batch, s);
            if (pause_us) usleep(pause_us);
            h = batch_ns(hooked, k, batch, s);
        } else {
            h = batch_ns(hooked, k, batch, s);
            if (pause_us) usleep(pause_us);
            d = batch_ns(direct, k, batch, s);
        }
        if (pause_us) usleep(pause_us);
        th += h, td += d;
        diff.push_back((h - d) / batch);
    }
    std::sort(diff.begin(), diff.end());
    printf("%.2f ns/launch hooked, %.2f direct, %.2f added (median of %ld pairs of %ld launches)\n",
           th / (pairs * batch), td / (pairs * batch), diff[diff.size() / 2], pairs, batch);
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    long batch = argc > 2 ? atol(argv[2]) : 10000;
    long pause_us = argc > 3 ? atol(argv[3]) : 2000;
    bool paired = argc > 4 && strcmp(argv[4], "paired") == 0;
    if (n < 1 || batch < 1 || pause_us < 0 || (argc > 4 && !paired)) {
        fprintf(stderr, "usage: launchloop [N [BATCH [PAUSE_US [paired]]]]\n");
        return 2;
    }
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) {
        fprintf(stderr, "launchloop: no CUDA device\n");
        return 2;
    }
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s>>>(i); // warm-up
    cudaStreamSynchronize(s);
    if (paired) return run_paired(n, batch, pause_us, s);
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
