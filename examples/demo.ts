// The README's first command ends here: `npm install && npm run demo`.
// It prints what weft sees on this machine, then runs the main job on every local GPU: a
// tensor-parallel MLP's two GEMMs (all-gather + GEMM going in, GEMM + reduce-scatter coming out)
// as fused persistent kernels, checks them against an fp32 reference, and times them beside our
// own unfused sequence (GEMM and collective one after the other).
import {
  Communicator, deviceCount, Event, formatInfo, runtimeInfo, Tensor, TpPlan, WeftError,
} from "../lib/index.ts";
import { check, native } from "../lib/native.ts";

// A 70B-class MLP at 4096 tokens: hidden 8192, feed-forward 28672, split over the GPUs.
const TOKENS = 4096;
const HIDDEN = 8192;
const FFN = 28672;

/** ref (f32 [m, n]) = a · b on CUDA cores (weft's deliberately simple reference kernel). */
function reference(a: Tensor, b: Tensor, ref: Tensor, m: number, n: number, k: number): void {
  check(native().weft_reference_gemm(a.ptr, b.ptr, ref.ptr, m, n, k, a.shape[1]!, b.shape[1]!, ref.shape[1]!, 0, null), "reference");
}

/** ‖x − ref‖ / ‖ref‖ over all elements, on the GPU (NaN if any x is not finite). */
function relError(x: Tensor, ref: Tensor): number {
  using out = Tensor.empty([6], "f32", { device: x.device });
  check(native().weft_diff_norms(x.ptr, 0, ref.ptr, 2, x.numel, out.ptr, null), "relError");
  const d = new Float64Array((out.download() as Float32Array).buffer, 0, 3);
  return d[2]! > 0 ? NaN : Math.sqrt(d[0]!) / Math.sqrt(d[1]!);
}

/** ms per run of `plans` (one per GPU), the slowest GPU, over 10 back-to-back runs. */
function time(plans: TpPlan[]): number {
  const ev = plans.map((p) => [Event.create(p.comm.device), Event.create(p.comm.device)] as const);
  try {
    // Launch on every GPU, then wait: each rank's kernel waits for the others' data.
    const warm = TpPlan.launchAll(plans);
    plans.forEach((p, i) => p.wait(warm[i]!));
    plans.forEach((p, i) => ev[i]![0].record(p.comm.stream));
    for (let i = 0; i < 10; i++) TpPlan.launchAll(plans);
    plans.forEach((p, i) => ev[i]![1].record(p.comm.stream));
    ev.forEach(([, e]) => e.synchronize());
    return Math.max(...ev.map(([a, b]) => b.elapsedSince(a))) / 10;
  } finally {
    ev.flat().forEach((e) => e.dispose());
  }
}

