// routed_epilogue.cuh — the epilogue policy of the GEMM + reduce-scatter / all-reduce kernels
// (gemm_scatter.cuh, gemm_scatter_ce.cuh, the register exchange of gemm_exchange.cuh), built from
// the engine's building blocks (gemm/epilogue.cuh). Per consumer half-tile (64 rows):
//
//   route       each tile goes to the destinations of a Route: bit d of dests is out_map(d), every
//               one stored or every one added (reduce: cp.reduce.async.bulk .add), at row
//               m0 - row_offset of those maps; one staged box feeds every destination (one bulk
//               group, so one wait_read frees it). Routed outputs fill whole 16-byte chunks (the
//               planner requires n % 8 == 0), so there are no plain-store tail columns.
//   kinds       with kKinds == 2 the engine compiles each kind of tile apart (hooks.cuh). A kind
//               without kKindRouted<K> has one compile-time destination, kind_map<K>(), stored or
//               added (kKindAdds<K>), at kind_route<K>()'s row_offset, signalling as its signal
//               says: no run-time choice of map or operation is left inside it. A route chosen at
//               run time, even one that always picked the same map, cost the copy-engine
//               reduce-scatter ~8 us at (4096, 14336, 4096) (bench/DECISIONS.md, "Copy-engine
//               kernels choose their destination per phase at compile time").
//   received    with kAddsReceived, what other ranks contributed to the tile is added to the fp32
//               accumulators before it is rounded, so it is rounded once: either the policy fetches
//               it (received_sources(t) > 0: for each box and source 0..sources-1, the box at (the
//               box's column, `row`) of received_box()'s map is loaded by TMA into the box's own
//               staging buffer and added from shared memory; the map has the output's box and
//               swizzle, bf16, received_box_rows() high) or the op adds it itself in registers
//               (add_received, called by every thread after before_routed_stores: the register
//               exchange). A kind without kKindReceives<K> has none of that machinery.
//   signals     with kSignal != kNone, a half-tile whose route says signal is published by
//               Hooks::after_tile_stored once its stores are complete and fenced (gemm::settle), at
//               the consumer's next epilogue, or earlier: before the next tile's math when
//               settle_before_math(stored, next) (the next tile's loads may wait for something
//               that depends on the signal), or right after the next tile's k-block
//               settle_block(k_blocks) is issued when settle_with_math(stored) (for signals a copy
//               engine or a peer waits on: the stores' completion overlaps the math before it).
//
// Received boxes: each consumer's two staging buffers double as the landing place of the partials.
// Box b of a tile lands in the buffer b is staged in: boxes 0 and 1 while the tile's first k-block
// computes (prefetch_received; their data must have been acquired by before_tile_loads, which the
// consumer sees through the ring's first `full` barrier), box b + 1 (b >= 1) as soon as the store of
// box b - 1 has read the other buffer, so each load overlaps one box's add and staging. A further
// source of the same box reloads the buffer after the add. One mbarrier per buffer (the engine's
// epilogue barriers); every thread of the warpgroup tracks their phases identically.
//
// RoutedHooks has the defaults of every knob: derive an op's Hooks from it.
#pragma once

#include "gemm/epilogue.cuh"
#include "gemm/hooks.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

// Where a routed tile goes.
struct Route {
  uint32_t dests;      // bit d: Hooks::out_map(d)
  int32_t row_offset;  // the tile's row m0 is row m0 - row_offset of every destination map
  bool reduce;         // add into the destinations instead of storing
  bool signal;         // publish (after_tile_stored) once the stores are complete
};

template <class Cfg, class Hooks>
class RoutedEpilogue;

struct RoutedHooks : gemm::DefaultHooks {
  template <class Cfg, class H>
  using Epilogue = RoutedEpilogue<Cfg, H>;
  static constexpr gemm::SignalScope kSignal = gemm::SignalScope::kNone;
  static constexpr bool kAddsReceived = false;
  static constexpr int kKinds = 1;
  template <int Kind>
  static constexpr bool kKindRouted = false;
  template <int Kind>
  static constexpr bool kKindReceives = true;
  template <int Kind>
  static constexpr bool kKindAdds = false;

  template <class S>
  static __device__ __forceinline__ int kind(const S&, const gemm::TileCoord&) { return 0; }
  template <class S>
  static __device__ __forceinline__ Route route(const S&, const gemm::TileCoord&) { return Route{1u, 0, false, true}; }
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* out_map(const S&, int) { return nullptr; }
  template <class S, class C>
  static __device__ __forceinline__ bool before_routed_stores(const S&, C&, const gemm::TileCoord&, const Route&, int) {
    return true;
  }
  template <class Cfg, class S>
  static __device__ __forceinline__ bool add_received(const S&, const gemm::TileCoord&, int, float (&)[Cfg::kTileN / 2]) {
    return true;
  }
  template <class S>
  static __device__ __forceinline__ int received_sources(const S&, const gemm::TileCoord&) { return 0; }
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* received_box(const S&, const gemm::TileCoord&, int, int, int32_t&) {
    return nullptr;
  }
  template <class S>
  static __device__ __forceinline__ int32_t received_box_rows(const S&) { return gemm::kTileM / 2; }
  template <class S>
  static __device__ __forceinline__ bool settle_before_math(const S&, const gemm::TileCoord&, const gemm::TileCoord&) {
    return false;
  }
  template <class S>
  static __device__ __forceinline__ bool settle_with_math(const S&, const gemm::TileCoord&) { return false; }
  template <class S>
  static __device__ __forceinline__ int32_t settle_block(const S&, int32_t) { return 0; }
};

