// exchange.cpp — the exchange mover of the decode all-reduce (gemm_exchange.cuh): the GEMM in its
// plain order, then each tile's partial stored into the peers and theirs added, tile by tile. Its
// cost, its workspace, its part of the launch state (the register exchange, the first wave by copy
// engine) and that wave's copies.
//
// Workspace: exchanged u64 [world][tiles_m * 2][tiles_n] (the half-tile flags), recv
// [2 parities][world][slot_rows][n] bf16, counts u64 [2] (the first wave's count), ready u64 (first
// wave stored), progress u64 [world] (first wave sent).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

namespace {

// "auto" takes it at decode sizes (at most exchange_max_tile_rows tile rows, one or two waves),
// where the owner scheme's four steps after the math cost 21 of 47.5 us at M = 128 and 37 of 93 at
// M = 512 ("The decode all-reduce exchanges partial tiles, with no owner") and the CTA mover's
// estimate does not see them; the tile width is the one that minimises this estimate. All of the
// traffic counts, not only the last wave's: with two waves the first wave's exchange, deferred
// behind the second wave's math, still measured as if it followed the math (M = 512: 89.7 us
// against our GEMM's 55.0).
Estimate cost(const Call& call, Choice& c) {
  Estimate e = scatter_config(call, c, call.place.sm_count);
  if (!e.available) return e;
  const Problem& p = call.problem;
  const WeftTpParams& params = call.params;
  const int sms = call.place.sm_count;
  const bool forced = params.mover == WEFT_TP_MOVER_EXCHANGE;
  const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
  const double out = double(p.m) * p.n * 2;
  double best_us = 0;
  int best_tile = 0, best_ctas = 0;
  for (int tile : {256, 128, 64}) {
    if (params.tile_n && tile != params.tile_n) continue;
    const int64_t tiles = tiles_m * ceil_div(p.n, tile);
    // 256 wide: one wave only (ExchangeHooks::kAtOnce). "auto" takes it whenever that wave fills
    // at least 7/8 of the SMs (M = 512: 128 tiles on 132), where it measured 77.5-80.0 us against
    // 84.9 for two waves of 128-wide tiles ("One wave of 256-wide exchange tiles when it fills
    // 7/8 of the SMs"), which this estimate does not see.
    if (tile == 256 && (tiles > sms || (params.tile_n != 256 && tiles * 8 < int64_t(sms) * 7))) continue;
    const int ctas = int(std::min<int64_t>(tiles, sms));
    const int64_t tile_waves = ceil_div(tiles, ctas);
    if (!forced && tile_waves > 2) continue;  // auto: decode shapes only
    const double us = gemm_us(p.m, p.n, p.k, tile, ctas) +
                      transfer_us(double(p.world - 1) * out, kMachine.nvlink_gbs) + kMachine.exchange_sync_us;
    if (best_tile == 0 || us < best_us || tile == 256) {
      best_us = us;
      best_tile = tile;
      best_ctas = ctas;
    }
    if (tile == 256) break;
  }
  if (best_tile == 0) return Estimate::unavailable("the exchange runs at most two waves of tiles under auto");
  c.tile_n = best_tile;
  c.gemm_ctas = best_ctas;
  c.group_m = params.group_m ? params.group_m : 4;
  e = Estimate::of(best_us);
  if (tiles_m > kMachine.exchange_max_tile_rows) {
    e.auto_ok = false;
    e.reason = format("auto exchanges at most %lld tile rows", static_cast<long long>(kMachine.exchange_max_tile_rows));
  }
  return e;
}

void layout(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  const int W = p.world;
  Layout& l = c.layout;
  const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
  add(l, l.stored, uint64_t(W) * tiles_m * 2 * ceil_div(p.n, c.tile_n) * 8);  // exchanged[W][half-tiles]
  add(l, l.recv, 2ull * W * tiles_m * gemm::kTileM * p.n * 2);                // [2][W][slot_rows][n]
  add(l, l.counts, 2 * 8);                                                    // first-wave count [2]
  add(l, l.ready, 8);                                                         // first wave stored
  add(l, l.progress, uint64_t(W) * 8);                                        // first wave sent [W]
  add_abort_word(l);
}

// The exchange mover's register exchange (fused::ScatterState::register_rows): m <= 32 rows, where
// its flagged words (twice the bytes of the partials) fit the slot that the TMA exchange would use.
void set_register_exchange(const WeftTpPlan& plan, fused::ScatterState& s) {
  const tp::Problem& p = plan.problem;
  const uint64_t slot_bytes = uint64_t(s.slot_rows) * uint64_t(p.n) * 2;
  if (p.m > fused::kRegisterExchangeRows || plan.choice.tile_n == 256 ||
      fused::register_exchange_bytes(p.m, s.tiles_n, plan.choice.tile_n) > slot_bytes)
    return;
  s.register_rows = int32_t(p.m);
  for (int q = 0; q < p.world; ++q)
    s.region[q] = reinterpret_cast<uint8_t*>(on_rank(*plan.comm, q, plan.workspace + plan.choice.layout.recv.offset));
}

// The exchange mover's first wave by copy engine (fused::ScatterState::ce_tile_cols): only with
// two ranks (the peer's partial is added into out in place, and a sum of two terms rounds the same
// on both) and exactly two waves of tiles in one band whose first wave's deferred tiles
// (GroupedScheduler order: tile i at tile row i % tiles_m, column i / tiles_m; CTA c computes tiles c
// and c + ctas) fill whole tile columns, so one rectangle of out holds them and no later tile's
// stores land in it.
void set_copied_first_wave(WeftTpPlan& plan, fused::ScatterState& s) {
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const int64_t tiles = int64_t(s.tiles_m) * s.tiles_n;
  const int64_t deferred = tiles - ch.gemm_ctas;
  // Not where the ranks share a GPU: that copy would run on SMs the kernels hold (copy_engine.cpp).
  if (p.world != 2 || s.register_rows > 0 || plan.place.shares_device ||
      deferred <= 0 || tiles > 2ll * ch.gemm_ctas || s.tiles_m > ch.group_m || deferred % s.tiles_m != 0)
    return;
  s.ce_tile_cols = int32_t(deferred / s.tiles_m);
  int32_t halves = 0;  // per tile column: the half-tiles with rows below m
  for (int32_t h = 0; h < 2 * s.tiles_m; ++h) halves += int64_t(h) * (gemm::kTileM / 2) < p.m ? 1 : 0;
  s.ce_expected = halves * s.ce_tile_cols;
  char* ws = plan.workspace;
  s.ce_count = reinterpret_cast<uint64_t*>(ws + ch.layout.counts.offset);
  s.ce_ready = reinterpret_cast<uint64_t*>(ws + ch.layout.ready.offset);
  for (int q = 0; q < p.world; ++q)
    s.ce_sent[q] = reinterpret_cast<const uint64_t*>(on_rank(*plan.comm, q, ws + ch.layout.progress.offset));
  create_side_streams(plan);
}

// The exchange mover's part of the scatter state (gemm_exchange.cuh).
void build_exchange(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  fused::ScatterState& s = plan.scatter.state;
  const gemm::Boxes boxes = gemm::box_dims(tile_of(ch.tile_n), !p.b_nk, false, p.m);
  // Receive regions [2][world][slot_rows][n]: this rank's (where the peers' partials land) and
  // every peer's (where this rank's go), the same offset of each rank's workspace.
  s.exchange = 1;
  s.ld = int32_t(p.n);
  s.own_out = reinterpret_cast<uint16_t*>(pa.out);
  s.slot_rows = s.tiles_m * gemm::kTileM;
  // A decode tile (m < 64) moves only its m rows: boxes m high (gemm_exchange.cuh).
  s.box_rows = int32_t(std::min<int64_t>(p.m, gemm::kTileM / 2));
  const uint32_t box[2] = {boxes.c[0], uint32_t(s.box_rows)};
  const uint64_t rows = 2ull * p.world * uint64_t(s.slot_rows);
  char* recv = plan.workspace + ch.layout.recv.offset;
  encode_bf16(&s.recv_map, recv, p.n, rows, p.n, box, "receive region");
  for (int q = 0; q < p.world; ++q)
    encode_bf16(&s.send[q], on_rank(c, q, recv), p.n, rows, p.n, box, "receive region (on a peer)");
  set_register_exchange(plan, s);
  set_copied_first_wave(plan, s);
}

// The exchange mover's first wave: once the kernel has stored every deferred half-tile in its own
// out (ce_ready), one 2-D copy per peer moves those tile columns into the peer's slot for this rank,
// then ce_sent[dest] = epoch in this rank's memory (the peer's finish_deferred waits for it).
// No event orders the copy after the plan's stream: ce_ready reaches this epoch only inside this
// launch's kernel, which runs after everything before it there, and an event recorded between two
// launches' kernels would keep the second from overlapping the first's tail
// (primitives/grid_dependency.cuh).
void copies(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const fused::ScatterState& s = plan.scatter.state;
  if (!s.ce_tile_cols) return;
  const uint64_t row_bytes = uint64_t(p.n) * 2;
  const uint64_t slot_row0 = uint64_t(s.recv_row0) + uint64_t(p.rank) * s.slot_rows;
  const char* src = reinterpret_cast<const char*>(plan.params.out);  // the own partials wait in out
  const size_t width = size_t(std::min<int64_t>(int64_t(s.ce_tile_cols) * plan.choice.tile_n, p.n)) * 2;
  for (int j = 0; j + 1 < p.world; ++j) {
    const int dest = (p.rank + 1 + j) % p.world;
    cudaStream_t st = plan.side[j];
    stream_wait(st, s.ce_ready, plan.epoch, CU_STREAM_WAIT_VALUE_GEQ);
    char* dst = on_rank(c, dest, plan.workspace + plan.choice.layout.recv.offset) + slot_row0 * row_bytes;
    WEFT_CUDA(cudaMemcpy2DAsync(dst, row_bytes, src, row_bytes, width, size_t(p.m), cudaMemcpyDeviceToDevice, st));
    stream_write(st, reinterpret_cast<uint64_t*>(plan.workspace + plan.choice.layout.progress.offset) + dest, plan.epoch);
  }
}

void build(WeftTpPlan& plan) {
  build_scatter(plan);
  build_exchange(plan);
  load_scatter(plan);
}

}  // namespace

const Candidate kAllReduceByExchange{"GEMM + all-reduce, every partial tile exchanged", WEFT_TP_GEMM_ALL_REDUCE, WEFT_TP_PATH_FUSED,
                                     WEFT_TP_MOVER_EXCHANGE, forced_by(WEFT_TP_MOVER_EXCHANGE), cost, layout, build,
                                     launch_scatter, copies};

}  // namespace weft::tp
