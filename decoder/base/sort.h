/* qsort for arrays that may be empty: an empty array may have a NULL base, which qsort's
 * contract (and UBSan) forbids even with a zero count. */
#ifndef TKP_SORT_H
#define TKP_SORT_H

#include <stdlib.h>

static inline void tkp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1) qsort(base, n, size, cmp);
}

#endif
