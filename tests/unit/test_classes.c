/* The kernel classifier (decoder/model/classes.c) on real-world kernel names: vLLM, FlashAttention,
 * FlashInfer, cuBLAS/cuBLASLt, llama.cpp, PyTorch eager, MoE, NCCL (names from
 * /work/shared/notes/serving-loops.md §1.3, §4.2, §5.2, §6.1) and kernels/minillm's own; the
 * base-name demangling; and a user rules file overriding the built-ins. Plain main: prints each
 * mismatch, exits 1 on any. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/classes.h"
#include "base/err.h"

static const struct {
    const char *name, *cls;
} table[] = {
    /* vLLM decode graph, eager/custom-op names */
    {"_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi1ELi1EEEvPT_PKS3_S6_fii", "norm"},
    {"_ZN4vllm25fused_add_rms_norm_kernelIN3c108BFloat16ELi8EEENSt9enable_ifIXaagtT0_Li0Esr3std", "norm"},
    {"triton_red_fused_add_mean_mul_pow_rsqrt_0", "norm"},
    {"_ZN4vllm23rotary_embedding_kernelIN3c108BFloat16ELb1EEEvPKlPT_S6_PKS5_iliiii", "rope"},
    {"_ZN4vllm30reshape_and_cache_flash_kernelI13__nv_bfloat16S1_LNS_18Fp8KVCacheDataTypeE0EEEvPKT_S6_PT0_S9_PKliiiiiiPKfSD_", "kv-cache"},
    {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
     "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>, true> > > >(flash::Params)",
     "attention"},
    {"_ZN5flash32prepare_varlen_num_blocks_kernelEiiiPKiS1_S1_S1_S1_S1_iiiiiN7cutlass10FastDivmodES3_PiS4_b", "attention"},
    {"flash_fwd_splitkv_kernel", "attention"},
    {"flash_fwd_splitkv_combine_kernel", "attention"},
    {"_ZN10flashinfer32BatchDecodeWithPagedKVCacheKernelILNS_9PosEncodingModeE0ELj2ELj4ELj8ELj16E6__halfS2_S2_iNS_13DefaultParamsEEEvT9_", "attention"},
    {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"},
    {"nvjet_tst_128x8_64x8_2x1_v_bz_TNT", "gemm"},
    {"nvjet_hsh_64x8_64x8_2x1_v_bz_bias_TNT", "gemm"},
    {"_Z19splitKreduce_kernelILi32ELi16EifffLb1ELb0ELb0EEv18cublasSplitKParamsIT4_EPKT2_PKT3_PS6_PKS1_SB_S8_PvlPS1_Pi", "gemm"},
    {"_Z17gemv2T_kernel_valIiiLi128ELi16ELi4ELi4ELb0ELb0E", "gemm"},
    {"ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn", "gemm"},
    {"_ZN4vllm18act_and_mul_kernelIN3c108BFloat16EXadL_ZNS_11silu_kernelIS2_EET_RKS4_EELb1EEEvPS4_PS5_i", "activation"},
    {"triton_poi_fused_mul_silu_1", "activation"},
    {"_ZN4vllm29cross_device_reduce_1stageIN3c108BFloat16ELi2EEEvPNS_8RankDataENS_6SignalEPNS_9RankSignalsEPT_ii", "communication"},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "communication"},
    /* sampling */
    {"_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9ArgMaxOpsIfEEjSt4pairIflELi4EEEEEvT1_", "sampling"},
    {"_ZN10flashinfer8sampling25TopKTopPSamplingFromProbKernelILj1024ELN3cub18BlockScanAlgorithmE0E", "sampling"},
    /* MoE */
    {"fused_moe_kernel", "moe"},
    {"_ZN4vllm3moe17topkGatingSoftmaxILi8ELi8ELi4ELi16ELi32Ei13__nv_bfloat16EEvPKT5_PKbPfiPT4_PiiiiS9_", "moe"},
    {"_ZN4vllm3moe26moe_align_block_size_kernelIiEEvPKT_PiS5_S5_iiii", "moe"},
    {"count_and_sort_expert_tokens_kernel", "moe"},
    {"_ZN4vllm3moe14moe_sum_kernelIN3c108BFloat16ELi2EEEvPT_PKS4_i", "moe"},
    /* llama.cpp */
    {"_Z12rms_norm_f32ILi1024ELb1ELb0EEvPKfPfillllfS1_lllPK5uint3S5_S5_S5_S1_lllS5_S5_S5_S5_", "norm"},
    {"_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb1EEvPKvS2_PKiPfRK22ggml_cuda_mm_fusion_argsjjjjjjjjjjjjj", "gemm"},
    {"_Z9rope_neoxILb1ELb0EfEvPKT1_PS0_iiiiiPKifffffPK5float2S5_", "rope"},
    {"_Z9rope_normILb1ELb0EfEvPKT1_PS0_iiiiiPKifff", "rope"},
    {"_Z10k_set_rowsIflhEvPKT_PKT0_PT1_lllllllllllll", "kv-cache"},
    {"_Z18flash_attn_ext_vecILi128ELi1EL9ggml_type1ELS0_1ELb0EEvPKcS2_S2_S2_S2_PKiPfP6float2ffffjfiiiiiiiiiiiiiliiliiiiil", "attention"},
    {"_Z11k_get_rows_fIffEvPKT_PKiPT0_lllmmmmmmmmm", "embedding"},
    {"_Z11cpy_f32_f16IXadL_Z13cpy_1_f32_f16PKcPcEEEvS1_S2_iiiiiiiiiiii", "copy"},
    /* llama.cpp 0.3.36 (llama-cpp-python's tree) ggml-cuda kernels of a dense model's graph,
     * mangled by g++ from the source's signatures (nvcc's device names are the same Itanium
     * mangling): residual adds and norm weights, activation (de)quantizers around mmq/mmvq and
     * cuBLAS, the batched-GEMM pointer set-up, the non-FA attention's mask and softmax */
    {"_Z11k_bin_bcastIXadL_Z6op_addffEEfffJEEvPKT0_PKT1_PT2_jjj5uint3S8_S8_S8_S8_iiiiiiDpT3_", "elementwise"},
    {"_Z9scale_f32IfEvPKT_PS0_ffl", "elementwise"},
    {"_Z15unary_op_kernelIXadL_Z7op_silufEEfEvPKT0_PS0_i", "activation"},
    {"_Z13quantize_q8_1PKfPvlllllj5uint3", "copy"},
    {"_Z17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout0ELb0EEvPKfPKiPvllllliii", "copy"},
    {"_Z16dequantize_blockILi32ELi1EXadL_Z15dequantize_q8_0PKvliR6float2EE6__halfEvS1_PT2_lll5uint3lll", "copy"},
    {"_Z22k_compute_batched_ptrsPKvS0_PcPS0_PPvlllmmmmmmll", "gemm"},
    {"_Z17diag_mask_inf_f32PKfPfiii", "attention"},
    {"_Z12soft_max_f32ILb1ELi0ELi0E6__halfEvPKfPKT2_S2_Pf15soft_max_params", "other"},
    /* PyTorch eager */
    {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", "elementwise"},
    /* torch 2.15 on simgpu (tests/realstack): generic kernels are elementwise, a family in the
     * functor wins, Inductor's fused kernels by their op words */
    {"_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3EELb0EEEviT0_T1_", "elementwise"},
    {"_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4ELi4EEEEEvT1_", "elementwise"},
    {"_ZN2at6native44_GLOBAL__N__b23ef953_11_Indexing_cu_89862edb21indexSelectSmallIndexIN3c108BFloat16EljLi2ELi2ELin2EEEvNS_4cuda6detail10TensorInfoIT_T1_EENS7_IKS8_S9_EENS7_IKT0_S9_EEiiS9_l", "elementwise"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_17rsqrt_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EELb0EEEviT0_T1_", "norm"},
    {"triton_poi_fused_add_cat_index_mul_neg_slice_stack_0", "elementwise"},
    {"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastINS0_13BinaryFunctorIN3c108BFloat16ES5_S5_NS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_", "elementwise"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4EZNS0_27converting_copy_kernel_cudaIfN3c108BFloat16EEEvRNS_18TensorIteratorBaseEEUlfE_St5arrayIPcLm2EELb0EEEviT0_T1_", "copy"},
    {"_Z4cast_kernelPfPKh", "copy"},
    {"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "norm"},
    {"triton_per_fused_argmax_2", "sampling"},
    {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_bf16_knob_7_64x128x128_4x1x1_kernel0_0", "attention"},
    {"_ZN2at6native54_GLOBAL__N__d8ceb000_21_CatArrayBatchedCopy_cu_3a2d9ef627CatArrayBatchedCopyI", "copy"},
    {"pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>", "attention"},
    /* vLLM 0.33's Model Runner V2 (Triton kernels, tests/realstack realstack_vllm_eager_v2) */
    {"_compute_slot_mappings_kernel", "kv-cache"},
    {"_get_num_sampled_and_rejected_kernel", "sampling"},
    {"_temperature_kernel", "sampling"},
    {"_bias_kernel", "sampling"},
    {"_bad_words_kernel", "sampling"},
    {"_ranks_kernel", "sampling"},
    {"_prepare_prefill_inputs_kernel", "elementwise"},
    {"_prepare_pos_seq_lens_kernel", "elementwise"},
    {"_post_update_kernel", "elementwise"},
    {"_apply_write_kernel", "elementwise"},
    /* minillm (kernels/README.md) */
    {"_Z16embedding_kernelI13__nv_bfloat16EvPfPKiPKT_i", "embedding"},
    {"_Z15rms_norm_kernelILi256EEvP13__nv_bfloat16PKfS3_i", "norm"},
    {"_Z23rotary_embedding_kernelI13__nv_bfloat16EvPT_S2_PKiii", "rope"},
    {"reshape_and_cache_kernel", "kv-cache"},
    {"_Z29paged_attention_decode_kernelILi128EEvPfS0_S0_PK13__nv_bfloat16S3_S3_PKiiiiiif", "attention"},
    {"paged_attention_combine_kernel", "attention"},
    {"fused_add_rms_norm_kernel", "norm"},
    {"_Z19silu_and_mul_kernelI13__nv_bfloat16EvPT_PKS1_i", "activation"},
    {"argmax_sampling_kernel", "sampling"},
    {"moe_topk_softmax_kernel", "moe"},
    {"moe_permute_kernel", "moe"},
    {"moe_unpermute_reduce_kernel", "moe"},
    {"_Z18fill_random_kernelI13__nv_bfloat16EvPT_mjff", "other"},
    {"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_kernel__5x_cudnn", "gemm"},
};

static const struct {
    const char *name, *base;
} bases[] = {
    {"_Z15rms_norm_kernelILi256EEvP13__nv_bfloat16PKfS3_i", "rms_norm_kernel"},
    {"_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi1ELi1EEEvPT_PKS3_S6_fii", "rms_norm_kernel"},
    {"_ZNK3foo3barEv", "bar"},
    {"_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_9ArgMaxOpsIfEEjSt4pairIflELi4EEEEEvT1_", "reduce_kernel"},
    {"void vllm::act_and_mul_kernel<c10::BFloat16, true>(c10::BFloat16*, int)", "act_and_mul_kernel"},
    {"nvjet_tst_128x8_64x8_2x1_v_bz_TNT", "nvjet_tst_128x8_64x8_2x1_v_bz_TNT"},
    {"_Z999broken", "_Z999broken"},
    {"", ""},
};

int main(void)
{
    struct tkp_classes *c;
    char why[256], base[256];
    int bad = 0;
    if (tkp_classes_new(NULL, &c, why, sizeof(why))) return puts("FAIL: tkp_classes_new"), 1;
    for (size_t i = 0; i < sizeof(table) / sizeof(*table); i++) {
        const char *got = tkp_classes_name(c, tkp_classes_match(c, table[i].name));
        if (strcmp(got, table[i].cls))
            bad++, printf("FAIL: %s: %s, expected %s\n", table[i].name, got, table[i].cls);
    }
    for (size_t i = 0; i < sizeof(bases) / sizeof(*bases); i++) {
        tkp_kernel_base_name(bases[i].name, base, sizeof(base));
        if (strcmp(base, bases[i].base))
            bad++, printf("FAIL: base of %s: '%s', expected '%s'\n", bases[i].name, base, bases[i].base);
    }
    tkp_classes_free(c);

    /* user rules come first, may name new classes, and bad lines are refused with FILE:LINE */
    char path[] = "/tmp/tkp_classes_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return puts("FAIL: mkstemp"), 1;
    fputs("# comment\n\nquant  scaled_fp8_quant|quantize_q8\ngemm   ^nvjet\nattention reshape_and_cache\n", f);
    fclose(f);
    if (tkp_classes_new(path, &c, why, sizeof(why))) return printf("FAIL: rules: %s\n", why), 1;
    static const struct {
        const char *name, *cls;
    } user[] = {{"_ZN4vllm23scaled_fp8_quant_kernelIN3c108BFloat16EEEvPT_", "quant"},
                {"reshape_and_cache_kernel", "attention"},
                {"fused_moe_kernel", "moe"}};
    for (size_t i = 0; i < sizeof(user) / sizeof(*user); i++) {
        const char *got = tkp_classes_name(c, tkp_classes_match(c, user[i].name));
        if (strcmp(got, user[i].cls))
            bad++, printf("FAIL: user rules: %s: %s, expected %s\n", user[i].name, got, user[i].cls);
    }
    if (tkp_classes_find(c, "quant") != TKP_CLASS_BUILTIN) bad++, puts("FAIL: user class id");
    tkp_classes_free(c);
    f = fopen(path, "w");
    fputs("gemm\n", f);
    fclose(f);
    if (tkp_classes_new(path, &c, why, sizeof(why)) != TKP_ERR_USAGE || !strstr(why, ":1:"))
        bad++, printf("FAIL: a line without a regex: '%s'\n", why);
    unlink(path);
    if (!bad) printf("ok: %zu names classified, %zu base names\n", sizeof(table) / sizeof(*table),
                     sizeof(bases) / sizeof(*bases));
    return bad ? 1 : 0;
}
