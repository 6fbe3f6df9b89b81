// abort.cuh — how a fused kernel's waits give up early and report it (fused.h, AbortWords).
//
// Contract:
//   - budget() is every wait's bound: the communicator's timeout, the host's abort word
//     (weft_comm_abort) and this rank's plan abort word at this launch's epoch.
//   - report_wait_failure() is a Hooks::on_wait_failed (gemm/hooks.cuh): when the host declared a
//     rank failed, the launch fails with WEFT_E_PEER at stage WEFT_STAGE_ABORTED, field
//     WEFT_ABORT_HOST and that rank as the peer; when a peer raised the plan's abort word, WEFT_E_PEER,
//     WEFT_STAGE_ABORTED, field WEFT_ABORT_PEER and the raiser; otherwise (this rank's own wait ran
//     out) the engine's WEFT_GEMM_FAIL_HOOK_WAIT at the role's stage, and this rank raises every
//     rank's plan abort word, so that peers waiting on it stop at their next poll, not at their own
//     timeout. The reason word's layout is the collectives' (lib/comm/failure.ts reads both).
//   - peer_gave_up() is for a before_finish: a peer that gave up on this launch still drains its
//     stores and adds into this rank's memory in whatever order its waits left them, so a launch that
//     saw every signal may still hold a wrong sum. One CTA asks once, at the end (a relaxed load of a
//     local word), and fails the launch (as report_wait_failure then says, the peer's abort).
#pragma once

#include <cstdint>

#include "fused/fused.h"
#include "gemm/params.cuh"
#include "primitives/completion.cuh"
#include "primitives/signal.cuh"
#include "weft.h"

namespace weft::fused {

__device__ __forceinline__ sys::WaitBudget budget(uint64_t timeout_ns, const AbortWords& a, int32_t rank, uint64_t epoch) {
  return sys::WaitBudget{timeout_ns, a.host, a.plan[rank], epoch << 16};
}

__device__ __forceinline__ bool peer_gave_up(const AbortWords& a, int32_t rank, uint64_t epoch) {
  return a.plan[rank] && *reinterpret_cast<const volatile uint64_t*>(a.plan[rank]) >= (epoch << 16);
}

__device__ inline void report_wait_failure(const AbortWords& a, int32_t rank, int32_t world, uint64_t epoch,
                                           const Completion& c, uint32_t stage) {
  const uint64_t declared = a.host ? *a.host : 0;
  if (declared != 0) {
    cta::fail(c, WEFT_E_PEER, WEFT_STAGE_ABORTED | (WEFT_ABORT_HOST << 8) | (uint32_t(declared - 1) << 16));
    return;
  }
  const uint64_t raised = a.plan[rank] ? sys::signal_load(a.plan[rank]) : 0;
  if (raised >= (epoch << 16)) {
    cta::fail(c, WEFT_E_PEER, WEFT_STAGE_ABORTED | (WEFT_ABORT_PEER << 8) | (uint32_t((raised & 0xffff) - 1) << 16));
    return;
  }
  cta::fail(c, gemm::kFailHookWait, stage);
  for (int32_t q = 0; q < world; ++q)
    if (a.plan[q]) atomicMax_system(reinterpret_cast<unsigned long long*>(a.plan[q]), static_cast<unsigned long long>(abort_tag(epoch, rank)));
}

}  // namespace weft::fused
