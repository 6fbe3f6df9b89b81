// gemm_exchange.cuh — GEMM + all-reduce at decode sizes (the "exchange" mover): every rank computes
// every tile of its partial product, in the plain GEMM's order, and each consumer's half-tile is
// finished inside its own epilogue (gemm::exchange_tile):
//
//   send       the half-tile, rounded to bf16, is stored by TMA into every peer's receive region at
//              this rank's slot (rank r writes rows [r * slot_rows, (r + 1) * slot_rows) of the
//              parity half e % 2), then published: exchanged[q][r][half-tile] = epoch in peer q.
//   receive    the leader waits (bounded) for exchanged[me][q][half-tile] >= epoch from every peer,
//              loads their partials box by box into the staging buffers, adds them to its fp32
//              accumulators and stores the sum into its own out (one rounding of the sum, but every
//              partial was rounded once on the way: the same as the copy-engine mover's).
//
// The peer computing the same tile does the same at about the same time, so with one wave of tiles
// (decode: M = 16 .. 512) the exchange costs one NVLink store of a tile, one flag and one local load
// after the math, and nothing waits on a whole-kernel handshake: each rank writes only its own out.
//
// Reuse across launches: receive slots alternate by epoch parity. Rank q writes my slot e % 2 in
// launch e only after its launch e - 1 finished, which waited for my partials of e - 1, sent by my
// launch e - 1 after my launch e - 2 (the last reader of slot e % 2) had finished. Flags are epochs.
//
// Layout (ffi/src/tp/choice.cpp): recv [2][world][slot_rows][n] bf16 (slot_rows = m rounded up to
// whole 128-row tiles, so that a tile's boxes never reach into the next rank's slot; rows past m
// hold the zero rows of A's out-of-bounds fill and are never stored to out); stored (the flags)
// [world][tiles_m * 2][tiles_n].
#pragma once

#include "fused/fused.h"
#include "fused/gemm_scatter.cuh"
#include "fused/launch.cuh"
#include "gemm/kernel.cuh"

namespace weft::fused {

struct ExchangeHooks : gemm::DefaultHooks {
  using State = ScatterState;
  static constexpr bool kRouted = true;
  static constexpr bool kAddsReceived = true;
  static constexpr bool kExchanges = true;

  static __device__ __forceinline__ int64_t half_tiles(const State& s) { return int64_t(s.tiles_m) * 2 * s.tiles_n; }
  static __device__ __forceinline__ int64_t half_tile(const State& s, const gemm::TileCoord& t, int consumer) {
    return (int64_t(t.tile_m) * 2 + consumer) * s.tiles_n + t.tile_n;
  }
  static __device__ __forceinline__ int32_t slot_row(const State& s, int32_t q, const gemm::TileCoord& t, int consumer) {
    return s.recv_row0 + q * s.slot_rows + t.m0 + consumer * (gemm::kTileM / 2);
  }
  static __device__ __forceinline__ sys::WaitBudget budget(const State& s) { return sys::WaitBudget{s.timeout_ns, nullptr}; }

  // The sum goes to this rank's out only.
  static __device__ __forceinline__ gemm::Route route(const State&, const gemm::TileCoord&) {
    return gemm::Route{1u, 0, false, false};
  }
  static __device__ __forceinline__ const CUtensorMap* out_map(const State& s, int) { return &s.out[s.rank]; }

  // Send destination q: rank q's receive region as mapped here.
  static __device__ __forceinline__ uint32_t send_dests(const State& s, const gemm::TileCoord&) {
    return ((1u << s.world) - 1u) & ~(1u << s.rank);
  }
  static __device__ __forceinline__ const CUtensorMap* send_map(const State& s, int q, const gemm::TileCoord& t,
                                                                int consumer, int32_t& row) {
    row = slot_row(s, s.rank, t, consumer);
    return &s.send[q];
  }
  // The stores above are complete and fenced for system scope (exchange_tile): publish them.
  static __device__ __forceinline__ void after_tile_sent(const State& s, const gemm::TileCoord& t, int consumer) {
    for (int32_t q = 0; q < s.world; ++q)
      if (q != s.rank) sys::signal_store(s.stored[q] + s.rank * half_tiles(s) + half_tile(s, t, consumer), s.epoch);
  }
  static __device__ __forceinline__ bool wait_exchanged(const State& s, const gemm::TileCoord& t, int consumer) {
    bool ok = true;
    for (int32_t q = 0; q < s.world; ++q) {
      if (q == s.rank) continue;
      const uint64_t* flag = s.stored[s.rank] + q * half_tiles(s) + half_tile(s, t, consumer);
      ok = ok && sys::wait_at_least(flag, s.epoch, budget(s)) == sys::WaitResult::kOk;
    }
    return ok;
  }

  // Source j is the j-th rank other than this one; its partial sits in its slot of my region.
  static __device__ __forceinline__ int received_sources(const State& s, const gemm::TileCoord&) { return s.world - 1; }
  static __device__ __forceinline__ const CUtensorMap* received_box(const State& s, const gemm::TileCoord& t,
                                                                    int consumer, int source, int32_t& row) {
    row = slot_row(s, source < s.rank ? source : source + 1, t, consumer);
    return &s.recv_map;
  }
};

}  // namespace weft::fused
