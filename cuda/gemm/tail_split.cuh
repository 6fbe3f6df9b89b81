// tail_split.cuh — a split tail for a persistent scheduler: the tiles of the last, partial wave
// split along K (TailSplit in gemm.h says which and how; gemm::plan_tail_split chooses).
//
// Why: with T tiles on C CTAs the kernel takes ceil(T / C) tile times; at AG (8192, 28672, 8192)
// that is 28 for 27.15 of work (3584 tiles on 132 CTAs: the last wave is 20 tiles). The last wave's
// rem tiles become rem x pieces equal pieces, piece-major (unit v: tile v % rem, piece v / rem), CTA
// c taking unit c; in the one round the planner allows, the pieces of one K range run side by side
// and share A rows and B columns in L2 as a normal wave does. (A head and a rest per tile, for a last
// wave more than half full, was no faster than the balanced grid: removed, gemm.h.)
// (Contiguous stream-K ranges, one per CTA, staggered every CTA's K offset: 7% slower at AG (8192,
// 8192, 28672), where nothing a CTA read was in L2 for the next; bench/DECISIONS.md, "The last wave
// splits into equal K pieces in one round, or not at all".)
//
// Fixup, with no wait: every piece writes its fp32 partial into its own slot (the unit's index),
// then counts itself in the tile's count; the piece that brings the count to `pieces` adds the other
// slots to its accumulators and stores the tile through the normal epilogue. The others store
// nothing. Counts carry the launch's epoch in their high bits, so they never need resetting (and a
// launch cut short by a timeout cannot leave one that a later launch would misread).
//
// Slot layout: [slot][consumer][TileN / 8][128 threads] float4, each thread's accumulators in order:
// every piece of a tile has the same fragment layout, so a thread reads back exactly its own elements
// and a warp's loads and stores are 512 contiguous bytes.
#pragma once

#include <cstdint>

#include "../primitives/warpgroup.cuh"
#include "epilogue.cuh"
#include "gemm.h"
#include "hooks.cuh"

namespace weft::gemm {

// CTA cta's tail unit v (its first is v = cta, the next v + tail_step): tail tile `tile`, k-blocks
// [k_begin, k_begin + k_blocks), partial slot `slot` (pieces of tile j have slots j, j + tiles, ...):
// piece v / tiles of tile v % tiles. false: the CTA has no such unit.
struct TailPiece {
  int32_t tile, k_begin, k_blocks, slot;
};
__device__ __forceinline__ int32_t tail_step(const TailSplit& s) { return s.ctas; }
__device__ __forceinline__ bool tail_unit(const TailSplit& s, int32_t, int32_t v, TailPiece& piece) {
  if (v >= s.tiles * s.pieces) return false;
  const int32_t p = v / s.tiles;
  const int32_t begin = p * s.k_blocks / s.pieces;
  piece = {v - p * s.tiles, begin, (p + 1) * s.k_blocks / s.pieces - begin, v};
  return true;
}

// TileCoord::piece is the unit's slot; its tile is slot % tiles.
template <class Cfg>
__device__ __forceinline__ bool tail_reduce(float (&acc)[Cfg::kTileN / 2], const TailSplit& s, uint64_t epoch,
                                            const TileCoord& t, int consumer, uint32_t barrier_id) {
  constexpr int kVectors = Cfg::kTileN / 8;  // float4 per thread
  constexpr int32_t kSlotVectors = Cfg::kConsumers * kVectors * wg::kThreads;
  // This thread's first float4 in slot 0; slot `sl` is kSlotVectors further per slot.
  float4* const base = reinterpret_cast<float4*>(s.partials) + (consumer * kVectors * wg::kThreads + wg::thread());
  {
    float4* mine = base + t.piece * kSlotVectors;
#pragma unroll
    for (int i = 0; i < kVectors; ++i)
      __stcg(mine + i * wg::kThreads, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
  // Each thread's partial is ordered (gpu scope) before the barrier, and through it before the count.
  __threadfence();
  const int32_t tile = t.piece % s.tiles;
  bool completes = true;
  wg::sync(barrier_id);
  if (wg::thread() == 0) {
    const unsigned long long tag = epoch & 0xffffffffffffull;
    unsigned long long* count = reinterpret_cast<unsigned long long*>(s.counts) + tile * Cfg::kConsumers + consumer;
    unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(count), prior;
    do {  // tag << 16 | pieces counted in this launch
      prior = seen;
      const unsigned long long next = (prior >> 16) == tag ? prior + 1 : (tag << 16) | 1u;
      seen = atomicCAS(count, prior, next);
    } while (seen != prior);
    completes = ((prior >> 16) == tag ? int32_t(prior & 0xffff) + 1 : 1) == s.pieces;
    __threadfence();  // acquire: the other pieces' partials, counted before ours
  }
  if (!wg::all(completes, barrier_id)) return false;
  __threadfence();
  for (int32_t other = tile; other < s.tiles * s.pieces; other += s.tiles) {
    if (other == t.piece) continue;
    const float4* theirs = base + other * kSlotVectors;
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const float4 v = __ldcg(theirs + i * wg::kThreads);
      acc[4 * i] += v.x;
      acc[4 * i + 1] += v.y;
      acc[4 * i + 2] += v.z;
      acc[4 * i + 3] += v.w;
    }
  }
  return true;
}

// An epilogue policy for a scheduler that hands out split-tail pieces (TileCoord::piece >= 0): a
// piece's accumulators go through tail_reduce, and only the warpgroup that completes the tile stores
// it, through Inner. Hooks gives tail_split(State) and tail_epoch(State) (the split, the launch's
// epoch).
template <class Cfg, class Hooks, class Inner = StoreEpilogue<Cfg, Hooks>>
class SplitTailEpilogue : public Inner {
 public:
  using Inner::Inner;

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const typename Inner::Tile& t,
                                        const Scheduler& scheduler) {
    const auto& state = this->p_.hooks;
    if (t.piece >= 0 &&
        !tail_reduce<Cfg>(acc, Hooks::tail_split(state), Hooks::tail_epoch(state), t, this->consumer_, 1 + this->consumer_))
      return;
    Inner::template store<Kind>(acc, t, scheduler);
  }
};

}  // namespace weft::gemm
