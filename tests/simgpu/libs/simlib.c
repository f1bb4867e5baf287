/* Driver access and GEMM kernel selection shared by the simulated math libraries. */
#include "simlib.h"
#include "simgpu_ext.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*modload_fn)(CUmodule *, const void *);
typedef CUresult (*modfunc_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*ctxget_fn)(CUcontext *);
typedef CUresult (*ctxset_fn)(CUcontext);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*init_fn)(unsigned);

static struct {
    int ok;
    launch_fn launch;
    modload_fn modload;
    modfunc_fn modfunc;
    ctxget_fn ctxget;
    ctxset_fn ctxset;
    retain_fn retain;
    init_fn init;
    simgpu_set_launch_info_fn setinfo; /* NULL on a real driver */
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *gpa(gpa_fn f, const char *name)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (f(name, &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS)
        return NULL;
    return p;
}

static void drv_load(void)
{
    /* Like libcublas: no NEEDED entry on libcuda, one dlopen, every entry point through GPA. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return;
    gpa_fn g = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!g)
        return;
    drv.launch = (launch_fn)gpa(g, "cuLaunchKernel");
    drv.modload = (modload_fn)gpa(g, "cuModuleLoadData");
    drv.modfunc = (modfunc_fn)gpa(g, "cuModuleGetFunction");
    drv.ctxget = (ctxget_fn)gpa(g, "cuCtxGetCurrent");
    drv.ctxset = (ctxset_fn)gpa(g, "cuCtxSetCurrent");
    drv.retain = (retain_fn)gpa(g, "cuDevicePrimaryCtxRetain");
    drv.init = (init_fn)gpa(g, "cuInit");
    drv.setinfo = (simgpu_set_launch_info_fn)gpa(g, SIMGPU_SET_LAUNCH_INFO_NAME);
    drv.ok = drv.launch && drv.modload && drv.modfunc;
}

/* The runtime normally made the primary context current already; a library used first (or from
 * a fresh thread) makes it current itself, as cuBLAS does. */
static void ensure_context(void)
{
    CUcontext c = NULL;
    if (!drv.ctxget || drv.ctxget(&c) != CUDA_SUCCESS || c)
        return;
    if (drv.init)
        drv.init(0);
    if (drv.retain && drv.ctxset && drv.retain(&c, 0) == CUDA_SUCCESS)
        drv.ctxset(c);
}

/* One module per library, functions cached by name. Names are few (tens), so a linear table. */
#define MAX_FUNCS 512
static pthread_mutex_t fmu = PTHREAD_MUTEX_INITIALIZER;
static CUmodule modules[3];
static struct {
    int path;
    char name[240];
    CUfunction f;
} funcs[MAX_FUNCS];
static int nfuncs;
static const char module_images[3][32] = {"simgpu cublas kernels", "simgpu cublasLt kernels",
                                          "simgpu cudnn kernels"};

static CUfunction get_function(int path, const char *name)
{
    CUfunction f = NULL;
    pthread_mutex_lock(&fmu);
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].path == path && strcmp(funcs[i].name, name) == 0) {
            f = funcs[i].f;
            goto out;
        }
    ensure_context();
    if (!modules[path] && drv.modload(&modules[path], module_images[path]) != CUDA_SUCCESS) {
        modules[path] = NULL;
        goto out;
    }
    if (drv.modfunc(&f, modules[path], name) != CUDA_SUCCESS) {
        f = NULL;
        goto out;
    }
    if (nfuncs < MAX_FUNCS && strlen(name) < sizeof funcs[0].name) {
        funcs[nfuncs].path = path;
        strcpy(funcs[nfuncs].name, name);
        funcs[nfuncs].f = f;
        nfuncs++;
    }
out:
    pthread_mutex_unlock(&fmu);
    return f;
}

int simlib_launch(int path, const char *name, const unsigned grid[3], const unsigned block[3],
                  unsigned shmem, CUstream stream, void **params, double flops, double bytes)
{
    pthread_once(&drv_once, drv_load);
    if (!drv.ok)
        return -1;
    CUfunction f = get_function(path, name);
    if (!f)
        return -1;
    if (drv.setinfo) {
        struct simgpu_launch_info li = {SIMGPU_VIA_LIBRARY, flops, bytes};
        drv.setinfo(&li);
    }
    CUresult r = drv.launch(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, stream,
                            params, NULL);
    if (r != CUDA_SUCCESS && drv.setinfo)
        drv.setinfo(NULL);
    return r == CUDA_SUCCESS ? 0 : -1;
}

size_t simlib_dtype_size(cudaDataType t)
{
    switch (t) {
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_32F: case CUDA_R_32I: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_8I: case CUDA_R_8U: case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return 1;
    case CUDA_C_32F: return 8;
    default: return 0;
    }
}

static const char *dtype_tag(cudaDataType t)
{
    switch (t) {
    case CUDA_R_16F: return "f16";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_32F: return "f32";
    case CUDA_R_64F: return "f64";
    case CUDA_R_8I: return "s8";
    case CUDA_R_8F_E4M3: return "e4m3";
    case CUDA_R_8F_E5M2: return "e5m2";
    default: return "x";
    }
}

