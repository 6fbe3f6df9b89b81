// attention.cpp — weft_abi_layout's part for the attention engine and fused ring attention
// (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void attention_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(WeftAttentionParams, WEFT_ATTENTION_PARAMS_INIT, size, version, q, k, v, out, lse, cu_seqlens_q,
                     cu_seqlens_k, batch, heads, kv_heads, head_dim, seqlen_q, seqlen_k, total_q, total_k, flags, scale,
                     max_ctas, reserved, stream, seqused_k);
  WEFT_LAYOUT_STRUCT(WeftAttentionChoice, WEFT_ATTENTION_CHOICE_INIT, size, version, block_m, block_n, stages, ctas, tiles,
                     section);
  WEFT_LAYOUT_STRUCT(WeftRingAttentionParams, WEFT_RING_ATTENTION_PARAMS_INIT, size, version, q, k, v, out, lse, batch,
                     heads, kv_heads, head_dim, seqlen, kv_rows, comm_ctas, layout, flags, scale, mover, group_heads,
                     memory_bytes, workspace, workspace_bytes, stream);
  WEFT_LAYOUT_STRUCT(WeftRingAttentionChoice, WEFT_RING_ATTENTION_CHOICE_INIT, size, version, mover, comm_ctas, reserved,
                     group_heads, groups, slots, ctas, shard, workspace_bytes, receive_bytes, predicted_us);
  WEFT_LAYOUT_CONSTANTS(WeftAttentionFlags);
  WEFT_LAYOUT_CONSTANT(WEFT_ATTENTION_CAUSAL);
  WEFT_LAYOUT_ENUM(WeftAttentionFailure, WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT, WEFT_ATTENTION_FAIL_PEER_WAIT,
                   WEFT_ATTENTION_FAIL_SEQLENS);
  WEFT_LAYOUT_ENUM(WeftAttentionStage, WEFT_ATTENTION_STAGE_PRODUCER, WEFT_ATTENTION_STAGE_CONSUMER,
                   WEFT_ATTENTION_STAGE_FINISH);
  WEFT_LAYOUT_CONSTANTS(WeftRingLayout);
  WEFT_LAYOUT_CONSTANT(WEFT_RING_ZIGZAG);
  WEFT_LAYOUT_CONSTANT(WEFT_RING_CONTIGUOUS);
  WEFT_LAYOUT_ENUM(WeftRingMover, WEFT_RING_MOVER_AUTO, WEFT_RING_MOVER_COPY_ENGINE, WEFT_RING_MOVER_CTAS);
}

}  // namespace weft::abi_layout
