/* Kernel names, keyed by the pointer a launch carries: a host stub (from __cudaRegisterFunction,
 * which runs in constructors before the shim starts, hence static storage and no allocation), a
 * kernel handle (aliased to its host stub by __cudaGetKernel), or a CUfunction (named through
 * the driver's cuFuncGetName on first need, off the launch path).
 *
 * One open-addressing table; insertion claims a slot with a compare-and-swap, so registration,
 * aliasing and lookups from any thread need no lock. The table is BSS: untouched pages cost
 * nothing. When it is full, names degrade to NULL ("?" in the capture), never an error. */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/real.h"
#include "core/state.h"
#include "record/symtab.h"

#define SYM_BITS 18
#define SYM_CAP (1u << SYM_BITS)
#define SYM_PROBES 64

struct sym {
    _Atomic uintptr_t key;
    _Atomic(const char *) name;
    _Atomic uintptr_t alias;
    _Atomic uint32_t match; /* tkp_sym_matches: regex generation << 1 | matched */
};
static struct sym table[SYM_CAP];

static inline uint32_t hash_ptr(uintptr_t p)
{
    return (uint32_t)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> (64 - SYM_BITS));
}

/* The entry for key, created when `create`; NULL when absent or the table is full. */
static struct sym *find(uintptr_t key, int create)
{
    if (!key) return NULL;
    uint32_t h = hash_ptr(key);
    for (uint32_t i = 0; i < SYM_PROBES; i++) {
        struct sym *s = &table[(h + i) & (SYM_CAP - 1)];
        uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == key) return s;
        if (k == 0) {
            if (!create) return NULL;
            uintptr_t expect = 0;
            if (atomic_compare_exchange_strong(&s->key, &expect, key)) return s;
            if (expect == key) return s;
        }
    }
    return NULL;
}

void tkp_sym_register(const void *host_fun, const char *device_name)
{
    struct sym *s = find((uintptr_t)host_fun, 1);
    if (s) atomic_store_explicit(&s->name, device_name, memory_order_release);
}

void tkp_sym_alias(const void *kernel, const void *host_fun)
{
    if (kernel == host_fun) return;
    struct sym *s = find((uintptr_t)kernel, 1);
    if (s) atomic_store_explicit(&s->alias, (uintptr_t)host_fun, memory_order_release);
}

typedef int (*get_name_fn)(const char **, void *);

static const char *driver_name(uintptr_t key, int kind)
{
    /* resolved once, by whichever threads get here first (each stores the same) */
    static _Atomic(get_name_fn) func_get_name, kernel_get_name;
    static _Atomic int resolved;
    if (!atomic_load_explicit(&resolved, memory_order_acquire)) {
        atomic_store_explicit(&func_get_name, (get_name_fn)tkp_real_driver("cuFuncGetName"),
                              memory_order_relaxed);
        atomic_store_explicit(&kernel_get_name, (get_name_fn)tkp_real_driver("cuKernelGetName"),
                              memory_order_relaxed);
        atomic_store_explicit(&resolved, 1, memory_order_release);
    }
    get_name_fn fn = atomic_load_explicit(&func_get_name, memory_order_relaxed);
    get_name_fn kn = atomic_load_explicit(&kernel_get_name, memory_order_relaxed);
    const char *n = NULL;
    get_name_fn first = kind == TKP_KEY_FUNCTION ? fn : kn;
    get_name_fn second = kind == TKP_KEY_FUNCTION ? kn : fn;
    tkp_tls.depth++; /* our own driver calls are not the program's */
    if (first && first(&n, (void *)key) != 0) n = NULL;
    if (!n && second && second(&n, (void *)key) != 0) n = NULL;
    tkp_tls.depth--;
    return n;
}

const char *tkp_sym_name(uint64_t key, int kind)
{
    struct sym *s = find((uintptr_t)key, 0);
    if (s) {
        const char *n = atomic_load_explicit(&s->name, memory_order_acquire);
        if (n) return n;
        uintptr_t a = atomic_load_explicit(&s->alias, memory_order_acquire);
        if (a) {
            struct sym *t = find(a, 0);
            if (t && (n = atomic_load_explicit(&t->name, memory_order_acquire))) return n;
        }
    }
    if (kind == TKP_KEY_HOSTFUN) return NULL; /* a host stub never registered: not a kernel */
    const char *n = driver_name((uintptr_t)key, kind);
    if (!n) return NULL;
    /* The driver's string lives as long as the module; ours must outlive it (the writer may
     * encode the record after an unload). */
    char *copy = strdup(n);
    if (!copy) return NULL;
    s = find((uintptr_t)key, 1);
    if (!s) return copy; /* table full: leak one string per such call, rare and bounded */
    const char *expect = NULL;
    if (!atomic_compare_exchange_strong(&s->name, &expect, copy)) {
        free(copy);
        return expect;
    }
    return copy;
}

int tkp_sym_matches(uint64_t key, int kind, int (*match)(const char *name))
{
    /* an answer is of one compile of TOKPROF_STEP's regex (a fork child reads it again) */
    uint32_t gen = tkp_cfg.step_re_gen;
    struct sym *s = find((uintptr_t)key, 0);
    if (TKP_LIKELY(s)) {
        uint32_t m = atomic_load_explicit(&s->match, memory_order_relaxed);
        if (TKP_LIKELY(m >> 1 == gen)) return (int)(m & 1);
    }
    const char *name = tkp_sym_name(key, kind);
    int yes = match(name);
    /* kept once the name is known (a driver name made its entry just now); threads that race
     * here store the same answer */
    if (name && (s || (s = find((uintptr_t)key, 0))))
        atomic_store_explicit(&s->match, gen << 1 | (yes ? 1u : 0u), memory_order_relaxed);
    return yes;
}
