// combine.cpp — weft_moe_combine_choose / create / launch / destroy / report: a combine reads the
// layout of one dispatch plan (same communicator, same geometry) and owns its own workspace
// (cuda/moe/moe.h, combine_layout).
#include <cuda_runtime_api.h>


#include "comm/call_checks.hpp"
#include "moe/common.hpp"
#include "status.hpp"

using namespace weft;

struct WeftMoeCombinePlan : weft::moe::PlanBase {
  moe::CombineArgs args{};
  WeftMoeCombinePlan() : PlanBase(weft::moe::PlanKind::kCombine) {}
};

namespace {
constexpr char kOp[] = "weft_moe_combine";
}  // namespace

namespace weft::moe {

const DispatchArgs& validate_combine(const WeftComm& c, const WeftMoeCombineParams* p, const char* op) {
  WEFT_REQUIRE(p, "%s: params must not be NULL", op);
  WEFT_REQUIRE(p->size == sizeof(WeftMoeCombineParams) && p->version == 1,
               "%s: params->size/version must be sizeof(WeftMoeCombineParams) (%zu) and 1 (got %u, %u)", op,
               sizeof(WeftMoeCombineParams), p->size, p->version);
  const WeftComm* owner = nullptr;
  const DispatchArgs& d = dispatch_args(reinterpret_cast<const void*>(p->dispatch), &owner);
  WEFT_REQUIRE(owner == &c, "%s: dispatch belongs to another communicator", op);
  WEFT_REQUIRE(p->ctas >= 0, "%s: ctas must be >= 0 (got %d)", op, p->ctas);
  return d;
}

namespace {
CombineLayout layout_of(const WeftComm& c, const DispatchArgs& d, int64_t returned_rows) {
  return combine_layout(int(c.world), d.max_tokens, d.topk, d.hidden, returned_rows ? returned_rows : d.max_tokens * d.topk);
}
}  // namespace

WeftMoeCombineChoice choose_combine(const WeftComm& c, const WeftMoeCombineParams& p, const char* op, int64_t returned_rows) {
  const DispatchArgs& d = validate_combine(c, &p, op);
  const CombineLayout l = layout_of(c, d, returned_rows);
  WeftMoeCombineChoice out{};
  out.size = sizeof out;
  out.version = 1;
  // As many CTAs as the dispatch takes for the same rows (the pushes are the same traffic back).
  out.ctas = choose_ctas(c, p.ctas, (d.max_tokens * d.topk + 7) / 8, op);
  out.workspace_bytes = l.total;
  out.returned_offset = l.returned;
  return out;
}

CombineArgs combine_args(const WeftComm& c, const WeftMoeCombineParams& p, const DispatchArgs& d, const Report& report,
                         int64_t returned_rows) {
  CombineArgs a{};
  a.peer = peer_args(c, p.workspace, report);
  a.layout = layout_of(c, d, returned_rows);
  const char* dws = c.arena + d.peer.ws_offset;  // the dispatch plan's workspace on this rank
  a.dispatch_status = reinterpret_cast<const uint64_t*>(dws + d.layout.status);
  a.expert_offsets = reinterpret_cast<const int32_t*>(dws + d.layout.expert_offsets);
  a.row_source = reinterpret_cast<const int4*>(dws + d.layout.row_source);
  a.hidden_rows = reinterpret_cast<const uint16_t*>(p.hidden);
  a.weights = reinterpret_cast<const float*>(p.weights);
  a.out = reinterpret_cast<uint16_t*>(p.out);
  a.topk = d.topk;
  a.hidden = d.hidden;
  a.local_experts = d.local_experts;
  a.rows_per_signal = d.rows_per_signal;
  a.pieces = 0;
  a.tokens = d.tokens;
  a.max_tokens = d.max_tokens;
  return a;
}

}  // namespace weft::moe

extern "C" {

WEFT_API int weft_moe_combine_choose(WeftComm* comm, const WeftMoeCombineParams* params, WeftMoeCombineChoice* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    WEFT_REQUIRE(out && out->size == sizeof(WeftMoeCombineChoice) && out->version == 1,
                 "%s: out must be a WeftMoeCombineChoice with size %zu and version 1", kOp, sizeof(WeftMoeCombineChoice));
    *out = moe::choose_combine(c, *params, kOp);
  });
}

WEFT_API int weft_moe_combine_create(WeftComm* comm, const WeftMoeCombineParams* params, WeftMoeCombinePlan** out_plan) {
  return guard([&] {
    WeftComm& c = moe::require_comm(comm);
    WEFT_REQUIRE(out_plan, "%s: out_plan must not be NULL", kOp);
    const WeftMoeCombineChoice ch = moe::choose_combine(c, *params, kOp);
    const WeftMoeCombineParams& p = *params;
    const moe::DispatchArgs& d = moe::validate_combine(c, params, kOp);
    moe::require_combine_tensors(c, p, d, kOp);
    moe::check_workspace(c, p.workspace, p.workspace_bytes, ch.workspace_bytes, kOp);
    moe::create_plan(c, p.stream, ch.ctas, kOp, out_plan, [&](WeftMoeCombinePlan& plan) {
      plan.args = moe::combine_args(c, p, d, plan.report);
      WEFT_CUDA(cudaMemsetAsync(reinterpret_cast<void*>(p.workspace), 0, plan.args.layout.total, plan.stream));
      WEFT_CUDA(moe::preload_kernels(d.experts, d.peer.world));  // a no-op after the dispatch plan's
    });
  });
}

WEFT_API int weft_moe_combine_launch(WeftMoeCombinePlan* plan, const WeftOpLaunch* launch) {
  return moe::launch_plan(plan, launch, kOp, [&](moe::CompletionWords words) {
    plan->args.peer.completion = words;
    WEFT_CUDA(moe::launch_combine(plan->args, plan->ctas, plan->stream));
  });
}

WEFT_API int weft_moe_combine_report(WeftMoeCombinePlan* plan, const uint64_t** out_words) {
  return moe::plan_report(plan, out_words, kOp);
}

WEFT_API int weft_moe_combine_destroy(WeftMoeCombinePlan* plan) { return moe::destroy_plan(plan); }

}  // extern "C"
