// tp.ts — the fused tensor-parallel ops against their baselines, all in this process over the same
// two GPUs, in the same run (DESIGN.md "Benchmarks"):
//
//   bun bench/tp.ts [--only ag,rs,ar] [--samples N] [--min-m M] [--max-m M] [--shapes MxNxK,..] [--rest-ms R] [--name tp] [--cold]      (needs >= 2 GPUs; TORCH_TP_JSON=path adds torch)
//
// Per op and shape (M, N, K), W = 2, bf16, b [K, n] / [k, N] (torch's layout):
//   ours          comm.allGatherGemm / gemmReduceScatter / gemmAllReduce, the path the cost model picks
//   own GEMM      the same local GEMM (gemmSync) with no communication: the compute-only limit
//                 (and, among the other variants, cuBLASLt's GEMM of the same local problem)
//   cuBLAS+NCCL   cuBLASLt GEMM and NCCL collective in sequence on each GPU's stream (dlopen'ed)
//   torch         bench/peers/torch_tp.py, run with torchrun in the same device session (its JSON)
// plus variants that leave one stage out or swap it: our sequential path,
// our fused path when the cost model picked the other one, the fused path's other mover, and our
// collective alone (the communication without the GEMM).
//
// Timing: tinybench tasks whose overriddenDuration is CUDA-event time of a back-to-back loop (enough
// launches for ~1 ms), the slower rank counts. Each loop starts behind one untimed launch of the same
// work, so the GPUs are busy while the host enqueues the loop: the loop measures back-to-back GPU
// time, not the first launch's host enqueue (--cold times from an idle GPU, the earlier protocol;
// bench/peers/torch_tp.py times torch's ops the same way, where the difference is large). Variants
// alternate sample by sample (the card's clocks drift under its power cap; ROUNDS) and their
// samples are pooled: the median of >= 20. Before every sample the GPUs idle REST_MS (2 ms), as
// torch_tp.py's do, so that both harnesses run at the same clocks (the loops are RankTiming's,
// bench/support/rank-timing.ts). Every variant's output is compared with cuBLAS+NCCL's.
// Writes bench/results/tp.json and tp.md (and copies them to $OUT when set).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { Bench } from "tinybench";

