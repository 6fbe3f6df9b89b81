// gemm_scatter_ce.cuh — GEMM + reduce-scatter / all-reduce with the copy engines moving the data (the
// "copyEngine" mover; gemm_scatter.cuh is the "ctas" mover). The SMs only ever touch local memory:
//
//   tile order     the plain grouped order over M, rotated so that a rank starts at the next rank's
//                  row shard and ends with its own: every peer-owned tile comes before any own tile
//                  (CeScheduler). Ownership is by row shard (m_shard a multiple of 128).
//   peer tiles     stored (bf16 partial) into the local staging buffer [m, n] at the tile's global row;
//                  once a half-tile's stores are complete, counts[parity][owner][chunk] += 1 (red: the
//                  leader does not wait for the add, which would stall its warpgroup's math).
//   copy engines   one side stream per peer, replayed as a CUDA graph per launch class (epoch mod 4,
//                  so that every value in it is a constant): for each chunk of that peer's rows,
//                  cuStreamWaitValue64(count >= the chunk's half-tiles), a 2-D cudaMemcpyAsync of the chunk into the
//                  peer's receive slot (its rows of my partial), then cuStreamWriteValue64 of my
//                  progress word for that peer (tag << kProgressShift | chunks landed). All-reduce
//                  then broadcasts: for each chunk of my own rows, wait for its count, copy the
//                  final rows into the peer's out, write my second progress word for that peer,
//                  except for the last direct_chunks own chunks (the bands that hold a tile of the
//                  kernel's final round): their tiles' epilogue stores them into every peer's out as
//                  well (TMA), so the broadcast after the math is only what the copy engines had left.
//   into out       reduce-scatter with two ranks: the peer (direct_from) copies its partials of my rows
//                  straight into my out, not into my receive slot; my own tiles then add into out by
//                  TMA (kAddIntoOutDest) rather than load that partial into the epilogue: the epilogue
//                  of an own tile is the plain GEMM's but for the add.
//                  Its copies wait (a stream wait on my entered word in its memory, GEQ epoch) until
//                  my kernel of the same launch has started, which is after every earlier read of my
//                  out on my stream.
//   own tiles      the producer waits (bounded) until every peer's progress word covers the tile's
//                  chunk, then prefetches the received partials of the tile into L2; each consumer
//                  loads them box by box by TMA into its epilogue staging buffers (the first two
//                  boxes while the tile's first k-block computes: routed_epilogue.cuh), adds
//                  them to the fp32 accumulators from shared memory (one rounding) and stores into the
//                  local out.
//   no deadlock    a CTA publishes the count of its last peer tile before its first own tile's math
//                  (settle_before_math), not at that tile's epilogue as the engine otherwise would: the
//                  own tile's loads wait for a peer's progress, which may wait for this very count.
//                  So every count depends only on peer tiles, which wait for nothing.
//   finish         a CTA completes only after this rank's side streams are done (the last progress
//                  word for every peer: staging and, for all-reduce, out are no longer read) and, for
//                  all-reduce, every peer's final rows have landed here (its broadcast's progress word,
//                  and done[me][peer * ctas + cta] = epoch from the peer's CTA with this index after its
//                  direct stores completed).
//
// Reuse across launches: receive slots alternate by epoch parity. Rank q writes my slot e % 2 during
// launch e only after its launch e-1 finished (its side streams start once its kernel of launch e
// has: entered[q] = e, written after grid::wait_previous), which waited for my partials of e-1,
// which my side streams sent only after my launch e-2 finished reading slot e % 2. A peer's final
// rows reach my out in launch e only after q's own tiles of e got my partials of e, sent after my
// launch e started, so after every earlier read of out on my stream; the same holds for q's direct
// stores, which come from q's own tiles of e. The done flags are epochs, so they need no reset.
// Staging is rewritten by launch e+1 only after launch e completed, which waited for its side
// streams.
#pragma once

#include "fused/abort.cuh"
#include "fused/fused.h"
#include "fused/gemm_scatter.cuh"
#include "fused/launch.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

