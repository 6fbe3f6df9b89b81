// moe-checks.ts — the GPU checks of the MoE ops, written once for both process models:
// `ctx.comms` are the ranks this process drives (several with ranks sharing a GPU or
// Communicator.local, one in a per-rank process). Rank q's data are generated from seeds (routing
// on the CPU, x and the expert outputs by fillRandom(seed(tag, q, ...))), so every process rebuilds
// every rank's inputs, and so every reference, on its own GPU without exchanging data.
//
// What each dispatch + combine run checks, on every rank (DESIGN.md "Testing"):
//   - expertOffsets, expertCounts, sourceCounts and every rowSource row against the CPU layout
//     (test/support/moe-reference.ts), exactly;
//   - every received row against the source's x row, exactly (both gathered on the GPU);
//   - out against Σ_k w · hidden_owner[row] in fp32 (the GPU reference), ≤ 1e-2, no NaN left;
// with recv and out poisoned with NaN before each run.
import { LocalStore } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { CudaGraph } from "../../lib/graph.ts";
import type { MoeCombinePlan, MoeDispatchPlan } from "../../lib/ops/moe.ts";
import { Tensor } from "../../lib/tensor.ts";
import { deviceErrorAsync, readErrors } from "./gemm.ts";
import {
  gatherRows, makeRouting, makeWeights, realRows, referenceCombine, referenceLayout, rowsOf, type Layout, type RoutingKind,
} from "./moe-reference.ts";
import type { NamedCheck } from "./report-channel.ts";

export interface MoeContext {
  comms: Communicator[];
  world: number;
}

export interface MoeProblem {
  experts: number;
  topk: number;
  hidden: number;
  /** Tokens of rank q. */
  tokens: (q: number) => number;
  routing: RoutingKind;
  tag: number;
  capacity?: number;
}

/** `world` ranks of one communicator on GPU 0 in this process, each a 1/W share of the SMs. */
async function ranksOnOneGpu(world: number, heapBytes: number): Promise<Communicator[]> {
  const stores = LocalStore.group(world, { timeoutMs: 60_000 });
  const smBudget = world > 1 ? Math.floor(deviceInfo(0).smCount / world) : undefined;
  return Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: "gpu0" }, 0,
    { heapBytes, timeoutMs: Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000), smBudget })));
}

export async function onOneGpu(world: number, heapBytes: number, body: (ctx: MoeContext) => Promise<string>): Promise<void> {
  const comms = await ranksOnOneGpu(world, heapBytes);
  let failure: unknown;
  try {
    console.log(`  [one GPU, world ${world}] ${await body({ comms, world })}`);
  } catch (e) {
    failure = e;
    throw e;
  } finally {
    await cleanUp(failure, () => Communicator.disposeAll(comms));
  }
}

/** Runs `cleanup`; when the checks already failed, a cleanup error is printed, not thrown, so it
 * cannot hide the failure that caused it. */
export async function cleanUp(failure: unknown, cleanup: () => unknown): Promise<void> {
  try {
    await cleanup();
  } catch (e) {
    if (failure === undefined) throw e;
    console.error(`  cleanup after the failure also failed: ${(e as Error).message}`);
  }
}

const TOL = 1e-2;
const BF16_NAN = Number.NaN;

export function seed(tag: number, rank: number, which: number): number {
  return tag * 7919 + which * 131 + rank + 1;
}

function each<T>(ctx: MoeContext, f: (c: Communicator, i: number) => Promise<T> | T): Promise<T[]> {
  return Promise.all(ctx.comms.map((c, i) => f(c, i)));
}

export function maxTokens(ctx: MoeContext, p: MoeProblem): number {
  let m = 0;
  for (let q = 0; q < ctx.world; q++) m = Math.max(m, p.tokens(q));
  return m;
}

