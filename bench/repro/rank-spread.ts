// rank-spread.ts — why our GEMM varies more than cuBLAS's in bench/tp.ts, where each sample is the
// slower rank's (bench/DECISIONS.md, "Our GEMM's slow launches with two GPUs busy"): each GPU's own time per sample, for our GEMM and
// cuBLASLt alternating, with both GPUs running at once (as in tp.ts) and with one GPU at a time.
// Loops of ~1 ms behind one untimed launch, 2 ms of idle GPU before each (tp.ts's protocol).
//   bun bench/repro/rank-spread.ts [--samples 40] [--shapes 8192x4096x8192,...]
import { cublasLtGemmSync } from "../../lib/baselines/cublaslt.ts";
import { deviceCount } from "../../lib/device.ts";
import { gemmSync } from "../../lib/ops/gemm.ts";
import { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";
import { median, RankTiming } from "../support/rank-timing.ts";

const args = process.argv.slice(2);
const opt = (n: string, d: string) => (args.includes(n) ? args[args.indexOf(n) + 1]! : d);
const SAMPLES = Number(opt("--samples", "40"));
const shapes = opt("--shapes", "8192x4096x8192,4096x14336x2048").split(",");
const gpus = Array.from({ length: Math.min(2, deviceCount()) }, (_, g) => g);
const streams = gpus.map((g) => Stream.create(g));
// settings: both GPUs at once, then each alone; each a RankTiming over its GPUs' streams
const settings = [gpus, ...(gpus.length > 1 ? gpus.map((g) => [g]) : [])].map((on) => {
  const timing = new RankTiming(on.map((g) => streams[g]!));
  timing.restMs = 2;
  return { on, timing };
});

// ms per launch on each GPU in `on`, over a loop of `iters` launches behind one untimed launch.
const loop = (issue: (g: number) => void, { on, timing }: (typeof settings)[number], iters: number) =>
  timing.loopMsPerRank(() => on.forEach((g) => issue(g)), iters);

const stats = (xs: number[]) => {
  const m = median(xs);
  return { med: +(m * 1e3).toFixed(2), min: +(Math.min(...xs) / m).toFixed(4), max: +(Math.max(...xs) / m).toFixed(4) };
};

for (const spec of shapes) {
  const [m, n, k] = spec.split("x").map(Number) as [number, number, number];
  const data = gpus.map((g) => ({
    a: Tensor.empty([m, k], "bf16", { device: g }).fillRandom(1 + g),
    b: Tensor.empty([k, n], "bf16", { device: g }).fillRandom(3 + g),
    ours: Tensor.empty([m, n], "bf16", { device: g }),
    theirs: Tensor.empty([m, n], "bf16", { device: g }),
  }));
  const variants = {
    ours: (g: number) => gemmSync(data[g]!.a, data[g]!.b, data[g]!.ours, { stream: streams[g] }),
    cublas: (g: number) => cublasLtGemmSync(data[g]!.a, data[g]!.b, data[g]!.theirs, { stream: streams[g] }),
  };
  const iters = Math.max(1, Math.ceil(1.0 / loop(variants.ours, settings.at(-1)!, 1)[0]!));
  const times: Record<string, number[]> = {};
  for (let s = 0; s < SAMPLES; s++) {
    for (const setting of settings) {
      const { on } = setting;
      for (const [name, issue] of Object.entries(variants)) {
        const perGpu = loop(issue, setting, iters);
        perGpu.forEach((t, i) => (times[`${name} gpu${on[i]}${on.length > 1 ? " (both busy)" : " (alone)"}`] ??= []).push(t));
        if (on.length > 1) (times[`${name} slower of both`] ??= []).push(Math.max(...perGpu));
      }
    }
  }
  console.log(JSON.stringify({ shape: spec, iters, us: Object.fromEntries(Object.entries(times).map(([key, xs]) => [key, stats(xs)])) }));
  data.forEach((d) => Object.values(d).forEach((t) => t.dispose()));
}
