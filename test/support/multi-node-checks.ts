// multi-node-checks.ts — the GPU checks of a communicator that spans several nodes: hierarchical
// collectives (NVLink inside a node, the proxy between nodes) and the inter-node TP plans
// (allGatherGemm, gemmReduceScatter across nodes, one kernel each). Run by every rank process
// (multi-node-worker.ts) and, for the collectives, by test/multi-node.test.ts; each rank
// builds every rank's input from its seed (fillRandom is deterministic), so references need no
// data exchange. Rules (DESIGN.md "Testing"): fresh random inputs, outputs poisoned with NaN,
// every element checked on the GPU, sums against an fp32 reference (bf16 <= 1e-2, f32 <= 1e-5).
import { Communicator } from "../../lib/comm.ts";
import { DTYPES, type DType } from "../../lib/dtype.ts";
import { ArgumentError, UnsupportedError, WeftError } from "../../lib/errors.ts";
import type { TpPlan } from "../../lib/ops/tp.ts";
import { Tensor } from "../../lib/tensor.ts";
import { accumulate, diff, expectClose, expectExact, random, seed, slice } from "./collective-checks.ts";
import { referenceGemm } from "./gemm.ts";
import type { NamedCheck } from "./report-channel.ts";

export interface MultiNodeContext {
  comm: Communicator;
}

const DTYPES_CHECKED: DType[] = ["bf16", "f32"];

/** Element counts per rank: odd small ones, one that splits over many CTAs, and the staging limit. */
export function sizes(c: Communicator, dtype: DType, allReduce = false): number[] {
  const e = DTYPES[dtype].bytes;
  const most = Math.floor(c.interNodeBytes / e) * (allReduce ? c.localSize : 1);
  return [1, 7, 1025, 65_536 + 3, most];
}

// ---- one call each, checked --------------------------------------------------------------------------

/** One rank's part of a collective check, in phases, so that a process driving several ranks can
 * prepare every rank's buffers, then launch all of them, then check: nothing that may synchronize
 * a GPU (an allocation, a free) comes between the launches of two ranks that wait for each other. */
export interface Prepared<R> {
  run(): Promise<void>;
  check(): R;
  dispose(): void;
}

export function prepareAllGather(c: Communicator, dtype: DType, n: number, tag: number): Prepared<void> {
  const W = c.size;
  const input = random(n, dtype, seed(tag, c.rank), c.device);
  const out = c.empty([W * n], dtype).fill(NaN);
  return {
    run: () => c.allGather(input, out),
    check() {
      for (let s = 0; s < W; s++) {
        using expected = random(n, dtype, seed(tag, s), c.device);
        using got = slice(out, s * n, n);
        expectExact(`allGather ${dtype} ${n} el rank ${c.rank} block ${s}`, diff(got, expected));
      }
    },
    dispose() {
      input.dispose();
      out.dispose();
    },
  };
}

export function prepareReduceScatter(c: Communicator, dtype: DType, n: number, tag: number): Prepared<number> {
  const W = c.size;
  const input = c.empty([W * n], dtype).fillRandom(seed(tag, c.rank));
  const out = Tensor.empty([n], dtype, { device: c.device }).fill(NaN);
  return {
    run: () => c.reduceScatter(input, out),
    check() {
      using ref = Tensor.empty([n], "f32", { device: c.device }).fill(0);
      for (let s = 0; s < W; s++) {
        using full = random(W * n, dtype, seed(tag, s), c.device);
        accumulate(ref, full, c.rank * n, n);
      }
      return expectClose(`reduceScatter ${dtype} ${n} el rank ${c.rank}`, diff(out, ref), dtype);
    },
    dispose() {
      input.dispose();
      out.dispose();
    },
  };
}

