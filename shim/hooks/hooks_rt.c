/* CUDA runtime hooks.
 *
 * Each hook is exported twice, as name@libcudart.so.12 and name@@libcudart.so.13: a cu12 PyTorch
 * and a cu13 library can share a process, and each caller must reach its own runtime (an
 * unversioned wrapper forwarding through RTLD_NEXT sends a cu13 caller into the cu12 library).
 * RT_PAIR generates the two exports around one body, hook_NAME(real, args...), each export with
 * its own lazily resolved real pointer (TKP_REAL_LAZY: relaxed atomics, as first calls race).
 *
 * nvcc 13 stubs call __cudaGetKernel + __cudaLaunchKernel(_ptsz); nvcc 12 stubs and the legacy
 * launch path call cudaLaunchKernel. Kernel names come from __cudaRegisterFunction, which runs in
 * the program's constructors before anything else of ours. */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <string.h>

#include "core/real.h"
#include "gpu/graph.h"
#include "hooks/hooks.h"
#include "hooks/pinned.h"
#include "record/symtab.h"

#define TKP_UNPACK(...) __VA_ARGS__

#define RT_PAIR(ret, name, errval, PARAMS, ARGS)                                                  \
    typedef ret(*name##_fn) PARAMS;                                                               \
    static inline __attribute__((always_inline)) ret hook_##name(name##_fn real,                  \
                                                                 TKP_UNPACK PARAMS);              \
    static name##_fn real12_##name, real13_##name;                                                \
    TKP_EXPORT ret tkp12_##name PARAMS                                                            \
    {                                                                                             \
        name##_fn real_ = TKP_REAL_LAZY(real12_##name, tkp_real_cudart(#name, "libcudart.so.12")); \
        if (TKP_UNLIKELY(!real_)) return errval;                                                  \
        return hook_##name(real_, TKP_UNPACK ARGS);                                               \
    }                                                                                             \
    TKP_EXPORT ret tkp13_##name PARAMS                                                            \
    {                                                                                             \
        name##_fn real_ = TKP_REAL_LAZY(real13_##name, tkp_real_cudart(#name, "libcudart.so.13")); \
        if (TKP_UNLIKELY(!real_)) return errval;                                                  \
        return hook_##name(real_, TKP_UNPACK ARGS);                                               \
    }                                                                                             \
    __asm__(".symver tkp12_" #name ", " #name "@libcudart.so.12");                               \
    __asm__(".symver tkp13_" #name ", " #name "@@libcudart.so.13");

#define NOSYM cudaErrorSharedObjectSymbolNotFound

/* Calls the real function as the program would, with our own nested calls (cudart -> driver)
 * passing straight through, errno as the real function left it. */
#define CALL_REAL(call)                                                                           \
    ({                                                                                            \
        tkp_tls.depth++;                                                                          \
        __typeof__(call) rv_ = (call);                                                            \
        tkp_tls.depth--;                                                                          \
        rv_;                                                                                      \
    })

/* ---- registration and kernel handles ---------------------------------------------------- */

typedef void (*register_function_fn)(void **, const char *, char *, const char *, int, uint3 *,
                                     uint3 *, dim3 *, dim3 *, int *);
static register_function_fn reg12, reg13;

static void register_function(register_function_fn real, void **h, const char *host_fun,
                              char *device_fun, const char *device_name, int tl, uint3 *tid,
                              uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    /* deviceFun is the mangled kernel name; deviceName repeats it in current nvcc. */
    tkp_sym_register(host_fun, device_fun ? device_fun : device_name);
    if (real) real(h, host_fun, device_fun, device_name, tl, tid, bid, bdim, gdim, wsize);
}

TKP_EXPORT void tkp12___cudaRegisterFunction(void **h, const char *hf, char *df, const char *dn,
                                             int tl, uint3 *tid, uint3 *bid, dim3 *bd, dim3 *gd,
                                             int *ws)
{
    register_function(TKP_REAL_LAZY(reg12, tkp_real_cudart("__cudaRegisterFunction",
                                                           "libcudart.so.12")),
                      h, hf, df, dn, tl, tid, bid, bd, gd, ws);
}
TKP_EXPORT void tkp13___cudaRegisterFunction(void **h, const char *hf, char *df, const char *dn,
                                             int tl, uint3 *tid, uint3 *bid, dim3 *bd, dim3 *gd,
                                             int *ws)
{
    register_function(TKP_REAL_LAZY(reg13, tkp_real_cudart("__cudaRegisterFunction",
                                                           "libcudart.so.13")),
                      h, hf, df, dn, tl, tid, bid, bd, gd, ws);
}
__asm__(".symver tkp12___cudaRegisterFunction, __cudaRegisterFunction@libcudart.so.12");
__asm__(".symver tkp13___cudaRegisterFunction, __cudaRegisterFunction@@libcudart.so.13");

RT_PAIR(cudaError_t, __cudaGetKernel, NOSYM, (cudaKernel_t * k, const void *f), (k, f))
static cudaError_t hook___cudaGetKernel(__cudaGetKernel_fn real, cudaKernel_t *k, const void *f)
{
    cudaError_t rv = CALL_REAL(real(k, f));
    if (rv == cudaSuccess && k && *k) tkp_sym_alias(*k, f);
    return rv;
}

/* ---- driver entry points ---------------------------------------------------------------- */

/* The driver pointers cudart hands the program: its cuGetProcAddress call, from cudart's code,
 * is told apart from cudart filling its own table by tkp_tls.entry_point (hooks_drv.c,
 * wrap_pointer: the program always gets our wrappers; cudart's own table the real
 * cuLaunchKernel). The deprecated form and the by-version one, each also _ptsz. */
#define ENTRY_POINT_BODY(call)                                                                    \
    {                                                                                             \
        tkp_tls.entry_point++;                                                                    \
        cudaError_t rv = (call);                                                                  \
        tkp_tls.entry_point--;                                                                    \
        return rv;                                                                                \
    }
#define ENTRY_POINT(name)                                                                         \
    RT_PAIR(cudaError_t, name, NOSYM,                                                             \
            (const char *sym, void **fp, unsigned long long flags,                                \
             enum cudaDriverEntryPointQueryResult *st),                                           \
            (sym, fp, flags, st))                                                                 \
    static cudaError_t hook_##name(name##_fn real, const char *sym, void **fp,                    \
                                   unsigned long long flags,                                      \
                                   enum cudaDriverEntryPointQueryResult *st)                      \
        ENTRY_POINT_BODY(real(sym, fp, flags, st))
#define ENTRY_POINT_BY_VERSION(name)                                                              \
    RT_PAIR(cudaError_t, name, NOSYM,                                                             \
            (const char *sym, void **fp, unsigned ver, unsigned long long flags,                  \
             enum cudaDriverEntryPointQueryResult *st),                                           \
            (sym, fp, ver, flags, st))                                                            \
    static cudaError_t hook_##name(name##_fn real, const char *sym, void **fp, unsigned ver,      \
                                   unsigned long long flags,                                      \
                                   enum cudaDriverEntryPointQueryResult *st)                      \
        ENTRY_POINT_BODY(real(sym, fp, ver, flags, st))
