/* simgpu driver: cuGetProcAddress (every table entry, versions, per-thread variants), device
 * queries, and memory (data really round-trips; copy directions and pinned-ness in the log). */
#include <dlfcn.h>

#include "unit_util.h"

static struct rec R_mem[32];

/* Mirrors struct simgpu_proc_entry in driver/sim.h (the table behind cuGetProcAddress). */
struct proc_entry {
    const char *name;
    int version;
    void *fn, *fn_ptsz;
    const char *sym, *sym_ptsz;
};
typedef CUresult (*table_fn)(const struct proc_entry **, size_t *);

Test(gpa, every_table_entry_resolves)
{
    CK(cuInit(0));
    table_fn get_table;
    CK(cuGetProcAddress("simgpuGetProcTable", (void **)&get_table, 13000, 0, NULL));
    const struct proc_entry *t;
    size_t n;
    CK(get_table(&t, &n));
    cr_assert_gt(n, 100);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert(lib);
    for (size_t i = 0; i < n; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult q;
        /* at the entry's own version, the answer is the entry (entries are newest first) */
        CK(cuGetProcAddress(t[i].name, &fn, t[i].version, 0, &q));
        cr_assert_eq(q, CU_GET_PROC_ADDRESS_SUCCESS);
        cr_assert_eq(fn, t[i].fn, "%s@%d", t[i].name, t[i].version);
        cr_assert_eq(dlsym(lib, t[i].sym), t[i].fn, "%s is exported", t[i].sym);
        CK(cuGetProcAddress(t[i].name, &fn, t[i].version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
        cr_assert_eq(fn, t[i].fn_ptsz ? t[i].fn_ptsz : t[i].fn, "%s per-thread", t[i].name);
        if (t[i].sym_ptsz)
            cr_assert_eq(dlsym(lib, t[i].sym_ptsz), t[i].fn_ptsz, "%s is exported", t[i].sym_ptsz);
        /* exact exported names resolve to themselves, unless they are also a base name
         * ("cuGetProcAddress" asks for the newest variant, not for the v1 symbol) */
        int is_base = 0;
        for (size_t j = 0; j < n; j++)
            is_base |= !strcmp(t[j].name, t[i].sym);
        if (!is_base) {
            CK(cuGetProcAddress(t[i].sym, &fn, 13000, 0, NULL));
            cr_assert_eq(fn, t[i].fn, "%s", t[i].sym);
        }
    }
}

/* ... and, the other way round, every symbol the library exports resolves: through the table, or
 * (for the names it does not simulate) to the export itself. */
Test(gpa, every_export_resolves)
{
    CK(cuInit(0));
    table_fn get_table;
    CK(cuGetProcAddress("simgpuGetProcTable", (void **)&get_table, 13000, 0, NULL));
    const struct proc_entry *t;
    size_t n;
    CK(get_table(&t, &n));
    Dl_info info;
    cr_assert(dladdr((void *)cuInit, &info) && info.dli_fname);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", info.dli_fname);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char line[256], sym[200];
    int exports = 0;
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "%*s %*s %199s", sym) != 1)
            continue;
        exports++;
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = !strcmp(t[i].sym, sym) || (t[i].sym_ptsz && !strcmp(t[i].sym_ptsz, sym));
        if (!found) {
            /* Not simulated by name: cuGetProcAddress still answers it, with the export itself
             * (a generated "unimplemented" stub) or, for a base name cuda.h renames
             * (cuArrayCreate -> cuArrayCreate_v2), with the newest variant. */
            void *fn = NULL;
            found = cuGetProcAddress(sym, &fn, 13000, 0, NULL) == CUDA_SUCCESS && fn;
        }
        cr_expect(found, "export %s does not resolve through cuGetProcAddress", sym);
    }
    pclose(p);
    cr_assert_gt(exports, 100);
}