export function prepareAllReduce(c: Communicator, dtype: DType, n: number, tag: number, inPlace: boolean): Prepared<number> {
  const W = c.size;
  const input = c.empty([n], dtype).fillRandom(seed(tag, c.rank));
  const out = inPlace ? input : c.empty([n], dtype).fill(NaN);
  return {
    run: () => c.allReduce(input, out),
    check() {
      using ref = Tensor.empty([n], "f32", { device: c.device }).fill(0);
      for (let s = 0; s < W; s++) {
        using x = random(n, dtype, seed(tag, s), c.device);
        accumulate(ref, x);
      }
      return expectClose(`allReduce${inPlace ? " in place" : ""} ${dtype} ${n} el rank ${c.rank}`, diff(out, ref), dtype);
    },
    dispose() {
      input.dispose();
      if (!inPlace) out.dispose();
    },
  };
}

/** Prepares every rank's part, launches them all, then checks each; returns the checks' results. */
export async function runAll<R>(parts: Prepared<R>[]): Promise<R[]> {
  try {
    await Promise.all(parts.map((p) => p.run()));
    return parts.map((p) => p.check());
  } finally {
    parts.forEach((p) => p.dispose());
  }
}

const allGather = async (c: Communicator, dtype: DType, n: number, tag: number) => (await runAll([prepareAllGather(c, dtype, n, tag)]))[0];
const reduceScatter = async (c: Communicator, dtype: DType, n: number, tag: number) =>
  (await runAll([prepareReduceScatter(c, dtype, n, tag)]))[0]!;
const allReduce = async (c: Communicator, dtype: DType, n: number, tag: number, inPlace: boolean) =>
  (await runAll([prepareAllReduce(c, dtype, n, tag, inPlace)]))[0]!;

/** `runs` launches of a fused op's plan back to back, out poisoned before each and every element
 * checked against ref; returns the shape, the plan's choice and the worst error. */
async function runFused(op: string, c: Communicator, shape: { M: number; N: number; K: number; transB: boolean }, plan: TpPlan,
  out: Tensor, ref: Tensor, runs: number): Promise<string> {
  const { M, N, K, transB } = shape;
  let worst = 0;
  for (let i = 0; i < runs; i++) {
    out.fill(NaN);
    await plan.run();
    worst = Math.max(worst, expectClose(`${op} ${M}x${N}x${K}${transB ? " transB" : ""} run ${i} rank ${c.rank}`, diff(out, ref), "bf16"));
  }
  return `${M}x${N}x${K}${transB ? "ᵀ" : ""} (${plan.choice.commCtas} mover CTAs, ${plan.choice.gemmCtas} GEMM CTAs, tile ${plan.choice.tileN}, ` +
    `chunk ${plan.choice.chunkRows} rows) x${runs}: worst rel ${worst.toExponential(2)}`;
}

/** allGatherGemm across nodes: out [M, n] = allgather(a) · b against the fp32 CUDA-core reference,
 * `runs` launches of one plan back to back, out poisoned before each and every element checked. */
async function allGatherGemm(c: Communicator, M: number, N: number, K: number, transB: boolean, tag: number, runs: number): Promise<string> {
  const W = c.size;
  const mShard = M / W;
  const n = N / W;
  using a = Tensor.empty([mShard, K], "bf16", { device: c.device }).fillRandom(seed(tag, c.rank));
  using b = Tensor.empty(transB ? [n, K] : [K, n], "bf16", { device: c.device }).fillRandom(seed(tag + 1, c.rank));
  using out = Tensor.empty([M, n], "bf16", { device: c.device });
  using full = Tensor.empty([M, K], "bf16", { device: c.device });
  for (let q = 0; q < W; q++) slice(full, q * mShard * K, mShard * K).fillRandom(seed(tag, q));
  using ref = Tensor.empty([M, n], "f32", { device: c.device });
  referenceGemm(full, b, ref, { m: M, n, k: K }, transB);
  using plan = c.allGatherGemm({ a, b, out, transB });
  return await runFused("allGatherGemm", c, { M, N, K, transB }, plan, out, ref, runs);
}

/** gemmReduceScatter across nodes: out [M / W, N] = this rank's rows of Σ over ranks a · b (each rank
 * holds a [M, K / W] and b [K / W, N]) against fp32 references summed in rank order. */
