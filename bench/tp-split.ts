// tp-split.ts — one fused op's time split into what it adds to our GEMM, in one process, every
// variant timed interleaved with the others (the card's clocks drift under its power cap):
//
//   gemm        our GEMM alone (weft_gemm, its parameters packed once: no TS planning per launch)
//   gemm+done   the same launch publishing a completion, as every plan's kernel does
//   gemm tile   our GEMM at the op's tile width, where the GEMM's own heuristic picks another (decode
//               M = 512: 256-wide tiles in one wave against its 128-wide two)
//   gemm+done sym out / sym all   the GEMM with its output (and operands) in the symmetric heap
//   op          the fused op
//   op band N   the op with tile-order bands of N tile rows (--bands)
// and for the reduce-scatter / all-reduce cases with M >= 1024 (not with --no-bound), the best any
// copy-engine design could do, timed in a set of its own: our GEMM on each rank's stream while a
// side stream copies the bytes that design must move to the other ranks (no dependency between the
// two: perfect overlap, no first wave to wait for, no last wave to send after the math):
//   copies rs / ar       the copies alone: (W-1)/W of M x N bf16 per rank (reduce-scatter's
//                        partials), twice that for all-reduce (partials, then the final rows)
//   gemm ‖ copies rs/ar  both at once; each stream's own loop time, the slower stream counts
//
//   bun bench/tp-split.ts [--cases decode,rs,ar,ar-ce] [--shapes 4096x14336x4096,...] [--decode-m 16,128,512] [--samples 15] [--loop-ms 2]
//       [--variants gemm,gemm+done,...] [--serial] [--cold] [--rest-ms 0] [--devices 0,1] [--bands 4,16] [--no-bound]
//
// So: done = (gemm+done) - gemm, fused = op - (gemm+done): the fused kernel's structure and its
// traffic together. (The stage-out variants that split those two apart were kernels that computed
// wrong sums by design; they are no longer built into the library.)
// One JSON line per case on stdout (and $OUT/split.jsonl), plus each variant's host µs per launch:
// a loop whose host time nears its GPU time measures the host.
import { appendFileSync } from "node:fs";
import { join } from "node:path";

import { Communicator } from "../lib/comm.ts";
import { Completion } from "../lib/completion.ts";
import { deviceCount } from "../lib/device.ts";
import { check, native } from "../lib/native.ts";
import { gemmConfigFor, packGemmParams, packOpLaunch, planGemm } from "../lib/ops/gemm.ts";
import { TpPlan, type TpConfig } from "../lib/ops/tp.ts";
import { Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { RankTiming } from "./support/rank-timing.ts";
import { ScatterCase, type ScatterOp } from "./support/scatter-case.ts";

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : fallback);
const groups = opt("--cases", "decode,rs").split(",");
const SAMPLES = Number(opt("--samples", "15"));
const LOOP_MS = Number(opt("--loop-ms", "2"));
// --variants gemm,gemm%2Bdone: only these (under ncu, which serializes kernels, the op waits for the
// other rank until it times out: leave it out there).
// --serial: an event recorded after every launch, so that no kernel overlaps its predecessor
// (programmatic dependent launch off): per-launch time without the chain's overlap.
const serial = args.includes("--serial");
// --cold: every loop starts from an idle GPU, its first launch's host enqueue timed too (RankTiming,
// lead off).
const cold = args.includes("--cold");
// --rest-ms R: the GPUs idle R ms before every loop (default 0: back to back, at the card's power cap;
// tp.ts rests 2).
const REST_MS = Number(opt("--rest-ms", "0"));
const only = args.includes("--variants") ? decodeURIComponent(opt("--variants", "")).split(",") : undefined;
// (not with --variants, which is for ncu)
const bound = !args.includes("--no-bound") && !only;

// --devices 0: one rank (the fused kernels with no peer: their own cost, on a one-GPU machine). The
// decode cases keep each rank's K at 4096 whatever the world size.
const devices = opt("--devices", "0,1").split(",").map(Number);
if (deviceCount() < Math.max(...devices) + 1) {
  console.error(`bench/tp-split.ts --devices ${devices.join(",")}: this machine has ${deviceCount()} GPUs`);
  process.exit(1);
}
const W = devices.length;
const comms = await Communicator.local({ devices, heapBytes: 8 * 2 ** 30 });
const streams = comms.map((c) => c.stream);
const timing = new RankTiming(streams);
timing.serial = serial;
timing.lead = !cold && !only;
timing.restMs = REST_MS;
const completions = devices.map((d) => Completion.create(d, { slots: 64 }));

