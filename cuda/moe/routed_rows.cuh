// routed_rows.cuh — the epilogue policy of the down-projection + combine (gemm_combine.cu): every row
// of a tile goes to its own destination, the returned-row slot (token x topk + k slot) of its source
// rank's combine workspace, over NVLink or locally; then, per (source, 16-token block), an arrival
// counter that the source's reduction waits on (combine.cu).
//
// Per consumer half-tile (64 rows of one group, row_end bounding them):
//   1. the first time: the leader waits (bounded, abortable: the plan's abort word and the host's,
//      peer.cuh) until every rank has started this launch (ready[q] >= epoch in this rank's combine
//      workspace, which rank q raises at its kernel start: its reduction of the launch before has
//      read its slots, stream order);
//   2. box by box (64 columns): the accumulators are staged (gemm::stage_for_store, one of the
//      consumer's two swizzled buffers) and every thread copies 16-byte chunks of its 4 rows (rows
//      t / 8 + 16 i, chunk t % 8) to the rows' destinations with st.global: 128 threads x 16 B per
//      row-chunk, a row's 128 bytes from 8 neighbouring threads. No TMA store reads the buffers, so
//      they are free again after the next box's barrier (both threads' reads of box b precede the
//      barrier that stages box b + 1, and buffer b % 2 is restaged only at box b + 2);
//   3. the half-tile's counters are raised later, at the consumer's next epilogue (or its finish):
//      after the named barrier that follows every thread's stores, the lanes of warps 0 and 1
//      (one row each) add 1 per row to counter (source, token / 16) of the row's source, grouped by
//      key, with red.release.sys (peer.cuh, warp_arrive: cumulative over the stores the barrier
//      ordered before it). A tile's math lies between the stores and the release, so the fence in
//      it finds them complete instead of waiting for them.
// A row is complete at its source once all tiles_n column tiles have been counted: the reduction
// waits for tokens x topk x tiles_n per block and launch (combine.cu, CombineArgs::pieces).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "gemm/epilogue.cuh"
#include "moe/grouped.cuh"
#include "moe/moe.h"
#include "moe/peer.cuh"

namespace weft::moe {

template <class Cfg, class Hooks>
class RoutedRowsEpilogue : public gemm::OneKindEpilogue<Cfg, typename Hooks::State, GroupTile> {
  using Base = gemm::OneKindEpilogue<Cfg, typename Hooks::State, GroupTile>;
  using Base::consumer_, Base::p_, Base::s_, Base::staged_;

 public:
  using Base::Base;

  template <int Kind, class Scheduler>
  __device__ __forceinline__ void store(float (&acc)[Cfg::kTileN / 2], const GroupTile& t, const Scheduler&) {
    const RoutedRows& r = p_.hooks.routed;
    const int32_t row0 = t.m0 + consumer_ * Cfg::kConsumerRows;
    const int32_t rows = min(t.row_end - row0, int32_t(Cfg::kConsumerRows));
    if (rows <= 0) return;  // the next group's rows (uniform over the warpgroup)
    const uint32_t barrier_id = 1 + consumer_;
    settle(barrier_id);
    if (!ready_) await_ready(barrier_id);
    if (!ok_) return;  // a rank never started: store nothing (the launch reports the wait)
    // This thread's rows t / 8 + 16 i and their destinations (nullptr: past the group, or padding).
    const int th = wg::thread();
    char* dst[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = th / 8 + 16 * i;
      dst[i] = nullptr;
      if (row < rows) {
        const int4 src = r.row_source[row0 + row];
        if (src.x >= 0 && src.x < r.world)
          dst[i] = r.peers[src.x] + r.ws_offset + r.returned + (uint64_t(src.y) * r.topk + src.z) * uint64_t(r.hidden) * 2;
      }
    }
    const int chunk = th % 8;
#pragma unroll
    for (int box = 0; box < Cfg::kOutBoxes; ++box) {
      const int32_t col0 = t.n0 + box * 64;
      if (col0 >= r.hidden) break;
      uint8_t* buf = s_.out_box(consumer_, staged_ & 1u);
      gemm::stage_for_store<Cfg>(acc, buf, box, barrier_id, true);
      const int32_t col = col0 + chunk * 8;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = th / 8 + 16 * i;
        if (dst[i] != nullptr && col < r.hidden) {
          const uint4 v = *reinterpret_cast<const uint4*>(buf + row * 128 + ((chunk ^ (row % 8)) * 16));
          mem::st16(dst[i] + uint64_t(col) * 2, v);
        }
      }
      ++staged_;
    }
    pending_.tile = t;
    pending_.valid = true;
  }

  __device__ __forceinline__ void finish(float (&)[Cfg::kTileN / 2]) { settle(1 + consumer_); }
  __device__ __forceinline__ bool ok() const { return ok_; }

 private:
  // Step 1 (moe.h, the combine's ready words): the leader waits for every rank, then the warpgroup.
  __device__ void await_ready(uint32_t barrier_id) {
    const RoutedRows& r = p_.hooks.routed;
    if (wg::thread() == 0) {
      epoch_ = *reinterpret_cast<const volatile uint64_t*>(r.peers[r.rank] + r.ws_offset + r.epoch) + 1;
      const char* me = r.peers[r.rank] + r.ws_offset;
      const uint64_t* abort_word = reinterpret_cast<const uint64_t*>(me + r.abort);
      for (int q = 0; q < r.world && ok_; ++q) {
        const Waited w = wait_at_least(reinterpret_cast<const uint64_t*>(me + r.ready) + q, epoch_, abort_word, epoch_,
                                       r.timeout_ns, r.host_abort);
        if (w == Waited::kOk) continue;
        ok_ = false;
        const WaitFailure why = failure_of(w, q, r.host_abort);
        cta::fail(Completion{r.failure.done, 0, r.failure.arrivals}, why.code, reason_bits(why, WEFT_MOE_STAGE_READY));
        if (w == Waited::kTimeout) raise_abort(r.peers, r.world, r.ws_offset + r.abort, epoch_);
      }
    }
    ok_ = wg::all(ok_, barrier_id);
    ready_ = true;
  }

  // Step 3 for the pending half-tile: see the contract above.
  __device__ void settle(uint32_t barrier_id) {
    if (!pending_.valid) return;
    pending_.valid = false;
    const RoutedRows& r = p_.hooks.routed;
    wg::sync(barrier_id);  // every thread's stores of the pending half-tile come before the releases
    const int th = wg::thread();
    if (th >= Cfg::kConsumerRows) return;  // warps 0 and 1: one row per lane (uniform per warp)
    const int32_t row = pending_.tile.m0 + consumer_ * Cfg::kConsumerRows + th;
    bool valid = row < pending_.tile.row_end;
    int4 src = make_int4(-1, 0, 0, 0);
    if (valid) src = r.row_source[row];
    valid = valid && src.x >= 0 && src.x < r.world;
    uint64_t* counter = nullptr;
    uint64_t key = 0;
    if (valid) {
      const int block = src.y / kTokenBlock;
      key = (uint64_t(src.x) << 32) | uint32_t(block);
      counter = reinterpret_cast<uint64_t*>(r.peers[src.x] + r.ws_offset + r.arrived) + block;
    }
    // System scope: this epilogue runs with peers only (at world 1 the rows stay in the receive
    // layout, gemm_combine.cu), so some reader of the counter is on another GPU.
    warp_arrive(counter, key, valid);
  }

  uint64_t epoch_ = 0;
  bool ready_ = false;
  bool ok_ = true;
  gemm::PendingSignal<GroupTile> pending_{};
};

}  // namespace weft::moe
