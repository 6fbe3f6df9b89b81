// problem.h — the plain data of one attention launch that host code fills and every device role
// reads (no device code here: ffi/src includes it through attention.h).
#pragma once

#include <cstdint>

namespace weft::attn {

// Queries, keys and values are bf16 rows of heads x head_dim (q, out) or kv_heads x head_dim
// (k, v): one row per token. Sequence b's tokens are rows [b * seqlen, (b + 1) * seqlen) ("bshd",
// cu_q == nullptr), or rows [cu[b], cu[b + 1]) of a packed batch (varlen); with used_k, sequence
// b's keys are rows [cu_k[b], cu_k[b] + used_k[b]) instead (starts in any order: a KV cache's
// slots, read in place). Query i of a sequence with len_q queries and len_k keys may see key j
// when !causal, or when j <= i + len_k - len_q (causal, aligned bottom-right: the last query sees
// every key, as in a KV cache; len_q == len_k is the usual top-left causal mask). A query that
// sees no key gets out = 0 and lse = -inf.
struct Problem {
  int32_t batch;
  int32_t heads;
  int32_t kv_heads;     // heads % kv_heads == 0: query head h reads kv head h / (heads / kv_heads)
  int32_t seqlen_q;     // bshd: every sequence's length; varlen: the longest (maxSeqlen)
  int32_t seqlen_k;
  const int32_t* cu_q;  // varlen: batch + 1 row offsets on the device; nullptr: bshd
  const int32_t* cu_k;  // varlen: the keys' offsets (may equal cu_q); nullptr with cu_q
  const int32_t* used_k;  // varlen, optional: [batch] keys from cu_k[b] on; nullptr: cu_k's differences
  int32_t m_blocks;     // ceil(seqlen_q / BlockM): query tiles per (sequence, head)
  int32_t section;      // (sequence, head) pairs per L2 section of the tile order (scheduler.cuh)
  int32_t causal;
  float scale_log2;     // softmax scale x log2(e)
  float* lse;           // fp32 log-sum-exp (natural log) per (sequence, head, query); nullptr: none
  int64_t lse_head_stride;   // elements between heads
  int64_t lse_batch_stride;  // bshd: between sequences; varlen: unused (lse[h][cu_q[b] + i])
  void* o;              // the output's first element (for the masked stores of partial tiles)
  int64_t o_row_stride; // elements between output rows (heads x head_dim)
  int32_t tiles;        // batch x heads x m_blocks
  int32_t rows_q;       // rows of q / out and of k / v: varlen offsets are checked against them
  int32_t rows_k;
  int32_t reserved;
};

}  // namespace weft::attn
