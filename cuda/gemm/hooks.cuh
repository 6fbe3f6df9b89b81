// hooks.cuh — how a fused op customises the GEMM engine. The plain GEMM is the engine with
// DefaultHooks; a fused op (cuda/fused/*) derives its Hooks type from DefaultHooks, hides the
// members it changes, and reuses every other line of the engine.
//
// A Hooks type provides (DefaultHooks has a no-op version of each):
//
//   struct State { ... };
//       Plain data the host fills; it travels inside KernelParams (kernel parameter space, so keep it
//       to pointers, epochs, counts and the few tensor maps the op needs; maps must stay 64-byte
//       aligned, which CUtensorMap's own alignment gives).
//   struct ProducerState { ... };  struct ConsumerState { ... };
//       Mutable per-role scratch that lives across the tiles of one CTA: the producer thread keeps
//       one ProducerState, each consumer warpgroup's leader one ConsumerState (e.g. "chunk 3 of rank 1
//       has been seen", so the next tile of that chunk need not poll again).
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
//   static __device__ void on_kernel_start(const State&);
//       Thread 0 of every CTA, before anything else (e.g. CTA 0 tells the peers "I have entered").
//
//   Producer thread (warpgroup 0, thread 0; it runs with a 40-register budget: keep hooks small):
//   static __device__ const CUtensorMap* a_map(const State&, const TileCoord&, int32_t& row);
//       Where this tile's A rows come from: a map in State and the row of that map that holds the
//       tile's first row (set `row`); nullptr keeps KernelParams::a at row t.m0.
//   static __device__ bool before_tile_loads(const State&, ProducerState&, const TileCoord&);
//   static __device__ bool before_kblock_loads(const State&, ProducerState&, const TileCoord&, int32_t k_block);
//       Called before the first TMA load of a tile / of each k-block, e.g. to wait until a peer's
//       epoch signal says the rows this tile reads have landed (RowSignalGate). Data other agents
//       wrote is read by TMA (the async proxy): after a successful wait, issue
//       cta::fence_proxy_async_global() before returning. Return false when a bounded wait ran out:
//       the kernel reports kFailHookWait and carries on (it never hangs).
//
//   Epilogue (the leader thread of each consumer warpgroup, which also issues the tile's stores):
//   static constexpr EpilogueOp kEpilogue;
//       Without routing: kStore (TMA store into KernelParams::c) or kReduceAdd (element-wise add,
//       cp.reduce.async.bulk.tensor .add). C may be peer memory.
//   static constexpr bool kRouted;
//   static __device__ Route route(const State&, const TileCoord&);
//   static __device__ const CUtensorMap* out_map(const State&, int dest);
//       With kRouted, each tile goes to the destinations in route().dests (bit d: out_map(d)),
//       stored or added (route().reduce), at row m0 - route().row_offset of those maps; one staged
//       shared-memory box feeds every destination. Routed outputs need n to fill whole 16-byte
//       chunks (no plain-store tail columns).
//   static constexpr int kPhases;
//   static __device__ int phase(const State&, const TileCoord&);
//   template <int Phase> static __device__ Route phase_route(const State&, const TileCoord&);
//   template <int Phase> static __device__ const CUtensorMap* phase_map(const State&);
//   template <int Phase> static constexpr bool kPhaseAdds;
//       With kRouted and kPhases == 2, every tile is in phase 0 or 1 (phase()), and each phase has
//       one destination known at compile time: phase_map<Phase>(), stored or added (kPhaseAdds),
//       with phase_route<Phase>()'s row_offset and signal (its dests and reduce are ignored). The
//       engine compiles the tile's math and epilogue once per phase and runs each phase's tiles in a
//       loop of its own (kernel.cuh), so no run-time choice of map or operation is left inside
//       them: route() and out_map() cost the copy-engine reduce-scatter ~8 us at (4096, 14336,
//       4096) (NOTES-tp, session 10).
//   template <int Phase> static constexpr bool kPhaseRouted;    (default false)
//   template <int Phase> static constexpr bool kPhaseReceives;  (default true)
//       A phase with kPhaseRouted routes at run time after all (route(), out_map()): one whose tiles
//       have several destinations. A phase without kPhaseReceives never receives (its tiles'
//       received_sources() is 0), so its body has none of that machinery.
//   static __device__ bool before_tile_stores(const State&, ConsumerState&, const TileCoord&, const Route&, int consumer);
//       Called before the first store of a consumer's half-tile (64 rows); it may wait (e.g. "the
//       owner has stored this tile, so adding into it is safe"). false: a bounded wait ran out.
//   static constexpr bool kAddsReceived;
//   template <class Cfg> static __device__ bool add_received(const State&, const TileCoord&, int consumer,
//                                                           float (&acc)[Cfg::kTileN / 2]);
//       When kAddsReceived, called by every thread of the consumer warpgroup after before_tile_stores
//       (and a warpgroup barrier), before the tile is rounded and staged: add what other ranks
//       contributed to this tile into the fp32 accumulators (fragment layout: epilogue.cuh), so the
//       tile is rounded once. Data it reads must have been acquired by before_tile_loads or
//       before_tile_stores, or by its own bounded waits (the register exchange's). false, from
//       the leader: a wait ran out.
//   static __device__ int received_sources(const State&, const TileCoord&);
//   static __device__ const CUtensorMap* received_box(const State&, const TileCoord&, int consumer,
//                                                     int source, int32_t& row);
//       With kAddsReceived, the engine can fetch what other ranks contributed itself instead: when
//       received_sources() > 0 for a tile, each consumer loads, for every output box and each source
//       0..sources-1, the box at (the box's column, `row`) of received_box()'s map by TMA into the
//       box's own staging buffer, and adds it to the accumulators from shared memory (the map must
//       have the output's box and swizzle, bf16). The first two boxes are loaded while the tile's
//       first k-block is computed: their data must be acquired by before_tile_loads (the consumer
//       sees it through the first `full` barrier). add_received is then not called for that tile.
//   static __device__ int32_t received_box_rows(const State&);
//       The height of received_box()'s boxes: 64 (a half-tile), or fewer when the rows past them
//       are never stored (their staging rows keep stale data, added only to those rows).
//   static constexpr bool kExchanges;
//   static __device__ uint32_t send_dests(const State&, const TileCoord&, bool keep_own);
//   static __device__ const CUtensorMap* send_map(const State&, int dest, const TileCoord&, int consumer, int32_t& row);
//   static __device__ bool wait_exchanged(const State&, const TileCoord&, int consumer);
//   static __device__ bool finish_deferred(const State&, const TileCoord&, int consumer, int32_t rows,
//                                          int32_t cols, uint32_t barrier_id);
//   static __device__ bool defers(const State&);
//       With kExchanges (and kAddsReceived and kSignalsAfterStore), every rank computes a partial of
//       every tile and the ranks exchange them (ExchangeStep in epilogue.cuh). Each box of a
//       half-tile's rounded accumulators is stored into send_map(d) for every bit d of send_dests()
//       (rows from `row`), and published as a pending signal: once those stores are complete and
//       fenced for system scope, after_tile_stored says "my partial of this half-tile has landed".
//       A CTA's last tile goes to the peers only (keep_own false) and keeps the own partial in its
//       accumulators. Every earlier tile is deferred: sent with keep_own (send_dests includes a
//       destination holding this rank's own partial), and once the last tile's sends are issued,
//       finish_deferred() is called for it by the whole consumer warpgroup: wait (bounded) until
//       every other rank's partial of the half-tile has landed, and store the sum of all the
//       partials into the output (`rows` x `cols` from (t.m0 + 64 * consumer, t.n0)). It must not
//       use the staging buffers or bulk groups, which the last tile's sends still hold; false: its
//       wait ran out. Then the last tile: its signal settled, wait_exchanged (bounded), the
//       received boxes (received_box, sources 0..received_sources()-1: the other ranks) loaded and
//       added, the sum stored as routed. defers() false exchanges every tile at once, as the last
//       (an A/B variant for benchmarks).
//   template <class Cfg> static constexpr bool kAtOnce;
//       With kExchanges: every CTA has exactly one tile (the launch checks it), exchanged at once by
//       exchange_at_once (epilogue.cuh), which stages in the ring, free once that tile's math is done.
//   static constexpr bool kSignalsAfterStore;
//   static __device__ void after_tile_stored(const State&, const TileCoord&, int consumer);
//       When kSignalsAfterStore (and, with routing, route().signal), called once per consumer
//       half-tile after its stores are complete and fenced for system scope: publish an epoch here
//       (HalfTileFlagPublisher) and any reader that sees it also sees the data. The call is deferred
//       to the start of the consumer's next epilogue (or the end of its tiles), so the wait for the
//       stores to complete overlaps a whole tile of math instead of stalling the warpgroup.
//
//   static constexpr bool kDeviceScopeSignals;
//       With kSignalsAfterStore: true when only this GPU reads the signals and the data they publish
//       (its SMs, or its copy engines' stream waits): the stores are then fenced at device scope, not
//       system scope, before after_tile_stored.
//
//   static __device__ bool settle_before_math(const State&, const TileCoord& stored, const TileCoord& next);
//       With kSignalsAfterStore: true publishes the signal owed for `stored` (the consumer's last
//       half-tile) before the math of `next` instead of at next's epilogue. Needed where next's loads
//       may wait for something that depends on that signal (a peer that waits for this rank's data).
//   static __device__ bool settle_with_math(const State&, const TileCoord& stored);
//   static __device__ int32_t settle_block(const State&, int32_t k_blocks);
//       With kSignalsAfterStore: true publishes the signal owed for `stored` right after next's
//       k-block settle_block() (0: the first) is issued (the store's completion overlaps the math
//       before it) instead of a whole tile later. For signals a copy engine or a peer is waiting on
//       to move data; next's first load must not depend on the signal (settle_before_math covers
//       that case). A later block suits stores that take long to complete (NVLink): the leader's
//       wait for them stalls its warpgroup's math.
//
//   static __device__ bool before_finish(const State&);
//       One thread of every CTA after all of the CTA's stores are complete and fenced (e.g. "tell
//       the peers I am done adding into their outputs, then wait until they are done with mine").
//       false: a bounded wait ran out.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../primitives/signal.cuh"