ENTRY_POINT(cudaGetDriverEntryPoint)
ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)

/* ---- launches ----------------------------------------------------------------------------- */

#define LAUNCH_BODY(via, key, kind, stream, g, b, smem, call)                                      \
    do {                                                                                          \
        if (tkp_should_record()) /* errno: tkp_emit_launch keeps it */                            \
            tkp_emit_launch(via, (uint64_t)(uintptr_t)(key), kind, (uint64_t)(uintptr_t)(stream), \
                           (g).x, (g).y, (g).z, (b).x, (b).y, (b).z, (unsigned)(smem));           \
        return CALL_REAL(call);                                                                   \
    } while (0)

/* The launches of signature (key, grid, block, args, smem, stream): every nvcc kernel<<<>>> and
 * PyTorch's. Each export is a few instructions of assembly (RT_LAUNCH_FAST below) that record
 * inline and leave by a tail jump to the real function: no frame, no depth guard around the call,
 * the caller's registers and stack handed on as they are. cudart's own driver launch inside it is
 * told apart by where it comes from (hooks_drv.c: a cuLaunchKernel called from libcudart's code
 * passes straight through; core/real.c notes that code's address range when it resolves a runtime
 * function, before any real one is called). When the fast path does not hold, the export jumps to
 * its full path, of the same signature (the stack arguments stay where they are), which records
 * as every hook does and refreshes the ring's fast bound. */
static inline __attribute__((always_inline)) void launch_full(int via, uint64_t key, int kind,
                                                              cudaStream_t s, uint64_t gxy,
                                                              uint32_t gz, uint64_t bxy,
                                                              uint32_t bz, size_t smem)
{
    if (!tkp_should_record()) return; /* errno: tkp_emit_launch keeps it */
    tkp_emit_launch(via, key, kind, (uint64_t)(uintptr_t)s, (uint32_t)gxy, (uint32_t)(gxy >> 32),
                    gz, (uint32_t)bxy, (uint32_t)(bxy >> 32), bz, (unsigned)smem);
    struct tkp_ring *r = tkp_tls.ring;
    if (r) tkp_ring_fast_refresh(r);
}

/* The parameters as the x86-64 ABI passes them: a dim3 (12 bytes, integer) is two registers, x
 * and y in the first, z in the low half of the second (its high half unspecified). Spelled so, the
 * compiler keeps them in their registers, where a dim3 parameter is copied to the stack first,
 * and hands them on untouched to the real function, declared the same way. */
#define RT_LAUNCH_PARAMS(KT)                                                                      \
    KT k, uint64_t gxy, uint64_t gz, uint64_t bxy, uint64_t bz, void **args, size_t smem,         \
        cudaStream_t s
#define RT_LAUNCH_ARGS k, gxy, gz, bxy, bz, args, smem, s

