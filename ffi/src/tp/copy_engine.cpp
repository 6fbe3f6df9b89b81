// copy_engine.cpp — the copy-engine mover of GEMM + reduce-scatter / all-reduce (gemm_scatter_ce.cuh),
// one candidate per op: its cost, its workspace, its part of the launch state and its side streams'
// copies, captured as a graph per launch class.
//
// Workspace: counts u64 [2 parities][world][chunks], progress u64 [2][2][world], staging (this
// rank's partials of the peers' rows, [m, n] by global row), recv (two parity slots of
// [world][m_shard, n]: the peers' partials of this rank's rows), done u64 [world][gemm_ctas]
// (all-reduce: the direct chunks' flags), entered u64 [world].
//
// Ranks that share a GPU: a copy between two buffers of one device does not go to a copy engine but
// runs on that device's SMs. Every rank's persistent kernel waits for the peers' copies while its
// CTAs hold their SMs, so with all SMs held (smBudget shares that add up to the GPU, a grid that
// fills its share) those copies never start and the waits run out. "auto" never takes this mover
// there, and a forced one leaves one SM of its share free (bench/repro/shared-gpu-copy.cu tells
// which engine a same-device copy takes).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "info_log.hpp"
#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/candidate.hpp"
#include "tp/cost_model.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

using comm::on_rank;

