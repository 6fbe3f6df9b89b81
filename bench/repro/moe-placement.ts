// moe-placement.ts — does world-1 dispatch + up's time follow where its memory lies (bench/DECISIONS.md,
// "The MoE layer's structure cost": config A's PULL dispatch + up moves by process, 1.44-2.00 ms, and
// decode's 0.26-0.37 ms, while the grouped GEMM stays within 0.5%)? In one process, per config:
//   x0 ws0, x0 ws1, x0 ws2   one x, three plans (three workspaces in the symmetric heap)
//   x1 ws3, x2 ws4           two more copies of x (other allocations), a plan each
//   grouped up               groupedGemm on the same group sizes (the bar's denominator)
// each a loop of ~LOOP ms behind one untimed launch, all alternating sample by sample; then each
// variant's host ms per enqueue (when that nears the GPU time, the loop measures the host) and one
// launch from an idle GPU (no lead). Routing is bench/moe.ts's (seeded), so the rows are the same.
//   bun bench/repro/moe-placement.ts [--configs decode,A] [--samples 12] [--loop-ms 2]
import { LocalStore } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { groupedGemmSync } from "../../lib/ops/grouped-gemm.ts";
import { Tensor } from "../../lib/tensor.ts";
import { makeRouting } from "../../test/support/moe-reference.ts";
import { median, RankTiming } from "../support/rank-timing.ts";

const args = process.argv.slice(2);
const opt = (n: string, d: string) => (args.includes(n) ? args[args.indexOf(n) + 1]! : d);
const CONFIGS = opt("--configs", "decode,A").split(",");
const SAMPLES = Number(opt("--samples", "12"));
const LOOP = Number(opt("--loop-ms", "2"));
const SHAPES: Record<string, { T: number; k: number; H: number; I: number; local: number }> = {
  A: { T: 4096, k: 8, H: 7168, I: 2048, local: 32 },
  B: { T: 16384, k: 4, H: 4096, I: 1536, local: 16 },
  decode: { T: 128, k: 8, H: 7168, I: 2048, local: 32 },
};

const [comm] = await Promise.all(LocalStore.group(1, { timeoutMs: 60_000 }).map((store) =>
  Communicator.create(store, { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1, nodeId: "repro" }, 0, { heapBytes: 12 * 2 ** 30 })));
const c = comm!;
for (const config of CONFIGS) {
  const s = SHAPES[config]!;
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T) => (made.push(t), t);
  const ids = keep(Tensor.from(makeRouting("uniform", s.T, s.local, s.k, 17), [s.T, s.k], "i32"));
  const weights = keep(Tensor.empty([s.T, s.k], "f32").fillRandom(3, 0.05, 1));
  const w1 = keep(Tensor.empty([s.local, s.I, s.H], "bf16").fillRandom(11, -0.02, 0.02));
  const xs = [1, 2, 3].map((seed) => keep(Tensor.empty([s.T, s.H], "bf16").fillRandom(seed)));
  const plan = (x: Tensor) => c.moeDispatchGemm({ x, topkIds: ids, topkWeights: weights, experts: s.local, w1, transW: true });
  const plans = [plan(xs[0]!), plan(xs[0]!), plan(xs[0]!), plan(xs[1]!), plan(xs[2]!)];
  const names = ["x0 ws0", "x0 ws1", "x0 ws2", "x1 ws3", "x2 ws4"];
  try {
    for (const p of plans) await p.run();
    const counts = plans[0]!.layout.expertCounts.download() as Int32Array;
    const offsets = new Int32Array(s.local + 1);
    counts.forEach((n, e) => (offsets[e + 1] = offsets[e]! + n));
    const rows = Math.max(1, offsets[s.local]!);
    const groupOffsets = keep(Tensor.from(offsets, [s.local + 1], "i32"));
    const a = keep(Tensor.empty([rows, s.H], "bf16").fillRandom(21));
    const h = keep(Tensor.empty([rows, s.I], "bf16"));
    const issues = [...plans.map((p) => () => p.enqueue()),
      () => groupedGemmSync({ a, b: w1, groupOffsets, out: h, transB: true, stream: c.stream })];
    const labels = [...names, "grouped up"];
    const timing = new RankTiming([c.stream]);
    timing.restMs = 2;
    const iters = issues.map((issue) => Math.max(1, Math.min(200, Math.ceil(LOOP / Math.max(timing.loopMs(issue, 1), 1e-3)))));
    const samples = issues.map(() => [] as number[]);
    for (let i = 0; i < SAMPLES; i++) issues.forEach((issue, j) => samples[j]!.push(timing.loopMs(issue, iters[j]!)));
    const host = issues.map((issue) => timing.hostMs(issue));
    timing.lead = false;
    const idle = issues.map((issue) => median([0, 1, 2, 3, 4].map(() => timing.loopMs(issue, 1))));
    const grouped = median(samples.at(-1)!);
    console.log(`## ${config} (rows ${rows}, iters ${iters.join("/")})`);
    console.log("| variant | loop ms (median) | min | max | / grouped | host ms per enqueue | one launch from idle ms |");
    console.log("|---|---:|---:|---:|---:|---:|---:|");
    labels.forEach((l, j) => {
      const m = median(samples[j]!);
      console.log(`| ${l} | ${m.toFixed(4)} | ${Math.min(...samples[j]!).toFixed(4)} | ${Math.max(...samples[j]!).toFixed(4)} | ` +
        `${(m / grouped).toFixed(3)} | ${host[j]!.toFixed(4)} | ${idle[j]!.toFixed(4)} |`);
    });
    timing.dispose();
  } finally {
    for (const p of plans.reverse()) p.dispose();
    for (const t of made.reverse()) t.dispose();
  }
}
await Communicator.disposeAll([c]);
