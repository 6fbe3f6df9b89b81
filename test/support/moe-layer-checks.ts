// moe-layer-checks.ts — the GPU checks of the MoE ops with expert GEMMs (comm.moeDispatchGemm,
// comm.moeGemmCombine, comm.moeLayer), written once for both process models like moe-checks.ts:
// every process rebuilds every rank's inputs from seeds, so every reference runs on its own GPU.
//
// Each run checks, on every rank it drives, with up.hidden and out poisoned with NaN first:
//   - every real row of the hidden layout (the up-projection, SwiGLU applied) against a deliberately
//     simple fp32 reference (the row's source token through rowsGemm with its expert's w1, then
//     SwiGLU in fp32), every element, <= 1e-2;
//   - out [T, H] against the whole layer in fp32 per token (each slot's expert through w1, SwiGLU,
//     w2, then the weighted sum in slot order), every element, <= 1e-2, no NaN left.
import type { Communicator } from "../../lib/comm.ts";
import { CudaGraph } from "../../lib/graph.ts";
import type { MoeActivation, MoeMover } from "../../lib/ops/moe-gemm-validate.ts";
import type { MoeLayerPlan } from "../../lib/ops/moe-layer.ts";
import { Tensor } from "../../lib/tensor.ts";
import { deviceErrorAsync, readErrors } from "./gemm.ts";
import { maxTokens, routedInputs, routings as routing, seed, upload, type MoeContext, type MoeProblem } from "./moe-checks.ts";
import type { NamedCheck } from "./report-channel.ts";
import { gatherRows, makeWeights, realRows, referenceCombine, referenceLayout, rowsGemm, rowsOf, swiglu, type Layout } from "./moe-reference.ts";

export interface LayerProblem extends MoeProblem {
  inter: number;
  activation?: MoeActivation;
  transW?: boolean;
  mover?: MoeMover;
  /** The mover the cost model must have picked (checked on every rank's plan). */
  expectMover?: MoeMover;
  tileN?: 128 | 256;
}

const TOL = 1e-2;

interface LayerRank {
  c: Communicator;
  T: number;
  x: Tensor;
  ids: Tensor;
  weights: Tensor;
  w1: Tensor;
  w2: Tensor;
  out: Tensor;
  layer: MoeLayerPlan;
  scratch: Tensor;
  made: Tensor[];
}

const n1 = (p: LayerProblem) => (p.activation === "none" ? p.inter : 2 * p.inter);
const w1Shape = (p: LayerProblem, El: number) => (p.transW ? [El, n1(p), p.hidden] : [El, p.hidden, n1(p)]);
const w2Shape = (p: LayerProblem, El: number) => (p.transW ? [El, p.hidden, p.inter] : [El, p.inter, p.hidden]);

function prepare(ctx: MoeContext, p: LayerProblem, r: ReturnType<typeof routing>): LayerRank[] {
  const mt = maxTokens(ctx, p), El = p.experts / ctx.world;
  return ctx.comms.map((c) => {
    const q = c.rank, device = c.device;
    const made: Tensor[] = [];
    const keep = (t: Tensor) => (made.push(t), t);
    const { T, rows, x, ids, weights } = routedInputs(c, p, r, keep);
    const w1 = keep(Tensor.empty(w1Shape(p, El), "bf16", { device }).fillRandom(seed(p.tag, q, 5), -0.05, 0.05));
    const w2 = keep(Tensor.empty(w2Shape(p, El), "bf16", { device }).fillRandom(seed(p.tag, q, 6), -0.05, 0.05));
    const out = keep(Tensor.empty([rows, p.hidden], "bf16", { device }));
    const layer = c.moeLayer({
      x, tokens: T, topkIds: ids, topkWeights: weights, experts: p.experts, maxTokens: mt, capacity: p.capacity, w1, w2, out,
      activation: p.activation ?? "swiglu", transW: p.transW,
      config: { up: { mover: p.mover, tileN: p.tileN }, down: { tileN: p.tileN } },
    });
    if (p.expectMover !== undefined && layer.up.mover !== p.expectMover) {
      layer.dispose();
      for (const t of made.reverse()) t.dispose();
      throw new Error(`rank ${q}: the up-projection's mover is ${layer.up.mover}, expected ${p.expectMover}`);
    }
    const scratch = keep(Tensor.empty([12], "f32", { device }));
    return { c, T, x, ids, weights, w1, w2, out, layer, scratch, made };
  });
}

function dispose(ranks: LayerRank[]): void {
  for (const rk of ranks) {
    rk.layer.dispose();
    for (const t of rk.made.reverse()) t.dispose();
  }
}

