/* The cuBLASLt descriptor cache (lib_desc.c), filled and read by hooks_lib.c. */
#ifndef TKP_HOOKS_LIB_DESC_H
#define TKP_HOOKS_LIB_DESC_H

#include <stdint.h>

/* A small lock-free table: descriptor address -> the attributes we need, filled by the
 * Create/Init/SetAttribute hooks and dropped by Destroy, so that cublasLtMatmul reads its shape
 * without querying the library. Readers never wait (per-entry sequence counter); a writer that
 * cannot get an entry after a bounded spin turns the cache off for good (correct but slower:
 * every matmul then queries). */
enum { TKP_DESC_LAYOUT = 0, TKP_DESC_MATMUL = 1 };
/* layout: v = {type, rows, cols, batch}; matmul: v = {compute, transa, transb, 0} */
void tkp_desc_put(const void *desc, int kind, const uint64_t v[4]);
/* Updates field i of a cached descriptor; an absent one stays absent (queried at first use). */
void tkp_desc_set(const void *desc, int kind, int i, uint64_t val);
void tkp_desc_drop(const void *desc, int kind);
/* 1 and v filled on a hit, 0 on a miss. */
int tkp_desc_get(const void *desc, int kind, uint64_t v[4]);

#endif
