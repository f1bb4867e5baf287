// A plain CUDA 13 program: <<<>>> launches (nvcc 13: __cudaGetKernel + __cudaLaunchKernel), a
// copy and a sync. Run against the *real* libcudart on a machine without a GPU it fails the
// same way with and without the shim, and the shim still records its launches by name.
#include <cstdio>

__global__ void scale_kernel(float *a, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= s;
}

template <typename T> __global__ void fill_kernel(T *a, T v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = v;
}

int main()
{
    float *d = nullptr;
    cudaError_t e = cudaMalloc(&d, 1024 * sizeof(float));
    printf("cudaMalloc: %s\n", cudaGetErrorString(e));
    for (int i = 0; i < 4; i++) {
        fill_kernel<float><<<4, 256>>>(d, 1.0f, 1024);
        scale_kernel<<<4, 256>>>(d, 2.0f, 1024);
    }
    float h[4];
    e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("cudaMemcpy: %s\n", cudaGetErrorString(e));
    e = cudaDeviceSynchronize();
    fprintf(stderr, "sync: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 3;
}
