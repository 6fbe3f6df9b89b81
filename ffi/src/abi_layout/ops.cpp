// ops.cpp — weft_abi_layout's part for DLPack, MoE expert parallelism (with the grouped GEMM and
// the expert GEMMs), decoder layers, baselines (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void ops_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(WeftDlpackDesc, WEFT_DLPACK_DESC_INIT, size, version, data, device_type, device_id, ndim, dtype,
                     dl_dtype, read_only, shape, strides);
  WEFT_LAYOUT_STRUCT(WeftMoeRouteParams, WEFT_MOE_ROUTE_PARAMS_INIT, size, version, logits, logits_dtype, flags,
                     tokens, experts, topk, ids, weights, stream, done, seq, arrivals);
  WEFT_LAYOUT_STRUCT(WeftMoeDispatchParams, WEFT_MOE_DISPATCH_PARAMS_INIT, size, version, flags, experts, topk,
                     hidden, tokens, max_tokens, capacity, x, ids, weights, logits, logits_dtype, ctas, workspace,
                     workspace_bytes, stream);
  WEFT_LAYOUT_STRUCT(WeftMoeDispatchChoice, WEFT_MOE_DISPATCH_CHOICE_INIT, size, version, ctas, local_experts,
                     capacity, max_tokens, workspace_bytes, recv_offset, row_source_offset, expert_offsets_offset,
                     expert_counts_offset, source_counts_offset, arrivals_offset);
  WEFT_LAYOUT_STRUCT(WeftMoeCombineParams, WEFT_MOE_COMBINE_PARAMS_INIT, size, version, dispatch, hidden, weights,
                     out, ctas, reserved, workspace, workspace_bytes, stream);
  WEFT_LAYOUT_STRUCT(WeftMoeCombineChoice, WEFT_MOE_COMBINE_CHOICE_INIT, size, version, ctas, reserved,
                     workspace_bytes, returned_offset);
  WEFT_LAYOUT_STRUCT(WeftGroupedGemmParams, WEFT_GROUPED_GEMM_PARAMS_INIT, size, version, a, b, offsets, out, m, n, k,
                     groups, flags, tile_n, max_ctas, stream);
  WEFT_LAYOUT_STRUCT(WeftGroupedGemmChoice, WEFT_GROUPED_GEMM_CHOICE_INIT, size, version, tile_n, ctas, band, stages);
  WEFT_LAYOUT_STRUCT(WeftMoeExpertGemmParams, WEFT_MOE_EXPERT_GEMM_PARAMS_INIT, size, version, flags, n, k, mover, tile_n,
                     ctas, w, out);
  WEFT_LAYOUT_STRUCT(WeftMoeExpertGemmChoice, WEFT_MOE_EXPERT_GEMM_CHOICE_INIT, size, version, ctas, tile_n, mover, stages);
  WEFT_LAYOUT_STRUCT(WeftEmbeddingParams, WEFT_EMBEDDING_PARAMS_INIT, size, version, table, ids, out, rows, vocab,
                     dim, stream);
  WEFT_LAYOUT_STRUCT(WeftRmsNormParams, WEFT_RMS_NORM_PARAMS_INIT, size, version, x, residual, weight, out, rows, dim,
                     eps, reserved, stream);
  WEFT_LAYOUT_STRUCT(WeftRopeParams, WEFT_ROPE_PARAMS_INIT, size, version, x, positions, rows, heads, head_dim,
                     row_stride, theta, reserved, stream);
  WEFT_LAYOUT_STRUCT(WeftSwigluParams, WEFT_SWIGLU_PARAMS_INIT, size, version, x, out, rows, dim, stream);
  WEFT_LAYOUT_STRUCT(WeftKvAppendParams, WEFT_KV_APPEND_PARAMS_INIT, size, version, k, v, k_cache, v_cache, slot_ids,
                     positions, rows, width, src_stride, slots, max_seq, stream);
  WEFT_LAYOUT_STRUCT(WeftCacheAttentionParams, WEFT_CACHE_ATTENTION_PARAMS_INIT, size, version, q, k_cache, v_cache,
                     slot_ids, positions, out, rows, heads, kv_heads, head_dim, q_stride, out_stride, slots, max_seq,
                     scale, reserved, stream);
  WEFT_LAYOUT_STRUCT(WeftSampleParams, WEFT_SAMPLE_PARAMS_INIT, size, version, logits, dtype, reserved, rows, vocab,
                     row_stride, temperature, top_k, top_p, seed, counter, tokens, logprobs, stream);
  WEFT_LAYOUT_STRUCT(WeftNcclParams, WEFT_NCCL_PARAMS_INIT, size, version, kind, dtype, count, inputs, outputs,
                     streams, root, reserved);
  WEFT_LAYOUT_ENUM(WeftDlpackDevice, WEFT_DLPACK_CPU, WEFT_DLPACK_CUDA, WEFT_DLPACK_CUDA_HOST,
                     WEFT_DLPACK_CUDA_MANAGED);
  WEFT_LAYOUT_ENUM(WeftDlpackFlags, WEFT_DLPACK_VERSIONED, WEFT_DLPACK_FREE_DATA);
  WEFT_LAYOUT_CONSTANTS(WeftDlpackLimits);
  WEFT_LAYOUT_CONSTANT(WEFT_DLPACK_MAX_NDIM);
  WEFT_LAYOUT_CONSTANTS(WeftMoeFlags);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_ROUTE);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_NORMALIZE);
  WEFT_LAYOUT_CONSTANTS(WeftMoeLimits);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_MAX_EXPERTS);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_BLOCK_ROWS);
  WEFT_LAYOUT_ENUM(WeftMoeFailure, WEFT_MOE_FAIL_TIMEOUT, WEFT_MOE_FAIL_ABORTED, WEFT_MOE_FAIL_MISMATCH,
                     WEFT_MOE_FAIL_BAD_EXPERT, WEFT_MOE_FAIL_PEER_BAD_EXPERT, WEFT_MOE_FAIL_CAPACITY,
                     WEFT_MOE_FAIL_NO_LAYOUT);
  WEFT_LAYOUT_ENUM(WeftMoeStage, WEFT_MOE_STAGE_ENTRY, WEFT_MOE_STAGE_LAYOUT, WEFT_MOE_STAGE_ARRIVALS,
                     WEFT_MOE_STAGE_BARRIER, WEFT_MOE_STAGE_READY, WEFT_MOE_STAGE_RETURN);
  WEFT_LAYOUT_CONSTANTS(WeftMoeExpertFlags);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_W_NK);
  WEFT_LAYOUT_CONSTANT(WEFT_MOE_SWIGLU);
  WEFT_LAYOUT_ENUM(WeftMoeMover, WEFT_MOE_MOVER_AUTO, WEFT_MOE_MOVER_PUSH, WEFT_MOE_MOVER_PULL);
  WEFT_LAYOUT_CONSTANTS(WeftGroupedGemmFailure);
  WEFT_LAYOUT_CONSTANT(WEFT_GROUPED_FAIL_OFFSETS);
  WEFT_LAYOUT_ENUM(WeftMoeField, WEFT_MOE_FIELD_EXPERTS, WEFT_MOE_FIELD_TOPK, WEFT_MOE_FIELD_HIDDEN,
                     WEFT_MOE_FIELD_WORLD, WEFT_MOE_FIELD_CAPACITY, WEFT_MOE_FIELD_MAX_TOKENS, WEFT_MOE_FIELD_EPOCH);
}

}  // namespace weft::abi_layout
