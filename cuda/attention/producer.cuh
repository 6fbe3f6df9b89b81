// producer.cuh — the producer role: one thread of warpgroup 0 issues every TMA load of the CTA.
//
// Per tile: the tile's index (scheduler.cuh: the next of the launch's counter, taken as soon as the
// previous tile's loads are issued), then, once the consumers released the previous tile's Q on
// q_empty, that index into the shared word, then Q (all kBoxes boxes
// on q_full), then the tile's key blocks in KvWalk order, K one block ahead of V: K0, K1, V0,
// K2, V1, ..., V(last). That is the order the consumers need them in (they compute S of block j + 1
// before P·V of block j: consumer.cuh). K and V have rings of their own (kStages slots each, a full
// and an empty barrier per slot); each slot is released by every consumer warp.
//
// Before the first load of a block whose segment is gated (a peer's data: ring.cuh), the policy's
// wait_gate() waits for its arrival flag; it fences the async proxy itself.
#pragma once

#include "../primitives/mbarrier.cuh"
#include "../primitives/tma.cuh"
#include "config.cuh"
#include "kv_walk.cuh"
#include "params.cuh"
#include "scheduler.cuh"

namespace weft::attn {

// A ring position as one counter of slots used: slot n % kStages, parity (n / kStages) % 2. The
// producer keeps one counter, K's: V's trails it by a fixed amount at each V load (produce()), and
// bit 31 of K's holds the Q buffer's phase, so the 40 registers hold one word for all three (a
// separate phase word spilled). The count would reach bit 31 only after 2^31 K loads by one CTA.
template <int Stages>
struct SlotCounter {
  static_assert((Stages & (Stages - 1)) == 0 && Stages <= (1 << 30), "a power-of-two ring");
  uint32_t n = 0;
  __device__ __forceinline__ uint32_t stage() const { return n & (Stages - 1); }
  __device__ __forceinline__ uint32_t parity() const { return (n / Stages) & 1u; }
  __device__ __forceinline__ uint32_t q_phase() const { return n >> 31; }
  __device__ __forceinline__ void flip_q_phase() { n ^= 1u << 31; }
};

// Where a block's K or V rows are in their map: what the producer keeps of a block it loads later.
struct KvRows {
  int32_t source, row, col;
};

template <class Cfg>
__device__ __forceinline__ void load_kv_block(const SharedStorage<Cfg>& s, bool is_v, SlotCounter<Cfg::kStages> ring,
                                              const CUtensorMap* map, const KvRows& b, bool& ok) {
  const uint32_t stage = ring.stage();
  uint64_t* empty = is_v ? s.v_empty(stage) : s.k_empty(stage);
  uint64_t* full = is_v ? s.v_full(stage) : s.k_full(stage);
  // After a timeout, stop waiting (ok short-circuits): the kernel drains fast and reports.
  ok = ok && cta::mbarrier_wait(empty, ring.parity() ^ 1u);
  // Boxes past the map's last row are zero-filled but still count their full bytes.
  cta::mbarrier_arrive_expect_tx(full, Cfg::kKvBytes);
#pragma unroll
  for (int box = 0; box < Cfg::kBoxes; ++box) {
    uint8_t* dst = is_v ? s.v(stage, box) : s.k(stage, box);
    cta::load_2d(dst, map, full, b.col + 64 * box, b.row);
  }
}

// Returns the failure to report (0: none): kFailBarrierTimeout when a shared-memory barrier wait ran
// out, else kFailSeqlens when a tile's sequence lengths were invalid; the caller reports it once,
// after the loop (a report inside it, or one per reason, cost the producer's 40 registers a spill).
// gate_ok turns false when a policy's arrival wait ran out.
template <class Cfg, class Policy, class State>
__device__ __forceinline__ int32_t produce(const Params<State>& p, const SharedStorage<Cfg>& s, bool& gate_ok) {
  typename Policy::ProducerCache cache{};
  // K loads so far (both rings' position: every tile loads as many V blocks as K blocks), and the
  // Q buffer's phase.
  SlotCounter<Cfg::kStages> k_ring;
  bool ok = true, seqlens_ok = true;
  TileFetcher<Policy> fetcher;
  for (;;) {
    // The next tile is taken once this one's loads are all issued, before the wait for the consumers
    // to release Q: the atomic's round trip to L2 (several hundred clocks, more under the K and V
    // traffic) then runs while the consumers finish the last blocks (about 1.5 blocks, thousands of
    // clocks, between the last V load and q_empty), instead of between q_empty and the Q load that
    // the next tile's first S waits for (scheduler.cuh: the CTA that is nearest its end takes it). It
    // is decoded after the wait (the producer's 40 registers spilled with the decoded tile held across
    // it). A tile skipped below leaves q_empty's phase as it was: the next wait on the same parity
    // returns at once.
    const int32_t index = fetcher.next(p);
    ok = ok && cta::mbarrier_wait(s.q_empty(), k_ring.q_phase() ^ 1u);
    // The consumers read the word after their q_full wait and release q_empty only after that read,
    // so the wait above also ends their use of the previous index. Ordering: the store precedes
    // the arrive in program order, mbarrier.arrive has release semantics at CTA scope, and the
    // consumers' try_wait that observes the phase complete acquires at CTA scope, so the index is
    // visible to them once q_full completes (the Q bytes' complete_tx adds nothing to order).
    if (index >= p.problem.tiles) {
      *s.tile_index() = index;
      cta::mbarrier_arrive(s.q_full());  // the end marker: no bytes
      break;
    }
    QTile t;
    const TileStatus status = Policy::template decode<Cfg>(p, index, t);
    seqlens_ok = seqlens_ok && status != TileStatus::kInvalid;
    if (status != TileStatus::kOk) continue;  // the consumers never hear of it
    *s.tile_index() = index;
    cta::mbarrier_arrive_expect_tx(s.q_full(), Cfg::kQBytes);
#pragma unroll
    for (int box = 0; box < Cfg::kBoxes; ++box) {
      cta::load_2d(s.q(box), &p.q, s.q_full(), t.h * Cfg::kHeadDim + 64 * box, t.row);
    }
    k_ring.flip_q_phase();
    KvWalk<Cfg, Policy, State> walk(p, t);
    KvBlock b;
    KvRows previous{-1, 0, 0};  // source -1: no block yet
    while (walk.next(b)) {
      if (b.gate >= 0) gate_ok = gate_ok && Policy::wait_gate(p, cache, b.gate);
      load_kv_block<Cfg>(s, false, k_ring, &p.k[b.source], KvRows{b.source, b.row, b.col}, ok);
      ++k_ring.n;
      // V of the previous block: the V ring has had one load fewer than K before this K load.
      if (previous.source >= 0) load_kv_block<Cfg>(s, true, SlotCounter<Cfg::kStages>{k_ring.n - 2}, &p.v[previous.source], previous, ok);
      previous = KvRows{b.source, b.row, b.col};
    }
    // V of the last block: now the V ring has one load fewer than K.
    if (previous.source >= 0) load_kv_block<Cfg>(s, true, SlotCounter<Cfg::kStages>{k_ring.n - 1}, &p.v[previous.source], previous, ok);
  }
  return !ok ? kFailBarrierTimeout : !seqlens_ok ? kFailSeqlens : 0;
}

}  // namespace weft::attn