async function gemmReduceScatter(c: Communicator, M: number, N: number, K: number, transB: boolean, tag: number, runs: number): Promise<string> {
  const W = c.size;
  const mShard = M / W;
  const k = K / W;
  const operands = (q: number) => ({
    a: Tensor.empty([M, k], "bf16", { device: c.device }).fillRandom(seed(tag, q)),
    b: Tensor.empty(transB ? [N, k] : [k, N], "bf16", { device: c.device }).fillRandom(seed(tag + 1, q)),
  });
  const mine = operands(c.rank);
  using out = c.empty([mShard, N], "bf16");
  using ref = Tensor.empty([mShard, N], "f32", { device: c.device }).fill(0);
  using part = Tensor.empty([mShard, N], "f32", { device: c.device });
  for (let q = 0; q < W; q++) {
    const o = q === c.rank ? mine : operands(q);
    using rows = Tensor.wrap(o.a.ptr + c.rank * mShard * k * 2, [mShard, k], "bf16", c.device);
    referenceGemm(rows, o.b, part, { m: mShard, n: N, k }, transB);
    accumulate(ref, part);
    if (q !== c.rank) {
      o.a.dispose();
      o.b.dispose();
    }
  }
  try {
    using plan = c.gemmReduceScatter({ a: mine.a, b: mine.b, out, transB });
    return await runFused("gemmReduceScatter", c, { M, N, K, transB }, plan, out, ref, runs);
  } finally {
    mine.a.dispose();
    mine.b.dispose();
  }
}

let tags = 5000;
const nextTag = () => tags++;

/** The fused TP ops across nodes: what their one kernel does, the (M, N, K, transB) shapes each
 * checked over 3 runs, and the (M, N, K) shape run 100 times back to back. */
const FUSED_ACROSS_NODES = [
  {
    name: "allGatherGemm", kernel: "NVLink + proxy movers, GEMM on arrival", check: allGatherGemm,
    shapes: [[512, 512, 1024, false], [1024, 2048, 520, true], [2048, 1024, 4096, true]], backToBack: [768, 1024, 768],
  },
  {
    name: "gemmReduceScatter", kernel: "GEMM, NVLink sums, proxy movers, owner adds", check: gemmReduceScatter,
    shapes: [[512, 512, 1024, false], [1024, 1000, 1040, true], [2048, 2048, 2048, true]], backToBack: [768, 512, 768],
  },
] as const;

