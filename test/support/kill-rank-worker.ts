// kill-rank-worker.ts — one rank of the kill-a-rank test (test/comm/kill-rank.test.ts). It joins
// like any launched rank (Communicator.fromEnv: the TCP store on loopback, WEFT_STORE_TOKEN), on GPU 0
// with half its SMs, runs one fused op (OP) back to back until a run fails, and reports in order:
//   {rank, ready, mover, warmupMs}         WARMUP runs done: both processes' kernels make progress
//   {rank, stage: "create" | "warmup", error, message}   it got no further (then it exits 1)
//   {rank, stage: "loop", runs, error, message}          a run rejected (the test killed the peer)
//   {rank, disposeMs, disposeError?}       the failed communicator disposed (its barriers fail fast)
//   {rank, after} | {rank, stage: "after", error, message}
//                                          a new one-rank communicator on the same GPU: allGatherGemm
//                                          checked against the fp32 reference, 3 runs
//   RANK, WORLD_SIZE (2), LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, WEFT_STORE_TOKEN,
//   OP (one of the cases of build()), WEFT_COMM_TIMEOUT_MS (every GPU wait's bound)
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { ringShardCapacity, shardLength } from "../../lib/ops/ring-attention.ts";
import { Tensor } from "../../lib/tensor.ts";
import { deviceError, referenceGemm } from "./gemm.ts";
import { describeError, report } from "./report-channel.ts";

type KillRankOp = "allGatherGemm" | "gemmReduceScatter" | "gemmAllReduce" | "moeDispatch" | "ringAttention";
const WARMUP = 5;

interface Looped {
  run(): Promise<unknown>;
  mover: string;
}

/** Rank `c.rank`'s operands and plan of `op`, each thing made passed through `keep`. The CTA mover
 * throughout: the copy-engine mover is what finding 5 of issue 24 found stuck for ranks sharing a
 * GPU, and this test is about abort, not placement. */
function build(c: Communicator, op: KillRankOp, keep: <T extends { dispose(): void }>(t: T) => T): Looped {
  const dev = { device: c.device };
  const M = 2048, N = 2048, K = 2048;
  switch (op) {
    case "allGatherGemm": {
      const a = keep(Tensor.empty([M / 2, K], "bf16", dev).fillRandom(3 + c.rank));
      const b = keep(Tensor.empty([K, N / 2], "bf16", dev).fillRandom(5 + c.rank));
      const out = keep(Tensor.empty([M, N / 2], "bf16", dev));
      const p = keep(c.allGatherGemm({ a, b, out, config: { path: "fused", mover: "ctas" } }));
      return { run: () => p.run(), mover: p.choice.mover };
    }
    case "gemmReduceScatter":
    case "gemmAllReduce": {
      const a = keep(Tensor.empty([M, K / 2], "bf16", dev).fillRandom(3 + c.rank));
      const b = keep(Tensor.empty([K / 2, N], "bf16", dev).fillRandom(5 + c.rank));
      const scatter = op === "gemmReduceScatter";
      const out = keep(c.empty([scatter ? M / 2 : M, N], "bf16"));
      const config = { path: "fused", mover: "ctas" } as const;
      const p = keep(scatter ? c.gemmReduceScatter({ a, b, out, config }) : c.gemmAllReduce({ a, b, out, config }));
      return { run: () => p.run(), mover: p.choice.mover };
    }
    case "moeDispatch": {
      const x = keep(Tensor.empty([64, 256], "bf16", dev).fillRandom(4 + c.rank));
      const topkIds = keep(Tensor.from(new Int32Array(128).map((_, i) => (i + c.rank) % 4), [64, 2], "i32", dev));
      const p = keep(c.moeDispatch({ x, topkIds, experts: 4 }));
      return { run: () => p.run(), mover: "-" };
    }
    case "ringAttention": {
      const S = 4096, H = 8, D = 128, kvRows = ringShardCapacity(S, 2, "zigzag");
      const shard = shardLength(S, 2, "zigzag", c.rank);
      const q = keep(Tensor.empty([1, shard, H, D], "bf16", dev).fillRandom(7 + c.rank));
      const out = keep(Tensor.empty([1, shard, H, D], "bf16", dev));
      const k = keep(c.empty([1, kvRows, H, D], "bf16").fillRandom(8 + c.rank));
      const v = keep(c.empty([1, kvRows, H, D], "bf16").fillRandom(9 + c.rank));
      const p = keep(c.ringAttention({ q, k, v, out, causal: true, seqlen: S, config: { mover: "ctas" } }));
      return { run: () => p.run(), mover: p.choice.mover };
    }
  }
  throw new Error(`OP=${JSON.stringify(op)} is not an op of this worker`);
}

/** A fresh one-rank communicator on `device` runs allGatherGemm (a plain GEMM at world 1) three
 * times, each output poisoned with NaN first and checked in full against the fp32 reference. */
async function gpuStillUsable(device: number): Promise<string> {
  const [c] = await Communicator.local({ devices: [device], heapBytes: 64 << 20 });
  try {
    using a = Tensor.empty([256, 512], "bf16", { device }).fillRandom(11);
    using b = Tensor.empty([512, 256], "bf16", { device }).fillRandom(12);
    using out = Tensor.empty([256, 256], "bf16", { device });
    using ref = Tensor.empty([256, 256], "f32", { device });
    referenceGemm(a, b, ref, { m: 256, n: 256, k: 512 }, false);
    using plan = c!.allGatherGemm({ a, b, out });
    let worst = 0;
    for (let i = 0; i < 3; i++) {
      out.fill(NaN);
      await plan.run();
      const e = deviceError(out, ref);
      if (e.nonFinite !== 0 || !(e.rel <= 1e-2)) throw new Error(`run ${i}: relative error ${e.rel}, ${e.nonFinite} non-finite outputs`);
      worst = Math.max(worst, e.rel);
    }
    return `one-rank allGatherGemm (256, 256, 512) x3, worst relative error ${worst.toExponential(1)}`;
  } finally {
    await c!.dispose();
  }
}

const rank = Number(process.env.RANK);
const op = process.env.OP as KillRankOp;
let stage = "create";
try {
  const comm = await Communicator.fromEnv({
    device: 0, smBudget: Math.floor(deviceInfo(0).smCount / 2), heapBytes: 256 << 20, timeoutMs: Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 20_000),
    storeTimeoutMs: 60_000,
  });
  const made: { dispose(): void }[] = [];
  stage = "warmup";
  const looped = build(comm, op, (t) => (made.push(t), t));
  const t0 = performance.now();
  for (let i = 0; i < WARMUP; i++) await looped.run();
  report({ rank, ready: true, mover: looped.mover, warmupMs: (performance.now() - t0) / WARMUP });
  stage = "loop";
  let runs = 0;
  try {
    for (;;) {
      await looped.run();
      runs++;
    }
  } catch (e) {
    report({ rank, stage, runs, ...describeError(e) });
  }
  for (const t of made.reverse()) t.dispose();
  const d0 = performance.now();
  const disposeError = await comm.dispose().then(() => undefined, (e: Error) => e.message);
  report({ rank, disposeMs: performance.now() - d0, disposeError });
  stage = "after";
  report({ rank, after: await gpuStillUsable(0) });
  process.exit(0);
} catch (e) {
  report({ rank, stage, ...describeError(e) });
  process.exit(1);
}
