// scatter.cpp — GEMM + reduce-scatter / all-reduce on one node: the configuration and launch state
// every mover of the two ops shares (scatter_config, build_scatter, launch_scatter), and the CTA
// mover itself (gemm_scatter.cuh: the epilogue stores and adds into the owners' outputs, which
// needs nothing more), one candidate per op. copy_engine.cpp and exchange.cpp add their parts.
//
// Workspace (CTA mover): stored u64 [tiles_m * 2][tiles_n] (the owner's half-tile flags), done u64
// [world][gemm_ctas] (every rank's CTAs finished adding), entered u64 [world].
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fused/fused.h"
#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

namespace {

// Rounds (W tiles each, one per owner) between an owner computing a tile and the next rank adding
// into it. The owner publishes its flag when its CTA starts the epilogue of its next tile (one wave
// of tiles later), so the rank that adds should reach the tile about two waves after the owner:
// lag x W ~ 2 x ctas tile positions. Less and adders wait; more and the last `lag` rounds hold only
// adds (traffic after the math).
int scatter_lag(int ctas, int world) { return std::max(1, int(ceil_div(2 * int64_t(ctas), world))); }

}  // namespace

Estimate scatter_config(const Call& call, Choice& c, int sms) {
  if (call.place.nodes > 1) {
    return Estimate::not_here(call.problem.op == WEFT_TP_GEMM_ALL_REDUCE
                                     ? format("gemmAllReduce is single-node for now; across %d nodes allGatherGemm and gemmReduceScatter run",
                                              call.place.nodes)
                                     : format("this communicator spans %d nodes (the node plan runs it)", call.place.nodes));
  }
  validate_overrides(call);
  const Problem& p = call.problem;
  const std::string obstacle = fused_obstacle(p);
  if (!obstacle.empty()) return Estimate::unavailable(obstacle);
  const bool all_reduce = p.op == WEFT_TP_GEMM_ALL_REDUCE;
  c.tile_n = call.params.tile_n ? call.params.tile_n : gemm_tile(p.m, p.n, call.place.sm_count, all_reduce);
  WEFT_REQUIRE(all_reduce ? fused::gemm_all_reduce_supported(c.tile_n) : fused::gemm_reduce_scatter_supported(c.tile_n),
               "tile_n %d is not built for this op (reduce-scatter: 128, 256; all-reduce: 64, 128, 256)", c.tile_n);
  const bool rows = p.m % (int64_t(gemm::kTileM) * p.world) == 0;
  c.shard_tiles = rows ? int(p.m_shard / gemm::kTileM) : 0;
  // The engine's band (16 at 256-wide tiles) for the reduce-scatter: 1.3-2.9% faster than bands
  // of 4 at M >= 4096. Not for the all-reduce, whose final rows go out band by band after the
  // math: there bands of 16 were 2.4-5.7% slower than 4 ("The all-reduce's bands stay 4 tile
  // rows").
  c.group_m = rows ? band_for(c.shard_tiles, call.params.group_m,
                              all_reduce ? 4 : gemm::default_band(c.tile_n, call.place.sm_count))
                   : 1;
  c.gemm_ctas = gemm::balanced_ctas(ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, c.tile_n), sms);
  c.lag = scatter_lag(c.gemm_ctas, p.world);
  return Estimate::of(gemm_us(p.m, p.n, p.k, c.tile_n, c.gemm_ctas));
}

namespace {

// CTA mover. Bytes each rank sends: reduce-scatter adds its (W-1)/W share into the owners;
// all-reduce stores its own 1/W into W-1 peers and adds the other (W-1)/W into W-1 peers.
// The last wave's traffic follows the math: with one wave of tiles (decode-sized M) nothing
// overlaps (all-reduce at (128, 8192, 8192): fused 49.0 us against our sequence's 44.5), with
// many the window is nearly all of it ("The CTA mover's cost model overlaps (waves − 1) / waves
// of its traffic").
Estimate ctas_cost(const Call& call, Choice& c) {
  Estimate e = scatter_config(call, c, call.place.sm_count);
  if (!e.available) return e;
  const Problem& p = call.problem;
  const int W = p.world;
  const bool all_reduce = p.op == WEFT_TP_GEMM_ALL_REDUCE;
  const double gemm = e.us;
  const double out = double(p.m) * p.n * 2;
  const double sent = all_reduce ? (W - 1) * out : out * (W - 1) / W;
  const double window = all_reduce ? gemm : gemm * (W - 1) / W;
  const int64_t waves = ceil_div(ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, c.tile_n), c.gemm_ctas);
  const double overlap = window * double(waves - 1) / double(waves);
  e = Estimate::of(std::max(gemm, gemm - overlap + transfer_us(sent, kMachine.nvlink_gbs)) + kMachine.scatter_sync_us);
  // "auto" takes the copy engines or the exchange where they measured faster (copy_engine.cpp,
  // exchange.cpp), the CTA mover everywhere else.
  e.fallback = true;
  return e;
}

