// all_gather.cpp — all-gather + GEMM on one node (cuda/fused/all_gather_gemm.cu), two candidates on
// one kernel: the peers' rows moved by the copy engines (side streams, no SM taken from the GEMM) or
// by CTAs of the kernel. Their cost, their workspace, the kernel's launch state per epoch parity,
// its launch and the copy-engine side streams' work.
//
// Workspace: flags u64 [world][chunks] (this rank's arrival flags, chunk c of rank q's rows landed
// in dest's slot), landing [2 parities][world * m_shard][k] bf16, entered u64 [world], then the split
// tail's counts and fp32 partials (gemm/tail_split.cuh), then the abort word (add_abort_word).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <numeric>

#include "fused/fused.h"
#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

namespace {

// What both movers share: the tile, the band, the chunking (a chunk is whole bands, at least 8 per
// shard), then the grid over the SMs the GEMM gets and the estimate with the mover's bandwidth.
// Unavailable (with the reason) where no single-node fused kernel can take the call.
Estimate single_node(const Call& call) {
  if (call.place.nodes > 1)
    return Estimate::not_here(format("this communicator spans %d nodes (the node plan runs it)", call.place.nodes));
  validate_overrides(call);
  const std::string obstacle = fused_obstacle(call.problem);
  if (!obstacle.empty()) return Estimate::unavailable(obstacle);
  return Estimate::of(0);
}

void set_tile_and_chunks(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  const int sms = call.place.sm_count;
  c.tile_n = call.params.tile_n ? call.params.tile_n : gemm_tile(p.m, p.n, sms, false);
  WEFT_REQUIRE(fused::all_gather_gemm_supported(c.tile_n), "tile_n %d is not built for all-gather + GEMM (128, 256)", c.tile_n);
  // Chunks of at least one band (a band never straddles a chunk), else at least 8 per shard.
  // At M = 8192 that is 2 chunks of 16 tile rows per shard: the peer's arrive long before this
  // rank's own shard is computed (0.17 against 0.35 ms), so coarser arrival costs nothing there.
  const int64_t shard_tiles = p.m_shard / gemm::kTileM;
  c.group_m = band_for(shard_tiles, call.params.group_m, gemm::default_band(c.tile_n, sms));
  const int64_t chunk_tiles = std::lcm<int64_t>(divisor_for(shard_tiles, std::min<int64_t>(shard_tiles, 8)), c.group_m);
  c.chunk_rows = int(chunk_tiles * gemm::kTileM);
}

// The grid and the split tail (gemm.h) on `sms` SMs, comm_ctas of them moving data, and the
// estimate: the GEMM, or the peers' rows' arrival plus the last chunk's math, whichever ends later.
// Where the planner splits the last wave, every SM gets a CTA: equal pieces on 132 CTAs beat the
// balanced grid unsplit at 8192 x 14336 x 8192 by 0.8-0.9% on one rank ("The last wave splits into
// equal K pieces in one round, or not at all"). Elsewhere the balanced grid: 0.6-1.3% faster at
// 8192 x 4096 x 8192, and level with or 0.4-0.7% ahead of the head-and-rest split that
// 16384 x 4096 x 8192 and 8192 x 4096 x 28672 used to get.
double grid_and_estimate(const Problem& p, int sms, double mover_gbs, Choice& c) {
  const int64_t tiles = ceil_div(p.m, gemm::kTileM) * ceil_div(p.n, c.tile_n);
  c.gemm_ctas = int(std::min<int64_t>(tiles, sms - c.comm_ctas));
  c.tail = gemm::plan_tail_split(tiles, ceil_div(p.k, gemm::kTileK), c.gemm_ctas);
  if (c.tail.tiles == 0) c.gemm_ctas = gemm::balanced_ctas(tiles, sms - c.comm_ctas);
  const double out_bytes = double(p.world - 1) * double(p.m_shard) * p.k * 2;
  const double gemm = gemm_us(p.m, p.n, p.k, c.tile_n, c.gemm_ctas);
  const double arrive = p.world > 1 ? transfer_us(out_bytes, mover_gbs) : 0;
  const double last_chunk = gemm * double(c.chunk_rows) / double(p.m);
  return std::max(gemm, arrive + last_chunk) + kMachine.all_gather_sync_us;
}

Estimate copy_engine_cost(const Call& call, Choice& c) {
  Estimate e = single_node(call);
  if (!e.available) return e;
  set_tile_and_chunks(call, c);
  const Problem& p = call.problem;
  // Ranks sharing a GPU: a copy between two buffers of one device runs on its SMs, so a forced
  // copy-engine plan leaves one of its SMs to them (the ranks' kernels would otherwise hold them
  // all while they wait for those copies), and "auto" takes the CTA mover instead (copy_engine.cpp).
  const int sms = call.place.sm_count - (call.place.shares_device && call.place.sm_count > 1 ? 1 : 0);
  const double mover_gbs = std::min(kMachine.nvlink_gbs, kMachine.copy_engine_gbs * std::max(p.world - 1, 1));
  e = Estimate::of(grid_and_estimate(p, sms, mover_gbs, c));
  if (call.params.comm_ctas > 0) {
    e.auto_ok = false;
    e.reason = "comm_ctas asks for the CTA mover";
  } else if (call.place.shares_device) {
    e.auto_ok = false;
    e.reason = "ranks share a GPU, where a same-device copy needs SMs that the ranks' kernels hold";
  }
  return e;
}

Estimate ctas_cost(const Call& call, Choice& c) {
  Estimate e = single_node(call);
  if (!e.available) return e;
  const int sms = call.place.sm_count;
  // The CTA mover needs a comm CTA and a GEMM CTA (a communicator's smBudget can leave fewer SMs).
  if (sms < 2)
    return Estimate::unavailable(format("mover 'ctas' needs at least 2 SMs (a comm CTA beside the GEMM's); this communicator has %d", sms));
  set_tile_and_chunks(call, c);
  const Problem& p = call.problem;
  // Enough CTAs to land the peers' rows while this rank's own rows are computed.
  const double out_bytes = double(p.world - 1) * double(p.m_shard) * p.k * 2;
  const double local_us = gemm_us(p.m_shard, p.n, p.k, c.tile_n, sms);
  const double need_gbs = out_bytes / std::max(local_us, 1.0) / 1e3;
  c.comm_ctas = call.params.comm_ctas
                    ? call.params.comm_ctas
                    : int(std::clamp<double>(std::ceil(need_gbs / kMachine.cta_push_gbs), 1, std::min(32, sms - 1)));
  const double mover_gbs = std::min(kMachine.nvlink_gbs, c.comm_ctas * kMachine.cta_push_gbs);
  e = Estimate::of(grid_and_estimate(p, sms, mover_gbs, c));
  // "auto" takes the copy engines (no SM taken from the GEMM) unless commCtas asks for CTAs or the
  // copy engines cannot run where the ranks are.
  e.fallback = true;
  return e;
}

void layout(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  const int W = p.world;
  Layout& l = c.layout;
  const int64_t chunks = p.m_shard / c.chunk_rows;
  add(l, l.flags, uint64_t(W) * chunks * 8);
  add(l, l.landing, 2ull * W * p.m_shard * p.k * 2);
  add(l, l.entered, uint64_t(W) * 8);  // entered[rank]: this rank's kernel has started launch (value)
  add(l, l.tail_counts, gemm::tail_counts_bytes(c.tail));
  add(l, l.tail_partials, gemm::tail_partials_bytes(c.tail, c.tile_n));
  add_abort_word(l);
}

// The launch state, once per plan and epoch parity (the landing slot it reads): the maps, every
// rank's flags and landing slot as this process maps them, the chunking and the split tail.
void build(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  const gemm::Boxes boxes = gemm::box_dims(tile_of(ch.tile_n), !p.b_nk, false);
  const uint64_t slot_bytes = uint64_t(p.world) * p.m_shard * p.k * 2;
  char* flags = plan.workspace + ch.layout.flags.offset;
  char* landing = plan.workspace + ch.layout.landing.offset;
  for (int parity = 0; parity < 2; ++parity) {
    fused::AgLaunch& l = plan.ag[parity];
    encode_bf16(&l.landing, landing + parity * slot_bytes, p.k, uint64_t(p.world) * p.m_shard, p.k, boxes.a, "landing");
    if (p.b_nk) encode_bf16(&l.b, reinterpret_cast<void*>(pa.b), p.k, p.n, p.k, boxes.b, "b");
    else encode_bf16(&l.b, reinterpret_cast<void*>(pa.b), p.n, p.k, p.n, boxes.b, "b");
    encode_bf16(&l.c, reinterpret_cast<void*>(pa.out), p.n, p.m, p.n, boxes.c, "out");
    fused::AgState& s = l.state;
    encode_bf16(&s.a_local, reinterpret_cast<void*>(pa.a), p.k, p.m_shard, p.k, boxes.a, "a");
    for (int q = 0; q < p.world; ++q) {
      s.flags[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, flags));
      s.landing[q] = on_rank(c, q, landing + parity * slot_bytes);
    }
    s.a = reinterpret_cast<const char*>(pa.a);
    set_waits_and_rank(s, plan);
    s.m_shard = int32_t(p.m_shard);
    s.chunk_rows = ch.chunk_rows;
    s.chunks = int32_t(p.m_shard / ch.chunk_rows);
    s.comm_ctas = ch.mover == WEFT_TP_MOVER_CTAS ? ch.comm_ctas : 0;
    s.group_m = ch.group_m;
    s.row_bytes = int32_t(p.k * 2);
    s.wait_outgoing = ch.mover == WEFT_TP_MOVER_COPY_ENGINE && p.world > 1 ? 1 : 0;
    s.entered = s.wait_outgoing ? reinterpret_cast<uint64_t*>(plan.workspace + ch.layout.entered.offset) + p.rank : nullptr;
    s.tail = ch.tail;
    if (s.tail.tiles) {
      s.tail.partials = reinterpret_cast<float*>(plan.workspace + ch.layout.tail_partials.offset);
      s.tail.counts = reinterpret_cast<uint64_t*>(plan.workspace + ch.layout.tail_counts.offset);
    }
    set_gemm_shape(l, p.m, p.n, p.k, p.b_nk, ch, plan.stream);
  }
  if (ch.mover == WEFT_TP_MOVER_COPY_ENGINE) create_side_streams(plan);
  // Loads the kernel now, while nothing of this plan runs (see build_and_preload() in abi.cpp).
  fused::AgLaunch load = plan.ag[0];
  load.gemm_ctas = 0;
  load.state.comm_ctas = 0;
  WEFT_CUDA(fused::launch_all_gather_gemm(load));
}

