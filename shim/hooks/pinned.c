/* Page-locked host allocations seen through cudaMallocHost/cudaHostAlloc, so that a copy record
 * can say whether its host side was pinned (pageable DtoH copies are synchronous and slow: a
 * classic cause of idle GPU). A small fixed table; when full, copies are reported unpinned. */
#include <stdatomic.h>
#include <stdint.h>

#include "hooks/pinned.h"

#define PINNED_MAX 256
static struct {
    _Atomic uintptr_t lo;
    _Atomic uintptr_t hi;
} pinned[PINNED_MAX];
/* Slots ever used: a copy scans only those (usually a handful), not the whole table. */
static _Atomic int used;

void tkp_pinned_add(const void *p, size_t n)
{
    for (int i = 0; i < PINNED_MAX; i++) {
        uintptr_t expect = 0;
        if (atomic_compare_exchange_strong(&pinned[i].lo, &expect, (uintptr_t)p)) {
            atomic_store(&pinned[i].hi, (uintptr_t)p + n);
            int u = atomic_load(&used);
            while (u <= i && !atomic_compare_exchange_weak(&used, &u, i + 1)) {
            }
            return;
        }
    }
}

void tkp_pinned_remove(const void *p)
{
    int n = atomic_load(&used);
    for (int i = 0; i < n; i++)
        if (atomic_load(&pinned[i].lo) == (uintptr_t)p) {
            atomic_store(&pinned[i].hi, 0);
            atomic_store(&pinned[i].lo, 0);
            return;
        }
}

int tkp_pinned_has(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    int n = atomic_load_explicit(&used, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        uintptr_t lo = atomic_load_explicit(&pinned[i].lo, memory_order_relaxed);
        if (lo && x >= lo && x < atomic_load_explicit(&pinned[i].hi, memory_order_relaxed))
            return 1;
    }
    return 0;
}
