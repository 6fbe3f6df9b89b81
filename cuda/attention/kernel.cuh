// kernel.cuh — the persistent, warp-specialised flash-attention forward kernel (Hopper sm_90a):
// one CTA per SM at most, warpgroup 0 produces (TMA loads: producer.cuh), warpgroups 1.. consume
// (wgmma, online softmax, epilogue: consumer.cuh). The KV source is a policy (local.cuh: one GPU;
// ring.cuh: the ring's peers); everything else is shared.
//
// Napkin math (one H200: 132 SMs at ~1.83 GHz, 989 TFLOP/s dense bf16 = 4096 FLOP/clk/SM; MUFU
// 16 ex2/clk/SM; HBM ~4.8 TB/s, L2 ~50 MiB):
//   - Work per 128 x 128 block at D 128: S and P·V are 2 x 2·128·128·128 = 8.4 MFLOP = 2048 clk of
//     tensor core; the softmax needs 128·128 = 16384 ex2 = 1024 clk of MUFU, plus ~5 FP32/INT ops per
//     score (mask, max, FFMA, sum, convert) ~ 640 issue clk. Unhidden, exp2 alone would cost a third
//     of the time: hence ping-pong between warpgroups (one's softmax under the other's GEMMs) and the
//     intra-warpgroup overlap of softmax(S_j) with P_{j-1}·V_{j-1}. Attainable ~ 65-70% of peak:
//     FA3 and cuDNN reach 600-670 TFLOP/s here.
//   - wgmma issue: per block per warpgroup 8 k16 steps of m64n128 for S and 8 of m64n128 (RS) for
//     P·V = 16 HGMMA instructions for 4.2 MFLOP; each m64n128k16 takes ~32 clk of the SM's tensor
//     cores (4 per SMSP), so the issuing warps are idle most of the time and the token ring costs
//     nothing but the turn-taking.
//   - Memory: a query tile of 128 rows reads its Q once (32 KiB) and K, V once per block (64 KiB per
//     128 keys). At S 8k, H 32, D 128 non-causal: 2048 tiles x 64 blocks x 64 KiB = 8.6 GB if every
//     read went to HBM (1.8 ms at 4.8 TB/s against ~3.3 ms of math): the tile order (local.cuh) keeps
//     the CTAs running together on a few heads, whose K and V (4 MiB per head at 8k) L2 serves.
//   - Shared memory at D 128 (128 x 160): Q 32 KiB, K and V rings 2 x 2 x 40 KiB, O staging 32 KiB
//     = 224 KiB (config.cuh); registers: producer 40, consumers 232 (O 64 + S 80 + P 40 + state).
#pragma once

#include "../primitives/completion.cuh"
#include "../primitives/grid_dependency.cuh"
#include "../primitives/mbarrier.cuh"
#include "../primitives/tma.cuh"
#include "../primitives/warpgroup.cuh"
#include "config.cuh"
#include "consumer.cuh"
#include "params.cuh"
#include "producer.cuh"

namespace weft::attn {

// The last call of every CTA, by all of its threads (inside each role's branch: setmaxnreg needs the
// roles to be the two arms of one if/else). The first consumer's leader (full register budget) runs
// the policy's last wait (the ring: until every peer has copied this rank's shard).
template <class Policy>
__device__ __forceinline__ void finish_cta(const Params<typename Policy::State>& p) {
  __syncthreads();
  if (threadIdx.x == wg::kThreads && !Policy::before_finish(p)) Policy::on_wait_failed(p, kStageFinish);
  grid::allow_next();
  cta::finish(p.completion);
}

template <class Cfg, class Policy>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_kernel(const __grid_constant__ Params<typename Policy::State> p) {
  grid::wait_previous();
  if (threadIdx.x == 0) Policy::on_kernel_start(p);
  extern __shared__ uint8_t smem_raw[];
  const SharedStorage<Cfg> s(smem_raw);
  if (threadIdx.x == 0) {
    cta::mbarrier_init(s.q_full(), 1);  // the producer's arrive_expect_tx
    cta::mbarrier_init(s.q_empty(), Cfg::kReleasers);
    for (uint32_t i = 0; i < Cfg::kStages; ++i) {
      cta::mbarrier_init(s.k_full(i), 1);
      cta::mbarrier_init(s.k_empty(i), Cfg::kReleasers);
      cta::mbarrier_init(s.v_full(i), 1);
      cta::mbarrier_init(s.v_empty(i), Cfg::kReleasers);
    }
    cluster::fence_mbarrier_init();
    cta::prefetch_tensor_map(&p.q);
    cta::prefetch_tensor_map(&p.o);
    cta::prefetch_tensor_map(&p.k[0]);
    cta::prefetch_tensor_map(&p.v[0]);
  }
  __syncthreads();

  if (Policy::kMovers && Policy::is_mover(p)) {
    // A mover CTA (ring.cuh) copies peers' data with all its threads at the launch's 168 registers,
    // and has published every arrival, flag and pulled word of its copies when move() returns: its
    // own producer may wait on those flags next. Then it takes the producer and consumer roles like
    // the others (the barriers above are initialised in every CTA) and fetches tiles from the same
    // counter (scheduler.cuh counts it as a fetcher). It joins even after a failed wait, so that the
    // launch still makes its count of fetches; its waits then stop at the raised abort words.
    if (!Policy::move(p)) Policy::on_wait_failed(p, kStageProducer);
    __syncthreads();
  }
  if (wg::index() == 0) {
    wg::release_registers<Cfg::kProducerRegisters>();
    if (wg::thread() == 0) {
      bool gate_ok = true;
      const int32_t failure = produce<Cfg, Policy>(p, s, gate_ok);
      if (failure != 0) cta::fail(p.completion, failure, kStageProducer);
      if (!gate_ok) Policy::on_wait_failed(p, kStageProducer);
    }
    __syncwarp();
    finish_cta<Policy>(p);
  } else {
    wg::claim_registers<Cfg::kConsumerRegisters>();
    const int consumer = wg::index() - 1;
    const bool ok = consume<Cfg, Policy>(p, s, consumer);
    if (wg::thread() == 0) {
      // Stores must finish reading shared memory before the CTA exits, and their writes must be
      // complete before completion publishes anything.
      cta::bulk_wait<0>();
      cta::fence_proxy_async_global();
      if (!ok) cta::fail(p.completion, kFailBarrierTimeout, kStageConsumer);
    }
    finish_cta<Policy>(p);
  }
}

}  // namespace weft::attn