interface Rank {
  c: Communicator;
  T: number;
  x: Tensor;
  ids: Tensor;
  weights: Tensor;
  hidden: Tensor;
  out: Tensor;
  d: MoeDispatchPlan;
  comb: MoeCombinePlan;
  // References on this rank's device: every source's x and every owner's hidden rows, stacked.
  xAll: Tensor;
  hiddenAll: Tensor;
  scratch: Tensor;
  dispose(): void;
}

/** Routing of every rank for run `iteration` (0: the problem's own seed). */
export function routings(ctx: MoeContext, p: MoeProblem, iteration: number) {
  const ids: Int32Array[] = [], weights: Float32Array[] = [];
  for (let q = 0; q < ctx.world; q++) {
    const s = seed(p.tag, q, 3) + 1009 * iteration;
    ids.push(makeRouting(p.routing, p.tokens(q), p.experts, p.topk, s));
    weights.push(makeWeights(p.tokens(q), p.topk, s));
  }
  return { ids, weights };
}

export function upload(t: Tensor, data: Int32Array | Float32Array): void {
  if (data.length === 0) return;
  using view = rowsOf(t, 0, data.length / (t.numel / t.shape[0]!));
  view.upload(data as never);
}

/** Rank c.rank's routed inputs: x [max(1, T), H] bf16 (random, seed(tag, rank, 0), which the
 * references rebuild) and its routing from `routing` (ids, weights), each passed through `keep`. */
export function routedInputs(c: Communicator, p: MoeProblem, routing: ReturnType<typeof routings>, keep: (t: Tensor) => Tensor) {
  const r = c.rank, T = p.tokens(r), device = c.device, rows = Math.max(1, T);
  const x = keep(Tensor.empty([rows, p.hidden], "bf16", { device }).fillRandom(seed(p.tag, r, 0)));
  const ids = keep(Tensor.empty([rows, p.topk], "i32", { device }));
  const weights = keep(Tensor.empty([rows, p.topk], "f32", { device }));
  upload(ids, routing.ids[r]!);
  upload(weights, routing.weights[r]!);
  return { T, rows, x, ids, weights };
}

/** Every driven rank's inputs, plans and references. hiddenOf: the combine's input rows (default
 * random rows, seed(tag, rank, 7), which the references rebuild). */
function prepare(ctx: MoeContext, p: MoeProblem, routing: ReturnType<typeof routings>,
  hiddenOf?: (c: Communicator, capacity: number) => Tensor): Rank[] {
  const mt = maxTokens(ctx, p);
  return ctx.comms.map((c) => {
    const r = c.rank, device = c.device;
    const made: Tensor[] = [];
    const keep = (t: Tensor) => (made.push(t), t);
    const { T, rows, x, ids, weights } = routedInputs(c, p, routing, keep);
    const d = c.moeDispatch({ x, tokens: T, topkIds: ids, topkWeights: weights, experts: p.experts, maxTokens: mt, capacity: p.capacity });
    const C = d.layout.capacity;
    const hidden = keep(hiddenOf ? hiddenOf(c, C) : Tensor.empty([C, p.hidden], "bf16", { device }).fillRandom(seed(p.tag, r, 7)));
    const out = keep(Tensor.empty([rows, p.hidden], "bf16", { device }));
    const comb = c.moeCombine({ dispatch: d, hidden, out });
    const xAll = keep(Tensor.empty([ctx.world * Math.max(1, mt), p.hidden], "bf16", { device }));
    const hiddenAll = keep(Tensor.empty([ctx.world * C, p.hidden], "bf16", { device }));
    for (let q = 0; q < ctx.world; q++) {
      if (p.tokens(q) > 0) {
        using xs = rowsOf(xAll, q * Math.max(1, mt), p.tokens(q));
        xs.fillRandom(seed(p.tag, q, 0));
      }
      using hs = rowsOf(hiddenAll, q * C, C);
      hs.fillRandom(seed(p.tag, q, 7));
    }
    const scratch = keep(Tensor.empty([12], "f32", { device }));
    return {
      c, T, x, ids, weights, hidden, out, d, comb, xAll, hiddenAll, scratch,
      dispose() {
        comb.dispose();
        d.dispose();
        for (const t of made.reverse()) t.dispose();
      },
    };
  });
}

