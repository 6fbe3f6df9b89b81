// dispatch_gemm.cpp — weft_moe_dispatch_gemm_choose / create / launch / destroy / report: a dispatch
// (dispatch.cpp's validation, workspace and arguments) fused with the up-projection (cuda/moe/
// dispatch_gemm.cu): the GEMM's rules, the mover, the tile width and grid, the tensor maps, built
// once per plan.
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

struct WeftMoeDispatchGemmPlan : weft::moe::LayoutPlan {
  moe::DispatchGemmLaunch launch{};
  WeftMoeDispatchGemmPlan() : LayoutPlan(weft::moe::PlanKind::kDispatchGemm) {}
};

namespace {

constexpr char kOp[] = "weft_moe_dispatch_gemm";

struct Choice {
  WeftMoeDispatchChoice dispatch;
  moe::GroupedChoice grouped;
  int mover;
};

Choice choose(const WeftComm& c, const WeftMoeDispatchParams& d, const WeftMoeExpertGemmParams* g) {
  Choice out{};
  out.dispatch = moe::choose_dispatch(c, d, kOp);
  moe::require_expert_gemm(g, WEFT_MOE_W_NK | WEFT_MOE_SWIGLU, kOp);
  WEFT_REQUIRE(g->k == 0 || g->k == d.hidden, "%s: gemm->k (%d) must be 0 or the dispatch's hidden size (%d)", kOp, g->k,
               d.hidden);
  WEFT_REQUIRE(g->mover >= WEFT_MOE_MOVER_AUTO && g->mover <= WEFT_MOE_MOVER_PULL,
               "%s: gemm->mover must be a WeftMoeMover (0, 1 or 2; got %d)", kOp, g->mover);
  // Every CTA must be resident at once (the dispatch's grid barriers): one per SM of the budget.
  const int most = int(std::min<uint32_t>(c.max_ctas, uint32_t(moe::kMaxCtas)));
  WEFT_REQUIRE(g->ctas <= most, "%s: gemm->ctas (%d) exceeds the communicator's CTAs (%d)", kOp, g->ctas, most);
  const int ctas = g->ctas ? g->ctas : most;
  // The expected rows per rank: T x k (the routing is symmetric on average) plus half a tile of
  // padding per local expert.
  const int64_t local = out.dispatch.local_experts;
  const int64_t tile_rows = (out.dispatch.max_tokens * d.topk + gemm::kTileM - 1) / gemm::kTileM + (local + 1) / 2;
  const int64_t cols = (g->flags & WEFT_MOE_SWIGLU) ? 2 * int64_t(g->n) : g->n;
  out.grouped = moe::choose_grouped_tiles(tile_rows, cols, g->tile_n, ctas);
  out.grouped.ctas = ctas;  // CTAs without tiles still do their share of the dispatch
  out.grouped.band = gemm::default_band(out.grouped.tile_n, ctas);
  // World 1: PULL, the owner's producer gathers every row from x with cp.async and no row is copied
  // (bench/DECISIONS.md, "A gathered by cp.async is fenced by its consumers": 1.08-1.09x of a plain
  // GEMM's TMA loads, against the push's copy of every row first). With peers: PUSH, one TMA box per
  // tile, until the PULL mover's mixed tiles are measured at world > 1.
  out.mover = g->mover ? g->mover : c.world == 1 ? WEFT_MOE_MOVER_PULL : WEFT_MOE_MOVER_PUSH;
  return out;
}

void require_out(const WeftComm& c, const WeftMoeExpertGemmParams& g) {
  comm::require_on_device(c, g.w, "w", kOp);
  comm::require_on_device(c, g.out, "out", kOp);
  WEFT_REQUIRE((g.out & 15) == 0, "%s: out must be 16-byte aligned", kOp);
}

void build(WeftMoeDispatchGemmPlan& plan, const WeftComm& c, const WeftMoeDispatchParams& d, const WeftMoeExpertGemmParams& g,
           const Choice& ch) {
  moe::DispatchGemmLaunch& l = plan.launch;
  plan.args = moe::build_dispatch_args(c, d, ch.dispatch, plan.report);
  plan.args.pull_local = ch.mover == WEFT_MOE_MOVER_PULL ? 1 : 0;
  const moe::DispatchArgs& a = plan.args;
  const bool swiglu = (g.flags & WEFT_MOE_SWIGLU) != 0, n_major = (g.flags & WEFT_MOE_W_NK) == 0;
  const int tile_n = ch.grouped.tile_n, tile_cols = swiglu ? tile_n / 2 : tile_n;
  const char* ws = reinterpret_cast<const char*>(d.workspace);
  const void* recv = ws + a.layout.recv;
  const uint64_t H = uint64_t(d.hidden), rows = uint64_t(ch.dispatch.capacity);
  const uint32_t tile_box[2] = {uint32_t(gemm::kTileK), uint32_t(gemm::kTileM)};
  encode_bf16(&l.recv_tile, recv, H, rows, H, tile_box, "the receive buffer");
  const int64_t E = ch.dispatch.local_experts, n = g.n, wn = swiglu ? 2 * n : n;
  const void* w = reinterpret_cast<const void*>(g.w);
  moe::encode_weights(&l.b, w, E, wn, d.hidden, n_major, 0, n, tile_n, swiglu, swiglu ? "w (gate half)" : "w");
  if (swiglu) moe::encode_weights(&l.b_up, w, E, wn, d.hidden, n_major, n, n, tile_n, true, "w (up half)");
  const uint32_t c_box[2] = {64, gemm::kTileM / 2};
  encode_bf16(&l.c, reinterpret_cast<const void*>(g.out), uint64_t(n), rows, uint64_t(n), c_box, "out");
  l.c_ptr = reinterpret_cast<void*>(g.out);
  l.ldc = n;
  l.rows = int32_t(rows);
  l.n = int32_t(n);
  l.k = d.hidden;
  l.groups = moe::layout_groups(a, ws, tile_n, tile_cols, n, ch.grouped.ctas);
  l.dispatch = a;
  l.ws = reinterpret_cast<void*>(d.workspace);
  l.tile_n = tile_n;
  l.b_n_major = n_major;
  l.swiglu = swiglu;
  l.stream = plan.stream;
}

}  // namespace

