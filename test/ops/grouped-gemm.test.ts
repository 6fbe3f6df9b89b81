// groupedGemm(): validation on the CPU, then on a GPU against a per-group fp32 reference (CUDA-core
// loops over each group's rows, weft_moe_reference_rows_gemm), every element, out poisoned with NaN
// before each run, rows in no group checked to keep the poison.
import { describe, expect, test } from "../support/test-api.ts";

import { ArgumentError } from "../../lib/errors.ts";
import { groupedGemm, groupedGemmConfigFor, groupedGemmSync, planGroupedGemm, type GroupedGemmDesc } from "../../lib/ops/grouped-gemm.ts";
import type { TensorDesc } from "../../lib/ops/gemm.ts";
import { Tensor } from "../../lib/tensor.ts";
import { argError } from "../support/argument-error.ts";
import { deviceErrorAsync, readErrors } from "../support/gemm.ts";
import { describeGpu } from "../support/gpu.ts";
import { rowsGemm, rowsOf } from "../support/moe-reference.ts";

const d = (shape: number[], dtype: TensorDesc["dtype"] = "bf16", device = 0): TensorDesc => ({ shape, dtype, device });

describe("groupedGemm validation (CPU)", () => {
  const ok: GroupedGemmDesc = { a: d([100, 64]), b: d([4, 64, 48]), groupOffsets: d([5], "i32"), out: d([100, 48]) };
  test("shapes from the tensors, both B layouts", () => {
    expect(planGroupedGemm(ok)).toEqual({ device: 0, m: 100, n: 48, k: 64, groups: 4, transB: false, tileN: 0, maxCtas: 0 });
    expect(planGroupedGemm({ ...ok, b: d([4, 48, 64]), transB: true, config: { tileN: 128, maxCtas: 7 } }))
      .toMatchObject({ n: 48, k: 64, transB: true, tileN: 128, maxCtas: 7 });
  });
  test("every rule names its argument", () => {
    expect(argError(() => planGroupedGemm({ ...ok, a: d([100, 64], "f32") }), "a")).toContain("must be bf16");
    expect(argError(() => planGroupedGemm({ ...ok, b: d([64, 48]) }), "b")).toContain("3-D");
    expect(argError(() => planGroupedGemm({ ...ok, b: d([4, 32, 48]) }), "b")).toContain("K = 32");
    expect(argError(() => planGroupedGemm({ ...ok, b: d([4, 48, 64]) }), "b")).toContain("[G, K, N]");
    expect(argError(() => planGroupedGemm({ ...ok, out: d([100, 40]) }), "out")).toContain("[100, 48]");
    expect(argError(() => planGroupedGemm({ ...ok, groupOffsets: d([4], "i32") }), "groupOffsets")).toContain("groups + 1 = 5");
    expect(argError(() => planGroupedGemm({ ...ok, groupOffsets: d([5], "f32") }), "groupOffsets")).toContain("must be i32");
    expect(argError(() => planGroupedGemm({ ...ok, groupOffsets: d([5], "i32", 1) }), "groupOffsets")).toContain("device 1");
    expect(argError(() => planGroupedGemm({ ...ok, a: d([100, 60]), b: d([4, 60, 48]) }), "a")).toContain("multiple of 16 bytes");
    expect(argError(() => planGroupedGemm({ ...ok, b: d([4, 64, 44]), out: d([100, 44]) }), "out")).toContain("multiples of 8");
    expect(argError(() => planGroupedGemm({ ...ok, b: d([4097, 64, 48]), groupOffsets: d([4098], "i32") }), "b")).toContain("at most 4096");
    expect(argError(() => planGroupedGemm({ ...ok, config: { tileN: 64 as never } }), "config.tileN")).toContain("128 or 256");
    expect(argError(() => planGroupedGemm({ ...ok, config: { maxCtas: 0 } }), "config.maxCtas")).toContain("positive integer");
    expect(argError(() => planGroupedGemm({ ...ok, transB: 1 as never }), "transB")).toContain("boolean");
    expect(argError(() => planGroupedGemm({ ...ok, offs: 1 } as never), "offs")).toContain("not a groupedGemm argument");
  });
});

interface Case {
  sizes: number[];
  k: number;
  n: number;
  transB: boolean;
  tileN?: 128 | 256;
  /** Rows before the first group and after the last (left out of every group). */
  lead?: number;
  tail?: number;
}

