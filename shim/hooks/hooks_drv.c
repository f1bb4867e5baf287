/* CUDA driver hooks: every kernel launch that does not pass through libcudart's exports —
 * cuBLAS, cuBLASLt, cuDNN, NCCL (which link the runtime statically), static-cudart programs,
 * Triton — reaches the driver through pointers from cuGetProcAddress or a handle-scoped dlsym.
 * So the hooks are handed out in three ways:
 *   - cuGetProcAddress[_v2] is wrapped: the real driver answers first (so the pointer has the
 *     ABI the caller's cudaVersion and flags asked for), and if the answer is a function we hook,
 *     the caller gets our wrapper instead;
 *   - dlsym on the libcuda handle (Triton's path) is answered the same way (tkp_dlsym_hook);
 *   - the same names are exported for programs that link libcuda and call through the PLT.
 * cudart asks cuGetProcAddress for "cuGetProcAddress" itself; it gets our wrapper too, which is
 * how cudaGetDriverEntryPoint callers are covered. Wrapping never depends on capture state or
 * nesting: a pointer handed out once is kept for the life of the process. */
#include <cuda.h>
#undef cuGetProcAddress /* cuda.h maps it to _v2; we export both */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "core/log.h"
#include "core/real.h"
#include "gpu/graph.h"
#include "hooks/hooks.h"
#include "hooks/pinned.h"
#include "record/symtab.h"

enum {
    H_LAUNCH, H_LAUNCH_PTSZ, H_LAUNCH_EX, H_LAUNCH_EX_PTSZ, H_GRAPH_LAUNCH, H_GRAPH_LAUNCH_PTSZ,
    H_GRAPH_INST, H_GRAPH_UPDATE, H_CAPTURE_BEGIN, H_CAPTURE_BEGIN_PTSZ, H_CAPTURE_END, H_CAPTURE_END_PTSZ,
    H_STREAM_SYNC, H_STREAM_SYNC_PTSZ, H_EVENT_SYNC, H_CTX_SYNC, H_EVENT_QUERY, H_EVENT_RECORD,
    H_EVENT_RECORD_PTSZ, H_EVENT_RECORD_FLAGS, H_EVENT_RECORD_FLAGS_PTSZ, H_STREAM_WAIT,
    H_STREAM_WAIT_PTSZ, H_HTOD_ASYNC, H_HTOD_ASYNC_PTSZ, H_DTOH_ASYNC, H_DTOH_ASYNC_PTSZ, H_HTOD,
    H_HTOD_PTDS, H_DTOH, H_DTOH_PTDS, H_MEMCPY_ASYNC, H_MEMCPY_ASYNC_PTSZ, H_GPA_V2, H_GPA_V1,
    H_STREAM_IS_CAPTURING, H_STREAM_IS_CAPTURING_PTSZ, H_COUNT
};

struct drv_hook {
    const char *gpa_name; /* name as asked of cuGetProcAddress */
    int min_ver;          /* the cudaVersion from which this ABI is the one returned */
    int ptsz;             /* 1: the per-thread-default-stream form, 0: the default, -1: either */
    const char *export_name;
    void *wrapper;
};
/* Not static: the assembly entries of cuLaunchKernel(_ptsz) below read [H_LAUNCH], [H_LAUNCH_PTSZ]. */
void *_Atomic tkp_drv_real[H_COUNT];
_Static_assert(H_LAUNCH == 0 && H_LAUNCH_PTSZ == 1, "the launch entries: offsets 0 and 8");

/* The real function for hook h: the pointer we were handed, or libcuda's export. */
static inline void *real_of(int h, const char *export_name)
{
    void *p = atomic_load_explicit(&tkp_drv_real[h], memory_order_acquire);
    if (TKP_UNLIKELY(!p)) {
        p = tkp_real_driver(export_name);
        if (p) {
            void *expect = NULL;
            if (!atomic_compare_exchange_strong(&tkp_drv_real[h], &expect, p)) p = expect;
        }
    }
    return p;
}

#define REAL(h, name, type) ((type)real_of(h, name))
#define DRV_CALL(call)                                                                            \
    ({                                                                                            \
        tkp_tls.depth++;                                                                          \
        CUresult rv_ = (call);                                                                    \
        tkp_tls.depth--;                                                                          \
        rv_;                                                                                      \
    })

