/* tokprof decoder: sorting and percentiles of plain uint64 arrays (sort.h). */
#include "base/sort.h"

#include <math.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Quicksort without a comparison callback (the medians of every figure sort a value per step),
 * insertion sort below 16 values; qsort past a depth of 2 log2 n (adversarial input). */
static void sort_u64(uint64_t *v, size_t n, int depth)
{
    while (n > 16) {
        if (!depth--) {
            tkp_sort(v, n, sizeof(*v), cmp_u64);
            return;
        }
        uint64_t a = v[0], b = v[n / 2], c = v[n - 1], t;
        uint64_t x = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = 0, j = n - 1;
        for (;;) { /* Hoare: [0, j] <= x <= [j + 1, n) */
            while (v[i] < x)
                i++;
            while (x < v[j])
                j--;
            if (i >= j) break;
            t = v[i], v[i++] = v[j], v[j--] = t;
        }
        sort_u64(v, j + 1, depth);
        v += j + 1, n -= j + 1;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

void tkp_sort_u64(uint64_t *v, size_t n)
{
    int depth = 0;
    for (size_t k = n; k > 1; k >>= 1)
        depth += 2;
    sort_u64(v, n, depth);
}

uint64_t tkp_pct_sorted(const uint64_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}
