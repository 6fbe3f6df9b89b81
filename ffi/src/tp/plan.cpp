// plan.cpp — weft_tp_choose / weft_tp_plan_create / weft_tp_plan_launch / weft_tp_plan_destroy:
// validates a tensor-parallel call, builds the fused kernel's launch once (tensor maps on this
// rank's and the peers' memory, the epoch patched per launch), or runs the sequential path: our
// GEMM and our collective on the plan's stream, with padded copies where TMA needs them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/call_checks.hpp"
#include "comm/comm.hpp"
#include "device_guard.hpp"
#include "driver.hpp"
#include "fused/fused.h"
#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/choice.hpp"
#include "tp/internode.hpp"
#include "weft.h"

using namespace weft;

struct WeftTpPlan {
  WeftComm* comm = nullptr;
  WeftTpParams params{};
  tp::Problem problem{};
  tp::Choice choice{};
  cudaStream_t stream = nullptr;
  char* workspace = nullptr;
  uint64_t epoch = 0;  // last launch; the first launch is epoch 1 (flags start at 0)
  // Fused.
  fused::AgLaunch ag[2]{};  // by epoch parity (the landing slot)
  fused::ScatterLaunch scatter{};
  std::vector<cudaStream_t> side;  // copy-engine mover: one stream per peer
  // Copy-engine reduce-scatter / all-reduce: the side streams' work per launch class (epoch mod 4),
  // captured once (nullptr: enqueued call by call at every launch), and the capture's fork/join events.
  cudaGraphExec_t copies[4] = {};
  std::vector<cudaEvent_t> capture_events;
  // Completion words for the first kernel of a multi-step launch (publish.cu carries them over).
  uint64_t* scratch_host = nullptr;
  uint64_t* scratch_dev = nullptr;
  uint32_t* scratch_arrivals = nullptr;
  // A communicator over several nodes: the proxy path (tp/internode.cpp) instead of all of the above.
  std::unique_ptr<tp::InterAg> inter;
};

namespace {

constexpr char kOp[] = "weft_tp";

bool aligned16(uint64_t p) { return (p & 15u) == 0; }

using comm::on_rank;

// TMA needs every operand 16-byte aligned; the rest is what every communicator call checks.
void require_device_ptr(const WeftComm& c, uint64_t ptr, const char* name) {
  comm::require_on_device(c, ptr, name, kOp);
  WEFT_REQUIRE(aligned16(ptr), "%s: %s (%#llx) must be 16-byte aligned", kOp, name, (unsigned long long)ptr);
}

void require_symmetric(const WeftComm& c, uint64_t ptr, uint64_t bytes, const char* name) {
  comm::require_symmetric(c, ptr, bytes, name, kOp);
}

void validate(const WeftComm& c, const WeftTpParams* p) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(WeftTpParams) && p->version == 1,
               "params->size/version must be sizeof(WeftTpParams) (%zu) and 1 (got %u, %u)", sizeof(WeftTpParams), p->size,
               p->version);
  WEFT_REQUIRE(p->op >= WEFT_TP_ALL_GATHER_GEMM && p->op <= WEFT_TP_GEMM_ALL_REDUCE, "op %d is not a WeftTpOp", p->op);
  WEFT_REQUIRE((p->flags & ~uint32_t(WEFT_GEMM_B_NK)) == 0, "flags has unknown bits (0x%x); only WEFT_GEMM_B_NK", p->flags);
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  WEFT_REQUIRE(p->m >= 1 && p->n >= 1 && p->k >= 1 && p->m <= kMax && p->n <= kMax && p->k <= kMax,
               "m, n and k must be in [1, 2^31) (got %lld, %lld, %lld)", (long long)p->m, (long long)p->n, (long long)p->k);
  WEFT_REQUIRE(p->gathered == 0 || p->op == WEFT_TP_ALL_GATHER_GEMM, "gathered is an all-gather output");
}

