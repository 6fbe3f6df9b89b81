// scheduler.cuh — which tiles a CTA of the persistent grid takes, and in what order.
//
// A policy numbers its tiles 0 .. tiles-1 in the order it wants them started (longest first for
// causal masks, kv heads grouped for L2, the ring's groups in arrival order: local.cuh, ring.cuh).
// Tile i goes to whichever CTA asks next ("longest first list scheduling", as FlashAttention-3's
// dynamic persistent scheduler does): the producer's thread takes the next index from a device
// counter as soon as it has issued its current tile's last load (so the CTA nearest the end of its
// tile takes it, and the atomic's latency hides under the tile's last blocks), and hands it to its
// consumers through a shared-memory word once they have released Q (producer.cuh, consumer.cuh). A static split (the snake below) balances only tiles sorted by
// decreasing work; the ring's group-major order and the plain kernel's L2 sections break that, and
// their slowest CTA did +56% and +13% of the mean blocks (bench/DECISIONS.md, "Attention tiles are
// handed out by an atomic counter, longest first").
//
// The counter needs no reset: every CTA of the grid fetches (the ring's mover CTAs too, once their
// copies are done: ring.cuh), taking indices until one comes back >= tiles, so a launch makes exactly
// tiles + gridDim.x fetches, and atomicInc with limit tiles + gridDim.x - 1 wraps the word to 0 with
// the last of them (a CTA that joins late changes which CTA takes which index, not the count). The
// next launch on the stream starts after this one has completed (grid::wait_previous), with a 0. That
// holds for every launch, CUDA-graph replays included: the word is device state, no kernel
// parameter changes. A launch without a counter word (no completion given: tile_counter == nullptr)
// takes the static snake instead.
#pragma once

#include <cstdint>

#include "params.cuh"

namespace weft::attn {

// atomicInc's limit for one launch: the word goes 0, 1, ..., limit and back to 0.
WEFT_ATTN_WALK uint32_t fetch_limit(int32_t tiles, int32_t fetchers) { return uint32_t(tiles) + uint32_t(fetchers) - 1u; }

// What atomicInc(word, limit) leaves behind (the host replay's model of the word).
WEFT_ATTN_WALK uint32_t counter_after(uint32_t old, uint32_t limit) { return old >= limit ? 0u : old + 1u; }

// The static fallback: CTA c of G takes, in round k, tile k G + c when k is even and
// k G + (G - 1 - c) when k is odd; indices only grow, so the first miss ends the walk.
WEFT_ATTN_WALK int32_t snake_index(int32_t round, int32_t ctas, int32_t cta) {
  return round * ctas + ((round & 1) ? ctas - 1 - cta : cta);
}

// The producer thread's source of tile indices. An index >= tiles ends the CTA's walk. The word's
// address and the grid split are read from parameter space at each fetch (once per tile), not kept:
// the producer's 40 registers spilled 8 bytes when they were.
template <class Policy>
class TileFetcher {
 public:
  template <class State>
  __device__ int32_t next(const Params<State>& p) {
    // Every CTA of the grid computes tiles (a mover after its copies).
    uint32_t* counter = Policy::tile_counter(p);
    if (counter != nullptr) return static_cast<int32_t>(atomicInc(counter, fetch_limit(p.problem.tiles, grid_ctas())));
    return snake_index(round_++, grid_ctas(), this_cta());
  }

 private:
  // The grid's size and this CTA's index, read where they are used: through gridDim / blockIdx the
  // compiler hoisted them and what it derived from them (the split, G - 1 - c) out of the producer's
  // loop, four registers held across every tile, and the 40 spilled.
  static __device__ __forceinline__ int32_t grid_ctas() {
    uint32_t v;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(v));
    return static_cast<int32_t>(v);
  }
  static __device__ __forceinline__ int32_t this_cta() {
    uint32_t v;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
    return static_cast<int32_t>(v);
  }
  int32_t round_ = 0;
};

}  // namespace weft::attn