// The chunk of owner `owner`'s rows that tile t lies in.
__device__ __forceinline__ int32_t ce_chunk(const ScatterState& s, const gemm::TileCoord& t, int32_t owner) {
  const int32_t band = (t.tile_m - owner * s.shard_tiles) / s.group_m;
  return band * s.slabs + t.tile_n / s.slab_tiles;
}

template <class Cfg>
class CeScheduler {
 public:
  __device__ CeScheduler(const gemm::Problem&, const ScatterState& s, uint32_t)
      : tiles_n_(s.tiles_n),
        tiles_m_(s.tiles_m),
        group_(s.group_m),
        first_(((s.rank + 1) % s.world) * s.shard_tiles),
        unit_(static_cast<int32_t>(blockIdx.x)),
        stride_(static_cast<int32_t>(gridDim.x)) {}

  __device__ bool next(gemm::TileCoord& t) {
    if (unit_ >= tiles_m_ * tiles_n_) return false;
    // group_ divides shard_tiles, so a band never straddles two owners.
    const gemm::BandTile b = gemm::whole_band_tile(unit_, group_, tiles_n_);
    gemm::set_whole_k_tile<Cfg>(t, (b.row + first_) % tiles_m_, b.col);
    unit_ += stride_;
    return true;
  }

 private:
  int32_t tiles_n_, tiles_m_, group_, first_, unit_, stride_;
};

struct CeScatterHooks : RoutedHooks {
  using State = ScatterState;
  // Chunks of this rank's rows that every peer's partials are known to have landed for: own tiles
  // of lower chunks need no poll.
  struct ProducerState {
    int32_t seen = 0;
  };
  template <class Cfg>
  using Scheduler = CeScheduler<Cfg>;
  static constexpr bool kAddsReceived = true;
  // The chunk counts are read by this GPU only: its copy engines' stream waits and this kernel's
  // atomics (counts). The copy engines read staging and out through this GPU's L2. So the stores
  // they publish are fenced at device scope.
  static constexpr gemm::SignalScope kSignal = gemm::SignalScope::kDevice;

  static __device__ __forceinline__ int32_t owner(const State& s, const gemm::TileCoord& t) {
    return t.tile_m / s.shard_tiles;
  }
  // Whether this rank owns tile t, by a range test rather than owner()'s division: kind(), once per
  // tile. Elsewhere owner() stays: with own() in every per-tile test ptxas spilled 32 bytes in the
  // 256-wide receiving kernels, with owner() none.
  static __device__ __forceinline__ bool own(const State& s, const gemm::TileCoord& t) {
    return uint32_t(t.m0 - s.rank * s.m_shard) < uint32_t(s.m_shard);
  }

  // After grid::wait_previous: every earlier piece of work on this rank's stream, the caller's reads
  // of the previous out included, is done. So this rank's side streams may start (they wait for
  // entered[rank] = epoch here, rather than for an event recorded between two launches' kernels,
  // which would keep the second from overlapping the first's tail), and direct_from's copies may
  // land in out from now on. Also the next launch's chunk counts start from zero (fused.h,
  // ScatterState::counts).
  static __device__ void on_kernel_start(const State& s) {
    if (blockIdx.x != 0) return;
    // (copy_engine is always set for these hooks: written unconditionally, or through a pointer
    // of its own, the store made ptxas spill 16 bytes in the 256-wide all-reduce kernels.)
    if (s.copy_engine) sys::signal_store(s.entered[s.rank] + s.rank, s.epoch);
    if (s.direct_from >= 0) sys::signal_store(s.entered[s.direct_from] + s.rank, s.epoch);
    uint64_t* next = counts_of(s, s.epoch + 1);
    for (int32_t i = 0; i < s.world * s.chunks; ++i) next[i] = 0;
  }
  static constexpr uint64_t kDoneMask = (uint64_t(1) << kProgressShift) - 1;
  // q's progress word of `kind` towards `dest`, as mapped here.
  static __device__ __forceinline__ const uint64_t* word(const State& s, int32_t q, int kind, int32_t dest) {
    return s.progress[q] + progress_index(s.epoch, kind, s.world, dest);
  }
  // Waits until the word says this launch has landed at least `need` chunks.
  static __device__ __forceinline__ bool wait_landed(const State& s, const uint64_t* w, int32_t need) {
    const uint64_t tag = progress_tag(s.epoch);
    const auto done = [&](uint64_t v) { return (v >> kProgressShift) == tag && int64_t(v & kDoneMask) >= need; };
    return sys::wait_until(w, done, budget(s)) == sys::WaitResult::kOk;
  }
  // This launch's chunk counts, [world][chunks].
  static __device__ __forceinline__ uint64_t* counts_of(const State& s, uint64_t epoch) {
    return s.counts + int64_t(epoch & 1) * s.world * s.chunks;
  }
  static __device__ __forceinline__ sys::WaitBudget budget(const State& s) {
    return fused::budget(s.timeout_ns, s.abort, s.rank, s.epoch);
  }
  // After the report, the side streams are released: they wait on this launch's chunk counts and on
  // the direct peer's entered word, which this kernel (or a peer that stopped) will never raise now;
  // a stream stuck on them would hold every later launch of the plan and its teardown.
  static __device__ void on_wait_failed(const State& s, const Completion& c, uint32_t stage) {
    report_wait_failure(s.abort, s.rank, s.world, s.epoch, c, stage);
    uint64_t* counts = counts_of(s, s.epoch);
    for (int32_t i = 0; i < s.world * s.chunks; ++i)
      atomicMax(reinterpret_cast<unsigned long long*>(counts + i), 1ull << 40);
    for (int32_t q = 0; q < s.world; ++q) atomicMax(reinterpret_cast<unsigned long long*>(s.entered[s.rank] + q), s.epoch);
  }

