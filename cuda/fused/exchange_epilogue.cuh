// exchange_epilogue.cuh — the epilogue policy of the all-reduce's exchange mover (gemm_exchange.cuh):
// every rank computes a partial of every tile and the ranks swap partials inside their epilogues.
// It is the routed policy (routed_epilogue.cuh) for the final store, plus the exchange's steps.
// A CTA's half-tiles go out in one of three steps, each published as a pending signal (gemm::settle,
// then Hooks::after_tile_stored), so the stores drain behind whatever the consumer does next:
//   defer    every tile but the CTA's last: each box of the rounded half-tile is stored into
//            send_map(d) for every bit d of send_dests(t, keep_own = true), which includes a slot
//            holding this rank's own partial; once the last tile's sends are issued, finish_deferred()
//            sums it from the slots alone;
//   send     the CTA's last tile: to the peers only (keep_own false), the own partial staying in the
//            accumulators; then, after the deferred tiles,
//   receive  its signal settled, wait_exchanged() (bounded), the peers' partials (received_box,
//            sources 0 .. received_sources() - 1) loaded and added, the sum stored as routed.
// So one wave's exchange overlaps the next wave's math, and the deferred tiles' finishing overlaps
// the last wave's traffic; only that traffic, a flag and one local load follow.
//
// With Hooks::kAtOnce<Cfg> every CTA has exactly one tile (the launch checks it), exchanged at once
// (exchange_at_once), staging in the ring, which is free once that tile's math is done in both
// consumers.
//
// The Hooks knobs it reads besides the routed ones:
//   uint32_t send_dests(const State&, const Tile&, bool keep_own);
//   const CUtensorMap* send_map(const State&, int dest, const Tile&, int consumer, int32_t& row);
//   bool wait_exchanged(const State&, const Tile&, int consumer);                 (the leader)
//   bool finish_deferred(const State&, const Tile&, int consumer, int32_t rows, int32_t cols,
//                        uint32_t barrier_id);  (the whole warpgroup; must not use the staging buffers
//                        or bulk groups, which the last tile's sends still hold)
//   template <class Cfg> static constexpr bool kAtOnce;
#pragma once

#include "fused/routed_epilogue.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

template <class Cfg, class Hooks>
class ExchangeEpilogue : public RoutedEpilogue<Cfg, Hooks> {
  using Base = RoutedEpilogue<Cfg, Hooks>;
  static_assert(Hooks::kAddsReceived && Hooks::kSignal != gemm::SignalScope::kNone && Hooks::kKinds == 1,
                "the exchange receives partials and publishes every exchanged half-tile");

 public:
  using typename Base::State;
  using typename Base::Tile;
  using Base::Base;

