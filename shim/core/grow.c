/* The shim's one growable array: see grow.h. */
#include "core/grow.h"

#include <stdlib.h>
#include <string.h>

int tkp_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t first)
{
    if (need < *cap) return 0;
    uint32_t c = *cap ? *cap : first;
    while (c <= need) {
        if (c > UINT32_MAX / 2) return -1;
        c *= 2;
    }
    if (c > SIZE_MAX / elem) return -1;
    unsigned char *p = realloc(*arr, (size_t)c * elem);
    if (!p) return -1;
    memset(p + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *arr = p;
    *cap = c;
    return 0;
}
