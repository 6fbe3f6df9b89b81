// local.cuh — the single-GPU KV source: every key of a sequence is in the local k / v tensors
// (Params::k[0], v[0]), one segment per tile, no waits.
//
// Tile order (scheduler.cuh hands it out, tile by tile, to whichever CTA asks next): (sequence, head) pairs are
// cut into sections of Problem::section pairs (attention.h, section_pairs: under a causal mask the
// kv heads whose K and V fit in about half of L2, else one kv head's query heads), sections one
// after the other; inside a section the tiles go by query block (the last first under a causal
// mask: the longest tiles start first), then by pair. So the CTAs running at one time share the K
// and V of a few heads, which L2 serves to all of them.
#pragma once

#include "params.cuh"

namespace weft::attn {

struct LocalPolicy {
  struct State {
    uint32_t* tile_counter;  // scheduler.cuh (0 between launches); nullptr: the static order
  };
  struct ProducerCache {};
  struct ConsumerCache {};

  static __device__ void on_kernel_start(const Params<State>&) {}
  static constexpr bool kMovers = false;
  static __device__ uint32_t* tile_counter(const Params<State>& p) { return p.state.tile_counter; }
  static __device__ bool is_mover(const Params<State>&) { return false; }
  static __device__ bool move(const Params<State>&) { return true; }

  // Sequence b's keys: rows [start, start + len) of the k / v maps (problem.h: bshd, packed, or
  // from each sequence's own start with used_k).
  struct KeyRun {
    int32_t start, len;
  };
  static WEFT_ATTN_WALK KeyRun keys_of(const Problem& q, int32_t b) {
    if (q.cu_k == nullptr) return {b * q.seqlen_k, q.seqlen_k};
    const int32_t start = q.cu_k[b];
    return {start, q.used_k != nullptr ? q.used_k[b] : q.cu_k[b + 1] - start};
  }

  template <class Cfg>
  static WEFT_ATTN_WALK TileStatus decode(const Params<State>& p, int32_t index, QTile& t) {
    const Problem& q = p.problem;
    const int32_t pairs = q.batch * q.heads;
    const int32_t per_section = q.section * q.m_blocks;
    const int32_t section = index / per_section;
    const int32_t r = index - section * per_section;
    const int32_t first = section * q.section;
    const int32_t width = imin(q.section, pairs - first);
    const int32_t m_rev = r / width;
    const int32_t pair = first + (r - m_rev * width);
    const int32_t m = q.causal ? q.m_blocks - 1 - m_rev : m_rev;
    t.b = pair / q.heads;
    t.h = pair - t.b * q.heads;
    t.hk = t.h / (q.heads / q.kv_heads);
    int32_t q_start, len_q, len_k;
    if (q.cu_q != nullptr) {
      q_start = q.cu_q[t.b];
      len_q = q.cu_q[t.b + 1] - q_start;
      const KeyRun keys = keys_of(q, t.b);
      len_k = keys.len;
      // Offsets come from the caller's device memory: a sequence outside its tensor, or longer than
      // the maxSeqlen the grid was sized for, is reported instead of read or written out of bounds.
      if (q_start < 0 || len_q < 0 || q_start > q.rows_q - len_q || len_q > q.m_blocks * Cfg::kBlockM || keys.start < 0 ||
          len_k < 0 || keys.start > q.rows_k - len_k) {
        return TileStatus::kInvalid;
      }
    } else {
      q_start = t.b * q.seqlen_q;
      len_q = q.seqlen_q;
      len_k = q.seqlen_k;
    }
    const int32_t m0 = m * Cfg::kBlockM;
    if (m0 >= len_q) return TileStatus::kEmpty;  // varlen: past this sequence's queries
    t.row = q_start + m0;
    t.rows = len_q - m0;
    t.pos = m0 + (len_k - len_q);
    t.group = 0;
    t.lse = int64_t(t.h) * q.lse_head_stride + (q.cu_q != nullptr ? int64_t(q_start) : int64_t(t.b) * q.lse_batch_stride) + m0;
    return TileStatus::kOk;
  }

  static WEFT_ATTN_WALK int32_t segments(const Params<State>& p, const QTile& t) {
    return keys_of(p.problem, t.b).len > 0 ? 1 : 0;
  }

  template <class Cfg>
  static WEFT_ATTN_WALK KvSegment segment(const Params<State>& p, const QTile& t, int32_t) {
    const KeyRun keys = keys_of(p.problem, t.b);
    KvSegment s;
    s.source = 0;
    s.row = keys.start;
    s.len = keys.len;
    s.col = t.hk * Cfg::kHeadDim;
    s.pos = 0;
    s.gate = -1;
    return s;
  }

  static __device__ bool wait_gate(const Params<State>&, ProducerCache&, int32_t) { return true; }
  static __device__ void tile_started(const Params<State>&, ConsumerCache&, const QTile&) {}
  static __device__ void consumers_done(const Params<State>&, ConsumerCache&) {}
  static __device__ bool before_finish(const Params<State>&) { return true; }
  // Never called: one GPU has no peer waits (the kernel's contract, kernel.cuh).
  static __device__ void on_wait_failed(const Params<State>& p, uint32_t stage) { cta::fail(p.completion, kFailPeerWait, stage); }
};

}  // namespace weft::attn
