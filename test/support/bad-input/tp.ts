// tp.ts — bad input to the tensor-parallel ops: validateTp and validateTpConfig (the checks every
// comm.allGatherGemm() & co. runs first, on descriptions, no GPU) and TpPlan's batch launchers.
// `gpuCases` call the ops on a world-1 communicator.
import { Communicator } from "../../../lib/comm.ts";
import { ArgumentError, DisposedError } from "../../../lib/errors.ts";
import { TpPlan, validateTp, validateTpConfig, type TpConfig, type TpOp, type TpTensorDesc } from "../../../lib/ops/tp.ts";
import { Tensor } from "../../../lib/tensor.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
const t = (shape: number[], extra: Partial<TpTensorDesc> = {}): TpTensorDesc => ({ shape, dtype: "bf16", device: 0, ...extra });
const sym = (shape: number[]) => t(shape, { symmetric: true });
type Args = Parameters<typeof validateTp>[3];
/** allGatherGemm at world 2: a [64, 128] (a shard), b [128, 256], out [128, 256]. */
const ag = (over: Partial<Args> = {}, world = 2, device = 0) =>
  validateTp("allGatherGemm", world, device, { a: t([64, 128]), b: t([128, 256]), out: t([128, 256]), ...over });
/** gemmReduceScatter at world 2: a [128, 64], b [64, 256], out (symmetric) [64, 256]. */
const rs = (over: Partial<Args> = {}) => validateTp("gemmReduceScatter", 2, 0, { a: t([128, 64]), b: t([64, 256]), out: sym([64, 256]), ...over });
/** gemmAllReduce at world 2: a [128, 64], b [64, 256], out (symmetric) [128, 256]. */
const ar = (over: Partial<Args> = {}) => validateTp("gemmAllReduce", 2, 0, { a: t([128, 64]), b: t([64, 256]), out: sym([128, 256]), ...over });
const cfg = (c: unknown, op: TpOp = "allGatherGemm") => validateTpConfig(c as TpConfig, `Communicator.${op}`, op, 132);

export const cases: BadInputCase[] = [
  // world, device, op, args
  { name: "validateTp with world -2 (was accepted)", run: () => ag({}, -2), error: A, names: "world" },
  { name: "validateTp with world 0", run: () => ag({}, 0), error: A, names: "world" },
  { name: "validateTp with world 1.5", run: () => ag({}, 1.5), error: A, names: "world" },
  { name: "validateTp on device -1", run: () => ag({}, 2, -1), error: A, names: "device" },
  { name: "validateTp of an unknown op", run: () => validateTp(any("gemmAllToAll"), 2, 0, any({})), error: A, names: "op" },
  { name: "validateTp with null args", run: () => validateTp("gemmAllReduce", 2, 0, any(null)), error: A, names: "args" },
  { name: "validateTp with transB 'yes'", run: () => ar({ transB: any("yes") }), error: A, names: "transB" },
  // operands
  { name: "TP op with a f32", run: () => ar({ a: t([128, 64], { dtype: "f32" }) }), error: A, names: "a" },
  { name: "TP op with a 3-D a", run: () => ar({ a: t([128, 64, 1]) }), error: A, names: "a" },
  { name: "TP op with a missing b", run: () => ar({ b: any(undefined) }), error: A, names: "b" },
  { name: "TP op with a negative row count", run: () => ar({ a: t([-4, 64]) }), error: A, names: "a.shape[0]" },
  { name: "TP op with a fractional column count", run: () => ar({ b: t([64, 2.5]) }), error: A, names: "b.shape[1]" },
  { name: "TP op with b on another device", run: () => ar({ b: t([64, 256], { device: 1 }) }), error: A, names: "b" },
  { name: "TP op with out on another device", run: () => ar({ out: t([128, 256], { device: 1, symmetric: true }) }), error: A, names: "out" },
  { name: "TP op with K of b not a's K", run: () => ar({ b: t([32, 256]) }), error: A, names: "b" },
  { name: "TP op with transB and b laid out [K, n]", run: () => ar({ transB: true }), error: A, names: "b" },
  { name: "TP op with out's columns not b's n", run: () => ar({ out: sym([128, 128]) }), error: A, names: "out" },
  { name: "allGatherGemm with a's rows not ceil(M / W)", run: () => ag({ a: t([63, 128]) }), error: A, names: "a" },
  { name: "allGatherGemm with gatheredA of the wrong shape", run: () => ag({ gatheredA: t([128, 127]) }), error: A, names: "gatheredA" },
  { name: "allGatherGemm with gatheredA on another device", run: () => ag({ gatheredA: t([128, 128], { device: 1 }) }), error: A, names: "gatheredA" },
  { name: "allGatherGemm with gatheredA f32", run: () => ag({ gatheredA: t([128, 128], { dtype: "f32" }) }), error: A, names: "gatheredA" },
  { name: "gemmReduceScatter with out of M rows, not ceil(M / W)", run: () => rs({ out: sym([128, 256]) }), error: A, names: "out" },
  { name: "gemmReduceScatter with a plain (not symmetric) out", run: () => rs({ out: t([64, 256]) }), error: A, names: "out" },
  { name: "gemmAllReduce with out of ceil(M / W) rows, not M", run: () => ar({ out: sym([64, 256]) }), error: A, names: "out" },
  { name: "gemmAllReduce given gatheredA", run: () => ar({ gatheredA: t([128, 64]) }), error: A, names: "gatheredA" },
  { name: "gemmAllReduce with a plain out", run: () => ar({ out: t([128, 256]) }), error: A, names: "out" },
  // config
  { name: "TP config path 'fast'", run: () => cfg({ path: "fast" }), error: A, names: "config.path" },
  { name: "TP config path 'toString' (an Object key)", run: () => cfg({ path: "toString" }), error: A, names: "config.path" },
  { name: "TP config mover 'dma'", run: () => cfg({ mover: "dma" }), error: A, names: "config.mover" },
  { name: "TP config mover 'exchange' on allGatherGemm", run: () => cfg({ mover: "exchange" }), error: A, names: "config.mover" },
  { name: "TP config commCtas with the copy-engine mover", run: () => cfg({ mover: "copyEngine", commCtas: 4 }), error: A, names: "config.commCtas" },
  { name: "TP config commCtas on gemmAllReduce", run: () => cfg({ commCtas: 4 }, "gemmAllReduce"), error: A, names: "config.commCtas" },
  { name: "TP config commCtas = every SM", run: () => cfg({ commCtas: 132 }), error: A, names: "config.commCtas" },
  { name: "TP config commCtas 0", run: () => cfg({ commCtas: 0 }), error: A, names: "config.commCtas" },
  { name: "TP config tileN 64 on allGatherGemm", run: () => cfg({ tileN: 64 }), error: A, names: "config.tileN" },
  { name: "TP config tileN 512 on gemmAllReduce", run: () => cfg({ tileN: 512 }, "gemmAllReduce"), error: A, names: "config.tileN" },
  { name: "TP config groupM 0", run: () => cfg({ groupM: 0 }), error: A, names: "config.groupM" },
  { name: "TP config groupM 2.5", run: () => cfg({ groupM: 2.5 }), error: A, names: "config.groupM" },
  { name: "TP config with an unknown field", run: () => cfg({ chunkMiB: 16 }), error: A, names: "config.chunkMiB" },
  { name: "TP config a string", run: () => cfg("fused"), error: A, names: "config" },
  // batch launch
  { name: "TpPlan.launchAll of no plans", run: () => TpPlan.launchAll([]), error: A, names: "plans" },
  { name: "TpPlan.launchAll of a non-plan", run: () => TpPlan.launchAll([any({})]), error: A, names: "plans" },
  { name: "TpPlan.runAll of a string", run: () => TpPlan.runAll(any("plans")), error: A, names: "plans" },
];

