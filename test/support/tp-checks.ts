// tp-checks.ts — the GPU checks of the fused tensor-parallel ops, written once for both process
// models: `ctx.comms` are the ranks this process drives (both with Communicator.local, one in a
// per-rank process). Rank q's operands are fillRandom(seed(tag, q)), so every process builds every
// rank's operands, and so every reference, on its own GPU without exchanging data.
//
// Rules (DESIGN.md "Testing"): fresh random inputs, outputs poisoned with NaN, every element checked
// on the GPU (‖out − ref‖ / ‖ref‖ in fp64 and a count of non-finite outputs), references from the
// CUDA-core fp32 GEMM (weft_reference_gemm) summed in fp32 (weft_accumulate).
import { LocalStore } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { DTYPES } from "../../lib/dtype.ts";
import { check, native } from "../../lib/native.ts";
import { TpPlan, tpChoice, type TpConfig, type TpOp } from "../../lib/ops/tp.ts";
import { Tensor } from "../../lib/tensor.ts";
import { accumulate } from "./collective-checks.ts";
import { deviceErrorAsync, readErrors, referenceGemm } from "./gemm.ts";
import type { NamedCheck } from "./report-channel.ts";

export interface TpContext {
  comms: Communicator[];
  world: number;
}

export type TpCheck = NamedCheck<TpContext>;

const TOL = 1e-2;
const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);

/** `world` ranks of one communicator, all on GPU 0 in this process. shareSms: true, each rank plans
 * for a 1/W share of the SMs (smBudget), so that every rank's persistent kernels are resident
 * together; a number, that many SMs each. */
export async function ranksOnOneGpu(world: number, heapBytes: number, shareSms: boolean | number = false): Promise<Communicator[]> {
  const stores = LocalStore.group(world, { timeoutMs: 60_000 });
  const smBudget = typeof shareSms === "number" ? shareSms : shareSms ? Math.floor(deviceInfo(0).smCount / world) : undefined;
  return Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: "gpu0" }, 0,
    { heapBytes, timeoutMs: GPU_TIMEOUT_MS, smBudget })));
}

const BF16_NAN = 0x7fc0;

/** (M, N, K) of the issue: the global problem; n = N / W (all-gather) and k = K / W (the others). */
export const SHAPES: [number, number, number][] = [
  [1, 8192, 8192], [127, 1000, 520], [1024, 8192, 8192], [8192, 8192, 8192], [4096, 14336, 4096],
];

/** Sizes no tile and no 16-byte row divides (the issue's tails), as (M, N, K): M not a multiple of
 * 128 x W, and at W = 2 an odd n = N / W (all-gather, (127, 1001, 522)), an odd K (all-gather, (300,
 * 999, 1043)), an odd N and an odd k = K / W (the others, (127, 1001, 522)). The fused kernels' TMA
 * needs 16-byte rows, so these run on the sequential path through padded copies. */
export const ODD_SHAPES: [number, number, number][] = [[127, 1001, 522], [300, 999, 1043]];

function seed(tag: number, rank: number, which: number): number {
  return tag * 7919 + which * 131 + rank + 1;
}

function each<T>(ctx: TpContext, f: (c: Communicator, i: number) => Promise<T> | T): Promise<T[]> {
  return Promise.all(ctx.comms.map((c, i) => f(c, i)));
}

/** A non-owning [rows, cols] view of t starting at row `row0`. */
function rows(t: Tensor, row0: number, count: number): Tensor {
  const cols = t.shape[1]!;
  return Tensor.wrap(t.ptr + row0 * cols * DTYPES[t.dtype].bytes, [count, cols], t.dtype, t.device);
}

/** NaN into a bf16 tensor: synchronous without a stream, else ordered on it. */
function poison(t: Tensor, stream: { handle: number } | null = null): void {
  check(native().weft_fill(t.ptr, t.numel, 2, BF16_NAN, stream ? stream.handle : null), "poison");
}

/** An f32 constant, ordered on `stream`. */
function fillF32(t: Tensor, value: number, stream: { handle: number }): void {
  const bits = new Uint32Array(new Float32Array([value]).buffer)[0]!;
  check(native().weft_fill(t.ptr, t.numel, 4, bits, stream.handle), "fillF32");
}

export interface Problem {
  op: TpOp;
  M: number;
  N: number;
  K: number;
  transB: boolean;
  tag: number;
}

interface RankData {
  a: Tensor;
  b: Tensor;
  out: Tensor;
  gathered?: Tensor;
  ref: Tensor;       // f32 reference of out's checked rows
  refRows: number;   // rows of out that are checked (reduce-scatter's last ranks may own fewer)
  gatheredRef?: Tensor;
  dispose(): void;
}