namespace {

// The GEMM in its plain order, partials of the peers' rows staged locally and copied by the copy
// engines while the own rows are computed; the own rows' epilogue reads W-1 received partials;
// all-reduce then copies the last chunk of final rows after the math (the tail). Chunks of
// ~ce_chunk_bytes (a 2-D copy each), at most 32 per owner (nodes of the side streams' graph).
Estimate cost(const Call& call, Choice& c) {
  const int reserve = call.place.shares_device && call.place.sm_count > 1 ? 1 : 0;
  Estimate e = scatter_config(call, c, call.place.sm_count - reserve);
  if (!e.available) return e;
  const Problem& p = call.problem;
  const int W = p.world;
  if (p.m % (int64_t(gemm::kTileM) * W) != 0)
    return Estimate::unavailable(format("mover 'copyEngine' needs m to be a multiple of 128 x world size (row ownership); got m = %lld",
                                        static_cast<long long>(p.m)));
  const bool all_reduce = p.op == WEFT_TP_GEMM_ALL_REDUCE;
  const double gemm = e.us;
  const int64_t tiles_n = ceil_div(p.n, c.tile_n);
  const int64_t bands = c.shard_tiles / c.group_m;
  const double slab_bytes = double(c.group_m) * gemm::kTileM * c.tile_n * 2;
  int64_t slab = std::clamp<int64_t>(int64_t(std::llround(kMachine.ce_chunk_bytes / slab_bytes)), 1, tiles_n);
  while (bands * ceil_div(tiles_n, slab) > kMachine.ce_max_chunks && slab < tiles_n) ++slab;
  c.slab_tiles = int(slab);
  c.slabs = int(ceil_div(tiles_n, slab));
  c.chunks = int(bands * c.slabs);
  const double out = double(p.m) * p.n * 2;
  const double sent_ce = out * (W - 1) / W;  // per phase (reduce-scatter; all-reduce twice)
  const double own_us = gemm / W;
  // The peers' partials must land during the own rows' math; the broadcast's last chunk lands after.
  const double late_us = std::max(0.0, transfer_us(sent_ce, kMachine.copy_engine_gbs) - (gemm - own_us));
  const double tail = all_reduce ? transfer_us(slab_bytes * slab, kMachine.copy_engine_gbs) : 0;
  e = Estimate::of(gemm * kMachine.ce_gemm_factor + late_us + tail + kMachine.all_gather_sync_us);
  if (p.m_shard < kMachine.ce_min_shard_rows) {
    e.auto_ok = false;
    e.reason = format("auto takes the copy engines from %lld rows per rank", static_cast<long long>(kMachine.ce_min_shard_rows));
  } else if (call.place.shares_device) {
    e.auto_ok = false;
    e.reason = "ranks share a GPU, where a same-device copy needs SMs that the ranks' kernels hold";
  }
  return e;
}

void layout(const Call& call, Choice& c) {
  const Problem& p = call.problem;
  const int W = p.world;
  Layout& l = c.layout;
  add(l, l.counts, 2ull * W * c.chunks * 8);  // [parity][W][chunks]
  add(l, l.progress, 4ull * W * 8);
  add(l, l.staging_ce, uint64_t(p.m) * p.n * 2);
  add(l, l.recv, 2ull * W * p.m_shard * p.n * 2);
  if (p.op == WEFT_TP_GEMM_ALL_REDUCE) add(l, l.done, uint64_t(W) * c.gemm_ctas * 8);  // direct chunks' flags
  add(l, l.entered, uint64_t(W) * 8);  // entered[q]: rank q's kernel has started launch (value)
  add_abort_word(l);
}

// Reduce-scatter with the copy-engine mover and two ranks: the peer, whose copy engines copy its
// partials of my rows straight into my out (ScatterState::direct_from), or -1. A third rank's copy
// would overwrite the second's, so wider worlds keep the receive slots (their mapping of sources
// to slots is the all-reduce's).
int32_t ce_direct_from(const WeftTpPlan& plan) {
  const tp::Problem& p = plan.problem;
  if (p.op == WEFT_TP_GEMM_ALL_REDUCE || p.world != 2) return -1;
  return 1 - p.rank;
}

// All-reduce with the copy-engine mover: the first of this rank's own bands that holds a tile of the
// kernel's final round (CeScheduler's order: the own rows come last, band by band). Those bands are
// ready only when the math ends; the SMs store them into the peers from the epilogue instead
// (gemm_scatter_ce.cuh). Sets direct_tile_m and direct_chunks.
void set_direct_bands(const WeftTpPlan& plan, fused::ScatterState& s) {
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const int64_t tiles_n = (p.n + ch.tile_n - 1) / ch.tile_n;
  const int64_t tiles_m = (p.m + gemm::kTileM - 1) / gemm::kTileM;
  const int64_t own0 = int64_t(p.world - 1) * ch.shard_tiles * tiles_n;  // the first own unit
  const int64_t final0 = std::max(own0, (tiles_m * tiles_n - 1) / ch.gemm_ctas * ch.gemm_ctas);
  const int64_t bands = ch.shard_tiles / ch.group_m;
  const int64_t band = (final0 - own0) / (int64_t(ch.group_m) * tiles_n);
  const bool off = p.op != WEFT_TP_GEMM_ALL_REDUCE;
  s.direct_tile_m = off ? int32_t(tiles_m) : int32_t(int64_t(p.rank) * ch.shard_tiles + band * ch.group_m);
  s.direct_chunks = off ? 0 : int32_t((bands - band) * ch.slabs);
}

// The copy-engine mover's part of the scatter state (gemm_scatter_ce.cuh) and its side streams.
void build_copy_engine(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  fused::ScatterState& s = plan.scatter.state;
  const gemm::Boxes boxes = gemm::box_dims(tile_of(ch.tile_n), !p.b_nk, false, p.m);
  s.copy_engine = 1;
  s.direct_from = ce_direct_from(plan);
  set_direct_bands(plan, s);
  s.chunks = ch.chunks;
  s.slabs = ch.slabs;
  s.slab_tiles = ch.slab_tiles;
  s.tile_n = ch.tile_n;
  s.ld = int32_t(p.n);
  char* ws = plan.workspace;
  encode_bf16(&s.staging, ws + ch.layout.staging_ce.offset, p.n, p.m, p.n, boxes.c, "staging");
  s.own_out_map = s.out[p.rank];
  encode_bf16(&s.recv_map, ws + ch.layout.recv.offset, p.n, 2ull * p.world * p.m_shard, p.n, boxes.c, "receive slots");
  s.counts = reinterpret_cast<uint64_t*>(ws + ch.layout.counts.offset);
  for (int q = 0; q < p.world; ++q)
    s.progress[q] = reinterpret_cast<const uint64_t*>(on_rank(c, q, ws + ch.layout.progress.offset));
  create_side_streams(plan);
}

// Copy-engine reduce-scatter / all-reduce: the side stream to each peer (see gemm_scatter_ce.cuh),
// for launches of class `epoch` mod 4 (every value below depends on that class only, so the same
// work can be captured once as a graph). For every chunk of the peer's rows: wait until the kernel
// has counted every half-tile of the chunk in staging, copy it into the peer's receive slot (or its
// out), advance the progress word; all-reduce then does the same for this rank's final rows into the
// peer's out. The peer tiles' counts come from tiles that wait for nothing, so these waits always
// end (and the own tiles' counts of all-reduce from tiles whose waits are bounded).
void enqueue_copies(WeftTpPlan& plan, uint64_t epoch) {
  const WeftComm& c = *plan.comm;
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  char* ws = plan.workspace;
  const uint64_t row_bytes = uint64_t(p.n) * 2;
  const int64_t band_rows = int64_t(ch.group_m) * gemm::kTileM;
  const uint64_t parity_row0 = (epoch & 1) * uint64_t(p.world) * p.m_shard;
  // This launch class's chunk counts [world][chunks] (fused.h, ScatterState::counts).
  const auto* counts = reinterpret_cast<const uint64_t*>(ws + ch.layout.counts.offset) + (epoch & 1) * uint64_t(p.world) * ch.chunks;
  const int32_t tiles_n = plan.scatter.state.tiles_n;
  auto* progress = reinterpret_cast<uint64_t*>(ws + ch.layout.progress.offset);  // this rank's words
  // Chunk `chunk` of owner o's rows: from src (row src_row0 + the chunk's shard row) to dst.
  auto chunk_copy = [&](cudaStream_t st, int o, int32_t chunk, char* dst, uint64_t dst_row0, const char* src,
                        uint64_t src_row0) {
    stream_wait(st, counts + int64_t(o) * ch.chunks + chunk, fused::chunk_halves(chunk, ch.group_m, ch.slabs, ch.slab_tiles, tiles_n),
                CU_STREAM_WAIT_VALUE_GEQ);
    const int64_t band = chunk / ch.slabs, slab = chunk % ch.slabs;
    const int64_t col0 = slab * ch.slab_tiles * ch.tile_n;
    const int64_t cols = std::min<int64_t>(int64_t(ch.slab_tiles) * ch.tile_n, p.n - col0);
    const uint64_t row = uint64_t(band * band_rows);
    WEFT_CUDA(cudaMemcpy2DAsync(dst + (dst_row0 + row) * row_bytes + col0 * 2, row_bytes,
                                src + (src_row0 + row) * row_bytes + col0 * 2, row_bytes, size_t(cols) * 2,
                                size_t(band_rows), cudaMemcpyDeviceToDevice, st));
  };
  auto advance = [&](cudaStream_t st, int kind, int dest, int32_t done) {
    stream_write(st, progress + fused::progress_index(epoch, kind, p.world, dest),
                 (fused::progress_tag(epoch) << fused::kProgressShift) | uint64_t(done));
  };
  const char* staging = ws + ch.layout.staging_ce.offset;
  char* out = reinterpret_cast<char*>(plan.params.out);
  for (int j = 0; j + 1 < p.world; ++j) {
    const int dest = (p.rank + 1 + j) % p.world;
    cudaStream_t st = plan.side[j];
    char* recv = on_rank(c, dest, ws + ch.layout.recv.offset);
    // Two ranks, and I am the peer's direct_from: my partials of its rows go into its out
    // (copies() made this stream wait until its kernel of this launch has started).
    const bool into_out = plan.scatter.state.direct_from >= 0;
    for (int32_t chunk = 0; chunk < ch.chunks; ++chunk) {
      // My partial of dest's rows (staging rows dest * m_shard ..) into dest's slot for me, or its out.
      if (into_out) chunk_copy(st, dest, chunk, on_rank(c, dest, out), 0, staging, uint64_t(dest) * p.m_shard);
      else chunk_copy(st, dest, chunk, recv, parity_row0 + uint64_t(p.rank) * p.m_shard, staging, uint64_t(dest) * p.m_shard);
      advance(st, 0, dest, chunk + 1);
    }
    if (p.op == WEFT_TP_GEMM_ALL_REDUCE) {
      // The last direct_chunks chunks go out from the kernel's epilogue instead.
      char* peer_out = on_rank(c, dest, out);
      const uint64_t mine = uint64_t(p.rank) * p.m_shard;
      for (int32_t chunk = 0; chunk < ch.chunks - plan.scatter.state.direct_chunks; ++chunk) {
        chunk_copy(st, p.rank, chunk, peer_out, mine, out, mine);
        advance(st, 1, dest, chunk + 1);
      }
    }
  }
}

// Captures the side streams' work of each launch class as a graph (one launch per kernel launch
// instead of 3 driver calls per chunk and peer). A capture the driver refuses falls back to the
// call-by-call path (enqueue_copies at every launch), which moves the same data;
// WEFT_LOG=info says so on stderr. (On the 2 x H200 host a launch's host time measured the same
// with and without the graph, so whether the capture takes there is still open.)
void capture_copies(WeftTpPlan& plan) {
  if (plan.side.empty()) return;
  const size_t n = plan.side.size();
  for (size_t j = 0; j < 2 * n; ++j) {
    cudaEvent_t e = nullptr;
    WEFT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    plan.capture_events.push_back(e);
  }
  cudaStream_t origin = plan.side[0];
  const char* step = nullptr;  // the first step that failed
  cudaError_t error = cudaSuccess;
  std::string enqueue_failure;
  auto check = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess && !step) {
      step = what;
      error = e;
    }
    return e == cudaSuccess;
  };
  for (uint64_t k = 0; k < 4 && !step; ++k) {
    cudaGraph_t graph = nullptr;
    if (!check(cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture")) break;
    for (size_t j = 1; j < n; ++j) {
      check(cudaEventRecord(plan.capture_events[j], origin), "fork: cudaEventRecord") &&
          check(cudaStreamWaitEvent(plan.side[j], plan.capture_events[j], 0), "fork: cudaStreamWaitEvent");
    }
    if (!step) {
      try {
        enqueue_copies(plan, k);
      } catch (const Error& e) {
        enqueue_failure = e.message;
        step = "enqueueing the copies";
        error = cudaErrorUnknown;
      }
    }
    for (size_t j = 1; j < n; ++j) {
      check(cudaEventRecord(plan.capture_events[n + j], plan.side[j]), "join: cudaEventRecord") &&
          check(cudaStreamWaitEvent(origin, plan.capture_events[n + j], 0), "join: cudaStreamWaitEvent");
    }
    check(cudaStreamEndCapture(origin, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    if (!step) check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (graph) (void)cudaGraphDestroy(graph);
    if (!step) check(cudaGraphUpload(exec, origin), "cudaGraphUpload");
    if (step && exec) (void)cudaGraphExecDestroy(exec);
    if (!step) plan.copies[k] = exec;
  }
  if (!step) return;
  for (cudaGraphExec_t& g : plan.copies) {
    if (g) (void)cudaGraphExecDestroy(g);
    g = nullptr;
  }
  (void)cudaGetLastError();
  if (info_log_enabled())
    std::fprintf(stderr, "weft: rank %d: the copy-engine mover's side streams run call by call: capturing them failed at %s: %s\n",
                 plan.problem.rank, step, enqueue_failure.empty() ? cudaGetErrorString(error) : enqueue_failure.c_str());
}

// After the kernel (weft_tp_plans_launch): a side stream that shared a hardware queue with the plan's
// stream would otherwise hold the kernel back behind a wait that only the kernel can end.
void copies(WeftTpPlan& plan) {
  const fused::ScatterLaunch& l = plan.scatter;
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
  enqueue_copies(plan, plan.epoch);
}

void build(WeftTpPlan& plan) {
  build_scatter(plan);
  build_copy_engine(plan);
  capture_copies(plan);
  load_scatter(plan);
}

}  // namespace

const Candidate kReduceScatterByCopyEngine{"GEMM + reduce-scatter, partials moved by the copy engines", WEFT_TP_GEMM_REDUCE_SCATTER,
                                           WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_COPY_ENGINE, forced_by(WEFT_TP_MOVER_COPY_ENGINE),
                                           cost, layout, build, launch_scatter, copies};
const Candidate kAllReduceByCopyEngine{"GEMM + all-reduce, partials and sums moved by the copy engines", WEFT_TP_GEMM_ALL_REDUCE,
                                       WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_COPY_ENGINE, forced_by(WEFT_TP_MOVER_COPY_ENGINE),
                                       cost, layout, build, launch_scatter, copies};

}  // namespace weft::tp