void validate_tensors(const WeftComm& c, const WeftTpParams& p) {
  require_device_ptr(c, p.a, "a");
  require_device_ptr(c, p.b, "b");
  require_device_ptr(c, p.out, "out");
  if (p.gathered) require_device_ptr(c, p.gathered, "gathered");
  const int64_t m_shard = (p.m + c.world - 1) / c.world;
  if (p.op == WEFT_TP_GEMM_REDUCE_SCATTER) require_symmetric(c, p.out, uint64_t(m_shard) * p.n * 2, "out");
  if (p.op == WEFT_TP_GEMM_ALL_REDUCE) require_symmetric(c, p.out, uint64_t(p.m) * p.n * 2, "out");
}

void fill_choice(const tp::Choice& c, WeftTpChoice* out) {
  out->path = c.path;
  out->mover = c.mover;
  out->comm_ctas = c.comm_ctas;
  out->gemm_ctas = c.gemm_ctas;
  out->tile_n = c.tile_n;
  out->group_m = c.group_m;
  out->chunk_rows = c.chunk_rows;
  out->fused_available = c.fused_available ? 1 : 0;
  out->workspace_bytes = c.layout.total;
  out->predicted_fused_us = c.fused_available ? c.fused_us : 0;
  out->predicted_sequential_us = c.sequential_us;
  std::memset(out->reason, 0, sizeof out->reason);
  std::strncpy(out->reason, c.reason.c_str(), sizeof out->reason - 1);
}

gemm::TileConfig tile_of(int tile_n) { return gemm::TileConfig{tile_n, 1, 1}; }

// The copy-engine movers' side streams, one per peer. They start behind the kernel's entered word
// (all-gather, reduce-scatter / all-reduce), or its first wave's ready word (the exchange:
// enqueue_first_wave_copies), never behind an event recorded before the kernel.
void create_side_streams(WeftTpPlan& plan) {
  for (int j = 0; j + 1 < plan.problem.world; ++j) {
    cudaStream_t side = nullptr;
    WEFT_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    plan.side.push_back(side);
  }
}

// Stream memory operations on a side stream: wait until `word` passes `value` (CU_STREAM_WAIT_VALUE_*
// `flags`), or write `value` once the stream's earlier work is done.
void stream_wait(cudaStream_t st, const uint64_t* word, uint64_t value, unsigned flags) {
  const CUresult r = driver::streamWaitValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, flags);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWaitValue64 failed (CUresult %d)", int(r));
}
void stream_write(cudaStream_t st, uint64_t* word, uint64_t value) {
  const CUresult r = driver::streamWriteValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, 0);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWriteValue64 failed (CUresult %d)", int(r));
}

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
  if (ch.mover == WEFT_TP_MOVER_EXCHANGE) {
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
    return;
  }
  if (ch.mover != WEFT_TP_MOVER_COPY_ENGINE) return;
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

gemm::CompletionWords scratch_words(const WeftTpPlan& plan) {
  return gemm::CompletionWords{plan.scratch_dev, plan.epoch, plan.scratch_arrivals};
}

gemm::CompletionWords launch_words(const WeftTpLaunch& l) {
  return gemm::CompletionWords{reinterpret_cast<uint64_t*>(l.done), l.seq, reinterpret_cast<uint32_t*>(l.arrivals)};
}

