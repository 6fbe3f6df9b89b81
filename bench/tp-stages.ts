// tp-stages.ts — what limits fused GEMM + reduce-scatter / all-reduce: the fused kernel beside our
// GEMM alone, in one process, under the stage-out variant and tile-order lag that the environment
// selects at plan creation (ffi/src/tp: WEFT_TP_SCATTER_VARIANT, WEFT_TP_SCATTER_LAG). Run it once
// per setting (bench/tp-variants.sh), which compares the settings.
//
//   WEFT_TP_SCATTER_VARIANT=2 bun bench/tp-stages.ts --label stores [--samples N] [--mover copyEngine] [--cases rs,ar] [--loop-ms 1]
//
// Variants (cuda/fused/fused.h, ScatterVariant): 0 full op; 1 every store and add local (no NVLink
// data); 2 the peers' adds become plain stores; 3 plain local stores, no flag waits; 4 as 3 without
// the final handshake; 5 as 4 in the plain GEMM's tile order; exchange mover only: 7 the first wave
// by the SMs, 8 the TMA exchange where the register exchange applies, 9 deferred tiles never
// finished, 10 the register exchange left out, 11 the register exchange looped back into the own
// region (bench/tp-split.ts times 10 and 11 against our GEMM). Only variant 0 is checked (against our sequential path, same inputs); 7 and 8 are
// other movers and compute the right sum too.
// One JSON line per (op, shape, tileN) goes to stdout and to $OUT/stages-<label>.jsonl.
import { appendFileSync } from "node:fs";
import { join } from "node:path";

import { Communicator } from "../lib/comm.ts";
import { deviceCount } from "../lib/device.ts";
import { gemmSync } from "../lib/ops/gemm.ts";
import { TpPlan, type TpConfig } from "../lib/ops/tp.ts";
import { Tensor } from "../lib/tensor.ts";
import { setNativeEnv } from "../test/support/native-env.ts";
import { median, RankTiming } from "./support/rank-timing.ts";
import { ScatterCase, type ScatterOp } from "./support/scatter-case.ts";

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : fallback);
const label = opt("--label", "full");
// --mover ctas|copyEngine: the fused path's mover (copyEngine takes variants 1, 3 and 4 only; with it,
// 4 also drops the chunk counts, so the epilogue is the plain GEMM's).
const mover = opt("--mover", "ctas") as "ctas" | "copyEngine" | "exchange";
// --cases rs,ar,decode: which groups of cases to run.
const groups = opt("--cases", "rs,ar,decode").split(",");
// --loop-ms T: each timed sample is a back-to-back loop of about T ms (the two ranks' host launch
// skew, paid once per loop, is amortised over it).
const LOOP_MS = Number(opt("--loop-ms", "1"));
const SAMPLES = Number(opt("--samples", "12"));
const variant = Number(process.env.WEFT_TP_SCATTER_VARIANT ?? 0);

if (deviceCount() < 2) {
  console.error(`bench/tp-stages.ts needs 2 GPUs; this machine has ${deviceCount()}`);
  process.exit(1);
}
const devices = [0, 1];
const comms = await Communicator.local({ devices, heapBytes: 16 * 2 ** 30 });  // room for TP_STAGES_ALSO plans
const streams = comms.map((c) => c.stream);

// TP_STAGES_DECODE_TILE=64|128: the decode cases' tile width (default: the cost model's).
const decodeTile = process.env.TP_STAGES_DECODE_TILE ? (Number(process.env.TP_STAGES_DECODE_TILE) as 64 | 128) : undefined;
const LARGE: [number, number, number][] = [
  [4096, 8192, 8192], [8192, 8192, 8192], [16384, 8192, 8192], [8192, 28672, 8192], [4096, 14336, 4096],
];
// TP_STAGES_SHAPES=4096x14336x4096+...: only these of the large shapes.
const shapesEnv = process.env.TP_STAGES_SHAPES?.split(/[+,]/);
const large = LARGE.filter((s) => !shapesEnv || shapesEnv.includes(s.join("x")));
const CASES: { op: ScatterOp; shape: [number, number, number]; tileN?: 64 | 128 | 256 }[] = [
  ...(groups.includes("rs") ? large.map((shape) => ({ op: "gemmReduceScatter" as ScatterOp, shape })) : []),
  ...(groups.includes("ar") ? large.map((shape) => ({ op: "gemmAllReduce" as ScatterOp, shape })) : []),
  ...(groups.includes("decode") && mover !== "copyEngine"
    ? ([16, 128, 512] as const).map((m) => ({ op: "gemmAllReduce" as ScatterOp, shape: [m, 8192, 8192] as [number, number, number], tileN: decodeTile }))
    : []),
];

const timing = new RankTiming(streams);

/** Host ms of one issue() (every rank's launch) on idle GPUs: what the host spends before the last
 * rank's kernel is even queued (median of 5). */
function hostOnceMs(issue: () => void): number {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    streams.forEach((s) => s.synchronize());
    const t0 = performance.now();
    issue();
    xs.push(performance.now() - t0);
  }
  streams.forEach((s) => s.synchronize());
  return median(xs);
}

