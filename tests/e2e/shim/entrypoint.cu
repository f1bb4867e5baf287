// Driver launches through pointers the program got from the runtime (cudaGetDriverEntryPointByVersion)
// and from cuGetProcAddress itself — the paths PyTorch's and Triton's own launchers use. errno
// set before a launch must be what the program sees after it. Then one cooperative launch through
// the runtime in each stream flavour: the runtime records them, and cudart's own driver call is
// passed through by where it comes from (hooks_drv.c), so each is one record, via the runtime.
#include <cerrno>
#include <cstdio>
#include <cuda.h>

extern "C" __global__ void entry_kernel(int i) { (void)i; }

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
extern "C" cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *, dim3, dim3, void **, size_t,
                                                       cudaStream_t);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

int main()
{
    cudaFunction_t f;
    if (cudaGetFuncBySymbol(&f, (const void *)entry_kernel) != cudaSuccess) return 3;
    void *p = nullptr, *g = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &q) != cudaSuccess || !p) return 4;
    if (cudaGetDriverEntryPointByVersion("cuGetProcAddress", &g, 12000, cudaEnableDefault, &q) != cudaSuccess || !g) return 5;
    void *p2 = nullptr;
    if (((gpa_fn)g)("cuLaunchKernel", &p2, 12000, 0, nullptr) != CUDA_SUCCESS || !p2) return 6;
    int x = 1;
    void *args[] = {&x};
    errno = 4242;
    for (int i = 0; i < 3; i++) ((launch_fn)p)((CUfunction)f, 1, 1, 1, 32, 1, 1, 0, 0, args, nullptr);
    int e1 = errno;
    for (int i = 0; i < 2; i++) ((launch_fn)p2)((CUfunction)f, 1, 1, 1, 32, 1, 1, 0, 0, args, nullptr);
    if (cudaLaunchCooperativeKernel((const void *)entry_kernel, dim3(2), dim3(32), args, 0, 0) != cudaSuccess)
        return 8;
    if (cudaLaunchCooperativeKernel_ptsz((const void *)entry_kernel, dim3(3), dim3(32), args, 0, 0) !=
        cudaSuccess)
        return 9;
    cudaDeviceSynchronize();
    printf("entrypoint: 7 launches, errno after launch %d\n", e1);
    return e1 == 4242 ? 0 : 7;
}
