// hooks.cuh — the GEMM engine's contract: what an op gives the engine to make it its own kernel.
// The plain GEMM is the engine with DefaultHooks; an op (cuda/fused/*, cuda/moe/*) derives its
// Hooks type from DefaultHooks, hides what it changes and reuses every other line of the engine.
//
// A Hooks type has these customisation points (DefaultHooks has the plain GEMM's version of each):
//
//   struct State { ... };                                                       the op's data
//       Plain data the host fills; it travels in KernelParams (kernel parameter space: pointers,
//       epochs, counts and the few tensor maps the op needs; maps stay 64-byte aligned).
//   template <class Cfg> using Scheduler = ...;                                1. tile order
//       Built as Scheduler(const Problem&, const State&, cluster_rank) in every role; `bool
//       next(Tile&)` yields this CTA's tiles, the same sequence in every role, false when done.
//       The CTAs of a cluster must get tiles that share the multicast operand (the same n0 for
//       ClusterM = 2, the same m0 for ClusterN = 2) and equal k-block counts. Tile is TileCoord, or
//       the scheduler's own `using Tile = ...` derived from TileCoord (a grouped GEMM's group): the
//       engine hands that type to every hook and policy (TileOf below).
//   template <class Cfg> using ASource = ...;                                  2. A source
//   template <class Cfg> using BSource = ...;                                  3. B source
//       Where a tile's operands come from (sources.cuh: TmaA, TmaB are the defaults). Built once per
//       tile by the producer as Source(const KernelParams&, const Tile&); per k-block, load(dst,
//       full, k0, cluster_rank, lane) issues the TMA loads of the stage's A (B) part into `dst`,
//       completing on `full`; static stage_bytes(p) is what they land per stage. A source may pick
//       its own map and coordinates per tile (a 3-D map over [G, N, K] weights with the group as
//       the outer coordinate), and an A source with kLanes = 32 loads from all of warp 0 (a gather:
//       one 1-row box per row, 4 per lane), with kLanes = 128 from the whole producer warpgroup (a
//       cp.async gather, with arrivals of its own: sources.cuh), lane 0 alone otherwise.
//   static bool before_tile_loads(const State&, ProducerState&, const Tile&);  4. wait before loads
//       The producer, before a tile's first load: e.g. wait for a peer's epoch signal that the
//       rows this tile reads have landed (RowSignalGate), then cta::fence_proxy_async_global()
//       (TMA reads through the async proxy). ProducerState is the producer's scratch across tiles.
//   template <class Cfg, class H> using Epilogue = ...;                        5. epilogue policy
//       What happens to a tile's accumulators: a class, built once per consumer warpgroup (policy
//       contract below). StoreEpilogue (epilogue.cuh) stores or adds into KernelParams::c and may
//       signal; cuda/fused/ has the routed, phased, received-adds and exchange policies. H is the
//       Hooks type itself, so that a policy calls the hooks of the type that uses it.
//   static bool before_tile_stores(const State&, ConsumerState&, const Tile&, int consumer);
//                                                                              6. wait before stores
//       Called by StoreEpilogue's leader before a half-tile's first store (64 rows): e.g. "the
//       owner has stored this tile, so adding into it is safe". ConsumerState: per-warpgroup scratch.
//   static void after_tile_stored(const State&, const Tile&, int consumer);    7. after-store
//       A policy with signals calls it once a half-tile's stores are complete and fenced (settle(),
//       epilogue.cuh): publish an epoch here (HalfTileFlagPublisher); a reader that sees it sees the data.
//   static bool before_finish(const State&);                                   8. before-finish
//       One thread of every CTA after all of the CTA's stores are complete and fenced: e.g. "tell
//       the peers I am done adding into their outputs, then wait until they are done with mine".
//   static void on_kernel_start(const State&);                                 9. kernel start
//       Thread 0 of every CTA, first (e.g. "this rank has entered the launch").
//   static void on_wait_failed(const State&, const Completion&, uint32_t stage);  10. a wait gave up
//       Called once by the CTA role whose hook (or epilogue policy) returned false, with the role's
//       stage: report why (DefaultHooks: kFailHookWait at that stage). An op with peers reports an
//       abort as the peer's failure instead, raises its peers' abort words after a timeout so that
//       they stop within a poll, and releases any side-stream work that waits on the kernel.
// Every bool above is false when a bounded wait ran out or was aborted: the kernel then calls
// on_wait_failed and drains instead of hanging.
//
// The epilogue policy, as the engine drives it (kernel.cuh), for every tile t of one warpgroup:
//     Epilogue e(p, shared, consumer, cluster_rank);
//     for each tile t:  e.before_math<Kind>(t);  math, calling e.on_kblock<Kind>(t, kb, k_blocks)
//                       after each k-block's wgmmas are issued;  e.store<Kind>(acc, t, scheduler);
//     e.finish(acc);    then the engine waits for the leader's bulk stores and fences them.
//   `static constexpr int kKinds` (1 or 2) and `static int kind(const State&, const Tile&)`: with 2,
//   the engine compiles the whole tile body once per kind and runs each kind's tiles in a loop of
//   its own while they keep that kind, so a kind's destination can be a compile-time one.
//   `kBarriers` (at most 4) mbarriers of count 1 are set up for the policy (SharedStorage::
//   epilogue_barrier). `bool ok() const`: false when one of its waits ran out. The leader (thread
//   0 of the warpgroup) issues every TMA store; the accumulator fragment layout is epilogue.cuh's.
//   Building blocks a policy composes (epilogue.cuh): stage_box / add_box (registers <-> one
//   swizzled 64 x 128-byte staging box), stage_for_store (into one of the consumer's two staging
//   boxes, SharedStorage::out_box, once the store two boxes ago has read it), cta::store_2d /
//   reduce_add_2d (TMA store or add of a box into any map: C, a peer's C, a staging buffer),
//   store_rows (plain stores bounded by rows and columns), PendingSignal + settle (a signal owed
//   for stores still in flight, published later so that the wait overlaps math).
//
// How a grouped GEMM (MoE: out[offsets[g] .. offsets[g+1]) = a[same rows] x b[g], torch._grouped_mm
// with unpadded offsets) plugs in, with nothing changed under cuda/gemm/:
//
//   struct GroupTile : gemm::TileCoord { int32_t group, row_end; };  // rows [m0, row_end) are group's
//   template <class Cfg> struct GroupScheduler {          // (group, tile) pairs, group-major
//     using Tile = GroupTile;
//     const MoeState& s_; int32_t unit_;
//     GroupScheduler(const Problem&, const MoeState& s, uint32_t) : s_(s), unit_(blockIdx.x) {}
//     bool next(GroupTile& t) {                          // unit -> (group g, tile row i, tile column j)
//       if (!s_.find(unit_, t.group, t.tile_m, t.tile_n)) return false;  // from offsets and tile counts
//       t.m0 = s_.offsets[t.group] + t.tile_m * Cfg::kTileM;  t.row_end = s_.offsets[t.group + 1];
//       t.n0 = t.tile_n * Cfg::kTileN;  t.k_begin = 0;  t.k_blocks = -1;  t.piece = -1;
//       unit_ += gridDim.x;  return true;
//     }
//   };
//   template <class Cfg> struct GroupB : gemm::TmaB<Cfg> {   // b as [G, N, K], box {64, TileN, 1}
//     int32_t g;
//     template <class P> GroupB(const P& p, const GroupTile& t) : TmaB<Cfg>(p, t), g(t.group) {
//       this->map = &p.hooks.b_groups;                       // a 3-D map in MoeState
//     }
//     void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t, int) const {
//       cta::load_3d(dst, this->map, full, k0, this->n0, g);
//     }
//   };
//   template <class Cfg, class H> struct GroupEpilogue : gemm::StoreEpilogue<Cfg, H> {
//     using gemm::StoreEpilogue<Cfg, H>::StoreEpilogue;
//     template <int Kind, class S> void store(float (&acc)[Cfg::kTileN / 2], const GroupTile& t, const S& s) {
//       const int32_t row0 = t.m0 + Cfg::kConsumerRows * this->consumer_;
//       const int32_t rows = min(t.row_end - row0, Cfg::kConsumerRows);  // this half-tile's rows
//       if (rows <= 0) return;                              // the next group's rows only
//       if (rows == Cfg::kConsumerRows) return StoreEpilogue<Cfg, H>::template store<Kind>(acc, t, s);
//       store_rows<Cfg>(acc, out + row0 * ldc + t.n0, ldc, rows, cols);  // plain stores, stop at row_end
//     }
//   };
//   struct MoeHooks : gemm::DefaultHooks {
//     using State = MoeState;
//     template <class Cfg> using Scheduler = GroupScheduler<Cfg>;
//     template <class Cfg> using BSource = GroupB<Cfg>;
//     template <class Cfg, class H> using Epilogue = GroupEpilogue<Cfg, H>;
//   };
// (A stores past row_end could also be clipped by TMA itself: a per-group map of out whose outer
// extent ends at offsets[g + 1], rewritten on the device with tensormap.replace.) A gather-by-index
// A source sets kLanes = 32 and loads row i of the tile from a [rows, K] map with box {64, 1} at
// (k0, index[m0 + i]) into dst + 128 * i: TMA applies the 128-byte swizzle by the destination's
// shared address, so the stage ends up exactly as one 128-row box would leave it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "../primitives/completion.cuh"
#include "../primitives/signal.cuh"
#include "params.cuh"