  // Destination q < kMaxRanks: rank q's out (this rank's, and every peer's for all-reduce's direct
  // bands); destination kStagingDest: the local staging buffer (peer tiles). Own tiles of an
  // all-reduce signal too: their chunks are what the broadcast copies wait for.
  static constexpr int kStagingDest = kMaxRanks;
  static __device__ __forceinline__ Route route(const State& s, const gemm::TileCoord& t) {
    if (owner(s, t) != s.rank) return Route{1u << kStagingDest, 0, false, true};
    if (!s.all_reduce) return Route{1u << s.rank, s.rank * s.m_shard, false, false};
    const uint32_t dests = t.tile_m < s.direct_tile_m ? 1u << s.rank : (1u << s.world) - 1u;
    return Route{dests, 0, false, true};
  }
  static __device__ __forceinline__ const CUtensorMap* out_map(const State& s, int dest) {
    return dest == kStagingDest ? &s.staging : &s.out[dest];
  }
  // Two kinds of tile (routed_epilogue.cuh): peer tiles (0) go into staging and are counted, that
  // route fixed at compile time and the kind built without receiving; own tiles (1) keep route()
  // (this rank's out, or every rank's in the direct bands) and receive the peers' partials. The
  // all-reduce's structure is ~4-7 us shorter for it at (4096, 14336, 4096), although its 256-wide
  // kernels spill 44 bytes (bench/DECISIONS.md, "Copy-engine kernels choose their destination per phase at compile time").
  static constexpr int kKinds = 2;
  static __device__ __forceinline__ int kind(const State& s, const gemm::TileCoord& t) { return own(s, t) ? 1 : 0; }
  // (kind_route and kind_map serve kind 0 only: kind 1 routes at run time, kKindRouted.)
  template <int Kind>
  static __device__ __forceinline__ Route kind_route(const State& s, const gemm::TileCoord&) {
    static_assert(Kind == 0, "kind 1 routes at run time");
    return Route{1u << kStagingDest, 0, false, true};
  }
  template <int Kind>
  static __device__ __forceinline__ const CUtensorMap* kind_map(const State& s) {
    static_assert(Kind == 0, "kind 1 routes at run time");
    return &s.staging;
  }
  template <int Kind>
  static constexpr bool kKindAdds = false;
  template <int Kind>
  static constexpr bool kKindRouted = Kind == 1;
  template <int Kind>
  static constexpr bool kKindReceives = Kind == 1;
  // Own chunks the copy engines broadcast (all-reduce): the rest go out from the epilogue.
  static __device__ __forceinline__ int32_t broadcast_chunks(const State& s) { return s.chunks - s.direct_chunks; }