// One staged box to every destination of a run-time route, stored or added: one bulk group covers
// them all, so one wait_read frees the box. The leader only; the caller commits.
template <class Hooks>
__device__ __forceinline__ void store_routed_box(const typename Hooks::State& state, const Route& route,
                                                 const uint8_t* buf, int32_t col0, int32_t row) {
  for (uint32_t d = route.dests; d != 0; d &= d - 1) {
    const CUtensorMap* map = Hooks::out_map(state, __ffs(d) - 1);
    if (route.reduce) cta::reduce_add_2d(map, buf, col0, row);
    else cta::store_2d(map, buf, col0, row);
  }
}

template <class Cfg, class Hooks>
class RoutedEpilogue {
 public:
  using State = typename Hooks::State;
  using Tile = gemm::TileCoord;
  static constexpr int kKinds = Hooks::kKinds;
  static constexpr int kBarriers = Hooks::kAddsReceived ? 2 * Cfg::kConsumers : 0;
  static constexpr gemm::SignalScope kSignal = Hooks::kSignal;
  static __device__ __forceinline__ int kind(const State& s, const Tile& t) { return Hooks::kind(s, t); }

  __device__ __forceinline__ RoutedEpilogue(const gemm::KernelParams<State>& p, const gemm::SharedStorage<Cfg>& s,
                                            int consumer, uint32_t rank)
      : p_(p), s_(s), consumer_(consumer), rank_(rank) {}

  template <int Kind>
  __device__ __forceinline__ void before_math(const Tile& next) {
    settle_early_ = false;
    if constexpr (kSignal != gemm::SignalScope::kNone) {
      // pending_ is tracked identically by every thread of the warpgroup: uniform branches.
      if (pending_.valid && Hooks::settle_before_math(p_.hooks, pending_.tile, next)) settle();
      settle_early_ = pending_.valid && Hooks::settle_with_math(p_.hooks, pending_.tile);
    }
    sources_ = Hooks::kAddsReceived && Hooks::template kKindReceives<Kind> ? Hooks::received_sources(p_.hooks, next) : 0;
  }

