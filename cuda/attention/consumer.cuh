// consumer.cuh — a consumer warpgroup: 64 query rows of every tile of its CTA, S = Q·Kᵀ and
// O += P·V on the tensor cores, the online softmax in between, then the epilogue.
//
// Per tile, with blocks 0 .. n-1 from the KvWalk:
//   S0 = Q·K0ᵀ; softmax(S0) -> P0 (bf16 A fragments, in registers)
//   for j = 1 .. n-1:   S_j = Q·K_jᵀ issued; O *= rescale_{j-1}; O += P_{j-1}·V_{j-1} issued;
//                       wait for S_j (P·V still running); release K_j; softmax(S_j);
//                       wait for P·V; release V_{j-1}; P_j = bf16(S_j)
//   O *= rescale_{n-1}; O += P_{n-1}·V_{n-1}; release V_{n-1}; epilogue.
// So the softmax of block j overlaps the P·V of block j - 1 inside the warpgroup (FlashAttention-3's
// intra-warpgroup pipelining). Across warpgroups, the GEMM issues of one block (S and P·V together)
// take turns in a token ring (named_barrier.cuh): while one warpgroup's GEMMs run, the others do
// their softmax ("ping-pong"), so the tensor cores never wait for exp2.
//
// Register use per thread: O (D / 2 fp32), S (BlockN / 2 fp32), P (BlockN / 4 32-bit bf16 pairs),
// two rows' softmax state. P's registers are read by the tensor cores until the P·V group completes:
// every P register passes wg::fence_operand after that wait, before the next block's P overwrites it
// (wgmma_rs.cuh).
//
// Barriers: q_full (parity per tile; after it, the tile's index in shared memory, or the end), k_full / v_full (ring parity); every warp releases what it
// read (q_empty after the tile's last S, k_empty after each S, v_empty after each P·V) right after
// its own wgmma wait.
#pragma once

#include "../primitives/mbarrier.cuh"
#include "../primitives/named_barrier.cuh"
#include "../primitives/warpgroup.cuh"
#include "../primitives/wgmma.cuh"
#include "../primitives/wgmma_fragment.cuh"
#include "../primitives/wgmma_rs.cuh"
#include "config.cuh"
#include "epilogue.cuh"
#include "kv_walk.cuh"
#include "params.cuh"
#include "scheduler.cuh"
#include "softmax.cuh"

namespace weft::attn {

template <class Cfg>
struct ConsumerMath {
  static constexpr int kD = Cfg::kHeadDim;
  static constexpr int kN = Cfg::kBlockN;

  // The k16 steps' descriptors are the base plus constants. Hidden from the optimiser, the base
  // is offset right before each wgmma; visible, the compiler hoists all of them out of the KV loop
  // (Q's are invariant for the whole kernel) and keeps them live beside O, S and P: 16 registers
  // that made the consumers spill.
  static __device__ __forceinline__ void opaque(uint64_t& desc) { asm volatile("" : "+l"(desc)); }

  // S = Q·Kᵀ: A = this consumer's 64 rows of Q (K-major, kBoxes boxes of 64 columns), B = K
  // (K-major: [BlockN][D], the same boxes). k16 step kk reads box kk / 4 at +32 B per step.
  static __device__ __forceinline__ void issue_s(float (&s)[kN / 2], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) s[i] = 0.0f;
    opaque(q_desc);
    opaque(k_desc);
    wg::fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t q_off = (kk / 4) * Cfg::kQBoxBytes + (kk % 4) * 32;
      const uint32_t k_off = (kk / 4) * Cfg::kKvBoxBytes + (kk % 4) * 32;
      wg::mma_async<kN, false>(s, wg::desc_advance(q_desc, q_off), wg::desc_advance(k_desc, k_off));
    }
    wg::commit();
  }

  // O += P·V: A = P from registers, B = V N-major ([BlockN keys][D], boxes of 64 columns: LBO = one
  // box, SBO = 8 rows); k16 step kk is keys 16 kk .. 16 kk + 15, +2048 B.
  static __device__ __forceinline__ void issue_pv(float (&o)[kD / 2], const uint32_t (&p)[kN / 16][4], uint64_t v_desc) {
    opaque(v_desc);
    wg::fence();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) wg::mma_async_rs<kD, true>(o, p[kk], wg::desc_advance(v_desc, kk * 2048));
    wg::commit();
  }

  static __device__ __forceinline__ void fence_s(float (&s)[kN / 2]) {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) wg::fence_operand(s[i]);
  }
  static __device__ __forceinline__ void fence_pv(float (&o)[kD / 2], uint32_t (&p)[kN / 16][4]) {
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) wg::fence_operand(o[i]);
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) wg::fence_operand(p[kk][r]);
    }
  }
};

// Each warp arrives once its own wgmma wait has returned.
__device__ __forceinline__ void release(uint64_t* bar) {
  if (threadIdx.x % 32 == 0) cta::mbarrier_arrive(bar);
}

