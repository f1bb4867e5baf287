/* The shim's one growable array (grow.c): every "double the capacity, check for overflow, keep the
 * old array on failure" of the shim goes through tkp_grow() (the decoder has its own in
 * decoder/base/grow.h: the shim links nothing of the decoder). Never on a launch's path: it
 * allocates. */
#ifndef TKP_CORE_GROW_H
#define TKP_CORE_GROW_H

#include <stddef.h>
#include <stdint.h>

/* Grows a zero-filled array of `elem`-byte items so that index `need` exists (capacity doubles
 * from `first`). 0, or -1 when memory ran out or the size would overflow (the array is
 * unchanged). */
int tkp_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t first);

#endif