import { NcclGroup, ncclVersion, type NcclKind } from "../lib/baselines/nccl.ts";
import { cublasLtAvailable, cublasLtGemmSync } from "../lib/baselines/cublaslt.ts";
import { Communicator } from "../lib/comm.ts";
import { deviceCount, deviceInfo } from "../lib/device.ts";
import { gemmSync } from "../lib/ops/gemm.ts";
import { TpPlan, type TpConfig, type TpOp } from "../lib/ops/tp.ts";
import { Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { median, RankTiming } from "./support/rank-timing.ts";

const args = process.argv.slice(2);
const only = args.includes("--only") ? args[args.indexOf("--only") + 1]!.split(",") : ["ag", "rs", "ar"];
const SAMPLES = Number(args.includes("--samples") ? args[args.indexOf("--samples") + 1] : 20);
// Variants alternate sample by sample (one sample each per round): in rounds of 5 samples per
// variant, a shape's own-GEMM column moved 6% between two ops of one run (0.8223 against 0.8728 ms
// for the same GEMM), as the clocks drift under the power cap (bench/DECISIONS.md, "Variants
// alternate sample by sample").
// --rounds R: R rounds of SAMPLES / R samples per variant instead (4: the earlier rounds, though
// with the warm-up loop in the first round only, as that entry's A/B ran it).
const ROUNDS = args.includes("--rounds") ? Number(args[args.indexOf("--rounds") + 1]) : SAMPLES;
// --min-m M: only shapes with at least M rows (decode sizes only when M <= 16).
const MIN_M = Number(args.includes("--min-m") ? args[args.indexOf("--min-m") + 1] : 0);
// --max-m M: only shapes with at most M rows (--only ar --max-m 512: the decode sizes).
const MAX_M = Number(args.includes("--max-m") ? args[args.indexOf("--max-m") + 1] : Infinity);
// --shapes MxNxK,...: only these shapes (torch_tp.py --shapes takes the same list).
const ONLY_SHAPES = args.includes("--shapes") ? args[args.indexOf("--shapes") + 1]!.split(",") : undefined;
// --rest-ms R: the GPUs idle R ms before every sample (default 2; torch_tp.py --rest-ms does the
// same). Under the card's ~690 W power cap the SM clock follows the duty cycle: back to back, this
// process held both GPUs at the cap (1620-1680 MHz median) while torch_tp.py, whose barrier and
// Python leave the GPU idle between samples, ran at 1965 MHz, so the same cuBLAS GEMM took 12%
// longer here. With 2 ms of rest in both, both run at 1980 MHz (bench/DECISIONS.md, "Both harnesses
// rest 2 ms before every sample").
const REST_MS = Number(args.includes("--rest-ms") ? args[args.indexOf("--rest-ms") + 1] : 2);
// --cold: each loop from an idle GPU (see Timing above).
const COLD = args.includes("--cold");
// --name NAME: write bench/results/NAME.{json,md} (default tp), so a partial run keeps the full tables.
const NAME = args.includes("--name") ? args[args.indexOf("--name") + 1]! : "tp";

if (deviceCount() < 2) {
  console.error(`bench/tp.ts needs 2 GPUs; this machine has ${deviceCount()}`);
  process.exit(1);
}
const devices = [0, 1];
const W = devices.length;
const comms = await Communicator.local({ devices, heapBytes: 6 * 2 ** 30 });
const cublas = cublasLtAvailable();
const nccl = ncclVersion() > 0 ? NcclGroup.create(devices) : undefined;
const ncclStreams = devices.map((d) => Stream.create(d));
// One timer per stream set (every rank's plan stream; the baseline's streams): REST_MS of idle GPU,
// then, unless COLD, one untimed launch, then the timed loop (bench/support/rank-timing.ts).
function timingOf(streams: readonly Stream[]): RankTiming {
  const t = new RankTiming(streams);
  t.restMs = REST_MS;
  t.lead = !COLD;
  return t;
}
const ourTiming = timingOf(comms.map((c) => c.stream));
const ncclTiming = timingOf(ncclStreams);
const dev = deviceInfo(0);
console.log(`${W} x ${dev.name} (${dev.smCount} SMs); cuBLASLt: ${cublas.available ? cublas.detail : "missing"}; NCCL ${ncclVersion() || "missing"}`);

const SHAPES: [number, number, number][] = [
  [1024, 8192, 8192], [4096, 8192, 8192], [8192, 8192, 8192], [16384, 8192, 8192],
  [8192, 28672, 8192], [8192, 8192, 28672], [4096, 14336, 4096],
];
const DECODE: [number, number, number][] = [[16, 8192, 8192], [128, 8192, 8192], [512, 8192, 8192]];
const OPS: { key: string; op: TpOp; torch: string; title: string }[] = [
  { key: "ag", op: "allGatherGemm", torch: "ag_gemm", title: "AllGather + GEMM (column parallel): out [M, N/W] = allgather(a [M/W, K]) · b [K, N/W]" },
  { key: "rs", op: "gemmReduceScatter", torch: "gemm_rs", title: "GEMM + ReduceScatter (row parallel): out [M/W, N] = my rows of Σ a [M, K/W] · b [K/W, N]" },
  { key: "ar", op: "gemmAllReduce", torch: "gemm_ar", title: "GEMM + AllReduce: out [M, N] = Σ a [M, K/W] · b [K/W, N]" },
];

// ---- torch's numbers (same device session, bench/peers/torch_tp.py) -----------------------------------------
interface TorchRow { op: string; M: number; N: number; K: number; variant: string; ms: number }
const torchPath = process.env.TORCH_TP_JSON;
// torch_tp.py writes {"torch": version, "nccl": ..., "device": ..., "rows": [...]}.
const torch: { torch?: string; cold?: boolean; rest_ms?: number; rows: TorchRow[] } = torchPath && existsSync(torchPath) ? JSON.parse(readFileSync(torchPath, "utf8")) : { rows: [] };
if (torchPath && torch.rows.length === 0) console.log(`torch results missing or empty at ${torchPath}`);

function torchFor(op: string, [M, N, K]: [number, number, number]): { ms: number; variant: string } | undefined {
  const rows = torch.rows.filter((r) => r.op === op && r.M === M && r.N === N && r.K === K);
  const fused = rows.find((r) => r.variant === "torch_symm_mem_fused");
  if (fused) return { ms: fused.ms, variant: fused.variant };
  if (op !== "gemm_ar") return undefined;
  // torch has no fused GEMM + all-reduce: its best matmul + all-reduce (NCCL or SymmetricMemory).
  const best = [...rows].sort((a, b) => a.ms - b.ms)[0];
  return best ? { ms: best.ms, variant: best.variant } : undefined;
}

// ---- timing -------------------------------------------------------------------------------------------------
interface Variant {
  name: string;
  issue: () => void;
  /** ourTiming or ncclTiming: the streams its launches go to. */
  timing: RankTiming;
  /** Compared with the baseline's output after timing (rel error), when set. */
  output?: Tensor[];
  iters?: number;
  samples: number[];
}

function measureAll(variants: Variant[]): void {
  for (const v of variants) {
    v.issue();
    const once = v.timing.loopMs(v.issue, 1);
    v.iters = Math.max(1, Math.min(50, Math.ceil(1.0 / Math.max(once, 1e-3))));
  }
  const perRound = Math.ceil(SAMPLES / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of variants) {
      const bench = new Bench({ iterations: perRound, time: 0, warmup: round === 0, warmupIterations: 1, warmupTime: 0, retainSamples: true });
      bench.add(v.name, () => ({ overriddenDuration: v.timing.loopMs(v.issue, v.iters!) }));
      bench.runSync();
      const r = bench.tasks[0]!.result;
      if (r.state !== "completed") throw new Error(`${v.name}: ${r.state} ${"error" in r ? String(r.error) : ""}`);
      v.samples.push(...(r.latency.samples ?? []));
    }
  }
}

