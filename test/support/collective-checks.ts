// collective-checks.ts — the GPU checks of the collectives, written once for both process models:
// `ctx.comms` are the ranks this process drives (all of them with Communicator.local, one in a
// per-rank process). Rank r's input is always fillRandom(seed(tag, r)), so every process can build
// every rank's input, and so every reference, on its own GPU without exchanging data.
//
// Rules (DESIGN.md "Testing"): fresh random inputs, outputs poisoned with NaN, every element
// checked on the GPU (weft_diff_norms: ‖out − ref‖ / ‖ref‖ in fp64 and a count of non-finite
// outputs), references summed in fp32 in rank order by a deliberately simple kernel.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { Communicator, type CommunicatorOptions } from "../../lib/comm.ts";
import { DTYPES, type DType } from "../../lib/dtype.ts";
import { ArgumentError, PeerError, TimeoutError } from "../../lib/errors.ts";
import type { SymmetricTensor } from "../../lib/heap.ts";
import { check, native } from "../../lib/native.ts";
import { Tensor } from "../../lib/tensor.ts";
import type { NamedCheck } from "./report-channel.ts";

/** An HTTP server on a free loopback port that answers "pong" (node:http: both runtimes have it). */
async function pongServer(): Promise<{ port: number; [Symbol.asyncDispose](): Promise<void> }> {
  const server = createServer((_, res) => res.end("pong"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    [Symbol.asyncDispose]: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections(); // fetch keeps its connection alive; close() would wait for it
    }),
  };
}

export interface CheckContext {
  /** The ranks this process drives. */
  comms: Communicator[];
  world: number;
  /** Makes another communicator over the same ranks (every process calls it together). */
  spawn(opts: CommunicatorOptions): Promise<Communicator[]>;
}

export type Check = NamedCheck<CheckContext>;

const MiB = 1 << 20;
const TOL: Record<string, number> = { bf16: 1e-2, f16: 1e-3, f32: 1e-5 };

export function seed(tag: number, rank: number): number {
  return tag * 1009 + rank + 1;
}

/** Element counts per rank of the size sweep: 1, 7, 1 KiB + 1 elements, then 1, 64, 256 MiB. */
export function sweep(dtype: DType, maxMiB = 256): number[] {
  const e = DTYPES[dtype].bytes;
  return [1, 7, 1025, MiB / e, (64 * MiB) / e, (256 * MiB) / e].filter((n) => n * e <= maxMiB * MiB);
}

// ---- GPU-side comparison ---------------------------------------------------------------------------

const normsOut = new Map<number, Tensor>();

export interface Diff {
  rel: number;
  nonfinite: number;
  sumsq: number;
}

/** ‖a − b‖ / ‖b‖ over `count` elements (fp64 on the GPU), and a's non-finite count. */
export function diff(a: Tensor, b: Tensor, count = a.numel): Diff {
  let out = normsOut.get(a.device);
  if (!out) normsOut.set(a.device, (out = Tensor.empty([6], "f32", { device: a.device })));
  check(native().weft_diff_norms(a.ptr, DTYPES[a.dtype].code, b.ptr, DTYPES[b.dtype].code, count, out.ptr, null), "diff");
  const d = new Float64Array((out.download() as Float32Array).buffer);
  return { rel: Math.sqrt(d[0]!) / Math.sqrt(d[1]!), nonfinite: d[2]!, sumsq: d[0]! };
}

export function releaseDiffBuffers(): void {
  for (const t of normsOut.values()) t.dispose();
  normsOut.clear();
}

/** acc[0..count) += src[offset..offset+count) in fp32. */
export function accumulate(acc: Tensor, src: Tensor, offset = 0, count = acc.numel): void {
  check(native().weft_accumulate(acc.ptr, src.ptr + offset * DTYPES[src.dtype].bytes, DTYPES[src.dtype].code, count, null), "accumulate");
}