/* ---- launches ------------------------------------------------------------------------------ */

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
static CUresult launch(int h, const char *name, int via, const void *ret, CUfunction f,
                       unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    launch_fn real = REAL(h, name, launch_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    /* Called from libcudart's code (its launch, which our runtime hook recorded before jumping
     * to it), or nested in one of our hooks: straight through. */
    if (tkp_tls.depth || tkp_from_cudart(ret))
        return real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
    if (tkp_active()) /* errno: tkp_emit_launch keeps it */
        tkp_emit_launch(via, (uint64_t)(uintptr_t)f, TKP_KEY_FUNCTION, (uint64_t)(uintptr_t)s, gx,
                       gy, gz, bx, by, bz, smem);
    return DRV_CALL(real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra));
}

/* The exported wrappers first try the common case inline: a launch nested in one of our runtime
 * hooks (cudart's own driver call) goes straight to the driver by a tail call with the caller's
 * arguments untouched. */
#define NESTED_PASSTHROUGH(h, type, ...)                                                          \
    do {                                                                                          \
        type real_ = (type)atomic_load_explicit(&tkp_drv_real[h], memory_order_acquire);              \
        if (TKP_LIKELY(real_ && tkp_tls.depth)) return real_(__VA_ARGS__);                        \
    } while (0)

/* cuLaunchKernel and cuLaunchKernel_ptsz, which every runtime launch goes through, are the few
 * instructions of assembly below. Called from libcudart's code (its return address inside one of
 * tkp_cudart_text's two ranges, core/real.h: cudart's own driver call, already recorded by the
 * runtime hook, which jumped to cudart without a frame of its own, issue 32), the launch goes
 * straight to the driver by a tail jump with the caller's registers and stack as they are: eleven
 * arguments, five of them on the stack, which a C wrapper's tail call re-pushes. Otherwise (the
 * program's own driver launch, a library's static cudart, or a real pointer not known yet) they
 * jump to the C functions that follow, which record it (unless nested in one of our hooks, or
 * called from cudart: they check again, for when the real pointer was not known). The return
 * address is the caller's: the entries and the C functions are reached by jumps. The offsets are
 * checked above (tkp_drv_real[0] and [1]). In this file, not a .S of its own: the two call each
 * other. */
#define TKP_LAUNCH_ENTRY(name, real_off, slow)                                                    \
    "    .text\n"                                                                                 \
    "    .p2align 4\n"                                                                            \
    "    .globl " name "\n"                                                                       \
    "    .type " name ", @function\n" name ":\n"                                                 \
    "    .cfi_startproc\n"                                                                        \
    "    movq tkp_drv_real+" real_off "(%rip), %rax\n"                                           \
    "    testq %rax, %rax\n"                                                                      \
    "    jz 3f\n"                                                                                 \
    "    movq (%rsp), %r11\n"                                                                     \
    "    cmpq tkp_cudart_text(%rip), %r11\n"                                                     \
    "    jb 1f\n"                                                                                 \
    "    cmpq tkp_cudart_text+8(%rip), %r11\n"                                                   \
    "    jb 2f\n"                                                                                 \
    "1:  cmpq tkp_cudart_text+16(%rip), %r11\n"                                                  \
    "    jb 3f\n"                                                                                 \
    "    cmpq tkp_cudart_text+24(%rip), %r11\n"                                                  \
    "    jae 3f\n"                                                                                \
    "2:  jmp *%rax\n"                                                                             \
    "3:  jmp " slow "\n"                                                                          \
    "    .cfi_endproc\n"                                                                          \
    "    .size " name ", .-" name "\n"
__asm__(TKP_LAUNCH_ENTRY("cuLaunchKernel", "0", "tkp_drv_cuLaunchKernel")
            TKP_LAUNCH_ENTRY("cuLaunchKernel_ptsz", "8", "tkp_drv_cuLaunchKernel_ptsz"));
TKP_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                        CUstream s, void **params, void **extra);
CUresult tkp_drv_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream s,
                                void **params, void **extra);
