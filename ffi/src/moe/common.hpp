// common.hpp — what the MoE plans (dispatch.cpp, combine.cpp) share: the report words in pinned
// host-mapped memory, the peer arguments of a kernel, completion words from a launch struct.
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

// What every MoE plan holds beside its kernel's arguments.
struct PlanBase {
  WeftComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  int ctas = 0;
  Report report;
};

// The plan's stream, checked to be on the communicator's device.
cudaStream_t plan_stream(const WeftComm& c, uint64_t stream, const char* op);

// workspace_bytes >= need, in this rank's symmetric heap, 256-byte aligned.
void check_workspace(const WeftComm& c, uint64_t workspace, uint64_t workspace_bytes, uint64_t need, const char* op);

// Checks a launch and makes the plan's device current for `launch(completion)`.
template <class Launch>
void launch_plan(PlanBase& plan, const WeftOpLaunch* launch, Launch&& run);

// Waits for the plan's stream, then frees what the plan owns (the caller deletes it).
void destroy_plan(PlanBase& plan);

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

// A dispatch plan's kernel arguments (its layout and workspace) and communicator, for the combine
// that reads its layout (dispatch.cpp).
const DispatchArgs& dispatch_args(const WeftMoeDispatchPlan* plan, const WeftComm** comm);

}  // namespace weft::moe

#include "device_guard.hpp"

template <class Launch>
void weft::moe::launch_plan(PlanBase& plan, const WeftOpLaunch* launch, Launch&& run) {
  require_launch(plan.comm, launch);
  DeviceGuard g(plan.comm->device);
  run(completion_of(launch));
}