// dst [rows, dst_ld] <- src [rows, src_ld], `cols` bf16 each, on the plan's stream.
void copy_rows(const WeftTpPlan& plan, void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t cols,
               int64_t rows) {
  WEFT_CUDA(cudaMemcpy2DAsync(dst, size_t(dst_ld) * 2, src, size_t(src_ld) * 2, size_t(cols) * 2, size_t(rows),
                              cudaMemcpyDeviceToDevice, plan.stream));
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

// Copy-engine reduce-scatter / all-reduce: the side stream to each peer (see gemm_scatter_ce.cuh),
// for launches of class `epoch` mod 4 (every value below depends on that class only, so the same
// work can be captured once as a graph). For every chunk of the peer's rows: wait until the kernel
// has counted every half-tile of the chunk in staging, copy it into the peer's receive slot (or its
// out), advance the progress word; all-reduce then does the same for this rank's final rows into the
// peer's out. The peer tiles' counts come from tiles that wait for nothing, so these waits always
// end (and the own tiles' counts of all-reduce from tiles whose waits are bounded).
void enqueue_scatter_copies(WeftTpPlan& plan, uint64_t epoch) {
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
    // (launch_scatter_copies made this stream wait until its kernel of this launch has started).
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
// call-by-call path (enqueue_scatter_copies at every launch), which moves the same data;
// WEFT_LOG=info says so on stderr. (On the 2 x H200 host a launch's host time measured the same
// with and without the graph, so whether the capture takes there is still open.)
void capture_scatter_copies(WeftTpPlan& plan) {
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
        enqueue_scatter_copies(plan, k);
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
  const char* log = std::getenv("WEFT_LOG");
  if (log && (std::strcmp(log, "info") == 0 || std::strcmp(log, "debug") == 0))
    std::fprintf(stderr, "weft: rank %d: the copy-engine mover's side streams run call by call: capturing them failed at %s: %s\n",
                 plan.problem.rank, step, enqueue_failure.empty() ? cudaGetErrorString(error) : enqueue_failure.c_str());
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

// Our collective on the plan's stream; `last` = nothing follows it, so it publishes the launch's own
// completion, else the scratch words.
void collective(WeftTpPlan& plan, int kind, uint64_t in, uint64_t out, uint64_t count, const WeftTpLaunch& launch,
                bool last) {
  WeftCollectiveParams cp{};
  cp.size = sizeof cp;
  cp.version = 1;
  cp.kind = kind;
  cp.dtype = WEFT_BF16;
  cp.count = count;
  cp.input = in;
  cp.output = out;
  cp.stream = reinterpret_cast<uint64_t>(plan.stream);
  const gemm::CompletionWords w = last ? launch_words(launch) : scratch_words(plan);
  cp.done = reinterpret_cast<uint64_t>(w.done);
  cp.seq = w.seq;
  cp.arrivals = reinterpret_cast<uint64_t>(w.arrivals);
  const int status = weft_collective(plan.comm, &cp);
  if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
}

// The sequential path's GEMM: operands after padding (a_pad, b_pad), output where the collective
// or the copy back reads it.
WeftGemmParams sequential_gemm(const WeftTpPlan& plan) {
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  char* ws = plan.workspace;
  WeftGemmParams g{};
  g.size = sizeof g;
  g.version = 1;
  g.a = reinterpret_cast<const void*>(pa.a);
  g.lda = p.k;
  g.b = reinterpret_cast<const void*>(pa.b);
  g.ldb = p.b_nk ? p.k : p.n;
  if (ch.pad_a) {
    g.a = ws + ch.layout.a_pad.offset;
    g.lda = ch.kp;
  }
  if (ch.pad_b) {
    g.b = ws + ch.layout.b_pad.offset;
    g.ldb = p.b_nk ? ch.kp : ch.np;
  }
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM:
      g.a = ws + ch.layout.staging.offset;  // the gathered rows
      g.c = ch.pad_out ? ws + ch.layout.out_pad.offset : reinterpret_cast<void*>(pa.out);
      break;
    case WEFT_TP_GEMM_REDUCE_SCATTER:
      g.c = ws + ch.layout.staging.offset;  // the partial sums the reduce-scatter reads
      break;
    default:
      g.c = ch.pad_out ? ws + ch.layout.staging.offset : reinterpret_cast<void*>(pa.out);
  }
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.ldc = ch.np;
  g.flags = p.b_nk ? WEFT_GEMM_B_NK : 0;
  g.tile_n = ch.tile_n;
  g.group_m = ch.group_m;
  g.stream = plan.stream;
  return g;
}

void gemm_call(const WeftTpPlan& plan) {
  const WeftGemmParams g = sequential_gemm(plan);
  const int status = weft_gemm(&g);
  if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
}

// Loads every kernel a launch of this plan will start, now, while none of them is running.
// NOTES: with CUDA's lazy module loading (the default since 12.2) the first launch of a kernel loads
// its module and may first wait for the device to go idle. If a kernel launched just before waits
// for another GPU (a collective, a fused op) whose part this same host thread has yet to launch,
// that wait never ends: on the 2 x H200 host the first sequential all-gather + GEMM hung exactly so
// (the all-gather ran, the GEMM's first launch waited for it, the peer's all-gather was never
// launched) until the GPU-side timeout. CUDA documents this caveat for kernels that rely on running
// concurrently. The collectives' modules are loaded by the collective that plan creation runs
// (lib/ops/tp.ts: all-reduce) or, for the sequential path's own collective, at its first launch,
// which comes first in the launch (all-gather) or after our GEMM (the others), so nothing of this
// launch is running yet when it loads.
void preload(WeftTpPlan& plan) {
  WEFT_CUDA(fused::preload_publish());
  if (plan.choice.path == WEFT_TP_PATH_SEQUENTIAL) {
    const WeftGemmParams g = sequential_gemm(plan);
    WeftGemmChoice choice{};
    choice.size = sizeof choice;
    choice.version = 1;
    const int status = weft_gemm_choose(&g, &choice);  // sets the kernel's shared-memory opt-in: loads it
    if (status != WEFT_OK) WEFT_FAIL(status, "%s", weft_last_error());
    return;
  }
  if (plan.problem.op == WEFT_TP_ALL_GATHER_GEMM) {
    fused::AgLaunch l = plan.ag[0];
    l.gemm_ctas = 0;
    l.state.comm_ctas = 0;
    WEFT_CUDA(fused::launch_all_gather_gemm(l));
  } else {
    fused::ScatterLaunch l = plan.scatter;
    l.ctas = 0;
    WEFT_CUDA(l.state.all_reduce ? fused::launch_gemm_all_reduce(l) : fused::launch_gemm_reduce_scatter(l));
  }
}

void launch_sequential(WeftTpPlan& plan, const WeftTpLaunch& launch) {
  const tp::Problem& p = plan.problem;
  const tp::Choice& ch = plan.choice;
  const WeftTpParams& pa = plan.params;
  char* ws = plan.workspace;
  void* out = reinterpret_cast<void*>(pa.out);
  const WeftGemmParams g = sequential_gemm(plan);
  const int64_t a_rows = p.op == WEFT_TP_ALL_GATHER_GEMM ? p.m_shard : p.m;
  if (ch.pad_a) copy_rows(plan, ws + ch.layout.a_pad.offset, ch.kp, reinterpret_cast<const void*>(pa.a), p.k, p.k, a_rows);
  if (ch.pad_b) {
    const int64_t rows = p.b_nk ? p.n : p.k, cols = p.b_nk ? p.k : p.n;
    copy_rows(plan, ws + ch.layout.b_pad.offset, g.ldb, reinterpret_cast<const void*>(pa.b), cols, cols, rows);
  }
  switch (p.op) {
    case WEFT_TP_ALL_GATHER_GEMM: {
      // The rows to gather: a, or its padded copy (which has the same row stride as the gathered rows).
      const uint64_t rows = reinterpret_cast<uint64_t>(ch.pad_a ? static_cast<const void*>(ws + ch.layout.a_pad.offset)
                                                                : reinterpret_cast<const void*>(pa.a));
      collective(plan, WEFT_ALL_GATHER, rows, reinterpret_cast<uint64_t>(g.a), uint64_t(p.m_shard) * g.lda, launch, false);
      gemm_call(plan);
      if (ch.pad_out) copy_rows(plan, out, p.n, g.c, ch.np, p.n, p.m);
      if (pa.gathered) copy_rows(plan, reinterpret_cast<void*>(pa.gathered), p.k, g.a, g.lda, p.k, p.m);
      WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      break;
    }
    case WEFT_TP_GEMM_REDUCE_SCATTER: {
      gemm_call(plan);  // into the partial sums [W * m_shard, np]; rows past m stay zero
      void* target = ch.pad_out ? ws + ch.layout.out_pad.offset : out;
      collective(plan, WEFT_REDUCE_SCATTER, reinterpret_cast<uint64_t>(g.c), reinterpret_cast<uint64_t>(target),
                 uint64_t(p.m_shard) * ch.np, launch, !ch.pad_out);
      if (ch.pad_out) {
        copy_rows(plan, out, p.n, target, ch.np, p.n, p.m_shard);
        WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      }
      break;
    }
    default: {
      gemm_call(plan);
      collective(plan, WEFT_ALL_REDUCE, reinterpret_cast<uint64_t>(g.c), reinterpret_cast<uint64_t>(g.c),
                 uint64_t(p.m) * ch.np, launch, !ch.pad_out);
      if (ch.pad_out) {
        copy_rows(plan, out, p.n, g.c, ch.np, p.n, p.m);
        WEFT_CUDA(fused::launch_publish(plan.scratch_dev, plan.epoch, launch_words(launch), plan.stream));
      }
    }
  }
}

// A launch is its kernels (and the sequential path's steps) on the plan's stream, then the copy-engine
// mover's side-stream work. A launch that fails part-way leaves this rank out of step with its peers;
// the error says so through the status, and the peers' waits for it are bounded.
void launch_kernels(WeftTpPlan& plan, const WeftTpLaunch& launch) {
  if (plan.inter) {
    tp::internode_launch(*plan.inter, *plan.comm, launch);
    return;
  }
  ++plan.epoch;
  if (plan.choice.path == WEFT_TP_PATH_SEQUENTIAL) launch_sequential(plan, launch);
  else if (plan.problem.op == WEFT_TP_ALL_GATHER_GEMM) launch_all_gather_fused(plan, launch);
  else launch_scatter_fused(plan, launch);
}

void launch_copies(WeftTpPlan& plan) {
  if (plan.inter || plan.choice.path == WEFT_TP_PATH_SEQUENTIAL || plan.side.empty()) return;
  if (plan.problem.op == WEFT_TP_ALL_GATHER_GEMM) enqueue_all_gather_copies(plan);
  else launch_scatter_copies(plan);
}

void release(WeftTpPlan& plan) {
  for (cudaGraphExec_t& g : plan.copies) {
    if (g) (void)cudaGraphExecDestroy(g);
    g = nullptr;
  }
  for (cudaEvent_t e : plan.capture_events) (void)cudaEventDestroy(e);
  plan.capture_events.clear();
  for (cudaStream_t s : plan.side) (void)cudaStreamDestroy(s);
  plan.side.clear();
  if (plan.scratch_arrivals) (void)cudaFree(plan.scratch_arrivals);
  plan.scratch_arrivals = nullptr;
  if (plan.scratch_host) (void)cudaFreeHost(plan.scratch_host);
  plan.scratch_host = nullptr;
}

}  // namespace

extern "C" {

WEFT_API int weft_tp_choose(WeftComm* comm, const WeftTpParams* params, WeftTpChoice* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    validate(c, params);
    WEFT_REQUIRE(out && out->size == sizeof(WeftTpChoice) && out->version == 1,
                 "out must be a WeftTpChoice with size %zu and version 1", sizeof(WeftTpChoice));
    fill_choice(c.inter.nodes > 1 ? tp::internode_choose(c, *params) : tp::choose(c, *params), out);
  });
}

