// bench/proxy.ts — the proxy's command rate and the transport's loopback bandwidth.
//
//   bun bench/proxy.ts            host-pushed rates and bandwidth over tcp;ofi_rxm and shm between
//                                 two processes on this host; GPU-pushed rate when a GPU is present
//   PROVIDERS=tcp;ofi_rxm REPEATS=3 bun bench/proxy.ts
//
// Every number is the median of REPEATS runs (min..max beside it). Results: bench/results/
// proxy.json; the table goes to stdout.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";

import { deviceCount } from "../lib/device.ts";
import { fabricProviders } from "../lib/info.ts";
import { Tensor } from "../lib/tensor.ts";
import { HostBuffer, Proxy, Transport } from "../lib/transport.ts";
import { jsonLines } from "../test/support/report-channel.ts";

const root = join(import.meta.dirname, "..");
const repeats = process.env.REPEATS ?? "5";
const available = fabricProviders().providers.map((p) => p.name);
const providers = (process.env.PROVIDERS?.split(",") ?? ["tcp;ofi_rxm", "shm"]).filter((p) => available.includes(p));

/** Runs the two ranks; a pair that fails or stalls past `limitMs` is reported, not fatal. */
async function runPair(provider: string, limitMs = 240_000): Promise<any> {
  const run = runPairUnbounded(provider);
  const timer = new Promise<any>((resolve) => setTimeout(() => resolve({ failed: `no result within ${limitMs} ms` }), limitMs));
  try {
    return await Promise.race([run, timer]);
  } catch (e) {
    return { failed: (e as Error).message };
  }
}

async function runPairUnbounded(provider: string): Promise<any> {
  const env = { ...process.env, WEFT_FABRIC_PROVIDER: provider, FI_TCP_IFACE: "lo", REPEATS: repeats, WORLD_SIZE: "2", TIMEOUT_MS: "20000" };
  const script = join(import.meta.dirname, "proxy-rank.ts");
  const r0 = Bun.spawn([process.execPath, script], { env: { ...env, RANK: "0", MASTER_PORT: "0" }, stdout: "pipe", stderr: "inherit" });
  const lines = jsonLines(r0.stdout as ReadableStream<Uint8Array>);
  const { port } = (await lines.next()).value;
  const r1 = Bun.spawn([process.execPath, script], { env: { ...env, RANK: "1", MASTER_PORT: String(port) }, stdout: "inherit", stderr: "inherit" });
  const result = (await lines.next()).value;
  await Promise.all([r0.exited, r1.exited]);
  if (!result) throw new Error(`rank 0 ended without a result (exit ${r0.exitCode}); see its stderr above`);
  return result;
}

/** GPU threads pushing signals to this rank itself through the device lane. */
async function gpuPushed(provider: string): Promise<Record<string, number> | null> {
  if (deviceCount() === 0) return null;
  const out: Record<string, number> = {};
  for (const [ctas, threads, perThread] of [[1, 1, 20000], [1, 32, 1000], [8, 128, 100], [132, 128, 10]] as const) {
    const words = ctas * threads;
    using sig = HostBuffer.alloc(8 * words);
    using failures = Tensor.empty([4], "i32", { device: 0 });
    failures.fill(0);
    using transport = Transport.open({ rank: 0, worldSize: 1, device: 0, provider });
    transport.connectPeers([transport.address()]);
    const region = transport.register(sig);
    region.connectPeers([region.descriptor()]);
    using proxy = Proxy.start(transport, { fifoSlots: 4096, device: 0 });
    const total = words * perThread;
    const t0 = performance.now();
    proxy.devicePush({ op: "signal", peer: 0, region, offset: 0, value: 0 }, { ctas, threads, perThread, failures: failures.ptr });
    while (proxy.deviceCompleted! < total && !proxy.error()) await new Promise((r) => setImmediate(r));
    out[`${ctas}x${threads} threads`] = total / ((performance.now() - t0) / 1000);
    failures.download();
  }
  return out;
}

const cpu = cpus();
const machine = {
  cpu: cpu[0]?.model ?? "?",
  cores: cpu.length,
  gpus: deviceCount(),
  libfabric: fabricProviders().libfabric,
  bun: Bun.version,
  date: new Date().toISOString(),
};
const results: Record<string, any> = {};
for (const p of providers) {
  results[p] = await runPair(p);
  if (!results[p].failed) results[p].gpuPushed = await gpuPushed(p);
}
const ok = providers.filter((p) => !results[p].failed);

const fmtRate = (s: { median: number; min: number; max: number }) =>
  `${(s.median / 1e3).toFixed(0)}k (${(s.min / 1e3).toFixed(0)}k..${(s.max / 1e3).toFixed(0)}k)`;
const fmtBw = (s: { median: number; min: number; max: number }) => `${s.median.toFixed(2)} (${s.min.toFixed(2)}..${s.max.toFixed(2)})`;
const lines: string[] = [];
lines.push(`Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.gpus} GPUs, libfabric ${machine.libfabric}, bun ${machine.bun}`);
lines.push("", "Host-pushed command rate, commands/s, median (min..max) of " + repeats + " runs; x1 = one command per push call, x64 = 64 per call", "");
lines.push(`| command | ${ok.join(" | ")} |`, `|---|${ok.map(() => "---").join("|")}|`);
for (const k of Object.keys(results[ok[0]!]?.rates ?? {})) lines.push(`| ${k} | ${ok.map((p) => fmtRate(results[p].rates[k])).join(" | ")} |`);
lines.push("", "Loopback put bandwidth, GB/s, median (min..max), 1 GiB per run", "");
lines.push(`| put size | ${ok.join(" | ")} |`, `|---|${ok.map(() => "---").join("|")}|`);
for (const k of Object.keys(results[ok[0]!]?.bandwidth ?? {})) {
  lines.push(`| ${Number(k) >= 1 << 20 ? `${Number(k) >> 20} MiB` : `${Number(k) >> 10} KiB`} | ${ok.map((p) => fmtBw(results[p].bandwidth[k])).join(" | ")} |`);
}
for (const p of providers.filter((q) => results[q].failed)) lines.push("", `${p}: FAILED: ${results[p].failed}`);
for (const p of ok) {
  const g = results[p].gpuPushed;
  lines.push("", `GPU-pushed command rate (${p}): ${g ? Object.entries(g).map(([k, v]) => `${k}: ${((v as number) / 1e3).toFixed(0)}k/s`).join(", ") : "skipped (no GPU)"}`);
}
console.log(lines.join("\n"));
mkdirSync(join(root, "bench", "results"), { recursive: true });
const file = join(root, "bench", "results", "proxy.json");
let previous: Record<string, unknown> = {};
try {
  previous = JSON.parse(readFileSync(file, "utf8"));
} catch {
  // first run
}
const key = machine.gpus > 0 ? "gpu-host" : `cpu-${machine.cores}-cores`;
writeFileSync(file, JSON.stringify({ ...previous, [key]: { machine, results } }, null, 2) + "\n");
console.log(`\nwrote ${file} (${key})`);
