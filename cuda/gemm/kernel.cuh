// kernel.cuh — the persistent, warp-specialised GEMM kernel: one CTA per SM (at most), warpgroup 0
// produces (TMA), warpgroups 1 and 2 consume (wgmma) and store. See mainloop.cuh and epilogue.cuh.
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
#include "tail_split.cuh"

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
    cta::fail(p.completion, kFailHookWait, kStageFinish);
  }
  grid::allow_next();
  cta::finish(p.completion);
}

// Whether the tile a scheduler handed out last is its CTA's last (a copy looks one tile ahead).
template <class Scheduler>
__device__ __forceinline__ bool is_last_tile(const Scheduler& scheduler) {
  Scheduler ahead = scheduler;
  TileCoord next;
  return !ahead.next(next);
}

// Named barrier ids: 0 is __syncthreads, 1 + consumer each consumer's own (epilogue.cuh), and this
// one the consumers together.
constexpr uint32_t kConsumersBarrier = 15;

template <class Cfg, class Hooks>
__device__ __forceinline__ void engine_cta(const KernelParams<typename Hooks::State>& p) {
  extern __shared__ uint8_t smem_raw[];
  const SharedStorage<Cfg> s(smem_raw);
  const uint32_t rank = Cfg::kClusterSize > 1 ? cluster::rank() : 0;

  if (threadIdx.x == 0) {
    for (uint32_t i = 0; i < Cfg::kStages; ++i) {
      cta::mbarrier_init(s.full(i), 1);  // the local producer's arrive_expect_tx
      cta::mbarrier_init(s.empty(i), Cfg::kConsumers * Cfg::kClusterSize);
    }
    if constexpr (Hooks::kAddsReceived) {
      for (int c = 0; c < Cfg::kConsumers; ++c) {
        cta::mbarrier_init(s.received(c, 0), 1);  // the consumer leader's arrive_expect_tx
        cta::mbarrier_init(s.received(c, 1), 1);
      }
    }
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
    if (wg::thread() == 0) {
      bool hook_ok = true;
      const bool ok = produce<Cfg, Hooks>(p, s, rank, hook_ok);
      if (!ok) cta::fail(p.completion, kFailBarrierTimeout, kStageProducer);
      if (!hook_ok) cta::fail(p.completion, kFailHookWait, kStageProducer);
    }
    __syncwarp();
    finish_cta<Cfg, Hooks>(p);
  } else {
    wg::claim_registers<Cfg::kConsumerRegisters>();
    const int consumer = wg::index() - 1;
    typename Hooks::template Scheduler<Cfg> scheduler(p.problem, p.hooks, rank);
    typename Hooks::ConsumerState hook_state{};
    PendingSignal pending{};
    ReceivedPhases phases{};
    RingPosition<Cfg::kStages> ring;
    float acc[Cfg::kTileN / 2];
    uint32_t staged = 0;
    bool ok = true;
    bool hook_ok = true;
    TileCoord t;
    TileCoord last{};
    bool any_tile = false;
    // kExchanges: tile `r`, whose own sends went out last (kSend), waits for the peers' partials,
    // adds them to the accumulators it left in acc and stores the sum.
    const auto receive = [&](const TileCoord& r) {
      store_tile<Cfg, Hooks>(acc, p, s, r, consumer, staged, hook_state, pending, hook_ok,
                             Hooks::received_sources(p.hooks, r), phases, ExchangeStep::kReceive);
    };
    // One tile: its math, then its epilogue. kPhase: with Hooks::kPhases > 1, the phase the tile
    // is in, so that its route is a compile-time one (hooks.cuh).
    const auto tile = [&](auto phase_tag) {
      constexpr int kPhase = decltype(phase_tag)::value;
      bool settle_early = false;
      if constexpr (Hooks::kSignalsAfterStore) {
        // pending is tracked identically by every thread of the warpgroup: uniform branches.
        if (pending.valid && Hooks::settle_before_math(p.hooks, pending.tile, t)) {
          settle_pending<Hooks>(p.hooks, pending, consumer, 1 + consumer);
        }
        settle_early = pending.valid && Hooks::settle_with_math(p.hooks, pending.tile);
      }
      const int sources = Hooks::kAddsReceived && Hooks::template kPhaseReceives<kPhase> ? Hooks::received_sources(p.hooks, t) : 0;
      const int32_t k_blocks = k_blocks_of(t, p.problem);
      const auto on_block = [&](int32_t kb) {
        // (with kExchanges the received partials are written while this tile computes: receive_tile)
        if (!Hooks::kExchanges && kb == 0 && sources > 0 && wg::thread() == 0) prefetch_received<Cfg, Hooks>(p, s, t, consumer, staged);
        // settle_block is recomputed from the parameters, not kept live through the k-loop: the
        // 256-wide consumers have no register to spare.
        if (settle_early && kb == Hooks::settle_block(p.hooks, k_blocks)) settle_pending<Hooks>(p.hooks, pending, consumer, 1 + consumer);
      };
      const bool rows_past_m = t.m0 + consumer * Cfg::kConsumerRows >= p.problem.m;
      accumulate_tile<Cfg>(acc, s, ring, k_blocks, consumer, ok, on_block, rows_past_m);
      if (k_blocks == 0) on_block(0);  // no k-block to overlap (k >= 1 everywhere today)
      if constexpr (Hooks::kTailSplit) {
        // A split-tail piece: only the warpgroup that completes the tile stores it.
        if (t.piece >= 0 && !tail_reduce<Cfg>(acc, Hooks::tail_split(p.hooks), Hooks::tail_epoch(p.hooks), t, consumer, 1 + consumer)) {
          last = t;
          any_tile = true;
          return;
        }
      }
      if constexpr (Hooks::kExchanges && Hooks::template kAtOnce<Cfg>) {
        // One tile per CTA (the planner's rule, checked again at launch: gemm_all_reduce.cu). Once
        // both consumers' math is done, nothing more is loaded and the ring is staging.
        wg::sync_groups<Cfg::kConsumers>(kConsumersBarrier);
        exchange_at_once<Cfg, Hooks>(acc, p, s, t, consumer, hook_state, pending, hook_ok, phases);
      } else if constexpr (Hooks::kExchanges) {
        const bool defer = Hooks::defers(p.hooks) && !is_last_tile(scheduler);
        store_tile<Cfg, Hooks>(acc, p, s, t, consumer, staged, hook_state, pending, hook_ok, sources, phases,
                               defer ? ExchangeStep::kDefer : ExchangeStep::kSend);
        // Every tile at once (defers() false): received right after its own sends.
        if (!Hooks::defers(p.hooks)) receive(t);
      } else {
        store_tile<Cfg, Hooks, kPhase>(acc, p, s, t, consumer, staged, hook_state, pending, hook_ok, sources, phases);
      }
      last = t;
      any_tile = true;
    };
    if constexpr (Hooks::kPhases > 1) {
      static_assert(Hooks::kPhases == 2 && !Hooks::kExchanges, "two phases, without the exchange steps");
      // Each phase's tile body is compiled on its own, in a loop of its own that runs while the
      // tiles stay in that phase (a CTA's tiles come phase by phase in the copy-engine orders). One
      // loop choosing the phase per tile made ptxas spill 136 bytes in the all-reduce kernels.
      bool more = scheduler.next(t);
      while (more) {
        if (Hooks::phase(p.hooks, t) == 0) {
          do {
            tile(std::integral_constant<int, 0>{});
            more = scheduler.next(t);
          } while (more && Hooks::phase(p.hooks, t) == 0);
        } else {
          do {
            tile(std::integral_constant<int, 1>{});
            more = scheduler.next(t);
          } while (more && Hooks::phase(p.hooks, t) != 0);
        }
      }
    } else {
      while (scheduler.next(t)) tile(std::integral_constant<int, 0>{});
    }
    if constexpr (Hooks::kExchanges) {
      if (!Hooks::template kAtOnce<Cfg> && Hooks::defers(p.hooks) && any_tile) {
        // The last tile's sends are in flight. Meanwhile the deferred half-tiles, in the same order:
        // their peers sent them about when this CTA did, a tile of math ago. Then the last one.
        typename Hooks::template Scheduler<Cfg> again(p.problem, p.hooks, rank);
        while (again.next(t) && !is_last_tile(again)) {
          const int32_t row0 = t.m0 + consumer * Cfg::kConsumerRows;
          if (row0 >= p.problem.m) continue;  // uniform over the warpgroup
          const int32_t rows = min(Cfg::kConsumerRows, p.problem.m - row0);
          const int32_t cols = min(Cfg::kTileN, p.problem.n - t.n0);
          hook_ok = Hooks::finish_deferred(p.hooks, t, consumer, rows, cols, 1 + consumer) && hook_ok;
        }
        receive(last);
      }
    }
    settle_pending<Hooks>(p.hooks, pending, consumer, 1 + consumer);
    if (wg::thread() == 0) {
      // Stores must finish reading shared memory before the CTA exits, and their writes must be
      // complete before finish_cta() publishes anything.
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if (!ok) cta::fail(p.completion, kFailBarrierTimeout, kStageConsumer);
      if (!hook_ok) cta::fail(p.completion, kFailHookWait, kStageEpilogue);
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
