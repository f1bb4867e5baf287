/* Simulated libcudnn.so.9: handle + stream, 4-d tensor / filter / convolution descriptors,
 * cudnnConvolutionForward as one implicit-GEMM kernel, and a minimal backend API whose
 * cudnnBackendExecute launches one kernel. Kernels go to the handle's stream via the driver. */
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simlib.h"

struct cudnnContext { cudaStream_t stream; };
struct cudnnTensorStruct { cudnnDataType_t type; int n, c, h, w; };
struct cudnnFilterStruct { cudnnDataType_t type; int k, c, h, w; };
struct cudnnConvolutionStruct { int pad_h, pad_w, u, v, dil_h, dil_w; };
struct battr;
struct backend_desc {
    cudnnBackendDescriptorType_t type;
    int finalized;
    struct battr *attrs; /* what was set on it */
    int nattrs;
};

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

/* Backend API (cudnn-frontend's path, PyTorch's SDPA cuDNN attention): each descriptor is a
 * store of the attributes set on it. Getting an attribute answers what was set, except what the
 * library itself decides: heuristics offer one engine config per operation graph
 * (ENGINEHEUR_RESULTS), an engine has global index 0 and no knobs or notes, a plan needs no
 * workspace. A get of descriptor type fills the caller's descriptors (as cuDNN does) with copies.
 * Execute launches one kernel named after the graph's operations: SDPA (the SDPA_FWD operation, or
 * a matmul + reduction + matmul graph) -> a flash-attention kernel, otherwise a convolution one.
 * Shapes are not modelled (no roofline cost). */
struct battr {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t count;
    void *elems; /* count elements of the type's size */
};

static size_t battr_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_INT64: return 8;
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_FLOAT: return 4;
    default: return 4; /* enums, int32, bool */
    }
}

static struct battr *battr_find(struct backend_desc *d, cudnnBackendAttributeName_t name)
{
    for (int i = 0; i < d->nattrs; i++)
        if (d->attrs[i].name == name)
            return &d->attrs[i];
    return NULL;
}

static cudnnStatus_t battr_set(struct backend_desc *d, cudnnBackendAttributeName_t name,
                               cudnnBackendAttributeType_t type, int64_t count, const void *elems)
{
    struct battr *a = battr_find(d, name);
    if (!a) {
        struct battr *n = realloc(d->attrs, (size_t)(d->nattrs + 1) * sizeof *n);
        if (!n)
            return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        d->attrs = n;
        a = &d->attrs[d->nattrs++];
        a->elems = NULL;
    }
    size_t bytes = (size_t)count * battr_size(type);
    void *copy = bytes ? malloc(bytes) : NULL;
    if (bytes && !copy)
        return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (bytes)
        memcpy(copy, elems, bytes);
    free(a->elems);
    *a = (struct battr){name, type, count, copy};
    return CUDNN_STATUS_SUCCESS;
}

static void backend_clear(struct backend_desc *d)
{
    for (int i = 0; i < d->nattrs; i++)
        free(d->attrs[i].elems);
    free(d->attrs);
    d->attrs = NULL;
    d->nattrs = 0;
}

/* dst becomes a copy of src (type, attributes, finalized): a get of a descriptor attribute. */
static cudnnStatus_t backend_copy(struct backend_desc *dst, const struct backend_desc *src)
{
    backend_clear(dst);
    dst->type = src->type;
    dst->finalized = src->finalized;
    for (int i = 0; i < src->nattrs; i++) {
        const struct battr *a = &src->attrs[i];
        cudnnStatus_t st = battr_set(dst, a->name, a->type, a->count, a->elems);
        if (st != CUDNN_STATUS_SUCCESS)
            return st;
    }
    return CUDNN_STATUS_SUCCESS;
}

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
    if (d)
        backend_clear(d);
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
    if (!d || count < 0 || (count > 0 && !elems))
        return CUDNN_STATUS_BAD_PARAM;
    if (((struct backend_desc *)d)->finalized)
        return CUDNN_STATUS_NOT_SUPPORTED;
    return battr_set(d, name, type, count, elems);
}

/* What the graph computes, from its operations' descriptor types. */
static int graph_is_attention(const struct backend_desc *graph)
{
    const struct battr *ops = graph ? battr_find((struct backend_desc *)graph, CUDNN_ATTR_OPERATIONGRAPH_OPS) : NULL;
    int matmuls = 0, reductions = 0;
    for (int64_t i = 0; ops && i < ops->count; i++) {
        const struct backend_desc *op = ((cudnnBackendDescriptor_t *)ops->elems)[i];
        if (!op)
            continue;
        if (op->type == CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR)
            return 1;
        matmuls += op->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR;
        reductions += op->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR;
    }
    return matmuls >= 2 && reductions >= 1;
}