// Copy-engine all-gather: every chunk of this rank's rows to every peer's landing slot, each chunk
// followed by its flag, all enqueued at once (the host is never on the critical path). The side
// streams start after everything before this launch on the plan's stream (a is ready, our previous
// launch has finished: see all_gather_gemm.cu for why the slot is then free).
void enqueue_copies(WeftTpPlan& plan) {
  const tp::Problem& p = plan.problem;
  const fused::AgLaunch& l = plan.ag[plan.epoch & 1];
  // Behind this rank's kernel of this launch (fused.h, AgState::entered).
  for (cudaStream_t s : plan.side) stream_wait(s, l.state.entered, plan.epoch, CU_STREAM_WAIT_VALUE_GEQ);
  const uint64_t chunk_bytes = uint64_t(l.state.chunk_rows) * l.state.row_bytes;
  for (int32_t chunk = 0; chunk < l.state.chunks; ++chunk) {
    for (int j = 0; j + 1 < p.world; ++j) {
      const int dest = (p.rank + 1 + j) % p.world;
      char* dst = l.state.landing[dest] + uint64_t(p.rank) * p.m_shard * l.state.row_bytes + chunk * chunk_bytes;
      const char* src = l.state.a + chunk * chunk_bytes;
      WEFT_CUDA(cudaMemcpyAsync(dst, src, chunk_bytes, cudaMemcpyDeviceToDevice, plan.side[j]));
      stream_write(plan.side[j], l.state.flags[p.rank] + int64_t(dest) * l.state.chunks + chunk, plan.epoch);
    }
  }
}

