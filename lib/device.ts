// device.ts — GPU enumeration and topology (which GPUs reach each other, over how many NVLinks).
import { DeviceProps } from "./abi.ts";
import { ArgumentError, DeviceError } from "./errors.ts";
import { check, native } from "./native.ts";

export interface DeviceInfo {
  index: number;
  name: string;
  pciBusId: string;
  totalMemory: number;
  freeMemory: number;
  smCount: number;
  computeCapability: [number, number];
  l2Bytes: number;
  sharedMemoryPerBlock: number;
  clockKHz: number;
  memoryClockKHz: number;
  memoryBusWidth: number;
}

/** How device i reaches device j. */
export type PeerLink = { kind: "self" } | { kind: "none" } | { kind: "p2p" } | { kind: "nvlink"; links: number };

export interface Topology {
  devices: DeviceInfo[];
  /** peer[i][j]: how device i reaches device j's memory. */
  peer: PeerLink[][];
}

/** Number of GPUs this process can use; 0 (not an error) when there is no GPU or no driver. */
export function deviceCount(): number {
  const out = new Int32Array(1);
  check(native().weft_device_count(out), "deviceCount");
  return out[0]!;
}

/** Throws unless `device` indexes an existing GPU: DeviceError when there is no GPU at all,
 * ArgumentError when the index is not one of the GPUs there are. Both name the argument. */
export function requireDevice(device: number, op: string, argument = "device"): void {
  if (typeof device !== "number" || !Number.isInteger(device) || device < 0) {
    throw new ArgumentError(op, argument, `must be a non-negative integer (got ${JSON.stringify(device)})`);
  }
  const n = deviceCount();
  if (n === 0) {
    throw new DeviceError(`argument '${argument}' asks for GPU ${device}, but there is no GPU on this machine (no NVIDIA driver, ` +
      "or no device visible to this process: see `nvidia-smi` and CUDA_VISIBLE_DEVICES)", { code: "E_NO_DEVICE", op, argument });
  }
  if (device >= n) throw new ArgumentError(op, argument, `must be < ${n}, the number of GPUs on this machine (got ${device})`);
}

export function deviceInfo(device: number): DeviceInfo {
  requireDevice(device, "deviceInfo");
  const buf = DeviceProps.alloc();
  check(native().weft_device_props(device, buf), "deviceInfo");
  const p = DeviceProps.read(buf);
  return {
    index: device,
    name: p.name,
    pciBusId: p.pci_bus_id,
    totalMemory: Number(p.total_memory),
    freeMemory: Number(p.free_memory),
    smCount: p.sm_count,
    computeCapability: [p.cc_major, p.cc_minor],
    l2Bytes: p.l2_bytes,
    sharedMemoryPerBlock: p.smem_per_block_optin,
    clockKHz: p.clock_khz,
    memoryClockKHz: p.memory_clock_khz,
    memoryBusWidth: p.memory_bus_width,
  };
}

export function devices(): DeviceInfo[] {
  return Array.from({ length: deviceCount() }, (_, i) => deviceInfo(i));
}

export function topology(): Topology {
  const list = devices();
  const n = list.length;
  const m = new Int32Array(Math.max(1, n * n));
  if (n > 0) check(native().weft_peer_matrix(n, m), "topology");
  const peer = list.map((_, i) => list.map((_, j): PeerLink => {
    if (i === j) return { kind: "self" };
    const v = m[i * n + j]!;
    return v === 0 ? { kind: "none" } : v === 1 ? { kind: "p2p" } : { kind: "nvlink", links: v - 1 };
  }));
  return { devices: list, peer };
}

/** Lets `device` read and write `peer`'s memory directly. Idempotent. */
export function enablePeerAccess(device: number, peer: number): void {
  requireDevice(device, "enablePeerAccess");
  requireDevice(peer, "enablePeerAccess", "peer");
  check(native().weft_peer_enable(device, peer), "enablePeerAccess");
}