void ctas_layout(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  Layout& l = c.layout;
  const int64_t tiles_m = ceil_div(p.m, gemm::kTileM);
  add(l, l.stored, uint64_t(tiles_m) * 2 * ceil_div(p.n, c.tile_n) * 8);
  add(l, l.done, uint64_t(p.world) * c.gemm_ctas * 8);
  add(l, l.entered, uint64_t(p.world) * 8);
  add_abort_word(l);
}

}  // namespace

// The launch state, once per plan: A and B as the GEMM reads them, every rank's out and flags as
// this process maps them, the tile grid and order; then the mover's own part.
void build_scatter(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  const bool all_reduce = p.op == WEFT_TP_GEMM_ALL_REDUCE;
  const gemm::Boxes boxes = gemm::box_dims(tile_of(ch.tile_n), !p.b_nk, false, p.m);
  fused::ScatterLaunch& l = plan.scatter;
  encode_bf16(&l.a, reinterpret_cast<void*>(pa.a), p.k, p.m, p.k, boxes.a, "a");
  l.a_box_rows = gemm::a_box_rows(tile_of(ch.tile_n), p.m);
  if (p.b_nk) encode_bf16(&l.b, reinterpret_cast<void*>(pa.b), p.k, p.n, p.k, boxes.b, "b");
  else encode_bf16(&l.b, reinterpret_cast<void*>(pa.b), p.n, p.k, p.n, boxes.b, "b");
  fused::ScatterState& s = l.state;
  const uint64_t out_rows = all_reduce ? uint64_t(p.m) : uint64_t(p.m_shard);
  for (int q = 0; q < p.world; ++q) {
    encode_bf16(&s.out[q], on_rank(c, q, reinterpret_cast<void*>(pa.out)), p.n, out_rows, p.n, boxes.c, "out (on a peer)");
    s.stored[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, plan.workspace + ch.layout.stored.offset));
    s.done[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, plan.workspace + ch.layout.done.offset));
    s.entered[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, plan.workspace + ch.layout.entered.offset));
  }
  set_waits_and_rank(s, plan);
  s.all_reduce = all_reduce ? 1 : 0;
  s.shard_tiles = ch.shard_tiles;
  s.tiles_m = int32_t((p.m + gemm::kTileM - 1) / gemm::kTileM);
  s.tiles_n = int32_t((p.n + ch.tile_n - 1) / ch.tile_n);
  s.group_m = ch.group_m;
  s.m_shard = int32_t(p.m_shard);
  s.lag = ch.lag;
  set_gemm_shape(l, p.m, p.n, p.k, p.b_nk, ch, plan.stream);
}

// Loads the kernel now, while nothing of this plan runs (see build_and_preload() in abi.cpp).
void load_scatter(const WeftTpPlan& plan) {
  fused::ScatterLaunch l = plan.scatter;
  l.gemm_ctas = 0;
  WEFT_CUDA(l.state.all_reduce ? fused::launch_gemm_all_reduce(l) : fused::launch_gemm_reduce_scatter(l));
}

void launch_scatter(WeftTpPlan& plan, const WeftOpLaunch& launch) {
  ++plan.epoch;
  fused::ScatterLaunch& l = plan.scatter;
  l.state.epoch = plan.epoch;
  l.completion = launch_words(launch);
  const bool copy_engine = l.state.copy_engine != 0;
  if (l.state.exchange) {
    l.state.recv_row0 = int32_t((plan.epoch & 1) * uint64_t(plan.problem.world) * l.state.slot_rows);
    l.state.recv = reinterpret_cast<const uint16_t*>(plan.workspace + plan.choice.layout.recv.offset +
                                                     uint64_t(l.state.recv_row0) * uint64_t(plan.problem.n) * 2);
  }
  if (copy_engine) {
    const tp::Problem& p = plan.problem;
    const uint64_t slot_rows = uint64_t(p.world) * p.m_shard;
    const uint64_t row0 = (plan.epoch & 1) * slot_rows;
    l.state.recv = reinterpret_cast<const uint16_t*>(plan.workspace + plan.choice.layout.recv.offset + row0 * uint64_t(p.n) * 2);
    l.state.recv_row0 = int32_t(row0);
    // No event before the kernel: the side streams start once it has (copy_engine.cpp, copies()).
  }
  if (l.state.all_reduce) WEFT_CUDA(fused::launch_gemm_all_reduce(l));
  else WEFT_CUDA(fused::launch_gemm_reduce_scatter(l));
}

namespace {

void ctas_build(WeftTpPlan& plan) {
  build_scatter(plan);
  load_scatter(plan);
}

}  // namespace

const Candidate kReduceScatterByCtas{"GEMM + reduce-scatter, the epilogue adding into the owners", WEFT_TP_GEMM_REDUCE_SCATTER,
                                     WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_CTAS, forced_by(WEFT_TP_MOVER_CTAS), ctas_cost,
                                     ctas_layout, ctas_build, launch_scatter, nullptr};
const Candidate kAllReduceByCtas{"GEMM + all-reduce, the epilogue adding into the owners, then storing the sums",
                                 WEFT_TP_GEMM_ALL_REDUCE, WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_CTAS, forced_by(WEFT_TP_MOVER_CTAS),
                                 ctas_cost, ctas_layout, ctas_build, launch_scatter, nullptr};

}  // namespace weft::tp
