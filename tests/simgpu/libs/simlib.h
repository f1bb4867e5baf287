/* Shared core of the simulated cuBLAS / cuBLASLt / cuDNN: reaching the driver the way the real
 * libraries do (dlopen("libcuda.so.1") + cuGetProcAddress_v2, never a link-time dependency), and
 * the GEMM kernel selection (names, grids, split-K) that all three fakes use.
 *
 * Compiled into each fake library separately; every symbol here is hidden by the version script.
 * Test fixture only. */
#ifndef SIMLIB_H
#define SIMLIB_H

#include <stdint.h>
#include <cuda.h>
#include <library_types.h>

/* Which library launches: decides the kernel families and the module the functions come from. */
enum simlib_path {
    SIMLIB_PATH_CUBLAS = 0, /* cuBLAS's own kernels (gemv, sm90_xmma for non-Lt types) */
    SIMLIB_PATH_LT = 1,     /* cuBLASLt kernels (nvjet_*, sm90_xmma_gemm_*) */
    SIMLIB_PATH_CUDNN = 2,
};

struct simlib_gemm {
    int64_t m, n, k, batch; /* C is m x n (column major, cuBLAS convention) */
    int transa, transb;     /* cublasOperation_t values: 0 N, 1 T, 2 C */
    cudaDataType atype, btype, ctype;
    const void *A, *B;
    void *C;
};

/* Launches `name` through the driver's cuLaunchKernel on `stream`, after telling the simulator
 * (simgpuSetLaunchInfo, when it exists) that a library launches it with this work.
 * Returns 0 on success, -1 if the driver is unreachable or the launch failed. */
int simlib_launch(int path, const char *name, const unsigned grid[3], const unsigned block[3],
                  unsigned shmem, CUstream stream, void **params, double flops, double bytes);

/* Number of split-K slices the fakes use for a GEMM (1 = none). When > 1, the GEMM is two
 * kernels: the main one with gridDim.z = batch * splits, then splitKreduce_kernel.
 * Rule (documented in README.md; kernels/minillm mirrors it): batch == 1, k >= 1024, k >= 4 m,
 * n <= 64  ->  min(4, k / 256) slices. */
int simlib_gemm_splits(int64_t m, int64_t n, int64_t k, int64_t batch);

/* Launches the kernel(s) of one GEMM. Returns 0 or -1. */
int simlib_gemm_launch(int path, const struct simlib_gemm *g, CUstream stream);

/* Bytes of one element of a cudaDataType (0 if unknown). */
size_t simlib_dtype_size(cudaDataType t);

#endif
