// runtime.ts — the TS packing of weft.h's ABI structs for the library, devices, launch and completion,
// the GEMM engine. test/abi.test.ts checks every one against the offsets the C compiler reports
// through weft_abi_layout().
import { Struct } from "../struct.ts";

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

export const OpLaunch = new Struct("WeftOpLaunch", {
  size: "u32",
  version: "u32",
  done: "u64",
  seq: "u64",
  arrivals: "u64",
});

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
  stream: "ptr",
}, { version: 2 });

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
