// gemm(): validation on the CPU, then correctness on a GPU against fp32/fp64 references.
import { describe, expect, test } from "../support/test-api.ts";

import { cublasLtAvailable } from "../../lib/baselines/cublaslt.ts";
import { ArgumentError } from "../../lib/errors.ts";
import { Completion } from "../../lib/completion.ts";
import { check, native, outPointer } from "../../lib/native.ts";
import {
  gemm, gemmConfigFor, gemmSync, packGemmParams, packOpLaunch, planGemm, type GemmConfig, type GemmOptions, type TensorDesc,
} from "../../lib/ops/gemm.ts";
import { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";
import { argError } from "../support/argument-error.ts";
import { describeGpu } from "../support/gpu.ts";
import { cpuGemm, deviceError, deviceErrorAsync, readErrors, referenceGemm } from "../support/gemm.ts";

const bf16 = (shape: number[], device = 0): TensorDesc => ({ shape, dtype: "bf16", device });
const f32 = (shape: number[], device = 0): TensorDesc => ({ shape, dtype: "f32", device });

describe("gemm validation (CPU: checked before anything reaches the GPU)", () => {
  test("shapes from the tensors, both B layouts", () => {
    const p = planGemm(bf16([64, 32]), bf16([32, 48]), bf16([64, 48]));
    expect(p).toMatchObject({ m: 64, n: 48, k: 32, lda: 32, ldb: 48, ldc: 48, flags: 0 });
    const t = planGemm(bf16([64, 32]), bf16([48, 32]), f32([64, 48]), { transB: true });
    expect(t).toMatchObject({ m: 64, n: 48, k: 32, lda: 32, ldb: 32, ldc: 48, flags: 3 });
  });

  test("dtypes, ranks and devices", () => {
    expect(argError(() => planGemm(f32([8, 8]), bf16([8, 8]), bf16([8, 8])), "a")).toContain("must be bf16");
    expect(argError(() => planGemm(bf16([8, 8]), f32([8, 8]), bf16([8, 8])), "b")).toContain("must be bf16");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), { shape: [8, 8], dtype: "i32", device: 0 }), "out")).toContain("bf16 or f32");
    expect(argError(() => planGemm(bf16([8]), bf16([8, 8]), bf16([8, 8])), "a")).toContain("2-D");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8], 1), bf16([8, 8])), "b")).toContain("device 1");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8], 1)), "out")).toContain("device 1");
  });

  test("inner dimensions and output shape must agree", () => {
    expect(argError(() => planGemm(bf16([16, 32]), bf16([24, 8]), bf16([16, 8])), "b")).toContain("K = 24");
    expect(argError(() => planGemm(bf16([16, 32]), bf16([8, 32]), bf16([16, 8])), "b")).toContain("[K, N]");
    expect(argError(() => planGemm(bf16([16, 32]), bf16([8, 32]), bf16([16, 16]), { transB: true }), "out")).toContain("[16, 8]");
  });

  test("rows that are not 16-byte multiples are rejected with the way out", () => {
    const msg = argError(() => planGemm(bf16([127, 65]), bf16([65, 256]), bf16([127, 256])), "a");
    expect(msg).toContain("130 bytes");
    expect(msg).toContain("multiple of 16 bytes");
    expect(msg).toContain("pad K (a's rows) to 72");
    expect(msg).toContain("shape: { m, n, k }");
    expect(argError(() => planGemm(bf16([128, 64]), bf16([64, 255]), bf16([128, 255])), "b")).toContain("pad N (b's rows) to 256");
    expect(argError(() => planGemm(bf16([128, 64]), bf16([255, 64]), bf16([128, 255]), { transB: true }), "out")).toContain("to 256");
    // f32 rows need a multiple of 4 elements, not 8.
    expect(planGemm(bf16([128, 64]), bf16([12, 64]), f32([128, 12]), { transB: true }).n).toBe(12);
    expect(argError(() => planGemm(bf16([1, 1]), bf16([1, 1]), bf16([1, 1])), "a")).toContain("multiple of 16 bytes");
  });

  test("a logical shape inside padded tensors", () => {
    const p = planGemm(bf16([127, 72]), bf16([255, 72]), bf16([127, 256]), { transB: true, shape: { m: 127, n: 255, k: 65 } });
    expect(p).toMatchObject({ m: 127, n: 255, k: 65, lda: 72, ldb: 72, ldc: 256, flags: 1 });
    expect(argError(() => planGemm(bf16([127, 72]), bf16([255, 72]), bf16([127, 256]), { transB: true, shape: { m: 128, n: 255, k: 65 } }), "a")).toContain("needs 128");
    expect(argError(() => planGemm(bf16([127, 72]), bf16([255, 72]), bf16([127, 256]), { transB: true, shape: { m: 127, n: 256, k: 65 } }), "b")).toContain("needs 256");
    expect(argError(() => planGemm(bf16([127, 72]), bf16([72, 256]), bf16([127, 248]), { shape: { m: 127, n: 255, k: 65 } }), "out")).toContain("needs 255");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { shape: { m: 0, n: 8, k: 8 } }), "opts.shape.m")).toContain("positive integer");
  });

  test("config overrides are validated in one place", () => {
    const ok = (config: GemmConfig) => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { config }).config;
    expect(ok({ tileN: 256, clusterM: 2, groupM: 4, maxCtas: 66 })).toEqual({ tileN: 256, clusterM: 2, clusterN: 0, groupM: 4, maxCtas: 66 });
    expect(ok({})).toEqual({ tileN: 0, clusterM: 0, clusterN: 0, groupM: 0, maxCtas: 0 });
    const bad = (config: unknown, argument: string) =>
      argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { config: config as GemmConfig }), argument);
    expect(bad({ tileN: 96 }, "config.tileN")).toContain("64, 128 or 256");
    expect(bad({ clusterM: 4 }, "config.clusterM")).toContain("1 or 2");
    expect(bad({ clusterM: 2, clusterN: 2 }, "config.clusterN")).toContain("at most two");
    expect(bad({ tileN: 64, clusterM: 2 }, "config.clusterM")).toContain("tileN 64");
    expect(bad({ tileN: 256, clusterN: 2 }, "config.clusterN")).toContain("use clusterM");
    expect(bad({ groupM: 0 }, "config.groupM")).toContain("positive integer");
    expect(bad({ maxCtas: 1.5 }, "config.maxCtas")).toContain("positive integer");
    expect(bad({ stages: 3 }, "config.stages")).toContain("not a GEMM config field");
  });

  test("options", () => {
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { transB: 1 as unknown as boolean }), "opts.transB")).toContain("boolean");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { timeoutMs: -1 }), "opts.timeoutMs")).toContain("positive");
    expect(argError(() => planGemm(bf16([8, 8]), bf16([8, 8]), bf16([8, 8]), { stream: {} as Stream }), "opts.stream")).toContain("Stream");
  });

  test("gemm() and gemmSync() take Tensors only", async () => {
    expect(argError(() => gemmSync({} as Tensor, {} as Tensor, {} as Tensor), "a")).toContain("must be a Tensor");
    let caught: unknown;
    try {
      await gemm(null as unknown as Tensor, {} as Tensor, {} as Tensor);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ArgumentError);
  });
});