const syncAll = () => {
  ncclStreams.forEach((s) => s.synchronize());
  comms.forEach((c) => c.stream.synchronize());
};

/** Every variant's output against cuBLAS+NCCL's, each from one fresh launch into an output poisoned with
 * NaN (so a variant that writes nothing reads as NaN, not as an earlier run's result). Outputs are
 * bf16 from the same inputs, so equal bits (rel 0) are possible and common: the same wgmma order and
 * one bf16 rounding per partial and per add. A negative control keeps the comparison honest: our
 * GEMM of the local operands alone (a different product) must differ from the baseline. A rel above
 * 1e-2 or NaN is recorded in `failures` and fails the run. */
function checkOutputs(variants: Variant[], baseline: Tensor[], other: Tensor[], op: TpOp, [M, N, K]: [number, number, number]): Map<string, number> {
  const rel = new Map<string, number>();
  const fresh = (v: Variant, outs: Tensor[]) => {
    outs.forEach((t) => t.fill(NaN));
    v.issue();
    syncAll();
  };
  fresh(variants.find((v) => v.name === "cuBLAS+NCCL")!, baseline);
  // The first rows of `other` (our GEMM of the local operands, at least as many elements).
  const control = Math.max(...baseline.map((ref, r) => ourTiming.relError(other[r]!, ref, r)));
  if (!(control > 0.1)) failures.push(`${op} (${M}, ${N}, ${K}): the negative control compared equal (rel ${control}): the comparison cannot fail`);
  for (const v of variants) {
    if (!v.output || v.name === "cuBLAS+NCCL") continue;
    fresh(v, v.output);
    const e = Math.max(...v.output.map((o, r) => ourTiming.relError(o, baseline[r]!, r)));
    rel.set(v.name, e);
    if (!(e <= 1e-2)) failures.push(`${op} (${M}, ${N}, ${K}) ${v.name}: rel ${e} vs cuBLAS+NCCL`);
  }
  return rel;
}
const failures: string[] = [];

