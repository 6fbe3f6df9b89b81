// abort.cuh — how an op's peer waits give up early and report it (the words: abort_words.h).
//
// Contract:
//   - abort_budget() is every peer wait's bound: the communicator's timeout, the host's abort word
//     (weft_comm_abort) and this rank's plan abort word at this launch's epoch.
//   - report_wait_failure() is what a CTA role calls once when one of its waits gave up: when the
//     host declared a rank failed, the launch fails with WEFT_E_PEER at stage WEFT_STAGE_ABORTED,
//     field WEFT_ABORT_HOST and that rank as the peer; when a peer raised the plan's abort word,
//     WEFT_E_PEER, WEFT_STAGE_ABORTED, field WEFT_ABORT_PEER and the raiser; otherwise (this rank's
//     own wait ran out) the op's own timeout code at the role's stage, and this rank raises every
//     rank's plan abort word, so that peers waiting on it stop at their next poll. The reason word's
//     layout is the collectives' (lib/comm/failure.ts reads both).
//   - peer_gave_up() is for an op's last step: a peer that gave up on this launch still drains its
//     stores into this rank's memory in whatever order its waits left them, so a launch that saw
//     every signal may still hold a wrong result. One CTA asks once, at the end (a relaxed load of a
//     local word), and fails the launch (as report_wait_failure then says, the peer's abort).
#pragma once

#include <cstdint>

#include "abort_words.h"
#include "completion.cuh"
#include "signal.cuh"
#include "weft.h"

namespace weft::sys {

__device__ __forceinline__ WaitBudget abort_budget(uint64_t timeout_ns, const AbortWords& a, int32_t rank, uint64_t epoch) {
  return WaitBudget{timeout_ns, a.host, a.plan[rank], epoch << 16};
}

__device__ __forceinline__ bool peer_gave_up(const AbortWords& a, int32_t rank, uint64_t epoch) {
  return a.plan[rank] && *reinterpret_cast<const volatile uint64_t*>(a.plan[rank]) >= (epoch << 16);
}

__device__ inline void report_wait_failure(const AbortWords& a, int32_t rank, int32_t world, uint64_t epoch,
                                           const Completion& c, int32_t own_code, uint32_t stage) {
  const uint64_t declared = a.host ? *a.host : 0;
  if (declared != 0) {
    cta::fail(c, WEFT_E_PEER, WEFT_STAGE_ABORTED | (WEFT_ABORT_HOST << 8) | (uint32_t(declared - 1) << 16));
    return;
  }
  const uint64_t raised = a.plan[rank] ? signal_load(a.plan[rank]) : 0;
  if (raised >= (epoch << 16)) {
    cta::fail(c, WEFT_E_PEER, WEFT_STAGE_ABORTED | (WEFT_ABORT_PEER << 8) | (uint32_t((raised & 0xffff) - 1) << 16));
    return;
  }
  cta::fail(c, own_code, stage);
  for (int32_t q = 0; q < world; ++q)
    if (a.plan[q]) atomicMax_system(reinterpret_cast<unsigned long long*>(a.plan[q]), static_cast<unsigned long long>(abort_tag(epoch, rank)));
}

}  // namespace weft::sys