// ---- GPU ------------------------------------------------------------------------------------------

const round8 = (x: number) => Math.ceil(x / 8) * 8;
let seed = 1000;

interface Case {
  m: number;
  n: number;
  k: number;
  transB: boolean;
  outF32?: boolean;
  config?: GemmConfig;
}

/** Fresh random operands (rows padded to 16 bytes when needed, padding random too), NaN-poisoned
 * output, and the fp32 reference. */
function setup(c: Case) {
  const kp = round8(c.k), np = round8(c.n);
  const a = Tensor.empty([c.m, kp], "bf16").fillRandom(seed++);
  const b = (c.transB ? Tensor.empty([c.n, kp], "bf16") : Tensor.empty([c.k, np], "bf16")).fillRandom(seed++);
  const ref = Tensor.empty([c.m, c.n], "f32").fill(NaN);
  const t0 = performance.now();
  referenceGemm(a, b, ref, c, c.transB); // synchronous (null stream)
  const ms = performance.now() - t0;
  if (ms > 10) console.log(`reference ${label(c)}: CUDA cores, ${ms.toFixed(0)} ms (${(2 * c.m * c.n * c.k / ms / 1e9).toFixed(1)} TFLOP/s)`);
  const out = Tensor.empty([c.m, c.outF32 ? Math.ceil(c.n / 4) * 4 : np], c.outF32 ? "f32" : "bf16");
  return { a, b, ref, out, padded: kp !== c.k || out.shape[1] !== c.n, [Symbol.dispose]() { a.dispose(); b.dispose(); ref.dispose(); out.dispose(); } };
}