namespace weft::gemm {

// One CTA tile of C and its K range.
struct TileCoord {
  int32_t tile_m, tile_n;  // tile indices
  int32_t m0, n0;          // first row and column of C
  int32_t k_begin;         // first k-block (64 columns of K each)
  int32_t k_blocks;        // number of k-blocks, -1 = up to the end of K
  int32_t piece;           // -1: the whole tile; else a split-tail piece's slot (tail_split.cuh)
};

enum class EpilogueOp { kStore, kReduceAdd };

// Where a routed tile goes (see kRouted).
struct Route {
  uint32_t dests;      // bit d: out_map(d)
  int32_t row_offset;  // the tile's row m0 is row m0 - row_offset of every destination map
  bool reduce;         // add into the destinations instead of storing
  bool signal;         // call after_tile_stored once the stores are complete
};

template <class Cfg>
class GroupedScheduler;

struct DefaultHooks {
  struct State {};
  struct ProducerState {};
  struct ConsumerState {};
  template <class Cfg>
  using Scheduler = GroupedScheduler<Cfg>;
  static constexpr EpilogueOp kEpilogue = EpilogueOp::kStore;
  static constexpr bool kRouted = false;
  static constexpr bool kSignalsAfterStore = false;
  static constexpr bool kDeviceScopeSignals = false;
  static constexpr bool kExchanges = false;
  template <class Cfg>
  static constexpr bool kAtOnce = false;
  static constexpr bool kAddsReceived = false;
  // Schedulers may hand out split-tail pieces (TileCoord::piece >= 0); then
  // tail_split(State) / tail_epoch(State) give the split and the launch's epoch (tail_split.cuh).
  static constexpr bool kTailSplit = false;
  static constexpr int kPhases = 1;
  template <int Phase>
  static constexpr bool kPhaseRouted = false;
  template <int Phase>
  static constexpr bool kPhaseReceives = true;