async function allGatherGemm(comms: Communicator[]): Promise<boolean> {
  const W = comms.length;
  const [M, K, n] = [TOKENS, HIDDEN, FFN / W];
  const shard = M / W;
  const owned: { dispose(): void }[] = [];
  const keep = <T extends { dispose(): void }>(t: T) => (owned.push(t), t);
  try {
    const a = comms.map((c) => keep(Tensor.empty([shard, K], "bf16", { device: c.device }).fillRandom(100 + c.rank)));
    const b = comms.map((c) => keep(Tensor.empty([K, n], "bf16", { device: c.device }).fillRandom(200 + c.rank)));
    const out = comms.map((c) => keep(Tensor.empty([M, n], "bf16", { device: c.device }).fill(NaN)));
    const fused = comms.map((c, r) => keep(c.allGatherGemm({ a: a[r]!, b: b[r]!, out: out[r]!, config: { path: "fused" } })));
    const unfused = comms.map((c, r) => keep(c.allGatherGemm({ a: a[r]!, b: b[r]!, out: out[r]!, config: { path: "sequential" } })));
    await TpPlan.runAll(fused);
    let worst = 0;
    for (const c of comms) {
      // Every rank's rows of A, rebuilt from the same seeds, times this rank's columns of B.
      using full = Tensor.empty([M, K], "bf16", { device: c.device });
      for (let q = 0; q < W; q++) Tensor.wrap(full.ptr + q * shard * K * 2, [shard, K], "bf16", c.device).fillRandom(100 + q);
      using ref = Tensor.empty([M, n], "f32", { device: c.device });
      reference(full, b[c.rank]!, ref, M, n, K);
      worst = Math.max(worst, relError(out[c.rank]!, ref));
    }
    const tf = time(fused), tu = time(unfused);
    const ok = worst <= 1e-2;
    console.log(`all-gather + GEMM  (M ${M}, N ${FFN}, K ${K}) on ${W} GPU${W > 1 ? "s" : ""}: rel error ${worst.toExponential(2)} ${ok ? "ok" : "FAILED"}; ` +
      `fused ${tf.toFixed(3)} ms (${fused[0]!.choice.mover === "copyEngine" ? "copy engines move A" : "CTAs move A"}), unfused ${tu.toFixed(3)} ms: ${(tu / tf).toFixed(2)}x`);
    return ok;
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}

async function gemmReduceScatter(comms: Communicator[]): Promise<boolean> {
  const W = comms.length;
  const [M, k, N] = [TOKENS, FFN / W, HIDDEN];
  const shard = M / W;
  const owned: { dispose(): void }[] = [];
  const keep = <T extends { dispose(): void }>(t: T) => (owned.push(t), t);
  try {
    const a = comms.map((c) => keep(Tensor.empty([M, k], "bf16", { device: c.device }).fillRandom(300 + c.rank)));
    const b = comms.map((c) => keep(Tensor.empty([k, N], "bf16", { device: c.device }).fillRandom(400 + c.rank)));
    const out = comms.map((c) => keep(c.empty([shard, N], "bf16").fill(NaN)));
    const fused = comms.map((c, r) => keep(c.gemmReduceScatter({ a: a[r]!, b: b[r]!, out: out[r]!, config: { path: "fused" } })));
    const unfused = comms.map((c, r) => keep(c.gemmReduceScatter({ a: a[r]!, b: b[r]!, out: out[r]!, config: { path: "sequential" } })));
    await TpPlan.runAll(fused);
    let worst = 0;
    for (const c of comms) {
      // Σ over ranks q of (q's a, rows this rank owns) · (q's b), in fp32.
      using ref = Tensor.empty([shard, N], "f32", { device: c.device }).fill(0);
      using part = Tensor.empty([shard, N], "f32", { device: c.device });
      for (let q = 0; q < W; q++) {
        using aq = Tensor.empty([M, k], "bf16", { device: c.device }).fillRandom(300 + q);
        using bq = Tensor.empty([k, N], "bf16", { device: c.device }).fillRandom(400 + q);
        const rows = Tensor.wrap(aq.ptr + c.rank * shard * k * 2, [shard, k], "bf16", c.device);
        reference(rows, bq, part, shard, N, k);
        check(native().weft_accumulate(ref.ptr, part.ptr, 2, ref.numel, null), "accumulate");
      }
      worst = Math.max(worst, relError(out[c.rank]!, ref));
    }
    const tf = time(fused), tu = time(unfused);
    const ok = worst <= 1e-2;
    console.log(`GEMM + reduce-scatter (M ${M}, N ${N}, K ${FFN}) on ${W} GPU${W > 1 ? "s" : ""}: rel error ${worst.toExponential(2)} ${ok ? "ok" : "FAILED"}; ` +
      `fused ${tf.toFixed(3)} ms, unfused ${tu.toFixed(3)} ms: ${(tu / tf).toFixed(2)}x`);
    return ok;
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}

async function main(): Promise<number> {
  let info;
  try {
    info = runtimeInfo();
  } catch (e) {
    if (e instanceof WeftError) {
      console.error(`weft: ${e.message}`);
      return 1;
    }
    throw e;
  }
  console.log(formatInfo(info));
  console.log();
  const n = deviceCount();
  if (n === 0) {
    console.log("demo: no GPU on this machine, so there is nothing to run. The same command on a GPU host runs the fused tensor-parallel ops on every GPU.");
    return 0;
  }
  const supported = [1, 2, 4, 8].filter((w) => w <= n).at(-1)!;  // the MLP shape splits evenly over 1, 2, 4 or 8 GPUs
  const comms = await Communicator.local({ devices: [...Array(supported).keys()], heapBytes: 1 << 30 });
  try {
    const ok = [await allGatherGemm(comms), await gemmReduceScatter(comms)];
    return ok.every(Boolean) ? 0 : 1;
  } finally {
    await Communicator.disposeAll(comms);
  }
}

process.exitCode = await main();
