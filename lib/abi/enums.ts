// enums.ts — weft.h's enums and constants, by their C names, as weft_abi_layout() publishes them.
// test/abi.test.ts checks every group against the library, and the friendlier tables lib/ reads
// (lib/errors.ts Status, lib/dtype.ts codes, lib/ops/tp-validation.ts movers, ...) against these.

export const WeftStatus = {
  WEFT_OK: 0, WEFT_E_INVALID: -1, WEFT_E_CUDA: -2, WEFT_E_NO_DEVICE: -3, WEFT_E_OOM: -4, WEFT_E_TIMEOUT: -5,
  WEFT_E_PEER: -6, WEFT_E_UNSUPPORTED: -7, WEFT_E_TRANSPORT: -8, WEFT_E_INTERNAL: -9,
} as const;
export const WeftCopyKind = { WEFT_COPY_DEFAULT: 0, WEFT_COPY_H2D: 1, WEFT_COPY_D2H: 2, WEFT_COPY_D2D: 3 } as const;
export const WeftDtype = { WEFT_BF16: 0, WEFT_F16: 1, WEFT_F32: 2, WEFT_I32: 3, WEFT_U8: 4 } as const;
export const WeftGemmFlags = { WEFT_GEMM_B_NK: 1, WEFT_GEMM_OUT_F32: 2 } as const;
export const WeftGemmFailure = { WEFT_GEMM_FAIL_BARRIER_TIMEOUT: 1, WEFT_GEMM_FAIL_HOOK_WAIT: 2 } as const;
export const WeftGemmStage = {
  WEFT_GEMM_STAGE_PRODUCER: 1, WEFT_GEMM_STAGE_CONSUMER: 2, WEFT_GEMM_STAGE_EPILOGUE: 3, WEFT_GEMM_STAGE_FINISH: 4,
} as const;
export const WeftAbi = { WEFT_ABI_VERSION: 6 } as const;

export const WeftCollectiveKind = {
  WEFT_ALL_GATHER: 0, WEFT_REDUCE_SCATTER: 1, WEFT_ALL_REDUCE: 2, WEFT_ALL_TO_ALL: 3, WEFT_BROADCAST: 4, WEFT_BARRIER: 5,
} as const;
export const WeftAlgorithm = { WEFT_ALGO_AUTO: 0, WEFT_ALGO_STAGED: 1, WEFT_ALGO_DIRECT: 2 } as const;
export const WeftCollectiveStage = {
  WEFT_STAGE_ENTRY: 1, WEFT_STAGE_CHECK: 2, WEFT_STAGE_DONE: 3, WEFT_STAGE_STAGED: 4, WEFT_STAGE_ABORTED: 5, WEFT_STAGE_REMOTE: 6,
} as const;
export const WeftAbortSource = { WEFT_ABORT_PEER: 0, WEFT_ABORT_HOST: 1 } as const;
export const WeftCollectiveField = {
  WEFT_FIELD_KIND: 1, WEFT_FIELD_DTYPE: 2, WEFT_FIELD_COUNT: 3, WEFT_FIELD_CTAS: 4, WEFT_FIELD_ROOT: 5, WEFT_FIELD_WORLD: 6,
  WEFT_FIELD_ALGORITHM: 7, WEFT_FIELD_EPOCH: 8, WEFT_FIELD_PAIR_COUNT: 9,
} as const;
export const WeftTpOp = { WEFT_TP_ALL_GATHER_GEMM: 0, WEFT_TP_GEMM_REDUCE_SCATTER: 1, WEFT_TP_GEMM_ALL_REDUCE: 2 } as const;
export const WeftTpPath = { WEFT_TP_PATH_AUTO: 0, WEFT_TP_PATH_FUSED: 1, WEFT_TP_PATH_SEQUENTIAL: 2 } as const;
export const WeftTpMover = {
  WEFT_TP_MOVER_AUTO: 0, WEFT_TP_MOVER_CTAS: 1, WEFT_TP_MOVER_COPY_ENGINE: 2, WEFT_TP_MOVER_NONE: 3, WEFT_TP_MOVER_EXCHANGE: 4,
} as const;
export const WeftTpFailure = { WEFT_TP_FAIL_BARRIER: 1, WEFT_TP_FAIL_PEER_WAIT: 2, WEFT_TP_FAIL_STAGE_MISSING: 3 } as const;

export const WeftProxyOpcode = { WEFT_PROXY_PUT: 1, WEFT_PROXY_SIGNAL: 2, WEFT_PROXY_FENCE: 3, WEFT_PROXY_BARRIER: 4 } as const;
export const WeftProxyFlags = { WEFT_PROXY_FLAG_SIGNAL: 1 } as const;