Test(gpa, names_versions_and_ptsz)
{
    CK(cuInit(0));
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    struct {
        const char *name;
        int ver;
        unsigned long long flags;
        const char *want;
    } cases[] = {
        {"cuLaunchKernel", 12000, 0, "cuLaunchKernel"},
        {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuLaunchKernel_ptsz"},
        {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel"},
        {"cuLaunchKernelEx", 12000, 2, "cuLaunchKernelEx_ptsz"},
        {"cuGraphLaunch", 12000, 2, "cuGraphLaunch_ptsz"},
        {"cuMemcpyAsync", 12000, 2, "cuMemcpyAsync_ptsz"},
        {"cuMemcpyHtoDAsync", 12000, 2, "cuMemcpyHtoDAsync_v2_ptsz"},
        {"cuMemcpyHtoD", 12000, 2, "cuMemcpyHtoD_v2_ptds"},
        {"cuEventRecord", 12000, 2, "cuEventRecord_ptsz"},
        {"cuStreamSynchronize", 12000, 2, "cuStreamSynchronize_ptsz"},
        {"cuStreamWaitEvent", 12000, 2, "cuStreamWaitEvent_ptsz"},
        {"cuStreamBeginCapture", 12000, 2, "cuStreamBeginCapture_v2_ptsz"},
        {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture"},
        {"cuStreamGetCaptureInfo", 13000, 0, "cuStreamGetCaptureInfo_v3"},
        {"cuStreamGetCaptureInfo", 12000, 0, "cuStreamGetCaptureInfo_v2"},
        {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
        {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
        {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
        {"cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags"},
        {"cuEventElapsedTime", 13000, 0, "cuEventElapsedTime_v2"},
        {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
        {"simgpuSetLaunchInfo", 13000, 0, "simgpuSetLaunchInfo"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *fn = NULL;
        CK(cuGetProcAddress(cases[i].name, &fn, cases[i].ver, cases[i].flags, NULL));
        cr_assert_eq(fn, dlsym(lib, cases[i].want), "%s@%d flags %llu -> %s", cases[i].name, cases[i].ver,
                     cases[i].flags, cases[i].want);
    }
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult q;
    cr_assert_eq(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &q), CUDA_ERROR_NOT_FOUND);
    cr_assert_null(fn);
    cr_assert_eq(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_assert_eq(cuGetProcAddress("cuLaunchKernelEx", &fn, 11000, 0, &q), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    const void *tbl = (void *)1;
    CUuuid id = {{0}};
    cr_assert_eq(cuGetExportTable(&tbl, &id), CUDA_ERROR_NOT_SUPPORTED);
    /* the v1 entry point (no status argument) */
    typedef CUresult (*gpa_v1)(const char *, void **, int, cuuint64_t);
    gpa_v1 v1 = (gpa_v1)dlsym(lib, "cuGetProcAddress");
    CK(v1("cuLaunchKernel", &fn, 12000, 2));
    cr_assert_eq(fn, dlsym(lib, "cuLaunchKernel_ptsz"));
}

Test(device, basics)
{
    CK(cuInit(0));
    int v, n;
    CK(cuDriverGetVersion(&v));
    cr_assert_eq(v, 13000);
    CK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    char name[64];
    CK(cuDeviceGetName(name, sizeof name, dev));
    cr_assert_str_eq(name, "simgpu H200 (simulated)");
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    cr_assert_eq(v, 132);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    cr_assert_eq(v, 9);
    size_t mem;
    CK(cuDeviceTotalMem(&mem, dev));
    cr_assert_gt(mem, 100ull << 30);
    CUcontext ctx, cur;
    CK(cuCtxCreate(&ctx, NULL, 0, dev));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, ctx);
    const char *s;
    CK(cuGetErrorName(CUDA_ERROR_NOT_READY, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_NOT_READY");
    CUfunction f = kernel("k");
    CUmodule m;
    CK(cuFuncGetModule(&m, f));
    CK(cuKernelGetName(&s, (CUkernel)f));
    cr_assert_str_eq(s, "k");
    cr_assert_eq(kernel("k"), f, "same name, same function object");
}

Test(memory, round_trip_and_log)
{
    unit_setup(NULL);
    CUdeviceptr d1, d2;
    CK(cuMemAlloc(&d1, 4096));
    CK(cuMemAlloc(&d2, 4096));
    size_t fr, tot;
    CK(cuMemGetInfo(&fr, &tot));
    cr_assert_eq(tot - fr, 8192);
    unsigned *pinned;
    CK(cuMemAllocHost((void **)&pinned, 4096));
    static unsigned pageable[1024];
    for (int i = 0; i < 1024; i++)
        pinned[i] = (unsigned)i * 3u;
    CK(cuMemcpyHtoD(d1, pinned, 4096));                      /* 0 HtoD pinned */
    CK(cuMemcpyDtoD(d2, d1, 4096));                          /* 1 DtoD */
    CK(cuMemsetD32(d1, 0xabcdef01u, 512));                   /* 2 memset */
    CK(cuMemcpyDtoH(pageable, d2, 4096));                    /* 3 DtoH pageable */
    cr_assert_eq(pageable[1023], 1023u * 3u);
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)pageable, d1, 4096)); /* 4 unified: DtoH */
    cr_assert_eq(pageable[511], 0xabcdef01u);
    cr_assert_eq(pageable[512], 512u * 3u);
    CK(cuMemsetD8(d2, 0x5a, 10));                            /* 5 */
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CK(cuMemcpyDtoHAsync(pinned, d2, 16, s));                /* 6 DtoH pinned async */
    CK(cuStreamSynchronize(s));
    cr_assert_eq(pinned[0], 0x5a5a5a5au);
    unsigned mt;
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1));
    cr_assert_eq(mt, CU_MEMORYTYPE_DEVICE);
    int n = read_log(R_mem, 32);
    cr_assert_eq(n, 7);
    const char *dirs[] = {"HtoD", "DtoD", "", "DtoH", "DtoH", "", "DtoH"};
    int pin[] = {1, 0, 0, 0, 0, 0, 1};
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(R_mem[i].kind, dirs[i][0] ? "copy" : "memset", "%d", i);
        cr_assert_str_eq(R_mem[i].dir, dirs[i], "%d", i);
        cr_assert_eq(R_mem[i].pinned, pin[i], "%d", i);
    }
    cr_assert_str_eq(R_mem[0].name, "memcpy");
    cr_assert_eq(R_mem[0].end - R_mem[0].start, 1500 + 4096 / 50 + 1); /* 1581.92 -> 1582 */
    cr_assert_eq(R_mem[1].end - R_mem[1].start, 1502);                 /* 1500 + 4096/2400 */
    cr_assert_eq(R_mem[3].end - R_mem[3].start, 1705);                 /* 1500 + 4096/20 = 1704.8 */
    cr_assert_eq(R_mem[6].stream, 1);
    CK(cuMemFreeHost(pinned));
    CK(cuMemFree(d1));
    CK(cuMemFree(d2));
}