  template <int Kind>
  __device__ __forceinline__ void on_kblock(const Tile& t, int32_t kb, int32_t k_blocks) {
    if (kb == 0 && sources_ > 0 && wg::thread() == 0) prefetch_received(t);
    settle_with_block(kb, k_blocks);
  }

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const Tile& t, const Scheduler&) {
    store_tile<Kind>(acc, t, sources_, [] {});
  }

  __device__ __forceinline__ void finish(float (&)[Cfg::kTileN / 2]) { settle(); }
  __device__ __forceinline__ bool ok() const { return ok_; }

 protected:
  // settle_block is recomputed from the parameters, not kept live through the k-loop: the 256-wide
  // consumers have no register to spare.
  __device__ __forceinline__ void settle_with_block(int32_t kb, int32_t k_blocks) {
    if (settle_early_ && kb == Hooks::settle_block(p_.hooks, k_blocks)) settle();
  }
  __device__ __forceinline__ void settle() { gemm::settle<Hooks, kSignal>(p_.hooks, pending_, consumer_, 1 + consumer_); }

  // The leader issues box `box`, source `source`, of tile t into staging buffer `buffer`.
  __device__ __forceinline__ void load_received(const Tile& t, int box, uint32_t buffer, int source) const {
    int32_t row = 0;
    const CUtensorMap* map = Hooks::received_box(p_.hooks, t, consumer_, source, row);
    uint64_t* bar = s_.epilogue_barrier(consumer_ * 2) + buffer;
    cta::mbarrier_arrive_expect_tx(bar, uint32_t(Hooks::received_box_rows(p_.hooks)) * 128u);
    cta::load_2d(s_.out_box(consumer_, buffer), map, bar, t.n0 + box * Cfg::kOutBoxCols, row);
  }

  // The leader, while the tile's first k-block computes (or once the exchange's partials have
  // landed): boxes 0 and 1 of source 0, into the buffers they will be staged in.
  __device__ __forceinline__ void prefetch_received(const Tile& t) const {
    if (t.m0 + consumer_ * Cfg::kConsumerRows >= p_.problem.m) return;  // store_tile skips this half too
    cta::bulk_wait_read<0>();  // the previous tile's stores have read both buffers
    cta::fence_proxy_async_global();  // other agents' writes, acquired through the ring, before TMA reads them
#pragma unroll
    for (int box = 0; box < 2 && box < Cfg::kOutBoxes; ++box) {
      if (t.n0 + box * Cfg::kOutBoxCols >= p_.tail.tma_cols) break;
      load_received(t, box, (staged_ + box) & 1u, 0);
    }
  }

  // The half-tile's epilogue: settle the previous signal, after_settle() (the exchange's receive
  // wait), the route, the leader's before_routed_stores, the received adds (`sources` boxes per
  // box, or add_received), then box by box staged and issued to the route's destinations.
  template <int Kind, class AfterSettle>
  __device__ __forceinline__ void store_tile(float (&acc)[Cfg::kTileN / 2], const Tile& t, int sources,
                                             const AfterSettle& after_settle) {
    const int32_t row0 = t.m0 + consumer_ * Cfg::kConsumerRows;
    if (row0 >= p_.problem.m) return;  // uniform over the warpgroup
    const uint32_t barrier_id = 1 + consumer_;
    const bool leader = wg::thread() == 0;
    settle();
    after_settle();
    constexpr bool kFixed = kKinds > 1 && !Hooks::template kKindRouted<Kind>;
    const Route route = [&] {
      if constexpr (kFixed) return Hooks::template kind_route<Kind>(p_.hooks, t);
      else return Hooks::route(p_.hooks, t);
    }();
    // Only the leader issues stores, so only it needs to have waited; the others stage the first box
    // meanwhile and meet it at the first named barrier.
    if (leader) ok_ = ok_ && Hooks::before_routed_stores(p_.hooks, hook_state_, t, route, consumer_);
    if constexpr (Hooks::kAddsReceived) {
      wg::sync(barrier_id);  // after the leader's wait
      if (sources == 0) ok_ = Hooks::template add_received<Cfg>(p_.hooks, t, consumer_, acc) && ok_;
    }
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box) {
      const int32_t col0 = t.n0 + box * Cfg::kOutBoxCols;
      if (col0 >= p_.tail.tma_cols) break;
      const uint32_t buffer = staged_ & 1u;
      uint8_t* buf = s_.out_box(consumer_, buffer);
      bool received = false;
      if constexpr (Hooks::kAddsReceived) {
        if (sources > 0) {
          received = true;
          if (leader && box >= 1 && box + 1 < Cfg::kOutBoxes && col0 + Cfg::kOutBoxCols < p_.tail.tma_cols) {
            cta::bulk_wait_read<0>();  // box - 1's store has read the other buffer
            load_received(t, box + 1, buffer ^ 1u, 0);
          }
          for (int source = 0; source < sources; ++source) {
            if (source > 0) {
              // Every thread's reads of the previous source are done before TMA overwrites the buffer.
              cta::fence_proxy_async_shared();
              wg::sync(barrier_id);
              if (leader) load_received(t, box, buffer, source);
            }
            ok_ = cta::mbarrier_wait(s_.epilogue_barrier(consumer_ * 2) + buffer, (phases_ >> buffer) & 1u) && ok_;
            phases_ ^= 1u << buffer;
            gemm::add_box<Cfg>(acc, buf, box);
          }
          // The buffer was loaded only after the store that last used it had read it (above, or
          // prefetch_received), so staging may overwrite it at once.
        }
      }
      gemm::stage_for_store<Cfg>(acc, buf, box, barrier_id, received);
      if (leader) {
        if constexpr (kFixed) {
          const CUtensorMap* map = Hooks::template kind_map<Kind>(p_.hooks);
          if constexpr (Hooks::template kKindAdds<Kind>) cta::reduce_add_2d(map, buf, col0, row0 - route.row_offset);
          else cta::store_2d(map, buf, col0, row0 - route.row_offset);
        } else {
          store_routed_box<Hooks>(p_.hooks, route, buf, col0, row0 - route.row_offset);
        }
        cta::bulk_commit();
      }
      ++staged_;
    }
    if constexpr (kSignal != gemm::SignalScope::kNone) {
      if (route.signal) {
        pending_.tile = t;
        pending_.valid = true;
      }
    }
  }

  const gemm::KernelParams<State>& p_;
  const gemm::SharedStorage<Cfg> s_;
  const int consumer_;
  const uint32_t rank_;
  uint32_t staged_ = 0;  // boxes staged so far, across tiles: picks the staging buffer
  uint32_t phases_ = 0;  // bit u: the parity the next wait on buffer u's barrier expects
  int sources_ = 0;      // received_sources of the tile being computed
  bool settle_early_ = false;
  bool ok_ = true;
  typename Hooks::ConsumerState hook_state_{};
  gemm::PendingSignal<Tile> pending_{};
};

}  // namespace weft::fused
