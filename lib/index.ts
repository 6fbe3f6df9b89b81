// weft — fused communication + compute on many GPUs, from Bun.
export { DTYPES, bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, type DType, type RawArray } from "./dtype.ts";
export {
  ArgumentError, CudaError, DeviceError, DisposedError, LibraryError, OutOfMemoryError, PeerError,
  Status, TimeoutError, TransportError, UnsupportedError, WeftError, type ErrorCode,
} from "./errors.ts";
export { deviceCount, deviceInfo, devices, enablePeerAccess, topology, type DeviceInfo, type PeerLink, type Topology } from "./device.ts";
export { Tensor, type Shape, type TensorData, type TensorOptions } from "./tensor.ts";
export { Stream, Event } from "./stream.ts";
export { runtimeInfo, formatInfo, fabricProviders, type RuntimeInfo } from "./info.ts";
// communicator, symmetric heap, collectives (issue 3)
export { rankEnvFromProcess, Store, LocalStore, type RankEnv, type KeyValueStore, type RankLostListener, type StoreOptions } from "./bootstrap.ts";
export { Completion, type CompletionSlot, type CompletionOptions, type FailureDescriber } from "./completion.ts";
export { SymmetricTensor } from "./heap.ts";
export {
  Communicator, CollectivePlan, type CommunicatorOptions, type FromEnvOptions, type LocalOptions, type RankIdentity,
  type CollectiveOptions, type AllToAllOptions, type BroadcastOptions, type Algorithm,
} from "./comm.ts";

// GEMM engine (issue 4)
export {
  gemm, gemmSync, gemmConfigFor, planGemm, validateGemmConfig,
  type GemmConfig, type GemmConfigChoice, type GemmOptions, type GemmPlan, type GemmShape, type TensorDesc,
} from "./ops/gemm.ts";
export { cublasLtAvailable, cublasLtGemmSync } from "./baselines/cublaslt.ts";

// fused tensor-parallel ops over NVLink (issue 5): comm.allGatherGemm() and its siblings make TpPlans
export {
  TpPlan, tpChoice, validateTp, validateTpConfig,
  type AllGatherGemmArgs, type GemmScatterArgs, type TpChoiceInfo, type TpConfig, type TpMover, type TpOp, type TpPath, type TpShape,
  type TpTensorDesc,
} from "./ops/tp.ts";

// attention (issue 25): the single-GPU engine, and the fused ring (comm.ringAttention)
export {
  attention, planAttention, validateAttention, AttentionPlan, HEAD_DIMS,
  type AttentionArgs, type AttentionChoiceInfo, type AttentionConfig, type AttentionShape,
} from "./ops/attention.ts";
export {
  RingAttentionPlan, ringChunks, ringShardCapacity, shardLength, shardRanges, shardSequence, unshardSequence, validateRingAttention,
  type RingAttentionArgs, type RingAttentionConfig, type RingChoiceInfo, type RingLayout, type RingShape,
} from "./ops/ring-attention.ts";

// inter-node: command FIFO, proxy, transport (issue 6)
export {
  HostBuffer, Opcode, Proxy, Region, Transport, transportCounters,
  type Command as ProxyCommand, type Exchange, type ProxyOptions, type ProxyStats, type PutCommand, type RegisterableMemory,
  type SignalTarget, type TransportInfo, type TransportOptions,
} from "./transport.ts";
export { planNodes, type NodePlan } from "./comm/node-plan.ts";

// MoE expert parallelism (issue 26); comm.moeDispatch / moeCombine / moeDispatchGemm / moeGemmCombine / moeLayer
// are Communicator methods.
export {
  MoeCombinePlan, MoeDispatchPlan, type MoeCombineArgs, type MoeDispatchArgs, type MoeLayout,
} from "./ops/moe.ts";
export { MoeDispatchGemmPlan, MoeGemmCombinePlan, type MoeDispatchGemmArgs, type MoeGemmCombineArgs } from "./ops/moe-gemm.ts";
export { MoeLayerPlan, type MoeLayerArgs } from "./ops/moe-layer.ts";
export {
  validateDownWeights, validateExpertConfig, validateUpWeights, type ExpertGemmConfig, type MoeActivation, type MoeMover,
} from "./ops/moe-gemm-validate.ts";
export { groupedGemm, groupedGemmConfigFor, groupedGemmSync, planGroupedGemm, type GroupedGemmArgs, type GroupedGemmConfig } from "./ops/grouped-gemm.ts";
export { moeRoute, moeRouteSync, type MoeRouteArgs, type MoeRouting } from "./ops/moe-route.ts";
export {
  validateMoeCombine, validateMoeDispatch, validateMoeRoute, MOE_BLOCK_ROWS, MOE_MAX_EXPERTS,
  type MoeDispatchShape, type MoeRouteShape,
} from "./ops/moe-validate.ts";
export { CudaGraph } from "./graph.ts";

// decoder layers: embedding, RMSNorm, rotary embedding, SwiGLU, slotted KV cache, column copy, GPU sampling
export {
  cacheAttention, copyColumns, embedding, kvAppend, rmsNorm, rope, swiglu,
  type CacheAttentionArgs, type CopyColumnsArgs, type EmbeddingArgs, type KvAppendArgs, type KvCacheTensors, type NnCall,
  type RmsNormArgs, type RopeArgs, type SwigluArgs,
} from "./ops/nn.ts";
export { Sampler, sampleUniform, type SampleOptions, type SampleResult, type SamplingSettings } from "./ops/sample.ts";