/** A non-owning view of elements [offset, offset + count) of t. */
export function slice(t: Tensor, offset: number, count: number): Tensor {
  return Tensor.wrap(t.ptr + offset * DTYPES[t.dtype].bytes, [count], t.dtype, t.device);
}

export function expectExact(what: string, d: Diff): void {
  if (d.nonfinite !== 0 || d.sumsq !== 0) throw new Error(`${what}: expected an exact copy, got ${d.nonfinite} non-finite and rel error ${d.rel}`);
}

export function expectClose(what: string, d: Diff, dtype: DType): number {
  if (d.nonfinite !== 0) throw new Error(`${what}: ${d.nonfinite} non-finite outputs (NaN poison left)`);
  if (!(d.rel <= TOL[dtype]!)) throw new Error(`${what}: relative error ${d.rel} > ${TOL[dtype]}`);
  return d.rel;
}

/** Runs f for every local rank concurrently and returns the results in rank order. */
function each<T>(ctx: CheckContext, f: (c: Communicator) => Promise<T>): Promise<T[]> {
  return Promise.all(ctx.comms.map(f));
}

export function random(shape: number, dtype: DType, s: number, device: number): Tensor {
  return Tensor.empty([shape], dtype, { device }).fillRandom(s);
}

function fmt(n: number, dtype: DType): string {
  const b = n * DTYPES[dtype].bytes;
  return b >= MiB ? `${b / MiB} MiB` : `${n} el`;
}

// ---- per-collective checks -----------------------------------------------------------------------------

async function checkAllGather(ctx: CheckContext, dtype: DType, n: number, tag: number): Promise<void> {
  const W = ctx.world;
  const ins = ctx.comms.map((c) => random(n, dtype, seed(tag, c.rank), c.device));
  const outs = ctx.comms.map((c) => c.empty([W * n], dtype).fill(NaN));
  try {
    await each(ctx, (c) => c.allGather(ins[ctx.comms.indexOf(c)]!, outs[ctx.comms.indexOf(c)]!));
    ctx.comms.forEach((c, i) => {
      for (let s = 0; s < W; s++) {
        using expected = random(n, dtype, seed(tag, s), c.device);
        using got = slice(outs[i]!, s * n, n);
        expectExact(`allGather ${dtype} ${fmt(n, dtype)} rank ${c.rank} block ${s}`, diff(got, expected));
      }
    });
  } finally {
    ins.forEach((t) => t.dispose());
    outs.forEach((t) => t.dispose());
  }
}

async function checkReduceScatter(ctx: CheckContext, dtype: DType, n: number, tag: number): Promise<number> {
  const W = ctx.world;
  const ins = ctx.comms.map((c) => c.empty([W * n], dtype).fillRandom(seed(tag, c.rank)));
  const outs = ctx.comms.map((c) => Tensor.empty([n], dtype, { device: c.device }).fill(NaN));
  let worst = 0;
  try {
    await each(ctx, (c) => c.reduceScatter(ins[ctx.comms.indexOf(c)]!, outs[ctx.comms.indexOf(c)]!));
    ctx.comms.forEach((c, i) => {
      using ref = Tensor.empty([n], "f32", { device: c.device }).fill(0);
      for (let s = 0; s < W; s++) {
        using full = random(W * n, dtype, seed(tag, s), c.device);
        accumulate(ref, full, c.rank * n, n);
      }
      worst = Math.max(worst, expectClose(`reduceScatter ${dtype} ${fmt(n, dtype)} rank ${c.rank}`, diff(outs[i]!, ref), dtype));
    });
  } finally {
    ins.forEach((t) => t.dispose());
    outs.forEach((t) => t.dispose());
  }
  return worst;
}

