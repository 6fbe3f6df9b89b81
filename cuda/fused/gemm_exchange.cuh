// gemm_exchange.cuh — GEMM + all-reduce at decode sizes (the "exchange" mover): every rank computes
// every tile of its partial product, in the plain GEMM's order, and each consumer's half-tile is
// finished inside its own epilogue (ExchangeEpilogue, exchange_epilogue.cuh):
//
//   send       the half-tile, rounded to bf16, is stored by TMA into every peer's receive region at
//              this rank's slot (rank r writes rows [r * slot_rows, (r + 1) * slot_rows) of the
//              parity half e % 2), then published: exchanged[q][r][half-tile] = epoch in peer q.
//   receive    the leader waits (bounded) for exchanged[me][q][half-tile] >= epoch from every peer,
//              loads their partials box by box into the staging buffers, adds them to its fp32
//              accumulators and stores the sum into its own out (one rounding of the sum, but every
//              partial was rounded once on the way: the same as the copy-engine mover's).
//
// The peer computing the same tile does the same at about the same time. Only a CTA's last tile is
// received that way; its earlier ones are deferred (exchange_epilogue.cuh): sent with the own partial
// also stored into this rank's own slot, published during the next tile's math (settle_block), and
// finished from the slots alone (finish_deferred) while the last tile's sends drain. So with two or
// more waves of tiles (M = 512) the exchange of one wave overlaps the next wave's math, the
// finishing of the deferred tiles overlaps the last wave's traffic, and only that traffic, one flag
// and one local load follow; nothing waits on a whole-kernel handshake: each rank writes only its
// own out.
//
// At m <= 32 (fused.h kRegisterExchangeRows) the register exchange replaces send and receive
// (State::register_rows; its own kernel, RegisterExchangeHooks at the end of this file, whose
// add_received is exchange_in_registers): each warp's fragment goes from the accumulators straight
// into the peers as flagged words (primitives/flagged.cuh, NCCL's LL format), and the peers' are
// polled and added in registers; no staging, fence or flag round trip. It moves twice the bytes,
// which only pays when they are this few (m = 16: 256 KiB per peer).
//
// With two ranks and exactly two waves (M = 512), the first wave's deferred tiles go to the peer by
// copy engine instead (State::ce_tile_cols, launched by ffi/src/tp/exchange.cpp): SM-issued NVLink
// stores slowed the second wave's math on the sending GPU by ~8 us, the receiving GPU's by <= 1 us
// (bench/DECISIONS.md, "The first wave of a two-wave exchange goes by copy engine (two ranks)").
// Those tiles' own partials wait in out, where the copy engine reads them and the
// finish adds the peer's in place (add_copied).
//
// Reuse across launches: receive slots alternate by epoch parity. Rank q writes my slot e % 2 in
// launch e only after its launch e - 1 finished, which waited for my partials of e - 1, sent by my
// launch e - 1 after my launch e - 2 (the last reader of slot e % 2, own slot included) had finished.
// Flags are epochs.
//
// Layout (ffi/src/tp/exchange.cpp): recv [2][world][slot_rows][n] bf16 (slot_rows = m rounded up to
// whole 128-row tiles, so that a tile's boxes never reach into the next rank's slot; rows past m
// hold whatever the rows of A's stage past m computed and are never stored to out); State::recv
// points at this launch's parity half; stored (the flags) [world][tiles_m * 2][tiles_n].
#pragma once

#include "fused/exchange_epilogue.cuh"
#include "fused/abort.cuh"
#include "fused/fused.h"
#include "fused/gemm_scatter.cuh"
#include "primitives/flagged.cuh"
#include "primitives/global_add.cuh"
#include "fused/launch.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

struct ExchangeHooks : RoutedHooks {
  using State = ScatterState;
  template <class Cfg, class H>
  using Epilogue = ExchangeEpilogue<Cfg, H>;
  static constexpr bool kAddsReceived = true;
  // Every exchanged half-tile's flags go out as a pending signal (after_tile_stored, below).
  static constexpr gemm::SignalScope kSignal = gemm::SignalScope::kSystem;

