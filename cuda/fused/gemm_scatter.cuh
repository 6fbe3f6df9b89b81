// gemm_scatter.cuh — the hooks shared by GEMM + reduce-scatter and GEMM + all-reduce: every rank
// computes its full partial product P_r = a_r · b_r tile by tile, and each tile of the result has
// one owner rank. The "owner" scheme, for any world size W:
//
//   who stores first  the owner, in its first phase: it computes the tiles it owns before any other
//                     tile and STORES its partial into every destination of the tile (reduce-scatter:
//                     its own out; all-reduce: every rank's out).
//   who adds          every other rank, in its later phases: it ADDS its partial into the same
//                     destinations with cp.reduce.async.bulk (.add, bf16), straight from the epilogue.
//   which signal      after the owner's stores of a 64-row half-tile are complete (bulk_wait) and
//   orders them       fenced, it publishes stored[half-tile] = epoch into every peer's memory
//                     (HalfTileFlagPublisher: a system fence, then the flag); a rank adds into
//                     that half-tile only after acquiring the flag. Adds commute, so adders need
//                     no order among themselves.
//   completion        a rank's output is final when every peer has finished adding: each CTA tells
//                     every peer "done" (done[rank][cta]) after its stores are complete and waits for
//                     the same CTA index of every peer before it publishes completion.
//   reuse             the owner stores into a peer's out only after that peer has entered the same
//                     launch (entered[], all-reduce only; with reduce-scatter the owner stores locally),
//                     so a launch never overwrites an output the caller may still be reading from the
//                     previous one; adders follow the owner's flag and so come later still.
//
// Tile order (OwnerScheduler): rank r interleaves the owners r, r+1, ..., r+W-1 (mod W) with a lag.
// Every owner lists its tiles in one order; in round t rank r takes tile t of its own list, then
// tile t - lag of owner r+1's list, tile t - 2·lag of owner r+2's, and so on. So a rank adds into a
// tile about lag x W tile positions after its owner stored it (the flag it waits for was published
// long before: one L2 poll), and the NVLink traffic of the adds runs through the whole kernel
// instead of its second half only (bench/DECISIONS.md, "The owner order interleaves owners with a
// lag of two waves"). A lag at least the owner's tile
// count gives the version-1 order: all own tiles, then each peer's. No deadlock: an owner's tiles
// never wait on another rank (all-reduce's "entered" flags are written at kernel start), and every
// tile's owner reaches it at a unit position no later than any rank that adds into it, so the
// chain of waits only ever points to earlier positions. Ownership is by row shard when the rows
// split into whole tiles per rank (reduce-scatter requires it; all-reduce prefers it for L2-friendly
// bands), else by linear tile index mod W (small M: decode all-reduce).
//
// Precision: the owner's partial is rounded to bf16 once, each add rounds once more. For W = 2 every
// rank's all-reduce output has the same bits (the same store, then the same single add).
#pragma once

#include "fused/abort.cuh"
#include "fused/fused.h"
#include "fused/launch.cuh"
#include "fused/routed_epilogue.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

template <class Cfg>
class OwnerScheduler {
 public:
  __device__ OwnerScheduler(const gemm::Problem&, const ScatterState& s, uint32_t)
      : tiles_n_(s.tiles_n),
        tiles_m_(s.tiles_m),
        shard_tiles_(s.shard_tiles),
        group_(s.group_m),
        rank_(s.rank),
        world_(s.world),
        lag_(s.lag),
        unit_(static_cast<int32_t>(blockIdx.x)),
        stride_(static_cast<int32_t>(gridDim.x)) {}

  __device__ bool next(gemm::TileCoord& t) {
    const int32_t units = tiles_m_ * tiles_n_;
    if (unit_ >= units) return false;
    // The unit's round: the last t with before(t) <= unit_ (before() is non-decreasing in t).
    int32_t lo = 0, hi = last_round();
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      if (before(mid) <= unit_) lo = mid; else hi = mid - 1;
    }
    // Within round lo, the (unit_ - before(lo))-th phase that has a tile in it.
    int32_t skip = unit_ - before(lo);
    int32_t phase = 0, index = 0;
    for (int32_t s = 0; s < world_; ++s) {
      const int32_t i = lo - s * lag_;
      if (i < 0 || i >= count(s)) continue;
      if (skip-- == 0) {
        phase = s;
        index = i;
        break;
      }
    }
    const int32_t owner = (rank_ + phase) % world_;
    if (shard_tiles_ > 0) {
      // The owner's row shard in grouped bands (group_ divides shard_tiles_).
      const gemm::BandTile b = gemm::whole_band_tile(index, group_, tiles_n_);
      gemm::set_whole_k_tile<Cfg>(t, owner * shard_tiles_ + b.row, b.col);
    } else {
      const int32_t linear = owner + index * world_;
      gemm::set_whole_k_tile<Cfg>(t, linear / tiles_n_, linear % tiles_n_);
    }
    unit_ += stride_;
    return true;
  }

 private:
  // Tiles of the owner of phase s: a whole row shard each, or every W-th linear tile index.
  __device__ int32_t count(int32_t s) const {
    const int32_t units = tiles_m_ * tiles_n_;
    if (shard_tiles_ > 0) return shard_tiles_ * tiles_n_;
    const int32_t owner = (rank_ + s) % world_;
    return (units - owner + world_ - 1) / world_;
  }
  __device__ int32_t last_round() const {
    int32_t r = 0;
    for (int32_t s = 0; s < world_; ++s) r = max(r, s * lag_ + count(s) - 1);
    return r;
  }
  // Units in rounds [0, t).
  __device__ int32_t before(int32_t t) const {
    int32_t n = 0;
    for (int32_t s = 0; s < world_; ++s) n += min(max(t - s * lag_, 0), count(s));
    return n;
  }

  int32_t tiles_n_, tiles_m_, shard_tiles_, group_, rank_, world_, lag_;
  int32_t unit_, stride_;
};

