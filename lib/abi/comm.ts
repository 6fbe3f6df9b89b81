// comm.ts — the TS packing of weft.h's ABI structs for the communicator, collectives and tensor-
// parallel ops. test/abi.test.ts checks every one against the offsets the C compiler reports through
// weft_abi_layout().
import { Struct } from "../struct.ts";

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
  shares_device: "i32",
  reserved: "i32",
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
