/* tokprof decoder: arrays that grow by doubling, for the tables the decoder builds. */
#ifndef TKP_GROW_H
#define TKP_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* Grows *p (an array of *cap elements of sz bytes) to hold at least n; the capacity doubles from
 * 16. Returns 0, or TKP_ERR_NOMEM with *p and *cap unchanged. */
static inline int tkp_grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    if (c > SIZE_MAX / sz) return TKP_ERR_NOMEM;
    void *q = realloc(*p, c * sz);
    if (!q) return TKP_ERR_NOMEM;
    *p = q;
    *cap = c;
    return 0;
}
#define TKP_GROW(p, cap, n) tkp_grow((void **)&(p), &(cap), (n), sizeof(*(p)))

/* The same for a table indexed by a small id (a thread index): the elements it adds are zeroed,
 * so that *cap is also how many entries exist. */
static inline int tkp_grow_zeroed(void **p, size_t *cap, size_t n, size_t sz)
{
    size_t old = *cap;
    if (tkp_grow(p, cap, n, sz)) return TKP_ERR_NOMEM;
    memset((char *)*p + old * sz, 0, (*cap - old) * sz);
    return 0;
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
    if (tkp_grow(&a->p, &a->cap, a->n + 1, size)) return NULL;
    char *e = (char *)a->p + a->n++ * size;
    memset(e, 0, size);
    return e;
}

#endif
