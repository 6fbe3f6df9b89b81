// node_plan.cpp — the inter-node TP plan: allGatherGemm and gemmReduceScatter on a communicator that
// spans several nodes (cuda/fused/all_gather_gemm_across_nodes.cu, gemm_reduce_scatter_across_nodes.cu: NVLink
// inside the node, the proxy between nodes, in one kernel). Each op has one such candidate, the
// fused kernel with mover CTAs (a copy engine cannot reach another node, and no sequential path is
// built across nodes yet), so its cost is a validation plus a few sizes, not a cost model.
//
// Workspace:
//   all-gather      flags u64 [world][chunks], then landing [2][world * m_shard][k] bf16
//   reduce-scatter  stored u64 [2 tiles_m][tiles_n], then partial [2][M][N] bf16
#include <algorithm>

#include "device_guard.hpp"
#include "gemm/gemm.h"
#include "status.hpp"
#include "tensor_map.hpp"
#include "tp/candidate.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

namespace {

// What both multi-node states take from the communicator and the plan's choice: the nodes, this
// rank's place in its node, and how its shard splits into chunks and CTAs.
template <class State>
void set_shard_split(State& s, const WeftComm& c, const tp::Choice& ch, int64_t m_shard) {
  s.inter = c.inter;
  s.timeout_ns = c.timeout_ns;
  s.local_rank = int32_t(c.rank);
  s.local_size = int32_t(c.world);
  s.m_shard = int32_t(m_shard);
  s.chunk_rows = ch.chunk_rows;
  s.chunks = int32_t(m_shard / ch.chunk_rows);
  s.comm_ctas = ch.comm_ctas;
  s.group_m = ch.group_m;
}

constexpr char kOp[] = "weft_tp (across nodes)";

uint64_t align(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

using comm::on_rank;

// Validates the call for the multi-node path (throws WEFT_E_UNSUPPORTED for what it cannot run,
// WEFT_E_INVALID naming a bad override) and chooses tile, chunks and the CTA split.
Estimate cost(const Call& call, Choice& ch) {
  const Placement& x = call.place;
  if (x.nodes <= 1) return Estimate::not_here("one node: the single-node candidates run it");
  const WeftTpParams& p = call.params;
  const int64_t W = x.global_world;
  const bool scatter = p.op == WEFT_TP_GEMM_REDUCE_SCATTER;
  if (p.gathered != 0) WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s: gatheredA is not produced across nodes yet", kOp);
  if (p.path == WEFT_TP_PATH_SEQUENTIAL) WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s: there is no sequential path across nodes (path 'fused' or 'auto')", kOp);
  if (p.mover == WEFT_TP_MOVER_COPY_ENGINE)
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s: the copy-engine mover cannot reach another node (mover 'ctas' or 'auto')", kOp);
  WEFT_REQUIRE(p.path >= WEFT_TP_PATH_AUTO && p.path <= WEFT_TP_PATH_SEQUENTIAL, "%s: path %d is not a WeftTpPath", kOp, p.path);
  WEFT_REQUIRE(p.mover >= WEFT_TP_MOVER_AUTO && p.mover <= WEFT_TP_MOVER_COPY_ENGINE, "%s: mover %d is not a WeftTpMover", kOp, p.mover);
  const int64_t m_shard = (p.m + W - 1) / W;
  if (m_shard % gemm::kTileM != 0 || (scatter && m_shard * W != p.m) || p.n % 8 != 0 || p.k % 8 != 0)
    WEFT_FAIL(WEFT_E_UNSUPPORTED,
              "%s: needs M / world a whole multiple of %d rows and n, k multiples of 8 (got M %lld over %lld ranks = %lld rows, n %lld, k %lld)",
              kOp, gemm::kTileM, (long long)p.m, (long long)W, (long long)m_shard, (long long)p.n, (long long)p.k);
  if (x.world > fused::kMaxLocalRanks)
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s: at most %d ranks per node (got %d)", kOp, fused::kMaxLocalRanks, x.world);
  // What crosses to each other node per call: a rank's rows of A, or an owner's rows of the sum.
  const uint64_t shard_bytes = uint64_t(m_shard) * uint64_t(scatter ? p.n : p.k) * 2;
  if (shard_bytes > x.slot_bytes)
    WEFT_FAIL(WEFT_E_UNSUPPORTED,
              "%s: one call sends %llu bytes to each other node but the inter-node staging holds %llu per node (create the communicator with a larger interNodeBytes)",
              kOp, (unsigned long long)shard_bytes, (unsigned long long)x.slot_bytes);

  ch.tile_n = p.tile_n ? p.tile_n : (p.n >= 2048 ? 256 : 128);
  WEFT_REQUIRE(fused::all_gather_gemm_across_nodes_supported(ch.tile_n), "%s: tile_n must be 128 or 256 (got %d)", kOp, ch.tile_n);
  // Chunks of up to 4 tile rows: small enough that the GEMM starts on the first arrivals, large
  // enough that a proxy command moves >= 128 rows (k = 4096: 1 MiB).
  const int64_t shard_tiles = m_shard / gemm::kTileM;
  int64_t per_chunk = 4;
  while (shard_tiles % per_chunk != 0) --per_chunk;
  ch.chunk_rows = int(per_chunk * gemm::kTileM);
  const int64_t chunks = m_shard / ch.chunk_rows;
  if (chunks > int64_t(coll::kMaxCtas))
    WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s: %lld chunks of %d rows exceed the %u signal words per node", kOp, (long long)chunks,
              ch.chunk_rows, coll::kMaxCtas);
  ch.group_m = p.group_m ? p.group_m : 1;
  const int64_t band_unit = scatter ? shard_tiles : per_chunk;
  WEFT_REQUIRE(ch.group_m >= 1 && band_unit % ch.group_m == 0, "%s: group_m must divide %s %lld tile rows (got %d)", kOp,
               scatter ? "a shard's" : "a chunk's", (long long)band_unit, ch.group_m);
  const int64_t items = chunks * x.nodes;
  ch.comm_ctas = p.comm_ctas ? p.comm_ctas : int(std::min<int64_t>(8, items));
  WEFT_REQUIRE(ch.comm_ctas >= 1 && ch.comm_ctas < x.sm_count, "%s: comm_ctas must be in [1, %d) (got %d)", kOp, x.sm_count,
               ch.comm_ctas);
  ch.gemm_ctas = x.sm_count - ch.comm_ctas;
  return Estimate::of(0);  // the only candidate across nodes: nothing to compare it with
}

void layout(const Call& call, Choice& ch) {
  const WeftTpParams& p = call.params;
  const int64_t W = call.place.global_world;
  const int64_t m_shard = (p.m + W - 1) / W;
  if (p.op == WEFT_TP_GEMM_REDUCE_SCATTER) {
    const uint64_t tiles_m = uint64_t(p.m) / gemm::kTileM;
    const uint64_t tiles_n = uint64_t((p.n + ch.tile_n - 1) / ch.tile_n);
    ch.layout.stored = Region{0, align(2 * tiles_m * tiles_n * 8, 256)};
    ch.layout.staging = Region{align(ch.layout.stored.bytes, 4096), 2 * uint64_t(p.m) * uint64_t(p.n) * 2};
    ch.layout.total = ch.layout.staging.offset + ch.layout.staging.bytes;
  } else {
    const uint64_t shard_bytes = uint64_t(m_shard) * uint64_t(p.k) * 2;
    ch.layout.flags = Region{0, align(uint64_t(W) * (m_shard / ch.chunk_rows) * 8, 256)};
    ch.layout.landing = Region{align(ch.layout.flags.bytes, 4096), 2 * uint64_t(W) * shard_bytes};
    ch.layout.total = ch.layout.landing.offset + ch.layout.landing.bytes;
  }
}

std::unique_ptr<NodePlanLaunch> build_scatter(const WeftComm& c, const WeftTpParams& p, const tp::Choice& ch, char* workspace,
                                              cudaStream_t stream) {
  const coll::InterNode& x = c.inter;
  const int64_t m_shard = p.m / x.world;
  const bool b_nk = (p.flags & WEFT_GEMM_B_NK) != 0;
  const gemm::Boxes boxes = gemm::box_dims(gemm::TileConfig{ch.tile_n, 1, 1}, !b_nk, false);
  const uint64_t slot_bytes = uint64_t(p.m) * p.n * 2;
  char* stored = workspace + ch.layout.stored.offset;
  char* partial = workspace + ch.layout.staging.offset;
  auto plan = std::make_unique<NodePlanLaunch>();
  plan->scatter = true;
  for (int parity = 0; parity < 2; ++parity) {
    fused::InterRsLaunch& l = plan->rs[parity];
    encode_bf16(&l.a, reinterpret_cast<void*>(p.a), p.k, p.m, p.k, boxes.a, "a");
    if (b_nk) encode_bf16(&l.b, reinterpret_cast<void*>(p.b), p.k, p.n, p.k, boxes.b, "b");
    else encode_bf16(&l.b, reinterpret_cast<void*>(p.b), p.n, p.k, p.n, boxes.b, "b");
    encode_bf16(&l.c, partial + parity * slot_bytes, p.n, p.m, p.n, boxes.c, "partial");
    fused::InterRsState& s = l.state;
    for (uint32_t q = 0; q < c.world; ++q) {
      s.stored[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, stored));
      s.partial[q] = on_rank(c, q, partial + parity * slot_bytes);
    }
    s.out = reinterpret_cast<char*>(p.out);
    set_shard_split(s, c, ch, m_shard);
    s.tiles_n = int32_t((p.n + ch.tile_n - 1) / ch.tile_n);
    s.n = int32_t(p.n);
    set_gemm_shape(l, p.m, p.n, p.k, b_nk, ch, stream);
  }
  fused::InterRsLaunch load = plan->rs[0];
  load.gemm_ctas = 0;
  WEFT_CUDA(fused::launch_gemm_reduce_scatter_across_nodes(load));
  return plan;
}

