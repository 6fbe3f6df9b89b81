// params.cuh — the argument pack of one engine launch (passed as a __grid_constant__ parameter, so
// the tensor maps have the param-space address TMA needs).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../primitives/completion.cuh"
#include "weft.h"

namespace weft::gemm {

struct Problem {
  int32_t m, n, k;
  int32_t group_m;  // tile-order band height, in cluster tiles along M
  // Rows of A one stage's load brings (A's box height; box_dims): 0 means a whole tile (kTileM).
  // Fewer when all of A is shorter than a tile (decode), so that no load crosses A's last row: a
  // box that does is zero-filled past it but loads markedly slower. The rows of the stage past it
  // keep stale data; they only feed output rows >= m, which are never stored.
  int32_t a_box_rows;
};

// TMA stores write whole 16-byte chunks, so a row whose length is not a multiple of 16 bytes would
// get the bytes after column n overwritten. C's tensor map therefore covers only the first
// tma_cols columns (n rounded down to 16 bytes); the epilogue writes the rest with ordinary stores.
struct OutputTail {
  void* c;           // C's first element (same memory as the tensor map's)
  int64_t ldc;       // row stride in elements
  int32_t tma_cols;  // columns [0, tma_cols) go through TMA, [tma_cols, n) through plain stores
};

template <class HookState>
struct KernelParams {
  CUtensorMap a;  // [M, K] bf16, box {64, 128, 64 or M < 128}
  CUtensorMap b;  // [N, K] (box {64, TileN or TileN/2}) or [K, N] (box {64, 64}) bf16
  CUtensorMap c;  // [M, N] bf16 (box {64, 64}) or fp32 (box {32, 64}); may be peer memory
  Problem problem;
  OutputTail tail;
  Completion completion;  // done == nullptr: no host notification
  HookState hooks;
};

// Reasons a CTA reports through cta::fail (low 32 bits of done[1]); the stage field says which role
// (weft.h: WeftGemmFailure, WeftGemmStage).
enum FailureCode : int32_t { kFailBarrierTimeout = WEFT_GEMM_FAIL_BARRIER_TIMEOUT, kFailHookWait = WEFT_GEMM_FAIL_HOOK_WAIT };
enum FailureStage : uint32_t {
  kStageProducer = WEFT_GEMM_STAGE_PRODUCER,
  kStageConsumer = WEFT_GEMM_STAGE_CONSUMER,
  kStageEpilogue = WEFT_GEMM_STAGE_EPILOGUE,
  kStageFinish = WEFT_GEMM_STAGE_FINISH,
};

}  // namespace weft::gemm
