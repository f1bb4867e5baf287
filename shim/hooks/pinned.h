/* Pinned host allocations we saw (pinned.c; cudaMallocHost & co.): a copy's host side is looked
 * up here. */
#ifndef TKP_HOOKS_PINNED_H
#define TKP_HOOKS_PINNED_H

#include <stddef.h>

void tkp_pinned_add(const void *p, size_t n);
void tkp_pinned_remove(const void *p);
int tkp_pinned_has(const void *p);

#endif
