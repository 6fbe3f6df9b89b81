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

// GEMM engine (issue 4)

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

/** Every ABI struct, by its C name. */
export const ABI_STRUCTS: readonly Struct<any>[] = [
  DeviceProps,
  // issue 3
  // issue 4
  // issue 6
  TransportParams,
  TransportCounters,
  ProxyParams,
  ProxyCommand,
  ProxyFifo,
  ProxyStats,
];
