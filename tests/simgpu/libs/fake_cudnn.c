/* Simulated libcudnn.so.9: handle + stream, 4-d tensor / filter / convolution descriptors,
 * cudnnConvolutionForward as one implicit-GEMM kernel, and a minimal backend API whose
 * cudnnBackendExecute launches one kernel. Kernels go to the handle's stream via the driver. */
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>

#include "simlib.h"

struct cudnnContext { cudaStream_t stream; };
struct cudnnTensorStruct { cudnnDataType_t type; int n, c, h, w; };
struct cudnnFilterStruct { cudnnDataType_t type; int k, c, h, w; };
struct cudnnConvolutionStruct { int pad_h, pad_w, u, v, dil_h, dil_w; };
struct backend_desc { cudnnBackendDescriptorType_t type; int finalized; };

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    *h = calloc(1, sizeof **h);
    return *h ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUDNN_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s)
{
    if (!h || !s)
        return CUDNN_STATUS_BAD_PARAM;
    *s = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

#define CREATE(fn, T)                                                                         \
    cudnnStatus_t fn(T *d)                                                                    \
    {                                                                                         \
        if (!d)                                                                               \
            return CUDNN_STATUS_BAD_PARAM;                                                    \
        *d = calloc(1, sizeof **d);                                                           \
        return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED; \
    }
#define DESTROY(fn, T)   \
    cudnnStatus_t fn(T d) \
    {                     \
        free(d);          \
        return CUDNN_STATUS_SUCCESS; \
    }
CREATE(cudnnCreateTensorDescriptor, cudnnTensorDescriptor_t)
CREATE(cudnnCreateFilterDescriptor, cudnnFilterDescriptor_t)
CREATE(cudnnCreateConvolutionDescriptor, cudnnConvolutionDescriptor_t)
DESTROY(cudnnDestroyTensorDescriptor, cudnnTensorDescriptor_t)
DESTROY(cudnnDestroyFilterDescriptor, cudnnFilterDescriptor_t)
DESTROY(cudnnDestroyConvolutionDescriptor, cudnnConvolutionDescriptor_t)

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w)
{
    (void)f;
    if (!d || n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnTensorStruct){t, n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w)
{
    (void)f;
    if (!d || k <= 0 || c <= 0 || h <= 0 || w <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnFilterStruct){t, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t ct)
{
    (void)mode; (void)ct;
    if (!d || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0 || pad_h < 0 || pad_w < 0)
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnConvolutionStruct){pad_h, pad_w, u, v, dil_h, dil_w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t f,
                                                    int *n, int *c, int *h, int *w)
{
    if (!cd || !x || !f || !n || !c || !h || !w || x->c != f->c)
        return CUDNN_STATUS_BAD_PARAM;
    *n = x->n;
    *c = f->k;
    *h = 1 + (x->h + 2 * cd->pad_h - ((f->h - 1) * cd->dil_h + 1)) / cd->u;
    *w = 1 + (x->w + 2 * cd->pad_w - ((f->w - 1) * cd->dil_w + 1)) / cd->v;
    return *h > 0 && *w > 0 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

static const char *dt_tag(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_HALF: return "f16f16_f16f32_f32";
    case CUDNN_DATA_BFLOAT16: return "bf16bf16_bf16f32_f32";
    case CUDNN_DATA_FLOAT: return "tf32f32_tf32f32_f32";
    default: return "f16f16_f16f32_f32";
    }
}

static size_t dt_size(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : t == CUDNN_DATA_DOUBLE ? 8 : 2; }

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
                                      void *ws, size_t wss, const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    (void)alpha; (void)algo; (void)ws; (void)wss; (void)beta;
    if (!h)
        return CUDNN_STATUS_NOT_INITIALIZED;
    int n, c, oh, ow;
    if (!yd || cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        yd->n != n || yd->c != c || yd->h != oh || yd->w != ow)
        return CUDNN_STATUS_BAD_PARAM;
    /* Implicit GEMM: M = N*Ho*Wo, N = K, K = C*R*S. */
    double gm = (double)n * oh * ow, gn = c, gk = (double)xd->c * wd->h * wd->w;
    size_t es = dt_size(xd->type);
    char name[200];
    snprintf(name, sizeof name,
             "sm90_xmma_fprop_implicit_gemm_%s_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_kernel__5x_cudnn",
             dt_tag(xd->type));
    unsigned grid[3] = {(unsigned)((gm + 127) / 128), (unsigned)((gn + 127) / 128), 1}, block[3] = {384, 1, 1};
    void *params[] = {&x, &w, &y};
    double bytes = ((double)xd->n * xd->c * xd->h * xd->w + (double)wd->k * wd->c * wd->h * wd->w + gm * gn) * es;
    return simlib_launch(SIMLIB_PATH_CUDNN, name, grid, block, 0, (CUstream)h->stream, params, 2.0 * gm * gn * gk,
                         bytes)
               ? CUDNN_STATUS_EXECUTION_FAILED
               : CUDNN_STATUS_SUCCESS;
}

/* Backend API: descriptors are accepted and kept opaque; shapes are not modelled. */
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    struct backend_desc *b = calloc(1, sizeof *b);
    if (!b)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    b->type = type;
    *d = b;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t d)
{
    return d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void *elems)
{
    (void)name; (void)type;
    if (!d || count < 0 || (count > 0 && !elems))
        return CUDNN_STATUS_BAD_PARAM;
    if (((struct backend_desc *)d)->finalized)
        return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,
                                       void *elems)
{
    (void)name; (void)type; (void)requested; (void)elems;
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    if (count)
        *count = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    ((struct backend_desc *)d)->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack)
{
    if (!h)
        return CUDNN_STATUS_NOT_INITIALIZED;
    struct backend_desc *p = plan, *v = pack;
    if (!p || !v || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR ||
        !p->finalized || !v->finalized)
        return CUDNN_STATUS_BAD_PARAM;
    unsigned grid[3] = {132, 1, 1}, block[3] = {384, 1, 1};
    void *params[] = {&plan, &pack};
    return simlib_launch(SIMLIB_PATH_CUDNN,
                         "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_kernel__5x_cudnn",
                         grid, block, 0, (CUstream)h->stream, params, 0, 0)
               ? CUDNN_STATUS_EXECUTION_FAILED
               : CUDNN_STATUS_SUCCESS;
}
