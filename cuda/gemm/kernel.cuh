// kernel.cuh — the persistent, warp-specialised GEMM kernel: one CTA per SM (at most), warpgroup 0
// produces (TMA), warpgroups 1 and 2 consume (wgmma) and hand each tile to the op's epilogue policy.
// See hooks.cuh (the contract), mainloop.cuh and epilogue.cuh.
//
// engine_cta() is the whole GEMM part of one CTA, ending in finish_cta(); gemm_kernel is just that.
// A fused kernel (cuda/fused/*) may give some CTAs another role (moving data) and run engine_cta()
// in the rest; its scheduler then counts only the GEMM CTAs.
#pragma once

#include <type_traits>

#include "../primitives/cluster.cuh"
#include "../primitives/completion.cuh"
#include "../primitives/grid_dependency.cuh"
#include "../primitives/mbarrier.cuh"
#include "../primitives/tma.cuh"
#include "../primitives/warpgroup.cuh"
#include "config.cuh"
#include "epilogue.cuh"
#include "hooks.cuh"
#include "mainloop.cuh"
#include "params.cuh"
#include "scheduler.cuh"
#include "sources.cuh"

namespace weft::gemm {

// The last call of every CTA, by all of its threads: Hooks::before_finish (on the first consumer's
// leader, which has the full register budget), then completion. Every store of the CTA is complete
// and fenced for system scope before it (the consumers' final bulk_wait and fences).
template <class Cfg, class Hooks>
__device__ __forceinline__ void finish_cta(const KernelParams<typename Hooks::State>& p) {
  // A peer may still multicast into our ring or arrive on our barriers until it is done too.
  if constexpr (Cfg::kClusterSize > 1) {
    cluster::sync();
  } else {
    __syncthreads();
  }
  if (threadIdx.x == wg::kThreads && !Hooks::before_finish(p.hooks)) {
    Hooks::on_wait_failed(p.hooks, p.completion, kStageFinish);
  }
  grid::allow_next();
  cta::finish(p.completion);
}

// Whether the tile a scheduler handed out last is its CTA's last (a copy looks one tile ahead).
template <class Scheduler>
__device__ __forceinline__ bool is_last_tile(const Scheduler& scheduler) {
  Scheduler ahead = scheduler;
  typename TileOf<Scheduler>::type next;
  return !ahead.next(next);
}

// Runs body(kind tag) for every tile the scheduler hands out into `t`. With two kinds (the epilogue
// policy's kKinds), each kind's tile body is compiled on its own, in a loop of its own that runs
// while the tiles keep that kind (the copy-engine orders hand out a CTA's tiles kind by kind): one
// loop choosing the kind per tile made ptxas spill 136 bytes in the all-reduce kernels.
template <int Kinds, class Scheduler, class Tile, class KindOf, class Body>
__device__ __forceinline__ void for_each_tile(Scheduler& scheduler, Tile& t, const KindOf& kind_of, const Body& body) {
  static_assert(Kinds == 1 || Kinds == 2, "one or two tile kinds");
  if constexpr (Kinds == 2) {
    bool more = scheduler.next(t);
    while (more) {
      if (kind_of(t) == 0) {
        do {
          body(std::integral_constant<int, 0>{});
          more = scheduler.next(t);
        } while (more && kind_of(t) == 0);
      } else {
        do {
          body(std::integral_constant<int, 1>{});
          more = scheduler.next(t);
        } while (more && kind_of(t) != 0);
      }
    }
  } else {
    while (scheduler.next(t)) body(std::integral_constant<int, 0>{});
  }
}

template <class Cfg, class Hooks>
__device__ __forceinline__ void engine_cta(const KernelParams<typename Hooks::State>& p) {
  using Scheduler = typename Hooks::template Scheduler<Cfg>;
  using Epilogue = typename Hooks::template Epilogue<Cfg, Hooks>;
  using Tile = typename TileOf<Scheduler>::type;
  static_assert(Epilogue::kBarriers <= Cfg::kEpilogueBarriers, "the epilogue's mbarriers fit SharedStorage");
  extern __shared__ uint8_t smem_raw[];
  const SharedStorage<Cfg> s(smem_raw);
  const uint32_t rank = Cfg::kClusterSize > 1 ? cluster::rank() : 0;

  if (threadIdx.x == 0) {
    for (uint32_t i = 0; i < Cfg::kStages; ++i) {
      // the local producer's arrive_expect_tx, and the A source's own arrivals (mainloop.cuh)
      cta::mbarrier_init(s.full(i), 1 + FullArrivalsOf<typename Hooks::template ASource<Cfg>>::value);
      cta::mbarrier_init(s.empty(i), Cfg::kConsumers * Cfg::kClusterSize);
    }
    for (int i = 0; i < Epilogue::kBarriers; ++i) cta::mbarrier_init(s.epilogue_barrier(i), 1);
    cluster::fence_mbarrier_init();
    cta::prefetch_tensor_map(&p.a);
    cta::prefetch_tensor_map(&p.b);
    cta::prefetch_tensor_map(&p.c);
  }
  if constexpr (Cfg::kClusterSize > 1) {
    cluster::sync();  // peers' barriers are initialised before anyone multicasts into them
  } else {
    __syncthreads();
  }

  if (wg::index() == 0) {
    wg::release_registers<Cfg::kProducerRegisters>();
    constexpr int kLanes = Hooks::template ASource<Cfg>::kLanes;
    if (kLanes == 1 ? wg::thread() == 0 : wg::thread() < kLanes) {
      bool hook_ok = true;
      const bool ok = produce<Cfg, Hooks>(p, s, rank, hook_ok);
      if (!ok) cta::fail(p.completion, kFailBarrierTimeout, kStageProducer);
      if (!hook_ok) Hooks::on_wait_failed(p.hooks, p.completion, kStageProducer);
    }
    __syncwarp();
    finish_cta<Cfg, Hooks>(p);
  } else {
    wg::claim_registers<Cfg::kConsumerRegisters>();
    const int consumer = wg::index() - 1;
    Scheduler scheduler(p.problem, p.hooks, rank);
    Epilogue epilogue(p, s, consumer, rank);
    RingPosition<Cfg::kStages> ring;
    float acc[Cfg::kTileN / 2];
    bool ok = true;
    Tile t;
    // One tile: the policy's steps before and during its math, the math, then the policy's epilogue.
    const auto tile = [&](auto kind_tag) {
      constexpr int kKind = decltype(kind_tag)::value;
      epilogue.template before_math<kKind>(t);
      const int32_t k_blocks = k_blocks_of(t, p.problem);
      const auto on_block = [&](int32_t kb) { epilogue.template on_kblock<kKind>(t, kb, k_blocks); };
      const bool rows_past_m = t.m0 + consumer * Cfg::kConsumerRows >= p.problem.m;
      constexpr bool kGenericA = GenericWritesOf<typename Hooks::template ASource<Cfg>>::value;
      accumulate_tile<Cfg, kGenericA>(acc, s, ring, k_blocks, consumer, ok, on_block, rows_past_m);
      if (k_blocks == 0) on_block(0);  // no k-block to overlap (k >= 1 everywhere today)
      epilogue.template store<kKind>(acc, t, scheduler);
    };
    for_each_tile<Epilogue::kKinds>(scheduler, t, [&](const Tile& x) { return Epilogue::kind(p.hooks, x); }, tile);
    epilogue.finish(acc);
    if (wg::thread() == 0) {
      // Stores must finish reading shared memory before the CTA exits, and their writes must be
      // complete before finish_cta() publishes anything.
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if (!ok) cta::fail(p.completion, kFailBarrierTimeout, kStageConsumer);
      if (!epilogue.ok()) Hooks::on_wait_failed(p.hooks, p.completion, kStageEpilogue);
    }
    finish_cta<Cfg, Hooks>(p);
  }
}

template <class Cfg, class Hooks>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_kernel(const __grid_constant__ KernelParams<typename Hooks::State> p) {
  grid::wait_previous();
  if (threadIdx.x == 0) Hooks::on_kernel_start(p.hooks);
  engine_cta<Cfg, Hooks>(p);
}

}  // namespace weft::gemm
