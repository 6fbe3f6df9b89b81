// inter-node.ts — the TS packing of weft.h's ABI structs for the transport, the command FIFO and
// proxy, the multi-node communicator. test/abi.test.ts checks every one against the offsets the C
// compiler reports through weft_abi_layout().
import { Struct } from "../struct.ts";

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
