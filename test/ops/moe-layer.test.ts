// The MoE ops with expert GEMMs (comm.moeDispatchGemm, comm.moeGemmCombine, comm.moeLayer):
// validation on the CPU; on one GPU, worlds of 1 to 4 ranks sharing it (each a 1/W share of its
// SMs), every hidden row and every output element against fp32 references (test/support/
// moe-layer-checks.ts). The two-GPU runs of the same checks are in moe.test.ts.
//
// Ladder for a failure on the GPU host (each step needs the ones before it):
//   bun test test/ops/grouped-gemm.test.ts                     the grouped GEMM alone
//   bun test test/ops/moe-layer.test.ts -t "world 1"           dispatch + GEMM and GEMM + combine, no peers
//   bun test test/ops/moe-layer.test.ts -t "world 2, E 8"      pushes, arrival waits, routed stores
//   bun test test/ops/moe-layer.test.ts -t "back to back|graph"  epochs across launches and replays
import { describe, expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { validateDownWeights, validateExpertConfig, validateUpWeights } from "../../lib/ops/moe-gemm-validate.ts";
import { validateMoeDispatch } from "../../lib/ops/moe-validate.ts";
import { argError } from "../support/argument-error.ts";
import { describeGpu } from "../support/gpu.ts";
import { onOneGpu } from "../support/moe-checks.ts";
import { checkLayer, checkLayerGraph, checkLayerOverflow } from "../support/moe-layer-checks.ts";
import { evalArgv, runSync } from "../support/processes.ts";

const LONG = 900_000;
type Desc = { shape: number[]; dtype: "bf16" | "f32" | "i32"; device: number };
const t = (shape: number[], dtype: Desc["dtype"] = "bf16", device = 0): Desc => ({ shape, dtype, device });

describe("MoE expert GEMMs: validation (CPU)", () => {
  const d = validateMoeDispatch(2, 0, 132, { x: t([16, 1024]), topkIds: t([16, 2], "i32"), experts: 8 });
  test("w1: [E/W, H, N] or transposed, SwiGLU halves, I a multiple of 8", () => {
    expect(validateUpWeights(d, t([4, 1024, 512]), "swiglu", undefined, 0, "op")).toEqual({ inter: 256, swiglu: true, transW: false });
    expect(validateUpWeights(d, t([4, 512, 1024]), "none", true, 0, "op")).toEqual({ inter: 512, swiglu: false, transW: true });
    argError(() => validateUpWeights(d, t([8, 1024, 512]), "swiglu", false, 0, "op"), "w1", /8 experts but this rank owns E\/W = 4/);
    argError(() => validateUpWeights(d, t([4, 512, 1024]), "swiglu", false, 0, "op"), "w1", /H = 512, but x has H = 1024/);
    argError(() => validateUpWeights(d, t([4, 1024, 12]), "none", false, 0, "op"), "w1", /I = 12/);
    argError(() => validateUpWeights(d, t([4, 1024, 512], "f32"), "none", false, 0, "op"), "w1", /bf16/);
    argError(() => validateUpWeights(d, t([4, 1024, 512]), "gelu", false, 0, "op"), "activation", /"none" or "swiglu"/);
    argError(() => validateUpWeights(d, t([4, 1024, 512], "bf16", 1), "none", false, 0, "op"), "w1", /device 1/);
  });
  test("hidden and w2: [capacity, I] and [E/W, I, H] or transposed", () => {
    expect(validateDownWeights(d, 1024, t([1024, 256]), t([4, 256, 1024]), false, 0, "op")).toEqual({ inter: 256, transW: false });
    expect(validateDownWeights(d, 1024, t([1024, 256]), t([4, 1024, 256]), true, 0, "op")).toEqual({ inter: 256, transW: true });
    argError(() => validateDownWeights(d, 1024, t([896, 256]), t([4, 256, 1024]), false, 0, "op"), "hidden", /capacity/);
    argError(() => validateDownWeights(d, 1024, t([1024, 256]), t([4, 1024, 256]), false, 0, "op"), "w2", /must be \[4, 256, 1024\]/);
    argError(() => validateDownWeights(d, 1024, t([1024, 20]), t([4, 20, 1024]), false, 0, "op"), "hidden", /multiple of 8/);
  });
  test("config: ctas, tileN, mover", () => {
    expect(validateExpertConfig({ ctas: 8, tileN: 128, mover: "push" }, 132, "op", true)).toEqual({ ctas: 8, tileN: 128, mover: 1 });
    expect(validateExpertConfig(undefined, 132, "op", true)).toEqual({ ctas: 0, tileN: 0, mover: 0 });
    argError(() => validateExpertConfig({ mover: "push" }, 132, "op", false), "config.mover", /not a config field/);
    argError(() => validateExpertConfig({ mover: "ce" }, 132, "op", true), "config.mover", /"push" or "pull"/);
    argError(() => validateExpertConfig({ tileN: 64 }, 132, "op", true), "config.tileN", /128 or 256/);
    argError(() => validateExpertConfig({ ctas: 200 }, 132, "op", true), "config.ctas", /\[1, 132\]/);
  });
});

describeGpu("MoE layer (dispatch + GEMM, GEMM + combine), 1 to 4 ranks on one GPU", 1, () => {
  const E = (W: number, base: number) => (W === 3 ? (base === 8 ? 12 : 48) : base);
  for (const world of [1, 2, 3, 4]) {
    test(`world ${world}, E ${E(world, 8)} k 2 H 1024 I 512: uniform and skewed, T 0/1/7/128 per rank`, () =>
      onOneGpu(world, 1 << 30, async (ctx) => {
        const Ts = [128, 7, 0, 1];
        const a = await checkLayer(ctx, { experts: E(world, 8), topk: 2, hidden: 1024, inter: 512, tokens: (q) => Ts[q % 4]!, routing: "uniform", tag: 70 + world });
        const b = await checkLayer(ctx, { experts: E(world, 8), topk: 2, hidden: 1024, inter: 512, tokens: (q) => Ts[(q + 1) % 4]!, routing: "skewed", tag: 80 + world });
        return `${a}\n    ${b}`;
      }), LONG);
  }
  for (const world of [1, 2]) {
    test(`world ${world}, E 16 k 4: push and pull, both weight layouts, tiles 128 and 256, SwiGLU and none`, () =>
      onOneGpu(world, 1 << 30, async (ctx) => {
        const lines: string[] = [];
        let tag = 90 + 10 * world;
        for (const mover of ["push", "pull"] as const) {
          for (const transW of [false, true]) {
            for (const tileN of [128, 256] as const) {
              for (const activation of ["swiglu", "none"] as const) {
                lines.push(await checkLayer(ctx, { experts: 16, topk: 4, hidden: 512, inter: 192, tokens: (q) => 300 - 100 * q, routing: "skewed",
                  tag: tag++, mover, transW, tileN, activation }));
              }
            }
          }
        }
        return lines.join("\n    ");
      }), LONG);
  }
  // The PULL mover's cp.async gather (cuda/moe/gathered_rows.cuh): the cost model's pick at world 1,
  // forced at world 2 (own rows from x, the peer's from the receive buffer in the same tiles); k 8 of
  // 16 with skewed routing (a third of the experts empty, one expert with 70% of the tokens, the rest
  // ragged), H 1000 (a last k-block of 40 columns: the gather's zero-filled chunks), 100 runs back to
  // back with the routing changed every run.
  for (const world of [1, 2]) {
    test(`world ${world}, pull (${world === 1 ? "auto" : "forced"}): E 16 k 8 H 1000 I 192, skewed, T 300/200, 100 back-to-back runs`, () =>
      onOneGpu(world, 1 << 30, (ctx) => checkLayer(ctx, { experts: 16, topk: 8, hidden: 1000, inter: 192, tokens: (q) => 300 - 100 * q,
        routing: "skewed", tag: 150 + world, mover: world === 1 ? undefined : "pull", expectMover: "pull" }, 100)), LONG);
  }
  test("world 2, E 64 k 8 H 7168 I 2048 T 128 (decode), skewed", () => onOneGpu(2, 3 * 2 ** 30, (ctx) =>
    checkLayer(ctx, { experts: 64, topk: 8, hidden: 7168, inter: 2048, tokens: () => 128, routing: "skewed", tag: 120 })), LONG);
  test("world 1, config A per rank: E 32 k 8 H 7168 I 2048 T 4096, skewed (pull, the cost model's pick)", () => onOneGpu(1, 4 * 2 ** 30, (ctx) =>
    checkLayer(ctx, { experts: 32, topk: 8, hidden: 7168, inter: 2048, tokens: () => 4096, routing: "skewed", tag: 121, expectMover: "pull" })), LONG);
  test("world 4, E 32 k 4 H 2048 I 1024 T 1024, skewed (four ranks' buffers on one GPU)", () => onOneGpu(4, 2 * 2 ** 30, (ctx) =>
    checkLayer(ctx, { experts: 32, topk: 4, hidden: 2048, inter: 1024, tokens: () => 1024, routing: "skewed", tag: 122 })), LONG);
  for (const world of [2, 3]) {
    test(`world ${world}: 100 back-to-back layer runs, the routing changed every run, every result checked`, () =>
      onOneGpu(world, 1 << 30, (ctx) => checkLayer(ctx, { experts: 6 * world, topk: 4, hidden: 256, inter: 128, tokens: (q) => 64 + 64 * q,
        routing: "skewed", tag: 130 + world }, 100)), LONG);
  }
  for (const world of [1, 2]) {
    test(`world ${world}: the layer as a CUDA graph, captured once, replayed with new routing, each checked`, () =>
      onOneGpu(world, 1 << 30, (ctx) => checkLayerGraph(ctx, { experts: 16, topk: 2, hidden: 1024, inter: 256, tokens: () => 128,
        routing: "uniform", tag: 140 + world }, 5)), LONG);
  }
  for (const world of [1, 2]) {
    test(`world ${world}: a capacity overflow fails with an ArgumentError, then a good run`, () =>
      onOneGpu(world, 1 << 30, (ctx) => checkLayerOverflow(ctx)), LONG);
  }
  // In a fresh process (no MoE kernel loaded yet), plans made rank by rank, as one process driving
  // both ranks makes them: rank 0's SwiGLU layer comes after its plain dispatch + GEMM, whose setup
  // barrier already spins on the device for rank 1. Loading the layer's kernels then would wait for
  // the device to go idle, which the barrier never lets it do (cuda/moe/moe.h, preload_kernels): the
  // first plan must have loaded every variant. The other tests here cannot see it: by the time they
  // make world-2 plans, the world-1 tests have loaded every kernel.
  test("world 2, a fresh process: plans made rank by rank load no kernel under a peer's barrier", () => {
    const script = `
      import { onOneGpu } from "./test/support/moe-checks.ts";
      import { Tensor } from "./lib/tensor.ts";
      try {
        await onOneGpu(2, 1 << 30, async ({ comms }) => {
          const T = 64, H = 512, I = 256, E = 8, k = 2, local = E / 2, made = [], plans = [];
          const keep = (t) => (made.push(t), t);
          try {
            for (const c of comms) {
              const device = c.device;
              const x = keep(Tensor.empty([T, H], "bf16", { device }).fillRandom(1 + c.rank));
              const ids = keep(Tensor.from(Int32Array.from({ length: T * k }, (_, i) => (Math.floor(i / k) + 3 * (i % k)) % E), [T, k], "i32", { device }));
              const weights = keep(Tensor.from(new Float32Array(T * k).fill(0.5), [T, k], "f32", { device }));
              const w1 = keep(Tensor.empty([local, H, I], "bf16", { device }).fillRandom(11, -0.05, 0.05));
              const w13 = keep(Tensor.empty([local, H, 2 * I], "bf16", { device }).fillRandom(12, -0.05, 0.05));
              const w2 = keep(Tensor.empty([local, I, H], "bf16", { device }).fillRandom(13, -0.05, 0.05));
              const out = keep(Tensor.empty([T, H], "bf16", { device }));
              plans.push(c.moeDispatchGemm({ x, topkIds: ids, topkWeights: weights, experts: E, w1, config: { mover: "push" } }));
              plans.push(c.moeLayer({ x, topkIds: ids, topkWeights: weights, experts: E, w1: w13, w2, out, activation: "swiglu", config: { up: { mover: "push" } } }));
            }
            await Promise.all([plans[0].run(), plans[2].run()]);
            await Promise.all([plans[1].run(), plans[3].run()]);
            return "made and ran";
          } finally {
            for (const p of plans.reverse()) p.dispose();
            for (const t of made.reverse()) t.dispose();
          }
        });
        console.log(JSON.stringify({ ok: true }));
      } catch (e) {
        console.log(JSON.stringify({ name: e.name, message: e.message }));
      }`;
    const r = runSync(evalArgv(script), { cwd: join(import.meta.dirname, "..", ".."), env: { ...process.env, WEFT_COMM_TIMEOUT_MS: "3000" } });
    const last = r.stdout.trim().split("\n").at(-1) ?? "";
    expect({ last, stderr: last.startsWith("{") ? "" : r.stderr.slice(-2000) }).toEqual({ last: JSON.stringify({ ok: true }), stderr: "" });
  }, LONG);
});
