// A failed rank stops its peers fast (issue 24, finding 6), on one GPU, two ranks in this process.
//   - Communicator.abort(rank) (the failure watchdog's call): a collective, each fused tensor-parallel
//     op, an MoE dispatch, a dispatch + up-projection, a down-projection + combine and a ring
//     attention waiting for a silent rank reject with a PeerError naming it within the poll interval
//     (well under a second), not at their 20 s timeout; every later launch is refused.
//   - A fused op whose wait runs out on one rank raises its peers' abort words: the peer that
//     launches afterwards stops at its first blocked poll instead of waiting out its own timeout.
//   REQUIRE_GPU=1 bun test test/comm/abort.test.ts        (~40 s on one H200)
import { expect, test } from "../support/test-api.ts";
import { setTimeout as sleep } from "node:timers/promises";

import { LocalStore } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { PeerError, TimeoutError } from "../../lib/errors.ts";
import { ringShardCapacity, shardLength } from "../../lib/ops/ring-attention.ts";
import { Tensor } from "../../lib/tensor.ts";
import { describeGpu } from "../support/gpu.ts";

const LONG = 120_000;

/** Two ranks on GPU 0, each half the SMs, with per-rank GPU wait bounds. */
async function pair(timeoutMs: [number, number]): Promise<Communicator[]> {
  const stores = LocalStore.group(2, { timeoutMs: 60_000 });
  const smBudget = Math.floor(deviceInfo(0).smCount / 2);
  return Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: 2, localRank: rank, localWorldSize: 2, nodeId: "gpu0" }, 0,
    { heapBytes: 256 << 20, timeoutMs: timeoutMs[rank], smBudget })));
}

/** body(comms, keep) on a fresh pair; what it keeps is disposed (in reverse) before the pair. */
async function withPair(timeoutMs: [number, number],
  body: (comms: Communicator[], keep: <T extends { dispose(): void }>(t: T) => T) => Promise<void>): Promise<void> {
  const comms = await pair(timeoutMs);
  const made: { dispose(): void }[] = [];
  try {
    await body(comms, (t) => (made.push(t), t));
  } finally {
    for (const t of made.reverse()) t.dispose();
    await Communicator.disposeAll(comms);
  }
}

/** Runs `launch` on rank 0 alone, declares rank 1 failed after 300 ms; the rejection must name rank 1
 * and come within 2 s of the declaration. */
async function abortedWhileWaiting(comms: Communicator[], launch: () => Promise<unknown>): Promise<string> {
  const pending = launch().then(() => null, (e: Error) => e);
  await sleep(300);
  const t0 = performance.now();
  comms[0]!.abort(1);
  const err = await pending;
  const ms = performance.now() - t0;
  expect(err).toBeInstanceOf(PeerError);
  expect(err!.message).toMatch(/rank 1 was declared failed/);
  expect(ms).toBeLessThan(2000);
  return `${err!.message.slice(0, 90)}... after ${ms.toFixed(0)} ms`;
}