/** Every rank's weights stacked on `device` in global expert order: w1All [E, ...], w2All [E, ...]. */
function stackedWeights(ctx: MoeContext, p: LayerProblem, device: number): { w1All: Tensor; w2All: Tensor } {
  const El = p.experts / ctx.world;
  const w1All = Tensor.empty(w1Shape(p, p.experts), "bf16", { device });
  const w2All = Tensor.empty(w2Shape(p, p.experts), "bf16", { device });
  for (let q = 0; q < ctx.world; q++) {
    using a1 = rowsOf(w1All, q * El, El), a2 = rowsOf(w2All, q * El, El);
    a1.fillRandom(seed(p.tag, q, 5), -0.05, 0.05);
    a2.fillRandom(seed(p.tag, q, 6), -0.05, 0.05);
  }
  return { w1All, w2All };
}

const w1Of = (p: LayerProblem, all: Tensor, e: number) =>
  ({ ptr: all.ptr + e * p.hidden * n1(p) * 2, ld: p.transW ? p.hidden : n1(p), nk: p.transW ?? false });
const w2Of = (p: LayerProblem, all: Tensor, e: number) =>
  ({ ptr: all.ptr + e * p.inter * p.hidden * 2, ld: p.transW ? p.inter : p.hidden, nk: p.transW ?? false });

function expectClose(what: string, e: { rel: number; nonFinite: number }): number {
  if (e.nonFinite !== 0) throw new Error(`${what}: ${e.nonFinite} non-finite values (NaN poison left)`);
  if (!(e.rel <= TOL)) throw new Error(`${what}: relative error ${e.rel} > ${TOL}`);
  return e.rel;
}

/** The hidden rows of rank rk (an owner) against act(x[token] · w1[expert]) per real row. */
function verifyHidden(ctx: MoeContext, p: LayerProblem, rk: LayerRank, layout: Layout, weights: { w1All: Tensor }, xAll: Tensor,
  what: string): number {
  const o = rk.c.rank, own = layout.owners[o]!, El = p.experts / ctx.world, mt = Math.max(1, maxTokens(ctx, p)), dev = rk.c.device;
  const { rows, sources } = realRows(own, mt);
  if (rows.length === 0) return 0;
  const R = rows.length;
  using hRef = Tensor.empty([R, n1(p)], "f32", { device: dev });
  let base = 0;
  for (let le = 0; le < El; le++) {
    const count = own.expertCounts[le]!;
    if (count === 0) continue;
    using aIdx = Tensor.from(Int32Array.from(sources.slice(base, base + count)), [count], "i32", { device: dev });
    using cIdx = Tensor.from(Int32Array.from({ length: count }, (_, i) => base + i), [count], "i32", { device: dev });
    rowsGemm(xAll, aIdx, w1Of(p, weights.w1All, o * El + le), hRef, cIdx, count, n1(p), p.hidden);
    base += count;
  }
  using aRef = Tensor.empty([R, p.inter], "f32", { device: dev });
  if (p.activation !== "none") swiglu(hRef, R, p.inter, aRef);
  using got = Tensor.empty([R, p.inter], "bf16", { device: dev });
  using index = Tensor.from(Int32Array.from(rows), [R], "i32", { device: dev });
  gatherRows(rk.layer.up.hidden, index, got);
  deviceErrorAsync(got, p.activation !== "none" ? aRef : hRef, rk.scratch, 0);
  return expectClose(`${what}: hidden rows of rank ${o}`, readErrors(rk.scratch, 1)[0]!);
}

/** out of rank rk against the whole layer in fp32, token by token and slot by slot. */
function verifyOut(ctx: MoeContext, p: LayerProblem, rk: LayerRank, ids: Int32Array, w: Float32Array,
  weights: { w1All: Tensor; w2All: Tensor }, what: string): number {
  if (rk.T === 0) return 0;
  const dev = rk.c.device, T = rk.T, k = p.topk;
  using hRef = Tensor.empty([T * k, n1(p)], "f32", { device: dev });
  using aRef = Tensor.empty([T * k, p.inter], "f32", { device: dev });
  using yRef = Tensor.empty([T * k, p.hidden], "f32", { device: dev });
  for (const stage of [0, 1]) {
    if (stage === 1 && p.activation !== "none") swiglu(hRef, T * k, p.inter, aRef);
    for (let e = 0; e < p.experts; e++) {
      const slots: number[] = [];
      for (let i = 0; i < ids.length; i++) if (ids[i] === e) slots.push(i);
      if (slots.length === 0) continue;
      using cIdx = Tensor.from(Int32Array.from(slots), [slots.length], "i32", { device: dev });
      if (stage === 0) {
        using aIdx = Tensor.from(Int32Array.from(slots, (i) => Math.floor(i / k)), [slots.length], "i32", { device: dev });
        rowsGemm(rk.x, aIdx, w1Of(p, weights.w1All, e), hRef, cIdx, slots.length, n1(p), p.hidden);
      } else {
        rowsGemm(p.activation !== "none" ? aRef : hRef, cIdx, w2Of(p, weights.w2All, e), yRef, cIdx, slots.length, p.hidden, p.inter);
      }
    }
  }
  using ident = Tensor.from(Int32Array.from({ length: T * k }, (_, i) => i), [T * k], "i32", { device: dev });
  using wt = Tensor.from(w, [T * k], "f32", { device: dev });
  using refOut = Tensor.empty([T, p.hidden], "f32", { device: dev });
  referenceCombine(yRef, ident, wt, T, k, refOut);
  using o = rowsOf(rk.out, 0, T);
  deviceErrorAsync(o, refOut, rk.scratch, 1);
  return expectClose(`${what}: out of rank ${rk.c.rank}`, readErrors(rk.scratch, 2)[1]!);
}