// Returns false when a shared-memory barrier wait ran out (then no further wait is made; the math
// runs on whatever is there and the kernel reports the failure).
template <class Cfg, class Policy, class State>
__device__ __forceinline__ bool consume(const Params<State>& p, const SharedStorage<Cfg>& s, int consumer) {
  using Math = ConsumerMath<Cfg>;
  constexpr int kD = Cfg::kHeadDim, kN = Cfg::kBlockN;
  const uint32_t my_turn = Cfg::kTokenBarrier + consumer;
  const uint32_t next_turn = Cfg::kTokenBarrier + (consumer + 1) % Cfg::kConsumers;
  const Problem& q = p.problem;
  const bool causal = q.causal != 0;
  const float scale_log2 = q.scale_log2;
  const uint64_t q_desc = wg::smem_desc_sw128(s.q(0) + consumer * 64 * 128, 0, 1024);
  const int th = wg::thread();
  const int32_t row_in_tile = consumer * 64 + (th / 32) * 16 + (th % 32) / 4;  // and + 8

  float o[kD / 2];
  float sacc[kN / 2];
  uint32_t pfrag[kN / 16][4];
  OnlineSoftmax<Cfg> sm;
  RingPosition<Cfg::kStages> k_ring, v_ring;
  uint32_t q_phase = 0;
  bool ok = true;
  typename Policy::ConsumerCache cache{};
  // Slot `stage` of the K (V) ring is kKvBytes after slot 0: one descriptor and an offset.
  const uint64_t k_desc0 = wg::smem_desc_sw128(s.k(0, 0), 0, 1024);
  const uint64_t v_desc0 = wg::smem_desc_sw128(s.v(0, 0), Cfg::kKvBoxBytes, 1024);
  const auto k_desc = [&](uint32_t stage) { return wg::desc_advance(k_desc0, stage * Cfg::kKvBytes); };
  const auto v_desc = [&](uint32_t stage) { return wg::desc_advance(v_desc0, stage * Cfg::kKvBytes); };

  if (consumer == 0) wg::arrive_groups<2>(my_turn);  // the token starts with consumer 0

  for (;;) {
    ok = ok && cta::mbarrier_wait(s.q_full(), q_phase);
    q_phase ^= 1u;
    // The producer's word for this phase (producer.cuh says why it is visible here). After a failed
    // wait the word may be stale: stop rather than loop on it (the kernel reports the timeout).
    const int32_t index = *static_cast<volatile int32_t*>(s.tile_index());
    if (!ok || index >= q.tiles) break;
    QTile t;
    Policy::template decode<Cfg>(p, index, t);  // kOk: the producer hands out no other
    if (consumer == 0 && th == 0) Policy::tile_started(p, cache, t);
    const int32_t row_pos = t.pos + row_in_tile;  // and row_pos + 8
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
    sm.reset();

    KvWalk<Cfg, Policy, State> walk(p, t);
    KvBlock next;
    bool more = walk.next(next);
    if (!more) {
      release(s.q_empty());
    } else {
      // Block 0: S only.
      ok = ok && cta::mbarrier_wait(s.k_full(k_ring.stage), k_ring.parity);
      wg::sync_groups<2>(my_turn);
      Math::issue_s(sacc, q_desc, k_desc(k_ring.stage));
      wg::arrive_groups<2>(next_turn);
      wg::wait<0>();
      Math::fence_s(sacc);
      release(s.k_empty(k_ring.stage));
      k_ring.advance();
      KvBlock current = next;
      more = walk.next(next);
      if (!more) release(s.q_empty());
      sm.step(sacc, current, row_pos, causal, scale_log2);
      wg::pack_a_fragments<kN>(sacc, pfrag);

      while (more) {
        ok = ok && cta::mbarrier_wait(s.k_full(k_ring.stage), k_ring.parity);
        ok = ok && cta::mbarrier_wait(s.v_full(v_ring.stage), v_ring.parity);
        wg::sync_groups<2>(my_turn);
        Math::issue_s(sacc, q_desc, k_desc(k_ring.stage));
        sm.template rescale_o<kD>(o);
        Math::issue_pv(o, pfrag, v_desc(v_ring.stage));
        wg::arrive_groups<2>(next_turn);
        wg::wait<1>();  // S done, P·V still running
        Math::fence_s(sacc);
        release(s.k_empty(k_ring.stage));
        k_ring.advance();
        current = next;
        more = walk.next(next);
        if (!more) release(s.q_empty());
        sm.step(sacc, current, row_pos, causal, scale_log2);
        wg::wait<0>();
        Math::fence_pv(o, pfrag);
        release(s.v_empty(v_ring.stage));
        v_ring.advance();
        wg::pack_a_fragments<kN>(sacc, pfrag);
      }

      // The last block's P·V.
      ok = ok && cta::mbarrier_wait(s.v_full(v_ring.stage), v_ring.parity);
      sm.template rescale_o<kD>(o);
      wg::sync_groups<2>(my_turn);
      Math::issue_pv(o, pfrag, v_desc(v_ring.stage));
      wg::arrive_groups<2>(next_turn);
      wg::wait<0>();
      Math::fence_pv(o, pfrag);
      release(s.v_empty(v_ring.stage));
      v_ring.advance();
    }
    // The tile again, rather than kept in registers through the KV loop (its rows, row and lse are
    // needed only here): decoding is a few integer divisions per tile.
    Policy::template decode<Cfg>(p, index, t);
    store_tile<Cfg>(o, sm, p, s, t, consumer);
  }
  if (consumer == 0 && th == 0) Policy::consumers_done(p, cache);
  return ok;
}

}  // namespace weft::attn
