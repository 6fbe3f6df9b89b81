// abort.cuh — how a fused TP kernel's waits give up early and report it: primitives/abort.cuh with
// the engine's own failure code (a Hooks::on_wait_failed, gemm/hooks.cuh, reports kFailHookWait at
// the role's stage when this rank's own wait ran out).
#pragma once

#include <cstdint>

#include "fused/fused.h"
#include "gemm/params.cuh"
#include "primitives/abort.cuh"
#include "primitives/completion.cuh"

namespace weft::fused {

__device__ __forceinline__ sys::WaitBudget budget(uint64_t timeout_ns, const AbortWords& a, int32_t rank, uint64_t epoch) {
  return sys::abort_budget(timeout_ns, a, rank, epoch);
}

using sys::peer_gave_up;

__device__ inline void report_wait_failure(const AbortWords& a, int32_t rank, int32_t world, uint64_t epoch,
                                           const Completion& c, uint32_t stage) {
  sys::report_wait_failure(a, rank, world, epoch, c, gemm::kFailHookWait, stage);
}

}  // namespace weft::fused
