/* Library calls (cuBLAS, cuBLASLt, cuDNN): the ring event layout and the op names (libcall.c),
 * shared by hooks/hooks_lib.c, which records them, and the writer, which encodes them. */
#ifndef TKP_RECORD_LIBCALL_H
#define TKP_RECORD_LIBCALL_H

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

#endif
