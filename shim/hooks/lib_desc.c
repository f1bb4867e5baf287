/* cuBLASLt descriptor cache: descriptor address -> shape attributes (see lib.h).
 *
 * Why not query at each matmul: cublasLtMatmul's shape needs five descriptors and up to nine
 * GetAttribute calls; PyTorch creates its layouts per call, so caching "by pointer, on first
 * sight" would also be wrong (a freed layout's address comes back with another shape). The
 * Create/Init/SetAttribute/Destroy hooks see every change of a descriptor, so the table is kept
 * exact by them and the matmul path only reads it.
 *
 * Open addressing over TKP_DESC_SLOTS entries, probing TKP_DESC_PROBE neighbours. Each entry has
 * a sequence counter (odd while a writer owns it): a reader copies the entry and retries nothing
 * (a torn or busy read is a miss). Writers take an entry with a CAS on the counter; an entry busy
 * for longer than a short spin (its writer was preempted) makes a correctness-preserving update
 * impossible, so the whole cache is turned off. */
#include <stdatomic.h>
#include <stddef.h>

#include "hooks/lib_desc.h"

#define TKP_DESC_SLOTS 4096 /* live descriptors at once; more only cost queries */
#define TKP_DESC_PROBE 8
#define TKP_DESC_SPIN 4096

struct desc_ent {
    _Atomic uint32_t seq;
    _Atomic uint64_t key; /* address | kind, 0 free */
    _Atomic uint64_t v[4];
};

static struct desc_ent tab[TKP_DESC_SLOTS];
static _Atomic int cache_off;

static inline uint64_t key_of(const void *d, int kind)
{
    return (uint64_t)(uintptr_t)d | (uint64_t)kind; /* descriptors are at least 8-aligned */
}

static inline uint32_t slot_of(uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (TKP_DESC_SLOTS - 1);
}

static int lock_ent(struct desc_ent *e)
{
    for (int i = 0; i < TKP_DESC_SPIN; i++) {
        uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
        if (!(s & 1) && atomic_compare_exchange_weak_explicit(&e->seq, &s, s + 1,
                                                              memory_order_acquire,
                                                              memory_order_relaxed)) {
            atomic_thread_fence(memory_order_release);
            return 1;
        }
    }
    atomic_store(&cache_off, 1);
    return 0;
}

static void unlock_ent(struct desc_ent *e)
{
    atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
}

/* The entry holding key, or NULL. Unlocked look: the caller locks and re-checks. */
static struct desc_ent *find(uint64_t key)
{
    uint32_t s = slot_of(key);
    for (int i = 0; i < TKP_DESC_PROBE; i++) {
        struct desc_ent *e = &tab[(s + i) & (TKP_DESC_SLOTS - 1)];
        if (atomic_load_explicit(&e->key, memory_order_relaxed) == key) return e;
    }
    return NULL;
}

void tkp_desc_drop(const void *desc, int kind)
{
    uint64_t key = key_of(desc, kind);
    struct desc_ent *e;
    /* loop: a concurrent put may have moved nothing, but a duplicate must not survive */
    while ((e = find(key))) {
        if (!lock_ent(e)) return;
        if (atomic_load_explicit(&e->key, memory_order_relaxed) == key)
            atomic_store_explicit(&e->key, 0, memory_order_relaxed);
        unlock_ent(e);
    }
}

void tkp_desc_put(const void *desc, int kind, const uint64_t v[4])
{
    if (atomic_load_explicit(&cache_off, memory_order_relaxed)) return;
    uint64_t key = key_of(desc, kind);
    tkp_desc_drop(desc, kind);
    uint32_t s = slot_of(key);
    /* a free entry in the window, else evict the home entry (its descriptor gets queried) */
    struct desc_ent *e = &tab[s];
    for (int i = 0; i < TKP_DESC_PROBE; i++) {
        struct desc_ent *c = &tab[(s + i) & (TKP_DESC_SLOTS - 1)];
        if (atomic_load_explicit(&c->key, memory_order_relaxed) == 0) {
            e = c;
            break;
        }
    }
    if (!lock_ent(e)) return;
    for (int i = 0; i < 4; i++) atomic_store_explicit(&e->v[i], v[i], memory_order_relaxed);
    atomic_store_explicit(&e->key, key, memory_order_relaxed);
    unlock_ent(e);
}

void tkp_desc_set(const void *desc, int kind, int i, uint64_t val)
{
    uint64_t key = key_of(desc, kind);
    struct desc_ent *e = find(key);
    if (!e || !lock_ent(e)) return;
    if (atomic_load_explicit(&e->key, memory_order_relaxed) == key)
        atomic_store_explicit(&e->v[i], val, memory_order_relaxed);
    unlock_ent(e);
}

int tkp_desc_get(const void *desc, int kind, uint64_t v[4])
{
    if (atomic_load_explicit(&cache_off, memory_order_relaxed)) return 0;
    uint64_t key = key_of(desc, kind);
    uint32_t s = slot_of(key);
    for (int i = 0; i < TKP_DESC_PROBE; i++) {
        struct desc_ent *e = &tab[(s + i) & (TKP_DESC_SLOTS - 1)];
        uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (atomic_load_explicit(&e->key, memory_order_relaxed) != key) continue;
        if (s1 & 1) return 0;
        for (int j = 0; j < 4; j++) v[j] = atomic_load_explicit(&e->v[j], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s1) return 0;
        return atomic_load_explicit(&e->key, memory_order_relaxed) == key;
    }
    return 0;
}