struct ScatterHooks : RoutedHooks {
  using State = ScatterState;
  struct ConsumerState {
    bool peers_entered = false;
  };
  template <class Cfg>
  using Scheduler = OwnerScheduler<Cfg>;
  static constexpr gemm::SignalScope kSignal = gemm::SignalScope::kSystem;

  static __device__ __forceinline__ int32_t owner(const State& s, const gemm::TileCoord& t) {
    if (s.shard_tiles > 0) return t.tile_m / s.shard_tiles;
    return (t.tile_m * s.tiles_n + t.tile_n) % s.world;
  }

  static __device__ __forceinline__ sys::WaitBudget budget(const State& s) {
    return fused::budget(s.timeout_ns, s.abort, s.rank, s.epoch);
  }
  static __device__ void on_wait_failed(const State& s, const Completion& c, uint32_t stage) {
    report_wait_failure(s.abort, s.rank, s.world, s.epoch, c, stage);
  }

  static __device__ void on_kernel_start(const State& s) {
    if (!s.all_reduce || blockIdx.x != 0) return;
    // Kernel start: every earlier piece of work on this rank's stream, the caller's reads of the
    // previous output included, is done. Peers may store into our output from now on.
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) sys::signal_store(s.entered[q] + s.rank, s.epoch);
  }

  static __device__ __forceinline__ Route route(const State& s, const gemm::TileCoord& t) {
    const int32_t o = owner(s, t);
    const bool own = o == s.rank;
    const uint32_t all = (1u << s.world) - 1u;
    const int32_t offset = s.all_reduce ? 0 : o * s.m_shard;
    return Route{s.all_reduce ? all : 1u << o, offset, !own, own};
  }

  static __device__ __forceinline__ const CUtensorMap* out_map(const State& s, int dest) { return &s.out[dest]; }

  static __device__ bool before_routed_stores(const State& s, ConsumerState& cs, const gemm::TileCoord& t,
                                              const Route&, int consumer) {
    if (owner(s, t) == s.rank) {
      if (!s.all_reduce || cs.peers_entered) return true;
      for (int32_t q = 0; q < s.world; ++q) {
        if (q == s.rank) continue;
        if (sys::wait_at_least(s.entered[s.rank] + q, s.epoch, budget(s)) != sys::WaitResult::kOk) return false;
      }
      cs.peers_entered = true;
      cta::fence_proxy_async_global();
      return true;
    }
    // Adding: the owner's store of this half-tile must be complete in every destination. The adds
    // are TMA (async proxy) operations ordered after this generic-proxy acquire by the proxy fence.
    const gemm::HalfTileFlagPublisher mine{s.stored[s.rank], s.epoch, s.tiles_n};
    const bool ok = sys::wait_at_least(mine.flag(t, consumer), s.epoch, budget(s)) == sys::WaitResult::kOk;
    cta::fence_proxy_async_global();
    return ok;
  }

  // Own half-tiles only (route().signal): its stores are complete and fenced.
  static __device__ void after_tile_stored(const State& s, const gemm::TileCoord& t, int consumer) {
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) gemm::HalfTileFlagPublisher{s.stored[q], s.epoch, s.tiles_n}.publish(t, consumer);
  }

  static __device__ bool before_finish(const State& s) {
    const int64_t ctas = gridDim.x;
    const int64_t c = blockIdx.x;
    // Every add and store of this CTA is complete and fenced (the consumers' bulk_wait + fences,
    // then the CTA barrier): the system fence and the flags are the release.
    __threadfence_system();
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) sys::signal_store_fenced(s.done[q] + s.rank * ctas + c, s.epoch);
    for (int32_t q = 0; q < s.world; ++q) {
      if (q == s.rank) continue;
      if (sys::wait_at_least(s.done[s.rank] + q * ctas + c, s.epoch, budget(s)) != sys::WaitResult::kOk) return false;
    }
    return !(c == 0 && s.world > 1 && peer_gave_up(s.abort, s.rank, s.epoch));
  }
};

// Op is the WeftTpOp of the file that instantiates it, so that reduce-scatter's and all-reduce's
// kernels stay separate instantiations (one per translation unit).
template <int TileN, bool BNMajor, int Op>
struct ScatterConfig {
  using Gemm = FusedGemm<TileN, BNMajor>;
  static constexpr int kThreads = Gemm::kThreads;
  static constexpr int kOp = Op;
};

// The kernel of every GEMM + reduce-scatter / all-reduce mover: the engine under Hooks (ScatterHooks
// here, CeScatterHooks, ExchangeHooks), all over one ScatterState.
template <class Cfg, class Hooks>
__global__ void __launch_bounds__(Cfg::kThreads, 1) scatter_kernel(const __grid_constant__ gemm::KernelParams<ScatterState> p) {
  grid::wait_previous();
  if (threadIdx.x == 0) Hooks::on_kernel_start(p.hooks);
  gemm::engine_cta<typename Cfg::Gemm, Hooks>(p);
}

template <class Cfg, class Hooks>
cudaError_t launch_scatter_kernel(const ScatterLaunch& l) {
  // c: unused by the routed stores, but prefetched, so a valid map.
  const auto params = fused_params(l, l.a, l.state.out[l.state.rank], l.a_box_rows);
  return launch_persistent<typename Cfg::Gemm, scatter_kernel<Cfg, Hooks>>(params, l.gemm_ctas, l.stream);
}

}  // namespace weft::fused