describeGpu("a declared-failed rank stops its peers (Communicator.abort)", 1, () => {
  test("allReduce waiting for a silent rank rejects with a PeerError naming it, and later launches are refused", () =>
    withPair([20_000, 20_000], async (comms, keep) => {
      const x = keep(comms[0]!.empty([1 << 16], "f32").fillRandom(1));
      console.log(`  [allReduce] ${await abortedWhileWaiting(comms, () => comms[0]!.allReduce(x))}`);
      await expect(Promise.resolve().then(() => comms[0]!.allReduce(x))).rejects.toThrow(/rank 1 was declared failed/);
      expect(() => comms[0]!.abort(2)).toThrow(/failedRank/);
    }), LONG);

  for (const op of ["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"] as const) {
    test(`${op} (fused) waiting for a silent rank rejects with a PeerError naming it`, async () => {
      await withPair([20_000, 20_000], async (comms, keep) => {
        const M = 2048, N = 2048, K = 2048;
        const ag = op === "allGatherGemm";
        const plans = comms.map((c) => {
          const b = keep(Tensor.empty([ag ? K : K / 2, ag ? N / 2 : N], "bf16", { device: 0 }).fillRandom(2));
          if (ag) {
            const a = keep(Tensor.empty([M / 2, K], "bf16", { device: 0 }).fillRandom(3));
            const out = keep(Tensor.empty([M, N / 2], "bf16", { device: 0 }));
            return keep(c.allGatherGemm({ a, b, out, config: { path: "fused" } }));
          }
          const a = keep(Tensor.empty([M, K / 2], "bf16", { device: 0 }).fillRandom(3));
          const out = keep(c.empty([op === "gemmReduceScatter" ? M / 2 : M, N], "bf16"));
          return keep(op === "gemmReduceScatter" ? c.gemmReduceScatter({ a, b, out, config: { path: "fused" } })
            : c.gemmAllReduce({ a, b, out, config: { path: "fused", mover: "ctas" } }));
        });
        console.log(`  [${op}, ${plans[0]!.choice.mover}] ${await abortedWhileWaiting(comms, () => plans[0]!.run())}`);
        expect(() => plans[0]!.launch()).toThrow(/rank 1 was declared failed/);
      });
    }, LONG);
  }

  test("an MoE dispatch waiting for a silent rank's counts rejects with a PeerError naming it", () =>
    withPair([20_000, 20_000], async (comms, keep) => {
      const plans = comms.map((c) => {
        const x = keep(Tensor.empty([64, 256], "bf16", { device: 0 }).fillRandom(4));
        const ids = keep(Tensor.from(new Int32Array(128).map((_, i) => i % 4), [64, 2], "i32", { device: 0 }));
        return keep(c.moeDispatch({ x, topkIds: ids, experts: 4 }));
      });
      console.log(`  [moeDispatch] ${await abortedWhileWaiting(comms, () => plans[0]!.run())}`);
    }), LONG);

  /** Both ranks' MoE inputs: 64 tokens of H 256 to 4 experts (2 per rank), top-2, fixed routing. */
  const moeInputs = (keep: <T extends { dispose(): void }>(t: T) => T) => {
    const x = keep(Tensor.empty([64, 256], "bf16", { device: 0 }).fillRandom(4));
    const topkIds = keep(Tensor.from(new Int32Array(128).map((_, i) => i % 4), [64, 2], "i32", { device: 0 }));
    const topkWeights = keep(Tensor.from(new Float32Array(128).fill(0.5), [64, 2], "f32", { device: 0 }));
    const w1 = keep(Tensor.empty([2, 256, 256], "bf16", { device: 0 }).fillRandom(5, -0.05, 0.05));
    return { x, topkIds, topkWeights, experts: 4, w1, activation: "none" as const };
  };

  test("an MoE dispatch + up-projection waiting for a silent rank rejects with a PeerError naming it", () =>
    withPair([20_000, 20_000], async (comms, keep) => {
      const plans = comms.map((c) => keep(c.moeDispatchGemm(moeInputs(keep))));
      console.log(`  [moeDispatchGemm] ${await abortedWhileWaiting(comms, () => plans[0]!.run())}`);
    }), LONG);

  test("an MoE down-projection + combine waiting for a silent rank rejects with a PeerError naming it", () =>
    withPair([20_000, 20_000], async (comms, keep) => {
      // Both ranks dispatch (the layout); then rank 0 alone runs the GEMM + combine, whose epilogue
      // waits for rank 1 to start the launch (routed_rows.cuh) and whose reduction for its rows.
      const ups = comms.map((c) => keep(c.moeDispatchGemm(moeInputs(keep))));
      await Promise.all(ups.map((p) => p.run()));
      const downs = comms.map((c, r) => keep(c.moeGemmCombine({
        layout: ups[r]!, w2: keep(Tensor.empty([2, 256, 256], "bf16", { device: 0 }).fillRandom(6, -0.05, 0.05)),
        out: keep(Tensor.empty([64, 256], "bf16", { device: 0 })),
      })));
      console.log(`  [moeGemmCombine] ${await abortedWhileWaiting(comms, () => downs[0]!.run())}`);
    }), LONG);

  test("a ring attention waiting for a silent rank rejects with a PeerError naming it", () =>
    withPair([20_000, 20_000], async (comms, keep) => {
      // Rank 0 alone: its kernel's entry waits for rank 1 to enter the launch (ring.cuh).
      const S = 4096, H = 8, D = 128, kvRows = ringShardCapacity(S, 2, "zigzag");
      const plans = comms.map((c) => {
        const shard = shardLength(S, 2, "zigzag", c.rank);
        const q = keep(Tensor.empty([1, shard, H, D], "bf16", { device: 0 }).fillRandom(7));
        const out = keep(Tensor.empty([1, shard, H, D], "bf16", { device: 0 }));
        const k = keep(c.empty([1, kvRows, H, D], "bf16").fillRandom(8));
        const v = keep(c.empty([1, kvRows, H, D], "bf16").fillRandom(9));
        return keep(c.ringAttention({ q, k, v, out, causal: true, seqlen: S }));
      });
      console.log(`  [ringAttention, ${plans[0]!.choice.mover}] ${await abortedWhileWaiting(comms, () => plans[0]!.run())}`);
      expect(() => plans[0]!.launch()).toThrow(/rank 1 was declared failed/);
    }), LONG);

  test("a fused op that times out on one rank stops the peer that launches after it at once, not at its own timeout", async () => {
    // Rank 1 waits 1 s, rank 0 20 s. Rank 1 launches alone: its owner tiles wait for rank 0 to enter,
    // run out, and raise rank 0's abort word for this launch. Rank 0 then launches the same plan: its
    // adds wait for rank 1's stores, which never come, and give up at the first poll of the word.
    await withPair([20_000, 1_000], async (comms, keep) => {
      const M = 2048, N = 2048, K = 2048;
      const plans = comms.map((c) => {
        const a = keep(Tensor.empty([M, K / 2], "bf16", { device: 0 }).fillRandom(5));
        const b = keep(Tensor.empty([K / 2, N], "bf16", { device: 0 }).fillRandom(6));
        const out = keep(c.empty([M, N], "bf16"));
        return keep(c.gemmAllReduce({ a, b, out, config: { path: "fused", mover: "ctas" } }));
      });
      const t1 = performance.now();
      const e1 = await plans[1]!.run().then(() => null, (e: Error) => e);
      expect(e1).toBeInstanceOf(TimeoutError);
      const t0 = performance.now();
      const e0 = await plans[0]!.run().then(() => null, (e: Error) => e);
      const ms = performance.now() - t0;
      console.log(`  rank 1: ${e1!.message.slice(0, 70)}... (${(t0 - t1).toFixed(0)} ms); rank 0: ${e0?.message.slice(0, 80)}... after ${ms.toFixed(0)} ms`);
      expect(e0).toBeInstanceOf(PeerError);
      expect(ms).toBeLessThan(3000);
    });
  }, LONG);
});
