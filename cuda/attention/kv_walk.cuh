// kv_walk.cuh — the key blocks one query tile reads, in order: its policy's segments one after the
// other (the ring: the local shard's first, then each peer's), each cut into blocks of BlockN keys,
// ascending. Under a causal mask a segment stops at the last key the tile's last valid query may
// see, and a segment no query of the tile may see yields nothing: fully masked blocks are never
// loaded or computed. The producer and every consumer of a CTA walk the same blocks.
#pragma once

#include "params.cuh"

namespace weft::attn {

template <class Cfg, class Policy, class State>
class KvWalk {
 public:
  // The walk keeps its own copy of the tile (only the fields its policy reads stay in registers).
  WEFT_ATTN_WALK KvWalk(const Params<State>& p, const QTile& t)
      : p_(p), t_(t), segments_(Policy::segments(p, t)) {}

  WEFT_ATTN_WALK bool next(KvBlock& b) {
    while (block_ == blocks_) {
      if (++segment_ >= segments_) return false;
      seg_ = Policy::template segment<Cfg>(p_, t_, segment_);
      int32_t usable = seg_.len;
      if (p_.problem.causal) {
        // The tile's last valid query sees keys up to position pos + min(rows, BlockM) - 1.
        const int32_t last = t_.pos + imin(t_.rows, Cfg::kBlockM) - 1;
        usable = imax(0, imin(seg_.len, last - seg_.pos + 1));
      }
      blocks_ = (usable + Cfg::kBlockN - 1) / Cfg::kBlockN;
      block_ = 0;
    }
    const int32_t offset = block_ * Cfg::kBlockN;
    b.source = seg_.source;
    b.row = seg_.row + offset;
    b.col = seg_.col;
    b.pos = seg_.pos + offset;
    b.valid = imin(Cfg::kBlockN, seg_.len - offset);
    b.gate = seg_.gate;
    // Masked: a key past the segment, or (causal) the block's last key is beyond the first query.
    b.masked = b.valid < Cfg::kBlockN || (p_.problem.causal && b.pos + Cfg::kBlockN - 1 > t_.pos);
    ++block_;
    return true;
  }

 private:
  const Params<State>& p_;
  const QTile t_;
  int32_t segments_;
  int32_t segment_ = -1;
  int32_t block_ = 0, blocks_ = 0;
  KvSegment seg_{};
};

}  // namespace weft::attn