// ---- one op at one shape ------------------------------------------------------------------------------------
interface Row {
  op: TpOp;
  M: number; N: number; K: number;
  ours: { ms: number; path: string; tileN: number; mover: string; predictedFusedUs: number; predictedSequentialUs: number };
  gemmOnly: number;
  cublasNccl?: number;
  torch?: { ms: number; variant: string };
  variants: Record<string, { ms: number; min: number; max: number; samples: number; relVsBaseline?: number }>;
}

function runShape(op: TpOp, torchOp: string, shape: [number, number, number]): Row {
  const [M, N, K] = shape;
  const ag = op === "allGatherGemm";
  const n = ag ? N / W : N;
  const k = ag ? K : K / W;
  const mShard = Math.ceil(M / W);
  const owned: { dispose(): void }[] = [];
  const keep = <T extends { dispose(): void }>(t: T): T => (owned.push(t), t);
  try {
    const a = comms.map((c) => keep(Tensor.empty(ag ? [mShard, k] : [M, k], "bf16", { device: c.device }).fillRandom(11 + c.rank)));
    const b = comms.map((c) => keep(Tensor.empty([k, n], "bf16", { device: c.device }).fillRandom(23 + c.rank)));
    const outRows = op === "gemmReduceScatter" ? mShard : M;
    const out = comms.map((c) => keep(ag ? Tensor.empty([M, n], "bf16", { device: c.device }) : c.empty([outRows, n], "bf16")));
    const args = (r: number, config: TpConfig) => ({ a: a[r]!, b: b[r]!, out: out[r]!, config });
    const make = (config: TpConfig): TpPlan[] => comms.map((c, r) => keep(
      op === "allGatherGemm" ? c.allGatherGemm(args(r, config)) : op === "gemmReduceScatter" ? c.gemmReduceScatter(args(r, config)) : c.gemmAllReduce(args(r, config))));
    const launchAll = (plans: TpPlan[]) => () => {
      TpPlan.launchAll(plans);
    };

    const auto = make({});
    const variants: Variant[] = [{ name: "ours", issue: launchAll(auto), timing: ourTiming, output: out, samples: [] }];
    const choice = auto[0]!.choice;
    const other: TpConfig | undefined = choice.path === "fused" ? { path: "sequential" } : choice.fusedAvailable ? { path: "fused" } : undefined;
    const outOther = other ? comms.map((c, r) => keep(ag ? Tensor.empty([M, n], "bf16", { device: c.device }) : c.empty([outRows, n], "bf16"))) : [];
    if (other) {
      const plans = comms.map((c, r) => keep(op === "allGatherGemm" ? c.allGatherGemm({ ...args(r, other), out: outOther[r]! })
        : op === "gemmReduceScatter" ? c.gemmReduceScatter({ ...args(r, other), out: outOther[r]! }) : c.gemmAllReduce({ ...args(r, other), out: outOther[r]! })));
      variants.push({ name: `ours ${other.path}`, issue: launchAll(plans), timing: ourTiming, output: outOther, samples: [] });
    }
    // The fused path with a mover the cost model did not pick (reduce-scatter / all-reduce: the
    // copy-engine mover needs M a multiple of 128 x W; all-reduce's exchange mover is the other one
    // where it does not apply). "ours fused <mover>" in the tables.
    const fusedMover = choice.path === "fused" ? choice.mover : choice.fusedAvailable ? "ctas" : "none";
    const otherMover = fusedMover === "exchange" || fusedMover === "copyEngine" ? "ctas"
      : fusedMover !== "ctas" ? undefined
      : ag || M % (128 * W) === 0 ? "copyEngine"
      : op === "gemmAllReduce" ? "exchange" : undefined;
    if (otherMover) {
      const outMover = comms.map((c) => keep(ag ? Tensor.empty([M, n], "bf16", { device: c.device }) : c.empty([outRows, n], "bf16")));
      const cfg: TpConfig = { path: "fused", mover: otherMover };
      const plans = comms.map((c, r) => keep(op === "allGatherGemm" ? c.allGatherGemm({ ...args(r, cfg), out: outMover[r]! })
        : op === "gemmReduceScatter" ? c.gemmReduceScatter({ ...args(r, cfg), out: outMover[r]! }) : c.gemmAllReduce({ ...args(r, cfg), out: outMover[r]! })));
      variants.push({ name: `ours fused ${otherMover}`, issue: launchAll(plans), timing: ourTiming, output: outMover, samples: [] });
    }

    // Own GEMM only: the local problem with no communication.
    const gA = comms.map((c, r) => (ag ? keep(Tensor.empty([M, k], "bf16", { device: c.device }).fillRandom(31 + r)) : a[r]!));
    const gOut = comms.map((c) => keep(Tensor.empty([M, n], "bf16", { device: c.device })));
    variants.push({
      name: "own GEMM only", timing: ourTiming, samples: [],
      issue: () => comms.forEach((c, r) => gemmSync(gA[r]!, b[r]!, gOut[r]!, { stream: c.stream })),
    });
    // cuBLASLt's GEMM of the same local problem, timed the same way: how far our GEMM engine is from
    // it under this load (the fused ops' own limit is our engine).
    if (cublas.available) {
      variants.push({
        name: "cuBLAS GEMM only", timing: ourTiming, samples: [],
        issue: () => comms.forEach((c, r) => cublasLtGemmSync(gA[r]!, b[r]!, gOut[r]!, { stream: c.stream })),
      });
    }

    // Our collective alone (the communication without the GEMM).
    const kind: NcclKind = ag ? "allGather" : op === "gemmReduceScatter" ? "reduceScatter" : "allReduce";
    const collIn = comms.map((c, r) => (ag ? a[r]! : keep(c.empty([M, n], "bf16").fillRandom(41 + r))));
    const collOut = comms.map((c) => (ag ? keep(c.empty([M, k], "bf16")) : kind === "reduceScatter" ? keep(Tensor.empty([mShard, n], "bf16", { device: c.device })) : undefined));
    const coll = comms.map((c, r) => kind === "allGather" ? c.prepare.allGather(collIn[r]!, collOut[r]!)
      : kind === "reduceScatter" ? c.prepare.reduceScatter(collIn[r]!, collOut[r]!) : c.prepare.allReduce(collIn[r]!));
    variants.push({ name: "our collective only", timing: ourTiming, samples: [], issue: () => coll.forEach((p) => p.launch()) });

    // cuBLASLt + NCCL in sequence (the unfused baseline), on each GPU's own stream.
    let baseline: Tensor[] | undefined;
    if (cublas.available && nccl) {
      const bOut = comms.map((c) => keep(Tensor.empty([outRows, n], "bf16", { device: c.device })));
      baseline = bOut;
      if (ag) {
        const gathered = comms.map((c) => keep(Tensor.empty([M, k], "bf16", { device: c.device })));
        const gather = nccl.prepare("allGather", a, gathered, ncclStreams, { count: mShard * k });
        variants.push({
          name: "cuBLAS+NCCL", timing: ncclTiming, samples: [],
          issue: () => {
            gather();
            comms.forEach((c, r) => cublasLtGemmSync(gathered[r]!, b[r]!, bOut[r]!, { stream: ncclStreams[r]! }));
          },
        });
      } else {
        const partial = comms.map((c) => keep(Tensor.empty([M, n], "bf16", { device: c.device })));
        const collective = op === "gemmReduceScatter"
          ? nccl.prepare("reduceScatter", partial, bOut, ncclStreams, { count: mShard * n })
          : nccl.prepare("allReduce", partial, bOut, ncclStreams, { count: M * n });
        variants.push({
          name: "cuBLAS+NCCL", timing: ncclTiming, samples: [],
          issue: () => {
            comms.forEach((c, r) => cublasLtGemmSync(a[r]!, b[r]!, partial[r]!, { stream: ncclStreams[r]! }));
            collective();
          },
        });
      }
    }

    measureAll(variants);
    const row: Row = {
      op, M, N, K,
      ours: { ms: 0, path: choice.path, tileN: choice.tileN, mover: choice.mover, predictedFusedUs: choice.predictedFusedUs, predictedSequentialUs: choice.predictedSequentialUs },
      gemmOnly: 0, variants: {},
    };
    const rel = baseline ? checkOutputs(variants, baseline, gOut, op, shape) : new Map<string, number>();
    for (const v of variants) {
      const s = [...v.samples].sort((x, y) => x - y);
      const entry: Row["variants"][string] = { ms: median(s), min: s[0]!, max: s.at(-1)!, samples: s.length };
      if (rel.has(v.name)) entry.relVsBaseline = rel.get(v.name);
      row.variants[v.name] = entry;
    }
    row.ours.ms = row.variants["ours"]!.ms;
    row.gemmOnly = row.variants["own GEMM only"]!.ms;
    row.cublasNccl = row.variants["cuBLAS+NCCL"]?.ms;
    row.torch = torchFor(torchOp, shape);
    const bar = Math.min(row.cublasNccl ?? Infinity, row.torch?.ms ?? Infinity);
    console.log(`${op.padEnd(17)} (${M}, ${N}, ${K})  ours ${row.ours.ms.toFixed(4)} ms [${choice.path}${choice.path === "fused" ? ` ${choice.tileN} ${choice.mover}` : ""}]` +
      `  GEMM ${row.gemmOnly.toFixed(4)}  cuBLAS+NCCL ${row.cublasNccl?.toFixed(4) ?? "-"}  torch ${row.torch?.ms.toFixed(4) ?? "-"}` +
      `  x${(row.ours.ms / bar).toFixed(3)} of best  x${(row.ours.ms / row.gemmOnly).toFixed(3)} of GEMM` +
      `  | ${Object.entries(row.variants).filter(([k2]) => !["ours", "own GEMM only", "cuBLAS+NCCL"].includes(k2)).map(([k2, v]) => `${k2} ${v.ms.toFixed(4)}`).join(", ")}` +
      `  rel ${row.variants["ours"]!.relVsBaseline?.toExponential(1) ?? "-"}`);
    return row;
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}

function otherMoverCell(r: Row): string {
  const e = Object.entries(r.variants).find(([name]) => name.startsWith("ours fused "));
  return e ? `${e[0].slice("ours fused ".length)} ${(e[1].ms / r.gemmOnly).toFixed(3)}` : "-";
}

// ---- tables (rewritten after every row, so that a run cut short still leaves its results) ----------------------
function emit(final: boolean): void {
  const f = (x: number | undefined, d = 3) => (x === undefined ? "-" : x.toFixed(d));
  const md: string[] = [
    `# Fused tensor-parallel ops (${W} x ${dev.name}, ${dev.smCount} SMs)`,
    "",
    `bf16, b [K, n] layout, random data. Median of ${SAMPLES} CUDA-event samples per column (each a back-to-back loop of ~1 ms${COLD ? " from an idle GPU" : " behind one untimed launch"}, after ${REST_MS} ms of idle GPU, slower rank), ` +
    `variants alternating ${ROUNDS === SAMPLES ? "sample by sample" : `in ${ROUNDS} rounds`}. cuBLAS+NCCL: cuBLASLt ${cublas.available ? "" : "(missing) "}and NCCL ${ncclVersion() || "(missing)"} in this process. ` +
    `torch: ${torch.torch ? `torch ${torch.torch}, bench/peers/torch_tp.py${torch.cold ? " --cold" : ""} under torchrun in the same device session, ${torch.rest_ms ?? 0} ms of idle GPU before every sample${(torch.rest_ms ?? 0) !== REST_MS ? " (NOT the same rest as ours: the clocks differ)" : ""}` : "not run"}. ` +
    "best = min(cuBLAS+NCCL, torch); ours/best <= 1 means ours is faster. GEMM+AR has no fused op in torch: its column is its best matmul + all-reduce.",
    "",
  ];
  for (const o of OPS) {
    const rs = rows.filter((r) => r.op === o.op);
    if (rs.length === 0) continue;
    md.push(`## ${o.title}`, "", "| M, N, K | ours ms | path | own GEMM ms | ours / GEMM | cuBLAS+NCCL ms | torch ms | ours / best | our sequential ms | our collective alone ms | fused, other mover / GEMM |",
      "|---|---|---|---|---|---|---|---|---|---|---|");
    for (const r of rs) {
      const best = Math.min(r.cublasNccl ?? Infinity, r.torch?.ms ?? Infinity);
      const seq = r.ours.path === "sequential" ? r.ours.ms : r.variants["ours sequential"]?.ms;
      md.push(`| ${r.M}, ${r.N}, ${r.K} | ${f(r.ours.ms, 4)} | ${r.ours.path}${r.ours.path === "fused" ? ` ${r.ours.tileN}${r.ours.mover !== "none" ? ` ${r.ours.mover}` : ""}` : ""} | ` +
        `${f(r.gemmOnly, 4)} | ${f(r.ours.ms / r.gemmOnly)} | ${f(r.cublasNccl, 4)} | ${f(r.torch?.ms, 4)} | ${Number.isFinite(best) ? f(r.ours.ms / best) : "-"} | ` +
        `${f(seq, 4)} | ${f(r.variants["our collective only"]?.ms, 4)} | ${otherMoverCell(r)} |`);
    }
    md.push("");
  }
  md.push("Other variants per shape (ms; rel = ‖ours − cuBLAS+NCCL‖ / ‖cuBLAS+NCCL‖):", "");
  for (const r of rows) {
    md.push(`- ${r.op} (${r.M}, ${r.N}, ${r.K}): ` + Object.entries(r.variants).map(([k2, v]) => `${k2} ${f(v.ms, 4)}${v.relVsBaseline !== undefined ? ` (rel ${v.relVsBaseline.toExponential(1)})` : ""}`).join("; ") +
      `; predicted fused ${f(r.ours.predictedFusedUs / 1000, 4)}, sequential ${f(r.ours.predictedSequentialUs / 1000, 4)}`);
  }
  md.push("");

  const text = md.join("\n");
  const json = JSON.stringify({ device: dev.name, sms: dev.smCount, world: W, nccl: ncclVersion(), cublas: cublas.detail, torch: torch.torch ?? null,
    samples: SAMPLES, rounds: ROUNDS, date: new Date().toISOString(), rows }, null, 1);
  const dir = join(import.meta.dirname, "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${NAME}.json`), json);
  writeFileSync(join(dir, `${NAME}.md`), text);
  if (process.env.OUT) {
    writeFileSync(join(process.env.OUT, `${NAME}.json`), json);
    writeFileSync(join(process.env.OUT, `${NAME}.md`), text);
  }
  if (final) console.log("\n" + text);
}

// ---- run ------------------------------------------------------------------------------------------------------
const rows: Row[] = [];
for (const o of OPS) {
  if (!only.includes(o.key)) continue;
  for (const shape of (o.op === "gemmAllReduce" ? [...SHAPES, ...DECODE] : SHAPES).filter(([m, n, k]) => m >= MIN_M && m <= MAX_M && (!ONLY_SHAPES || ONLY_SHAPES.includes(`${m}x${n}x${k}`)))) {
    rows.push(runShape(o.op, o.torch, shape));
    emit(false);
  }
}
emit(true);

ourTiming.dispose();
ncclTiming.dispose();
nccl?.dispose();
await Communicator.disposeAll(comms);
if (failures.length > 0) {
  console.error(`output checks failed:\n${failures.join("\n")}`);
  process.exit(1);
}
