// all_gather.cpp — all-gather + GEMM on one node: the fused kernel's launch state per epoch
// parity (cuda/fused/all_gather_gemm.cu), its copy-engine side streams and its launch.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

// The launch state, once per plan and epoch parity (the landing slot it reads): the maps, every
// rank's flags and landing slot as this process maps them, the chunking and the split tail.
void build_all_gather(WeftTpPlan& plan) {
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
    s.timeout_ns = c.timeout_ns;
    s.rank = p.rank;
    s.world = p.world;
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
    l.m = int32_t(p.m);
    l.n = int32_t(p.n);
    l.k = int32_t(p.k);
    l.tile_n = ch.tile_n;
    l.b_n_major = !p.b_nk;
    l.gemm_ctas = ch.gemm_ctas;
    l.stream = plan.stream;
  }
  if (ch.mover == WEFT_TP_MOVER_COPY_ENGINE) create_side_streams(plan);
}

// Copy-engine all-gather: every chunk of this rank's rows to every peer's landing slot, each chunk
// followed by its flag, all enqueued at once (the host is never on the critical path). The side
// streams start after everything before this launch on the plan's stream (a is ready, our previous
// launch has finished: see all_gather_gemm.cu for why the slot is then free).
void enqueue_all_gather_copies(WeftTpPlan& plan) {
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

void launch_all_gather_fused(WeftTpPlan& plan, const WeftTpLaunch& launch) {
  const tp::Problem& p = plan.problem;
  const int parity = int(plan.epoch & 1);
  fused::AgLaunch& l = plan.ag[parity];
  l.state.epoch = plan.epoch;
  const bool gathered = plan.params.gathered != 0;
  l.completion = gathered ? scratch_words(plan) : launch_words(launch);
  // (The copy-engine mover's side streams are enqueued after the kernel, enqueue_all_gather_copies,
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

}  // namespace weft::tp