// ---- on a GPU: the ops on a world-1 communicator -------------------------------------------------
let live: Promise<{ comm: Communicator; a: Tensor; b: Tensor; out: Tensor; gone: Tensor }> | undefined;
const ctx = () => (live ??= (async () => {
  const [comm] = await Communicator.local({ devices: [0], heapBytes: 64 << 20 });
  const gone = Tensor.empty([128, 64], "bf16");
  gone.dispose();
  return { comm: comm!, a: Tensor.empty([128, 64], "bf16"), b: Tensor.empty([64, 256], "bf16"), out: comm!.empty([128, 256], "bf16"), gone };
})());

export const gpuCases: BadInputCase[] = [
  { name: "comm.allGatherGemm with null args", run: async () => (await ctx()).comm.allGatherGemm(any(null)), error: A, names: "args" },
  { name: "comm.gemmAllReduce with a description for a", run: async () => {
    const c = await ctx();
    return c.comm.gemmAllReduce({ a: any({ shape: [128, 64], dtype: "bf16", device: 0 }), b: c.b, out: c.out });
  }, error: A, names: "a" },
  { name: "comm.gemmAllReduce with a disposed a", run: async () => {
    const c = await ctx();
    return c.comm.gemmAllReduce({ a: c.gone, b: c.b, out: c.out });
  }, error: DisposedError, names: "Tensor [128, 64] bf16" },
  { name: "comm.gemmReduceScatter with a plain out", run: async () => {
    const c = await ctx();
    return c.comm.gemmReduceScatter({ a: c.a, b: c.b, out: c.a });
  }, error: A, names: "out" },
  { name: "comm.tpChoice with a bad config", run: async () => {
    const c = await ctx();
    return c.comm.tpChoice("gemmAllReduce", { a: c.a, b: c.b, out: c.out, config: { path: any("fast") } });
  }, error: A, names: "config.path" },
];

export async function release(): Promise<void> {
  if (!live) return;
  const c = await live;
  live = undefined;
  for (const x of [c.a, c.b, c.out]) x.dispose();
  await c.comm.dispose();
}