/** Runs one case `runs` times (new offsets each run when `shuffle`), checks every element. */
async function check(c: Case, runs = 1): Promise<string> {
  const lead = c.lead ?? 0, tail = c.tail ?? 0;
  const G = c.sizes.length;
  const m = lead + c.sizes.reduce((s, x) => s + x, 0) + tail;
  using a = Tensor.empty([m, c.k], "bf16").fillRandom(m * 7 + c.k);
  using b = Tensor.empty(c.transB ? [G, c.n, c.k] : [G, c.k, c.n], "bf16").fillRandom(G * 13 + c.n, -0.1, 0.1);
  using out = Tensor.empty([m, c.n], "bf16");
  using ref = Tensor.empty([m, c.n], "f32");
  using scratch = Tensor.empty([18], "f32"); // three slots of 3 doubles
  let worst = 0;
  for (let run = 0; run < runs; run++) {
    // Run r rotates the sizes: the same rows, different group boundaries, nothing reset between.
    const sizes = c.sizes.map((_, g) => c.sizes[(g + run) % G]!);
    const offsets = new Int32Array(G + 1);
    offsets[0] = lead;
    sizes.forEach((s, g) => (offsets[g + 1] = offsets[g]! + s));
    using groupOffsets = Tensor.from(offsets, [G + 1], "i32");
    for (let g = 0; g < G; g++) {
      if (sizes[g] === 0) continue;
      using ag = rowsOf(a, offsets[g]!, sizes[g]!), rg = rowsOf(ref, offsets[g]!, sizes[g]!);
      rowsGemm(ag, null, { ptr: b.ptr + g * c.k * c.n * 2, ld: c.transB ? c.k : c.n, nk: c.transB }, rg, null, sizes[g]!, c.n, c.k);
    }
    out.fill(Number.NaN);
    await groupedGemm({ a, b, groupOffsets, out, transB: c.transB, config: c.tileN ? { tileN: c.tileN } : undefined });
    const covered = offsets[G]! - lead;
    if (covered > 0) {
      using o = rowsOf(out, lead, covered), r = rowsOf(ref, lead, covered);
      deviceErrorAsync(o, r, scratch, 0);
    }
    for (const [row0, rows, slot] of [[0, lead, 1], [m - tail, tail, 2]] as const) {
      if (rows === 0) continue;
      using o = rowsOf(out, row0, rows), r = rowsOf(ref, row0, rows);
      deviceErrorAsync(o, r, scratch, slot);
    }
    const [e, before, after] = readErrors(scratch, 3);
    if (covered > 0) {
      if (e!.nonFinite !== 0) throw new Error(`run ${run}: ${e!.nonFinite} outputs of the groups not written (NaN poison left)`);
      if (!(e!.rel <= 1e-2)) throw new Error(`run ${run}: relative error ${e!.rel} > 1e-2`);
      worst = Math.max(worst, e!.rel);
    }
    if (lead > 0 && before!.nonFinite !== lead * c.n) throw new Error(`run ${run}: rows before the first group were written`);
    if (tail > 0 && after!.nonFinite !== tail * c.n) throw new Error(`run ${run}: rows after the last group were written`);
  }
  return `sizes ${c.sizes.join("/")} K ${c.k} N ${c.n}${c.transB ? " [G, N, K]" : " [G, K, N]"} tile ${c.tileN ?? "auto"}: ${runs} run(s), worst rel ${worst.toExponential(2)}`;
}

describeGpu("groupedGemm on one GPU (against the per-group fp32 reference, every element)", 1, () => {
  const ragged = [0, 1, 127, 128, 1000];
  for (const transB of [false, true]) {
    for (const tileN of [undefined, 128, 256] as const) {
      test(`ragged groups 0/1/127/128/1000, ${transB ? "[G, N, K]" : "[G, K, N]"}, tile ${tileN ?? "auto"}`, async () => {
        console.log(`  ${await check({ sizes: ragged, k: 512, n: 384, transB, tileN }, 5)}`);
      }, 120_000);
    }
    test(`K and N tails (K 1000, N 200), rows outside every group untouched, ${transB ? "[G, N, K]" : "[G, K, N]"}`, async () => {
      console.log(`  ${await check({ sizes: [300, 0, 0, 77, 129], k: 1000, n: 200, transB, lead: 45, tail: 130 })}`);
      console.log(`  ${await check({ sizes: [5], k: 8, n: 8, transB, lead: 3, tail: 2 })}`);
    }, 120_000);
  }
  test("many groups, mostly small or empty (64 groups), and one group of everything", async () => {
    const sizes = Array.from({ length: 64 }, (_, g) => (g % 3 === 2 ? 0 : (g * 37) % 150));
    console.log(`  ${await check({ sizes, k: 256, n: 512, transB: true }, 3)}`);
    console.log(`  ${await check({ sizes: [0, 0, 4096, 0], k: 1024, n: 1024, transB: false })}`);
  }, 120_000);
  test("config A's up-projection shape (32 groups of 1024 rows, K 7168, N 2048), [G, N, K]", async () => {
    console.log(`  ${await check({ sizes: Array.from({ length: 32 }, (_, g) => 896 + (g * 61) % 256), k: 7168, n: 2048, transB: true })}`);
  }, 300_000);
  test("offsets that decrease or leave [0, M] reject with an ArgumentError naming groupOffsets; nothing outside out is written", async () => {
    using a = Tensor.empty([256, 64], "bf16").fillRandom(1);
    using b = Tensor.empty([3, 64, 64], "bf16").fillRandom(2);
    using out = Tensor.empty([256, 64], "bf16");
    for (const bad of [[0, 100, 50, 256], [0, 100, 200, 300], [-5, 10, 20, 30]]) {
      using groupOffsets = Tensor.from(Int32Array.from(bad), [4], "i32");
      let err: unknown;
      try {
        await groupedGemm({ a, b, groupOffsets, out });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ArgumentError);
      expect((err as ArgumentError).argument).toBe("groupOffsets");
    }
    // The same plan keeps working after the failures.
    using good = Tensor.from(Int32Array.from([0, 100, 200, 256]), [4], "i32");
    groupedGemmSync({ a, b, groupOffsets: good, out });
    await groupedGemm({ a, b, groupOffsets: good, out });
  }, 120_000);
  test("the configuration choice: 256-wide tiles for large groups, 128 for narrow problems", () => {
    using a = Tensor.empty([32768, 512], "bf16");
    using b = Tensor.empty([32, 512, 2048], "bf16");
    using groupOffsets = Tensor.empty([33], "i32");
    using out = Tensor.empty([32768, 2048], "bf16");
    expect(groupedGemmConfigFor({ a, b, groupOffsets, out }).tileN).toBe(256);
    using a2 = Tensor.empty([256, 512], "bf16"), o2 = Tensor.empty([256, 2048], "bf16");
    expect(groupedGemmConfigFor({ a: a2, b, groupOffsets, out: o2 }).tileN).toBe(128);
  });
});
