/* qsort for arrays that may be empty: an empty array may have a NULL base, which qsort's
 * contract (and UBSan) forbids even with a zero count. */
#ifndef TKP_SORT_H
#define TKP_SORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline void tkp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1) qsort(base, n, size, cmp);
}

/* Nearest-rank percentile of n sorted values (0 when n == 0). */
uint64_t tkp_pct_sorted(const uint64_t *v, size_t n, double p);
/* Sorts n values in place (ascending). */
void tkp_sort_u64(uint64_t *v, size_t n);

#endif