async function checkAllReduce(ctx: CheckContext, dtype: DType, n: number, tag: number, algorithm: "auto" | "staged" | "direct",
  inPlace = false): Promise<number> {
  const W = ctx.world;
  const ins = ctx.comms.map((c) => c.empty([n], dtype).fillRandom(seed(tag, c.rank)));
  const outs = inPlace ? ins : ctx.comms.map((c) => c.empty([n], dtype).fill(NaN));
  let worst = 0;
  try {
    await each(ctx, (c) => c.allReduce(ins[ctx.comms.indexOf(c)]!, outs[ctx.comms.indexOf(c)]!, { algorithm }));
    ctx.comms.forEach((c, i) => {
      using ref = Tensor.empty([n], "f32", { device: c.device }).fill(0);
      for (let s = 0; s < W; s++) {
        using x = random(n, dtype, seed(tag, s), c.device);
        accumulate(ref, x);
      }
      worst = Math.max(worst, expectClose(`allReduce ${algorithm}${inPlace ? " in place" : ""} ${dtype} ${fmt(n, dtype)} rank ${c.rank}`,
        diff(outs[i]!, ref), dtype));
    });
  } finally {
    ins.forEach((t) => t.dispose());
    if (!inPlace) outs.forEach((t) => t.dispose());
  }
  return worst;
}

/** Elements rank s sends rank d: uneven on purpose, and zero for one pair when `withZero`. */
function a2aCount(n: number, s: number, d: number, withZero: boolean): number {
  if (withZero && s === 0 && d === 1) return 0;
  return n + ((s * 7 + d * 3) % 5);
}

async function checkAllToAll(ctx: CheckContext, dtype: DType, n: number, tag: number, withZero = false): Promise<void> {
  const W = ctx.world;
  const sendOf = (s: number) => Array.from({ length: W }, (_, d) => a2aCount(n, s, d, withZero));
  const recvOf = (d: number) => Array.from({ length: W }, (_, s) => a2aCount(n, s, d, withZero));
  const total = (a: number[]) => a.reduce((x, y) => x + y, 0);
  const ins = ctx.comms.map((c) => random(total(sendOf(c.rank)), dtype, seed(tag, c.rank), c.device));
  const outs = ctx.comms.map((c) => c.empty([total(recvOf(c.rank))], dtype).fill(NaN));
  try {
    await each(ctx, (c) => {
      const i = ctx.comms.indexOf(c);
      return c.allToAll(ins[i]!, outs[i]!, { sendCounts: sendOf(c.rank), recvCounts: recvOf(c.rank) });
    });
    ctx.comms.forEach((c, i) => {
      let at = 0;
      for (let s = 0; s < W; s++) {
        const count = a2aCount(n, s, c.rank, withZero);
        const from = sendOf(s).slice(0, c.rank).reduce((x, y) => x + y, 0);
        if (count > 0) {
          using src = random(total(sendOf(s)), dtype, seed(tag, s), c.device);
          using expected = slice(src, from, count);
          using got = slice(outs[i]!, at, count);
          expectExact(`allToAll ${dtype} ${fmt(n, dtype)} rank ${c.rank} block from ${s}`, diff(got, expected));
        }
        at += count;
      }
    });
  } finally {
    ins.forEach((t) => t.dispose());
    outs.forEach((t) => t.dispose());
  }
}

async function checkBroadcast(ctx: CheckContext, dtype: DType, n: number, tag: number, root: number): Promise<void> {
  const outs = ctx.comms.map((c) => c.empty([n], dtype).fill(NaN));
  // The root sends a separate input; the others pass their output, which broadcast only writes.
  const ins = ctx.comms.map((c, i) => (c.rank === root ? random(n, dtype, seed(tag, root), c.device) : outs[i]!));
  try {
    await each(ctx, (c) => {
      const i = ctx.comms.indexOf(c);
      return c.broadcast(ins[i]!, outs[i]!, { root });
    });
    ctx.comms.forEach((c, i) => {
      using expected = random(n, dtype, seed(tag, root), c.device);
      expectExact(`broadcast ${dtype} ${fmt(n, dtype)} root ${root} rank ${c.rank}`, diff(outs[i]!, expected));
    });
  } finally {
    ctx.comms.forEach((c, i) => {
      if (c.rank === root) ins[i]!.dispose();
    });
    outs.forEach((t) => t.dispose());
  }
}

