// attention.ts — the TS packing of weft.h's ABI structs for the attention engine and fused ring
// attention. test/abi.test.ts checks every one against the offsets the C compiler reports through
// weft_abi_layout().
import { Struct } from "../struct.ts";

export const AttentionParams = new Struct("WeftAttentionParams", {
  size: "u32",
  version: "u32",
  q: "u64",
  k: "u64",
  v: "u64",
  out: "u64",
  lse: "u64",
  cu_seqlens_q: "u64",
  cu_seqlens_k: "u64",
  batch: "i32",
  heads: "i32",
  kv_heads: "i32",
  head_dim: "i32",
  seqlen_q: "i32",
  seqlen_k: "i32",
  total_q: "i64",
  total_k: "i64",
  flags: "u32",
  scale: "f32",
  max_ctas: "i32",
  reserved: "i32",
  stream: "u64",
  seqused_k: "u64",
}, { version: 3 });

export const AttentionChoice = new Struct("WeftAttentionChoice", {
  size: "u32",
  version: "u32",
  block_m: "i32",
  block_n: "i32",
  stages: "i32",
  ctas: "i32",
  tiles: "i32",
  section: "i32",
});

export const RingAttentionParams = new Struct("WeftRingAttentionParams", {
  size: "u32",
  version: "u32",
  q: "u64",
  k: "u64",
  v: "u64",
  out: "u64",
  lse: "u64",
  batch: "i32",
  heads: "i32",
  kv_heads: "i32",
  head_dim: "i32",
  seqlen: "i32",
  kv_rows: "i32",
  comm_ctas: "i32",
  layout: "i32",
  flags: "u32",
  scale: "f32",
  mover: "i32",
  group_heads: "i32",
  memory_bytes: "u64",
  workspace: "u64",
  workspace_bytes: "u64",
  stream: "u64",
});

export const RingAttentionChoice = new Struct("WeftRingAttentionChoice", {
  size: "u32",
  version: "u32",
  mover: "i32",
  comm_ctas: "i32",
  reserved: "i32",
  group_heads: "i32",
  groups: "i32",
  slots: "i32",
  ctas: "i32",
  shard: "i32",
  workspace_bytes: "u64",
  receive_bytes: "u64",
  predicted_us: "f64",
});