WEFT_API int weft_tp_plan_create(WeftComm* comm, const WeftTpParams* params, WeftTpPlan** out_plan) {
  return guard([&] {
    WeftComm& c = comm::require(comm, true);
    validate(c, params);
    WEFT_REQUIRE(out_plan, "out_plan must not be NULL");
    validate_tensors(c, *params);
    const tp::Choice choice = c.inter.nodes > 1 ? tp::internode_choose(c, *params) : tp::choose(c, *params);
    WEFT_REQUIRE(params->workspace_bytes >= choice.layout.total,
                 "workspace_bytes (%llu) is smaller than the plan needs (%llu, weft_tp_choose)",
                 (unsigned long long)params->workspace_bytes, (unsigned long long)choice.layout.total);
    require_symmetric(c, params->workspace, params->workspace_bytes, "workspace");
    DeviceGuard g(c.device);
    auto plan = std::make_unique<WeftTpPlan>();
    plan->comm = comm;
    plan->params = *params;
    plan->problem = tp::problem_of(c, *params);
    plan->choice = choice;
    plan->stream = reinterpret_cast<cudaStream_t>(params->stream);
    if (plan->stream) {
      int sd = -1;
      WEFT_CUDA(cudaStreamGetDevice(plan->stream, &sd));
      WEFT_REQUIRE(sd == c.device, "stream belongs to device %d but the communicator's rank is on device %d", sd, c.device);
    }
    plan->workspace = reinterpret_cast<char*>(params->workspace);
    try {
      void* host = nullptr;
      WEFT_CUDA(cudaHostAlloc(&host, 16, cudaHostAllocMapped | cudaHostAllocPortable));
      plan->scratch_host = static_cast<uint64_t*>(host);
      plan->scratch_host[0] = plan->scratch_host[1] = 0;
      void* dev = nullptr;
      WEFT_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
      plan->scratch_dev = static_cast<uint64_t*>(dev);
      WEFT_CUDA(cudaMalloc(reinterpret_cast<void**>(&plan->scratch_arrivals), 8));
      WEFT_CUDA(cudaMemsetAsync(plan->scratch_arrivals, 0, 8, plan->stream));
      // Flags start at 0 and padding stays 0 (stream-ordered; the caller orders it before any peer's
      // first launch with a barrier on the same stream).
      WEFT_CUDA(cudaMemsetAsync(plan->workspace, 0, choice.layout.total, plan->stream));
      if (c.inter.nodes > 1) {
        plan->inter = tp::internode_build(c, *params, choice, plan->workspace, plan->stream);
      } else {
        if (choice.path == WEFT_TP_PATH_FUSED) {
          if (plan->problem.op == WEFT_TP_ALL_GATHER_GEMM) {
            build_all_gather(*plan);
          } else {
            build_scatter(*plan);
            if (plan->scatter.state.copy_engine) capture_scatter_copies(*plan);
          }
        }
        preload(*plan);
      }
    } catch (...) {
      release(*plan);
      throw;
    }
    *out_plan = plan.release();
  });
}