for (const { op, shape, tileN } of CASES) {
  const [M, N, K] = shape;
  const kase = new ScatterCase(comms, op, shape);
  const { a, b } = kase;
  const keep = <T extends { dispose(): void }>(t: T): T => kase.keep(t);
  try {
    const make = (config: TpConfig) => {
      const { out, plans } = kase.plans(config);
      return { out, plans, issue: () => TpPlan.launchAll(plans) };
    };
    // TP_STAGES_GROUP_M: the fused kernel's band height (default: the planner's).
    const groupM = process.env.TP_STAGES_GROUP_M ? Number(process.env.TP_STAGES_GROUP_M) : undefined;
    const fused = make({ path: "fused", mover, ...(tileN ? { tileN } : {}), ...(groupM ? { groupM } : {}) });
    const gOut = comms.map((c) => keep(Tensor.empty([M, N], "bf16", { device: c.device })));
    const gemm = () => comms.forEach((c, r) => gemmSync(a[r]!, b[r]!, gOut[r]!, { stream: c.stream }));
    // TP_STAGES_ALSO=g8+t128+t128g16+v3: the same fused op with these band heights (gG), tile
    // widths (tT) or stage-out variants (vN) too, timed interleaved with it in this process (one JSON line each, label
    // "<label>-<config>").
    // vN: created under WEFT_TP_SCATTER_VARIANT=N (the planner reads it at plan creation).
    const also = (process.env.TP_STAGES_ALSO ?? "").split(/[+,]/).filter(Boolean).map((name) => {
      const t = /t(\d+)/.exec(name), g = /g(\d+)/.exec(name), v = /v(\d+)/.exec(name);
      const config: TpConfig = { path: "fused", mover, tileN: (t ? Number(t[1]) : tileN) as 64 | 128 | 256 | undefined,
        ...(g ? { groupM: Number(g[1]) } : {}) };
      // In the C environment: the planner reads it with getenv (test/support/native-env.ts). Until
      // this went through setNativeEnv, vN plans were plain plans (bench/DECISIONS.md, "A native
      // switch is set with setenv, not process.env").
      const saved = process.env.WEFT_TP_SCATTER_VARIANT;
      if (v) setNativeEnv("WEFT_TP_SCATTER_VARIANT", v[1]!);
      try {
        return { name, plan: make(config) };
      } finally {
        setNativeEnv("WEFT_TP_SCATTER_VARIANT", saved);
      }
    });
    const times = timing.timeAll([fused.issue, gemm, ...also.map((x) => x.plan.issue)], SAMPLES, LOOP_MS, 50 * LOOP_MS);
    const fusedMs = times[0]!, gemmMs = times[1]!;
    for (const [i, x] of also.entries()) {
      const ms = times[2 + i]!;
      const c = x.plan.plans[0]!.choice;
      const extra = { label: `${label}-${x.name}`, op, M, N, K, tileN: c.tileN, groupM: c.groupM, fusedMs: ms, gemmMs, ratio: ms / gemmMs };
      console.log(JSON.stringify(extra));
      if (process.env.OUT) appendFileSync(join(process.env.OUT, `stages-${label}.jsonl`), JSON.stringify(extra) + "\n");
    }
    const hostFusedMs = timing.hostMs(fused.issue), hostGemmMs = timing.hostMs(gemm), hostOnceFusedMs = hostOnceMs(fused.issue);
    let rel: number | undefined;
    if (variant === 0) {
      // The last timed launch's output against our sequential path on the same inputs.
      const seq = make({ path: "sequential" });
      for (const t of [...fused.out, ...seq.out]) t.fill(NaN);
      fused.issue();
      seq.issue();
      streams.forEach((s) => s.synchronize());
      rel = Math.max(...comms.map((_, r) => timing.relError(fused.out[r]!, seq.out[r]!, r)));
    }
    const row = { label, mover, variant, lagEnv: process.env.WEFT_TP_SCATTER_LAG ?? null, op, M, N, K, tileN: fused.plans[0]!.choice.tileN, groupM: fused.plans[0]!.choice.groupM,
      fusedMs, gemmMs, ratio: fusedMs / gemmMs, loopMs: LOOP_MS, hostFusedMs, hostGemmMs, hostOnceFusedMs, rel };
    console.log(JSON.stringify(row));
    // WEFT_TP_TRACE: the plan prints the stamps of its latest launch when disposed; make that one a
    // launch in a back-to-back loop (steady state) rather than the check's launch from idle GPUs.
    if (process.env.WEFT_TP_TRACE) {
      for (let i = 0; i < 6; i++) fused.issue();
      streams.forEach((s) => s.synchronize());
    }
    if (process.env.OUT) appendFileSync(join(process.env.OUT, `stages-${label}.jsonl`), JSON.stringify(row) + "\n");
  } finally {
    kase.dispose();
  }
}
await Communicator.disposeAll(comms);
