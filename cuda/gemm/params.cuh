// params.cuh — the argument pack of one engine launch (passed as a __grid_constant__ parameter, so
// the tensor maps have the param-space address TMA needs).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../primitives/completion.cuh"

namespace weft::gemm {

struct Problem {
  int32_t m, n, k;
  int32_t group_m;  // tile-order band height, in cluster tiles along M
};

template <class HookState>
struct KernelParams {
  CUtensorMap a;  // [M, K] bf16, box {64, 128 or 64}
  CUtensorMap b;  // [N, K] (box {64, TileN or TileN/2}) or [K, N] (box {64, 64}) bf16
  CUtensorMap c;  // [M, N] bf16 (box {64, 64}) or fp32 (box {32, 64}); may be peer memory
  Problem problem;
  Completion completion;  // done == nullptr: no host notification
  HookState hooks;
};

// Reasons a CTA reports through cta::fail (low 32 bits of done[1]); the stage field says which role.
enum FailureCode : int32_t { kFailBarrierTimeout = 1, kFailHookWait = 2 };
enum FailureStage : uint32_t { kStageProducer = 1, kStageConsumer = 2, kStageEpilogue = 3 };

}  // namespace weft::gemm
