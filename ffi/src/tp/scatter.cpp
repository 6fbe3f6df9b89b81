// scatter.cpp — GEMM + reduce-scatter / all-reduce on one node: the launch state every mover shares
// (the CTA mover, gemm_scatter.cuh, needs nothing more), the kernel's launch, and the side-stream
// work after it (copy_engine.cpp, exchange.cpp).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

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
  s.timeout_ns = c.timeout_ns;
  s.rank = p.rank;
  s.world = p.world;
  s.all_reduce = all_reduce ? 1 : 0;
  s.shard_tiles = ch.shard_tiles;
  s.tiles_m = int32_t((p.m + gemm::kTileM - 1) / gemm::kTileM);
  s.tiles_n = int32_t((p.n + ch.tile_n - 1) / ch.tile_n);
  s.group_m = ch.group_m;
  s.m_shard = int32_t(p.m_shard);
  s.lag = ch.lag;
  l.m = int32_t(p.m);
  l.n = int32_t(p.n);
  l.k = int32_t(p.k);
  l.tile_n = ch.tile_n;
  l.b_n_major = !p.b_nk;
  l.ctas = ch.gemm_ctas;
  l.stream = plan.stream;
  if (ch.mover == WEFT_TP_MOVER_EXCHANGE) build_exchange(plan, boxes);
  else if (ch.mover == WEFT_TP_MOVER_COPY_ENGINE) build_copy_engine(plan, boxes);
}

void launch_scatter_fused(WeftTpPlan& plan, const WeftTpLaunch& launch) {
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
    // No event before the kernel: the side streams start once it has (launch_scatter_copies).
  }
  if (l.state.all_reduce) WEFT_CUDA(fused::launch_gemm_all_reduce(l));
  else WEFT_CUDA(fused::launch_gemm_reduce_scatter(l));
}

// After the kernel: a side stream that shared a hardware queue with the plan's stream would
// otherwise hold the kernel back behind a wait that only the kernel can end.
void launch_scatter_copies(WeftTpPlan& plan) {
  const fused::ScatterLaunch& l = plan.scatter;
  if (l.state.exchange && l.state.ce_tile_cols) {
    enqueue_first_wave_copies(plan);
    return;
  }
  if (!l.state.copy_engine) return;
  // Both waits are on entered words in this rank's workspace, for this launch's epoch, so they stay
  // out of the graph, whose values are those of the launch class.
  const auto* entered = reinterpret_cast<const uint64_t*>(plan.workspace + plan.choice.layout.entered.offset);
  // Behind everything before this launch on the plan's stream: this rank's kernel of this launch has
  // started (it writes entered[rank] = epoch here after grid::wait_previous: gemm_scatter_ce.cuh).
  // An event recorded before the kernel would do too, but it would keep the kernel from overlapping
  // the previous launch's tail (primitives/grid_dependency.cuh).
  const auto wait_start = [&](cudaStream_t st) {
    stream_wait(st, entered + plan.problem.rank, plan.epoch, CU_STREAM_WAIT_VALUE_GEQ);
  };
  // Copies into the peer's out (direct_from, two ranks: side stream 0's peer, where the graph starts)
  // also wait until its kernel of this launch has started: it raises entered[peer] here from
  // on_kernel_start.
  const auto wait_peer_entered = [&] {
    if (l.state.direct_from >= 0) stream_wait(plan.side[0], entered + l.state.direct_from, plan.epoch, CU_STREAM_WAIT_VALUE_GEQ);
  };
  if (cudaGraphExec_t g = plan.copies[plan.epoch & 3]) {
    wait_start(plan.side[0]);
    wait_peer_entered();
    WEFT_CUDA(cudaGraphLaunch(g, plan.side[0]));
    return;
  }
  for (cudaStream_t st : plan.side) wait_start(st);
  wait_peer_entered();
  enqueue_scatter_copies(plan, plan.epoch);
}

}  // namespace weft::tp