/* The operation graph a descriptor leads to (heuristics, engine config, engine, plan). */
static struct backend_desc *graph_of(struct backend_desc *d)
{
    static const cudnnBackendAttributeName_t links[] = {
        CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_ATTR_ENGINECFG_ENGINE,
        CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG};
    for (int depth = 0; d && depth < 4; depth++) {
        if (d->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
            return d;
        struct battr *a = NULL;
        for (size_t i = 0; i < sizeof links / sizeof links[0] && !a; i++)
            a = battr_find(d, links[i]);
        d = a && a->count > 0 && a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR ? ((cudnnBackendDescriptor_t *)a->elems)[0]
                                                                          : NULL;
    }
    return d && d->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR ? d : NULL;
}

/* Values the library decides, answered when nothing was set. 1 = answered. */
static int backend_derived(struct backend_desc *d, cudnnBackendAttributeName_t name, int64_t requested,
                           int64_t *count, void *elems, cudnnStatus_t *st)
{
    int64_t one = 1, zero = 0;
    *st = CUDNN_STATUS_SUCCESS;
    switch (name) {
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: { /* one engine config of the heuristics' graph */
        if (count)
            *count = 1;
        if (requested >= 1 && elems) {
            struct backend_desc *cfg = ((cudnnBackendDescriptor_t *)elems)[0], engine = {0};
            struct backend_desc *graph = graph_of(d);
            if (!cfg)
                return *st = CUDNN_STATUS_BAD_PARAM, 1;
            engine.type = CUDNN_BACKEND_ENGINE_DESCRIPTOR;
            engine.finalized = 1;
            cudnnBackendDescriptor_t gp = graph, ep = &engine;
            battr_set(&engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gp);
            battr_set(&engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &zero);
            backend_clear(cfg);
            cfg->type = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
            cfg->finalized = 1;
            /* the config keeps its own engine: a heap copy, owned by the config's attribute */
            struct backend_desc *own = calloc(1, sizeof *own);
            if (!own || backend_copy(own, &engine) != CUDNN_STATUS_SUCCESS)
                *st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
            backend_clear(&engine);
            (void)ep;
            if (own) {
                cudnnBackendDescriptor_t op = own;
                battr_set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
            }
        }
        return 1;
    }
    case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
        if (count)
            *count = 1;
        if (requested >= 1 && elems)
            memcpy(elems, &one, sizeof one);
        return 1;
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
    case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
        if (count)
            *count = 1;
        if (requested >= 1 && elems)
            memcpy(elems, &zero, sizeof zero);
        return 1;
    case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED: { /* int32: what a 64x128 flash tile uses */
        int32_t shmem = 98304;
        if (count)
            *count = 1;
        if (requested >= 1 && elems)
            memcpy(elems, &shmem, sizeof shmem);
        return 1;
    }
    default: return 0;
    }
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,
                                       void *elems)
{
    if (!d || requested < 0)
        return CUDNN_STATUS_BAD_PARAM;
    struct backend_desc *b = d;
    struct battr *a = battr_find(b, name);
    cudnnStatus_t st;
    if (!a && backend_derived(b, name, requested, count, elems, &st))
        return st;
    if (!a) { /* nothing set, nothing derived: no knobs, no notes, no intermediates */
        if (count)
            *count = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    int64_t n = a->count < requested ? a->count : requested;
    if (count)
        *count = a->count;
    if (!elems || !n)
        return CUDNN_STATUS_SUCCESS;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR && a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < n; i++) {
            struct backend_desc *src = ((cudnnBackendDescriptor_t *)a->elems)[i];
            struct backend_desc *dst = ((cudnnBackendDescriptor_t *)elems)[i];
            if (!dst || !src)
                return CUDNN_STATUS_BAD_PARAM;
            if ((st = backend_copy(dst, src)) != CUDNN_STATUS_SUCCESS)
                return st;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    memcpy(elems, a->elems, (size_t)n * battr_size(a->type));
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
    const char *name =
        graph_is_attention(graph_of(p))
            ? "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_bf16_knob_7_64x128x128_4x1x1_kernel0_0"
            : "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_kernel__5x_cudnn";
    return simlib_launch(SIMLIB_PATH_CUDNN, name, grid, block, 0, (CUstream)h->stream, params, 0, 0)
               ? CUDNN_STATUS_EXECUTION_FAILED
               : CUDNN_STATUS_SUCCESS;
}
