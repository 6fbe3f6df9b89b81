// common.hpp — what the MoE plans (dispatch.cpp, combine.cpp, dispatch_gemm.cpp, gemm_combine.cpp)
// share: the report words in pinned host-mapped memory, the peer arguments of a kernel, completion
// words from a launch struct, and the create / launch / report / destroy steps of their C entries.
#pragma once

#include <cstdint>

#include "comm/comm.hpp"
#include "moe/moe.h"
#include "weft.h"

namespace weft::moe {

// Four host-mapped words a failed launch fills before it reports (weft.h, WeftMoeFailure).
struct Report {
  uint64_t* host = nullptr;
  uint64_t* device = nullptr;
  void allocate();
  void release();
};

// What every MoE plan holds beside its kernel's arguments. `kind` tells the plans that carry a
// receive layout (a combine's `dispatch` may be either) from the others.
enum class PlanKind : uint32_t { kDispatch = 0x6d6f6531, kDispatchGemm = 0x6d6f6532, kCombine = 0x6d6f6533, kGemmCombine = 0x6d6f6534 };
struct PlanBase {
  PlanKind kind;
  WeftComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  int ctas = 0;
  Report report;
  explicit PlanBase(PlanKind k) : kind(k) {}
};

// A plan whose launches lay out a receive buffer: the dispatch, and the dispatch + GEMM.
struct LayoutPlan : PlanBase {
  DispatchArgs args{};
  using PlanBase::PlanBase;
};

// The plan's stream, checked to be on the communicator's device.
cudaStream_t plan_stream(const WeftComm& c, uint64_t stream, const char* op);

// workspace_bytes >= need, in this rank's symmetric heap, 256-byte aligned.
void check_workspace(const WeftComm& c, uint64_t workspace, uint64_t workspace_bytes, uint64_t need, const char* op);

// weft_moe_*_create after the op's own checks: the communicator's device current, a new Plan with
// `c`, its stream (checked) and `ctas`, its report words, then `fill(plan)` (kernel arguments, the
// workspace's zeroing, kernel preloads); a throw from either frees the report words and the plan.
template <class Plan, class Fill>
void create_plan(WeftComm& c, uint64_t stream, int ctas, const char* op, Plan** out_plan, Fill&& fill);

// weft_moe_*_launch: checks the plan and the launch, makes the plan's device current and calls
// `run(completion)`.
template <class Plan, class Run>
int launch_plan(Plan* plan, const WeftOpLaunch* launch, const char* op, Run&& run);

// weft_moe_*_report: the plan's host-mapped report words.
int plan_report(const PlanBase* plan, const uint64_t** out_words, const char* op);

// weft_moe_*_destroy: waits for the plan's stream, then frees what the plan owns and the plan
// (NULL: nothing). Plan is the exported type, so its own members are destroyed too.
template <class Plan>
int destroy_plan(Plan* plan);

// destroy_plan's wait and frees, before the plan itself is deleted.
void release_plan(PlanBase& plan);

// Rank, world, peer table and the workspace's place in the arena: the same for every kernel of a plan.
PeerArgs peer_args(const WeftComm& c, uint64_t workspace, const Report& report);

// launch->done may be 0 (untracked: graph capture); then arrivals is not used either.
CompletionWords completion_of(const WeftOpLaunch* launch);

// Checks a launch struct and that the plan's communicator is still connected.
void require_launch(const WeftComm* comm, const WeftOpLaunch* launch);

// The communicator a plan may run on: connected, one node (the MoE ops are NVLink-only for now).
WeftComm& require_comm(WeftComm* comm);

// The CTAs a kernel of `work` parallel units gets: `requested` (validated) or min(max_ctas, work).
int choose_ctas(const WeftComm& c, int32_t requested, int64_t work, const char* op);

// The kernel arguments (layout, workspace) and communicator of a layout plan (a WeftMoeDispatchPlan
// or a WeftMoeDispatchGemmPlan), for the combine that reads its layout.
const DispatchArgs& dispatch_args(const void* plan, const WeftComm** comm);

// Rows [0, tokens) of every expert's layout arrays for a grouped GEMM over the receive layout of
// `d` (this rank's workspace at `ws`): a group per local expert, its rows counted from its offset;
// own rows first (the owner's) when there are peers; no tiles when the layout failed.
Groups layout_groups(const DispatchArgs& d, const char* ws, int tile_n, int tile_cols, int64_t n_out, int ctas);

// dispatch.cpp: the dispatch's validation, choice and kernel arguments, which the dispatch + GEMM
// (dispatch_gemm.cpp) shares.
WeftMoeDispatchChoice choose_dispatch(const WeftComm& c, const WeftMoeDispatchParams& p, const char* op);
void require_dispatch_tensors(const WeftComm& c, const WeftMoeDispatchParams& p, const char* op);
DispatchArgs build_dispatch_args(const WeftComm& c, const WeftMoeDispatchParams& p, const WeftMoeDispatchChoice& ch,
                                 const Report& report);

// combine.cpp: the combine's validation, choice and kernel arguments, which the GEMM + combine
// (gemm_combine.cpp) shares. returned_rows: the rows of the workspace's returned region
// (CombineLayout; 0: one per item, max_tokens x topk).
const DispatchArgs& validate_combine(const WeftComm& c, const WeftMoeCombineParams* p, const char* op);
WeftMoeCombineChoice choose_combine(const WeftComm& c, const WeftMoeCombineParams& p, const char* op, int64_t returned_rows = 0);
void require_combine_tensors(const WeftComm& c, const WeftMoeCombineParams& p, const DispatchArgs& d, const char* op);
CombineArgs combine_args(const WeftComm& c, const WeftMoeCombineParams& p, const DispatchArgs& d, const Report& report,
                         int64_t returned_rows = 0);

// Checks a WeftMoeExpertGemmParams struct's header and flags (the op's own rules come after).
void require_expert_gemm(const WeftMoeExpertGemmParams* g, uint32_t flags_allowed, const char* op);
void write_gemm_choice(WeftMoeExpertGemmChoice* out, int ctas, int tile_n, int mover, const char* op);

}  // namespace weft::moe

#include <memory>

#include "device_guard.hpp"
#include "status.hpp"

template <class Plan, class Fill>
void weft::moe::create_plan(WeftComm& c, uint64_t stream, int ctas, const char* op, Plan** out_plan, Fill&& fill) {
  DeviceGuard g(c.device);
  auto plan = std::make_unique<Plan>();
  plan->comm = &c;
  plan->stream = plan_stream(c, stream, op);
  plan->ctas = ctas;
  try {
    plan->report.allocate();
    fill(*plan);
  } catch (...) {
    plan->report.release();
    throw;
  }
  *out_plan = plan.release();
}

template <class Plan, class Run>
int weft::moe::launch_plan(Plan* plan, const WeftOpLaunch* launch, const char* op, Run&& run) {
  return guard([&] {
    WEFT_REQUIRE(plan, "%s: plan must not be NULL", op);
    require_launch(plan->comm, launch);
    DeviceGuard g(plan->comm->device);
    run(completion_of(launch));
  });
}

template <class Plan>
int weft::moe::destroy_plan(Plan* plan) {
  return guard([&] {
    if (!plan) return;
    std::unique_ptr<Plan> owned(plan);
    release_plan(*plan);
  });
}