std::unique_ptr<NodePlanLaunch> build_all_gather(const WeftComm& c, const WeftTpParams& p, const tp::Choice& ch, char* workspace,
                                                 cudaStream_t stream) {
  const coll::InterNode& x = c.inter;
  const int64_t W = x.world;
  const int64_t m_shard = (p.m + W - 1) / W;
  const bool b_nk = (p.flags & WEFT_GEMM_B_NK) != 0;
  const gemm::Boxes boxes = gemm::box_dims(gemm::TileConfig{ch.tile_n, 1, 1}, !b_nk, false);
  const uint64_t slot_bytes = uint64_t(W) * m_shard * p.k * 2;
  char* flags = workspace + ch.layout.flags.offset;
  char* landing = workspace + ch.layout.landing.offset;
  auto plan = std::make_unique<NodePlanLaunch>();
  for (int parity = 0; parity < 2; ++parity) {
    fused::InterAgLaunch& l = plan->ag[parity];
    encode_bf16(&l.landing, landing + parity * slot_bytes, p.k, uint64_t(W) * m_shard, p.k, boxes.a, "landing");
    if (b_nk) encode_bf16(&l.b, reinterpret_cast<void*>(p.b), p.k, p.n, p.k, boxes.b, "b");
    else encode_bf16(&l.b, reinterpret_cast<void*>(p.b), p.n, p.k, p.n, boxes.b, "b");
    encode_bf16(&l.c, reinterpret_cast<void*>(p.out), p.n, p.m, p.n, boxes.c, "out");
    fused::InterAgState& s = l.state;
    encode_bf16(&s.a_local, reinterpret_cast<void*>(p.a), p.k, m_shard, p.k, boxes.a, "a");
    for (uint32_t q = 0; q < c.world; ++q) {
      s.flags[q] = reinterpret_cast<uint64_t*>(on_rank(c, q, flags));
      s.landing[q] = on_rank(c, q, landing + parity * slot_bytes);
    }
    s.a = reinterpret_cast<const char*>(p.a);
    set_shard_split(s, c, ch, m_shard);
    s.row_bytes = int32_t(p.k * 2);
    set_gemm_shape(l, p.m, p.n, p.k, b_nk, ch, stream);
  }
  // Loads the kernel now, while nothing of this plan runs (see build_and_preload() in abi.cpp).
  fused::InterAgLaunch load = plan->ag[0];
  load.gemm_ctas = 0;
  WEFT_CUDA(fused::launch_all_gather_gemm_across_nodes(load));
  return plan;
}