extern "C" {

WEFT_API int weft_moe_dispatch_gemm_choose(WeftComm* comm, const WeftMoeDispatchParams* dispatch, const WeftMoeExpertGemmParams* gemm,
                                           WeftMoeDispatchChoice* out_dispatch, WeftMoeExpertGemmChoice* out_gemm) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(dispatch, "%s: dispatch must not be NULL", kOp);
    WEFT_REQUIRE(!out_dispatch || (out_dispatch->size == sizeof(WeftMoeDispatchChoice) && out_dispatch->version == 1),
                 "%s: out_dispatch must be a WeftMoeDispatchChoice with size %zu and version 1", kOp, sizeof(WeftMoeDispatchChoice));
    const Choice ch = choose(c, *dispatch, gemm);
    if (out_dispatch) *out_dispatch = ch.dispatch;
    moe::write_gemm_choice(out_gemm, ch.grouped.ctas, ch.grouped.tile_n, ch.mover, kOp);
  });
}

WEFT_API int weft_moe_dispatch_gemm_create(WeftComm* comm, const WeftMoeDispatchParams* dispatch, const WeftMoeExpertGemmParams* gemm,
                                           WeftMoeDispatchGemmPlan** out_plan) {
  return guard([&] {
    WeftComm& c = moe::require_comm(comm);
    WEFT_REQUIRE(out_plan && dispatch, "%s: dispatch and out_plan must not be NULL", kOp);
    const Choice ch = choose(c, *dispatch, gemm);
    const WeftMoeDispatchParams& d = *dispatch;
    moe::require_dispatch_tensors(c, d, kOp);
    require_out(c, *gemm);
    moe::check_workspace(c, d.workspace, d.workspace_bytes, ch.dispatch.workspace_bytes, kOp);
    moe::create_plan(c, d.stream, ch.grouped.ctas, kOp, out_plan, [&](WeftMoeDispatchGemmPlan& plan) {
      build(plan, c, d, *gemm, ch);
      WEFT_CUDA(cudaMemsetAsync(reinterpret_cast<void*>(d.workspace), 0, plan.args.layout.total, plan.stream));
      // ctas = 0 only opts in: the launch's own checks (the dispatch's shared memory fits the engine's)
      // fail here rather than at the first launch; preload_kernels then loads every MoE kernel variant
      // before the setup barrier (moe.h), this one already among them.
      moe::DispatchGemmLaunch preload = plan.launch;
      preload.ctas = 0;
      WEFT_CUDA(moe::launch_dispatch_gemm(preload));
      WEFT_CUDA(moe::preload_kernels(d.experts, int(c.world)));
    });
  });
}

WEFT_API int weft_moe_dispatch_gemm_launch(WeftMoeDispatchGemmPlan* plan, const WeftOpLaunch* launch) {
  return moe::launch_plan(plan, launch, kOp, [&](moe::CompletionWords words) {
    plan->launch.completion = words;
    plan->launch.ctas = plan->ctas;
    WEFT_CUDA(moe::launch_dispatch_gemm(plan->launch));
  });
}

WEFT_API int weft_moe_dispatch_gemm_report(WeftMoeDispatchGemmPlan* plan, const uint64_t** out_words) {
  return moe::plan_report(plan, out_words, kOp);
}

WEFT_API int weft_moe_dispatch_gemm_destroy(WeftMoeDispatchGemmPlan* plan) { return moe::destroy_plan(plan); }

}  // extern "C"