export const WeftDlpackDevice = {
  WEFT_DLPACK_CPU: 1, WEFT_DLPACK_CUDA: 2, WEFT_DLPACK_CUDA_HOST: 3, WEFT_DLPACK_CUDA_MANAGED: 13,
} as const;
export const WeftDlpackFlags = { WEFT_DLPACK_VERSIONED: 1, WEFT_DLPACK_FREE_DATA: 2 } as const;
export const WeftDlpackLimits = { WEFT_DLPACK_MAX_NDIM: 8 } as const;
export const WeftMoeFlags = { WEFT_MOE_ROUTE: 1, WEFT_MOE_NORMALIZE: 2 } as const;
export const WeftMoeLimits = { WEFT_MOE_MAX_EXPERTS: 1024, WEFT_MOE_BLOCK_ROWS: 128 } as const;
export const WeftMoeFailure = {
  WEFT_MOE_FAIL_TIMEOUT: 1, WEFT_MOE_FAIL_ABORTED: 2, WEFT_MOE_FAIL_MISMATCH: 3, WEFT_MOE_FAIL_BAD_EXPERT: 4,
  WEFT_MOE_FAIL_PEER_BAD_EXPERT: 5, WEFT_MOE_FAIL_CAPACITY: 6, WEFT_MOE_FAIL_NO_LAYOUT: 7,
} as const;
export const WeftMoeStage = {
  WEFT_MOE_STAGE_ENTRY: 1, WEFT_MOE_STAGE_LAYOUT: 2, WEFT_MOE_STAGE_ARRIVALS: 3, WEFT_MOE_STAGE_BARRIER: 4,
  WEFT_MOE_STAGE_READY: 5, WEFT_MOE_STAGE_RETURN: 6,
} as const;
export const WeftMoeField = {
  WEFT_MOE_FIELD_EXPERTS: 1, WEFT_MOE_FIELD_TOPK: 2, WEFT_MOE_FIELD_HIDDEN: 3, WEFT_MOE_FIELD_WORLD: 4,
  WEFT_MOE_FIELD_CAPACITY: 5, WEFT_MOE_FIELD_MAX_TOKENS: 6, WEFT_MOE_FIELD_EPOCH: 7,
} as const;
export const WeftMoeExpertFlags = { WEFT_MOE_W_NK: 1, WEFT_MOE_SWIGLU: 2 } as const;
export const WeftMoeMover = { WEFT_MOE_MOVER_AUTO: 0, WEFT_MOE_MOVER_PUSH: 1, WEFT_MOE_MOVER_PULL: 2 } as const;
export const WeftGroupedGemmFailure = { WEFT_GROUPED_FAIL_OFFSETS: 3 } as const;

export const WeftAttentionFlags = { WEFT_ATTENTION_CAUSAL: 1 } as const;
export const WeftAttentionFailure = {
  WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT: 1, WEFT_ATTENTION_FAIL_PEER_WAIT: 2, WEFT_ATTENTION_FAIL_SEQLENS: 3,
} as const;
export const WeftAttentionStage = {
  WEFT_ATTENTION_STAGE_PRODUCER: 1, WEFT_ATTENTION_STAGE_CONSUMER: 2, WEFT_ATTENTION_STAGE_FINISH: 3,
} as const;
export const WeftRingLayout = { WEFT_RING_ZIGZAG: 0, WEFT_RING_CONTIGUOUS: 1 } as const;
export const WeftRingMover = { WEFT_RING_MOVER_AUTO: 0, WEFT_RING_MOVER_COPY_ENGINE: 1, WEFT_RING_MOVER_CTAS: 2 } as const;

/** Every group above, by its C name. */
export const ABI_ENUM_GROUPS = {
  WeftStatus, WeftCopyKind, WeftDtype, WeftGemmFlags, WeftGemmFailure, WeftGemmStage, WeftAbi,
  WeftCollectiveKind, WeftAlgorithm, WeftCollectiveStage, WeftAbortSource, WeftCollectiveField,
  WeftTpOp, WeftTpPath, WeftTpMover, WeftTpFailure,
  WeftProxyOpcode, WeftProxyFlags,
  WeftDlpackDevice, WeftDlpackFlags, WeftDlpackLimits, WeftMoeFlags, WeftMoeLimits, WeftMoeFailure, WeftMoeStage, WeftMoeField,
  WeftMoeExpertFlags, WeftMoeMover, WeftGroupedGemmFailure,
  WeftAttentionFlags, WeftAttentionFailure, WeftAttentionStage, WeftRingLayout, WeftRingMover,
} as const;