  // (The peers' partials of a tile are loaded only once they have landed: no prefetch during its math.)
  template <int Kind>
  __device__ __forceinline__ void on_kblock(const Tile&, int32_t kb, int32_t k_blocks) {
    this->settle_with_block(kb, k_blocks);
  }

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const Tile& t, const Scheduler& scheduler) {
    if constexpr (Hooks::template kAtOnce<Cfg>) {
      // One tile per CTA (the planner's rule, checked again at launch: gemm_all_reduce.cu). Once
      // both consumers' math is done, nothing more is loaded and the ring is staging.
      wg::sync_groups<Cfg::kConsumers>(gemm::kConsumersBarrier);
      exchange_at_once(acc, t);
    } else {
      send_tile(acc, t, /*keep_own=*/!gemm::is_last_tile(scheduler));
      last_ = t;
      any_tile_ = true;
    }
  }

  // The last tile's sends are in flight. Meanwhile the deferred half-tiles, in the same order: their
  // peers sent them about when this CTA did, a tile of math ago. Then the last one.
  __device__ __forceinline__ void finish(float (&acc)[Cfg::kTileN / 2]) {
    if constexpr (!Hooks::template kAtOnce<Cfg>) {
      if (any_tile_) {
        const auto& p = this->p_;
        typename Hooks::template Scheduler<Cfg> again(p.problem, p.hooks, this->rank_);
        Tile t;
        while (again.next(t) && !gemm::is_last_tile(again)) {
          const int32_t row0 = t.m0 + this->consumer_ * Cfg::kConsumerRows;
          if (row0 >= p.problem.m) continue;  // uniform over the warpgroup
          const int32_t rows = min(Cfg::kConsumerRows, p.problem.m - row0);
          const int32_t cols = min(Cfg::kTileN, p.problem.n - t.n0);
          this->ok_ = Hooks::finish_deferred(p.hooks, t, this->consumer_, rows, cols, 1 + this->consumer_) && this->ok_;
        }
        // The receive: this tile's own sends settled first (store_tile), then the peers' partials.
        this->template store_tile<0>(acc, last_, Hooks::received_sources(p.hooks, last_), [&] {
          if (wg::thread() == 0) this->ok_ = receive_tile(last_) && this->ok_;
        });
      }
    }
    this->settle();
  }

 private:
  // One staged box of a half-tile to every rank in `dests`. The leader only; the caller commits.
  __device__ __forceinline__ void send_box(uint32_t dests, const Tile& t, const uint8_t* buf, int32_t col0) const {
    for (uint32_t d = dests; d != 0; d &= d - 1) {
      int32_t row = 0;
      const CUtensorMap* map = Hooks::send_map(this->p_.hooks, __ffs(d) - 1, t, this->consumer_, row);
      cta::store_2d(map, buf, col0, row);
    }
  }

  // The defer or send step: this consumer's half-tile, rounded, to every send destination box by box
  // (the two staging buffers alternating), then recorded as pending (published with
  // Hooks::settle_block, or later).
  __device__ __forceinline__ void send_tile(const float (&acc)[Cfg::kTileN / 2], const Tile& t, bool keep_own) {
    const auto& p = this->p_;
    if (t.m0 + this->consumer_ * Cfg::kConsumerRows >= p.problem.m) return;  // uniform over the warpgroup
    const uint32_t barrier_id = 1 + this->consumer_;
    this->settle();
    const uint32_t dests = Hooks::send_dests(p.hooks, t, keep_own);
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box) {
      const int32_t col0 = t.n0 + box * Cfg::kOutBoxCols;
      if (col0 >= p.tail.tma_cols) break;
      uint8_t* buf = this->s_.out_box(this->consumer_, this->staged_ & 1u);
      gemm::stage_for_store<Cfg>(acc, buf, box, barrier_id, false);
      if (wg::thread() == 0) {
        send_box(dests, t, buf, col0);
        cta::bulk_commit();
      }
      ++this->staged_;
    }
    this->pending_.tile = t;
    this->pending_.valid = true;
  }

  // The leader waits (bounded) until every other rank's partial of the half-tile has landed here,
  // then loads boxes 0 and 1 of source 0 exactly as for a tile whose partials came earlier. With no
  // source (world 1) nothing is loaded: store_tile waits for no load then, so a prefetch would land
  // in the staging buffer after the sum was staged there, and store whatever it read.
  __device__ __forceinline__ bool receive_tile(const Tile& t) const {
    const bool ok = Hooks::wait_exchanged(this->p_.hooks, t, this->consumer_);
    if (Hooks::received_sources(this->p_.hooks, t) > 0) this->prefetch_received(t);
    return ok;
  }

  // Every tile at once (256-wide tiles, one wave), for the CTA's only tile, after both consumers have
  // finished its math: the producer has nothing left to load, so the ring is free, and each consumer
  // stages its whole half-tile for the peers at once (ring boxes 0 .. kOutBoxes - 1 of its share)
  // and lands every box of a peer's partial at once (the next kOutBoxes). Through the two staging
  // buffers, box b + 2 of the receive would wait for box b's store to read its buffer and then for
  // its own load: two more TMA load latencies in the tail (bench/DECISIONS.md, "The one-wave
  // exchange stages in the ring"). Otherwise the steps of send_tile, settle and the receive.
  __device__ __forceinline__ void exchange_at_once(float (&acc)[Cfg::kTileN / 2], const Tile& t) {
    const auto& p = this->p_;
    const auto& s = this->s_;
    const int consumer = this->consumer_;
    const int32_t row0 = t.m0 + consumer * Cfg::kConsumerRows;
    if (row0 >= p.problem.m) return;  // uniform over the warpgroup
    const uint32_t barrier_id = 1 + consumer;
    const bool leader = wg::thread() == 0;
    const auto in_c = [&](int box) { return t.n0 + box * Cfg::kOutBoxCols < p.tail.tma_cols; };
    this->settle();  // (nothing pending: one tile per CTA)

    // Send: every box staged, then stored to every destination; published by settle.
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box)
      if (in_c(box)) gemm::stage_box<Cfg>(acc, s.ring_box(consumer, box), box);
    cta::fence_proxy_async_shared();
    wg::sync(barrier_id);
    if (leader) {
      const uint32_t dests = Hooks::send_dests(p.hooks, t, false);
#pragma unroll
      for (int box = 0; box < Cfg::kOutBoxes; ++box)
        if (in_c(box)) send_box(dests, t, s.ring_box(consumer, box), t.n0 + box * Cfg::kOutBoxCols);
      cta::bulk_commit();
    }
    this->pending_.tile = t;
    this->pending_.valid = true;
    this->settle();

    // Receive: each source's boxes land together in the second half of the share, then are added.
    bool ok = !leader || Hooks::wait_exchanged(p.hooks, t, consumer);
    if (leader) cta::fence_proxy_async_global();  // other agents' writes, acquired, before TMA reads them
    uint64_t* bar = s.epilogue_barrier(consumer * 2);
    const int sources = Hooks::received_sources(p.hooks, t);
    int boxes = 0;
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box) boxes += in_c(box) ? 1 : 0;
    for (int source = 0; source < sources; ++source) {
      if (source > 0) {
        // Every thread's reads of the previous source are done before TMA overwrites the boxes.
        cta::fence_proxy_async_shared();
        wg::sync(barrier_id);
      }
      if (leader) {
        cta::mbarrier_arrive_expect_tx(bar, uint32_t(boxes * Hooks::received_box_rows(p.hooks)) * 128u);
#pragma unroll
        for (int box = 0; box < Cfg::kOutBoxes; ++box) {
          if (!in_c(box)) break;
          int32_t row = 0;
          const CUtensorMap* map = Hooks::received_box(p.hooks, t, consumer, source, row);
          cta::load_2d(s.ring_box(consumer, Cfg::kOutBoxes + box), map, bar, t.n0 + box * Cfg::kOutBoxCols, row);
        }
      }
      ok = cta::mbarrier_wait(bar, this->phases_ & 1u) && ok;
      this->phases_ ^= 1u;
#pragma unroll
      for (int box = 0; box < Cfg::kOutBoxes; ++box)
        if (in_c(box)) gemm::add_box<Cfg>(acc, s.ring_box(consumer, Cfg::kOutBoxes + box), box);
    }

    // The sum, staged in place (each thread overwrites exactly the words it read), into this rank's out.
    const Route route = Hooks::route(p.hooks, t);
    if (leader) ok = Hooks::before_routed_stores(p.hooks, this->hook_state_, t, route, consumer) && ok;
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box)
      if (in_c(box)) gemm::stage_box<Cfg>(acc, s.ring_box(consumer, Cfg::kOutBoxes + box), box);
    cta::fence_proxy_async_shared();
    wg::sync(barrier_id);
    if (leader) {
#pragma unroll
      for (int box = 0; box < Cfg::kOutBoxes; ++box)
        if (in_c(box))
          store_routed_box<Hooks>(p.hooks, route, s.ring_box(consumer, Cfg::kOutBoxes + box), t.n0 + box * Cfg::kOutBoxCols,
                                  row0 - route.row_offset);
      cta::bulk_commit();
    }
    this->ok_ = ok && this->ok_;
  }

  Tile last_{};
  bool any_tile_ = false;
};

}  // namespace weft::fused