/* The fast path (issue 32), what hooks.h's tkp_launch_fast did in C, in 43 instructions where
 * GCC's code took 69 (it saved five registers and copied the two stack arguments onto themselves
 * before the tail jump, because rdtsc takes rdx, where gz is). It runs when all of this holds,
 * else the export jumps to its full path:
 *   - the gate word is 1 (state.h: capturing, no stream capturing a graph, TSC stamps, no kernel
 *     step mode, no stacks): one compare for what were five branches on settings and state;
 *   - the thread has its ring and is in none of our hooks (tkp_tls.depth);
 *   - the real function is known;
 *   - the head is below the ring's fast_limit (ring.h): a free slot, and no writer nudge due.
 * What the full path would do besides is then nothing: so the record is the same. Registers:
 * %rdi k, %rsi grid x|y, %rdx grid z, %rcx block x|y, %r8 block z, %r9 args, 8(%rsp) smem,
 * 16(%rsp) stream; %rax, %r10, %r11 are free (caller-saved, not arguments). The slot's stores go
 * first (gz and bz as 32-bit stores, so %rdx is free for the moves from memory), the TSC last,
 * then the step detector's count (record/step.h, tkp_step_on_launch), %rdx back to gz (its high
 * half is unspecified: zero is as good) and the commit: the head, which only this thread writes,
 * one higher (a plain store releases on x86: the slot's stores are seen first). The offsets are
 * checked below. */
#define TKP_STR_(x) #x
#define TKP_STR(x) TKP_STR_(x)
#define A_TLS_RING 0
#define A_TLS_DEPTH 8
#define A_TLS_LIBCALL 16
#define A_RING_HEAD 0
#define A_RING_MASK 24
#define A_RING_SLOTS 32
#define A_RING_FAST_LIMIT 48
#define A_STEP_SEG 192
#define A_STEP_LAUNCHES 196
#define A_STEP_BEGIN 208
#define A_STEP_LAST 216
_Static_assert(offsetof(struct tkp_tls, ring) == A_TLS_RING && offsetof(struct tkp_tls, depth) ==
                   A_TLS_DEPTH && offsetof(struct tkp_tls, lib_call) == A_TLS_LIBCALL,
               "tkp_tls as the launch assembly reads it");
_Static_assert(offsetof(struct tkp_ring, head) == A_RING_HEAD &&
                   offsetof(struct tkp_ring, mask) == A_RING_MASK &&
                   offsetof(struct tkp_ring, slots) == A_RING_SLOTS &&
                   offsetof(struct tkp_ring, fast_limit) == A_RING_FAST_LIMIT,
               "tkp_ring as the launch assembly reads it");
_Static_assert(offsetof(struct tkp_ring, user) + offsetof(struct tkp_stepstate, seg) == A_STEP_SEG &&
                   offsetof(struct tkp_ring, user) + offsetof(struct tkp_stepstate, launches) ==
                       A_STEP_LAUNCHES &&
                   offsetof(struct tkp_ring, user) + offsetof(struct tkp_stepstate, begin_ns) ==
                       A_STEP_BEGIN &&
                   offsetof(struct tkp_ring, user) + offsetof(struct tkp_stepstate, last_ns) ==
                       A_STEP_LAST,
               "the step state as the launch assembly counts in it");
_Static_assert(sizeof(struct tkp_ev) == 64 && sizeof(((struct tkp_tls *)0)->depth) == 4 &&
                   sizeof(((struct tkp_stepstate *)0)->launches) == 4,
               "a slot is 64 bytes; depth and the count are 32-bit");
/* The slot's words as tkp_launch_fill (hooks.h) writes them: w0 (its low half the constant below,
 * its high half the segment), ts, key, stream, grid x|y, block x|y, grid z | block z << 32,
 * smem | library call << 32. */
#define W0_RT_KERNEL 0x1010a      /* TKP_EV_LAUNCH_W0(TKP_VIA_RUNTIME, TKP_KEY_KERNEL, 0) */
#define W0_RT_PTSZ_KERNEL 0x1110a /* ... TKP_VIA_RUNTIME | TKP_VIA_PTSZ */
#define W0_RT_HOSTFUN 0x10a
#define W0_RT_PTSZ_HOSTFUN 0x110a
_Static_assert(TKP_EV_LAUNCH_W0(TKP_VIA_RUNTIME, TKP_KEY_KERNEL, 0) == W0_RT_KERNEL &&
                   TKP_EV_LAUNCH_W0(TKP_VIA_RUNTIME | TKP_VIA_PTSZ, TKP_KEY_KERNEL, 0) ==
                       W0_RT_PTSZ_KERNEL &&
                   TKP_EV_LAUNCH_W0(TKP_VIA_RUNTIME, TKP_KEY_HOSTFUN, 0) == W0_RT_HOSTFUN &&
                   TKP_EV_LAUNCH_W0(TKP_VIA_RUNTIME | TKP_VIA_PTSZ, TKP_KEY_HOSTFUN, 0) ==
                       W0_RT_PTSZ_HOSTFUN,
               "the launch assembly's record words");
