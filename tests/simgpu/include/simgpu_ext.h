/* simgpu private extension: what a fake library tells the simulated driver about its next launch.
 *
 * The real stack has no such call; the fakes need it so that the truth log can say how a kernel
 * was launched ("runtime", "library") and so that library kernels' durations can follow their
 * shapes (roofline). A fake obtains it exactly as it obtains every driver entry point:
 *
 *     cuGetProcAddress_v2("simgpuSetLaunchInfo", &pfn, 13000, 0, NULL)
 *
 * It returns CUDA_ERROR_NOT_FOUND (and a NULL pfn) on a real driver, so the fakes keep working
 * (without shape-driven costs) if a real libcuda is ever found first. */
#ifndef SIMGPU_EXT_H
#define SIMGPU_EXT_H

#include <cuda.h>

enum simgpu_via {
    SIMGPU_VIA_DRIVER = 0,  /* default: a cuLaunchKernel[Ex] called by the program itself */
    SIMGPU_VIA_RUNTIME = 1, /* the fake libcudart launching for <<<>>> / cudaLaunchKernel* */
    SIMGPU_VIA_LIBRARY = 2, /* a fake cuBLAS / cuBLASLt / cuDNN launching its own kernel */
};

struct simgpu_launch_info {
    int via;      /* enum simgpu_via */
    double flops; /* library kernels: work, for the roofline; 0 = use the name/grid cost model */
    double bytes; /* library kernels: bytes moved, for the roofline */
};

/* Applies to the next launch made by the calling thread only, then is cleared. Accepts NULL
 * (clears). Never fails on simgpu. */
typedef CUresult (*simgpu_set_launch_info_fn)(const struct simgpu_launch_info *info);

#define SIMGPU_SET_LAUNCH_INFO_NAME "simgpuSetLaunchInfo"

#endif