function label(ctx: MoeContext, p: LayerProblem): string {
  const T = Array.from({ length: ctx.world }, (_, q) => p.tokens(q)).join("/");
  return `W ${ctx.world} E ${p.experts} k ${p.topk} H ${p.hidden} I ${p.inter} T ${T} ${p.routing} ${p.activation ?? "swiglu"}` +
    `${p.transW ? " transW" : ""} mover ${p.mover ?? "auto"} tile ${p.tileN ?? "auto"}`;
}

/** Per rank: the references' inputs on its device (every source's x stacked, every expert's weights). */
function references(ctx: MoeContext, p: LayerProblem, ranks: LayerRank[]) {
  const mt = Math.max(1, maxTokens(ctx, p));
  return ranks.map((rk) => {
    const xAll = Tensor.empty([ctx.world * mt, p.hidden], "bf16", { device: rk.c.device });
    for (let q = 0; q < ctx.world; q++) {
      if (p.tokens(q) === 0) continue;
      using xs = rowsOf(xAll, q * mt, p.tokens(q));
      xs.fillRandom(seed(p.tag, q, 0));
    }
    return { xAll, ...stackedWeights(ctx, p, rk.c.device) };
  });
}

/** How the runs are driven: launched and awaited (default), or replayed from a CUDA graph. */
interface Driver {
  go(ranks: LayerRank[]): Promise<void>;
  dispose(): void;
}

const launched: Driver = { go: (rs) => Promise.all(rs.map((rk) => rk.layer.run())).then(() => undefined), dispose() {} };

async function runChecked(ctx: MoeContext, p: LayerProblem, runs: number, driver: Driver = launched): Promise<string> {
  let r = routing(ctx, p, 0);
  const ranks = prepare(ctx, p, r);
  const refs = references(ctx, p, ranks);
  let worst = 0;
  try {
    for (let it = 0; it < runs; it++) {
      if (it > 0) {
        r = routing(ctx, p, it);
        for (const rk of ranks) {
          upload(rk.ids, r.ids[rk.c.rank]!);
          upload(rk.weights, r.weights[rk.c.rank]!);
        }
      }
      for (const rk of ranks) {
        rk.layer.up.hidden.fill(Number.NaN);
        rk.out.fill(Number.NaN);
      }
      await driver.go(ranks);
      const layout = referenceLayout(ctx.world, p.experts, p.topk, r.ids);
      ranks.forEach((rk, i) => {
        const what = `${label(ctx, p)} run ${it}`;
        worst = Math.max(worst, verifyHidden(ctx, p, rk, layout, refs[i]!, refs[i]!.xAll, what));
        worst = Math.max(worst, verifyOut(ctx, p, rk, r.ids[rk.c.rank]!, r.weights[rk.c.rank]!, refs[i]!, what));
      });
    }
  } finally {
    driver.dispose();
    for (const ref of refs) {
      ref.xAll.dispose();
      ref.w1All.dispose();
      ref.w2All.dispose();
    }
    dispose(ranks);
  }
  return `${label(ctx, p)}: ${runs} run(s), hidden rows and out checked, worst rel ${worst.toExponential(2)}`;
}

/** The layer `runs` times back to back, the routing changed every run, every result checked. */
export function checkLayer(ctx: MoeContext, p: LayerProblem, runs = 1): Promise<string> {
  return runChecked(ctx, p, runs);
}

/** The layer as one CUDA graph per rank, captured once (after one tracked run, which is checked too)
 * and replayed with new routing, each replay checked. */
export function checkLayerGraph(ctx: MoeContext, p: LayerProblem, replays: number): Promise<string> {
  const graphs: CudaGraph[] = [];
  return runChecked(ctx, p, replays + 1, {
    async go(rs) {
      if (graphs.length === 0) {
        await Promise.all(rs.map((rk) => rk.layer.run()));
        for (const rk of rs) graphs.push(CudaGraph.capture(rk.c.stream, () => rk.layer.enqueue()));
        return;
      }
      rs.forEach((rk, i) => graphs[i]!.launch(rk.c.stream));
      for (const rk of rs) rk.c.stream.synchronize();
    },
    dispose() {
      for (const g of graphs) g.dispose();
    },
  });
}