  static __device__ __forceinline__ int64_t half_tiles(const State& s) { return int64_t(s.tiles_m) * 2 * s.tiles_n; }
  static __device__ __forceinline__ int64_t half_tile(const State& s, const gemm::TileCoord& t, int consumer) {
    return (int64_t(t.tile_m) * 2 + consumer) * s.tiles_n + t.tile_n;
  }
  static __device__ __forceinline__ int32_t slot_row(const State& s, int32_t q, const gemm::TileCoord& t, int consumer) {
    return s.recv_row0 + q * s.slot_rows + t.m0 + consumer * (gemm::kTileM / 2);
  }
  static __device__ __forceinline__ sys::WaitBudget budget(const State& s) {
    return fused::budget(s.timeout_ns, s.abort, s.rank, s.epoch);
  }
  // After the report, the first wave's side streams are released (they wait on ce_ready).
  static __device__ void on_wait_failed(const State& s, const Completion& c, uint32_t stage) {
    report_wait_failure(s.abort, s.rank, s.world, s.epoch, c, stage);
    if (s.ce_tile_cols) atomicMax(reinterpret_cast<unsigned long long*>(s.ce_ready), s.epoch);
  }
  // Waits (bounded) until word(q) >= epoch for every peer q; false if one ran out.
  template <class Word>
  static __device__ __forceinline__ bool wait_every_peer(const State& s, Word word) {
    bool ok = true;
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) ok = ok && sys::wait_at_least(word(q), s.epoch, budget(s)) == sys::WaitResult::kOk;
    return ok;
  }

  // The sum goes to this rank's out only.
  static __device__ __forceinline__ Route route(const State&, const gemm::TileCoord&) { return Route{1u, 0, false, false}; }
  static __device__ __forceinline__ const CUtensorMap* out_map(const State& s, int) { return &s.out[s.rank]; }

  // A deferred tile the copy engines carry (State::ce_tile_cols).
  static __device__ __forceinline__ bool by_copy_engine(const State& s, const gemm::TileCoord& t) {
    return t.tile_n < s.ce_tile_cols;
  }
  // Send destination q: rank q's receive region as mapped here; q = this rank (keep_own) is the own
  // slot of the own region, which holds a deferred tile's own partial until it is finished. A copy
  // engines' tile goes to this rank only, into its out (send_map), where the copy engine reads it
  // and the peer's partial is added to it in place (finish_deferred).
  static __device__ __forceinline__ uint32_t send_dests(const State& s, const gemm::TileCoord& t, bool keep_own) {
    if (keep_own && by_copy_engine(s, t)) return 1u << s.rank;
    return ((1u << s.world) - 1u) & ~(keep_own ? 0u : 1u << s.rank);
  }
  // 256-wide tiles: every tile is exchanged at once (the planner gives them one wave only, one tile
  // per CTA), by ExchangeEpilogue::exchange_at_once, which stages the sends and lands the peers'
  // partials in the ring once the math is done; the deferral is compiled out, since at this width it
  // spills (as the register exchange would: its kernel is never built at 256).
  template <class Cfg>
  static constexpr bool kAtOnce = Cfg::kTileN == 256;
  // A deferred tile's flags go out halfway through the next tile's math, by when its stores have
  // long drained (a wave's 4 MiB at M = 512 takes ~11 us of a ~30 us tile), and not at the next
  // epilogue: there they would queue on NVLink behind the last wave's sends, and the peers' second
  // pass waited ~8 us for them ("A two-wave exchange defers its first wave and finishes it while the
  // last tile's sends drain").
  static __device__ __forceinline__ bool settle_with_math(const State&, const gemm::TileCoord&) { return true; }
  static __device__ __forceinline__ int32_t settle_block(const State& s, int32_t k_blocks) {
    // With the first wave by copy engine every deferred tile is one of it (State::ce_tile_cols): it
    // went to the own out only, its local stores are complete early, and the copies start when the
    // last one is counted.
    return s.ce_tile_cols != 0 ? k_blocks / 8 : k_blocks / 2;
  }

  static __device__ __forceinline__ const CUtensorMap* send_map(const State& s, int q, const gemm::TileCoord& t,
                                                                int consumer, int32_t& row) {
    if (q == s.rank && by_copy_engine(s, t)) {
      row = t.m0 + consumer * (gemm::kTileM / 2);
      return &s.out[s.rank];
    }
    row = slot_row(s, s.rank, t, consumer);
    return &s.send[q];
  }
  // gemm::settle has completed this half-tile's stores and fenced them for system scope right
  // before, so relaxed flag stores complete the release.
  static __device__ __forceinline__ void after_tile_stored(const State& s, const gemm::TileCoord& t, int consumer) {
    if (by_copy_engine(s, t)) {
      count_for_copy(s);
      return;
    }
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) sys::signal_store_fenced(s.stored[q] + s.rank * half_tiles(s) + half_tile(s, t, consumer), s.epoch);
  }
  // One more deferred half-tile is in the own slot (its stores complete, fenced). One counter per
  // epoch parity, zeroed by the previous launch's start (on_kernel_start), so a launch that failed
  // part-way leaves nothing behind; plain atomic adds (a compare-and-swap loop over one word
  // serialised the grid's 248 half-tiles at M = 512: the second wave took 60 us longer).
  static __device__ __forceinline__ void count_for_copy(const State& s) {
    const uint64_t before = sys::device_signal_fetch_add(s.ce_count + (s.epoch & 1), 1);
    if (before + 1 == uint64_t(s.ce_expected)) {
      sys::device_signal_store(s.ce_ready, s.epoch);  // the add acquired the others' releases
    }
  }
  static __device__ __forceinline__ void on_kernel_start(const State& s) {
    if (s.ce_tile_cols != 0 && blockIdx.x == 0) s.ce_count[(s.epoch + 1) & 1] = 0;  // next launch's counter
  }
  static __device__ __forceinline__ bool wait_exchanged(const State& s, const gemm::TileCoord& t, int consumer) {
    return wait_every_peer(s, [&](int32_t q) { return s.stored[s.rank] + q * half_tiles(s) + half_tile(s, t, consumer); });
  }

  // Source j is the j-th rank other than this one; its partial sits in its slot of my region.
  static __device__ __forceinline__ int received_sources(const State& s, const gemm::TileCoord&) { return s.world - 1; }
  static __device__ __forceinline__ const CUtensorMap* received_box(const State& s, const gemm::TileCoord& t,
                                                                    int consumer, int source, int32_t& row) {
    row = slot_row(s, source < s.rank ? source : source + 1, t, consumer);
    return &s.recv_map;
  }
  static __device__ __forceinline__ int32_t received_box_rows(const State& s) { return s.box_rows; }

  // A deferred half-tile, once the CTA's last tile is sent: the sends still hold the staging buffers
  // and the bulk groups, so the warpgroup sums with plain 16-byte loads (L2: .cg, the data came from
  // other agents) and stores, in 8-column chunks (n % 8 == 0: the planner's rule for fused paths).
  // The partials are added in rank order, the own one (this rank's slot) included, so every rank
  // rounds the same sum. The own partial was completed and fenced by gemm::settle during the next
  // tile's math (settle_block), in this warpgroup's leader, before the barrier below.
  static __device__ __forceinline__ bool finish_deferred(const State& s, const gemm::TileCoord& t, int consumer,
                                                         int32_t rows, int32_t cols, uint32_t barrier_id) {
    const int32_t row0 = t.m0 + consumer * (gemm::kTileM / 2);
    const int32_t chunks = cols / 8;
    const int32_t total = rows * chunks;
    if (by_copy_engine(s, t)) return add_copied(s, t.n0, row0, chunks, total, barrier_id);
    const bool ok = wg::thread() != 0 || wait_exchanged(s, t, consumer);
    wg::sync(barrier_id);  // the leader acquired every peer's flag before anyone reads their rows
    // A thread's chunks (8 of a 64 x 128 half-tile) from two sources at a time are in flight
    // together: one round trip for two ranks, not four.
    constexpr int kBatch = 8;
    const auto add = [](float (&sum)[8], const uint4& v) {
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sum[2 * j] += __uint_as_float(w[j] << 16);
        sum[2 * j + 1] += __uint_as_float(w[j] & 0xffff0000u);
      }
    };
    for (int32_t i0 = wg::thread(); i0 < total; i0 += kBatch * wg::kThreads) {
      float sum[kBatch][8] = {};
      for (int32_t q = 0; q < s.world; q += 2) {
        const uint16_t* slot0 = s.recv + (int64_t(q) * s.slot_rows + row0) * s.ld + t.n0;
        const uint16_t* slot1 = slot0 + int64_t(s.slot_rows) * s.ld;
        const bool pair = q + 1 < s.world;
        uint4 v0[kBatch], v1[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int32_t i = i0 + b * wg::kThreads;
          const int64_t at = int64_t(i / chunks) * s.ld + (i % chunks) * 8;
          v0[b] = i < total ? __ldcg(reinterpret_cast<const uint4*>(slot0 + at)) : make_uint4(0, 0, 0, 0);
          v1[b] = i < total && pair ? __ldcg(reinterpret_cast<const uint4*>(slot1 + at)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          add(sum[b], v0[b]);
          add(sum[b], v1[b]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int32_t i = i0 + b * wg::kThreads;
        if (i >= total) break;
        const uint4 out = {gemm::pack_bf16x2(sum[b][0], sum[b][1]), gemm::pack_bf16x2(sum[b][2], sum[b][3]),
                           gemm::pack_bf16x2(sum[b][4], sum[b][5]), gemm::pack_bf16x2(sum[b][6], sum[b][7])};
        *reinterpret_cast<uint4*>(s.own_out + (int64_t(row0) + i / chunks) * s.ld + t.n0 + (i % chunks) * 8) = out;
      }
    }
    return ok;
  }

  // The register exchange (register_rows > 0, decode at m <= 32): the TMA
  // exchange's tail at m = 16 was the stores' completion, a system fence, the flag's trip and a
  // load (~4.5 us over a ~24 us kernel); here each warp whose 16 rows hold any row below m stores its
  // fragment of the partial, bf16, as flagged words into every peer's slot for this rank, then polls
  // its own slots for the same words from every peer and adds them, peers in rank order, to its own
  // fp32 partial (as the TMA exchange's receive does).
  template <class Cfg>
  static __device__ bool exchange_in_registers(const State& s, const gemm::TileCoord& t, int consumer,
                                               float (&acc)[Cfg::kTileN / 2]) {
    constexpr int kWords = Cfg::kTileN / 8;  // one per 8-column group n8: rows lo and lo + 8, 2 columns each
    const int th = wg::thread();
    const int32_t row = t.m0 + consumer * Cfg::kConsumerRows + (th / 32) * 16;  // this warp's first row
    bool ok = true;
    if (row < s.register_rows) {  // uniform over the warp
      const uint32_t flag = sys::flag_of(s.epoch);
      // Byte offset of word 0 of this lane in a source's slot (fused.h, register_exchange_bytes).
      const int64_t at = ((int64_t(row / 16) * s.tiles_n + t.tile_n) * kWords) * 512 + (th % 32) * 16;
      const int64_t slot_bytes = int64_t(s.slot_rows) * s.ld * 2;
      const int64_t half = int64_t(s.recv_row0) * s.ld * 2;  // this launch's parity half
      for (int32_t q = 0; q < s.world; ++q) {
        if (q == s.rank) continue;
        uint8_t* dst = s.region[q] + half + s.rank * slot_bytes + at;
#pragma unroll
        for (int j = 0; j < kWords; ++j)
          sys::store_flagged(dst + j * 512, gemm::pack_bf16x2(acc[4 * j], acc[4 * j + 1]),
                             gemm::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]), flag);
      }
      const uint64_t limit = budget(s).timeout_ns ? budget(s).timeout_ns : sys::kDefaultTimeoutNs;
      for (int32_t q = 0; q < s.world && ok; ++q) {
        if (q == s.rank) continue;
        const uint8_t* src = reinterpret_cast<const uint8_t*>(s.recv) + q * slot_bytes + at;
        // Eight words in flight at once (one round trip per poll, not eight; more would spill at
        // TileN = 128).
        constexpr int kBatch = kWords < 8 ? kWords : 8;
#pragma unroll
        for (int j0 = 0; j0 < kWords; j0 += kBatch) {
          uint4 w[kBatch];
          uint64_t start = 0;
          for (uint32_t spins = 0; ok; ++spins) {
            bool ready = true;
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
              w[j] = sys::load_flagged(src + (j0 + j) * 512);
              ready = ready && sys::flagged_ready(w[j], flag);
            }
            if (ready) break;
            if (spins == 0) start = sys::globaltimer_ns();
            else if ((spins & 15) == 0 && (sys::globaltimer_ns() - start > limit || sys::aborted(budget(s)))) ok = false;
          }
          if (!ok) break;
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            float* a = acc + 4 * (j0 + j);
            a[0] += __uint_as_float(w[j].x << 16);
            a[1] += __uint_as_float(w[j].x & 0xffff0000u);
            a[2] += __uint_as_float(w[j].z << 16);
            a[3] += __uint_as_float(w[j].z & 0xffff0000u);
          }
        }
      }
    }
    // The engine reports a failed wait from the leader only.
    return wg::all(ok, 1 + consumer);
  }

  // A copy engines' half-tile (two ranks: State::ce_tile_cols): the own partial is in out since the
  // first wave's epilogue (settled before the last tile, so complete and fenced before the barrier
  // below), the peer's has landed in its slot here (wait_copied), and this rank's copy engine has
  // read out (wait_own_copies). One load and one add at L2 per 16 bytes, half the traffic of
  // summing both slots into out (the ~3.5 us that finishing deferred tiles added to the tail at
  // M = 512). own + peer is one rounding of a commutative sum, so both ranks
  // store the same value.
  static __device__ __forceinline__ bool add_copied(const State& s, int32_t n0, int32_t row0, int32_t chunks,
                                                    int32_t total, uint32_t barrier_id) {
    const bool ok = wg::thread() != 0 || (wait_copied(s) && wait_own_copies(s));
    wg::sync(barrier_id);
    const int32_t peer = 1 - s.rank;
    const uint16_t* slot = s.recv + (int64_t(peer) * s.slot_rows + row0) * s.ld + n0;
    uint16_t* out = s.own_out + int64_t(row0) * s.ld + n0;
    constexpr int kBatch = 8;
    for (int32_t i0 = wg::thread(); i0 < total; i0 += kBatch * wg::kThreads) {
      uint4 v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int32_t i = i0 + b * wg::kThreads;
        v[b] = i < total ? __ldcg(reinterpret_cast<const uint4*>(slot + int64_t(i / chunks) * s.ld + (i % chunks) * 8))
                         : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int32_t i = i0 + b * wg::kThreads;
        if (i < total) gpu::add_bf16x8(out + int64_t(i / chunks) * s.ld + (i % chunks) * 8, v[b]);
      }
    }
    return ok;
  }
  // This rank's copy engines are done reading its first wave from out (ce_sent in this rank's memory).
  static __device__ __forceinline__ bool wait_own_copies(const State& s) {
    return wait_every_peer(s, [&](int32_t q) { return s.ce_sent[s.rank] + q; });
  }
  // Every peer's copy of its first wave into my region has landed (ce_sent in the peer's memory).
  static __device__ __forceinline__ bool wait_copied(const State& s) {
    return wait_every_peer(s, [&](int32_t q) { return s.ce_sent[q] + s.rank; });
  }
  // The kernel ends only after this rank's own copies have landed (the peers' next launch rewrites
  // its slots here): one CTA waits.
  static __device__ __forceinline__ bool before_finish(const State& s) {
    if (blockIdx.x != 0) return true;
    if (s.world > 1 && peer_gave_up(s.abort, s.rank, s.epoch)) return false;
    return s.ce_tile_cols == 0 || wait_own_copies(s);
  }
};

// The register exchange's kernel (register_rows > 0): the engine's plain epilogue with the exchange
// as the hook that adds what other ranks contributed (add_received), none of the TMA exchange's steps
// compiled in. As a step of ExchangeHooks' kernel it cost ~4 us more at M = 16 with the exchange
// itself left out (27.2 against 23.3 us; ncu: the same B streamed at 38% of DRAM bandwidth against
// 47%), though the TMA exchange's steps never ran there (bench/DECISIONS.md, "The register exchange
// (m ≤ 32) is its own kernel").
struct RegisterExchangeHooks : ExchangeHooks {
  template <class Cfg, class H>
  using Epilogue = RoutedEpilogue<Cfg, H>;
  static constexpr bool kAddsReceived = true;
  static constexpr gemm::SignalScope kSignal = gemm::SignalScope::kNone;
  static __device__ __forceinline__ int received_sources(const State&, const gemm::TileCoord&) { return 0; }
  template <class Cfg>
  static __device__ bool add_received(const State& s, const gemm::TileCoord& t, int consumer, float (&acc)[Cfg::kTileN / 2]) {
    return exchange_in_registers<Cfg>(s, t, consumer, acc);
  }
};

}  // namespace weft::fused
