// gemm.ts — weft's GEMM engine against cuBLASLt in the same process, on every shape of issue 4.
//
//   bun bench/gemm.ts [--sweep] [--iterations N] [--only 8192x8192x8192,...]
//
// Each sample is one launch timed with CUDA events (tinybench task reporting overriddenDuration);
// weft and cuBLASLt alternate in rounds; the table shows the median of >= 20 pooled samples, TFLOP/s and the ratio of cuBLAS time to
// ours (>= 1: we are faster). Inputs are random (never zeros). Every variant's output is compared
// with cuBLAS's (relative error, bf16 rounding level expected), so a fast but wrong configuration
// cannot hide in the table. --sweep also times every tile configuration and a few tile-order bands.
// Writes bench/results/gemm.json and bench/results/gemm.md (and copies them to $OUT when set).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { Bench } from "tinybench";

import { cublasLtAvailable, cublasLtGemmSync } from "../lib/baselines/cublaslt.ts";
import { deviceInfo } from "../lib/device.ts";
import { gemmConfigFor, gemmSync, type GemmConfig, type GemmOptions } from "../lib/ops/gemm.ts";
import { check, native } from "../lib/native.ts";
import { Event, Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";

const args = process.argv.slice(2);
const sweep = args.includes("--sweep");
const iterations = Number(args[args.indexOf("--iterations") + 1] ?? 0) || 25;
const only = args.includes("--only") ? args[args.indexOf("--only") + 1]!.split(",") : null;

// Ceilings for the two floors (H200 SXM datasheet): dense bf16 and HBM3e bandwidth.
const PEAK_TFLOPS = 989;
const PEAK_TBPS = 4.8;

interface Shape {
  m: number;
  n: number;
  k: number;
  transB: boolean;
}
const shapes: Shape[] = [
  [8192, 8192, 8192], [8192, 4096, 8192], [4096, 8192, 8192], [16384, 8192, 4096],
  [8192, 28672, 8192], [4096, 14336, 4096], [1024, 8192, 8192], [128, 8192, 8192],
].map(([m, n, k]) => ({ m: m!, n: n!, k: k!, transB: true }));
shapes.splice(1, 0, { m: 8192, n: 8192, k: 8192, transB: false });

const sweepConfigs: GemmConfig[] = [
  { tileN: 256, clusterM: 1, groupM: 2 }, { tileN: 256, clusterM: 1, groupM: 4 }, { tileN: 256, clusterM: 1, groupM: 8 },
  { tileN: 256, clusterM: 1, groupM: 16 }, { tileN: 256, clusterM: 2, groupM: 2 }, { tileN: 256, clusterM: 2, groupM: 4 },
  { tileN: 128, clusterM: 1, groupM: 4 }, { tileN: 128, clusterM: 2, groupM: 4 },
  { tileN: 64, clusterN: 1, groupM: 4 }, { tileN: 64, clusterN: 2, groupM: 4 },
];

interface Measured {
  name: string;
  config?: unknown;
  medianMs: number;
  minMs: number;
  maxMs: number;
  samples: number;
  tflops: number;
  relVsCublas?: number;
}

const label = (s: Shape) => `${s.m}x${s.n}x${s.k}`;
// --only names shapes as MxNxK (b [N,K]) or MxNxKt (b [K,N]), in the list above or not.
const name = (s: Shape) => `${label(s)}${s.transB ? "" : "t"}`;
for (const wanted of only ?? []) {
  const [m, n, k] = wanted.replace(/t$/, "").split("x").map(Number);
  if (!shapes.some((s) => name(s) === wanted) && [m, n, k].every((v) => Number.isInteger(v) && v! > 0)) {
    shapes.push({ m: m!, n: n!, k: k!, transB: !wanted.endsWith("t") });
  }
}
const layout = (s: Shape) => (s.transB ? "b [N,K]" : "b [K,N]");

function relError(x: Tensor, ref: Tensor, scratch: Tensor): number {
  check(native().weft_diff_norms(x.ptr, 0, ref.ptr, 0, x.numel, scratch.ptr, null), "relError");
  const d = new Float64Array((scratch.download() as Float32Array).buffer, 0, 3);
  return d[2]! > 0 ? NaN : Math.sqrt(d[0]!) / Math.sqrt(d[1]!);
}

const cublas = cublasLtAvailable();
const dev = deviceInfo(0);
console.log(`device 0: ${dev.name}, ${dev.smCount} SMs; cuBLASLt: ${cublas.available ? cublas.detail : "missing (" + cublas.detail + ")"}`);

const rows: { shape: Shape; flopFloorMs: number; byteFloorMs: number; results: Measured[]; ratio: number | null }[] = [];
for (const shape of shapes) {
  if (only && !only.includes(name(shape))) continue;
  const { m, n, k, transB } = shape;
  using a = Tensor.empty([m, k], "bf16").fillRandom(1);
  using b = Tensor.empty(transB ? [n, k] : [k, n], "bf16").fillRandom(2);
  using out = Tensor.empty([m, n], "bf16");
  using ref = Tensor.empty([m, n], "bf16");
  using scratch = Tensor.empty([6], "f32");
  using s = Stream.create(0);
  using e0 = Event.create(0);
  using e1 = Event.create(0);
  const flops = 2 * m * n * k;
  const bytes = 2 * (m * k + n * k + m * n);
  const base: GemmOptions = { transB, stream: s };

  const variants: { name: string; config?: GemmConfig; run: () => void; target: Tensor }[] = [];
  if (cublas.available) variants.push({ name: "cublaslt", run: () => cublasLtGemmSync(a, b, ref, base), target: ref });
  variants.push({ name: "weft", run: () => gemmSync(a, b, out, base), target: out });
  if (sweep) {
    for (const config of sweepConfigs) {
      variants.push({ name: `weft ${JSON.stringify(config)}`, config, run: () => gemmSync(a, b, out, { ...base, config }), target: out });
    }
  }

  // GPU clocks drift under sustained load (same config, same run: up to 20% apart minutes later), so
  // weft and cuBLASLt are measured in alternating rounds and their samples pooled; the sweep's
  // variants get one round each and are only indicative.
  const rounds = 5;
  const perRound = Math.ceil(iterations / rounds);
  const samples = new Map<string, number[]>();
  const rel = new Map<string, number>();
  const measure = (v: (typeof variants)[number], n: number) => {
    const bench = new Bench({ iterations: n, time: 0, warmupIterations: 2, warmupTime: 0, retainSamples: true });
    bench.add(v.name, () => {
      e0.record(s);
      v.run();
      e1.record(s);
      e1.synchronize();
      return { overriddenDuration: e1.elapsedSince(e0) };
    });
    bench.runSync();
    const r = bench.tasks[0]!.result;
    if (r.state !== "completed") throw new Error(`${label(shape)} ${v.name}: ${r.state} ${"error" in r ? r.error : ""}`);
    samples.set(v.name, [...(samples.get(v.name) ?? []), ...(r.latency.samples ?? [])]);
    if (v.target === out && cublas.available) {
      rel.set(v.name, relError(out, ref, scratch));
      out.fill(NaN);
    }
  };
  const head = variants.filter((v) => v.name === "cublaslt" || v.name === "weft");
  for (let r = 0; r < rounds; r++) for (const v of head) measure(v, perRound);
  for (const v of variants.filter((x) => !head.includes(x))) measure(v, iterations);

  const results: Measured[] = [];
  for (const v of variants) {
    const all = [...(samples.get(v.name) ?? [])].sort((x, y) => x - y);
    if (all.length === 0) continue;
    const med = all[Math.floor(all.length / 2)]!;
    results.push({
      name: v.name,
      config: v.name === "cublaslt" ? undefined : gemmConfigFor(a, b, out, { transB, config: v.config }),
      medianMs: med, minMs: all[0]!, maxMs: all.at(-1)!, samples: all.length,
      tflops: flops / (med * 1e-3) / 1e12, relVsCublas: rel.get(v.name),
    });
  }
  const ours = results.find((r) => r.name === "weft");
  const theirs = results.find((r) => r.name === "cublaslt");
  const ratio = ours && theirs ? theirs.medianMs / ours.medianMs : null;
  rows.push({ shape, flopFloorMs: flops / (PEAK_TFLOPS * 1e12) * 1e3, byteFloorMs: bytes / (PEAK_TBPS * 1e12) * 1e3, results, ratio });
  console.log(`${label(shape)} ${layout(shape)}: weft ${ours?.medianMs.toFixed(4)} ms (${ours?.tflops.toFixed(0)} TFLOP/s), ` +
    `cuBLASLt ${theirs?.medianMs.toFixed(4) ?? "-"} ms (${theirs?.tflops.toFixed(0) ?? "-"}), ratio ${ratio?.toFixed(3) ?? "-"}`);
  if (sweep) {
    for (const r of results.filter((x) => x.name.startsWith("weft {"))) {
      const ctas = (r.config as { ctas?: number } | undefined)?.ctas;
      console.log(`    ${r.name.padEnd(52)} ${r.medianMs.toFixed(4)} ms ${r.tflops.toFixed(0).padStart(4)} TFLOP/s  x${theirs ? (theirs.medianMs / r.medianMs).toFixed(3) : "-"}  rel ${r.relVsCublas?.toExponential(1)}  ${ctas} CTAs`);
    }
  }
}

const md = [
  `# GEMM: weft vs cuBLASLt (${dev.name}, ${dev.smCount} SMs)`,
  "",
  `bf16 in, fp32 accumulate, bf16 out. Median of ${iterations}+ CUDA-event-timed launches each on random data, same process; weft and cuBLASLt alternate in 5 rounds so that clock drift hits both.`,
  "ratio = cuBLASLt time / weft time (>= 1: weft is faster). Floors: FLOPs at " + PEAK_TFLOPS + " TFLOP/s, bytes (A, B, C once) at " + PEAK_TBPS + " TB/s.",
  "",
  "| M x N x K | B | weft ms | weft TFLOP/s | cuBLASLt ms | cuBLASLt TFLOP/s | ratio | weft config | FLOP floor ms | byte floor ms |",
  "|---|---|---|---|---|---|---|---|---|---|",
  ...rows.map(({ shape, results, ratio, flopFloorMs, byteFloorMs }) => {
    const o = results.find((r) => r.name === "weft");
    const c = results.find((r) => r.name === "cublaslt");
    const cfg = o?.config as { tileN: number; clusterM: number; clusterN: number; groupM: number; stages: number } | undefined;
    return `| ${label(shape)} | ${layout(shape)} | ${o?.medianMs.toFixed(4)} | ${o?.tflops.toFixed(0)} | ${c?.medianMs.toFixed(4) ?? "-"} | ` +
      `${c?.tflops.toFixed(0) ?? "-"} | ${ratio?.toFixed(3) ?? "-"} | ${cfg ? `128x${cfg.tileN}, cluster ${cfg.clusterM}x${cfg.clusterN}, group ${cfg.groupM}, ${cfg.stages} stages` : ""} | ` +
      `${flopFloorMs.toFixed(4)} | ${byteFloorMs.toFixed(4)} |`;
  }),
  "",
].join("\n");
const json = JSON.stringify({ device: dev.name, sms: dev.smCount, cublas: cublas.detail, iterations, date: new Date().toISOString(), rows }, null, 2);
const dir = join(import.meta.dirname, "results");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "gemm.json"), json);
writeFileSync(join(dir, "gemm.md"), md);
if (process.env.OUT) {
  writeFileSync(join(process.env.OUT, "gemm.json"), json);
  writeFileSync(join(process.env.OUT, "gemm.md"), md);
}
console.log("\n" + md);
