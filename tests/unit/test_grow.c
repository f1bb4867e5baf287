/* The decoder's one grower (decoder/base/grow.h): capacities double from the first one asked, a
 * table indexed by an id is zeroed as it grows, and a size that would overflow (an element count
 * past SIZE_MAX or, for a uint32_t capacity, past UINT32_MAX) fails with TKP_ERR_NOMEM leaving
 * the array and its capacity as they were (issue 18: the private copies it replaced doubled a
 * 32-bit capacity until it wrapped to 0, which never ends). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/grow.h"

Test(grow, doubles_from_the_first_capacity)
{
    int *a = NULL;
    size_t cap = 0;
    cr_assert_eq(TKP_GROW_FROM(a, cap, 1, 64), 0);
    cr_assert_eq(cap, 64);
    cr_assert_eq(TKP_GROW_FROM(a, cap, 64, 64), 0);
    cr_assert_eq(cap, 64, "no growth while it fits");
    cr_assert_eq(TKP_GROW_FROM(a, cap, 65, 64), 0);
    cr_assert_eq(cap, 128);
    cr_assert_eq(TKP_GROW_FROM(a, cap, 1000, 64), 0);
    cr_assert_eq(cap, 1024);
    a[1023] = 7; /* the memory is there (ASan checks in the sanitizer build) */
    free(a);
}

Test(grow, zeroed_tables_are_zero_past_the_old_end)
{
    uint64_t *t = NULL;
    uint32_t n = 0; /* a uint32_t capacity: TKP_GROW_* picks tkp_grow_to32 */
    cr_assert_eq(TKP_GROW_ZEROED_FROM(t, n, 3, 4), 0);
    cr_assert_eq(n, 4);
    for (uint32_t i = 0; i < n; i++) t[i] = ~0ull;
    cr_assert_eq(TKP_GROW_ZEROED_FROM(t, n, 9, 4), 0);
    cr_assert_eq(n, 16);
    for (uint32_t i = 0; i < 4; i++) cr_assert_eq(t[i], ~0ull, "kept %u", i);
    for (uint32_t i = 4; i < 16; i++) cr_assert_eq(t[i], 0, "zeroed %u", i);
    free(t);
}

Test(grow, an_overflowing_size_fails_and_keeps_the_array, .timeout = 10)
{
    char *b = NULL;
    size_t cap = 0;
    cr_assert_eq(TKP_GROW(b, cap, 10), 0);
    char *old = b;
    /* more elements than any doubling of 16 can reach */
    cr_assert_eq(TKP_GROW(b, cap, SIZE_MAX), TKP_ERR_NOMEM);
    cr_assert_eq(b, old);
    cr_assert_eq(cap, 16);
    /* a count that fits, of elements too big for it in bytes */
    uint64_t *w = NULL;
    size_t wcap = 0;
    cr_assert_eq(TKP_GROW_FROM(w, wcap, SIZE_MAX / 4, 16), TKP_ERR_NOMEM);
    cr_assert_null(w);
    cr_assert_eq(wcap, 0);
    /* a uint32_t capacity never passes UINT32_MAX (2^32 would store as 0) */
    uint8_t *s = NULL;
    uint32_t scap = 0;
    cr_assert_eq(TKP_GROW_FROM(s, scap, (size_t)UINT32_MAX, 64), TKP_ERR_NOMEM);
    cr_assert_null(s);
    cr_assert_eq(scap, 0);
    free(b);
}
