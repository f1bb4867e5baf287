/* tokprof decoder: arrays that grow by doubling, for the tables the decoder builds. The one grower
 * of the decoder: every "double the capacity, check for overflow, keep the old array on failure"
 * goes through tkp_grow_to() (the shim, which must not link the decoder, has its own in
 * shim/core/grow.h). */
#ifndef TKP_GROW_H
#define TKP_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* The capacity that holds n elements of sz bytes: cap (first when cap is 0) doubled until it
 * does. 0 when it would pass max elements or SIZE_MAX bytes. */
static inline size_t tkp_grow_cap(size_t cap, size_t n, size_t sz, size_t first, size_t max)
{
    size_t c = cap ? cap : first;
    while (c < n) {
        if (c > max / 2) return 0;
        c *= 2;
    }
    return c <= max && c <= SIZE_MAX / sz ? c : 0;
}

/* Grows *p (an array of *cap elements of sz bytes, at most max) to hold at least n; the capacity
 * doubles from first. With zero, the elements it adds are zeroed, so that *cap is also how many
 * entries exist (a table indexed by a small id). Returns 0, or TKP_ERR_NOMEM (out of memory, or
 * a size that would overflow) with *p and *cap unchanged. */
static inline int tkp_grow_max(void **p, size_t *cap, size_t n, size_t sz, size_t first, int zero,
                               size_t max)
{
    if (n <= *cap) return 0;
    size_t c = tkp_grow_cap(*cap, n, sz, first, max);
    void *q = c ? realloc(*p, c * sz) : NULL;
    if (!q) return TKP_ERR_NOMEM;
    if (zero) memset((char *)q + *cap * sz, 0, (c - *cap) * sz);
    *p = q;
    *cap = c;
    return 0;
}
static inline int tkp_grow_to(void **p, size_t *cap, size_t n, size_t sz, size_t first, int zero)
{
    return tkp_grow_max(p, cap, n, sz, first, zero, SIZE_MAX);
}
/* The same for a uint32_t capacity (it never passes UINT32_MAX). */
static inline int tkp_grow_to32(void **p, uint32_t *cap, size_t n, size_t sz, size_t first,
                                int zero)
{
    size_t c = *cap;
    int err = tkp_grow_max(p, &c, n, sz, first, zero, UINT32_MAX);
    *cap = (uint32_t)c;
    return err;
}
/* TKP_GROW_FROM(array, cap, n, first): array (any pointer) and cap (a size_t, uint64_t or
 * uint32_t lvalue) grown to hold n; TKP_GROW_ZEROED_FROM zeroes what it adds. */
#define TKP_GROW_ANY(p, cap, n, first, zero)                                                       \
    _Generic(&(cap), uint32_t *                                                                    \
             : tkp_grow_to32, default                                                              \
             : tkp_grow_to)((void **)&(p), &(cap), (n), sizeof(*(p)), (first), (zero))
#define TKP_GROW_FROM(p, cap, n, first) TKP_GROW_ANY(p, cap, n, first, 0)
#define TKP_GROW_ZEROED_FROM(p, cap, n, first) TKP_GROW_ANY(p, cap, n, first, 1)

/* Grows from 16. (No function tkp_grow here: the shim's tkp_grow, shim/core/grow.h, has
 * another signature, and one name means one thing.) */
#define TKP_GROW(p, cap, n) TKP_GROW_FROM(p, cap, n, 16)

/* The same for a table indexed by a small id (a thread index): the elements it adds are zeroed,
 * so that *cap is also how many entries exist. */
static inline int tkp_grow_zeroed(void **p, size_t *cap, size_t n, size_t sz)
{
    return tkp_grow_to(p, cap, n, sz, 16, 1);
}

/* An array that code fills one element at a time: tkp_array_push() makes room (tkp_grow) and
 * returns the new element, zeroed, or NULL when out of memory (the array unchanged). p is owned:
 * free(a.p) when done. */
struct tkp_array {
    void *p;
    size_t n, cap;
};
static inline void *tkp_array_push(struct tkp_array *a, size_t size)
{
    if (tkp_grow_to(&a->p, &a->cap, a->n + 1, size, 16, 0)) return NULL;
    char *e = (char *)a->p + a->n++ * size;
    memset(e, 0, size);
    return e;
}

#endif