namespace weft::gemm {

// One CTA tile of C and its K range.
struct TileCoord {
  int32_t tile_m, tile_n;  // tile indices
  int32_t m0, n0;          // first row and column of C
  int32_t k_begin;         // first k-block (64 columns of K each)
  int32_t k_blocks;        // number of k-blocks, -1 = up to the end of K
  int32_t piece;           // -1: the whole tile; else a split-tail piece's slot (tail_split.cuh)
};

// The tile type a scheduler hands out: its `Tile`, or TileCoord.
template <class Scheduler, class = void>
struct TileOf {
  using type = TileCoord;
};
template <class Scheduler>
struct TileOf<Scheduler, std::void_t<typename Scheduler::Tile>> {
  using type = typename Scheduler::Tile;
};

template <class Cfg>
class GroupedScheduler;
template <class Cfg>
struct TmaA;
template <class Cfg>
struct TmaB;
enum class EpilogueOp { kStore, kReduceAdd };
enum class SignalScope { kNone, kSystem, kDevice };
template <class Cfg, class Hooks, EpilogueOp Op = EpilogueOp::kStore, SignalScope Signal = SignalScope::kNone>
class StoreEpilogue;

struct DefaultHooks {
  struct State {};
  struct ProducerState {};
  struct ConsumerState {};
  template <class Cfg>
  using Scheduler = GroupedScheduler<Cfg>;
  template <class Cfg>
  using ASource = TmaA<Cfg>;
  template <class Cfg>
  using BSource = TmaB<Cfg>;
  template <class Cfg, class H>
  using Epilogue = StoreEpilogue<Cfg, H>;

  // Templates, so that a derived Hooks type with its own State, ProducerState and ConsumerState
  // inherits whichever of them it does not hide.
  template <class S>
  static __device__ __forceinline__ void on_kernel_start(const S&) {}
  template <class S, class P, class T>
  static __device__ __forceinline__ bool before_tile_loads(const S&, P&, const T&) {
    return true;
  }
  template <class S, class C, class T>
  static __device__ __forceinline__ bool before_tile_stores(const S&, C&, const T&, int) {
    return true;
  }
  template <class S, class T>
  static __device__ __forceinline__ void after_tile_stored(const S&, const T&, int) {}
  template <class S>
  static __device__ __forceinline__ bool before_finish(const S&) { return true; }
  template <class S>
  static __device__ __forceinline__ void on_wait_failed(const S&, const Completion& c, uint32_t stage) {
    cta::fail(c, kFailHookWait, stage);
  }
};

// Building blocks for hooks.

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
// after_tile_stored, which follows a system fence), into flags[(m0 / 64 + consumer) * tiles_n +
// tile_n]: one flag per 64 rows x TileN columns of C. The flags may be a peer's (the owner of a tile
// tells every peer it has stored it).
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
