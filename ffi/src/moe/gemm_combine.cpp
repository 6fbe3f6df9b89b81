// gemm_combine.cpp — weft_moe_gemm_combine_choose / create / launch / destroy / report: a combine
// (combine.cpp's validation, workspace and reduction) whose rows come from the down-projection's
// epilogue (cuda/moe/gemm_combine.cu): the GEMM kernel, then the reduction, on the plan's stream.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "comm/call_checks.hpp"
#include "gemm/gemm.h"
#include "moe/common.hpp"
#include "moe/grouped_choice.hpp"
#include "moe/maps.hpp"
#include "status.hpp"
#include "tensor_map.hpp"

using namespace weft;

struct WeftMoeGemmCombinePlan : weft::moe::PlanBase {
  moe::CombineArgs reduce{};
  moe::GemmCombineLaunch gemm{};
  int gemm_ctas = 0;
  WeftMoeGemmCombinePlan() : PlanBase(weft::moe::PlanKind::kGemmCombine) {}
};

namespace {

constexpr char kOp[] = "weft_moe_gemm_combine";

struct Choice {
  WeftMoeCombineChoice combine;
  moe::GroupedChoice grouped;
};

// At world 1 the GEMM stores its rows where they are, in the receive layout (cuda/moe/gemm_combine.cu):
// the returned region holds capacity rows, padding included; with peers one row per item (0).
int64_t returned_rows(const WeftComm& c, const moe::DispatchArgs& d) {
  return c.world == 1 ? std::max(d.max_tokens * d.topk, d.capacity) : 0;
}

Choice choose(const WeftComm& c, const WeftMoeCombineParams& p, const WeftMoeExpertGemmParams* g) {
  Choice out{};
  const moe::DispatchArgs& d = moe::validate_combine(c, &p, kOp);
  out.combine = moe::choose_combine(c, p, kOp, returned_rows(c, d));
  moe::require_expert_gemm(g, WEFT_MOE_W_NK, kOp);
  WEFT_REQUIRE(g->n == d.hidden, "%s: gemm->n (%d) must be the dispatch's hidden size (%d): the rows return to x's width", kOp,
               g->n, d.hidden);
  WEFT_REQUIRE(g->k >= 8 && g->k % 8 == 0, "%s: gemm->k (the hidden rows' width I) must be a positive multiple of 8 (got %d)",
               kOp, g->k);
  WEFT_REQUIRE(g->out == 0, "%s: gemm->out must be 0: the result is the combine's out", kOp);
  WEFT_REQUIRE(g->mover == 0, "%s: gemm->mover must be 0 (the epilogue stores the rows)", kOp);
  const int most = int(std::min<uint32_t>(c.max_ctas, uint32_t(moe::kMaxCtas)));
  WEFT_REQUIRE(g->ctas <= most, "%s: gemm->ctas (%d) exceeds the communicator's CTAs (%d)", kOp, g->ctas, most);
  const int64_t tile_rows = (d.max_tokens * d.topk + gemm::kTileM - 1) / gemm::kTileM + (d.local_experts + 1) / 2;
  out.grouped = moe::choose_grouped_tiles(tile_rows, g->n, g->tile_n, g->ctas ? g->ctas : most);
  if (g->ctas) out.grouped.ctas = g->ctas;
  return out;
}

void build(WeftMoeGemmCombinePlan& plan, const WeftComm& c, const WeftMoeCombineParams& p, const WeftMoeExpertGemmParams& g,
           const moe::DispatchArgs& d, const Choice& ch) {
  const int tile_n = ch.grouped.tile_n;
  const bool n_major = (g.flags & WEFT_MOE_W_NK) == 0;
  plan.reduce = moe::combine_args(c, p, d, plan.report, returned_rows(c, d));
  plan.reduce.pieces = int32_t((g.n + tile_n - 1) / tile_n);
  moe::GemmCombineLaunch& l = plan.gemm;
  const uint64_t rows = uint64_t(d.capacity), k = uint64_t(g.k);
  const uint32_t tile_box[2] = {uint32_t(gemm::kTileK), uint32_t(gemm::kTileM)};
  encode_bf16(&l.a, reinterpret_cast<const void*>(p.hidden), k, rows, k, tile_box, "hidden");
  moe::encode_weights(&l.b, reinterpret_cast<const void*>(g.w), d.local_experts, g.n, g.k, n_major, 0, g.n, tile_n, false, "w");
  l.rows = int32_t(rows);
  l.n = g.n;
  l.k = g.k;
  const char* dws = c.arena + d.peer.ws_offset;  // the dispatch's workspace on this rank
  l.groups = moe::layout_groups(d, dws, tile_n, tile_n, g.n, ch.grouped.ctas);
  const moe::CombineLayout& cl = plan.reduce.layout;
  char* ws = reinterpret_cast<char*>(p.workspace);
  const moe::CompletionWords failure{reinterpret_cast<uint64_t*>(ws + cl.gemm_failure), 0,
                                     reinterpret_cast<uint32_t*>(ws + cl.gemm_failure + 16)};
  l.routed = moe::RoutedRows{failure, reinterpret_cast<const int4*>(dws + d.layout.row_source), c.peer_table,
                             plan.reduce.peer.ws_offset, cl.returned, cl.arrived, cl.ready, cl.abort, cl.epoch,
                             c.timeout_ns, c.abort_dev, int32_t(c.world), int32_t(c.rank), d.topk, d.hidden};
  if (c.world == 1) {  // the rows stay in the receive layout, reduced by the dispatch's positions
    l.local_rows = true;
    const uint32_t c_box[2] = {64, gemm::kTileM / 2};
    encode_bf16(&l.c, ws + cl.returned, uint64_t(g.n), rows, uint64_t(g.n), c_box, "the returned rows");
    l.c_ptr = ws + cl.returned;
    l.ldc = g.n;
    plan.reduce.positions = reinterpret_cast<const int32_t*>(dws + d.layout.positions);
  }
  l.tile_n = tile_n;
  l.b_n_major = n_major;
  l.stream = plan.stream;
  plan.gemm_ctas = ch.grouped.ctas;
}

}  // namespace

