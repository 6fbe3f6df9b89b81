// dispatch.cpp — weft_moe_dispatch_choose / create / launch / destroy / report: validates a
// dispatch, sizes its workspace (cuda/moe/moe.h, dispatch_layout), builds the kernel's arguments
// once per plan and launches it (one kernel per launch, nothing else on the stream).
#include <cuda_runtime_api.h>


#include "comm/call_checks.hpp"
#include "moe/common.hpp"
#include "status.hpp"

using namespace weft;

struct WeftMoeDispatchPlan : weft::moe::LayoutPlan {
  WeftMoeDispatchPlan() : LayoutPlan(weft::moe::PlanKind::kDispatch) {}
};

namespace {

constexpr char kOp[] = "weft_moe_dispatch";

struct Shape {
  int64_t max_tokens, capacity;
  int local_experts;
};

Shape validate(const WeftComm& c, const WeftMoeDispatchParams* p, const char* op) {
  WEFT_REQUIRE(p, "%s: params must not be NULL", op);
  WEFT_REQUIRE(p->size == sizeof(WeftMoeDispatchParams) && p->version == 1,
               "%s: params->size/version must be sizeof(WeftMoeDispatchParams) (%zu) and 1 (got %u, %u)", op,
               sizeof(WeftMoeDispatchParams), p->size, p->version);
  WEFT_REQUIRE((p->flags & ~(WEFT_MOE_ROUTE | WEFT_MOE_NORMALIZE)) == 0, "%s: flags has unknown bits (0x%x)", op, p->flags);
  const int W = int(c.world);
  WEFT_REQUIRE(p->experts >= 1 && p->experts <= moe::kMaxExperts, "%s: experts must be in [1, %d] (got %d)", op,
               moe::kMaxExperts, p->experts);
  WEFT_REQUIRE(p->experts % W == 0, "%s: experts (%d) must be a multiple of the world size (%d)", op, p->experts, W);
  WEFT_REQUIRE(p->topk >= 1 && p->topk <= p->experts, "%s: topk must be in [1, experts = %d] (got %d)", op, p->experts, p->topk);
  WEFT_REQUIRE(p->hidden >= 8 && p->hidden % 8 == 0 && p->hidden <= (1 << 20),
               "%s: hidden must be a multiple of 8 in [8, 2^20] (16-byte rows; got %d)", op, p->hidden);
  WEFT_REQUIRE(p->tokens >= 0, "%s: tokens must be >= 0 (got %lld)", op, (long long)p->tokens);
  const int64_t max_tokens = p->max_tokens == 0 ? p->tokens : p->max_tokens;
  WEFT_REQUIRE(p->tokens <= max_tokens, "%s: tokens (%lld) must be <= max_tokens (%lld)", op, (long long)p->tokens,
               (long long)max_tokens);
  const int local = p->experts / W;
  // Every row index and count is an int32 on the device.
  const int64_t worst = int64_t(W) * max_tokens * p->topk;
  WEFT_REQUIRE(worst + int64_t(local) * moe::kBlockRows < (int64_t(1) << 31),
               "%s: world x max_tokens x topk (%lld) must stay below 2^31 rows", op, (long long)worst);
  int64_t capacity = p->capacity;
  if (capacity == 0) {
    capacity = int64_t(moe::align_up(uint64_t(worst + int64_t(local) * (moe::kBlockRows - 1)), moe::kBlockRows));
    if (capacity < moe::kBlockRows) capacity = moe::kBlockRows;
  }
  WEFT_REQUIRE(capacity >= moe::kBlockRows && capacity % moe::kBlockRows == 0 && capacity < (int64_t(1) << 31),
               "%s: capacity must be a positive multiple of %d rows below 2^31 (got %lld)", op, moe::kBlockRows,
               (long long)capacity);
  WEFT_REQUIRE(p->ctas >= 0, "%s: ctas must be >= 0 (got %d)", op, p->ctas);
  if (p->flags & WEFT_MOE_ROUTE)
    WEFT_REQUIRE(p->logits_dtype == WEFT_F32 || p->logits_dtype == WEFT_BF16, "%s: logits_dtype must be WEFT_F32 or WEFT_BF16", op);
  return Shape{max_tokens, capacity, local};
}

void require_choice_out(WeftMoeDispatchChoice* out) {
  WEFT_REQUIRE(out && out->size == sizeof(WeftMoeDispatchChoice) && out->version == 1,
               "%s: out must be a WeftMoeDispatchChoice with size %zu and version 1", kOp, sizeof(WeftMoeDispatchChoice));
}

}  // namespace