function expectEqual(what: string, got: ArrayLike<number>, want: ArrayLike<number>): void {
  if (got.length !== want.length) throw new Error(`${what}: ${got.length} values, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) throw new Error(`${what}[${i}] is ${got[i]}, expected ${want[i]}`);
  }
}

/** Checks one rank's layout, received rows and combined output after a run; returns out's error. */
function verify(ctx: MoeContext, p: MoeProblem, rk: Rank, layout: Layout, weights: Float32Array, what: string): number {
  const r = rk.c.rank, mt = Math.max(1, maxTokens(ctx, p)), C = rk.d.layout.capacity;
  const ref = layout.owners[r]!;
  const L = rk.d.layout;
  expectEqual(`${what}: expertOffsets`, L.expertOffsets.download() as Int32Array, ref.expertOffsets);
  expectEqual(`${what}: expertCounts`, L.expertCounts.download() as Int32Array, ref.expertCounts);
  expectEqual(`${what}: sourceCounts`, L.sourceCounts.download() as Int32Array, ref.sourceCounts);
  if (ref.rows > 0) {
    using rs = rowsOf(L.rowSource, 0, ref.rows);
    expectEqual(`${what}: rowSource`, rs.download() as Int32Array, ref.rowSource);
  }
  // Every real row, exactly as its source sent it.
  const { rows: got, sources: want } = realRows(ref, mt);
  if (got.length > 0) {
    using gi = Tensor.from(Int32Array.from(got), [got.length], "i32", { device: rk.c.device });
    using wi = Tensor.from(Int32Array.from(want), [want.length], "i32", { device: rk.c.device });
    using ga = Tensor.empty([got.length, p.hidden], "bf16", { device: rk.c.device });
    using wa = Tensor.empty([got.length, p.hidden], "bf16", { device: rk.c.device });
    gatherRows(L.recv, gi, ga);
    gatherRows(rk.xAll, wi, wa);
    deviceErrorAsync(ga, wa, rk.scratch, 0);
    const [e] = readErrors(rk.scratch, 1);
    if (e!.nonFinite !== 0 || e!.rel !== 0) throw new Error(`${what}: received rows differ from their sources (rel ${e!.rel}, ${e!.nonFinite} non-finite)`);
  }
  if (rk.T === 0) return 0;
  const index = Int32Array.from(layout.where[r]!, ([o, row]) => o * C + row);
  using it = Tensor.from(index, [index.length], "i32", { device: rk.c.device });
  using wt = Tensor.from(weights, [weights.length], "f32", { device: rk.c.device });
  using refOut = Tensor.empty([rk.T, p.hidden], "f32", { device: rk.c.device });
  referenceCombine(rk.hiddenAll, it, wt, rk.T, p.topk, refOut);
  using o = rowsOf(rk.out, 0, rk.T);
  deviceErrorAsync(o, refOut, rk.scratch, 0);
  const [e] = readErrors(rk.scratch, 1);
  if (e!.nonFinite !== 0) throw new Error(`${what}: ${e!.nonFinite} non-finite outputs (NaN poison left)`);
  if (!(e!.rel <= TOL)) throw new Error(`${what}: combined output relative error ${e!.rel} > ${TOL}`);
  return e!.rel;
}

function poison(rk: Rank): void {
  rk.d.layout.recv.fill(BF16_NAN);
  rk.out.fill(BF16_NAN);
}

function label(ctx: MoeContext, p: MoeProblem): string {
  const T = Array.from({ length: ctx.world }, (_, q) => p.tokens(q)).join("/");
  return `W ${ctx.world} E ${p.experts} k ${p.topk} H ${p.hidden} T ${T} ${p.routing}`;
}

/** Dispatch + combine `runs` times back to back on every rank, the routing changed every run
 * (changeRouting) or kept, every result checked. */
export async function checkDispatchCombine(ctx: MoeContext, p: MoeProblem, runs = 1, changeRouting = true): Promise<string> {
  let routing = routings(ctx, p, 0);
  const ranks = prepare(ctx, p, routing);
  let worst = 0;
  try {
    for (let it = 0; it < runs; it++) {
      if (it > 0 && changeRouting) {
        routing = routings(ctx, p, it);
        for (const rk of ranks) {
          upload(rk.ids, routing.ids[rk.c.rank]!);
          upload(rk.weights, routing.weights[rk.c.rank]!);
        }
      }
      const layout = referenceLayout(ctx.world, p.experts, p.topk, routing.ids);
      ranks.forEach(poison);
      await Promise.all(ranks.map((rk) => rk.d.run()));
      await Promise.all(ranks.map((rk) => rk.comb.run()));
      for (const rk of ranks) {
        worst = Math.max(worst, verify(ctx, p, rk, layout, routing.weights[rk.c.rank]!, `${label(ctx, p)} run ${it}`));
      }
    }
  } finally {
    for (const rk of ranks) rk.dispose();
  }
  return `${label(ctx, p)}: ${runs} run(s), every result checked, worst out rel ${worst.toExponential(2)}`;
}

/** The same, as one CUDA graph per rank (dispatch + combine) captured once and replayed. */
export async function checkGraphReplay(ctx: MoeContext, p: MoeProblem, replays: number): Promise<string> {
  let routing = routings(ctx, p, 0);
  const ranks = prepare(ctx, p, routing);
  const graphs: CudaGraph[] = [];
  let failure: unknown;
  try {
    await Promise.all(ranks.map((rk) => rk.d.run()));  // plan setup (the barriers) done, one tracked run
    for (const rk of ranks) graphs.push(CudaGraph.capture(rk.c.stream, () => {
      rk.d.enqueue();
      rk.comb.enqueue();
    }));
    for (let it = 0; it < replays; it++) {
      routing = routings(ctx, p, it + 1);
      for (const rk of ranks) {
        upload(rk.ids, routing.ids[rk.c.rank]!);
        upload(rk.weights, routing.weights[rk.c.rank]!);
        poison(rk);
      }
      ranks.forEach((rk, i) => graphs[i]!.launch(rk.c.stream));
      for (const rk of ranks) rk.c.stream.synchronize();
      const layout = referenceLayout(ctx.world, p.experts, p.topk, routing.ids);
      for (const rk of ranks) verify(ctx, p, rk, layout, routing.weights[rk.c.rank]!, `${label(ctx, p)} replay ${it}`);
    }
    // A tracked launch after the replays still agrees on the epoch with every peer.
    await Promise.all(ranks.map((rk) => rk.d.run()));
    await Promise.all(ranks.map((rk) => rk.comb.run()));
    const layout = referenceLayout(ctx.world, p.experts, p.topk, routing.ids);
    for (const rk of ranks) verify(ctx, p, rk, layout, routing.weights[rk.c.rank]!, `${label(ctx, p)} after replays`);
  } catch (e) {
    failure = e;
    throw e;
  } finally {
    await cleanUp(failure, () => {
      for (const g of graphs) g.dispose();
      for (const rk of ranks) rk.dispose();
    });
  }
  return `${label(ctx, p)}: captured once, ${replays} replays with new routing, each checked, then a tracked launch`;
}

/** Expects `promise` to reject with an error whose name and message match. */
async function rejects(promise: Promise<unknown>, name: string, message: RegExp, what: string): Promise<string> {
  try {
    await promise;
  } catch (e) {
    const err = e as Error;
    if (err.name !== name || !message.test(err.message)) throw new Error(`${what}: got ${err.name}: ${err.message}`);
    return err.message;
  }
  throw new Error(`${what}: did not fail`);
}

/** Failures every rank sees alike, then a good run on the same plans (the counters stay consistent):
 * a capacity overflow, the combine of a failed layout, a bad expert id on rank 1. World >= 2. */
export async function checkFailures(ctx: MoeContext): Promise<string> {
  const E = 4 * ctx.world, k = 2, H = 256, T = 64;
  const p: MoeProblem = { experts: E, topk: k, hidden: H, tokens: () => T, routing: "uniform", tag: 777, capacity: 256 };
  // Every token to experts 0 and 1 and... 2 of owner 0: owner 0 needs 2 x 128 rows per expert used.
  // Every token to two of owner 0's four experts: owner 0 needs 4 padded experts (>= 512 rows).
  const crowd = (q: number) => Int32Array.from({ length: T * k }, (_, i) => (i % k) + ((q + Math.floor(i / k)) % 3 === 0 ? 2 : 0));
  const fits = (q: number) => Int32Array.from({ length: T * k }, (_, i) => (i % k === 0 ? 0 : E / ctx.world));
  const weights = (q: number) => makeWeights(T, k, 99 + q);
  const crowded = Array.from({ length: ctx.world }, (_, q) => crowd(q));
  const needed = referenceLayout(ctx.world, E, k, crowded).owners[0]!.rows;
  const ranks = prepare(ctx, p, { ids: crowded, weights: Array.from({ length: ctx.world }, (_, q) => weights(q)) });
  const notes: string[] = [];
  try {
    const overflow = ranks.map((rk) => rejects(rk.d.run(), "ArgumentError",
      new RegExp(`'capacity' is 256 rows, but with this routing rank 0's experts need ${needed} rows`), `capacity, rank ${rk.c.rank}`));
    notes.push((await Promise.all(overflow))[0]!.replace(/.*argument/, "argument"));
    await Promise.all(ranks.map((rk) => rejects(rk.comb.run(), "WeftError", /layout is not valid/, `combine after it, rank ${rk.c.rank}`)));
    const good = { ids: Array.from({ length: ctx.world }, (_, q) => fits(q)), weights: Array.from({ length: ctx.world }, (_, q) => weights(q)) };
    for (const rk of ranks) upload(rk.ids, good.ids[rk.c.rank]!);
    await Promise.all(ranks.map((rk) => rk.d.run()));
    await Promise.all(ranks.map((rk) => rk.comb.run()));
    const layout = referenceLayout(ctx.world, E, k, good.ids);
    for (const rk of ranks) verify(ctx, p, rk, layout, good.weights[rk.c.rank]!, "after the overflow");
    // A bad id on rank 1: rank 1 names it, the others blame rank 1, nothing moves; then a good run.
    const bad = fits(1);
    bad[5] = E;
    for (const rk of ranks) if (rk.c.rank === 1) upload(rk.ids, bad);
    await Promise.all(ranks.map((rk) => rk.c.rank === 1
      ? rejects(rk.d.run(), "ArgumentError", new RegExp(`'topkIds' holds expert id ${E} at token 2, slot 1`), "bad id, rank 1")
      : rejects(rk.d.run(), "PeerError", /rank 1's routing holds an expert id outside/, `bad id, rank ${rk.c.rank}`)));
    for (const rk of ranks) if (rk.c.rank === 1) upload(rk.ids, good.ids[1]!);
    await Promise.all(ranks.map((rk) => rk.d.run()));
    await Promise.all(ranks.map((rk) => rk.comb.run()));
    for (const rk of ranks) verify(ctx, p, rk, layout, good.weights[rk.c.rank]!, "after the bad id");
    notes.push("bad id named on rank 1, blamed on the others; good runs after both");
  } finally {
    for (const rk of ranks) rk.dispose();
  }
  return notes.join("; ");
}

/** Plans that disagree (maxTokens) fail on every rank with a PeerError naming the field; a rank that
 * never launches makes the others time out (bounded), not hang. World >= 2. Run last on a communicator. */
export async function checkMismatchAndTimeout(ctx: MoeContext): Promise<string> {
  const notes: string[] = [];
  const made = await each(ctx, (c) => {
    const x = Tensor.empty([8, 64], "bf16", { device: c.device }).fillRandom(1);
    const ids = Tensor.from(new Int32Array(16), [8, 2], "i32", { device: c.device });
    const d = c.moeDispatch({ x, topkIds: ids, experts: 2 * ctx.world, maxTokens: 8 + c.rank });
    return { c, x, ids, d };
  });
  try {
    const r = await Promise.all(made.map((m) => rejects(m.d.run(), "PeerError", /different MoE plans: maxTokens/, `mismatch, rank ${m.c.rank}`)));
    notes.push(r[0]!.replace(/.*: rank/, "rank"));
  } finally {
    for (const m of made) {
      m.d.dispose();
      m.ids.dispose();
      m.x.dispose();
    }
  }
  const lone = await each(ctx, (c) => {
    const x = Tensor.empty([8, 64], "bf16", { device: c.device }).fillRandom(1);
    const ids = Tensor.from(new Int32Array(16), [8, 2], "i32", { device: c.device });
    return { c, x, ids, d: c.moeDispatch({ x, topkIds: ids, experts: 2 * ctx.world }) };
  });
  try {
    const t0 = performance.now();
    // Rank 1 never launches this plan: rank 0 waits for its counts until the GPU-side bound (the
    // others time out too, or stop sooner because rank 0 raised the abort word).
    await Promise.all(lone.filter((m) => m.c.rank !== 1).map((m) => m.c.rank === 0
      ? rejects(m.d.run(), "TimeoutError", /waited \d+ ms for rank 1 to send its counts/, "timeout, rank 0")
      : m.d.run().then(() => { throw new Error(`rank ${m.c.rank} did not fail`); }, (e: Error) => {
        if (e.name !== "TimeoutError" && e.name !== "PeerError") throw e;
      })));
    notes.push(`a missing rank times out in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    for (const m of lone) {
      m.d.dispose();
      m.ids.dispose();
      m.x.dispose();
    }
  }
  return notes.join("; ");
}

const H_SMALL = 1024;
/** The checks both process models run on two GPUs (tag, shapes, and what they cover). */
export const MOE_CHECKS: NamedCheck<MoeContext>[] = [
  { name: "dispatch + combine, uniform, E 64 k 8 H 7168 T 128", run: (ctx) => checkDispatchCombine(ctx, { experts: 64, topk: 8, hidden: 7168, tokens: () => 128, routing: "uniform", tag: 1 }) },
  { name: "dispatch + combine, skewed, E 8 k 2 T 4096 / 7", run: (ctx) => checkDispatchCombine(ctx, { experts: 8, topk: 2, hidden: H_SMALL, tokens: (q) => (q === 0 ? 4096 : 7), routing: "skewed", tag: 2 }) },
  { name: "dispatch + combine, a rank with no tokens, identical routing", run: (ctx) => checkDispatchCombine(ctx, { experts: 8, topk: 1, hidden: H_SMALL, tokens: (q) => (q === 1 ? 0 : 1), routing: "identical", tag: 3 }) },
  { name: "100 back-to-back runs, routing changed every run", run: (ctx) => checkDispatchCombine(ctx, { experts: 16, topk: 4, hidden: H_SMALL, tokens: (q) => 96 + 32 * q, routing: "skewed", tag: 4 }, 100) },
  { name: "CUDA graph: capture once, replay with new routing", run: (ctx) => checkGraphReplay(ctx, { experts: 16, topk: 2, hidden: H_SMALL, tokens: () => 128, routing: "uniform", tag: 5 }, 5) },
  { name: "failures every rank sees alike, then good runs", run: (ctx) => checkFailures(ctx) },
  { name: "mismatched plans and a missing rank", run: (ctx) => checkMismatchAndTimeout(ctx) },
];
