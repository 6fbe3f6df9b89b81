// mainloop.cuh — the two roles of the engine's warp specialisation.
//
// Producer (one thread of warpgroup 0, its warp 0, or all of it: produce()): for each tile and
// k-block, wait until the ring slot is free in every CTA of the cluster, announce the slot's bytes on
// its `full` barrier, and have the tile's A and B sources (sources.cuh) issue their loads.
//
// Consumers (warpgroups 1 and 2, 64 rows each): wait for `full`, issue TileK/16 wgmma k16 steps on
// the slot, keep one batch in flight, and release the previous slot on `empty` in every CTA of the
// cluster once its wgmmas are done (the peer multicasts into our slot, so it must hear that we are
// done with it too). The ring's `empty` barrier therefore counts kConsumers x kClusterSize arrivals.
#pragma once

#include <type_traits>

#include "../primitives/cluster.cuh"
#include "../primitives/mbarrier.cuh"
#include "../primitives/tma.cuh"
#include "../primitives/wgmma.cuh"
#include "config.cuh"
#include "hooks.cuh"
#include "params.cuh"
#include "sources.cuh"

namespace weft::gemm {

// What an A source may add to the ring's protocol (sources.cuh, "A source"); the TMA sources add
// nothing: a stage's `full` barrier then counts only lane 0's arrive_expect_tx.
template <class A, class = void>
struct FullArrivalsOf : std::integral_constant<uint32_t, 0> {};
template <class A>
struct FullArrivalsOf<A, std::void_t<decltype(A::kFullArrivals)>> : std::integral_constant<uint32_t, A::kFullArrivals> {};
template <class A, class = void>
struct GenericWritesOf : std::false_type {};
template <class A>
struct GenericWritesOf<A, std::void_t<decltype(A::kGenericWrites)>> : std::bool_constant<A::kGenericWrites> {};

// The producer warpgroup's named barrier (an A source with kLanes = 128); the consumers' epilogues
// use 1 + consumer, and both consumers together kConsumersBarrier (15).
constexpr uint32_t kProducerBarrier = 3;

__device__ __forceinline__ int32_t k_blocks_of(const TileCoord& t, const Problem& p) {
  const int32_t total = (p.k + kTileK - 1) / kTileK;
  return t.k_blocks >= 0 ? t.k_blocks : total - t.k_begin;
}

// The producer: one thread, warp 0 of the producer warpgroup when the A source loads from every lane
// of it (ASource::kLanes == 32: 1-row TMA boxes), or the whole warpgroup (kLanes == 128: cp.async
// copies). Lane 0 runs the tile's hook, waits for the ring and announces each stage's bytes; with 32
// lanes __syncwarp orders the other lanes' loads after its wait and expect_tx. With 128, every lane
// waits for the free slot itself (its own acquire of the consumers' release), and the hook is
// shared through the producer's named barrier; the lanes' loads need no order against lane 0's
// expect_tx, since their own arrivals (kFullArrivals) hold the stage's phase open until it came.
template <class Cfg, class Hooks>
__device__ __forceinline__ bool produce(const KernelParams<typename Hooks::State>& p, const SharedStorage<Cfg>& s,
                                        uint32_t rank, bool& hook_ok) {
  using Scheduler = typename Hooks::template Scheduler<Cfg>;
  using ASource = typename Hooks::template ASource<Cfg>;
  using BSource = typename Hooks::template BSource<Cfg>;
  constexpr int kLanes = ASource::kLanes;
  static_assert(kLanes == 1 || kLanes == 32 || kLanes == wg::kThreads,
                "an A source loads from lane 0, the producer's warp 0 or its whole warpgroup");
  static_assert(kLanes == wg::kThreads || FullArrivalsOf<ASource>::value == 0,
                "arrivals of the A source's own come from the whole producer warpgroup");
  Scheduler scheduler(p.problem, p.hooks, rank);
  typename Hooks::ProducerState hook_state{};
  RingPosition<Cfg::kStages> ring;
  bool ok = true;
  const int lane = kLanes == 1 ? 0 : int(threadIdx.x % kLanes);
  const uint32_t stage_bytes = BSource::stage_bytes(p) + ASource::stage_bytes(p);
  typename TileOf<Scheduler>::type t;
  while (scheduler.next(t)) {
    // After a failed wait, stop waiting (hook_ok short-circuits): the kernel drains fast and reports.
    if constexpr (kLanes > 1) {
      if (lane == 0) hook_ok = hook_ok && Hooks::before_tile_loads(p.hooks, hook_state, t);
      // lane 0's acquire (and its proxy fence) before the other lanes' loads
      if constexpr (kLanes == 32) __syncwarp();
      else wg::sync(kProducerBarrier);
    } else {
      hook_ok = hook_ok && Hooks::before_tile_loads(p.hooks, hook_state, t);
    }
    const ASource a(p, t);
    const BSource b(p, t);
    const int32_t k_blocks = k_blocks_of(t, p.problem);
    for (int32_t i = 0; i < k_blocks; ++i) {
      const int32_t k0 = (t.k_begin + i) * Cfg::kTileK;
      uint64_t* full = s.full(ring.stage);
      // After a timeout, stop waiting (ok short-circuits): the kernel drains fast and reports.
      if (kLanes == wg::kThreads || lane == 0) ok = ok && cta::mbarrier_wait(s.empty(ring.stage), ring.parity ^ 1u);
      // Every CTA's barrier expects the whole stage: its own loads plus what the peer multicasts.
      if (lane == 0) cta::mbarrier_arrive_expect_tx(full, stage_bytes);
      if constexpr (kLanes == 32) __syncwarp();
      a.load(s.a(ring.stage), full, k0, rank, lane);
      if (lane == 0) b.load(s.b(ring.stage), full, k0, rank, lane);
      ring.advance();
    }
  }
  return ok;
}

// Tells every CTA of the cluster that this consumer warpgroup is done reading ring slot `stage`.
template <class Cfg>
__device__ __forceinline__ void release_slot(const SharedStorage<Cfg>& s, const RingAddresses<Cfg>& at, uint32_t stage) {
  if (wg::thread() == 0) {
    if constexpr (Cfg::kClusterSize == 1) {
      cta::mbarrier_arrive(at.empty(stage));
    } else {
#pragma unroll
      for (uint32_t r = 0; r < Cfg::kClusterSize; ++r) cluster::mbarrier_arrive(s.empty(stage), r);
    }
  }
}

struct NothingOnBlock {
  __device__ __forceinline__ void operator()(int32_t) const {}
};

// Accumulates one tile's 64 x TileN slice for consumer `consumer` into acc. `ok` turns false when a
// barrier wait runs out (and then no further waits are made). on_block(kb) runs once k-block kb has
// arrived and its wgmmas are issued (so it overlaps them): whatever the producer acquired before
// that block's loads is visible to it.
// A consumer whose 64 rows all lie past M (decode: M <= 64) skips the math: it only waits for each
// slot and releases it, since the producer and the other consumer still share the ring with it. Its
// accumulators stay zero and its epilogue stores nothing.
template <class Cfg, class OnBlock>
__device__ __forceinline__ void pass_tile(const SharedStorage<Cfg>& s, RingPosition<Cfg::kStages>& ring,
                                          int32_t k_blocks, bool& ok, const OnBlock& on_block) {
  const RingAddresses<Cfg> at(s);
  for (int32_t kb = 0; kb < k_blocks; ++kb) {
    ok = ok && cta::mbarrier_wait(at.full(ring.stage), ring.parity);
    on_block(kb);
    release_slot<Cfg>(s, at, ring.stage);
    ring.advance();
  }
}

// GenericA: the A source writes the stage through the generic proxy (cp.async, its kGenericWrites),
// while wgmma reads shared memory through the async proxy, so each consumer thread fences the async
// proxy (fence.proxy.async.shared::cta) on both paths between the proxies (bench/DECISIONS.md, "A
// gathered by cp.async is fenced by its consumers"): after its wait on `full`, which observed the
// copies' arrivals, and before its wgmma reads (the producer's writes -> the barrier -> this fence ->
// the reads); and between its wgmma reads of a slot (complete at wgmma.wait_group) and the release
// that lets the producer's next copies overwrite it. One fence serves both: a slot's release waits
// for the next k-block's `full` wait and fence (the producer needs that slot only S - 2 stages
// later, so the wait is for a stage it has already filled). The release stays before the batch's
// wgmmas: their issue blocks while the other consumer's batch holds the tensor pipe, and a release
// behind it handed the slot back up to a batch later (bench/DECISIONS.md, "The gathering kernel's
// consumers lose their slack in the issue path").
template <class Cfg, bool GenericA = false, class OnBlock = NothingOnBlock>
__device__ __forceinline__ void accumulate_tile(float (&acc)[Cfg::kTileN / 2], const SharedStorage<Cfg>& s,
                                RingPosition<Cfg::kStages>& ring, int32_t k_blocks, int consumer, bool& ok,
                                const OnBlock& on_block = OnBlock{}, bool rows_past_m = false) {
  static_assert(!GenericA || Cfg::kStages >= 3, "a deferred release needs a third stage");
  // B descriptors: K-major rows of 128 B (SBO = 8 rows); N-major 8 KiB boxes of 64 N (LBO) x 64 K,
  // 8 K rows per 1024 B (SBO).
  constexpr uint32_t kBLbo = Cfg::kBNMajor ? Cfg::kBBoxBytes : 0;
  constexpr uint32_t kBStepBytes = Cfg::kBNMajor ? 16 * 128 : 16 * 2;
  uint32_t previous = 0;
  uint32_t retired = 0;  // GenericA: the slot whose wgmmas are done, released after the next fence
  // Zeroed accumulators and a constant scale-d: a run-time scale-d predicate makes ptxas serialize
  // the wgmma pipeline (C7514).
#pragma unroll
  for (int i = 0; i < Cfg::kTileN / 2; ++i) acc[i] = 0.0f;
  if (rows_past_m) {  // uniform over the warpgroup
    pass_tile<Cfg>(s, ring, k_blocks, ok, on_block);
    return;
  }
  const RingAddresses<Cfg> at(s);
  for (int32_t kb = 0; kb < k_blocks; ++kb) {
    ok = ok && cta::mbarrier_wait(at.full(ring.stage), ring.parity);
    if constexpr (GenericA) {
      cta::fence_proxy_async_shared();
      if (kb > 1) release_slot<Cfg>(s, at, retired);
    }
    const uint64_t a_desc = wg::smem_desc_sw128(at.a(ring.stage) + uint32_t(consumer * Cfg::kConsumerRows * 128), 0, 1024);
    const uint64_t b_desc = wg::smem_desc_sw128(at.b(ring.stage), kBLbo, 1024);
    wg::fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kTileK / 16; ++kk) {
      wg::mma_async<Cfg::kTileN, Cfg::kBNMajor>(acc, wg::desc_advance(a_desc, kk * 32),
                                                wg::desc_advance(b_desc, kk * kBStepBytes));
    }
    wg::commit();
    on_block(kb);
    // Keep this batch in flight; the previous one is done, so its slot goes back to the producers.
    wg::wait<1>();
    if (kb > 0) {
      if constexpr (GenericA) retired = previous;
      else release_slot<Cfg>(s, at, previous);
    }
    previous = ring.stage;
    ring.advance();
  }
  wg::wait<0>();
  if constexpr (GenericA) {
    cta::fence_proxy_async_shared();
    if (k_blocks > 1) release_slot<Cfg>(s, at, retired);
  }
  if (k_blocks > 0) release_slot<Cfg>(s, at, previous);
#pragma unroll
  for (int i = 0; i < Cfg::kTileN / 2; ++i) wg::fence_operand(acc[i]);
}

}  // namespace weft::gemm