// ---- the checks --------------------------------------------------------------------------------------------

let tagCounter = 1;
const nextTag = () => tagCounter++;

function sizesCheck(name: string, body: (ctx: CheckContext, dtype: DType, n: number) => Promise<unknown>): Check[] {
  return (["bf16", "f32"] as DType[]).map((dtype) => ({
    name: `${name} ${dtype}: 1, 7, 1025 elements, 1, 64, 256 MiB per rank against the reference`,
    async run(ctx) {
      const done: string[] = [];
      for (const n of sweep(dtype)) {
        await body(ctx, dtype, n);
        done.push(fmt(n, dtype));
      }
      return done.join(", ");
    },
  }));
}

export const CHECKS: Check[] = [
  ...sizesCheck("allGather", (ctx, dtype, n) => checkAllGather(ctx, dtype, n, nextTag())),
  ...sizesCheck("reduceScatter", (ctx, dtype, n) => checkReduceScatter(ctx, dtype, n, nextTag())),
  ...sizesCheck("allReduce (auto)", (ctx, dtype, n) => checkAllReduce(ctx, dtype, n, nextTag(), "auto")),
  ...sizesCheck("allToAll (uneven per-rank counts)", (ctx, dtype, n) => checkAllToAll(ctx, dtype, n, nextTag())),
  ...sizesCheck("broadcast (root = last rank)", (ctx, dtype, n) => checkBroadcast(ctx, dtype, n, nextTag(), ctx.world - 1)),
  {
    name: "allReduce: both algorithms at every size that fits staging, in place and out of place, f16",
    async run(ctx) {
      const stagedMax = ctx.comms[0]!.stagedBytes;
      for (const dtype of ["bf16", "f32"] as DType[]) {
        for (const n of [1, 7, 1025, 4096, stagedMax / DTYPES[dtype].bytes]) {
          await checkAllReduce(ctx, dtype, n, nextTag(), "staged");
          await checkAllReduce(ctx, dtype, n, nextTag(), "direct");
        }
        await checkAllReduce(ctx, dtype, 1025, nextTag(), "staged", true);
        await checkAllReduce(ctx, dtype, MiB + 3, nextTag(), "direct", true);
      }
      await checkAllReduce(ctx, "f16", 12345, nextTag(), "auto");
      return "ok";
    },
  },
  {
    name: "allToAll with a zero count, broadcast from rank 0 in place, barrier",
    async run(ctx) {
      await checkAllToAll(ctx, "bf16", 1000, nextTag(), true);
      await checkBroadcast(ctx, "f32", 5000, nextTag(), 0);
      await each(ctx, (c) => c.barrier());
      return "ok";
    },
  },
  {
    name: "1000 back-to-back calls, no reset, every result checked (staged + direct allReduce, allGather, reduceScatter)",
    async run(ctx) {
      const W = ctx.world;
      const n = { staged: 4099, direct: 300_003, gather: 10_001, scatter: 50_000 };
      const xs = { staged: ctx.comms.map((c) => c.empty([n.staged], "f32")), direct: ctx.comms.map((c) => c.empty([n.direct], "f32")) };
      const ys = { staged: ctx.comms.map((c) => c.empty([n.staged], "f32")), direct: ctx.comms.map((c) => c.empty([n.direct], "f32")) };
      const gIn = ctx.comms.map((c) => Tensor.empty([n.gather], "bf16", { device: c.device }));
      const gOut = ctx.comms.map((c) => c.empty([W * n.gather], "bf16"));
      const sIn = ctx.comms.map((c) => c.empty([W * n.scatter], "f32"));
      const sOut = ctx.comms.map((c) => Tensor.empty([n.scatter], "f32", { device: c.device }));
      const refs = ctx.comms.map((c) => Tensor.empty([n.direct], "f32", { device: c.device }));
      const tmp = ctx.comms.map((c) => Tensor.empty([Math.max(W * n.scatter, n.direct)], "f32", { device: c.device }));
      const tmpG = ctx.comms.map((c) => Tensor.empty([n.gather], "bf16", { device: c.device }));
      // Every rank's input from seed(tag, rank) and its output poisoned, then `call` on every rank.
      const runFresh = (ins: readonly Tensor[], outs: readonly Tensor[], tag: number, call: (c: Communicator, i: number) => Promise<void>) => {
        ctx.comms.forEach((c, i) => {
          ins[i]!.fillRandom(seed(tag, c.rank));
          outs[i]!.fill(NaN);
        });
        return each(ctx, (c) => call(c, ctx.comms.indexOf(c)));
      };
      let worst = 0;
      try {
        for (let it = 0; it < 1000; it++) {
          const tag = 100_000 + it;
          const kind = it % 4;
          if (kind <= 1) {
            const which = kind === 0 ? "staged" : "direct";
            const count = n[which];
            await runFresh(xs[which], ys[which], tag, (c, i) => c.allReduce(xs[which][i]!, ys[which][i]!));
            ctx.comms.forEach((c, i) => {
              using ref = slice(refs[i]!, 0, count);
              ref.fill(0);
              for (let s = 0; s < W; s++) {
                using t = slice(tmp[i]!, 0, count);
                t.fillRandom(seed(tag, s));
                accumulate(ref, t);
              }
              worst = Math.max(worst, expectClose(`iteration ${it} allReduce ${which} rank ${c.rank}`, diff(ys[which][i]!, ref), "f32"));
            });
          } else if (kind === 2) {
            await runFresh(gIn, gOut, tag, (c, i) => c.allGather(gIn[i]!, gOut[i]!));
            ctx.comms.forEach((c, i) => {
              for (let s = 0; s < W; s++) {
                tmpG[i]!.fillRandom(seed(tag, s));
                using got = slice(gOut[i]!, s * n.gather, n.gather);
                expectExact(`iteration ${it} allGather rank ${c.rank} block ${s}`, diff(got, tmpG[i]!));
              }
            });
          } else {
            await runFresh(sIn, sOut, tag, (c, i) => c.reduceScatter(sIn[i]!, sOut[i]!));
            ctx.comms.forEach((c, i) => {
              using ref = slice(refs[i]!, 0, n.scatter);
              ref.fill(0);
              for (let s = 0; s < W; s++) {
                using t = slice(tmp[i]!, 0, W * n.scatter);
                t.fillRandom(seed(tag, s));
                accumulate(ref, t, c.rank * n.scatter, n.scatter);
              }
              worst = Math.max(worst, expectClose(`iteration ${it} reduceScatter rank ${c.rank}`, diff(sOut[i]!, ref), "f32"));
            });
          }
        }
      } finally {
        [xs.staged, xs.direct, ys.staged, ys.direct, gIn, gOut, sIn, sOut, refs, tmp, tmpG].flat().forEach((t) => t.dispose());
      }
      return `worst rel error ${worst.toExponential(2)}`;
    },
  },
  {
    name: "bursts without awaiting: 64 in-place allReduces (direct and staged) launched back to back",
    async run(ctx) {
      const W = ctx.world;
      const results: string[] = [];
      for (const [n, algorithm] of [[1 << 20, "direct"], [1000, "staged"]] as const) {
        const k = W === 1 ? 64 : Math.min(64, Math.floor(30 / Math.log10(W)));
        const xs = ctx.comms.map((c) => c.empty([n], "f32").fillRandom(seed(7, c.rank)));
        try {
          const x0 = ctx.comms.map((c) => {
            let sum = new Float64Array(n);
            for (let s = 0; s < W; s++) {
              using t = random(n, "f32", seed(7, s), c.device);
              const h = t.download() as Float32Array;
              for (let j = 0; j < n; j++) sum[j]! += h[j]!;
            }
            return sum;
          });
          const plans = ctx.comms.map((c, i) => c.prepare.allReduce(xs[i]!, xs[i]!, { algorithm }));
          const promises: Promise<void>[] = [];
          for (let j = 0; j < k; j++) plans.forEach((p) => promises.push(p.run()));
          await Promise.all(promises);
          // After the first call every rank holds S = sum of inputs; each further call multiplies by W.
          const scale = W ** (k - 1);
          ctx.comms.forEach((c, i) => {
            const got = xs[i]!.download() as Float32Array;
            let num = 0, den = 0, bad = 0;
            for (let j = 0; j < n; j++) {
              const ref = Math.fround(x0[i]![j]!) * scale;
              if (!Number.isFinite(got[j]!)) bad++;
              num += (got[j]! - ref) ** 2;
              den += ref * ref;
            }
            const rel = Math.sqrt(num / den);
            if (bad > 0 || !(rel <= 1e-5)) throw new Error(`burst ${algorithm} rank ${c.rank}: rel error ${rel}, ${bad} non-finite`);
          });
          results.push(`${algorithm} x${k} ok`);
        } finally {
          xs.forEach((t) => t.dispose());
        }
      }
      return results.join(", ");
    },
  },
  {
    name: "the event loop answers a timer and an HTTP request while collectives are in flight",
    async run(ctx) {
      const n = (64 * MiB) / 2;
      const xs = ctx.comms.map((c) => c.empty([n], "bf16").fillRandom(seed(9, c.rank)));
      const ys = ctx.comms.map((c) => c.empty([n], "bf16"));
      await using server = await pongServer();
      let ticks = 0;
      let allDone = false;
      const timer = setInterval(() => {
        if (!allDone) ticks++;
      }, 1);
      try {
        const plans = ctx.comms.map((c, i) => c.prepare.allReduce(xs[i]!, ys[i]!));
        const t0 = performance.now();
        const ops: Promise<void>[] = [];
        for (let j = 0; j < 200; j++) plans.forEach((p) => ops.push(p.run()));
        const finished = Promise.all(ops).then(() => (allDone = true));
        const launched = performance.now() - t0;
        const reply = await (await fetch(`http://127.0.0.1:${server.port}/`)).text();
        const answeredWhileBusy = !allDone;
        await finished;
        const busyTicks = ticks;
        const total = performance.now() - t0;
        if (reply !== "pong") throw new Error(`HTTP reply was ${reply}`);
        if (!answeredWhileBusy) throw new Error(`the HTTP request was answered only after all collectives finished (${total.toFixed(1)} ms)`);
        if (busyTicks < 3) throw new Error(`the 1 ms timer fired ${busyTicks} times while collectives ran`);
        return `200 x 64 MiB allReduce in ${total.toFixed(1)} ms (launch ${launched.toFixed(1)} ms); HTTP answered and timer fired ${busyTicks}x meanwhile`;
      } finally {
        clearInterval(timer);
        xs.forEach((t) => t.dispose());
        ys.forEach((t) => t.dispose());
      }
    },
  },
  {
    name: "bad input: non-symmetric, unsupported dtype, wrong sizes -> ArgumentError before any launch",
    async run(ctx) {
      const c = ctx.comms[0]!;
      using plain = Tensor.empty([16], "f32", { device: c.device });
      using sym = c.empty([16], "f32");
      using symI = c.empty([16], "i32");
      using big = c.empty([16 * ctx.world + 1], "f32");
      const expectArg = (f: () => unknown, argument: string, text: string) => {
        try {
          f();
        } catch (e) {
          if (!(e instanceof ArgumentError) || e.argument !== argument || !e.message.includes(text)) {
            throw new Error(`expected ArgumentError on '${argument}' containing '${text}', got ${e}`);
          }
          return;
        }
        throw new Error(`expected ArgumentError on '${argument}'`);
      };
      expectArg(() => c.prepare.allReduce(plain, sym), "input", "symmetric tensor");
      expectArg(() => c.prepare.allGather(plain, plain), "output", "symmetric tensor");
      expectArg(() => c.prepare.reduceScatter(plain, sym), "input", "symmetric tensor");
      expectArg(() => c.prepare.allReduce(symI), "dtype", "bf16, f16, f32");
      expectArg(() => c.prepare.allGather(sym, big), "output", "size × input.numel");
      expectArg(() => c.prepare.allReduce(sym, symI), "output", "collectives do not convert");
      expectArg(() => c.prepare.broadcast(sym, sym, { root: ctx.world }), "root", "must be a rank");
      expectArg(() => c.prepare.allReduce(sym, sym, { ctas: 0.5 }), "ctas", "integer");
      expectArg(() => c.prepare.allToAll(sym, sym, { sendCounts: [1] }), "sendCounts", `array of ${ctx.world}`);
      return "ok";
    },
  },
  {
    name: "ranks that disagree (count, dtype) fail with PeerError naming the field, and the next call works",
    async run(ctx) {
      const results: string[] = [];
      for (const [what, n0, n1, d1, text] of [
        ["count, staged", 1000, 2000, "f32", "element count"],
        ["count, direct", (1 << 20) - 8, (1 << 20) - 4, "f32", "element count"],
        ["dtype", 4096, 8192, "bf16", "dtype"],
      ] as const) {
        const xs = ctx.comms.map((c) => (c.rank === 0 ? c.empty([n0], "f32") : c.empty([n1], d1)).fillRandom(1));
        try {
          const errs = await each(ctx, (c) => c.allReduce(xs[ctx.comms.indexOf(c)]!).then(() => undefined, (e) => e as Error));
          for (const e of errs) {
            if (!(e instanceof PeerError) || !e.message.includes(text)) throw new Error(`${what}: expected a PeerError about the ${text}, got ${e}`);
          }
          results.push(`${what}: ${errs[0]!.message.slice(0, 80)}...`);
        } finally {
          xs.forEach((t) => t.dispose());
        }
        await checkAllReduce(ctx, "f32", 5000, nextTag(), "auto");
      }
      return results.join(" | ");
    },
  },
  {
    name: "a rank that never makes the call: TimeoutError naming it, within the GPU timeout",
    async run(ctx) {
      const comms = await ctx.spawn({ heapBytes: 64 * MiB, timeoutMs: 300 });
      try {
        const mine = comms.filter((c) => c.rank === 0);
        const xs = mine.map((c) => c.empty([100_000], "f32").fillRandom(2));
        const t0 = performance.now();
        const errs = await Promise.all(mine.map((c, i) => c.allReduce(xs[i]!).then(() => undefined, (e) => e as Error)));
        const ms = performance.now() - t0;
        xs.forEach((t) => t.dispose());
        for (const e of errs) {
          if (!(e instanceof TimeoutError) || !e.message.includes("rank 1")) throw new Error(`expected a TimeoutError naming rank 1, got ${e}`);
          if (ms > 3000) throw new Error(`the timeout took ${ms} ms`);
        }
        return errs.length ? `${errs[0]!.message} (${ms.toFixed(0)} ms)` : "rank 1 stays silent";
      } finally {
        await Communicator.disposeAll(comms);
      }
    },
  },
  {
    name: "dispose is collective and leaks nothing: 3 x (create 4 GiB heap, allReduce, dispose), device memory back each time",
    async run(ctx) {
      const { deviceInfo } = await import("../../lib/device.ts");
      const before = ctx.comms.map((c) => deviceInfo(c.device).freeMemory);
      for (let round = 0; round < 3; round++) {
        const comms = await ctx.spawn({ heapBytes: 4 * 2 ** 30 });
        try {
          await checkAllReduce({ ...ctx, comms }, "bf16", 1 << 20, nextTag(), "auto");
        } finally {
          await Communicator.disposeAll(comms);
        }
        ctx.comms.forEach((c, i) => {
          const lost = before[i]! - deviceInfo(c.device).freeMemory;
          if (lost > 256 * MiB) throw new Error(`round ${round}: device ${c.device} has ${(lost / MiB).toFixed(0)} MiB less free memory than before`);
        });
      }
      return "ok";
    },
  },
];

export type { SymmetricTensor };