function local(p: Problem, W: number) {
  const n = p.op === "allGatherGemm" ? Math.ceil(p.N / W) : p.N;
  const k = p.op === "allGatherGemm" ? p.K : Math.ceil(p.K / W);
  return { n, k, mShard: Math.ceil(p.M / W) };
}

function weights(p: Problem, q: number, n: number, k: number, device: number): Tensor {
  return Tensor.empty(p.transB ? [n, k] : [k, n], "bf16", { device }).fillRandom(seed(p.tag, q, 1));
}

/** Operands, output and fp32 reference of rank `rank` (on device c.device). */
function prepare(c: Communicator, p: Problem, W: number): RankData {
  const { n, k, mShard } = local(p, W);
  const device = c.device;
  const r = c.rank;
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T) => (made.push(t), t);
  const b = keep(weights(p, r, n, k, device));
  let a: Tensor, out: Tensor, ref: Tensor, refRows: number;
  let gathered: Tensor | undefined, gatheredRef: Tensor | undefined;
  if (p.op === "allGatherGemm") {
    a = keep(Tensor.empty([mShard, k], "bf16", { device }).fillRandom(seed(p.tag, r, 0)));
    out = keep(Tensor.empty([p.M, n], "bf16", { device }));
    gathered = keep(Tensor.empty([p.M, k], "bf16", { device }));
    // Every rank's rows, as the gather should assemble them (only the first M rows count).
    const full = keep(Tensor.empty([W * mShard, k], "bf16", { device }));
    for (let q = 0; q < W; q++) rows(full, q * mShard, mShard).fillRandom(seed(p.tag, q, 0));
    gatheredRef = rows(full, 0, p.M);
    ref = keep(Tensor.empty([p.M, n], "f32", { device }));
    referenceGemm(full, b, ref, { m: p.M, n, k }, p.transB);
    refRows = p.M;
  } else {
    a = keep(Tensor.empty([p.M, k], "bf16", { device }).fillRandom(seed(p.tag, r, 0)));
    const scatter = p.op === "gemmReduceScatter";
    out = keep(c.empty([scatter ? mShard : p.M, n], "bf16"));
    const row0 = scatter ? r * mShard : 0;
    refRows = scatter ? Math.max(0, Math.min(p.M - row0, mShard)) : p.M;
    ref = keep(Tensor.empty([Math.max(refRows, 1), n], "f32", { device }).fill(0));
    if (refRows > 0) {
      using part = Tensor.empty([refRows, n], "f32", { device });
      for (let q = 0; q < W; q++) {
        using aq = Tensor.empty([p.M, k], "bf16", { device }).fillRandom(seed(p.tag, q, 0));
        using bq = weights(p, q, n, k, device);
        using slice = rows(aq, row0, refRows);
        referenceGemm(slice, bq, part, { m: refRows, n, k }, p.transB);
        accumulate(ref, part);
      }
    }
  }
  return {
    a, b, out, gathered, ref, refRows, gatheredRef,
    dispose() {
      for (const t of made.reverse()) t.dispose();
    },
  };
}

function makePlan(c: Communicator, p: Problem, d: RankData, config: TpConfig, withGathered: boolean): TpPlan {
  if (p.op === "allGatherGemm") {
    return c.allGatherGemm({ a: d.a, b: d.b, out: d.out, gatheredA: withGathered ? d.gathered : undefined, transB: p.transB, config });
  }
  if (p.op === "gemmReduceScatter") return c.gemmReduceScatter({ a: d.a, b: d.b, out: d.out, transB: p.transB, config });
  return c.gemmAllReduce({ a: d.a, b: d.b, out: d.out, transB: p.transB, config });
}

function label(p: Problem): string {
  return `${p.op} (${p.M}, ${p.N}, ${p.K}) b ${p.transB ? "[n,k]" : "[k,n]"}`;
}

/** Out's checked rows against the reference; the gathered copy exactly. */
function verify(p: Problem, d: RankData, what: string, scratch: Tensor, withGathered: boolean): number {
  if (d.refRows === 0) return 0;
  using got = rows(d.out, 0, d.refRows);
  deviceErrorAsync(got, rows(d.ref, 0, d.refRows), scratch, 0);
  let gatheredRel = 0;
  if (withGathered && d.gathered) deviceErrorAsync(d.gathered, d.gatheredRef!, scratch, 1);
  const [e, g] = readErrors(scratch, 2);
  if (e!.nonFinite !== 0) throw new Error(`${what}: ${e!.nonFinite} non-finite outputs (NaN poison left)`);
  if (!(e!.rel <= TOL)) throw new Error(`${what}: relative error ${e!.rel} > ${TOL}`);
  if (withGathered && d.gathered) {
    gatheredRel = g!.rel;
    if (g!.nonFinite !== 0 || g!.rel !== 0) throw new Error(`${what}: gatheredA is not an exact copy (rel ${g!.rel}, ${g!.nonFinite} non-finite)`);
  }
  return e!.rel + gatheredRel;
}