namespace weft::moe {

void require_dispatch_tensors(const WeftComm& c, const WeftMoeDispatchParams& p, const char* op) {
  if (p.tokens == 0) return;
  comm::require_on_device(c, p.x, "x", op);
  WEFT_REQUIRE((p.x & 15) == 0, "%s: x (%#llx) must be 16-byte aligned", op, (unsigned long long)p.x);
  comm::require_on_device(c, p.ids, "ids", op);
  WEFT_REQUIRE((p.ids & 3) == 0, "%s: ids must be 4-byte aligned", op);
  if (p.flags & WEFT_MOE_ROUTE) {
    comm::require_on_device(c, p.logits, "logits", op);
    comm::require_on_device(c, p.weights, "weights", op);
    WEFT_REQUIRE((p.weights & 3) == 0 && (p.logits & 3) == 0, "%s: logits and weights must be 4-byte aligned", op);
  }
}

WeftMoeDispatchChoice choose_dispatch(const WeftComm& c, const WeftMoeDispatchParams& p, const char* op) {
  const Shape s = validate(c, &p, op);
  const moe::DispatchLayout l = dispatch_layout(int(c.world), p.experts, s.capacity, p.hidden, s.max_tokens * p.topk);
  WeftMoeDispatchChoice out{};
  out.size = sizeof out;
  out.version = 1;
  // Bandwidth wants many CTAs as soon as there are rows to move: ~8 rows per CTA (a decode step of
  // 128 tokens x 8 experts moves 14.7 MB at H = 7168: 128 CTAs, ~0.1 MB each).
  out.ctas = choose_ctas(c, p.ctas, (p.tokens * p.topk + 7) / 8, op);
  out.local_experts = s.local_experts;
  out.capacity = s.capacity;
  out.max_tokens = s.max_tokens;
  out.workspace_bytes = l.total;
  out.recv_offset = l.recv;
  out.row_source_offset = l.row_source;
  out.expert_offsets_offset = l.expert_offsets;
  out.expert_counts_offset = l.expert_counts;
  out.source_counts_offset = l.source_counts;
  out.arrivals_offset = l.arrivals;
  return out;
}

DispatchArgs build_dispatch_args(const WeftComm& c, const WeftMoeDispatchParams& p, const WeftMoeDispatchChoice& ch,
                                 const Report& report) {
  DispatchArgs a{};
  a.peer = peer_args(c, p.workspace, report);
  a.layout = dispatch_layout(int(c.world), p.experts, ch.capacity, p.hidden, ch.max_tokens * p.topk);
  a.x = reinterpret_cast<const uint16_t*>(p.x);
  a.ids = reinterpret_cast<int32_t*>(p.ids);
  a.weights = reinterpret_cast<float*>(p.weights);
  a.logits = reinterpret_cast<const void*>(p.logits);
  a.logits_dtype = p.logits_dtype;
  a.route = (p.flags & WEFT_MOE_ROUTE) ? 1 : 0;
  a.normalize = (p.flags & WEFT_MOE_NORMALIZE) ? 1 : 0;
  a.experts = p.experts;
  a.topk = p.topk;
  a.hidden = p.hidden;
  a.local_experts = ch.local_experts;
  a.rows_per_signal = rows_per_signal(p.hidden);
  a.pull_local = 0;
  a.tokens = p.tokens;
  a.max_tokens = ch.max_tokens;
  a.capacity = ch.capacity;
  return a;
}

}  // namespace weft::moe

extern "C" {

WEFT_API int weft_moe_dispatch_choose(WeftComm* comm, const WeftMoeDispatchParams* params, WeftMoeDispatchChoice* out) {
  return guard([&] {
    WeftComm& c = comm::require(comm, false);
    require_choice_out(out);
    *out = moe::choose_dispatch(c, *params, kOp);
  });
}

WEFT_API int weft_moe_dispatch_create(WeftComm* comm, const WeftMoeDispatchParams* params, WeftMoeDispatchPlan** out_plan) {
  return guard([&] {
    WeftComm& c = moe::require_comm(comm);
    WEFT_REQUIRE(out_plan, "%s: out_plan must not be NULL", kOp);
    const WeftMoeDispatchChoice ch = moe::choose_dispatch(c, *params, kOp);
    const WeftMoeDispatchParams& p = *params;
    moe::require_dispatch_tensors(c, p, kOp);
    moe::check_workspace(c, p.workspace, p.workspace_bytes, ch.workspace_bytes, kOp);
    moe::create_plan(c, p.stream, ch.ctas, kOp, out_plan, [&](WeftMoeDispatchPlan& plan) {
      moe::DispatchArgs& a = plan.args;
      a = moe::build_dispatch_args(c, p, ch, plan.report);
      // Counters and epochs start at 0 (stream-ordered; the caller orders it before any peer's first
      // launch with a barrier on the same stream).
      WEFT_CUDA(cudaMemsetAsync(reinterpret_cast<void*>(p.workspace), 0, a.layout.total, plan.stream));
      WEFT_CUDA(moe::preload_kernels(a.experts, a.peer.world));  // before the setup barrier (moe.h)
    });
  });
}

WEFT_API int weft_moe_dispatch_launch(WeftMoeDispatchPlan* plan, const WeftOpLaunch* launch) {
  return moe::launch_plan(plan, launch, kOp, [&](moe::CompletionWords words) {
    plan->args.peer.completion = words;
    WEFT_CUDA(moe::launch_dispatch(plan->args, plan->ctas, plan->stream));
  });
}

WEFT_API int weft_moe_dispatch_report(WeftMoeDispatchPlan* plan, const uint64_t** out_words) {
  return moe::plan_report(plan, out_words, kOp);
}

WEFT_API int weft_moe_dispatch_destroy(WeftMoeDispatchPlan* plan) { return moe::destroy_plan(plan); }

}  // extern "C"

namespace weft::moe {

const DispatchArgs& dispatch_args(const void* plan, const WeftComm** comm) {
  const auto* base = static_cast<const PlanBase*>(plan);
  WEFT_REQUIRE(base && (base->kind == PlanKind::kDispatch || base->kind == PlanKind::kDispatchGemm),
               "dispatch must be a WeftMoeDispatchPlan or a WeftMoeDispatchGemmPlan");
  const auto* layout = static_cast<const LayoutPlan*>(base);
  *comm = layout->comm;
  return layout->args;
}

}  // namespace weft::moe