// --bands 4,16: the op again with these tile-order bands (TpConfig.groupM), as "op band N".
const bands = opt("--bands", "").split(",").filter(Boolean).map(Number);
// --shapes 4096x8192x8192,...: the rs / ar / ar-ce cases' shapes (default 4096x14336x4096).
const large = opt("--shapes", "4096x14336x4096").split(",").map((s) => s.split("x").map(Number) as [number, number, number]);
// --decode-m 16,128: which decode sizes (default all three).
const decodeRows = opt("--decode-m", "16,128,512").split(",").map(Number);
const CASES: { op: ScatterOp; shape: [number, number, number]; mover?: "copyEngine" }[] = [
  ...(groups.includes("decode") ? decodeRows.map((m) => ({ op: "gemmAllReduce" as ScatterOp, shape: [m, 8192, 4096 * devices.length] as [number, number, number] })) : []),
  ...large.flatMap((shape) => [
    ...(groups.includes("rs") ? [{ op: "gemmReduceScatter" as ScatterOp, shape, mover: "copyEngine" as const }] : []),
    ...(groups.includes("ar") ? [{ op: "gemmAllReduce" as ScatterOp, shape }] : []),
    ...(groups.includes("ar-ce") ? [{ op: "gemmAllReduce" as ScatterOp, shape, mover: "copyEngine" as const }] : []),
  ]),
];

for (const { op, shape, mover } of CASES) {
  const [M, N, K] = shape;
  const kase = new ScatterCase(comms, op, shape);
  const { a, b, k } = kase;
  const keep = <T extends { dispose(): void }>(t: T): T => kase.keep(t);
  try {
    const fused = (groupM?: number) => {
      const config: TpConfig = { path: "fused", ...(mover ? { mover } : {}), ...(groupM ? { groupM } : {}) };
      return kase.plans(config).plans;
    };
    const opPlans = fused();  // (created even when not timed: the row reports its path)
    // With --variants, only what is timed is created (every plan holds a workspace in the heap).
    const want = (name: string) => !only || only.includes(name);
    const variants: { name: string; issue: () => void }[] = [];
    const addFused = (name: string, make: () => TpPlan[]) => {
      if (!want(name)) return;
      const plans = make();
      variants.push({ name, issue: () => TpPlan.launchAll(plans) });
    };
    const gOut = comms.map((c) => keep(Tensor.empty([M, N], "bf16", { device: c.device })));
    // Packed once per rank (packGemmParams and packOpLaunch return shared buffers: copied).
    type Packed = { params: Uint8Array; launch: Uint8Array | null };
    const withSlot = (params: Uint8Array, r: number, done = true): Packed =>
      ({ params: new Uint8Array(params), launch: done ? new Uint8Array(packOpLaunch(completions[r]!.slot())) : null });
    const packed = (done: boolean, tileN?: number) => comms.map((c, r) => {
      const plan = planGemm(a[r]!, b[r]!, gOut[r]!, tileN ? { config: { tileN: tileN as 256 } } : {}, "tp-split");
      return withSlot(packGemmParams(plan, a[r]!, b[r]!, gOut[r]!, c.stream), r, done);
    });
    const gemmParams = packed(false), doneParams = packed(true);
    const launchGemm = (ps: Packed[]) => () => ps.forEach((p) => check(native().weft_gemm(p.params, p.launch), "tp-split gemm"));
    if (want("gemm")) variants.push({ name: "gemm", issue: launchGemm(gemmParams) });
    if (want("gemm+done")) variants.push({ name: "gemm+done", issue: launchGemm(doneParams) });
    const opTile = opPlans[0]!.choice.tileN;
    if (want("gemm tile") && opTile !== gemmConfigFor(a[0]!, b[0]!, gOut[0]!).tileN) {
      variants.push({ name: "gemm tile", issue: launchGemm(packed(true, opTile)) });
    }
    if (want("gemm+done sym out") || want("gemm+done sym all")) {
      // The same GEMM with its operands and output in the symmetric heap (where the fused op's output
      // and workspace live): does that memory cost the GEMM anything?
      const symA = comms.map((c, r) => keep(c.empty([M, k], "bf16").copyFrom(a[r]!)));
      const symB = comms.map((c, r) => keep(c.empty([k, N], "bf16").copyFrom(b[r]!)));
      const symOut = comms.map((c) => keep(c.empty([M, N], "bf16")));
      const symParams = comms.map((c, r) => {
        const plan = planGemm(symA[r]!, symB[r]!, symOut[r]!, {}, "tp-split");
        return withSlot(packGemmParams(plan, symA[r]!, symB[r]!, symOut[r]!, c.stream), r);
      });
      const outOnly = comms.map((c, r) => {
        const plan = planGemm(a[r]!, b[r]!, symOut[r]!, {}, "tp-split");
        return withSlot(packGemmParams(plan, a[r]!, b[r]!, symOut[r]!, c.stream), r);
      });
      variants.push({ name: "gemm+done sym out", issue: launchGemm(outOnly) }, { name: "gemm+done sym all", issue: launchGemm(symParams) });
    }
    if (want("op")) variants.push({ name: "op", issue: () => TpPlan.launchAll(opPlans) });
    for (const g of bands) addFused(`op band ${g}`, () => fused(g));
    if (only) variants.splice(0, variants.length, ...variants.filter((v) => only.includes(v.name)));
    const ms = timing.timeAll(variants.map((v) => v.issue), SAMPLES, LOOP_MS, 400);
    const us = Object.fromEntries(variants.map((v, i) => [v.name, +(ms[i]! * 1e3).toFixed(2)]));
    const host = Object.fromEntries(variants.map((v) => [v.name, +(timing.hostMs(v.issue) * 1e3).toFixed(1)]));
    const c = opPlans[0]!.choice;
    const diff = (x: string, y: string) => (us[x] !== undefined && us[y] !== undefined ? +(us[x]! - us[y]!).toFixed(2) : undefined);
    const row = { op, M, N, K, path: `${c.path} ${c.tileN} ${c.mover}`, restMs: REST_MS, us, hostUs: host,
      split: { done: diff("gemm+done", "gemm"), fused: diff("op", "gemm+done") } };
    console.log(JSON.stringify(row));
    if (process.env.OUT) appendFileSync(join(process.env.OUT, "split.jsonl"), JSON.stringify(row) + "\n");
    if (bound && W > 1 && M >= 1024) {
      // Our GEMM beside the traffic a copy-engine design must move.
      const computes = variants.filter((v) => v.name === "gemm");
      const b = { op: "bound", M, N, K, ...overlapBound(computes.map((v) => [v.name, v.issue] as [string, () => void]), M, N) };
      console.log(JSON.stringify(b));
      if (process.env.OUT) appendFileSync(join(process.env.OUT, "split.jsonl"), JSON.stringify(b) + "\n");
    }
  } finally {
    kase.dispose();
  }
}
completions.forEach((c) => c.dispose());
timing.dispose();
await Communicator.disposeAll(comms);

