// ctas.ts — our GEMM on a balanced grid (gemm::balanced_ctas, its default) against every SM
// (config.maxCtas = the SM count) and cuBLASLt, one GPU, variants interleaved sample by sample, 2 ms of idle
// GPU before every sample (tp.ts's rest), ~1 ms back-to-back loops behind one untimed launch. Every
// variant's output is checked against cuBLAS's after timing. --ag also times the fused all-gather
// kernel on one rank (M x N x K: a [M, K], b [K, N]) as the planner sizes it, beside our GEMM.
//   bun bench/repro/ctas.ts [--samples 15] [--shapes MxNxK[t][@tile],...] [--configs JSON] [--ag MxNxK,...]
// A shape ending in t has b [N, K] (transB); otherwise b [K, N] as the tp ops use it. @256 / @128
// forces the tile width.
import { cublasLtGemmSync } from "../../lib/baselines/cublaslt.ts";
import { deviceInfo } from "../../lib/device.ts";
import { check, native } from "../../lib/native.ts";
import { gemmSync, type GemmConfig } from "../../lib/ops/gemm.ts";
import { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";
import { median, RankTiming } from "../support/rank-timing.ts";

const args = process.argv.slice(2);
const opt = (n: string, d: string) => (args.includes(n) ? args[args.indexOf(n) + 1]! : d);
// --configs '[{"tileN":256,"maxCtas":128},...]': our GEMM under these configs too (balanced).
const configs: GemmConfig[] = JSON.parse(opt("--configs", "[]"));
const SAMPLES = Number(opt("--samples", "15"));
const shapes = opt("--shapes", "8192x4096x8192,4096x4096x8192,8192x8192x4096,4096x14336x2048,1024x4096x8192,512x8192x4096@256,512x8192x4096,8192x8192x8192t")
  .split(",");

const s = Stream.create(0);
// tp.ts's protocol: 2 ms of idle GPU, then a loop behind one untimed launch
const timing = new RankTiming([s]);
timing.restMs = 2;
const SMS = deviceInfo(0).smCount;
type Variant = { name: string; issue: () => void };
const loopMs = (v: Variant, iters: number) => timing.loopMs(v.issue, iters);
const rel = (x: Tensor, ref: Tensor) => timing.relError(x, ref, 0);

for (const spec of shapes) {
  const [dims, tile] = spec.split("@");
  const transB = dims!.endsWith("t");
  const [m, n, k] = dims!.replace(/t$/, "").split("x").map(Number) as [number, number, number];
  const a = Tensor.empty([m, k], "bf16").fillRandom(1);
  const b = Tensor.empty(transB ? [n, k] : [k, n], "bf16").fillRandom(2);
  const ref = Tensor.empty([m, n], "bf16");
  const config: GemmConfig | undefined = tile ? { tileN: Number(tile) as 128 | 256 } : undefined;
  const grids: (GemmConfig | undefined)[] = [config, { ...config, maxCtas: SMS }];
  const outs = [...grids, ...configs].map(() => Tensor.empty([m, n], "bf16"));
  const variants: Variant[] = [
    { name: "cublas", issue: () => cublasLtGemmSync(a, b, ref, { transB, stream: s }) },
    ...grids.map((g, i) => ({
      name: i === 0 ? "balanced" : "every SM",
      issue: () => gemmSync(a, b, outs[i]!, { transB, stream: s, ...(g ? { config: g } : {}) }),
    })),
    ...configs.map((c, j) => ({
      name: JSON.stringify(c),
      issue: () => gemmSync(a, b, outs[grids.length + j]!, { transB, stream: s, config: c }),
    })),
  ];
  const iters = variants.map((v) => {
    const once = loopMs(v, 1);
    return Math.max(1, Math.min(200, Math.ceil(1.0 / Math.max(once, 1e-3))));
  });
  const times = variants.map(() => [] as number[]);
  for (let r = 0; r < SAMPLES; r++) variants.forEach((v, i) => times[i]!.push(loopMs(v, iters[i]!)));
  const errs = variants.slice(1).map((v, i) => {
    outs[i]!.fill(NaN);
    v.issue();
    variants[0]!.issue();
    s.synchronize();
    return rel(outs[i]!, ref);
  });
  const med = times.map(median);
  const row = {
    shape: spec,
    us: Object.fromEntries(variants.map((v, i) => [v.name, +(med[i]! * 1e3).toFixed(2)])),
    vsCublas: Object.fromEntries(variants.slice(1).map((v, i) => [v.name, +(med[i + 1]! / med[0]!).toFixed(4)])),
    vsFirst: Object.fromEntries(variants.slice(1).map((v, i) => [v.name, +(med[i + 1]! / med[1]!).toFixed(4)])),
    // min and max of the samples over their median: how much one launch varies from the next
    spread: Object.fromEntries(variants.map((v, i) => [v.name, [+(Math.min(...times[i]!) / med[i]!).toFixed(4), +(Math.max(...times[i]!) / med[i]!).toFixed(4)]])),
    rel: errs.map((e) => +e.toExponential(2)),
  };
  console.log(JSON.stringify(row));
  if (errs.some((e) => !(e < 1e-2))) console.log(`  BAD: ${spec} rel ${errs.join(", ")}`);
  [a, b, ref, ...outs].forEach((t) => t.dispose());
}

// The fused all-gather kernel on one rank: the same local GEMM through AgHooks.
const agShapes = opt("--ag", "").split(",").filter(Boolean);
if (agShapes.length > 0) {
  const { Communicator } = await import("../../lib/index.ts");
  const [comm] = await Communicator.local({ devices: [0], heapBytes: 2 ** 33 });
  for (const spec of agShapes) {
    const [m, n, k] = spec.split("x").map(Number) as [number, number, number];
    const a = Tensor.empty([m, k], "bf16", { device: 0 }).fillRandom(3);
    const b = Tensor.empty([k, n], "bf16", { device: 0 }).fillRandom(4);
    const ref = Tensor.empty([m, n], "bf16");
    const agOut = comm!.empty([m, n], "bf16");
    const made = [{ out: agOut, plan: comm!.allGatherGemm({ a, b, out: agOut, config: { path: "fused" } }) }];
    const cs = comm!.stream;
    const commTiming = new RankTiming([cs]);
    commTiming.restMs = 2;
    const loop = (issue: () => void, iters: number) => commTiming.loopMs(issue, iters);
    // Our plain GEMM of the same problem, interleaved with the plan.
    const plainOut = Tensor.empty([m, n], "bf16");
    const heapOut = comm!.empty([m, n], "bf16");
    const plain = [undefined, { maxCtas: SMS }, undefined].map((config, i) => () => {
      gemmSync(a, b, i < 2 ? plainOut : heapOut, { stream: cs, ...(config ? { config } : {}) });
    });
    // and with a completion published, as every plan's kernel does (tp-split's gemm+done)
    const { Completion } = await import("../../lib/completion.ts");
    const { packGemmParams, packOpLaunch, planGemm } = await import("../../lib/ops/gemm.ts");
    const completion = Completion.create(0, { slots: 64 });
    const donePlan = planGemm(a, b, plainOut, {}, "ctas");
    const doneParams = new Uint8Array(packGemmParams(donePlan, a, b, plainOut, cs));
    const doneLaunch = new Uint8Array(packOpLaunch(completion.slot()));
    // launch(), not runSync(): no host wait between launches (tp.ts launches the same way)
    const issues = [...made.map(({ plan }) => () => { plan.launch(); }), ...plain,
      () => { check(native().weft_gemm(doneParams, doneLaunch), "gemm+done"); }];
    const iters = issues.map((f) => Math.max(1, Math.ceil(1.0 / loop(f, 1))));
    const times = issues.map(() => [] as number[]);
    for (let r = 0; r < SAMPLES; r++) issues.forEach((f, i) => times[i]!.push(loop(f, iters[i]!)));
    cublasLtGemmSync(a, b, ref, { stream: cs });
    const errs = made.map(({ out, plan }) => { out.fill(NaN); plan.runSync(); cs.synchronize(); return rel(out, ref); });
    console.log(JSON.stringify({ ag: spec, gemmCtas: made.map((x) => x.plan.choice.gemmCtas),
      us: Object.fromEntries(["ag", "gemm", "gemm every SM", "gemm out in heap", "gemm+done"]
        .map((name, i) => [name, +(median(times[i]!) * 1e3).toFixed(2)])),
      ratio: +(median(times[0]!) / median(times[1]!)).toFixed(4),
      rel: errs.map((e) => +e.toExponential(2)) }));
    made.forEach(({ out, plan }) => { plan.dispose(); out.dispose(); });
    [a, b, ref, plainOut, heapOut, completion, commTiming].forEach((t) => t.dispose());
  }
  await Communicator.disposeAll([comm!]);
}
