// More distinct launch configurations than the writer keeps templates for (TKP_TMPL_MAX, 65536):
// kernel k_a with grid (i+1, 1, 1) for i < N, then the first 100 configurations again, then a
// second kernel with every dimension its own value (grid (i+1, 2, 3), block (16, 2, 2): each of
// the six lands in its own place of the ring's slot and of the record). Past the table's end the writer falls back to full LAUNCH records; every launch
// must decode with its exact configuration either way (configs_check.py).
//
// usage: configs N
#include <cstdio>
#include <cstdlib>

extern "C" __global__ void k_a(int i) { (void)i; }
extern "C" __global__ void k_b(int i) { (void)i; }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 70000;
    for (long i = 0; i < n; i++) k_a<<<(unsigned)(i + 1), 32>>>((int)i);
    for (long i = 0; i < 100; i++) k_a<<<(unsigned)(i + 1), 32>>>((int)i);
    for (long i = 0; i < 100; i++) k_b<<<dim3((unsigned)(i + 1), 2, 3), dim3(16, 2, 2), 128>>>((int)i);
    cudaDeviceSynchronize();
    printf("configs: %ld launches\n", n + 200);
    return 0;
}