interface Variant {
  name: string;
  config: TpConfig;
  gathered: boolean;
}

/** One problem on every rank: the sequential path, the fused path where it exists (all-gather: both
 * movers, one with gatheredA), each against the same reference. */
export async function checkProblem(ctx: TpContext, p: Problem): Promise<string> {
  const W = ctx.world;
  const data = await each(ctx, (c) => prepare(c, p, W));
  const scratch = ctx.comms.map((c) => Tensor.empty([12], "f32", { device: c.device }));
  const done: string[] = [];
  try {
    const first = ctx.comms[0]!;
    const d0 = data[0]!;
    const choice = tpChoice(first, p.op, { a: d0.a, b: d0.b, out: d0.out, transB: p.transB });
    const variants: Variant[] = [{ name: "sequential", config: { path: "sequential" }, gathered: true }];
    if (choice.fusedAvailable) {
      if (p.op === "allGatherGemm") {
        variants.push({ name: "fused copy-engine", config: { path: "fused", mover: "copyEngine" }, gathered: false });
        variants.push({ name: "fused ctas + gatheredA", config: { path: "fused", mover: "ctas" }, gathered: true });
      } else {
        variants.push({ name: "fused ctas", config: { path: "fused", mover: "ctas" }, gathered: false });
        // The copy-engine mover needs row ownership (M a multiple of 128 x W).
        if (p.M % (128 * W) === 0) variants.push({ name: "fused copy-engine", config: { path: "fused", mover: "copyEngine" }, gathered: false });
        if (p.op === "gemmAllReduce") variants.push({ name: "fused exchange", config: { path: "fused", mover: "exchange" }, gathered: false });
      }
    }
    for (const v of variants) {
      const plans = ctx.comms.map((c, i) => makePlan(c, p, data[i]!, v.config, v.gathered));
      try {
        ctx.comms.forEach((_, i) => {
          poison(data[i]!.out);
          if (data[i]!.gathered) poison(data[i]!.gathered!);
        });
        await TpPlan.runAll(plans);  // one rank here per process, or every rank (Communicator.local)
        let worst = 0;
        ctx.comms.forEach((c, i) => {
          worst = Math.max(worst, verify(p, data[i]!, `${label(p)} ${v.name} rank ${c.rank}`, scratch[i]!, v.gathered && p.op === "allGatherGemm"));
        });
        done.push(`${v.name} ${worst.toExponential(1)}`);
      } finally {
        plans.forEach((pl) => pl.dispose());
      }
    }
    return `auto=${choice.path}${choice.reason ? ` (${choice.reason})` : ""}; ${done.join(", ")}`;
  } finally {
    data.forEach((d) => d.dispose());
    scratch.forEach((t) => t.dispose());
  }
}

let tags = 1;

/** One problem of a back-to-back sequence and the plan configurations it cycles through. */
export interface BackToBackCase {
  problem: Problem;
  configs: TpConfig[];
}

/** What a back-to-back sequence saw: launches checked, how many failed the check, the worst error. */
export interface BackToBackResult {
  runs: number;
  failed: number;
  worst: number;
  firstFailure?: string;
}

/** `runs` back-to-back launches per rank with no reset and no host wait in between, cycling through
 * the cases (run i is case i mod C, in its configuration floor(i / C) mod its count): each launch is
 * preceded by a NaN poison of its output and followed by a GPU-side check into its own error slot;
 * every `every` launches a standalone allReduce runs on the same communicator (checked too). All
 * results are read at the end, and every one is counted. inspect: called once with each (case,
 * configuration)'s plans, one per rank, before the first launch. */