void build(WeftTpPlan& plan) {
  const WeftComm& c = *plan.comm;
  plan.nodes = plan.problem.op == WEFT_TP_GEMM_REDUCE_SCATTER
                   ? build_scatter(c, plan.params, plan.choice, plan.workspace, plan.stream)
                   : build_all_gather(c, plan.params, plan.choice, plan.workspace, plan.stream);
}

// Takes the communicator's next epoch (the kernel shares the hierarchical collectives' staging and
// signals) and launches; a launch that failed gives it back.
void launch(WeftTpPlan& tp_plan, const WeftOpLaunch& launch) {
  NodePlanLaunch& plan = *tp_plan.nodes;
  WeftComm& c = *tp_plan.comm;
  const uint64_t epoch = ++c.epoch;
  const gemm::CompletionWords words{reinterpret_cast<uint64_t*>(launch.done), launch.seq,
                                    reinterpret_cast<uint32_t*>(launch.arrivals)};
  cudaError_t e;
  if (plan.scatter) {
    fused::InterRsLaunch& l = plan.rs[epoch & 1];
    l.state.epoch = epoch;
    l.completion = words;
    e = fused::launch_gemm_reduce_scatter_across_nodes(l);
  } else {
    fused::InterAgLaunch& l = plan.ag[epoch & 1];
    l.state.epoch = epoch;
    l.completion = words;
    e = fused::launch_all_gather_gemm_across_nodes(l);
  }
  // A launch that failed never ran: give its epoch back so that the ranks stay in step.
  if (e != cudaSuccess) --c.epoch;
  WEFT_CUDA(e);
}

}  // namespace

const Candidate kAllGatherAcrossNodes{"all-gather + GEMM across nodes (NVLink, then the proxy)", WEFT_TP_ALL_GATHER_GEMM,
                                      WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_CTAS, forced_by(WEFT_TP_MOVER_CTAS), cost, layout, build,
                                      launch, nullptr};
// Reported as mover NONE: the reduce-scatter's epilogue stores partials that its comm CTAs move.
const Candidate kReduceScatterAcrossNodes{"GEMM + reduce-scatter across nodes (NVLink, then the proxy)", WEFT_TP_GEMM_REDUCE_SCATTER,
                                          WEFT_TP_PATH_FUSED, WEFT_TP_MOVER_NONE, forced_by(WEFT_TP_MOVER_CTAS), cost, layout, build,
                                          launch, nullptr};

}  // namespace weft::tp
