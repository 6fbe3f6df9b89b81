// ops.ts — the TS packing of weft.h's ABI structs for DLPack, MoE expert parallelism (with the
// grouped GEMM and the expert GEMMs), decoder layers, baselines. test/abi.test.ts checks every one
// against the offsets the C compiler reports through weft_abi_layout().
import { Struct } from "../struct.ts";

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

export const GroupedGemmParams = new Struct("WeftGroupedGemmParams", {
  size: "u32",
  version: "u32",
  a: "u64",
  b: "u64",
  offsets: "u64",
  out: "u64",
  m: "i64",
  n: "i64",
  k: "i64",
  groups: "i32",
  flags: "u32",
  tile_n: "i32",
  max_ctas: "i32",
  stream: "u64",
}, { version: 2 });

export const GroupedGemmChoice = new Struct("WeftGroupedGemmChoice", {
  size: "u32",
  version: "u32",
  tile_n: "i32",
  ctas: "i32",
  band: "i32",
  stages: "i32",
});

export const MoeExpertGemmParams = new Struct("WeftMoeExpertGemmParams", {
  size: "u32",
  version: "u32",
  flags: "u32",
  n: "i32",
  k: "i32",
  mover: "i32",
  tile_n: "i32",
  ctas: "i32",
  w: "u64",
  out: "u64",
});

export const MoeExpertGemmChoice = new Struct("WeftMoeExpertGemmChoice", {
  size: "u32",
  version: "u32",
  ctas: "i32",
  tile_n: "i32",
  mover: "i32",
  stages: "i32",
});

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
  stream: "u64",
}, { version: 2 });

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