  // Templates, so that a derived Hooks type with its own State, ProducerState and ConsumerState
  // inherits whichever of them it does not hide.
  template <class S>
  static __device__ __forceinline__ void on_kernel_start(const S&) {}
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* a_map(const S&, const TileCoord&, int32_t&) {
    return nullptr;
  }
  template <class S, class P>
  static __device__ __forceinline__ bool before_tile_loads(const S&, P&, const TileCoord&) {
    return true;
  }
  template <class S, class P>
  static __device__ __forceinline__ bool before_kblock_loads(const S&, P&, const TileCoord&, int32_t) {
    return true;
  }
  template <class S>
  static __device__ __forceinline__ Route route(const S&, const TileCoord&) { return Route{1u, 0, false, true}; }
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* out_map(const S&, int) { return nullptr; }
  template <class S, class C>
  static __device__ __forceinline__ bool before_tile_stores(const S&, C&, const TileCoord&, const Route&, int) {
    return true;
  }
  template <class Cfg, class S>
  static __device__ __forceinline__ bool add_received(const S&, const TileCoord&, int, float (&)[Cfg::kTileN / 2]) {
    return true;
  }
  template <class S>
  static __device__ __forceinline__ int received_sources(const S&, const TileCoord&) { return 0; }
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* received_box(const S&, const TileCoord&, int, int, int32_t&) {
    return nullptr;
  }
  template <class S>
  static __device__ __forceinline__ int32_t received_box_rows(const S&) { return kTileM / 2; }
  template <class S>
  static __device__ __forceinline__ void after_tile_stored(const S&, const TileCoord&, int) {}
  template <class S>
  static __device__ __forceinline__ uint32_t send_dests(const S&, const TileCoord&, bool) { return 0; }
  template <class S>
  static __device__ __forceinline__ const CUtensorMap* send_map(const S&, int, const TileCoord&, int, int32_t&) {
    return nullptr;
  }
  template <class S>
  static __device__ __forceinline__ bool wait_exchanged(const S&, const TileCoord&, int) { return true; }
  template <class S>
  static __device__ __forceinline__ bool finish_deferred(const S&, const TileCoord&, int, int32_t, int32_t, uint32_t) {
    return true;
  }
  template <class S>
  static __device__ __forceinline__ bool defers(const S&) { return true; }
  template <class S>
  static __device__ __forceinline__ bool settle_before_math(const S&, const TileCoord&, const TileCoord&) {
    return false;
  }
  template <class S>
  static __device__ __forceinline__ bool settle_with_math(const S&, const TileCoord&) {
    return false;
  }
  template <class S>
  static __device__ __forceinline__ int32_t settle_block(const S&, int32_t) { return 0; }
  template <class S>
  static __device__ __forceinline__ bool before_finish(const S&) { return true; }
};

// Building blocks for fused ops' hooks.

// Wait until signals[(tile.m0 - first_row) / rows_per_signal] >= epoch: an epoch-tagged word written
// by whoever produces those rows of A, possibly a peer GPU, and possibly in that peer's memory.
// Bounded by `budget`.
struct RowSignalGate {
  const uint64_t* signals;
  uint64_t epoch;
  int32_t first_row;
  int32_t rows_per_signal;
  sys::WaitBudget budget;

  __device__ bool wait(const TileCoord& t) const;
};

// Publish `epoch` for one stored 64-row half-tile (a relaxed system-scope store: only from
// after_tile_stored, which the engine calls right after a system fence), into
// flags[(m0 / 64 + consumer) * tiles_n + tile_n]: one flag per 64 rows x TileN columns of C. The
// flags may be a peer's (the owner of a tile tells every peer it has stored it).
struct HalfTileFlagPublisher {
  uint64_t* flags;
  uint64_t epoch;
  int32_t tiles_n;

  __device__ void publish(const TileCoord& t, int consumer) const;
  // The flag publish() writes for this half-tile.
  __device__ uint64_t* flag(const TileCoord& t, int consumer) const;
};

}  // namespace weft::gemm

#include "impl/hooks.cuh"
