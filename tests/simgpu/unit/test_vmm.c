/* simgpu driver: the virtual memory path of llama.cpp's ggml-cuda pool (ggml_cuda_pool_vmm): one
 * 32 GiB address reservation, physical chunks created and mapped at its end as the pool grows,
 * read/write access set on each, and the reverse at exit. Mapped ranges are device memory to
 * UVA copies (the truth log's dir). */
#include "unit_util.h"

static struct rec R[64];

Test(vmm, ggml_pool_path)
{
    unit_setup(NULL);
    int vmm = 0, posix_fd = 0; /* ggml_cuda_init takes the VMM pool only when the device says so */
    CK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CK(cuDeviceGetAttribute(&posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
    cr_assert_eq(vmm, 1);
    cr_assert_eq(posix_fd, 1);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    cr_assert_eq(gran, 2u << 20);
    const size_t reserve = 32ull << 30;
    CUdeviceptr base;
    CK(cuMemAddressReserve(&base, reserve, 0, 0, 0));
    cr_assert_eq(base % gran, 0);
    CUmemGenericAllocationHandle h[2];
    for (int i = 0; i < 2; i++) { /* the pool grows by mapping a chunk at its end */
        CUdeviceptr at = base + (size_t)i * gran;
        CK(cuMemCreate(&h[i], gran, &prop, 0));
        CK(cuMemMap(at, gran, 0, h[i], 0));
        CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CK(cuMemSetAccess(at, gran, &access, 1));
    }
    /* one copy straddling both chunks: a device address range like any other */
    static unsigned char src[4096], back[4096];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7);
    CUdeviceptr at = base + gran - 2048;
    /* cuMemcpy (UVA): the direction comes from the allocation registry */
    CK(cuMemcpy(at, (CUdeviceptr)(uintptr_t)src, sizeof src));
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)back, at, sizeof back));
    cr_assert_eq(memcmp(src, back, sizeof src), 0);
    int n = read_log(R, 64);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(R[0].dir, "HtoD");
    cr_assert_str_eq(R[1].dir, "DtoH");
    for (int i = 1; i >= 0; i--) {
        CK(cuMemUnmap(base + (size_t)i * gran, gran));
        CK(cuMemRelease(h[i]));
    }
    CK(cuMemAddressFree(base, reserve));
}

Test(vmm, rejects_unaligned)
{
    unit_setup(NULL);
    CUdeviceptr base;
    cr_assert_eq(cuMemAddressReserve(&base, 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE}};
    CUmemGenericAllocationHandle h;
    cr_assert_eq(cuMemCreate(&h, 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
}

/* cuMemAlloc's addresses are 512-byte aligned and pinned host memory page aligned, as a real
 * driver's: ggml sizes a weights buffer assuming its base aligned to 128 and places the first
 * tensor at the aligned base (with calloc's 16-byte alignment llama.cpp's model load ran out of
 * buffer by 112 bytes). */
Test(mem, allocations_aligned_as_a_driver)
{
    unit_setup(NULL);
    for (size_t size = 1; size <= (1u << 20); size = size * 7 + 3) {
        CUdeviceptr d;
        CK(cuMemAlloc(&d, size));
        cr_assert_eq(d % 512, 0, "cuMemAlloc(%zu) = %#llx", size, (unsigned long long)d);
        void *h;
        CK(cuMemHostAlloc(&h, size, 0));
        cr_assert_eq((uintptr_t)h % 4096, 0, "cuMemHostAlloc(%zu) = %p", size, h);
        cr_assert_eq(((unsigned char *)h)[size - 1], 0, "zeroed");
        CK(cuMemFreeHost(h));
        CK(cuMemFree(d));
    }
}

/* SIMGPU_VMM=0: a device without VMM, so that llama.cpp's ggml-cuda takes its legacy pool (the path
 * of a GGML_CUDA_NO_VMM build; realstack_llamacpp_bench_novmm). */
Test(vmm, a_device_without_vmm_on_request)
{
    setenv("SIMGPU_VMM", "0", 1);
    CK(cuInit(0));
    int vmm = -1;
    CK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    cr_expect_eq(vmm, 0);
    setenv("SIMGPU_VMM", "1", 1);
    CK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    cr_expect_eq(vmm, 1);
}
