// abi.ts — the TS packing of every ABI struct in weft.h. test/abi.test.ts checks each one against
// the offsets the C compiler reports through weft_abi_layout().
import { Struct } from "./struct.ts";

export const DeviceProps = new Struct("WeftDeviceProps", {
  size: "u32",
  version: "u32",
  name: { char: 256 },
  pci_bus_id: { char: 32 },
  total_memory: "u64",
  free_memory: "u64",
  sm_count: "i32",
  cc_major: "i32",
  cc_minor: "i32",
  l2_bytes: "i32",
  smem_per_block_optin: "i32",
  clock_khz: "i32",
  memory_clock_khz: "i32",
  memory_bus_width: "i32",
});

// communicator, symmetric heap, collectives (issue 3)
export const CommConfig = new Struct("WeftCommConfig", {
  size: "u32",
  version: "u32",
  device: "i32",
  rank: "i32",
  world_size: "i32",
  sm_budget: "i32",
  heap_bytes: "u64",
  staged_bytes: "u64",
  timeout_ns: "u64",
});

export const CommInfo = new Struct("WeftCommInfo", {
  size: "u32",
  version: "u32",
  heap_base: "u64",
  heap_bytes: "u64",
  arena_base: "u64",
  arena_bytes: "u64",
  staged_bytes: "u64",
  sm_count: "i32",
  max_ctas: "i32",
});

export const PeerHandle = new Struct("WeftPeerHandle", {
  size: "u32",
  version: "u32",
  process_token: "u64",
  device: "i32",
  rank: "i32",
  arena_base: "u64",
  arena_bytes: "u64",
  ipc: { array: "u8", length: 64 },
});

export const CollectiveParams = new Struct("WeftCollectiveParams", {
  size: "u32",
  version: "u32",
  kind: "i32",
  dtype: "i32",
  count: "u64",
  input: "u64",
  output: "u64",
  root: "i32",
  ctas: "i32",
  algorithm: "i32",
  reserved: "i32",
  send_counts: "u64",
  recv_counts: "u64",
  stream: "u64",
  done: "u64",
  seq: "u64",
  arrivals: "u64",
});

export const NcclParams = new Struct("WeftNcclParams", {
  size: "u32",
  version: "u32",
  kind: "i32",
  dtype: "i32",
  count: "u64",
  inputs: "u64",
  outputs: "u64",
  streams: "u64",
  root: "i32",
  reserved: "i32",
});

// GEMM engine (issue 4)
export const GemmParams = new Struct("WeftGemmParams", {
  size: "u32",
  version: "u32",
  a: "ptr",
  b: "ptr",
  c: "ptr",
  m: "i64",
  n: "i64",
  k: "i64",
  lda: "i64",
  ldb: "i64",
  ldc: "i64",
  flags: "u32",
  tile_n: "i32",
  cluster_m: "i32",
  cluster_n: "i32",
  group_m: "i32",
  max_ctas: "i32",
  done: "ptr",
  seq: "u64",
  arrivals: "ptr",
  stream: "ptr",
});

export const GemmChoice = new Struct("WeftGemmChoice", {
  size: "u32",
  version: "u32",
  tile_m: "i32",
  tile_n: "i32",
  tile_k: "i32",
  cluster_m: "i32",
  cluster_n: "i32",
  group_m: "i32",
  stages: "i32",
  ctas: "i32",
});

// fused tensor-parallel ops over NVLink (issue 5)
export const TpParams = new Struct("WeftTpParams", {
  size: "u32",
  version: "u32",
  op: "i32",
  flags: "u32",
  m: "i64",
  n: "i64",
  k: "i64",
  a: "u64",
  b: "u64",
  out: "u64",
  gathered: "u64",
  path: "i32",
  mover: "i32",
  comm_ctas: "i32",
  tile_n: "i32",
  group_m: "i32",
  reserved: "i32",
  workspace: "u64",
  workspace_bytes: "u64",
  stream: "u64",
});

export const TpChoice = new Struct("WeftTpChoice", {
  size: "u32",
  version: "u32",
  path: "i32",
  mover: "i32",
  comm_ctas: "i32",
  gemm_ctas: "i32",
  tile_n: "i32",
  group_m: "i32",
  chunk_rows: "i32",
  fused_available: "i32",
  workspace_bytes: "u64",
  predicted_fused_us: "f64",
  predicted_sequential_us: "f64",
  reason: { char: 128 },
});

export const TpLaunch = new Struct("WeftTpLaunch", {
  size: "u32",
  version: "u32",
  done: "u64",
  seq: "u64",
  arrivals: "u64",
});

