/* The names of the library calls we record, for the writer's LIB_CALL records. */
#include "record/libcall.h"

static const char *const op_names[TKP_OP_COUNT] = {
    [TKP_OP_GEMM_EX] = "cublasGemmEx",
    [TKP_OP_GEMM_EX_64] = "cublasGemmEx_64",
    [TKP_OP_GEMM_SB_EX] = "cublasGemmStridedBatchedEx",
    [TKP_OP_GEMM_SB_EX_64] = "cublasGemmStridedBatchedEx_64",
    [TKP_OP_GEMM_B_EX] = "cublasGemmBatchedEx",
    [TKP_OP_GEMM_B_EX_64] = "cublasGemmBatchedEx_64",
    [TKP_OP_SGEMM] = "cublasSgemm_v2",
    [TKP_OP_SGEMM_64] = "cublasSgemm_v2_64",
    [TKP_OP_HGEMM] = "cublasHgemm",
    [TKP_OP_HGEMM_64] = "cublasHgemm_64",
    [TKP_OP_SGEMM_SB] = "cublasSgemmStridedBatched",
    [TKP_OP_SGEMM_SB_64] = "cublasSgemmStridedBatched_64",
    [TKP_OP_LT_MATMUL] = "cublasLtMatmul",
    [TKP_OP_CUDNN_BACKEND_EXECUTE] = "cudnnBackendExecute",
    [TKP_OP_CUDNN_CONV_FWD] = "cudnnConvolutionForward",
};

const char *tkp_lib_op_name(unsigned op)
{
    return op < TKP_OP_COUNT && op_names[op] ? op_names[op] : "?";
}