#define AO(x) TKP_STR(x)
#define RT_LAUNCH_FAST(exp, real, full, w0)                                                       \
    "    .text\n"                                                                                 \
    "    .p2align 4\n"                                                                            \
    "    .globl " exp "\n"                                                                        \
    "    .type " exp ", @function\n" exp ":\n"                                                   \
    "    .cfi_startproc\n"                                                                        \
    "    cmpq $1, tkp_gate(%rip)\n"                                                              \
    "    jne " full "\n"                                                                          \
    "    movq tkp_tls@GOTTPOFF(%rip), %r11\n"                                                    \
    "    movq %fs:" AO(A_TLS_RING) "(%r11), %r10\n"                                              \
    "    testq %r10, %r10\n"                                                                      \
    "    jz " full "\n"                                                                           \
    "    cmpl $0, %fs:" AO(A_TLS_DEPTH) "(%r11)\n"                                               \
    "    jne " full "\n"                                                                          \
    "    cmpq $0, " real "(%rip)\n"                                                              \
    "    je " full "\n"                                                                           \
    "    movq " AO(A_RING_HEAD) "(%r10), %rax\n"                                                 \
    "    cmpq " AO(A_RING_FAST_LIMIT) "(%r10), %rax\n"                                           \
    "    jae " full "\n"                                                                          \
    "    andq " AO(A_RING_MASK) "(%r10), %rax\n"                                                 \
    "    shlq $6, %rax\n"                                                                         \
    "    addq " AO(A_RING_SLOTS) "(%r10), %rax\n"                                                \
    "    prefetcht0 256(%rax)\n" /* tkp_ring_reserve's: four slots on */                         \
    "    movl %edx, 48(%rax)\n"                                                                   \
    "    movl %r8d, 52(%rax)\n"                                                                   \
    "    movq %rdi, 16(%rax)\n"                                                                   \
    "    movq %rsi, 32(%rax)\n"                                                                   \
    "    movq %rcx, 40(%rax)\n"                                                                   \
    "    movl %fs:" AO(A_TLS_LIBCALL) "(%r11), %edx\n"                                           \
    "    movl %edx, 60(%rax)\n"                                                                   \
    "    movl 8(%rsp), %edx\n"                                                                    \
    "    movl %edx, 56(%rax)\n"                                                                   \
    "    movq 16(%rsp), %rdx\n"                                                                   \
    "    movq %rdx, 24(%rax)\n"                                                                   \
    "    movl " AO(A_STEP_SEG) "(%r10), %edx\n"                                                  \
    "    movl %edx, 4(%rax)\n"                                                                    \
    "    movl $" AO(w0) ", (%rax)\n"                                                              \
    "    movq %rax, %r11\n"                                                                       \
    "    rdtsc\n"                                                                                 \
    "    shlq $32, %rdx\n"                                                                        \
    "    orq %rdx, %rax\n"                                                                        \
    "    movq %rax, 8(%r11)\n"                                                                    \
    "    addl $1, " AO(A_STEP_LAUNCHES) "(%r10)\n"                                               \
    "    cmpq $0, " AO(A_STEP_BEGIN) "(%r10)\n"                                                  \
    "    je 2f\n"                                                                                 \
    "1:  movq %rax, " AO(A_STEP_LAST) "(%r10)\n"                                                 \
    "    movl 48(%r11), %edx\n"                                                                   \
    "    addq $1, " AO(A_RING_HEAD) "(%r10)\n"                                                   \
    "    jmp *" real "(%rip)\n"                                                                   \
    "2:  movq %rax, " AO(A_STEP_BEGIN) "(%r10)\n"                                                \
    "    jmp 1b\n"                                                                                \
    "    .cfi_endproc\n"                                                                          \
    "    .size " exp ", .-" exp "\n"