export const TestingTpMachine = new Struct("WeftTestingTpMachine", {
  size: "u32",
  version: "u32",
  world: "i32",
  rank: "i32",
  sm_count: "i32",
  sm_budget: "i32",
  nodes: "i32",
  shares_device: "i32",
  slot_bytes: "u64",
});

// inter-node: command FIFO, proxy, transport (issue 6)
export const TransportParams = new Struct("WeftTransportParams", {
  size: "u32",
  version: "u32",
  rank: "i32",
  world_size: "i32",
  device: "i32",
  same_host: "i32",
  timeout_ms: "u32",
  reserved: "u32",
  provider: "ptr",
});

export const TransportCounters = new Struct("WeftTransportCounters", {
  size: "u32",
  version: "u32",
  transports: "i64",
  regions: "i64",
  proxy_threads: "i64",
  host_buffers: "i64",
});

export const ProxyParams = new Struct("WeftProxyParams", {
  size: "u32",
  version: "u32",
  fifo_slots: "u32",
  batch: "u32",
  max_inflight: "u32",
  timeout_ms: "u32",
  device: "i32",
  reserved: "u32",
});

export const ProxyCommand = new Struct("WeftProxyCommand", {
  size: "u32",
  version: "u32",
  opcode: "u32",
  flags: "u32",
  peer: "i32",
  src_region: "i32",
  dst_region: "i32",
  signal_region: "i32",
  src_offset: "u64",
  dst_offset: "u64",
  bytes: "u64",
  signal_offset: "u64",
  signal_value: "u64",
  cookie: "u64",
});

export const ProxyFifo = new Struct("WeftProxyFifo", {
  size: "u32",
  version: "u32",
  capacity: "u32",
  slot_bytes: "u32",
  host_control: "ptr",
  host_slots: "ptr",
  device_control_host: "ptr",
  device_control: "ptr",
  device_slots: "ptr",
  device_head: "ptr",
});

export const ProxyStats = new Struct("WeftProxyStats", {
  size: "u32",
  version: "u32",
  pushed: "u64",
  consumed: "u64",
  completed: "u64",
  puts: "u64",
  signals: "u64",
  fences: "u64",
  barriers: "u64",
  passes: "u64",
  idle_sleeps: "u64",
  max_batch: "u64",
  transport_writes: "u64",
  transport_bytes: "u64",
  transport_signal_writes: "u64",
});

export const CommInterNode = new Struct("WeftCommInterNode", {
  size: "u32",
  version: "u32",
  rank: "i32",
  world_size: "i32",
  node: "i32",
  nodes: "i32",
  send_region: "i32",
  recv_region: "i32",
  send_staging: "u64",
  send_bytes: "u64",
  recv_staging: "u64",
  recv_bytes: "u64",
  slot_bytes: "u64",
  fifo_slots: "u64",
  fifo_head: "u64",
  fifo_control: "u64",
  fifo_capacity: "u32",
  reserved: "u32",
});

// DLPack hand-over (issue 27)
export const DlpackDesc = new Struct("WeftDlpackDesc", {
  size: "u32",
  version: "u32",
  data: "u64",
  device_type: "i32",
  device_id: "i32",
  ndim: "i32",
  dtype: "i32",
  dl_dtype: "u32",
  read_only: "u32",
  shape: { array: "i64", length: 8 },
  strides: { array: "i64", length: 8 },
});

// MoE expert parallelism (issue 26)
export const MoeRouteParams = new Struct("WeftMoeRouteParams", {
  size: "u32",
  version: "u32",
  logits: "u64",
  logits_dtype: "i32",
  flags: "u32",
  tokens: "i64",
  experts: "i32",
  topk: "i32",
  ids: "u64",
  weights: "u64",
  stream: "u64",
  done: "u64",
  seq: "u64",
  arrivals: "u64",
});

export const MoeDispatchParams = new Struct("WeftMoeDispatchParams", {
  size: "u32",
  version: "u32",
  flags: "u32",
  experts: "i32",
  topk: "i32",
  hidden: "i32",
  tokens: "i64",
  max_tokens: "i64",
  capacity: "i64",
  x: "u64",
  ids: "u64",
  weights: "u64",
  logits: "u64",
  logits_dtype: "i32",
  ctas: "i32",
  workspace: "u64",
  workspace_bytes: "u64",
  stream: "u64",
});

