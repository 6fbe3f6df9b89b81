// info.ts — what this machine offers weft: library, runtime, GPUs, links and transports. Used by
// `weft info` and the demo.
import { deviceCount, topology, type PeerLink, type Topology } from "./device.ts";
import { check, native, nativePath, outPointer, readCString, runtimeLabel, ABI_VERSION } from "./native.ts";

export interface FabricProviders {
  libfabric: string | null;
  reason?: string;
  providers: { name: string; hmem: boolean }[];
}

export interface RuntimeInfo {
  version: string;
  abi: number;
  library: string;
  /** The JavaScript runtime, as "bun 1.4.5" or "deno 2.9.6". */
  runtime: string;
  cudaRuntime: string;
  cudaDriver: string | null;
  topology: Topology;
  fabric: FabricProviders;
}

function cudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

export function fabricProviders(): FabricProviders {
  const out = new BigUint64Array(1);
  check(native().weft_fabric_providers(out), "fabricProviders");
  return JSON.parse(readCString(outPointer(out))) as FabricProviders;
}

export function runtimeInfo(): RuntimeInfo {
  const s = new BigUint64Array(1);
  const rt = new Int32Array(1);
  const drv = new Int32Array(1);
  check(native().weft_version(s, rt, drv), "runtimeInfo");
  return {
    version: readCString(outPointer(s)),
    abi: ABI_VERSION,
    library: nativePath() ?? "?",
    runtime: runtimeLabel(),
    cudaRuntime: cudaVersion(rt[0]!),
    cudaDriver: drv[0] ? cudaVersion(drv[0]) : null,
    topology: deviceCount() > 0 ? topology() : { devices: [], peer: [] },
    fabric: fabricProviders(),
  };
}

function linkLabel(l: PeerLink): string {
  switch (l.kind) {
    case "self": return "X";
    case "none": return "-";
    case "p2p": return "P2P";
    case "nvlink": return `NV${l.links}`;
  }
}

const GiB = 1024 ** 3;

export function formatInfo(info: RuntimeInfo): string {
  const lines: string[] = [];
  lines.push(`weft ${info.version} (ABI ${info.abi}) from ${info.library}, under ${info.runtime}`);
  lines.push(`CUDA runtime ${info.cudaRuntime}, driver ${info.cudaDriver ?? "not found"}`);
  const { devices, peer } = info.topology;
  if (devices.length === 0) {
    lines.push("GPUs: none found (no NVIDIA driver or no GPU on this machine). CPU-only features still work.");
  } else {
    lines.push(`GPUs: ${devices.length}`);
    for (const d of devices) {
      lines.push(`  [${d.index}] ${d.name}  sm_${d.computeCapability.join("")}  ${d.smCount} SMs  ` +
        `${(d.totalMemory / GiB).toFixed(1)} GiB (${(d.freeMemory / GiB).toFixed(1)} free)  ` +
        `L2 ${(d.l2Bytes / 2 ** 20).toFixed(0)} MiB  ${d.clockKHz / 1000} MHz  PCI ${d.pciBusId}`);
    }
    lines.push("Peer access (NVn: n NVLink links, P2P: PCIe peer access, -: none):");
    const w = 7;
    lines.push(" ".repeat(w) + devices.map((d) => `GPU${d.index}`.padStart(w)).join(""));
    peer.forEach((row, i) => lines.push(`GPU${i}`.padEnd(w) + row.map((l) => linkLabel(l).padStart(w)).join("")));
  }
  lines.push("Transports:");
  const nvPairs = peer.flatMap((row, i) => row.map((l, j) => (l.kind === "nvlink" || l.kind === "p2p") ? `${i}->${j}` : null)).filter(Boolean);
  lines.push(`  cuda-peer   ${nvPairs.length ? `available (${nvPairs.join(" ")})` : "not available"}`);
  if (info.fabric.libfabric) {
    const names = info.fabric.providers.map((p) => p.name + (p.hmem ? " (hmem)" : "")).join(", ");
    lines.push(`  libfabric   ${info.fabric.libfabric}: ${names || "no RMA providers"}`);
  } else {
    lines.push(`  libfabric   not available (${info.fabric.reason ?? "unknown"})`);
  }
  return lines.join("\n");
}
