/* Library calls (cuBLAS, cuBLASLt, cuDNN): the ring event layout shared by hooks_lib.c and the
 * writer, and the cuBLASLt descriptor cache (lib_desc.c). */
#ifndef TKP_LIB_H
#define TKP_LIB_H

#include <stdint.h>

/* LIB_CALL ring event (struct tkp_ev, 64 bytes):
 *   sub=lib flags=op (enum tkp_lib_op) step ts=call start a=stream b=operand A's address
 *   u[0..3]=m, n, k, batch (saturated at UINT32_MAX; 0 unknown)   u[4]=call id
 *   u[5]=atype | btype<<8 | ctype<<16 | compute<<24 (0xff unknown)
 *   u[6]=transa | transb<<4 (0xf unknown) | flags<<8 | status<<16 (saturated at 0xffff)
 *   u[7]=host time inside the call, ns (saturated) */
#define TKP_LIB_UNKNOWN8 0xffu
#define TKP_LIB_UNKNOWN4 0xfu

enum tkp_lib_op {
    TKP_OP_GEMM_EX, TKP_OP_GEMM_EX_64, TKP_OP_GEMM_SB_EX, TKP_OP_GEMM_SB_EX_64,
    TKP_OP_GEMM_B_EX, TKP_OP_GEMM_B_EX_64, TKP_OP_SGEMM, TKP_OP_SGEMM_64, TKP_OP_HGEMM,
    TKP_OP_HGEMM_64, TKP_OP_SGEMM_SB, TKP_OP_SGEMM_SB_64, TKP_OP_LT_MATMUL,
    TKP_OP_CUDNN_BACKEND_EXECUTE, TKP_OP_CUDNN_CONV_FWD, TKP_OP_COUNT
};
/* The exported function name of an op ("cublasGemmEx"), "?" out of range. */
const char *tkp_lib_op_name(unsigned op);

/* ---- cuBLASLt descriptor cache (lib_desc.c) ----------------------------------------------------
 * A small lock-free table: descriptor address -> the attributes we need, filled by the
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