const label = (c: Case) =>
  `${c.m}x${c.n}x${c.k} ${c.transB ? "b [N,K]" : "b [K,N]"}${c.outF32 ? " f32 out" : ""}${c.config ? " " + JSON.stringify(c.config) : ""}`;

/** Runs one case and checks every element of the logical output (and that padding stayed NaN). */
async function checkCase(c: Case, t: ReturnType<typeof setup>, opts: GemmOptions = {}): Promise<number> {
  t.out.fill(NaN);
  const shape = { m: c.m, n: c.n, k: c.k };
  await gemm(t.a, t.b, t.out, { transB: c.transB, shape, config: c.config, ...opts });
  const tol = c.outF32 ? 1e-5 : 1e-2;
  if (!t.padded) {
    const e = deviceError(t.out, t.ref);
    expect(e.nonFinite).toBe(0);
    expect(e.rel).toBeLessThanOrEqual(tol);
    return e.rel;
  }
  const got = t.out.download() as Float32Array;
  const want = t.ref.download() as Float32Array;
  const ldc = t.out.shape[1]!;
  let num = 0, den = 0, nonFinite = 0, paddingWritten = 0;
  for (let i = 0; i < c.m; i++) {
    for (let j = 0; j < ldc; j++) {
      const v = got[i * ldc + j]!;
      if (j >= c.n) {
        if (!Number.isNaN(v)) paddingWritten++; // outside the logical region: must stay untouched
        continue;
      }
      if (!Number.isFinite(v)) nonFinite++;
      const r = want[i * c.n + j]!;
      num += (v - r) ** 2;
      den += r * r;
    }
  }
  const rel = Math.sqrt(num) / Math.sqrt(den);
  expect({ nonFinite, paddingWritten, relOk: rel <= tol }).toEqual({ nonFinite: 0, paddingWritten: 0, relOk: true });
  return rel;
}