  static __device__ bool before_tile_loads(const State& s, ProducerState& ps, const gemm::TileCoord& t) {
    if (s.world == 1 || owner(s, t) != s.rank) return true;
    const int32_t need = ce_chunk(s, t, s.rank) + 1;
    bool ok = true;
    if (ps.seen < need) {
      int32_t seen = s.chunks;
      for (int32_t q = 0; q < s.world; ++q) {
        if (q == s.rank) continue;
        const uint64_t* w = word(s, q, 0, s.rank);
        ok = ok && wait_landed(s, w, need);
        const int32_t d = int32_t(sys::signal_load(w) & kDoneMask);
        seen = d < seen ? d : seen;
      }
      ps.seen = ok ? seen : 0;
    }
    // The tile's received partials, into L2 while the tile's math runs (the epilogue reads them, or
    // its adds into out do).
    const int32_t row = s.recv_row0 + (t.m0 - s.rank * s.m_shard);
    for (int32_t q = 0; q < s.world; ++q) {
      if (q == s.rank) continue;
      const bool direct = q == s.direct_from;
      const CUtensorMap* map = direct ? &s.out[s.rank] : &s.recv_map;
      const int32_t r = direct ? t.m0 - s.rank * s.m_shard : row + q * s.m_shard;
      for (int32_t c = t.n0; c < t.n0 + s.tile_n && c < s.ld; c += 64) {
        cta::prefetch_l2_2d(map, c, r);
        cta::prefetch_l2_2d(map, c, r + 64);
      }
    }
    return ok;
  }

  // Own tiles: every peer's partial in the receive slot, loaded by the engine (epilogue.cuh). Source
  // j is the j-th rank other than this one. (With direct_from the kernel is CeIntoOutHooks', which
  // receives nothing.)
  static __device__ __forceinline__ int received_sources(const State& s, const gemm::TileCoord& t) {
    return s.world > 1 && owner(s, t) == s.rank ? s.world - 1 : 0;
  }
  static __device__ __forceinline__ const CUtensorMap* received_box(const State& s, const gemm::TileCoord& t,
                                                                    int consumer, int source, int32_t& row) {
    const int32_t q = source < s.rank ? source : source + 1;
    row = s.recv_row0 + q * s.m_shard + (t.m0 - s.rank * s.m_shard) + consumer * (gemm::kTileM / 2);
    return &s.recv_map;
  }

  // The last peer tile's count must not wait behind an own tile's load, which may wait for a peer
  // that waits for this very count (see the deadlock note in the header).
  static __device__ __forceinline__ bool settle_before_math(const State& s, const gemm::TileCoord& stored,
                                                            const gemm::TileCoord& next) {
    return owner(s, stored) != s.rank && owner(s, next) == s.rank;
  }

  // Every chunk's count goes out as soon as its stores are complete, not a tile later: the side
  // streams copy a chunk only once it is counted, and all-reduce's last chunks are the kernel's tail
  // (bench/DECISIONS.md, "Chunk counts go out at k-block 2/8 of the next tile"). Nothing this CTA loads
  // next waits for these counts.
  static __device__ __forceinline__ bool settle_with_math(const State&, const gemm::TileCoord&) { return true; }
  // The leader's wait for the stores to complete stalls its warpgroup's next wgmma; a quarter of the
  // way into the next tile's k-blocks finds them complete.
  static __device__ __forceinline__ int32_t settle_block(const State&, int32_t k_blocks) { return k_blocks / 4; }

  // A half-tile's stores are complete and fenced (gemm::settle): count it for its chunk (release:
  // the side stream that sees the chunk's full count copies what every counted half-tile stored).
  static __device__ void after_tile_stored(const State& s, const gemm::TileCoord& t, int) {
    const int32_t o = owner(s, t);
    sys::device_signal_add(counts_of(s, s.epoch) + int64_t(o) * s.chunks + ce_chunk(s, t, o), 1);
  }