#define RT_LAUNCH_ONE(ver, name, KT, via, kind, w0)                                               \
    static name##_fn real##ver##_##name;                                                          \
    __attribute__((used, noinline, noclone)) static cudaError_t full##ver##_##name(              \
        RT_LAUNCH_PARAMS(KT))                                                                     \
    {                                                                                             \
        name##_fn real_ = TKP_REAL_LAZY(real##ver##_##name,                                       \
                                        tkp_real_cudart(#name, "libcudart.so." #ver));            \
        if (TKP_UNLIKELY(!real_)) return NOSYM;                                                   \
        launch_full(via, (uint64_t)(uintptr_t)k, kind, s, gxy, (uint32_t)gz, bxy, (uint32_t)bz,   \
                    smem);                                                                        \
        return real_(RT_LAUNCH_ARGS);                                                             \
    }                                                                                             \
    TKP_EXPORT cudaError_t tkp##ver##_##name(RT_LAUNCH_PARAMS(KT));                               \
    __asm__(RT_LAUNCH_FAST("tkp" #ver "_" #name, "real" #ver "_" #name, "full" #ver "_" #name, w0));
#define RT_LAUNCH(name, KT, via, kind, w0)                                                        \
    typedef cudaError_t (*name##_fn)(RT_LAUNCH_PARAMS(KT));                                       \
    RT_LAUNCH_ONE(12, name, KT, via, kind, w0)                                                    \
    RT_LAUNCH_ONE(13, name, KT, via, kind, w0)                                                    \
    __asm__(".symver tkp12_" #name ", " #name "@libcudart.so.12");                               \
    __asm__(".symver tkp13_" #name ", " #name "@@libcudart.so.13");
_Static_assert(sizeof(dim3) == 12 && _Alignof(dim3) == 4, "dim3 is passed as two registers");

RT_LAUNCH(__cudaLaunchKernel, cudaKernel_t, TKP_VIA_RUNTIME, TKP_KEY_KERNEL, W0_RT_KERNEL)
RT_LAUNCH(__cudaLaunchKernel_ptsz, cudaKernel_t, TKP_VIA_RUNTIME | TKP_VIA_PTSZ, TKP_KEY_KERNEL,
          W0_RT_PTSZ_KERNEL)
RT_LAUNCH(cudaLaunchKernel, const void *, TKP_VIA_RUNTIME, TKP_KEY_HOSTFUN, W0_RT_HOSTFUN)
RT_LAUNCH(cudaLaunchKernel_ptsz, const void *, TKP_VIA_RUNTIME | TKP_VIA_PTSZ, TKP_KEY_HOSTFUN,
          W0_RT_PTSZ_HOSTFUN)
RT_LAUNCH(cudaLaunchCooperativeKernel, const void *, TKP_VIA_RUNTIME, TKP_KEY_HOSTFUN,
          W0_RT_HOSTFUN)
/* Not hooked before: its driver launch came through as a driver launch; from cudart's code it
 * now passes through there, so the runtime records it. */
RT_LAUNCH(cudaLaunchCooperativeKernel_ptsz, const void *, TKP_VIA_RUNTIME | TKP_VIA_PTSZ,
          TKP_KEY_HOSTFUN, W0_RT_PTSZ_HOSTFUN)

static cudaError_t launch_exc(cudaError_t (*real)(const cudaLaunchConfig_t *, const void *,
                                                  void **),
                              int via, const cudaLaunchConfig_t *c, const void *f, void **args)
{
    if (c) {
        LAUNCH_BODY(via, f, TKP_KEY_HOSTFUN, c->stream, c->gridDim, c->blockDim,
                    c->dynamicSmemBytes, real(c, f, args));
    }
    return CALL_REAL(real(c, f, args));
}

RT_PAIR(cudaError_t, cudaLaunchKernelExC, NOSYM,
        (const cudaLaunchConfig_t *c, const void *f, void **args), (c, f, args))
static cudaError_t hook_cudaLaunchKernelExC(cudaLaunchKernelExC_fn real,
                                            const cudaLaunchConfig_t *c, const void *f,
                                            void **args)
{
    return launch_exc(real, TKP_VIA_RUNTIME_EX, c, f, args);
}

RT_PAIR(cudaError_t, cudaLaunchKernelExC_ptsz, NOSYM,
        (const cudaLaunchConfig_t *c, const void *f, void **args), (c, f, args))
static cudaError_t hook_cudaLaunchKernelExC_ptsz(cudaLaunchKernelExC_ptsz_fn real,
                                                 const cudaLaunchConfig_t *c, const void *f,
                                                 void **args)
{
    return launch_exc(real, TKP_VIA_RUNTIME_EX | TKP_VIA_PTSZ, c, f, args);
}

/* ---- graphs ------------------------------------------------------------------------------- */

#define GRAPH_LAUNCH_BODY(via, exec, stream, call)                                                 \
    do {                                                                                           \
        if (tkp_should_record() && !tkp_skip_captured((uint64_t)(uintptr_t)(stream), 0)) {         \
            int e_ = errno;                                                                        \
            tkp_emit_graph_launch(via, (uint64_t)(uintptr_t)(exec),                                \
                                  (uint64_t)(uintptr_t)(stream));                                  \
            errno = e_;                                                                            \
        }                                                                                          \
        return CALL_REAL(call);                                                                    \
    } while (0)

RT_PAIR(cudaError_t, cudaGraphLaunch, NOSYM, (cudaGraphExec_t e, cudaStream_t s), (e, s))
static cudaError_t hook_cudaGraphLaunch(cudaGraphLaunch_fn real, cudaGraphExec_t e, cudaStream_t s)
{
    GRAPH_LAUNCH_BODY(TKP_VIA_GRAPH_RT, e, s, real(e, s));
}

RT_PAIR(cudaError_t, cudaGraphLaunch_ptsz, NOSYM, (cudaGraphExec_t e, cudaStream_t s), (e, s))
static cudaError_t hook_cudaGraphLaunch_ptsz(cudaGraphLaunch_ptsz_fn real, cudaGraphExec_t e,
                                             cudaStream_t s)
{
    GRAPH_LAUNCH_BODY(TKP_VIA_GRAPH_RT | TKP_VIA_PTSZ, e, s, real(e, s));
}

RT_PAIR(cudaError_t, cudaGraphInstantiate, NOSYM,
        (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long flags), (e, g, flags))
static cudaError_t hook_cudaGraphInstantiate(cudaGraphInstantiate_fn real, cudaGraphExec_t *e,
                                             cudaGraph_t g, unsigned long long flags)
{
    int top = tkp_tls.depth == 0;
    cudaError_t rv = CALL_REAL(real(e, g, flags));
    if (top && rv == cudaSuccess && e && tkp_active()) tkp_graph_instantiated(*e, g);
    return rv;
}

RT_PAIR(cudaError_t, cudaGraphInstantiateWithFlags, NOSYM,
        (cudaGraphExec_t * e, cudaGraph_t g, unsigned long long flags), (e, g, flags))
static cudaError_t hook_cudaGraphInstantiateWithFlags(cudaGraphInstantiateWithFlags_fn real,
                                                      cudaGraphExec_t *e, cudaGraph_t g,
                                                      unsigned long long flags)
{
    int top = tkp_tls.depth == 0;
    cudaError_t rv = CALL_REAL(real(e, g, flags));
    if (top && rv == cudaSuccess && e && tkp_active()) tkp_graph_instantiated(*e, g);
    return rv;
}

/* llama.cpp re-captures its decode graph and updates the exec it has: from now on the exec
 * replays the new graph's kernels and grids (graph.h: a new version of the exec). */
RT_PAIR(cudaError_t, cudaGraphExecUpdate, NOSYM,
        (cudaGraphExec_t e, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info), (e, g, info))
static cudaError_t hook_cudaGraphExecUpdate(cudaGraphExecUpdate_fn real, cudaGraphExec_t e,
                                            cudaGraph_t g, cudaGraphExecUpdateResultInfo *info)
{
    int top = tkp_tls.depth == 0;
    cudaError_t rv = CALL_REAL(real(e, g, info));
    if (top && rv == cudaSuccess && tkp_active()) tkp_graph_updated(e, g);
    return rv;
}

/* Capture bookkeeping: a counter, so that launches check "is this stream capturing" only while
 * some capture is in progress. */
#define CAPTURE_BEGIN(call)                                                                       \
    do {                                                                                          \
        cudaError_t rv_ = CALL_REAL(call);                                                        \
        if (rv_ == cudaSuccess) atomic_fetch_add(&tkp_captures_active, 1);                        \
        return rv_;                                                                               \
    } while (0)
#define CAPTURE_END(call)                                                                         \
    do {                                                                                          \
        cudaError_t rv_ = CALL_REAL(call);                                                        \
        if (atomic_load(&tkp_captures_active) > 0) atomic_fetch_sub(&tkp_captures_active, 1);     \
        return rv_;                                                                               \
    } while (0)

RT_PAIR(cudaError_t, cudaStreamBeginCapture, NOSYM, (cudaStream_t s, enum cudaStreamCaptureMode m),
        (s, m))
static cudaError_t hook_cudaStreamBeginCapture(cudaStreamBeginCapture_fn real, cudaStream_t s,
                                               enum cudaStreamCaptureMode m)
{
    CAPTURE_BEGIN(real(s, m));
}
RT_PAIR(cudaError_t, cudaStreamBeginCapture_ptsz, NOSYM,
        (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))
static cudaError_t hook_cudaStreamBeginCapture_ptsz(cudaStreamBeginCapture_ptsz_fn real,
                                                    cudaStream_t s, enum cudaStreamCaptureMode m)
{
    CAPTURE_BEGIN(real(s, m));
}
RT_PAIR(cudaError_t, cudaStreamEndCapture, NOSYM, (cudaStream_t s, cudaGraph_t * g), (s, g))
static cudaError_t hook_cudaStreamEndCapture(cudaStreamEndCapture_fn real, cudaStream_t s,
                                             cudaGraph_t *g)
{
    CAPTURE_END(real(s, g));
}
RT_PAIR(cudaError_t, cudaStreamEndCapture_ptsz, NOSYM, (cudaStream_t s, cudaGraph_t * g), (s, g))
static cudaError_t hook_cudaStreamEndCapture_ptsz(cudaStreamEndCapture_ptsz_fn real,
                                                  cudaStream_t s, cudaGraph_t *g)
{
    CAPTURE_END(real(s, g));
}

/* ---- copies ------------------------------------------------------------------------------- */

static int copy_dir(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost: return TKP_DIR_HTOH;
    case cudaMemcpyHostToDevice: return TKP_DIR_HTOD;
    case cudaMemcpyDeviceToHost: return TKP_DIR_DTOH;
    case cudaMemcpyDeviceToDevice: return TKP_DIR_DTOD;
    default: return TKP_DIR_DEFAULT;
    }
}

static cudaError_t memcpy_common(cudaError_t (*real_sync)(void *, const void *, size_t,
                                                          enum cudaMemcpyKind),
                                 cudaError_t (*real_async)(void *, const void *, size_t,
                                                           enum cudaMemcpyKind, cudaStream_t),
                                 void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                                 cudaStream_t s)
{
    if (!tkp_should_record())
        return real_async ? CALL_REAL(real_async(dst, src, n, k, s))
                          : CALL_REAL(real_sync(dst, src, n, k));
    int e_ = errno;
    int dir = copy_dir(k);
    const void *host = dir == TKP_DIR_DTOH ? dst : dir == TKP_DIR_HTOD ? src : NULL;
    unsigned flags = (real_async ? TKP_COPY_ASYNC : 0) | (host && tkp_pinned_has(host) ? TKP_COPY_PINNED : 0);
    int marked = tkp_emit_copy(TKP_COPY_MEMCPY, dir, n, (uint64_t)(uintptr_t)s, flags,
                               (uint64_t)(uintptr_t)host);
    errno = e_;
    if (real_async) return CALL_REAL(real_async(dst, src, n, k, s));
    uint64_t t0 = tkp_stamp();
    cudaError_t rv = CALL_REAL(real_sync(dst, src, n, k));
    e_ = errno;
    tkp_emit_copy_return(marked, t0, tkp_stamp());
    errno = e_;
    return rv;
}

RT_PAIR(cudaError_t, cudaMemcpy, NOSYM, (void *d, const void *s, size_t n, enum cudaMemcpyKind k),
        (d, s, n, k))
static cudaError_t hook_cudaMemcpy(cudaMemcpy_fn real, void *d, const void *s, size_t n,
                                   enum cudaMemcpyKind k)
{
    return memcpy_common(real, NULL, d, s, n, k, 0);
}
RT_PAIR(cudaError_t, cudaMemcpy_ptds, NOSYM,
        (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))
static cudaError_t hook_cudaMemcpy_ptds(cudaMemcpy_ptds_fn real, void *d, const void *s, size_t n,
                                        enum cudaMemcpyKind k)
{
    return memcpy_common(real, NULL, d, s, n, k, (cudaStream_t)2);
}
RT_PAIR(cudaError_t, cudaMemcpyAsync, NOSYM,
        (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st),
        (d, s, n, k, st))
static cudaError_t hook_cudaMemcpyAsync(cudaMemcpyAsync_fn real, void *d, const void *s, size_t n,
                                        enum cudaMemcpyKind k, cudaStream_t st)
{
    return memcpy_common(NULL, real, d, s, n, k, st);
}
RT_PAIR(cudaError_t, cudaMemcpyAsync_ptsz, NOSYM,
        (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st),
        (d, s, n, k, st))
static cudaError_t hook_cudaMemcpyAsync_ptsz(cudaMemcpyAsync_ptsz_fn real, void *d, const void *s,
                                             size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    return memcpy_common(NULL, real, d, s, n, k, st);
}

#define MEMSET_BODY(stream, async, call)                                                          \
    do {                                                                                          \
        if (tkp_should_record()) {                                                                \
            int e_ = errno;                                                                       \
            tkp_emit_copy(TKP_COPY_MEMSET, TKP_DIR_DTOD, n, (uint64_t)(uintptr_t)(stream),        \
                         (async) ? TKP_COPY_ASYNC : 0, 0);                                        \
            errno = e_;                                                                           \
        }                                                                                         \
        return CALL_REAL(call);                                                                   \
    } while (0)

RT_PAIR(cudaError_t, cudaMemset, NOSYM, (void *p, int v, size_t n), (p, v, n))
static cudaError_t hook_cudaMemset(cudaMemset_fn real, void *p, int v, size_t n)
{
    MEMSET_BODY(0, 0, real(p, v, n));
}
RT_PAIR(cudaError_t, cudaMemset_ptds, NOSYM, (void *p, int v, size_t n), (p, v, n))
static cudaError_t hook_cudaMemset_ptds(cudaMemset_ptds_fn real, void *p, int v, size_t n)
{
    MEMSET_BODY(2, 0, real(p, v, n));
}
RT_PAIR(cudaError_t, cudaMemsetAsync, NOSYM, (void *p, int v, size_t n, cudaStream_t s),
        (p, v, n, s))
static cudaError_t hook_cudaMemsetAsync(cudaMemsetAsync_fn real, void *p, int v, size_t n,
                                        cudaStream_t s)
{
    MEMSET_BODY(s, 1, real(p, v, n, s));
}
RT_PAIR(cudaError_t, cudaMemsetAsync_ptsz, NOSYM, (void *p, int v, size_t n, cudaStream_t s),
        (p, v, n, s))
static cudaError_t hook_cudaMemsetAsync_ptsz(cudaMemsetAsync_ptsz_fn real, void *p, int v, size_t n,
                                             cudaStream_t s)
{
    MEMSET_BODY(s, 1, real(p, v, n, s));
}

/* Pinned allocations, so a copy can say whether its host side was page-locked. */
RT_PAIR(cudaError_t, cudaMallocHost, NOSYM, (void **p, size_t n), (p, n))
static cudaError_t hook_cudaMallocHost(cudaMallocHost_fn real, void **p, size_t n)
{
    cudaError_t rv = CALL_REAL(real(p, n));
    if (rv == cudaSuccess && p) tkp_pinned_add(*p, n);
    return rv;
}
RT_PAIR(cudaError_t, cudaHostAlloc, NOSYM, (void **p, size_t n, unsigned int f), (p, n, f))
static cudaError_t hook_cudaHostAlloc(cudaHostAlloc_fn real, void **p, size_t n, unsigned int f)
{
    cudaError_t rv = CALL_REAL(real(p, n, f));
    if (rv == cudaSuccess && p) tkp_pinned_add(*p, n);
    return rv;
}
RT_PAIR(cudaError_t, cudaFreeHost, NOSYM, (void *p), (p))
static cudaError_t hook_cudaFreeHost(cudaFreeHost_fn real, void *p)
{
    tkp_pinned_remove(p);
    return CALL_REAL(real(p));
}

/* ---- synchronisation and events ----------------------------------------------------------- */

#define SYNC_BODY(kind, handle, call)                                                             \
    do {                                                                                          \
        if (!tkp_should_record()) return CALL_REAL(call);                                         \
        uint64_t t0_ = tkp_stamp();                                                              \
        cudaError_t rv_ = CALL_REAL(call);                                                        \
        int e_ = errno;                                                                           \
        if (rv_ == cudaSuccess)                                                                   \
            tkp_emit_sync(kind, (uint64_t)(uintptr_t)(handle), t0_, tkp_stamp());                 \
        errno = e_;                                                                               \
        return rv_;                                                                               \
    } while (0)

RT_PAIR(cudaError_t, cudaStreamSynchronize, NOSYM, (cudaStream_t s), (s))
static cudaError_t hook_cudaStreamSynchronize(cudaStreamSynchronize_fn real, cudaStream_t s)
{
    SYNC_BODY(TKP_SYNC_STREAM, s, real(s));
}
RT_PAIR(cudaError_t, cudaStreamSynchronize_ptsz, NOSYM, (cudaStream_t s), (s))
static cudaError_t hook_cudaStreamSynchronize_ptsz(cudaStreamSynchronize_ptsz_fn real,
                                                   cudaStream_t s)
{
    SYNC_BODY(TKP_SYNC_STREAM, s, real(s));
}
RT_PAIR(cudaError_t, cudaEventSynchronize, NOSYM, (cudaEvent_t e), (e))
static cudaError_t hook_cudaEventSynchronize(cudaEventSynchronize_fn real, cudaEvent_t e)
{
    SYNC_BODY(TKP_SYNC_EVENT, e, real(e));
}
typedef cudaError_t (*device_sync_fn)(void);
static device_sync_fn dsync12, dsync13;
static cudaError_t device_sync(device_sync_fn real)
{
    if (!real) return NOSYM;
    SYNC_BODY(TKP_SYNC_DEVICE, 0, real());
}
TKP_EXPORT cudaError_t tkp12_cudaDeviceSynchronize(void)
{
    return device_sync(TKP_REAL_LAZY(dsync12, tkp_real_cudart("cudaDeviceSynchronize",
                                                              "libcudart.so.12")));
}
TKP_EXPORT cudaError_t tkp13_cudaDeviceSynchronize(void)
{
    return device_sync(TKP_REAL_LAZY(dsync13, tkp_real_cudart("cudaDeviceSynchronize",
                                                              "libcudart.so.13")));
}
__asm__(".symver tkp12_cudaDeviceSynchronize, cudaDeviceSynchronize@libcudart.so.12");
__asm__(".symver tkp13_cudaDeviceSynchronize, cudaDeviceSynchronize@@libcudart.so.13");

/* A query answering "ready" is how busy-polling servers learn a step is done. */
RT_PAIR(cudaError_t, cudaEventQuery, NOSYM, (cudaEvent_t e), (e))
static cudaError_t hook_cudaEventQuery(cudaEventQuery_fn real, cudaEvent_t e)
{
    SYNC_BODY(TKP_SYNC_EVENT_QUERY, e, real(e));
}

#define PAIR_BODY(type, a, b, cap_stream, call)                                                   \
    do {                                                                                          \
        if (tkp_should_record() && !tkp_skip_captured((uint64_t)(uintptr_t)(cap_stream), 0)) {    \
            int e_ = errno;                                                                       \
            tkp_emit_pair(type, (uint64_t)(uintptr_t)(a), (uint64_t)(uintptr_t)(b));               \
            errno = e_;                                                                           \
        }                                                                                         \
        return CALL_REAL(call);                                                                   \
    } while (0)

RT_PAIR(cudaError_t, cudaEventRecord, NOSYM, (cudaEvent_t e, cudaStream_t s), (e, s))
static cudaError_t hook_cudaEventRecord(cudaEventRecord_fn real, cudaEvent_t e, cudaStream_t s)
{
    PAIR_BODY(TKP_REC_EVENT_RECORD, e, s, s, real(e, s));
}
RT_PAIR(cudaError_t, cudaEventRecord_ptsz, NOSYM, (cudaEvent_t e, cudaStream_t s), (e, s))
static cudaError_t hook_cudaEventRecord_ptsz(cudaEventRecord_ptsz_fn real, cudaEvent_t e,
                                             cudaStream_t s)
{
    PAIR_BODY(TKP_REC_EVENT_RECORD, e, s, s, real(e, s));
}
RT_PAIR(cudaError_t, cudaEventRecordWithFlags, NOSYM,
        (cudaEvent_t e, cudaStream_t s, unsigned int f), (e, s, f))
static cudaError_t hook_cudaEventRecordWithFlags(cudaEventRecordWithFlags_fn real, cudaEvent_t e,
                                                 cudaStream_t s, unsigned int f)
{
    PAIR_BODY(TKP_REC_EVENT_RECORD, e, s, s, real(e, s, f));
}
RT_PAIR(cudaError_t, cudaStreamWaitEvent, NOSYM, (cudaStream_t s, cudaEvent_t e, unsigned int f),
        (s, e, f))
static cudaError_t hook_cudaStreamWaitEvent(cudaStreamWaitEvent_fn real, cudaStream_t s,
                                            cudaEvent_t e, unsigned int f)
{
    PAIR_BODY(TKP_REC_STREAM_WAIT, s, e, s, real(s, e, f));
}
RT_PAIR(cudaError_t, cudaStreamWaitEvent_ptsz, NOSYM,
        (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f))
static cudaError_t hook_cudaStreamWaitEvent_ptsz(cudaStreamWaitEvent_ptsz_fn real, cudaStream_t s,
                                                 cudaEvent_t e, unsigned int f)
{
    PAIR_BODY(TKP_REC_STREAM_WAIT, s, e, s, real(s, e, f));
}
