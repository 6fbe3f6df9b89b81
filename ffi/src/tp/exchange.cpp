// exchange.cpp — the exchange mover of the decode all-reduce (gemm_exchange.cuh): its part of the
// launch state (the register exchange, the first wave by copy engine) and that wave's copies.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

namespace {

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
  if (p.world != 2 || s.register_rows > 0 ||
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

}  // namespace

// The exchange mover's part of the scatter state (gemm_exchange.cuh).
void build_exchange(WeftTpPlan& plan, const gemm::Boxes& boxes) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  fused::ScatterState& s = plan.scatter.state;
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
void enqueue_first_wave_copies(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const fused::ScatterState& s = plan.scatter.state;
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

}  // namespace weft::tp