extern "C" {

WEFT_API int weft_moe_gemm_combine_choose(WeftComm* comm, const WeftMoeCombineParams* combine, const WeftMoeExpertGemmParams* gemm,
                                          WeftMoeCombineChoice* out_combine, WeftMoeExpertGemmChoice* out_gemm) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(combine, "%s: combine must not be NULL", kOp);
    WEFT_REQUIRE(!out_combine || (out_combine->size == sizeof(WeftMoeCombineChoice) && out_combine->version == 1),
                 "%s: out_combine must be a WeftMoeCombineChoice with size %zu and version 1", kOp, sizeof(WeftMoeCombineChoice));
    const Choice ch = choose(c, *combine, gemm);
    if (out_combine) *out_combine = ch.combine;
    moe::write_gemm_choice(out_gemm, ch.grouped.ctas, ch.grouped.tile_n, 0, kOp);
  });
}

WEFT_API int weft_moe_gemm_combine_create(WeftComm* comm, const WeftMoeCombineParams* combine, const WeftMoeExpertGemmParams* gemm,
                                          WeftMoeGemmCombinePlan** out_plan) {
  return guard([&] {
    WeftComm& c = moe::require_comm(comm);
    WEFT_REQUIRE(out_plan && combine, "%s: combine and out_plan must not be NULL", kOp);
    const Choice ch = choose(c, *combine, gemm);
    const WeftMoeCombineParams& p = *combine;
    const moe::DispatchArgs& d = moe::validate_combine(c, combine, kOp);
    moe::require_combine_tensors(c, p, d, kOp);
    comm::require_on_device(c, gemm->w, "w", kOp);
    moe::check_workspace(c, p.workspace, p.workspace_bytes, ch.combine.workspace_bytes, kOp);
    moe::create_plan(c, p.stream, ch.combine.ctas, kOp, out_plan, [&](WeftMoeGemmCombinePlan& plan) {
      build(plan, c, p, *gemm, d, ch);
      WEFT_CUDA(cudaMemsetAsync(reinterpret_cast<void*>(p.workspace), 0, plan.reduce.layout.total, plan.stream));
      moe::GemmCombineLaunch preload = plan.gemm;
      preload.ctas = 0;  // only opts in (its config checked here); preload_kernels loads every variant (moe.h)
      WEFT_CUDA(moe::launch_gemm_combine(preload));
      WEFT_CUDA(moe::preload_kernels(d.experts, d.peer.world));
    });
  });
}

// The GEMM kernel, then the reduction: both tracked by the same completion would publish twice, so
// the GEMM goes untracked and the reduction, which runs after it on the stream and reads what it
// sent, publishes the launch. The GEMM's epilogue reports its failures into the workspace
// (CombineLayout::gemm_failure), and the reduction moves them into the launch's reason first.
WEFT_API int weft_moe_gemm_combine_launch(WeftMoeGemmCombinePlan* plan, const WeftOpLaunch* launch) {
  return moe::launch_plan(plan, launch, kOp, [&](moe::CompletionWords words) {
    plan->gemm.completion = moe::CompletionWords{nullptr, 0, nullptr};
    plan->gemm.ctas = plan->gemm_ctas;
    WEFT_CUDA(moe::launch_gemm_combine(plan->gemm));
    plan->reduce.peer.completion = words;
    WEFT_CUDA(moe::launch_combine(plan->reduce, plan->ctas, plan->stream));
  });
}

WEFT_API int weft_moe_gemm_combine_report(WeftMoeGemmCombinePlan* plan, const uint64_t** out_words) {
  return moe::plan_report(plan, out_words, kOp);
}

WEFT_API int weft_moe_gemm_combine_destroy(WeftMoeGemmCombinePlan* plan) { return moe::destroy_plan(plan); }

}  // extern "C"
