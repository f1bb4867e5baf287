/* The decoder's percentiles (decoder/base/sort.h): tkp_pcts_u64 selects what the nearest-rank
 * rule takes of the sorted values (index ceil(p n) - 1, held to 0..n-1), and tkp_select_u64 any
 * index, on random, equal, few-valued, sorted, reversed and organ-pipe series of every small
 * length and some long ones, against a plain sort (qsort) and the rule written out here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/sort.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17; /* xorshift64 */
    return *s;
}

enum { RANDOM, EQUAL, FEW, SORTED, REVERSED, PIPE, EXTREMES, NPATTERNS };

static void fill(uint64_t *v, size_t n, int pattern, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = pattern == RANDOM     ? rnd(s) % 1000000
               : pattern == EQUAL    ? 42
               : pattern == FEW      ? rnd(s) % 3
               : pattern == SORTED   ? i
               : pattern == REVERSED ? n - i
               : pattern == PIPE     ? (i < n / 2 ? i : n - i)
                                     : (rnd(s) & 1 ? UINT64_MAX : 0);
}

/* The nearest-rank rule, written out: the value of rank ceil(p n), held to 1..n. */
static uint64_t rule(const uint64_t *sorted, size_t n, double p)
{
    if (!n) return 0;
    double r = ceil(p * (double)n);
    size_t rank = r < 1 ? 1 : r > (double)n ? n : (size_t)r;
    return sorted[rank - 1];
}

static const double ps[] = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0};
#define NP (sizeof(ps) / sizeof(ps[0]))

static void check(size_t n, int pattern, uint64_t *s)
{
    uint64_t *v = malloc((n + 1) * sizeof(*v)), *w = malloc((n + 1) * sizeof(*w));
    uint64_t *sorted = malloc((n + 1) * sizeof(*sorted)), got[NP];
    fill(v, n, pattern, s);
    memcpy(sorted, v, n * sizeof(*v));
    qsort(sorted, n, sizeof(*sorted), cmp);
    /* ascending, as the views ask them */
    memcpy(w, v, n * sizeof(*v));
    tkp_pcts_u64(w, n, ps, NP, got);
    for (size_t i = 0; i < NP; i++)
        cr_assert_eq(got[i], rule(sorted, n, ps[i]), "n %zu pattern %d p %g: %llu, sorted %llu", n,
                     pattern, ps[i], (unsigned long long)got[i],
                     (unsigned long long)rule(sorted, n, ps[i]));
    /* one at a time, and descending */
    for (size_t i = 0; i < NP; i++) {
        memcpy(w, v, n * sizeof(*v));
        tkp_pcts_u64(w, n, &ps[i], 1, &got[0]);
        cr_assert_eq(got[0], rule(sorted, n, ps[i]), "n %zu pattern %d p %g alone", n, pattern,
                     ps[i]);
    }
    double desc[NP];
    for (size_t i = 0; i < NP; i++) desc[i] = ps[NP - 1 - i];
    memcpy(w, v, n * sizeof(*v));
    tkp_pcts_u64(w, n, desc, NP, got);
    for (size_t i = 0; i < NP; i++)
        cr_assert_eq(got[i], rule(sorted, n, desc[i]), "n %zu pattern %d p %g descending", n,
                     pattern, desc[i]);
    /* every index of the short ones, a few of the long ones; the sort agrees */
    for (size_t k = 0; k < n; k += n < 100 ? 1 : n / 37) {
        memcpy(w, v, n * sizeof(*v));
        cr_assert_eq(tkp_select_u64(w, n, k), sorted[k], "n %zu pattern %d index %zu", n, pattern,
                     k);
        for (size_t i = 0; i < k; i++) cr_assert_leq(w[i], w[k]);
        for (size_t i = k + 1; i < n; i++) cr_assert_geq(w[i], w[k]);
    }
    memcpy(w, v, n * sizeof(*v));
    tkp_sort_u64(w, n);
    cr_assert_arr_eq(w, sorted, n * sizeof(*w), "n %zu pattern %d: sorted", n, pattern);
    for (size_t i = 0; i < NP; i++)
        cr_assert_eq(tkp_pct_sorted(w, n, ps[i]), rule(sorted, n, ps[i]));
    free(v), free(w), free(sorted);
}

Test(sort, percentiles_by_selection_are_the_sorted_ones)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int pattern = 0; pattern < NPATTERNS; pattern++) {
        for (size_t n = 0; n <= 70; n++) check(n, pattern, &s);
        static const size_t longer[] = {100, 999, 1000, 1001, 4096, 20001};
        for (size_t i = 0; i < sizeof(longer) / sizeof(longer[0]); i++) check(longer[i], pattern, &s);
    }
}