/** The overlap bound: each compute issue (our GEMM first) beside the copies a design must make, on two
 * streams per rank with no dependency between them; returns each one's µs per launch, the copies'
 * GB/s per direction and each compute's time beside the copies over its time alone. */
function overlapBound(computes: [string, () => void][], M: number, N: number) {
  const side = comms.map((c) => Stream.create(c.device));
  const twoStreams = new RankTiming([...streams, ...side]);
  twoStreams.restMs = REST_MS;
  const rsBytes = ((W - 1) / W) * M * N * 2;
  const chunk = 16 * 2 ** 20;
  const owned: { dispose(): void }[] = [...side, twoStreams];  // released last first: the timer before its streams
  // Each rank sends to the next one (W = 2: both directions at once), from a source of its own:
  // all-reduce's bytes, 2 x rsBytes, are rsBytes bf16 elements.
  const src = comms.map((c) => Tensor.empty([rsBytes], "bf16", { device: c.device }).fillRandom(5));
  const dst = comms.map((c) => Tensor.empty([rsBytes], "bf16", { device: c.device }));
  owned.push(...src, ...dst);
  const copies = (bytes: number) => () => comms.forEach((c, r) => {
    const to = (r + 1) % W;
    for (let at = 0; at < bytes; at += chunk) {
      const n = Math.min(chunk, bytes - at);
      check(native().weft_memcpy_peer(dst[to]!.ptr + at, comms[to]!.device, src[r]!.ptr + at, c.device, n, side[r]!.handle), "tp-split copies");
    }
  });
  const issues: [string, () => void][] = [...computes];
  for (const [name, bytes] of [["rs", rsBytes], ["ar", 2 * rsBytes]] as const) {
    const copy = copies(bytes);
    issues.push([`copies ${name}`, copy]);
    for (const [c, run] of computes) issues.push([`${c} ‖ copies ${name}`, () => { run(); copy(); }]);
  }
  try {
    const ms = twoStreams.timeAll(issues.map(([, f]) => f), SAMPLES, LOOP_MS, 400);
    const us = Object.fromEntries(issues.map(([name], i) => [name, +(ms[i]! * 1e3).toFixed(2)]));
    const gbps = { rs: +(rsBytes / (us["copies rs"]! * 1e3)).toFixed(1), ar: +(2 * rsBytes / (us["copies ar"]! * 1e3)).toFixed(1) };
    const ratio = Object.fromEntries(computes.flatMap(([c]) => ["rs", "ar"].map((k) => [`${c} ${k}`, +(us[`${c} ‖ copies ${k}`]! / us[c]!).toFixed(3)])));
    return { us, gbps, ratio };
  } finally {
    streams.forEach((st) => st.synchronize());
    side.forEach((st) => st.synchronize());
    for (const o of owned.reverse()) o.dispose();
  }
}