void launch(WeftTpPlan& plan, const WeftOpLaunch& launch) {
  ++plan.epoch;
  const tp::Problem& p = plan.problem;
  const int parity = int(plan.epoch & 1);
  fused::AgLaunch& l = plan.ag[parity];
  l.state.epoch = plan.epoch;
  const bool gathered = plan.params.gathered != 0;
  l.completion = gathered ? scratch_words(plan) : launch_words(launch);
  // (The copy-engine mover's side streams are enqueued after the kernel, enqueue_copies,
  // so that several ranks' kernels of one process are all queued before any copies.)
  WEFT_CUDA(fused::launch_all_gather_gemm(l));
  if (gathered) {
    // gathered = [the peers' rows from the landing slot | this rank's rows from a], then completion.
    char* g = reinterpret_cast<char*>(plan.params.gathered);
    const uint64_t row = uint64_t(p.k) * 2;
    const char* slot = plan.workspace + plan.choice.layout.landing.offset + parity * (uint64_t(p.world) * p.m_shard * row);
    const uint64_t before = uint64_t(p.rank) * p.m_shard, after = uint64_t(p.rank + 1) * p.m_shard;
    if (before > 0) WEFT_CUDA(cudaMemcpyAsync(g, slot, before * row, cudaMemcpyDeviceToDevice, plan.stream));
    WEFT_CUDA(cudaMemcpyAsync(g + before * row, l.state.a, uint64_t(p.m_shard) * row, cudaMemcpyDeviceToDevice, plan.stream));
    const uint64_t total = uint64_t(p.world) * p.m_shard;
    if (after < total)
      WEFT_CUDA(cudaMemcpyAsync(g + after * row, slot + after * row, (total - after) * row, cudaMemcpyDeviceToDevice, plan.stream));
    WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
  }
}

}  // namespace

const Candidate kAllGatherByCopyEngine{"all-gather + GEMM, rows moved by the copy engines", WEFT_TP_ALL_GATHER_GEMM,
                                       WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_COPY_ENGINE, forced_by(WEFT_TP_MOVER_COPY_ENGINE),
                                       copy_engine_cost, layout, build, launch, enqueue_copies};
const Candidate kAllGatherByCtas{"all-gather + GEMM, rows moved by CTAs", WEFT_TP_ALL_GATHER_GEMM, WEFT_TP_PATH_FUSED,
                                 WEFT_TP_MOVER_CTAS, forced_by(WEFT_TP_MOVER_CTAS), ctas_cost, layout, build, launch, nullptr};

}  // namespace weft::tp