export const MoeDispatchChoice = new Struct("WeftMoeDispatchChoice", {
  size: "u32",
  version: "u32",
  ctas: "i32",
  local_experts: "i32",
  capacity: "i64",
  max_tokens: "i64",
  workspace_bytes: "u64",
  recv_offset: "u64",
  row_source_offset: "u64",
  expert_offsets_offset: "u64",
  expert_counts_offset: "u64",
  source_counts_offset: "u64",
  arrivals_offset: "u64",
});

export const MoeCombineParams = new Struct("WeftMoeCombineParams", {
  size: "u32",
  version: "u32",
  dispatch: "u64",
  hidden: "u64",
  weights: "u64",
  out: "u64",
  ctas: "i32",
  reserved: "i32",
  workspace: "u64",
  workspace_bytes: "u64",
  stream: "u64",
});

export const MoeCombineChoice = new Struct("WeftMoeCombineChoice", {
  size: "u32",
  version: "u32",
  ctas: "i32",
  reserved: "i32",
  workspace_bytes: "u64",
  returned_offset: "u64",
});

// decoder layers (nn)
export const EmbeddingParams = new Struct("WeftEmbeddingParams", {
  size: "u32",
  version: "u32",
  table: "u64",
  ids: "u64",
  out: "u64",
  rows: "i64",
  vocab: "i64",
  dim: "i64",
  stream: "u64",
});

export const RmsNormParams = new Struct("WeftRmsNormParams", {
  size: "u32",
  version: "u32",
  x: "u64",
  residual: "u64",
  weight: "u64",
  out: "u64",
  rows: "i64",
  dim: "i64",
  eps: "f32",
  reserved: "u32",
  stream: "u64",
});

export const RopeParams = new Struct("WeftRopeParams", {
  size: "u32",
  version: "u32",
  x: "u64",
  positions: "u64",
  rows: "i64",
  heads: "i64",
  head_dim: "i64",
  row_stride: "i64",
  theta: "f32",
  reserved: "u32",
  stream: "u64",
});

export const SwigluParams = new Struct("WeftSwigluParams", {
  size: "u32",
  version: "u32",
  x: "u64",
  out: "u64",
  rows: "i64",
  dim: "i64",
  stream: "u64",
});

export const KvAppendParams = new Struct("WeftKvAppendParams", {
  size: "u32",
  version: "u32",
  k: "u64",
  v: "u64",
  k_cache: "u64",
  v_cache: "u64",
  slot_ids: "u64",
  positions: "u64",
  rows: "i64",
  width: "i64",
  src_stride: "i64",
  slots: "i64",
  max_seq: "i64",
  stream: "u64",
});

export const CacheAttentionParams = new Struct("WeftCacheAttentionParams", {
  size: "u32",
  version: "u32",
  q: "u64",
  k_cache: "u64",
  v_cache: "u64",
  slot_ids: "u64",
  positions: "u64",
  out: "u64",
  rows: "i64",
  heads: "i64",
  kv_heads: "i64",
  head_dim: "i64",
  q_stride: "i64",
  out_stride: "i64",
  slots: "i64",
  max_seq: "i64",
  scale: "f32",
  reserved: "u32",
  stream: "u64",
});

export const SampleParams = new Struct("WeftSampleParams", {
  size: "u32",
  version: "u32",
  logits: "u64",
  dtype: "i32",
  reserved: "i32",
  rows: "i64",
  vocab: "i64",
  row_stride: "i64",
  temperature: "u64",
  top_k: "u64",
  top_p: "u64",
  seed: "u64",
  counter: "u64",
  tokens: "u64",
  logprobs: "u64",
  done: "u64",
  seq: "u64",
  arrivals: "u64",
  stream: "u64",
});

/** Every ABI struct, by its C name. */
export const ABI_STRUCTS: readonly Struct<any>[] = [
  DeviceProps,
  // issue 3
  CommConfig,
  CommInfo,
  PeerHandle,
  CollectiveParams,
  NcclParams,
  // issue 4
  GemmParams,
  GemmChoice,
  // issue 5
  TpParams,
  TpChoice,
  TpLaunch,
  TestingTpMachine,
  // issue 6
  TransportParams,
  TransportCounters,
  ProxyParams,
  ProxyCommand,
  ProxyFifo,
  ProxyStats,
  CommInterNode,
  // issue 27
  DlpackDesc,
  // issue 26
  MoeRouteParams,
  MoeDispatchParams,
  MoeDispatchChoice,
  MoeCombineParams,
  MoeCombineChoice,
  // decoder layers (nn)
  EmbeddingParams,
  RmsNormParams,
  RopeParams,
  SwigluParams,
  KvAppendParams,
  CacheAttentionParams,
  SampleParams,
];
