// bench/collectives.ts — weft's GPU-driven collectives against NCCL (libnccl.so.2, dlopen'ed),
// both in this process over the same GPUs, in the same run.
//
//   bun bench/collectives.ts            (needs >= 2 GPUs; writes bench/results/collectives.{json,md})
//
// Bandwidth: CUDA events around N back-to-back launches on every rank's stream (weft: one
// persistent kernel per rank per call; NCCL: one group call), median of 5 repeats, min/max kept.
// busbw follows nccl-tests: allGather / reduceScatter (W-1)·S/t, allReduce 2(W-1)/W·S/t,
// allToAll (W-1)/W·S/t, broadcast S/t, with S the bytes per rank (allGather input, reduceScatter
// output, allReduce buffer, allToAll input, broadcast buffer).
// Latency: mitata around `await` of an 8 KiB allReduce (launch to Promise resolution), in this
// process (both ranks) and in two processes (one rank each, the way torchrun runs), plus NCCL
// launched and synchronized.
// CTA sweep: busbw against the CTA count at 64 MiB, the data behind ffi/src/comm/tuning.hpp.
import { measure } from "mitata";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { NcclGroup, ncclVersion, type NcclKind } from "../lib/baselines/nccl.ts";
import { Communicator, type CollectiveOptions, type CollectivePlan } from "../lib/comm.ts";
import { deviceCount, deviceInfo } from "../lib/device.ts";
import { DTYPES, type DType } from "../lib/dtype.ts";
import { Event, Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { latencyPair } from "./latency.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const SIZES = [8 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB];
const KINDS: NcclKind[] = ["allGather", "reduceScatter", "allReduce", "allToAll", "broadcast"];
const DTYPE: DType = (process.env.BENCH_DTYPE as DType) ?? "bf16";
const REPEATS = 5;

if (deviceCount() < 2) {
  console.error(`bench/collectives.ts needs 2 GPUs; this machine has ${deviceCount()}`);
  process.exit(1);
}
const devices = [0, 1];
const W = devices.length;
const comms = await Communicator.local({ devices, heapBytes: 1600 * MiB });
const nccl = ncclVersion() > 0 ? NcclGroup.create(devices) : undefined;
const ncclStreams = devices.map((d) => Stream.create(d));
const events = devices.map((d) => [Event.create(d), Event.create(d)] as const);

function busFactor(kind: NcclKind): number {
  switch (kind) {
    case "allGather": case "reduceScatter": return W - 1;
    case "allReduce": return (2 * (W - 1)) / W;
    case "allToAll": return (W - 1) / W;
    case "broadcast": return 1;
  }
}

interface Buffers {
  weftIn: Tensor[];
  weftOut: Tensor[];
  ncclIn: Tensor[];
  ncclOut: Tensor[];
  count: number; // elements per rank, as the kind counts them
  dispose(): void;
}

/** Buffers for one kind at S bytes per rank: weft's symmetric ones and plain ones for NCCL. */
function buffers(kind: NcclKind, bytes: number): Buffers {
  const e = DTYPES[DTYPE].bytes;
  const n = bytes / e;
  const [inN, outN] = kind === "allGather" ? [n, W * n] : kind === "reduceScatter" ? [W * n, n] : [n, n];
  const sym = (c: Communicator, k: number) => c.empty([k], DTYPE);
  const plain = (d: number, k: number) => Tensor.empty([k], DTYPE, { device: d });
  const weftIn = comms.map((c) => (kind === "reduceScatter" || kind === "allReduce" ? sym(c, inN) : plain(c.device, inN)).fillRandom(1 + c.rank));
  const weftOut = comms.map((c) => sym(c, outN).fill(0));
  const ncclIn = devices.map((d, r) => plain(d, inN).fillRandom(1 + r));
  const ncclOut = devices.map((d) => plain(d, outN).fill(0));
  return {
    weftIn, weftOut, ncclIn, ncclOut,
    count: kind === "allToAll" ? n / W : n,
    dispose() {
      [weftIn, weftOut, ncclIn, ncclOut].flat().forEach((t) => t.dispose());
    },
  };
}

function weftPlans(kind: NcclKind, b: Buffers, opts: CollectiveOptions = {}): CollectivePlan[] {
  return comms.map((c, r) => {
    switch (kind) {
      case "allGather": return c.prepare.allGather(b.weftIn[r]!, b.weftOut[r]!, opts);
      case "reduceScatter": return c.prepare.reduceScatter(b.weftIn[r]!, b.weftOut[r]!, opts);
      case "allReduce": return c.prepare.allReduce(b.weftIn[r]!, b.weftOut[r]!, opts);
      case "allToAll": return c.prepare.allToAll(b.weftIn[r]!, b.weftOut[r]!, opts);
      case "broadcast": return c.prepare.broadcast(b.weftIn[r]!, b.weftOut[r]!, { ...opts, root: 0 });
    }
  });
}

/** Median / min / max µs per call over REPEATS timed loops of `iters` calls of `issue`. */
function timeLoop(issue: () => void, streams: Stream[], iters: number, finish: () => void): { us: number; min: number; max: number } {
  for (let i = 0; i < 3; i++) issue();
  finish();
  const samples: number[] = [];
  for (let rep = 0; rep < REPEATS; rep++) {
    streams.forEach((s, r) => events[r]![0].record(s));
    for (let i = 0; i < iters; i++) issue();
    streams.forEach((s, r) => events[r]![1].record(s));
    finish();
    events.forEach(([a, b]) => b.synchronize());
    // The slowest rank sets the pace of a collective.
    samples.push(Math.max(...events.map(([a, b]) => b.elapsedSince(a))) * 1000 / iters);
  }
  samples.sort((a, b) => a - b);
  return { us: samples[Math.floor(samples.length / 2)]!, min: samples[0]!, max: samples.at(-1)! };
}

function itersFor(bytes: number): number {
  return Math.max(5, Math.min(500, Math.round((200 * MiB) / bytes)));
}

function timeWeft(plans: CollectivePlan[], bytes: number) {
  let last: number[] = [];
  return timeLoop(() => {
    last = plans.map((p) => p.launch());
  }, comms.map((c) => c.stream), itersFor(bytes), () => plans.forEach((p, r) => p.wait(last[r]!)));
}

function timeNccl(run: () => void, bytes: number) {
  return timeLoop(run, ncclStreams, itersFor(bytes), () => ncclStreams.forEach((s) => s.synchronize()));
}

interface Row {
  kind: NcclKind;
  bytes: number;
  weft: { us: number; min: number; max: number; busbw: number };
  nccl?: { us: number; min: number; max: number; busbw: number };
  ratio?: number;
}

const gbps = (kind: NcclKind, bytes: number, us: number) => (busFactor(kind) * bytes) / (us * 1e-6) / 1e9;

const rows: Row[] = [];
for (const kind of KINDS) {
  for (const bytes of SIZES) {
    const b = buffers(kind, bytes);
    try {
      const w = timeWeft(weftPlans(kind, b), bytes);
      const row: Row = { kind, bytes, weft: { ...w, busbw: gbps(kind, bytes, w.us) } };
      if (nccl) {
        const run = nccl.prepare(kind, b.ncclIn, b.ncclOut, ncclStreams, { count: b.count });
        const n = timeNccl(run, bytes);
        row.nccl = { ...n, busbw: gbps(kind, bytes, n.us) };
        row.ratio = row.weft.busbw / row.nccl.busbw;
      }
      rows.push(row);
      console.log(`${kind.padEnd(14)} ${fmtBytes(bytes).padStart(8)}  weft ${row.weft.us.toFixed(1).padStart(9)} us ${row.weft.busbw.toFixed(1).padStart(7)} GB/s` +
        (row.nccl ? `   nccl ${row.nccl.us.toFixed(1).padStart(9)} us ${row.nccl.busbw.toFixed(1).padStart(7)} GB/s   x${row.ratio!.toFixed(2)}` : ""));
    } finally {
      b.dispose();
    }
  }
}

// ---- CTA sweep and algorithm crossover ----------------------------------------------------------------
const sweep: { kind: NcclKind; bytes: number; ctas?: number; algorithm?: string; us: number; busbw: number }[] = [];
for (const kind of ["allGather", "reduceScatter", "allReduce"] as NcclKind[]) {
  for (const bytes of [64 * MiB, 256 * MiB]) {
    const b = buffers(kind, bytes);
    try {
      for (const ctas of [8, 16, 24, 32, 48, 64, 96, 132]) {
        if (ctas > comms[0]!.maxCtas) continue;
        const w = timeWeft(weftPlans(kind, b, { ctas }), bytes);
        sweep.push({ kind, bytes, ctas, us: w.us, busbw: gbps(kind, bytes, w.us) });
        console.log(`sweep ${kind.padEnd(14)} ${fmtBytes(bytes).padStart(8)} ctas ${String(ctas).padStart(3)}: ${gbps(kind, bytes, w.us).toFixed(1)} GB/s`);
      }
    } finally {
      b.dispose();
    }
  }
}
for (const bytes of [8 * KiB, 64 * KiB, 256 * KiB, 512 * KiB, 1 * MiB]) {
  const b = buffers("allReduce", bytes);
  try {
    for (const algorithm of ["staged", "direct"] as const) {
      const w = timeWeft(weftPlans("allReduce", b, { algorithm }), bytes);
      sweep.push({ kind: "allReduce", bytes, algorithm, us: w.us, busbw: gbps("allReduce", bytes, w.us) });
      console.log(`sweep allReduce ${fmtBytes(bytes).padStart(8)} ${algorithm}: ${w.us.toFixed(2)} us`);
    }
  } finally {
    b.dispose();
  }
}

// ---- host latency: awaited 8 KiB allReduce ------------------------------------------------------------------
const latency: Record<string, { p50: number; p99: number; min: number; samples: number }> = {};
{
  const bytes = 8 * KiB;
  const b = buffers("allReduce", bytes);
  try {
    const plans = weftPlans("allReduce", b);
    const mitataOpts = { min_cpu_time: 400e6, max_samples: 20_000 };
    const s1 = await measure(async () => {
      await Promise.all(plans.map((p) => p.run()));
    }, mitataOpts);
    latency["weft plan.run(), 1 process, 2 ranks"] = pick(s1);
    const s2 = await measure(async () => {
      await Promise.all(comms.map((c, r) => c.allReduce(b.weftIn[r]!, b.weftOut[r]!)));
    }, mitataOpts);
    latency["weft comm.allReduce(), 1 process, 2 ranks"] = pick(s2);
    if (nccl) {
      const run = nccl.prepare("allReduce", b.ncclIn, b.ncclOut, ncclStreams, { count: b.count });
      const s3 = await measure(() => {
        run();
        ncclStreams.forEach((s) => s.synchronize());
      }, mitataOpts);
      latency["nccl group launch + stream sync, 1 process, 2 ranks"] = pick(s3);
    }
  } finally {
    b.dispose();
  }
}

await Communicator.disposeAll(comms);
nccl?.dispose();
ncclStreams.forEach((s) => s.dispose());
events.flat().forEach((e) => e.dispose());

// One rank per process: the way torchrun runs; each process awaits only its own launch.
(await latencyPair(W)).forEach((vs, rank) => {
  for (const [variant, v] of Object.entries(vs)) latency[`weft ${variant}, 2 processes, rank ${rank}`] = v;
});
for (const [k, v] of Object.entries(latency)) console.log(`latency 8 KiB allReduce, ${k}: p50 ${v.p50.toFixed(2)} us, p99 ${v.p99.toFixed(2)} us, min ${v.min.toFixed(2)} us`);

function pick(s: { p50: number; p99: number; min: number; samples: number[] }) {
  return { p50: s.p50 / 1000, p99: s.p99 / 1000, min: s.min / 1000, samples: s.samples.length };
}

function fmtBytes(b: number): string {
  return b >= MiB ? `${b / MiB} MiB` : `${b / KiB} KiB`;
}

// ---- results ------------------------------------------------------------------------------------------------
const gpu = deviceInfo(0);
const meta = { gpu: gpu.name, gpus: W, dtype: DTYPE, nccl: ncclVersion(), date: new Date().toISOString(), repeats: REPEATS };
const dir = join(import.meta.dirname, "results");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "collectives.json"), JSON.stringify({ meta, rows, sweep, latency }, null, 2) + "\n");
const md = [
  `# Collectives: weft vs NCCL ${meta.nccl}, ${W}x ${meta.gpu}, ${DTYPE}`,
  "",
  `CUDA-event time per call (median of ${REPEATS} loops), busbw as in nccl-tests; ratio = weft busbw / NCCL busbw. S = bytes per rank. Generated by bench/collectives.ts on ${meta.date}.`,
  "",
  "| collective | S | weft µs | weft busbw GB/s | NCCL µs | NCCL busbw GB/s | ratio |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...rows.map((r) => `| ${r.kind} | ${fmtBytes(r.bytes)} | ${r.weft.us.toFixed(1)} | ${r.weft.busbw.toFixed(1)} | ${r.nccl?.us.toFixed(1) ?? "-"} | ${r.nccl?.busbw.toFixed(1) ?? "-"} | ${r.ratio?.toFixed(2) ?? "-"} |`),
  "",
  "## Awaited 8 KiB allReduce (launch to Promise resolution)",
  "",
  "| how | p50 µs | p99 µs | min µs |",
  "|---|---:|---:|---:|",
  ...Object.entries(latency).map(([k, v]) => `| ${k} | ${v.p50.toFixed(2)} | ${v.p99.toFixed(2)} | ${v.min.toFixed(2)} |`),
  "",
  "## CTA sweep (busbw GB/s) and allReduce algorithm crossover (µs)",
  "",
  "| collective | S | ctas / algorithm | µs | busbw GB/s |",
  "|---|---:|---:|---:|---:|",
  ...sweep.map((s) => `| ${s.kind} | ${fmtBytes(s.bytes)} | ${s.ctas ?? s.algorithm} | ${s.us.toFixed(1)} | ${s.busbw.toFixed(1)} |`),
  "",
].join("\n");
writeFileSync(join(dir, "collectives.md"), md);
console.log(md);
process.exit(0);