  static __device__ bool before_finish(const State& s) {
    if (s.world == 1) return true;
    bool ok = true;
    const int64_t ctas = gridDim.x, cta = blockIdx.x;
    if (s.all_reduce && s.direct_chunks > 0) {
      // This CTA's direct stores into the peers' outs are complete and fenced (the engine's contract
      // for this hook); the system fence orders them before the flag, as in ScatterHooks.
      __threadfence_system();
      for (int32_t q = 0; q < s.world; ++q)
        if (q != s.rank) sys::signal_store_fenced(s.done[q] + s.rank * ctas + cta, s.epoch);
    }
    // This rank's side streams are done with staging and with out's own rows: the last word each one
    // writes is the broadcast's (kind 1), or the partials' (kind 0) when nothing is broadcast.
    const int32_t bcast = s.all_reduce ? broadcast_chunks(s) : 0;
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) ok = ok && wait_landed(s, word(s, s.rank, bcast > 0 ? 1 : 0, q), bcast > 0 ? bcast : s.chunks);
    if (!ok && s.direct_from >= 0) {
      // The launch has failed (a wait ran out: the peer never started this launch, say). My copies
      // into the peer's out wait for its entered word here; raise it, so that my side stream drains
      // instead of waiting forever (the peer's out is then overwritten: the status says the launch
      // failed).
      sys::signal_store(s.entered[s.rank] + s.direct_from, s.epoch);
    }
    if (!s.all_reduce) return ok && !(cta == 0 && peer_gave_up(s.abort, s.rank, s.epoch));
    // Every peer's final rows have landed here: its copy engines' chunks, and the direct stores of
    // its CTA with this index (so, over all CTAs, of every CTA).
    for (int32_t q = 0; q < s.world; ++q) {
      if (q == s.rank) continue;
      if (bcast > 0) ok = ok && wait_landed(s, word(s, q, 1, s.rank), bcast);
      if (s.direct_chunks > 0)
        ok = ok && sys::wait_at_least(s.done[s.rank] + q * ctas + cta, s.epoch, budget(s)) == sys::WaitResult::kOk;
    }
    return ok && !(cta == 0 && peer_gave_up(s.abort, s.rank, s.epoch));
  }
};

// Reduce-scatter with two ranks (direct_from): the peer's partial is already in out, so no own tile
// ever receives anything into its epilogue, and the engine is built without that machinery (no
// received boxes, no add, no per-tile barrier for them). Its tiles are of two kinds
// (routed_epilogue.cuh), each with its destination fixed at compile time:
//   kind 0  peer tiles: stored into staging and counted;
//   kind 1  own tiles: added into this rank's out (own_out_map: out[rank] at a fixed parameter
//           offset).
// A route chosen at run time, even one that always picked the same map, cost the kernel ~8 us at
// (4096, 14336, 4096) (bench/DECISIONS.md, "Copy-engine kernels choose their destination per phase at compile time").
// (CeScatterHooks' own tiles, which receive partials and may go to several outs, keep route() in
// their kind.)
struct CeIntoOutHooks : CeScatterHooks {
  static constexpr bool kAddsReceived = false;
  static constexpr int kAddIntoOutDest = kMaxRanks + 1;
  static constexpr int kKinds = 2;
  static __device__ __forceinline__ int kind(const State& s, const gemm::TileCoord& t) { return own(s, t) ? 1 : 0; }
  template <int Kind>
  static __device__ __forceinline__ Route kind_route(const State& s, const gemm::TileCoord&) {
    if constexpr (Kind == 0) return Route{1u << kStagingDest, 0, false, true};
    else return Route{1u << kAddIntoOutDest, s.rank * s.m_shard, false, false};
  }
  template <int Kind>
  static __device__ __forceinline__ const CUtensorMap* kind_map(const State& s) {
    if constexpr (Kind == 0) return &s.staging;
    else return &s.own_out_map;
  }
  template <int Kind>
  static constexpr bool kKindAdds = Kind == 1;
  template <int Kind>
  static constexpr bool kKindRouted = false;
  // The leader, before an own tile's adds into out: the copy engine's writes there were acquired with
  // the progress word (producer, then the ring's mbarrier); TMA reads them through the async proxy.
  template <class C>
  static __device__ __forceinline__ bool before_routed_stores(const State&, C&, const gemm::TileCoord&,
                                                              const Route& route, int) {
    if (route.dests >> kAddIntoOutDest & 1u) cta::fence_proxy_async_global();
    return true;
  }
};

}  // namespace weft::fused