/* nvjet's three-letter type code: A/B type, compute, D type ("tst" = bf16 in, fp32 accumulate). */
static const char *nvjet_tag(cudaDataType a, cudaDataType c)
{
    if (a == CUDA_R_16BF)
        return c == CUDA_R_32F ? "tss" : "tst";
    if (a == CUDA_R_16F)
        return c == CUDA_R_32F ? "hss" : "hsh";
    if (a == CUDA_R_8F_E4M3 || a == CUDA_R_8F_E5M2)
        return "qqtst";
    return "sss";
}

static char op_letter(int op) { return op == 0 ? 'N' : 'T'; }

int simlib_gemm_splits(int64_t m, int64_t n, int64_t k, int64_t batch)
{
    if (batch != 1 || k < 1024 || k < 4 * m || n > 64)
        return 1;
    int64_t s = k / 256;
    return s > 4 ? 4 : (int)s;
}

static unsigned cdiv(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

int simlib_gemm_launch(int path, const struct simlib_gemm *g, CUstream stream)
{
    char name[240];
    unsigned grid[3], block[3] = {384, 1, 1};
    int splits = simlib_gemm_splits(g->m, g->n, g->k, g->batch);
    size_t es = simlib_dtype_size(g->atype), cs = simlib_dtype_size(g->ctype);
    if (!es) es = 2;
    if (!cs) cs = es;
    double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch;
    double bytes = ((double)g->m * g->k + (double)g->k * g->n) * es * g->batch + (double)g->m * g->n * cs * g->batch;
    int tm, tn, tk;

    if (path == SIMLIB_PATH_CUBLAS && (g->n == 1 || g->m == 1)) {
        /* Matrix-vector: cuBLAS's gemv kernels (mangled, as in the real cubin). */
        int64_t rows = g->n == 1 ? g->m : g->n;
        int t = g->n == 1 ? g->transa : g->transb;
        if (t != 0)
            snprintf(name, sizeof name, "_Z17gemv2T_kernel_valIiiffffLi128ELi16ELi4ELi4ELb0ELb0ELb0ELb1ELb0E18cublasGemvParamsExIi30cublasGemvTensorStridedBatchedIKfES3_S1_IfEfEEvT14_T3_S7_");
        else
            snprintf(name, sizeof name, "_Z13gemv2N_kernelIiiffffLi128ELi32ELi4ELi4ELb0ELb0ELb0ELb1ELb0E18cublasGemvParamsExIi30cublasGemvTensorStridedBatchedIKfES3_S1_IfEfEEvT14_");
        grid[0] = cdiv(rows, 16); grid[1] = 1; grid[2] = (unsigned)g->batch;
        block[0] = 128;
        splits = 1;
    } else if (path == SIMLIB_PATH_LT && g->n <= 64) {
        /* Decode-shaped: Hopper nvjet kernels. */
        tm = g->m >= 128 ? 128 : 64;
        tn = g->n <= 8 ? 8 : g->n <= 16 ? 16 : g->n <= 32 ? 32 : 64;
        snprintf(name, sizeof name, "nvjet_%s_%dx%d_64x%d_%s_v_bz_%s%c%cT", nvjet_tag(g->atype, g->ctype), tm, tn,
                 tn <= 16 ? 8 : 4, tm == 128 ? "2x1" : "1x1", splits > 1 ? "splitK_" : "",
                 op_letter(g->transa), op_letter(g->transb));
        grid[0] = cdiv(g->m, tm); grid[1] = cdiv(g->n, tn); grid[2] = (unsigned)(g->batch * splits);
    } else {
        tm = 128;
        tn = (g->m >= 256 && g->n >= 256) ? 256 : 128;
        tk = es == 4 ? 32 : 64;
        snprintf(name, sizeof name,
                 "sm90_xmma_gemm_%s%s_%sf32_f32_%c%c_n_tilesize%dx%dx%d_warpgroupsize%dx1x1_execute_segment_k_%s_kernel__5x_cublas",
                 dtype_tag(g->atype), dtype_tag(g->btype), dtype_tag(g->ctype), op_letter(g->transa) | 0x20,
                 op_letter(g->transb) | 0x20, tm, tn, tk, tn == 256 ? 2 : 1, splits > 1 ? "on" : "off");
        grid[0] = cdiv(g->m, tm); grid[1] = cdiv(g->n, tn); grid[2] = (unsigned)(g->batch * splits);
    }
    const void *a = g->A, *b = g->B;
    void *c = g->C;
    int64_t m = g->m, n = g->n, k = g->k;
    void *params[] = {&a, &b, &c, &m, &n, &k};
    if (simlib_launch(path, name, grid, block, 0, stream, params, flops, bytes))
        return -1;
    if (splits > 1) {
        unsigned rg[3] = {cdiv(g->m * g->n, 256), 1, 1}, rb[3] = {256, 1, 1};
        double rf = (double)g->m * g->n * splits, rbytes = (double)g->m * g->n * (4.0 * splits + cs);
        if (simlib_launch(path, "_Z19splitKreduce_kernelILi32ELi16EifffLb1ELb0ELb0EEv18cublasSplitKParamsIT4_EPKT2_PKT3_PS6_PKS1_SB_S8_PvlPS1_Pi",
                          rg, rb, 0, stream, params, rf, rbytes))
            return -1;
    }
    return 0;
}
