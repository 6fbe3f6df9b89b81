// hooks.cuh — how a fused op customises the GEMM engine. The plain GEMM is the engine with
// DefaultHooks; a fused op (cuda/fused/*) passes its own Hooks type and reuses every other line.
//
// A Hooks type provides:
//
//   struct State { ... };
//       Plain data the host fills; it travels inside KernelParams (kernel parameter space, so keep
//       it small: pointers, epochs, counts).
//
//   template <class Cfg> using Scheduler = ...;
//       The tile order and which tiles this CTA owns. Constructed in every role (producer and both
//       consumers) as Scheduler(const Problem&, const State&, cluster_rank), it must yield the same
//       sequence in every role of a CTA, and the CTAs of one cluster must get tiles that share the
//       multicast operand (the same n0 for ClusterM = 2, the same m0 for ClusterN = 2) and equal
//       k-block counts, because they fill each other's pipelines. `bool next(TileCoord&)` returns
//       false when the CTA is done. Use GroupedScheduler (scheduler.cuh) unless the order matters,
//       e.g. "local rows first, then remote rows in the order they arrive".
//
//   static __device__ bool before_tile_loads(const State&, const TileCoord&);
//   static __device__ bool before_kblock_loads(const State&, const TileCoord&, int32_t k_block);
//       Called by the producer thread before the first TMA load of a tile / of each k-block, e.g.
//       to wait until a peer's epoch signal says the rows this tile reads have landed. Return false
//       when a bounded wait ran out: the kernel reports kFailHookWait and carries on (it never hangs).
//       A/B may be peer memory: the host encodes the tensor maps on peer pointers.
//
//   static constexpr EpilogueOp kEpilogue;
//       kStore: TMA store of the tile into C's tensor map (local or peer memory).
//       kReduceAdd: element-wise add into C (cp.reduce.async.bulk.tensor .add), local or peer.
//
//   static constexpr bool kSignalsAfterStore;
//   static __device__ void after_tile_stored(const State&, const TileCoord&, int consumer);
//       When kSignalsAfterStore, called once per consumer half-tile (64 rows) by the thread that
//       issued its stores, after they are complete and fenced for system scope: publish an epoch
//       here (sys::signal_store) and any reader that sees it also sees the data.
#pragma once

#include <cstdint>

#include "../primitives/signal.cuh"

namespace weft::gemm {

// One CTA tile of C and its K range.
struct TileCoord {
  int32_t tile_m, tile_n;  // tile indices
  int32_t m0, n0;          // first row and column of C
  int32_t k_begin;         // first k-block (64 columns of K each)
  int32_t k_blocks;        // number of k-blocks, -1 = up to the end of K
};

enum class EpilogueOp { kStore, kReduceAdd };

template <class Cfg>
class GroupedScheduler;

struct DefaultHooks {
  struct State {};
  template <class Cfg>
  using Scheduler = GroupedScheduler<Cfg>;
  static constexpr EpilogueOp kEpilogue = EpilogueOp::kStore;
  static constexpr bool kSignalsAfterStore = false;

  static __device__ __forceinline__ bool before_tile_loads(const State&, const TileCoord&) { return true; }
  static __device__ __forceinline__ bool before_kblock_loads(const State&, const TileCoord&, int32_t) {
    return true;
  }
  static __device__ __forceinline__ void after_tile_stored(const State&, const TileCoord&, int) {}
};

// Building blocks for fused ops' hooks.

// Wait until signals[tile.m0 / rows_per_signal] >= epoch (an epoch-tagged word written by whoever
// produces those rows of A, possibly a peer GPU). Bounded by `budget`.
struct RowSignalGate {
  const uint64_t* signals;
  uint64_t epoch;
  int32_t rows_per_signal;
  sys::WaitBudget budget;

  __device__ bool wait(const TileCoord& t) const;
};

// Publish `epoch` (st.release.sys) for one stored 64-row half-tile, into
// flags[(m0 / 64 + consumer) * tiles_n + tile_n]: one flag per 64 rows x TileN columns of C.
struct HalfTileFlagPublisher {
  uint64_t* flags;
  uint64_t epoch;
  int32_t tiles_n;

  __device__ void publish(const TileCoord& t, int consumer) const;
};

}  // namespace weft::gemm

#include "impl/hooks.cuh"
