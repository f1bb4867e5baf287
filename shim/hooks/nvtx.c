/* NVTX ranges and marks. NVTX3 is header-only: a program's nvtxRangePushA reaches a tool only when
 * NVTX_INJECTION64_PATH names the tool's library, which NVTX then dlopens and initialises through
 * InitializeInjectionNvtx2 (`tokprof run` sets the variable to this shim). We fill the CORE
 * module's callback table and CORE2's (the domain API, which the `nvtx` PyPI package and so
 * vLLM's NVTX scopes use, with registered strings); the other modules keep their no-op defaults.
 *
 * Range names are the program's transient strings: they are interned (copied once per distinct
 * string, under a lock taken only for a new string) so that the writer can encode them later. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/state.h"
#include "record/ring.h"
#include "record/step.h"
#include "tokprof/format.h"

#define NAMES_CAP 4096 /* distinct range names; more are recorded as "?" */

static _Atomic(const char *) names[NAMES_CAP];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_range = 1;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char *intern(const char *s)
{
    if (!s) return "?";
    uint64_t h = hash_str(s);
    for (uint32_t i = 0; i < NAMES_CAP; i++) {
        _Atomic(const char *) *slot = &names[(h + i) % NAMES_CAP];
        const char *n = atomic_load_explicit(slot, memory_order_acquire);
        if (n && !strcmp(n, s)) return n;
        if (!n) {
            pthread_mutex_lock(&names_lock);
            n = atomic_load(slot);
            if (!n) {
                char *copy = strndup(s, 4095);
                if (copy) atomic_store_explicit(slot, copy, memory_order_release);
                n = copy;
            }
            pthread_mutex_unlock(&names_lock);
            if (n && !strcmp(n, s)) return n;
        }
    }
    return "?";
}

static const char *attr_message(const nvtxEventAttributes_t *a)
{
    if (!a) return NULL;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
    /* a registered string's handle is its interned copy (register_string_a) */
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) return (const char *)a->message.registered;
    return NULL;
}

static void record(int kind, const char *msg, uint64_t range)
{
    if (tkp_tls.depth || !tkp_active()) return;
    struct tkp_ring *r = tkp_ring_self();
    if (!r) return;
    const char *name = kind == TKP_NVTX_POP || kind == TKP_NVTX_RANGE_END ? "" : intern(msg);
    uint64_t ts = tkp_stamp();
    tkp_step_on_nvtx(r, kind, name, ts);
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (!e) return;
    e->type = TKP_REC_NVTX;
    e->sub = (uint8_t)kind;
    e->step = tkp_step_current(r);
    e->ts = ts;
    e->a = (uint64_t)(uintptr_t)name;
    e->u[0] = (uint32_t)range;
    tkp_ring_commit(r);
}

static void mark_a(const char *m) { record(TKP_NVTX_MARK, m, 0); }
static void mark_ex(const nvtxEventAttributes_t *a) { record(TKP_NVTX_MARK, attr_message(a), 0); }

static nvtxRangeId_t range_start_a(const char *m)
{
    uint64_t id = atomic_fetch_add(&next_range, 1);
    record(TKP_NVTX_RANGE_START, m, id);
    return id;
}
static nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t *a)
{
    uint64_t id = atomic_fetch_add(&next_range, 1);
    record(TKP_NVTX_RANGE_START, attr_message(a), id);
    return id;
}
static void range_end(nvtxRangeId_t id) { record(TKP_NVTX_RANGE_END, NULL, id); }

/* Push/pop nesting levels are per thread; NVTX wants the level back. */
static __thread int push_level;
static int range_push_a(const char *m)
{
    record(TKP_NVTX_PUSH, m, 0);
    return push_level++;
}
static int range_push_ex(const nvtxEventAttributes_t *a)
{
    record(TKP_NVTX_PUSH, attr_message(a), 0);
    return push_level++;
}
static int range_pop(void)
{
    record(TKP_NVTX_POP, NULL, 0);
    return push_level > 0 ? --push_level : -1;
}

/* CORE2: the domain API (the `nvtx` PyPI package, vLLM's NVTX scopes). Domains are not told
 * apart; a domain's and a registered string's handle is the interned name. */
static nvtxDomainHandle_t domain_create_a(const char *n)
{
    return (nvtxDomainHandle_t)intern(n ? n : "");
}
static void domain_destroy(nvtxDomainHandle_t d) { (void)d; }
static nvtxStringHandle_t register_string_a(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)intern(s);
}
static void d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    mark_ex(a);
}
static nvtxRangeId_t d_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    return range_start_ex(a);
}
static void d_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    range_end(id);
}
static int d_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    return range_push_ex(a);
}
static int d_range_pop(nvtxDomainHandle_t d)
{
    (void)d;
    return range_pop();
}

struct hook {
    unsigned id;
    NvtxFunctionPointer fn;
};
#define HOOK(id, fn) {id, (NvtxFunctionPointer)fn}
static const struct hook core[] = {
    HOOK(NVTX_CBID_CORE_MarkA, mark_a),
    HOOK(NVTX_CBID_CORE_MarkEx, mark_ex),
    HOOK(NVTX_CBID_CORE_RangeStartA, range_start_a),
    HOOK(NVTX_CBID_CORE_RangeStartEx, range_start_ex),
    HOOK(NVTX_CBID_CORE_RangeEnd, range_end),
    HOOK(NVTX_CBID_CORE_RangePushA, range_push_a),
    HOOK(NVTX_CBID_CORE_RangePushEx, range_push_ex),
    HOOK(NVTX_CBID_CORE_RangePop, range_pop),
};
static const struct hook core2[] = {
    HOOK(NVTX_CBID_CORE2_DomainMarkEx, d_mark_ex),
    HOOK(NVTX_CBID_CORE2_DomainRangeStartEx, d_range_start_ex),
    HOOK(NVTX_CBID_CORE2_DomainRangeEnd, d_range_end),
    HOOK(NVTX_CBID_CORE2_DomainRangePushEx, d_range_push_ex),
    HOOK(NVTX_CBID_CORE2_DomainRangePop, d_range_pop),
    HOOK(NVTX_CBID_CORE2_DomainRegisterStringA, register_string_a),
    HOOK(NVTX_CBID_CORE2_DomainCreateA, domain_create_a),
    HOOK(NVTX_CBID_CORE2_DomainDestroy, domain_destroy),
};

/* Points `module`'s callback slots at `hooks`; 0 when NVTX has no table for it. */
static int fill(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                const struct hook *hooks, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return 0;
    for (size_t i = 0; i < n; i++)
        if (hooks[i].id < size && table[hooks[i].id]) *table[hooks[i].id] = hooks[i].fn;
    return 1;
}

TKP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    if (!get_table) return 0;
    const NvtxExportTableCallbacks *cb = get_table(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
    if (!fill(cb, NVTX_CB_MODULE_CORE, core, sizeof core / sizeof core[0])) return 0;
    fill(cb, NVTX_CB_MODULE_CORE2, core2, sizeof core2 / sizeof core2[0]);
    return 1;
}
