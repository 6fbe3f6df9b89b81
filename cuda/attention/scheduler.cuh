// scheduler.cuh — which tiles a CTA of the persistent grid takes, and in what order.
//
// A policy numbers its tiles 0 .. tiles-1 in the order it wants them started (longest first for
// causal masks, kv heads grouped for L2: local.cuh, ring.cuh). CTA c of G takes, in round k, tile
// k G + c when k is even and k G + (G - 1 - c) when k is odd ("snake" order): with tiles sorted by
// decreasing work, the CTA that got the longest tile of one round gets the shortest of the next, so
// every CTA's total stays within about one tile of the others without any shared counter. Both
// roles of a CTA (producer and consumers) walk the same sequence.
#pragma once

#include <cstdint>

namespace weft::attn {

class TileSequence {
 public:
  // CTAs [first, gridDim.x) compute tiles (the first ones may have another role: ring.cuh's movers).
  __device__ TileSequence(int32_t tiles, int32_t first = 0)
      : tiles_(tiles), ctas_(static_cast<int32_t>(gridDim.x) - first), cta_(static_cast<int32_t>(blockIdx.x) - first) {}

  // The next tile index of this CTA; false when there is none. Indices only grow from round to
  // round (round k + 1's smallest is above round k's largest), so the first miss ends the walk.
  __device__ bool next(int32_t& index) {
    const int32_t base = round_ * ctas_;
    index = base + ((round_ & 1) ? ctas_ - 1 - cta_ : cta_);
    ++round_;
    return index < tiles_;
  }

 private:
  int32_t tiles_, ctas_, cta_;
  int32_t round_ = 0;
};

}  // namespace weft::attn