export async function backToBackCases(ctx: TpContext, cases: BackToBackCase[], runs: number, every = 10,
  inspect?: (plans: TpPlan[]) => void): Promise<BackToBackResult> {
  const W = ctx.world;
  const data = await Promise.all(cases.map((cs) => each(ctx, (c) => prepare(c, cs.problem, W))));
  const slots = runs + Math.ceil(runs / every);
  const scratch = ctx.comms.map((c) => Tensor.empty([6 * slots], "f32", { device: c.device }));
  const arN = 4097;
  const arIn = ctx.comms.map((c) => c.empty([arN], "f32"));
  const arRef = ctx.comms.map((c) => Tensor.empty([arN], "f32", { device: c.device }).fill((W * (W + 1)) / 2));
  const plans = cases.map((cs, j) => cs.configs.map((config) => ctx.comms.map((c, i) => makePlan(c, cs.problem, data[j]![i]!, config, false))));
  // Which case each error slot checks (-1: an allReduce), for the report.
  const slotCase: number[] = [];
  try {
    plans.forEach((perCase) => perCase.forEach((set) => inspect?.(set)));
    const seqs: number[][] = ctx.comms.map(() => []);
    for (let i = 0; i < runs; i++) {
      const j = i % cases.length;
      const set = plans[j]![Math.floor(i / cases.length) % plans[j]!.length]!;
      ctx.comms.forEach((c, r) => {
        const d = data[j]![r]!;
        poison(d.out, c.stream);
        seqs[r]!.push(set[r]!.launch());
        if (d.refRows > 0) deviceErrorAsync(rows(d.out, 0, d.refRows), rows(d.ref, 0, d.refRows), scratch[r]!, slotCase.length, c.stream);
      });
      slotCase.push(j);
      if (i % every === every - 1) {
        // On the stream: the previous allReduce's check (queued there) must read before this refill.
        ctx.comms.forEach((c, r) => fillF32(arIn[r]!, c.rank + 1, c.stream));
        await each(ctx, (c, r) => c.allReduce(arIn[r]!));
        ctx.comms.forEach((c, r) => deviceErrorAsync(arIn[r]!, arRef[r]!, scratch[r]!, slotCase.length, c.stream));
        slotCase.push(-1);
      }
    }
    ctx.comms.forEach((c, r) => seqs[r]!.forEach((s) => plans[0]![0]![r]!.wait(s)));
    const result: BackToBackResult = { runs: 0, failed: 0, worst: 0 };
    ctx.comms.forEach((c, r) => {
      c.stream.synchronize();
      readErrors(scratch[r]!, slotCase.length).forEach((e, slot) => {
        const j = slotCase[slot]!;
        if (j >= 0 && data[j]![r]!.refRows === 0) return;  // nothing to check on this rank
        result.runs++;
        if (e.nonFinite !== 0 || !(e.rel <= TOL)) {
          result.failed++;
          result.firstFailure ??= `${j >= 0 ? label(cases[j]!.problem) : "allReduce"} rank ${c.rank}: slot ${slot} of ${slotCase.length}: rel ${e.rel}, ${e.nonFinite} non-finite`;
        } else {
          result.worst = Math.max(result.worst, e.rel);
        }
      });
    });
    return result;
  } finally {
    plans.flat(2).forEach((pl) => pl.dispose());
    arIn.forEach((t) => t.dispose());
    arRef.forEach((t) => t.dispose());
    data.flat().forEach((d) => d.dispose());
    scratch.forEach((t) => t.dispose());
  }
}

/** backToBackCases for one problem; throws on the first failed check. */
export async function backToBack(ctx: TpContext, p: Problem, configs: TpConfig[], runs: number, every = 10,
  inspect?: (plans: TpPlan[]) => void): Promise<string> {
  const r = await backToBackCases(ctx, [{ problem: p, configs }], runs, every, inspect);
  if (r.failed > 0) throw new Error(`${r.failed} of ${r.runs} checks failed; first: ${r.firstFailure}`);
  return `${runs} runs (${configs.map((c) => `${c.path ?? "auto"}${c.mover ? `/${c.mover}` : ""}`).join(" + ")}) and ${Math.ceil(runs / every)} allReduces, worst rel ${r.worst.toExponential(2)}`;
}

/** Every op, both B layouts, at every ODD_SHAPES size, against the fp32 reference (checkProblem). */
export async function checkOddSizes(ctx: TpContext): Promise<string> {
  const out: string[] = [];
  for (const op of ["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"] as TpOp[]) {
    for (const transB of [false, true]) {
      for (const [M, N, K] of ODD_SHAPES) {
        out.push(`${op} (${M},${N},${K})${transB ? " b [n,k]" : ""} ${await checkProblem(ctx, { op, M, N, K, transB, tag: tags++ })}`);
      }
    }
  }
  return out.join("; ");
}