CUresult tkp_drv_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                     CUstream s, void **params, void **extra);
CUresult tkp_drv_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream s,
                                void **params, void **extra)
{
    return launch(H_LAUNCH, "cuLaunchKernel", TKP_VIA_DRIVER, __builtin_return_address(0), f, gx,
                  gy, gz, bx, by, bz, smem, s, params, extra);
}
CUresult tkp_drv_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                     CUstream s, void **params, void **extra)
{
    return launch(H_LAUNCH_PTSZ, "cuLaunchKernel_ptsz", TKP_VIA_DRIVER | TKP_VIA_PTSZ,
                  __builtin_return_address(0), f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult launch_ex(int h, const char *name, int via, const void *ret,
                          const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    launch_ex_fn real = REAL(h, name, launch_ex_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    /* as launch(): a runtime that launches through cuLaunchKernelEx is told apart the same way */
    if (tkp_tls.depth || tkp_from_cudart(ret)) return real(c, f, params, extra);
    if (c && tkp_active()) /* errno: tkp_emit_launch keeps it */
        tkp_emit_launch(via, (uint64_t)(uintptr_t)f, TKP_KEY_FUNCTION,
                        (uint64_t)(uintptr_t)c->hStream, c->gridDimX, c->gridDimY, c->gridDimZ,
                        c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes);
    return DRV_CALL(real(c, f, params, extra));
}
TKP_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **x)
{
    NESTED_PASSTHROUGH(H_LAUNCH_EX, launch_ex_fn, c, f, p, x);
    return launch_ex(H_LAUNCH_EX, "cuLaunchKernelEx", TKP_VIA_DRIVER_EX,
                     __builtin_return_address(0), c, f, p, x);
}
TKP_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p,
                                          void **x)
{
    NESTED_PASSTHROUGH(H_LAUNCH_EX_PTSZ, launch_ex_fn, c, f, p, x);
    return launch_ex(H_LAUNCH_EX_PTSZ, "cuLaunchKernelEx_ptsz", TKP_VIA_DRIVER_EX | TKP_VIA_PTSZ,
                     __builtin_return_address(0), c, f, p, x);
}

typedef CUresult (*graph_launch_fn)(CUgraphExec, CUstream);
static CUresult graph_launch(int h, const char *name, int via, CUgraphExec g, CUstream s)
{
    graph_launch_fn real = REAL(h, name, graph_launch_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    if (tkp_tls.depth) return real(g, s);
    if (tkp_active() && !tkp_skip_captured((uint64_t)(uintptr_t)s, via & TKP_VIA_PTSZ)) {
        int e = errno;
        tkp_emit_graph_launch(via, (uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)s);
        errno = e;
    }
    return DRV_CALL(real(g, s));
}
TKP_EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    NESTED_PASSTHROUGH(H_GRAPH_LAUNCH, graph_launch_fn, g, s);
    return graph_launch(H_GRAPH_LAUNCH, "cuGraphLaunch", TKP_VIA_GRAPH_DRV, g, s);
}
TKP_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    NESTED_PASSTHROUGH(H_GRAPH_LAUNCH_PTSZ, graph_launch_fn, g, s);
    return graph_launch(H_GRAPH_LAUNCH_PTSZ, "cuGraphLaunch_ptsz", TKP_VIA_GRAPH_DRV | TKP_VIA_PTSZ,
                        g, s);
}

typedef CUresult (*graph_inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
TKP_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long fl)
{
    graph_inst_fn real = REAL(H_GRAPH_INST, "cuGraphInstantiateWithFlags", graph_inst_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int top = tkp_tls.depth == 0;
    CUresult rv = DRV_CALL(real(e, g, fl));
    if (top && rv == CUDA_SUCCESS && e && tkp_active()) tkp_graph_instantiated(*e, g);
    return rv;
}

typedef CUresult (*graph_update_fn)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
TKP_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    graph_update_fn real = REAL(H_GRAPH_UPDATE, "cuGraphExecUpdate_v2", graph_update_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    int top = tkp_tls.depth == 0;
    CUresult rv = DRV_CALL(real(e, g, info));
    if (top && rv == CUDA_SUCCESS && tkp_active()) tkp_graph_updated(e, g);
    return rv;
}

/* ---- capture ------------------------------------------------------------------------------- */

typedef CUresult (*capture_begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*capture_end_fn)(CUstream, CUgraph *);
static CUresult capture_begin(int h, const char *name, CUstream s, CUstreamCaptureMode m)
{
    capture_begin_fn real = REAL(h, name, capture_begin_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rv = DRV_CALL(real(s, m));
    if (rv == CUDA_SUCCESS && tkp_tls.depth == 0) atomic_fetch_add(&tkp_captures_active, 1);
    return rv;
}
static CUresult capture_end(int h, const char *name, CUstream s, CUgraph *g)
{
    capture_end_fn real = REAL(h, name, capture_end_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rv = DRV_CALL(real(s, g));
    if (tkp_tls.depth == 0 && atomic_load(&tkp_captures_active) > 0)
        atomic_fetch_sub(&tkp_captures_active, 1);
    return rv;
}
TKP_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
    return capture_begin(H_CAPTURE_BEGIN, "cuStreamBeginCapture_v2", s, m);
}
TKP_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m)
{
    return capture_begin(H_CAPTURE_BEGIN_PTSZ, "cuStreamBeginCapture_v2_ptsz", s, m);
}
TKP_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    return capture_end(H_CAPTURE_END, "cuStreamEndCapture", s, g);
}
TKP_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g)
{
    return capture_end(H_CAPTURE_END_PTSZ, "cuStreamEndCapture_ptsz", s, g);
}

typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
int tkp_stream_capturing(uint64_t stream, int ptsz)
{
    is_capturing_fn f = ptsz ? REAL(H_STREAM_IS_CAPTURING_PTSZ, "cuStreamIsCapturing_ptsz",
                                    is_capturing_fn)
                             : REAL(H_STREAM_IS_CAPTURING, "cuStreamIsCapturing", is_capturing_fn);
    if (!f) return 0;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (DRV_CALL(f((CUstream)(uintptr_t)stream, &st)) != CUDA_SUCCESS) return 0;
    return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- synchronisation ----------------------------------------------------------------------- */

typedef CUresult (*one_arg_fn)(void *);
static CUresult sync_one(int h, const char *name, int kind, void *handle)
{
    one_arg_fn real = REAL(h, name, one_arg_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    if (!tkp_should_record()) return DRV_CALL(real(handle));
    uint64_t t0 = tkp_stamp();
    CUresult rv = DRV_CALL(real(handle));
    int e = errno;
    if (rv == CUDA_SUCCESS) tkp_emit_sync(kind, (uint64_t)(uintptr_t)handle, t0, tkp_stamp());
    errno = e;
    return rv;
}
TKP_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    return sync_one(H_STREAM_SYNC, "cuStreamSynchronize", TKP_SYNC_STREAM, s);
}
TKP_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return sync_one(H_STREAM_SYNC_PTSZ, "cuStreamSynchronize_ptsz", TKP_SYNC_STREAM, s);
}
TKP_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    return sync_one(H_EVENT_SYNC, "cuEventSynchronize", TKP_SYNC_EVENT, e);
}
TKP_EXPORT CUresult cuEventQuery(CUevent e)
{
    return sync_one(H_EVENT_QUERY, "cuEventQuery", TKP_SYNC_EVENT_QUERY, e);
}
typedef CUresult (*no_arg_fn)(void);
TKP_EXPORT CUresult cuCtxSynchronize(void)
{
    no_arg_fn real = REAL(H_CTX_SYNC, "cuCtxSynchronize", no_arg_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    if (!tkp_should_record()) return DRV_CALL(real());
    uint64_t t0 = tkp_stamp();
    CUresult rv = DRV_CALL(real());
    int e = errno;
    if (rv == CUDA_SUCCESS) tkp_emit_sync(TKP_SYNC_CTX, 0, t0, tkp_stamp());
    errno = e;
    return rv;
}

typedef CUresult (*event_record_fn)(CUevent, CUstream);
typedef CUresult (*event_record_flags_fn)(CUevent, CUstream, unsigned);
static void pair(int type, uint64_t a, uint64_t b, uint64_t stream)
{
    if (tkp_should_record() && !tkp_skip_captured(stream, 0)) {
        int e = errno;
        tkp_emit_pair(type, a, b);
        errno = e;
    }
}
TKP_EXPORT CUresult cuEventRecord(CUevent ev, CUstream s)
{
    event_record_fn real = REAL(H_EVENT_RECORD, "cuEventRecord", event_record_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_EVENT_RECORD, (uintptr_t)ev, (uintptr_t)s, (uintptr_t)s);
    return DRV_CALL(real(ev, s));
}
TKP_EXPORT CUresult cuEventRecord_ptsz(CUevent ev, CUstream s)
{
    event_record_fn real = REAL(H_EVENT_RECORD_PTSZ, "cuEventRecord_ptsz", event_record_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_EVENT_RECORD, (uintptr_t)ev, (uintptr_t)s, (uintptr_t)s);
    return DRV_CALL(real(ev, s));
}
TKP_EXPORT CUresult cuEventRecordWithFlags(CUevent ev, CUstream s, unsigned f)
{
    event_record_flags_fn real =
        REAL(H_EVENT_RECORD_FLAGS, "cuEventRecordWithFlags", event_record_flags_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_EVENT_RECORD, (uintptr_t)ev, (uintptr_t)s, (uintptr_t)s);
    return DRV_CALL(real(ev, s, f));
}
TKP_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent ev, CUstream s, unsigned f)
{
    event_record_flags_fn real =
        REAL(H_EVENT_RECORD_FLAGS_PTSZ, "cuEventRecordWithFlags_ptsz", event_record_flags_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_EVENT_RECORD, (uintptr_t)ev, (uintptr_t)s, (uintptr_t)s);
    return DRV_CALL(real(ev, s, f));
}
typedef CUresult (*stream_wait_fn)(CUstream, CUevent, unsigned);
TKP_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent ev, unsigned f)
{
    stream_wait_fn real = REAL(H_STREAM_WAIT, "cuStreamWaitEvent", stream_wait_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_STREAM_WAIT, (uintptr_t)s, (uintptr_t)ev, (uintptr_t)s);
    return DRV_CALL(real(s, ev, f));
}
TKP_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent ev, unsigned f)
{
    stream_wait_fn real = REAL(H_STREAM_WAIT_PTSZ, "cuStreamWaitEvent_ptsz", stream_wait_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    pair(TKP_REC_STREAM_WAIT, (uintptr_t)s, (uintptr_t)ev, (uintptr_t)s);
    return DRV_CALL(real(s, ev, f));
}

/* ---- copies -------------------------------------------------------------------------------- */

static int rec_copy(int dir, size_t n, const void *host, CUstream s, int async)
{
    if (!tkp_should_record()) return -1;
    int e = errno;
    unsigned flags = (async ? TKP_COPY_ASYNC : 0) | (host && tkp_pinned_has(host) ? TKP_COPY_PINNED : 0);
    int marked = tkp_emit_copy(TKP_COPY_MEMCPY, dir, n, (uint64_t)(uintptr_t)s, flags,
                               (uint64_t)(uintptr_t)host);
    errno = e;
    return marked;
}
static void copy_returned(int marked, uint64_t t0)
{
    if (marked < 0) return;
    int e = errno;
    tkp_emit_copy_return(marked, t0, tkp_stamp());
    errno = e;
}

typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_async_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*memcpy_async_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

#define HTOD_ASYNC(fname, h)                                                                      \
    TKP_EXPORT CUresult fname(CUdeviceptr d, const void *src, size_t n, CUstream s)              \
    {                                                                                             \
        htod_async_fn real = REAL(h, #fname, htod_async_fn);                                      \
        if (!real) return CUDA_ERROR_NOT_FOUND;                                                   \
        rec_copy(TKP_DIR_HTOD, n, src, s, 1);                                                     \
        return DRV_CALL(real(d, src, n, s));                                                      \
    }
#define DTOH_ASYNC(fname, h)                                                                      \
    TKP_EXPORT CUresult fname(void *dst, CUdeviceptr src, size_t n, CUstream s)                  \
    {                                                                                             \
        dtoh_async_fn real = REAL(h, #fname, dtoh_async_fn);                                      \
        if (!real) return CUDA_ERROR_NOT_FOUND;                                                   \
        rec_copy(TKP_DIR_DTOH, n, dst, s, 1);                                                     \
        return DRV_CALL(real(dst, src, n, s));                                                    \
    }
#define HTOD_SYNC(fname, h, stream)                                                               \
    TKP_EXPORT CUresult fname(CUdeviceptr d, const void *src, size_t n)                          \
    {                                                                                             \
        htod_fn real = REAL(h, #fname, htod_fn);                                                  \
        if (!real) return CUDA_ERROR_NOT_FOUND;                                                   \
        int m = rec_copy(TKP_DIR_HTOD, n, src, (CUstream)(stream), 0);                            \
        uint64_t t0 = tkp_stamp();                                                               \
        CUresult rv = DRV_CALL(real(d, src, n));                                                  \
        copy_returned(m, t0);                                                                     \
        return rv;                                                                                \
    }
#define DTOH_SYNC(fname, h, stream)                                                               \
    TKP_EXPORT CUresult fname(void *dst, CUdeviceptr src, size_t n)                              \
    {                                                                                             \
        dtoh_fn real = REAL(h, #fname, dtoh_fn);                                                  \
        if (!real) return CUDA_ERROR_NOT_FOUND;                                                   \
        int m = rec_copy(TKP_DIR_DTOH, n, dst, (CUstream)(stream), 0);                            \
        uint64_t t0 = tkp_stamp();                                                               \
        CUresult rv = DRV_CALL(real(dst, src, n));                                                \
        copy_returned(m, t0);                                                                     \
        return rv;                                                                                \
    }
#define MEMCPY_ASYNC(fname, h)                                                                    \
    TKP_EXPORT CUresult fname(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)              \
    {                                                                                             \
        memcpy_async_fn real = REAL(h, #fname, memcpy_async_fn);                                  \
        if (!real) return CUDA_ERROR_NOT_FOUND;                                                   \
        rec_copy(TKP_DIR_DEFAULT, n, NULL, s, 1);                                                 \
        return DRV_CALL(real(d, src, n, s));                                                      \
    }

HTOD_ASYNC(cuMemcpyHtoDAsync_v2, H_HTOD_ASYNC)
HTOD_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, H_HTOD_ASYNC_PTSZ)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2, H_DTOH_ASYNC)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, H_DTOH_ASYNC_PTSZ)
HTOD_SYNC(cuMemcpyHtoD_v2, H_HTOD, 0)
HTOD_SYNC(cuMemcpyHtoD_v2_ptds, H_HTOD_PTDS, 2)
DTOH_SYNC(cuMemcpyDtoH_v2, H_DTOH, 0)
DTOH_SYNC(cuMemcpyDtoH_v2_ptds, H_DTOH_PTDS, 2)
MEMCPY_ASYNC(cuMemcpyAsync, H_MEMCPY_ASYNC)
MEMCPY_ASYNC(cuMemcpyAsync_ptsz, H_MEMCPY_ASYNC_PTSZ)

/* ---- cuGetProcAddress ---------------------------------------------------------------------- */

static CUresult gpa_v2_impl(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *, const void *);
TKP_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *st)
{
    return gpa_v2_impl(sym, pfn, ver, flags, st, __builtin_return_address(0));
}
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
static void *wrap_pointer(const char *sym, int ver, cuuint64_t flags, void *p, const void *from);
CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);
TKP_EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    gpa_v1_fn real = REAL(H_GPA_V1, "cuGetProcAddress", gpa_v1_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rv = real(sym, pfn, ver, flags);
    if (rv == CUDA_SUCCESS && sym && pfn && *pfn)
        *pfn = wrap_pointer(sym, ver, flags, *pfn, __builtin_return_address(0));
    return rv;
}

#define PTSZ_FLAG CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
static const struct drv_hook hooks[H_COUNT] = {
    [H_LAUNCH] = {"cuLaunchKernel", 4000, 0, "cuLaunchKernel", (void *)cuLaunchKernel},
    [H_LAUNCH_PTSZ] = {"cuLaunchKernel", 7000, 1, "cuLaunchKernel_ptsz", (void *)cuLaunchKernel_ptsz},
    [H_LAUNCH_EX] = {"cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx", (void *)cuLaunchKernelEx},
    [H_LAUNCH_EX_PTSZ] = {"cuLaunchKernelEx", 11060, 1, "cuLaunchKernelEx_ptsz",
                          (void *)cuLaunchKernelEx_ptsz},
    [H_GRAPH_LAUNCH] = {"cuGraphLaunch", 10000, 0, "cuGraphLaunch", (void *)cuGraphLaunch},
    [H_GRAPH_LAUNCH_PTSZ] = {"cuGraphLaunch", 10000, 1, "cuGraphLaunch_ptsz",
                             (void *)cuGraphLaunch_ptsz},
    [H_GRAPH_INST] = {"cuGraphInstantiateWithFlags", 11040, -1, "cuGraphInstantiateWithFlags",
                      (void *)cuGraphInstantiateWithFlags},
    [H_GRAPH_UPDATE] = {"cuGraphExecUpdate", 12000, -1, "cuGraphExecUpdate_v2",
                        (void *)cuGraphExecUpdate_v2},
    [H_CAPTURE_BEGIN] = {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2",
                         (void *)cuStreamBeginCapture_v2},
    [H_CAPTURE_BEGIN_PTSZ] = {"cuStreamBeginCapture", 10010, 1, "cuStreamBeginCapture_v2_ptsz",
                              (void *)cuStreamBeginCapture_v2_ptsz},
    [H_CAPTURE_END] = {"cuStreamEndCapture", 10000, 0, "cuStreamEndCapture",
                       (void *)cuStreamEndCapture},
    [H_CAPTURE_END_PTSZ] = {"cuStreamEndCapture", 10000, 1, "cuStreamEndCapture_ptsz",
                            (void *)cuStreamEndCapture_ptsz},
    [H_STREAM_SYNC] = {"cuStreamSynchronize", 2000, 0, "cuStreamSynchronize",
                       (void *)cuStreamSynchronize},
    [H_STREAM_SYNC_PTSZ] = {"cuStreamSynchronize", 7000, 1, "cuStreamSynchronize_ptsz",
                            (void *)cuStreamSynchronize_ptsz},
    [H_EVENT_SYNC] = {"cuEventSynchronize", 2000, -1, "cuEventSynchronize",
                      (void *)cuEventSynchronize},
    [H_CTX_SYNC] = {"cuCtxSynchronize", 2000, -1, "cuCtxSynchronize", (void *)cuCtxSynchronize},
    [H_EVENT_QUERY] = {"cuEventQuery", 2000, -1, "cuEventQuery", (void *)cuEventQuery},
    [H_EVENT_RECORD] = {"cuEventRecord", 2000, 0, "cuEventRecord", (void *)cuEventRecord},
    [H_EVENT_RECORD_PTSZ] = {"cuEventRecord", 7000, 1, "cuEventRecord_ptsz",
                             (void *)cuEventRecord_ptsz},
    [H_EVENT_RECORD_FLAGS] = {"cuEventRecordWithFlags", 11010, 0, "cuEventRecordWithFlags",
                              (void *)cuEventRecordWithFlags},
    [H_EVENT_RECORD_FLAGS_PTSZ] = {"cuEventRecordWithFlags", 11010, 1,
                                   "cuEventRecordWithFlags_ptsz",
                                   (void *)cuEventRecordWithFlags_ptsz},
    [H_STREAM_WAIT] = {"cuStreamWaitEvent", 3020, 0, "cuStreamWaitEvent", (void *)cuStreamWaitEvent},
    [H_STREAM_WAIT_PTSZ] = {"cuStreamWaitEvent", 7000, 1, "cuStreamWaitEvent_ptsz",
                            (void *)cuStreamWaitEvent_ptsz},
    [H_HTOD_ASYNC] = {"cuMemcpyHtoDAsync", 3020, 0, "cuMemcpyHtoDAsync_v2",
                      (void *)cuMemcpyHtoDAsync_v2},
    [H_HTOD_ASYNC_PTSZ] = {"cuMemcpyHtoDAsync", 7000, 1, "cuMemcpyHtoDAsync_v2_ptsz",
                           (void *)cuMemcpyHtoDAsync_v2_ptsz},
    [H_DTOH_ASYNC] = {"cuMemcpyDtoHAsync", 3020, 0, "cuMemcpyDtoHAsync_v2",
                      (void *)cuMemcpyDtoHAsync_v2},
    [H_DTOH_ASYNC_PTSZ] = {"cuMemcpyDtoHAsync", 7000, 1, "cuMemcpyDtoHAsync_v2_ptsz",
                           (void *)cuMemcpyDtoHAsync_v2_ptsz},
    [H_HTOD] = {"cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2", (void *)cuMemcpyHtoD_v2},
    [H_HTOD_PTDS] = {"cuMemcpyHtoD", 7000, 1, "cuMemcpyHtoD_v2_ptds", (void *)cuMemcpyHtoD_v2_ptds},
    [H_DTOH] = {"cuMemcpyDtoH", 3020, 0, "cuMemcpyDtoH_v2", (void *)cuMemcpyDtoH_v2},
    [H_DTOH_PTDS] = {"cuMemcpyDtoH", 7000, 1, "cuMemcpyDtoH_v2_ptds", (void *)cuMemcpyDtoH_v2_ptds},
    [H_MEMCPY_ASYNC] = {"cuMemcpyAsync", 4000, 0, "cuMemcpyAsync", (void *)cuMemcpyAsync},
    [H_MEMCPY_ASYNC_PTSZ] = {"cuMemcpyAsync", 7000, 1, "cuMemcpyAsync_ptsz",
                             (void *)cuMemcpyAsync_ptsz},
    [H_GPA_V2] = {"cuGetProcAddress", 12000, -1, "cuGetProcAddress_v2", (void *)cuGetProcAddress_v2},
    [H_GPA_V1] = {"cuGetProcAddress", 11030, -1, "cuGetProcAddress", (void *)cuGetProcAddress},
    /* queried by us, handed out unwrapped */
    [H_STREAM_IS_CAPTURING] = {NULL, 0, 0, "cuStreamIsCapturing", NULL},
    [H_STREAM_IS_CAPTURING_PTSZ] = {NULL, 0, 0, "cuStreamIsCapturing_ptsz", NULL},
};

/* Adopts p as the real function of hook h and returns our wrapper, unless h already has a
 * different real function (another ABI variant of the same name): then p is returned as is. */
static void *adopt(int h, void *p)
{
    if (p == hooks[h].wrapper) return p;
    void *expect = NULL;
    if (atomic_compare_exchange_strong(&tkp_drv_real[h], &expect, p) || expect == p)
        return hooks[h].wrapper;
    tkp_debug("%s: a second implementation %p (have %p): left unwrapped", hooks[h].export_name, p,
              expect);
    return p;
}

/* from: the return address of the cuGetProcAddress call. cudart's own driver table (asked for from
 * cudart's code, not on behalf of cudaGetDriverEntryPoint*: tkp_tls.entry_point, hooks_rt.c) gets
 * the real cuLaunchKernel(_ptsz), adopted as the entries' real function: cudart calls it only
 * from its runtime launches, which our runtime hook recorded before jumping to cudart, and which
 * reached the driver through the entry's return-address test before (nine instructions a launch,
 * issue 32). cudart fills its table at its first call, often one we do not hook (cudaMalloc):
 * tkp_note_cudart_caller tells a shared libcudart's code by its file and notes its range. A
 * runtime linked statically (cuBLAS, a static program) is not one: it gets the wrapper. */
static void *wrap_pointer(const char *sym, int ver, cuuint64_t flags, void *p, const void *from)
{
    int want_ptsz = (flags & PTSZ_FLAG) != 0;
    int best = -1;
    for (int h = 0; h < H_COUNT; h++) {
        const struct drv_hook *k = &hooks[h];
        if (!k->gpa_name || strcmp(k->gpa_name, sym) != 0 || ver < k->min_ver) continue;
        if (k->ptsz >= 0 && k->ptsz != want_ptsz) continue;
        if (best < 0 || k->min_ver > hooks[best].min_ver) best = h;
    }
    if (best < 0) return p;
    if ((best == H_LAUNCH || best == H_LAUNCH_PTSZ) && !tkp_tls.entry_point &&
        tkp_note_cudart_caller(from) && adopt(best, p) == hooks[best].wrapper)
        return p;
    return adopt(best, p);
}

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
static CUresult gpa_v2_impl(const char *sym, void **pfn, int ver, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *st, const void *from)
{
    gpa_v2_fn real = REAL(H_GPA_V2, "cuGetProcAddress_v2", gpa_v2_fn);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult rv = real(sym, pfn, ver, flags, st);
    if (rv == CUDA_SUCCESS && sym && pfn && *pfn) *pfn = wrap_pointer(sym, ver, flags, *pfn, from);
    return rv;
}

/* ---- dlsym --------------------------------------------------------------------------------- */

/* Every handle but RTLD_NEXT (forwarded by dlsym.S with the caller's identity intact). The
 * caller does not matter for the lookup of a real handle, nor for RTLD_DEFAULT in the main
 * namespace. */
TKP_EARLY void *tkp_dlsym_hook(void *handle, const char *name)
{
    void *p = tkp_real_dlsym(handle, name);
    if (!p || !name || name[0] != 'c' || name[1] != 'u') return p;
    for (int h = 0; h < H_COUNT; h++)
        if (hooks[h].wrapper && !strcmp(hooks[h].export_name, name)) return adopt(h, p);
    return p;
}