WEFT_API int weft_tp_plan_launch(WeftTpPlan* plan, const WeftTpLaunch* launch) {
  return weft_tp_plans_launch(&plan, launch, 1);
}

WEFT_API int weft_tp_plans_launch(WeftTpPlan* const* plans, const WeftTpLaunch* launches, int32_t count) {
  return guard([&] {
    WEFT_REQUIRE(plans && count > 0, "plans must hold count > 0 entries");
    WEFT_REQUIRE(launches, "launch must not be NULL");
    for (int32_t i = 0; i < count; ++i) {
      WEFT_REQUIRE(plans[i], "plan %d must not be NULL", i);
      WEFT_REQUIRE(launches[i].size == sizeof(WeftTpLaunch) && launches[i].version == 1,
                   "launch %d must be a WeftTpLaunch with size %zu and version 1", i, sizeof(WeftTpLaunch));
      WEFT_REQUIRE(launches[i].done != 0 && launches[i].arrivals != 0, "launch %d: done and arrivals are required", i);
      comm::require(plans[i]->comm, true);
      for (int32_t j = 0; j < i; ++j) WEFT_REQUIRE(plans[j] != plans[i], "plans %d and %d are the same plan", j, i);
    }
    // Every kernel first, then every plan's copy-engine work: a rank's kernel is never queued behind
    // another rank's host-side enqueue (bench/DECISIONS.md, "Every rank's kernel is queued before any
    // plan's copies"). Plans whose kernels were launched get
    // their copies even if a later kernel launch fails (their kernels wait for them).
    int32_t launched = 0;
    try {
      for (; launched < count; ++launched) {
        DeviceGuard g(plans[launched]->comm->device);
        launch_kernels(*plans[launched], launches[launched]);
      }
    } catch (...) {
      for (int32_t i = 0; i < launched; ++i) {
        try {
          DeviceGuard g(plans[i]->comm->device);
          launch_copies(*plans[i]);
        } catch (...) {
          // the first failure is the one to report
        }
      }
      throw;
    }
    for (int32_t i = 0; i < count; ++i) {
      DeviceGuard g(plans[i]->comm->device);
      launch_copies(*plans[i]);
    }
  });
}

WEFT_API int weft_tp_plan_destroy(WeftTpPlan* plan) {
  return guard([&] {
    if (!plan) return;
    std::unique_ptr<WeftTpPlan> owned(plan);
    DeviceGuard g(plan->comm->device);
    cudaError_t e = cudaStreamSynchronize(plan->stream);
    for (cudaStream_t s : plan->side) {
      const cudaError_t se = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = se;
    }
    release(*plan);
    WEFT_CUDA(e);
  });
}

}  // extern "C"