export const TP_CHECKS: TpCheck[] = [
  ...(["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"] as TpOp[]).flatMap((op) => [false, true].map((transB) => ({
    name: `${op}, b ${transB ? "[n, k]" : "[k, n]"}: every issue shape, sequential and fused paths, against the fp32 reference`,
    async run(ctx: TpContext) {
      const out: string[] = [];
      for (const [M, N, K] of SHAPES) out.push(`(${M},${N},${K}) ${await checkProblem(ctx, { op, M, N, K, transB, tag: tags++ })}`);
      return out.join("; ");
    },
  }))),
  {
    name: "odd sizes (M not a multiple of 128 x W, odd n, k, N and K), every op, both B layouts, against the fp32 reference",
    run: checkOddSizes,
  },
  {
    name: "200 back-to-back runs per op with no reset, every result checked on the GPU, interleaved with allReduce",
    async run(ctx) {
      const r1 = await backToBack(ctx, { op: "allGatherGemm", M: 1024, N: 4096, K: 2048, transB: true, tag: tags++ },
        [{ path: "fused", mover: "copyEngine" }, { path: "fused", mover: "ctas" }], 200);
      const r2 = await backToBack(ctx, { op: "gemmReduceScatter", M: 1024, N: 2048, K: 4096, transB: false, tag: tags++ },
        [{ path: "fused", mover: "copyEngine" }, { path: "fused", mover: "ctas" }], 200);
      const r3 = await backToBack(ctx, { op: "gemmAllReduce", M: 128, N: 8192, K: 8192, transB: true, tag: tags++ },
        [{ path: "fused", mover: "exchange" }, { path: "fused", mover: "ctas" }], 200);
      const r4 = await backToBack(ctx, { op: "gemmAllReduce", M: 1024, N: 2048, K: 2048, transB: false, tag: tags++ }, [{}], 100);
      // Copy-engine mover: 200 runs alone (every launch reuses the previous one's receive slots and
      // staging by parity), with a tail in N (n not a multiple of the tile).
      const r5 = await backToBack(ctx, { op: "gemmAllReduce", M: 1024, N: 2056, K: 2048, transB: true, tag: tags++ },
        [{ path: "fused", mover: "copyEngine" }], 200);
      const r6 = await backToBack(ctx, { op: "gemmReduceScatter", M: 2048, N: 4096, K: 2048, transB: true, tag: tags++ },
        [{ path: "fused", mover: "copyEngine" }], 200);
      // Exchange mover alone, partial tiles in both M (M < 128) and N (n not a multiple of the tile).
      const r7 = await backToBack(ctx, { op: "gemmAllReduce", M: 16, N: 1000, K: 4096, transB: false, tag: tags++ },
        [{ path: "fused", mover: "exchange" }], 200);
      // Exchange mover, two waves of tiles (3 x 65 of them on 132 CTAs): every CTA with two finishes
      // its deferred tile while its last one's sends drain; partial tiles in M (320 rows) and N.
      const r8 = await backToBack(ctx, { op: "gemmAllReduce", M: 320, N: 8200, K: 2048, transB: true, tag: tags++ },
        [{ path: "fused", mover: "exchange", tileN: 128 }], 200);
      // The register exchange (m <= 32) with two 16-row groups per tile, 128-wide tiles (two polls of
      // eight words per peer) and a tail in N; r7 runs it with 64-wide tiles.
      const r9 = await backToBack(ctx, { op: "gemmAllReduce", M: 32, N: 2056, K: 2048, transB: true, tag: tags++ },
        [{ path: "fused", mover: "exchange", tileN: 128 }], 200);
      // The exchange with one wave of 256-wide tiles (what "auto" takes at M = 512): 4 x 33 = 132
      // tiles, a tail in N, every tile sent and received at once.
      const r10 = await backToBack(ctx, { op: "gemmAllReduce", M: 512, N: 8200, K: 2048, transB: false, tag: tags++ },
        [{ path: "fused", mover: "exchange", tileN: 256 }], 200);
      // All-gather with a split tail in equal pieces (the last wave's 8 tiles split along K over
      // every GEMM CTA, 16 pieces per tile, some k-blocks short): 2048 x 8688 / 2 x 4232 is 16 x 17 = 272 tiles of
      // 67 k-blocks, a tail in N (4344 = 16.97 x 256) and in K. Both movers (the CTA mover leaves
      // fewer GEMM CTAs, so another split).
      const r11 = await backToBack(ctx, { op: "allGatherGemm", M: 2048, N: 8688, K: 4232, transB: false, tag: tags++ },
        [{ path: "fused", mover: "copyEngine" }, { path: "fused", mover: "ctas" }], 200);
      return [r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11].join("; ");
    },
  },
];
