// CHECK for the nvcc-built test programs (rt_prog.cu, rt_ggml.cu): a failing runtime call prints
// where and why and makes main return 1.
#ifndef SIMGPU_RT_CHECK_H
#define SIMGPU_RT_CHECK_H

#include <cstdio>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#endif