export const MULTI_NODE_CHECKS: NamedCheck<MultiNodeContext>[] = [
  {
    name: "the communicator spans one node per rank and says which provider it uses",
    async run({ comm: c }) {
      if (c.nodes !== c.size || c.node !== c.rank || c.localRank !== 0 || c.localSize !== 1) {
        throw new Error(`expected ${c.size} nodes of 1 rank, got node ${c.node} of ${c.nodes}, local ${c.localRank} of ${c.localSize}`);
      }
      if (!c.transportProvider) throw new Error("no transport provider");
      return `provider ${c.transportProvider}, node ${c.node} of ${c.nodes}, staging ${c.interNodeBytes} B`;
    },
  },
  ...DTYPES_CHECKED.map((dtype): NamedCheck<MultiNodeContext> => ({
    name: `hierarchical allGather ${dtype}: every block of every size exact`,
    async run({ comm: c }) {
      for (const n of sizes(c, dtype)) await allGather(c, dtype, n, nextTag());
      return sizes(c, dtype).join(", ") + " el";
    },
  })),
  ...DTYPES_CHECKED.map((dtype): NamedCheck<MultiNodeContext> => ({
    name: `hierarchical reduceScatter ${dtype} against the fp32 reference`,
    async run({ comm: c }) {
      let worst = 0;
      for (const n of sizes(c, dtype)) worst = Math.max(worst, await reduceScatter(c, dtype, n, nextTag()));
      return `${sizes(c, dtype).join(", ")} el, worst rel ${worst.toExponential(2)}`;
    },
  })),
  ...DTYPES_CHECKED.map((dtype): NamedCheck<MultiNodeContext> => ({
    name: `hierarchical allReduce ${dtype} against the fp32 reference, in place and out of place`,
    async run({ comm: c }) {
      let worst = 0;
      for (const n of sizes(c, dtype, true)) {
        worst = Math.max(worst, await allReduce(c, dtype, n, nextTag(), false));
        worst = Math.max(worst, await allReduce(c, dtype, n, nextTag(), true));
      }
      return `${sizes(c, dtype, true).join(", ")} el, worst rel ${worst.toExponential(2)}`;
    },
  })),
  {
    name: "100 back-to-back rounds without reset (allReduce bf16, allGather f32, reduceScatter bf16, barrier), every result checked",
    async run({ comm: c }) {
      let worst = 0;
      for (let i = 0; i < 100; i++) {
        const n = 1 + ((i * 7919) % 40_000);
        worst = Math.max(worst, await allReduce(c, "bf16", n, nextTag(), i % 2 === 0));
        await allGather(c, "f32", n, nextTag());
        worst = Math.max(worst, await reduceScatter(c, "bf16", n, nextTag()));
        await c.barrier();
      }
      return `400 calls, worst rel ${worst.toExponential(2)}`;
    },
  },
  {
    name: "a burst of 64 in-place allReduces launched without awaiting, then checked",
    async run({ comm: c }) {
      const n = 4099;
      using x = c.empty([n], "f32").fillRandom(seed(77, c.rank));
      const plan = c.prepare.allReduce(x);
      const seqs: number[] = [];
      for (let i = 0; i < 64; i++) seqs.push(plan.launch());
      await plan.promise(seqs.at(-1)!);
      // x_k = W^k x_0 summed over ranks: after 64 rounds with W = 2 that is 2^63 * sum(x_0).
      using ref = Tensor.empty([n], "f32", { device: c.device }).fill(0);
      for (let s = 0; s < c.size; s++) {
        using r = random(n, "f32", seed(77, s), c.device);
        accumulate(ref, r);
      }
      const scale = c.size ** 63;
      using scaled = Tensor.from(new Float32Array((ref.download() as Float32Array).map((v) => v * scale)), [n], "f32", { device: c.device });
      return `rel ${expectClose("64 chained allReduces", diff(x, scaled), "f32").toExponential(2)}`;
    },
  },
  {
    name: "bad input: allToAll and broadcast are single-node only; a call larger than the staging names interNodeBytes",
    async run({ comm: c }) {
      using a = c.empty([8 * c.size], "f32");
      using b = c.empty([8 * c.size], "f32");
      const expectThrow = (f: () => unknown, cls: Function, re: RegExp, what: string) => {
        try {
          f();
        } catch (e) {
          if (!(e instanceof cls) || !re.test((e as Error).message)) throw new Error(`${what}: wrong error ${(e as Error).name}: ${(e as Error).message}`);
          return;
        }
        throw new Error(`${what}: did not throw`);
      };
      expectThrow(() => c.prepare.allToAll(a, b), UnsupportedError, /single-node/, "allToAll");
      expectThrow(() => c.prepare.broadcast(a, b), UnsupportedError, /single-node/, "broadcast");
      const big = c.interNodeBytes / 4 + 64;
      using x = c.empty([big], "f32");
      using y = c.empty([big * c.size], "f32");
      expectThrow(() => c.prepare.allGather(x, y), ArgumentError, /interNodeBytes/, "allGather too large");
      await c.barrier();
      return "UnsupportedError, ArgumentError";
    },
  },
  ...FUSED_ACROSS_NODES.flatMap((op): NamedCheck<MultiNodeContext>[] => [
    {
      name: `${op.name} across nodes (one kernel: ${op.kernel}) against the fp32 reference`,
      async run({ comm: c }) {
        const out: string[] = [];
        for (const [M, N, K, transB] of op.shapes) out.push(await op.check(c, M, N, K, transB, nextTag(), 3));
        return out.join("; ");
      },
    },
    {
      name: `${op.name} across nodes: 100 back-to-back launches of one plan without reset, every result checked`,
      async run({ comm: c }) {
        const [M, N, K] = op.backToBack;
        return await op.check(c, M, N, K, false, nextTag(), 100);
      },
    },
  ]),
  {
    name: "fused ops and collectives interleaved keep the epochs in step",
    async run({ comm: c }) {
      for (let i = 0; i < 5; i++) {
        await allGatherGemm(c, 256, 256, 256, i % 2 === 1, nextTag(), 2);
        await allReduce(c, "f32", 1000 + i, nextTag(), false);
        await gemmReduceScatter(c, 256, 256, 256, i % 2 === 0, nextTag(), 2);
      }
      return "5 x (allGatherGemm x2, allReduce, gemmReduceScatter x2)";
    },
  },
  {
    name: "tensor-parallel bad input across nodes: gemmAllReduce and odd shard rows are UnsupportedError naming the rule",
    async run({ comm: c }) {
      const W = c.size;
      using a = Tensor.empty([100, 64], "bf16", { device: c.device });
      using b = Tensor.empty([64, 64], "bf16", { device: c.device });
      using out = c.empty([100, 64], "bf16");
      let got = "";
      try {
        c.gemmAllReduce({ a, b, out }).dispose();
      } catch (e) {
        if (!(e instanceof UnsupportedError) || !/single-node/.test((e as Error).message)) throw e;
        got += "gemmAllReduce: UnsupportedError; ";
      }
      using a2 = Tensor.empty([100, 64], "bf16", { device: c.device });
      using o2 = Tensor.empty([100 * W, 64], "bf16", { device: c.device });
      try {
        c.allGatherGemm({ a: a2, b, out: o2 }).dispose();
      } catch (e) {
        if (!(e instanceof UnsupportedError) || !/multiple of 128/.test((e as Error).message)) throw e;
        got += "allGatherGemm 100 rows: UnsupportedError";
      }
      if (!got.includes("gemmAllReduce") || !got.includes("100 rows")) throw new Error(`expected two UnsupportedErrors, got: ${got}`);
      await c.barrier();
      return got;
    },
  },
  {
    name: "time per hierarchical allReduce (f32, runSync, 20 calls after 3 warm-up)",
    async run({ comm: c }) {
      const out: string[] = [];
      for (const bytes of [4 << 10, 256 << 10, 4 << 20]) {
        const n = bytes / 4;
        using x = c.empty([n], "f32").fillRandom(seed(99, c.rank));
        const plan = c.prepare.allReduce(x);
        for (let i = 0; i < 3; i++) plan.runSync();
        const t0 = performance.now();
        for (let i = 0; i < 20; i++) plan.runSync();
        const us = ((performance.now() - t0) / 20) * 1000;
        out.push(`${bytes >= 1 << 20 ? `${bytes >> 20} MiB` : `${bytes >> 10} KiB`}: ${us.toFixed(0)} us`);
        await c.barrier();
      }
      return out.join(", ");
    },
  },
  {
    // Last: the communicator is broken afterwards (the worker still disposes it and checks for leaks).
    name: "a failed proxy rejects the next collective with a WeftError on every rank, within the GPU timeout",
    async run({ comm: c }) {
      using x = c.empty([4096], "f32").fillRandom(seed(123, c.rank));
      await c.barrier();
      if (c.rank === c.size - 1) Communicator.internals(c).interNode!.proxy.abort();
      const t0 = performance.now();
      try {
        await c.allReduce(x);
      } catch (e) {
        const ms = performance.now() - t0;
        if (!(e instanceof WeftError)) throw e;
        if (ms > c.timeoutMs + 5_000) throw new Error(`rejected only after ${ms.toFixed(0)} ms`);
        return `${(e as Error).name} after ${ms.toFixed(0)} ms: ${(e as Error).message.slice(0, 160)}`;
      }
      throw new Error("the allReduce resolved although the last rank's proxy was aborted");
    },
  },
];
