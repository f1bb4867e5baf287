/* tokprof decoder: sorting and percentiles of plain uint64 arrays (sort.h). */
#include "base/sort.h"

#include <math.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Hoare's partition of n > 16 values around the median of the first, middle and last: returns
 * j with [0, j] <= x <= [j + 1, n), both parts not empty. */
static size_t partition_u64(uint64_t *v, size_t n)
{
    uint64_t a = v[0], b = v[n / 2], c = v[n - 1], t;
    uint64_t x = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
    size_t i = 0, j = n - 1;
    for (;;) {
        while (v[i] < x)
            i++;
        while (x < v[j])
            j--;
        if (i >= j) return j;
        t = v[i], v[i++] = v[j], v[j--] = t;
    }
}

static void insertion_u64(uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* 2 log2 n: the partitions a sort or selection of n values makes before it gives up on them. */
static int depth_u64(size_t n)
{
    int depth = 0;
    for (size_t k = n; k > 1; k >>= 1)
        depth += 2;
    return depth;
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
        size_t j = partition_u64(v, n);
        sort_u64(v, j + 1, depth);
        v += j + 1, n -= j + 1;
    }
    insertion_u64(v, n);
}

void tkp_sort_u64(uint64_t *v, size_t n)
{
    sort_u64(v, n, depth_u64(n));
}

uint64_t tkp_select_u64(uint64_t *v, size_t n, size_t k)
{
    int depth = depth_u64(n);
    uint64_t *w = v;
    while (n > 16) { /* the part that holds k: w[0..n), k relative to it */
        if (!depth--) {
            tkp_sort(w, n, sizeof(*w), cmp_u64);
            return w[k];
        }
        size_t j = partition_u64(w, n);
        if (k <= j)
            n = j + 1;
        else
            w += j + 1, n -= j + 1, k -= j + 1;
    }
    insertion_u64(w, n);
    return w[k];
}

size_t tkp_pct_index(size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return rank - 1;
}

uint64_t tkp_pct_sorted(const uint64_t *v, size_t n, double p)
{
    return n ? v[tkp_pct_index(n, p)] : 0;
}

void tkp_pcts_u64(uint64_t *v, size_t n, const double *p, size_t np, uint64_t *out)
{
    /* v[0..from) holds the from least values, unordered */
    size_t from = 0;
    for (size_t i = 0; i < np; i++) {
        size_t k = n ? tkp_pct_index(n, p[i]) : 0;
        if (!n)
            out[i] = 0;
        else if (k >= from)
            out[i] = tkp_select_u64(v + from, n - from, k - from), from = k + 1;
        else /* an index selected before (or p not ascending): among the least */
            out[i] = tkp_select_u64(v, from, k);
    }
}