describeGpu("gemm on one GPU", 1, () => {
  test("the GPU reference agrees with an fp64 CPU loop (127x255x65, both layouts)", () => {
    for (const transB of [false, true]) {
      const c: Case = { m: 127, n: 255, k: 65, transB };
      using t = setup(c);
      const a = t.a.download() as Float32Array, b = t.b.download() as Float32Array;
      const cpu = cpuGemm(a, t.a.shape[1]!, b, t.b.shape[1]!, c.m, c.n, c.k, transB);
      const gpu = t.ref.download() as Float32Array;
      let num = 0, den = 0;
      for (let i = 0; i < cpu.length; i++) {
        num += (gpu[i]! - cpu[i]!) ** 2;
        den += cpu[i]! ** 2;
      }
      expect(Math.sqrt(num / den)).toBeLessThan(1e-6);
    }
  });

  const small: Case[] = [
    { m: 1, n: 1, k: 1, transB: false }, { m: 1, n: 1, k: 1, transB: true },
    { m: 127, n: 255, k: 65, transB: false }, { m: 127, n: 255, k: 65, transB: true },
    { m: 127, n: 255, k: 65, transB: true, outF32: true },
  ];
  for (const c of small) {
    test(`${label(c)} (every dim off-tile; padded rows)`, async () => {
      using t = setup(c);
      await checkCase(c, t);
    });
  }

  // Every instantiated kernel (tile width x cluster x B layout x output type) on a shape where
  // M, N and K all end mid-tile.
  const configs: GemmConfig[] = [
    { tileN: 256, clusterM: 1 }, { tileN: 256, clusterM: 2 }, { tileN: 128, clusterM: 1 }, { tileN: 128, clusterM: 2 },
    { tileN: 64, clusterN: 1 }, { tileN: 64, clusterN: 2 },
  ];
  for (const transB of [false, true]) {
    test(`1000x1000x1000 ${transB ? "b [N,K]" : "b [K,N]"}: all 12 kernel configs, bf16 and f32 out`, async () => {
      const base: Case = { m: 1000, n: 1000, k: 1000, transB };
      using t = setup(base);
      using out32 = Tensor.empty([1000, 1000], "f32");
      for (const config of configs) {
        await checkCase({ ...base, config }, t);
        const tf = { ...t, out: out32, padded: false };
        await checkCase({ ...base, config, outF32: true }, tf);
      }
    });
  }

  const shapes: Case[] = [
    { m: 1, n: 8192, k: 8192, transB: true }, { m: 1, n: 8192, k: 8192, transB: false },
    { m: 16, n: 8192, k: 8192, transB: true }, { m: 16, n: 8192, k: 8192, transB: false },
    { m: 128, n: 8192, k: 8192, transB: true }, { m: 128, n: 8192, k: 8192, transB: false },
    { m: 4096, n: 4096, k: 4096, transB: true }, { m: 4096, n: 4096, k: 4096, transB: false },
    { m: 4096, n: 14336, k: 4096, transB: true },
    { m: 8192, n: 8192, k: 8192, transB: false },
    { m: 8192, n: 28672, k: 8192, transB: true },
  ];
  for (const c of shapes) {
    test(label(c), async () => {
      using t = setup(c);
      const config = gemmConfigFor(t.a, t.b, t.out, { transB: c.transB });
      const rel = await checkCase(c, t);
      console.log(`gemm ${label(c)}: rel ${rel.toExponential(2)} with ${JSON.stringify(config)}`);
    });
  }

  test("100 back-to-back runs without any reset stay correct and bit-identical (Promise and stream paths)", async () => {
    const c: Case = { m: 2048, n: 2048, k: 1024, transB: true };
    using t = setup(c);
    using s = Stream.create(0);
    const runs = 120;
    using first = Tensor.empty([c.m, c.n], "bf16");
    using vsRef = Tensor.empty([6 * runs], "f32");
    using vsFirst = Tensor.empty([6 * runs], "f32");
    for (let i = 0; i < runs; i++) {
      t.out.fill(NaN); // null stream, synchronous: ordered before the launch below
      if (i % 2 === 0) {
        await gemm(t.a, t.b, t.out, { transB: true });
      } else {
        gemmSync(t.a, t.b, t.out, { transB: true, stream: s });
        s.synchronize();
      }
      if (i === 0) first.copyFrom(t.out);
      deviceErrorAsync(t.out, t.ref, vsRef, i);
      deviceErrorAsync(t.out, first, vsFirst, i);
    }
    const errors = readErrors(vsRef, runs);
    const drift = readErrors(vsFirst, runs);
    for (let i = 0; i < runs; i++) {
      expect(errors[i]!.nonFinite).toBe(0);
      expect(errors[i]!.rel).toBeLessThanOrEqual(1e-2);
      // The accumulation order is fixed, so every run gives the same bits as the first.
      expect(drift[i]!.rel).toBe(0);
    }
  });

  test("a GEMM plan (weft_gemm_plan_*): 100 launches with completion words, each checked, the same bits as gemmSync", () => {
    const c: Case = { m: 1000, n: 2056, k: 520, transB: false };
    using t = setup(c);
    using s = Stream.create(0);
    using viaSync = Tensor.empty([c.m, c.n], "bf16");
    gemmSync(t.a, t.b, viaSync, { stream: s });
    s.synchronize();
    const params = new Uint8Array(packGemmParams(planGemm(t.a, t.b, t.out), t.a, t.b, t.out, s));
    const out = new BigUint64Array(1);
    check(native().weft_gemm_plan_create(params, out), "weft_gemm_plan_create");
    const plan = outPointer(out);
    using completion = Completion.create(0);
    const runs = 100;
    using vsRef = Tensor.empty([6 * runs], "f32");
    using vsSync = Tensor.empty([6 * runs], "f32");
    try {
      for (let i = 0; i < runs; i++) {
        t.out.fill(NaN);  // synchronous, before the launch
        const slot = completion.slot();
        check(native().weft_gemm_plan_launch(plan, packOpLaunch(slot)), "weft_gemm_plan_launch");
        completion.wait(slot.seq, 10_000, "gemm plan");
        deviceErrorAsync(t.out, t.ref, vsRef, i);
        deviceErrorAsync(t.out, viaSync, vsSync, i);
      }
    } finally {
      check(native().weft_gemm_plan_destroy(plan), "weft_gemm_plan_destroy");
    }
    const errors = readErrors(vsRef, runs), same = readErrors(vsSync, runs);
    for (let i = 0; i < runs; i++) {
      expect(errors[i]!.nonFinite).toBe(0);
      expect(errors[i]!.rel).toBeLessThanOrEqual(1e-2);
      expect(same[i]!.rel).toBe(0);
    }
  });

  test("a GEMM launched right behind another reads that one's finished output (programmatic dependent launch)", () => {
    // c1 = a · b, then c2 = c1 · b2 on the same stream with nothing in between, so the second kernel
    // may start on SMs the first has given back before the first has completed; it must not read c1
    // before then (grid_dependency.cuh). c1 is NaN until the first writes it, so a read that comes
    // too early shows as non-finite c2, and c2 is checked against a reference computed from c1.
    const m = 1024, k = 1024, runs = 16;
    using a = Tensor.empty([m, k], "bf16").fillRandom(seed++);
    using b = Tensor.empty([k, k], "bf16").fillRandom(seed++, -0.05, 0.05);
    using b2 = Tensor.empty([k, k], "bf16").fillRandom(seed++, -0.05, 0.05);
    using c1 = Tensor.empty([m, k], "bf16");
    using c2 = Tensor.empty([m, k], "bf16");
    using ref = Tensor.empty([m, k], "f32");
    using errors = Tensor.empty([6 * runs], "f32");
    using s = Stream.create(0);
    for (let i = 0; i < runs; i++) {
      c1.fill(NaN);  // null stream, synchronous
      c2.fill(NaN);
      gemmSync(a, b, c1, { stream: s });
      gemmSync(c1, b2, c2, { stream: s });
      s.synchronize();
      referenceGemm(c1, b2, ref, { m, n: k, k }, false);  // from the c1 the second GEMM should have read
      deviceErrorAsync(c2, ref, errors, i);
    }
    for (const e of readErrors(errors, runs)) {
      expect(e.nonFinite).toBe(0);
      expect(e.rel).toBeLessThanOrEqual(1e-2);
    }
  });

  test("cuBLASLt baseline is reported (loaded or why not)", () => {
    const c = cublasLtAvailable();
    console.log(`cuBLASLt: ${c.available ? "available" : "missing"} (${c.detail})`);
    expect(typeof c.detail).toBe("string");
  });
});