/** A routing that needs more receive rows than the capacity fails every rank's layer with the
 * dispatch's ArgumentError (nothing moves, the combine reports no layout); the same plans then run
 * a routing that fits, checked. World >= 2. */
export async function checkLayerOverflow(ctx: MoeContext): Promise<string> {
  const E = 4 * ctx.world, k = 2, T = 64;
  const p: LayerProblem = { experts: E, topk: k, hidden: 256, inter: 128, tokens: () => T, routing: "uniform", tag: 12, capacity: 256 };
  // Every token to two of owner 0's four experts (and a third now and then): owner 0 needs > 256 rows.
  const crowd = (q: number) => Int32Array.from({ length: T * k }, (_, i) => (i % k) + ((q + Math.floor(i / k)) % 3 === 0 ? 2 : 0));
  // Two experts of 64 rows each (owner 0's first and, with peers, owner 1's first): 256 rows padded.
  const second = ctx.world > 1 ? E / ctx.world : 1;
  const fits = () => Int32Array.from({ length: T * k }, (_, i) => (i % k === 0 ? 0 : second));
  const weights = Array.from({ length: ctx.world }, (_, q) => makeWeights(T, k, 99 + q));
  const ranks = prepare(ctx, p, { ids: Array.from({ length: ctx.world }, (_, q) => crowd(q)), weights });
  const refs = references(ctx, p, ranks);
  try {
    const errors = await Promise.all(ranks.map((rk) => rk.layer.run().then(() => undefined, (e: Error) => e)));
    errors.forEach((e, q) => {
      if (!(e && e.name === "ArgumentError" && /'capacity' is 256 rows/.test(e.message))) {
        throw new Error(`rank ${q}: expected the capacity ArgumentError, got ${e ? `${e.name}: ${e.message}` : "success"}`);
      }
    });
    const good = Array.from({ length: ctx.world }, () => fits());
    for (const rk of ranks) upload(rk.ids, good[rk.c.rank]!);
    for (const rk of ranks) {
      rk.layer.up.hidden.fill(Number.NaN);
      rk.out.fill(Number.NaN);
    }
    await Promise.all(ranks.map((rk) => rk.layer.run()));
    const layout = referenceLayout(ctx.world, E, k, good);
    ranks.forEach((rk, i) => {
      verifyHidden(ctx, p, rk, layout, refs[i]!, refs[i]!.xAll, "after the overflow");
      verifyOut(ctx, p, rk, good[rk.c.rank]!, weights[rk.c.rank]!, refs[i]!, "after the overflow");
    });
  } finally {
    for (const ref of refs) {
      ref.xAll.dispose();
      ref.w1All.dispose();
      ref.w2All.dispose();
    }
    dispose(ranks);
  }
  return "a capacity overflow fails every rank with an ArgumentError naming capacity; the next run is correct";
}

/** The layer checks both process models run on two GPUs. */
export const LAYER_CHECKS: NamedCheck<MoeContext>[] = [
  { name: "layer (SwiGLU), uniform, E 8 k 2 H 1024 I 512 T 128", run: (ctx) => checkLayer(ctx, { experts: 8, topk: 2, hidden: 1024, inter: 512, tokens: () => 128, routing: "uniform", tag: 6 }) },
  { name: "layer, skewed, a rank with no tokens, push and pull", run: async (ctx) => [
    await checkLayer(ctx, { experts: 16, topk: 4, hidden: 1024, inter: 256, tokens: (q) => (q === 1 ? 0 : 200), routing: "skewed", tag: 7, mover: "push" }),
    await checkLayer(ctx, { experts: 16, topk: 4, hidden: 1024, inter: 256, tokens: (q) => (q === 1 ? 0 : 200), routing: "skewed", tag: 8, mover: "pull" }),
  ].join("; ") },
  { name: "layer, E 64 k 8 H 7168 I 2048 T 128 (decode), transW", run: (ctx) => checkLayer(ctx, { experts: 64, topk: 8, hidden: 7168, inter: 2048, tokens: () => 128, routing: "uniform", tag: 9, transW: true }) },
  { name: "layer: 100 back-to-back runs, routing changed every run", run: (ctx) => checkLayer(ctx, { experts: 8, topk: 2, hidden: 256, inter: 128, tokens: (q) => 64 + 32 * q, routing: "skewed", tag: 10 }, 100) },
  { name: "layer: CUDA graph, captured once, replayed with new routing", run: (ctx) => checkLayerGraph(ctx, { experts: 8, topk: 2, hidden: 512, inter: 256, tokens: () => 96, routing: "uniform", tag: 11 }, 5) },
];
