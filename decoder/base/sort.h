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

/* The index of the nearest-rank percentile p of n > 0 sorted values (the one rule). */
size_t tkp_pct_index(size_t n, double p);
/* Nearest-rank percentile of n sorted values (0 when n == 0). */
uint64_t tkp_pct_sorted(const uint64_t *v, size_t n, double p);
/* Sorts n values in place (ascending). */
void tkp_sort_u64(uint64_t *v, size_t n);
/* v[k] (k < n) as it would be after tkp_sort_u64(v, n), v reordered so that v[0..k) <= v[k] <=
 * v(k..n) (a selection: linear on average, where a sort is n log n; a sort past a depth of
 * 2 log2 n, so hostile input costs no more than a sort). */
uint64_t tkp_select_u64(uint64_t *v, size_t n, size_t k);
/* The nearest-rank percentiles p[0..np) of n unsorted values, as tkp_pct_sorted gives them of
 * the sorted values (0 when n == 0); v reordered. With p ascending each is a selection in what
 * the one before left above it. */
void tkp_pcts_u64(uint64_t *v, size_t n, const double *p, size_t np, uint64_t *out);

#endif
