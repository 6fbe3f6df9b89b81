// The decoder layers (lib/ops/nn.ts, lib/ops/sample.ts): validation on the CPU, then every kernel
// on a GPU against the fp64 references of test/support/nn-reference.ts, with fresh random inputs,
// NaN-poisoned outputs and every element checked.
import { describe, expect, test } from "../support/test-api.ts";

import type { TensorDesc } from "../../lib/ops/gemm.ts";
import {
  cacheAttention, copyColumns, embedding, kvAppend, rmsNorm, rope, swiglu, validateCacheAttention, validateCopyColumns,
  validateEmbedding, validateKvAppend, validateRmsNorm, validateRope, validateSwiglu,
} from "../../lib/ops/nn.ts";
import { Sampler, sampleUniform, validateSample, validateSampling } from "../../lib/ops/sample.ts";
import { Tensor } from "../../lib/tensor.ts";
import { argError } from "../support/argument-error.ts";
import { describeGpu, randomArray, relError } from "../support/gpu.ts";
import { argmax, cacheAttentionRef, rmsNormRef, roundBf16, ropeRef, sampleRef, swigluRef } from "../support/nn-reference.ts";

const bf16 = (shape: number[], device = 0): TensorDesc => ({ shape, dtype: "bf16", device });
const i32 = (n: number, device = 0): TensorDesc => ({ shape: [n], dtype: "i32", device });

describe("nn validation (CPU)", () => {
  test("embedding: table, ids and out agree; rows default to the shortest", () => {
    expect(validateEmbedding({ table: bf16([300, 64]), ids: i32(10), out: bf16([16, 64]) })).toEqual({ rows: 10, vocab: 300, dim: 64 });
    expect(validateEmbedding({ table: bf16([300, 64]), ids: i32(10), out: bf16([16, 64]), rows: 4 }).rows).toBe(4);
    expect(argError(() => validateEmbedding({ table: bf16([300, 64]), ids: i32(10), out: bf16([16, 64]), rows: 11 }), "rows")).toContain("ids has only 10");
    expect(argError(() => validateEmbedding({ table: bf16([300, 64]), ids: i32(10), out: bf16([16, 32]) }), "out")).toContain("64");
    expect(argError(() => validateEmbedding({ table: bf16([300, 60]), ids: i32(10), out: bf16([16, 60]) }), "dim (the table's columns)")).toContain("multiple of 8");
    expect(argError(() => validateEmbedding({ table: bf16([300, 64]), ids: bf16([10]), out: bf16([16, 64]) }), "ids")).toContain("int32");
    expect(argError(() => validateEmbedding({ table: bf16([300, 64]), ids: i32(10, 1), out: bf16([16, 64]) }), "ids")).toContain("device 1");
  });

  test("rmsNorm: weight length, residual shape and aliasing, eps", () => {
    const x = bf16([8, 128]), out = bf16([8, 128]), w = bf16([128]);
    expect(validateRmsNorm({ x, weight: w, out: x })).toEqual({ rows: 8, dim: 128, eps: 1e-5 });
    expect(argError(() => validateRmsNorm({ x, weight: bf16([64]), out }), "weight")).toContain("128");
    expect(argError(() => validateRmsNorm({ x, weight: w, out, residual: x }), "residual")).toContain("its own");
    expect(argError(() => validateRmsNorm({ x, weight: w, out, residual: bf16([8, 64]) }), "residual")).toContain("columns");
    expect(argError(() => validateRmsNorm({ x, weight: w, out, eps: 0 }), "eps")).toContain("(0, 1)");
    expect(argError(() => validateRmsNorm({ x: bf16([2, 65544]), weight: bf16([65544]), out: bf16([2, 65544]) }), "x")).toContain("65536");
  });

  test("rope: heads fit the row from the column, head dim a multiple of 16, theta", () => {
    const x = bf16([4, 640]);
    expect(validateRope({ x, positions: i32(4), heads: 4, headDim: 128, column: 0 })).toMatchObject({ rows: 4, stride: 640, theta: 10000 });
    expect(argError(() => validateRope({ x, positions: i32(4), heads: 5, headDim: 128, column: 8 }), "heads")).toContain("648");
    expect(argError(() => validateRope({ x, positions: i32(4), heads: 4, headDim: 72 }), "headDim")).toContain("multiple of 16");
    expect(argError(() => validateRope({ x, positions: i32(4), heads: 4, headDim: 64, theta: 1 }), "theta")).toContain("> 1");
    expect(argError(() => validateRope({ x, positions: i32(3), heads: 4, headDim: 64, rows: 4 }), "rows")).toContain("positions has only 3");
  });

  test("swiglu: x holds gate and up side by side", () => {
    expect(validateSwiglu({ x: bf16([3, 512]), out: bf16([3, 256]) })).toEqual({ rows: 3, dim: 256 });
    expect(argError(() => validateSwiglu({ x: bf16([3, 500]), out: bf16([3, 256]) }), "x")).toContain("2 x out's 256");
  });

  test("kvAppend and cacheAttention: cache shapes, columns, grouped heads", () => {
    const cache = { kCache: bf16([4, 64, 256]), vCache: bf16([4, 64, 256]), slotIds: i32(6), positions: i32(6) };
    expect(validateKvAppend({ ...cache, src: bf16([6, 1024]), kColumn: 512, vColumn: 768 })).toMatchObject({ rows: 6, width: 256, slots: 4, maxSeq: 64 });
    expect(argError(() => validateKvAppend({ ...cache, src: bf16([6, 1024]), kColumn: 512, vColumn: 776 }), "vColumn")).toContain("past");
    expect(argError(() => validateKvAppend({ ...cache, vCache: bf16([4, 32, 256]), src: bf16([6, 1024]), kColumn: 0, vColumn: 256 }), "vCache")).toContain("[4, 64, 256]");
    const att = { ...cache, q: bf16([6, 1024]), out: bf16([6, 512]), heads: 8, kvHeads: 4, headDim: 64 };
    expect(validateCacheAttention(att)).toMatchObject({ rows: 6, scale: 1 / 8, qStride: 1024 });
    expect(argError(() => validateCacheAttention({ ...att, kvHeads: 3 }), "kvHeads")).toContain("divide");
    expect(argError(() => validateCacheAttention({ ...att, kvHeads: 2 }), "kCache")).toContain("kvHeads x headDim is 128");
    expect(argError(() => validateCacheAttention({ ...att, out: bf16([6, 256]) }), "out")).toContain("512");
    expect(argError(() => validateCacheAttention({ ...att, headDim: 512, kvHeads: 1, heads: 1 }), "headDim")).toContain("[8, 256]");
  });

  test("copyColumns: the range fits src's rows, out is another tensor", () => {
    const src = bf16([16, 384]);
    expect(validateCopyColumns({ src, out: bf16([20, 256]) })).toEqual({ rows: 16, stride: 384, column: 0, width: 256 });
    expect(validateCopyColumns({ src, column: 128, out: bf16([8, 256]), rows: 5 })).toEqual({ rows: 5, stride: 384, column: 128, width: 256 });
    expect(argError(() => validateCopyColumns({ src, column: 136, out: bf16([8, 256]) }), "column")).toContain("past src's 384 columns");
    expect(argError(() => validateCopyColumns({ src, column: -1, out: bf16([8, 256]) }), "column")).toContain("integer");
    expect(argError(() => validateCopyColumns({ src, out: src }), "out")).toContain("must not be src");
    expect(argError(() => validateCopyColumns({ src, out: bf16([8, 2, 128]) }), "out")).toContain("2-D");
    expect(argError(() => validateCopyColumns({ src, out: bf16([8, 256], 1) }), "out")).toContain("device 1");
    expect(argError(() => validateCopyColumns({ src, out: bf16([8, 256]), rows: 9 }), "rows")).toContain("out has only 8");
  });

  test("sampling settings and launch shape", () => {
    expect(validateSampling({})).toEqual({ temperature: 1, topK: 0, topP: 1, seed: 0n, counter: 0n });
    expect(validateSampling({ temperature: 0, seed: 2n ** 63n, counter: 5 }).seed).toBe(2n ** 63n);
    expect(argError(() => validateSampling({ temperature: -1 }), "temperature")).toContain(">= 0");
    expect(argError(() => validateSampling({ topP: 0 }), "topP")).toContain("(0, 1]");
    expect(argError(() => validateSampling({ topK: 1.5 }), "topK")).toContain("integer");
    expect(argError(() => validateSampling({ seed: -1 }), "seed")).toContain("2^64");
    expect(validateSample(bf16([8, 264]), 4)).toEqual({ rows: 4, vocab: 264, rowStride: 264 });
    expect(validateSample(bf16([8, 264]), 16, { rows: 8, vocab: 258 })).toEqual({ rows: 8, vocab: 258, rowStride: 264 });
    expect(argError(() => validateSample(bf16([8, 264]), 4, { rows: 5 }), "rows")).toContain("[1, 4]");
    expect(argError(() => validateSample({ shape: [8, 264], dtype: "i32", device: 0 }, 4), "logits")).toContain("bf16 or f32");
  });

  test("the draw: deterministic per (seed, counter), in [0, 1), uniform", () => {
    expect(sampleUniform(7, 3)).toBe(sampleUniform(7n, 3n));
    expect(sampleUniform(7, 3)).not.toBe(sampleUniform(7, 4));
    expect(sampleUniform(7, 3)).not.toBe(sampleUniform(8, 3));
    const buckets = new Array(10).fill(0);
    let sum = 0;
    const n = 20000;
    for (let i = 0; i < n; i++) {
      const u = sampleUniform(12345, i);
      expect(u >= 0 && u < 1).toBe(true);
      buckets[Math.floor(u * 10)]++;
      sum += u;
    }
    expect(Math.abs(sum / n - 0.5)).toBeLessThan(0.01);
    // Each bucket within 5 sigma of n / 10 (sigma = sqrt(n p (1 - p)) ~ 42).
    for (const b of buckets) expect(Math.abs(b - n / 10)).toBeLessThan(5 * 42);
  });

  test("the CPU sampling reference: greedy, top-k 1, ties, top-p", () => {
    const row = [0.5, 2, 2, -1, 1.5];
    expect(sampleRef(row, { temperature: 0, topK: 0, topP: 1, seed: 0, counter: 0 }).token).toBe(1);
    expect([...sampleRef(row, { temperature: 1, topK: 1, topP: 1, seed: 0, counter: 0 }).kept].sort()).toEqual([1, 2]);
    expect([...sampleRef(row, { temperature: 1, topK: 3, topP: 1, seed: 0, counter: 0 }).kept].sort()).toEqual([1, 2, 4]);
    // The two 2s hold 2 e^0 of 2 + e^-0.5 + e^-1.5 + e^-3: ~0.71 of the mass.
    expect([...sampleRef(row, { temperature: 1, topK: 0, topP: 0.6, seed: 0, counter: 0 }).kept].sort()).toEqual([1, 2]);
    expect([...sampleRef(row, { temperature: 1, topK: 0, topP: 0.8, seed: 0, counter: 0 }).kept].sort()).toEqual([1, 2, 4]);
  });
});

// ---- on a GPU --------------------------------------------------------------------------------------------------

/** Float data rounded as a bf16 tensor holds it. */
function bf16Tensor(shape: number[], seed: number, scale = 1): [Tensor, Float32Array] {
  const n = shape.reduce((a, b) => a * b, 1);
  const host = roundBf16(randomArray(n, seed).map((v) => v * scale));
  return [Tensor.from(host, shape, "bf16"), host];
}

function poisoned(shape: number[], dtype: "bf16" | "f32" = "bf16"): Tensor {
  return Tensor.empty(shape, dtype).fill(NaN);
}

describeGpu("nn layers on the GPU", 1, () => {
  test("embedding: every row copied exactly; out-of-range ids give NaN rows", () => {
    const vocab = 1000, dim = 520, rows = 257;
    const [table, host] = bf16Tensor([vocab, dim], 11);
    const ids = Int32Array.from({ length: rows }, (_, r) => (r * 7919) % vocab);
    ids[5] = -1;
    ids[17] = vocab;
    using idT = Tensor.from(ids, [rows], "i32");
    using out = poisoned([rows, dim]);
    embedding({ table, ids: idT, out });
    const got = out.download() as Float32Array;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < dim; c++) {
        const v = got[r * dim + c]!;
        if (r === 5 || r === 17) expect(Number.isNaN(v)).toBe(true);
        else if (v !== host[ids[r]! * dim + c]) throw new Error(`row ${r} col ${c}: ${v} != ${host[ids[r]! * dim + c]}`);
      }
    }
    // The NaN rows are written, not left over: poison with 7 and look again.
    out.fill(7);
    embedding({ table, ids: idT, out, rows: 18 });
    const again = out.download() as Float32Array;
    expect(Number.isNaN(again[17 * dim + 3]!)).toBe(true);
    expect(again[18 * dim]).toBe(7);  // past `rows`: untouched
    table.dispose();
  });

  for (const dim of [64, 4096, 12296]) {
    test(`rmsNorm, dim ${dim}: plain and fused with the residual add`, () => {
      const rows = 129;
      const [x, xh] = bf16Tensor([rows, dim], 21 + dim, 2);
      const [w, wh] = bf16Tensor([dim], 22 + dim);
      const [res, rh] = bf16Tensor([rows, dim], 23 + dim, 3);
      using out = poisoned([rows, dim]);
      rmsNorm({ x, weight: w, out, eps: 1e-6 });
      expect(relError(out.download() as Float32Array, rmsNormRef(xh, wh, rows, dim, 1e-6))).toBeLessThan(1e-2);
      out.fill(NaN);
      rmsNorm({ x, weight: w, out, residual: res, eps: 1e-6 });
      const sum = roundBf16(rh.map((v, i) => v + xh[i]!));
      const gotRes = res.download() as Float32Array;
      expect(relError(gotRes, sum)).toBeLessThan(1e-2);
      expect(relError(out.download() as Float32Array, rmsNormRef(gotRes, wh, rows, dim, 1e-6))).toBeLessThan(1e-2);
      // In place (out = x).
      rmsNorm({ x, weight: w, out: x });
      expect(relError(x.download() as Float32Array, rmsNormRef(xh, wh, rows, dim, 1e-5))).toBeLessThan(1e-2);
      for (const t of [x, w, res]) t.dispose();
    });
  }

  test("rope: q and k heads turned by each row's position, v untouched", () => {
    const rows = 33, headDim = 128, hq = 4, hkv = 2, stride = (hq + 2 * hkv) * headDim;
    const [x, xh] = bf16Tensor([rows, stride], 31);
    const positions = Int32Array.from({ length: rows }, (_, r) => (r * 977) % 5000);
    using pos = Tensor.from(positions, [rows], "i32");
    rope({ x, positions: pos, heads: hq + hkv, headDim, theta: 500000 });
    const got = x.download() as Float32Array;
    const ref = ropeRef(xh, positions, rows, stride, 0, hq + hkv, headDim, 500000);
    expect(relError(got, ref)).toBeLessThan(1e-2);
    for (let r = 0; r < rows; r++) {
      for (let c = (hq + hkv) * headDim; c < stride; c++) expect(got[r * stride + c]).toBe(xh[r * stride + c]!);
    }
    // From a column: only the k heads.
    const [y, yh] = bf16Tensor([rows, stride], 32);
    rope({ x: y, positions: pos, heads: hkv, headDim, column: hq * headDim });
    expect(relError(y.download() as Float32Array, ropeRef(yh, positions, rows, stride, hq * headDim, hkv, headDim, 10000))).toBeLessThan(1e-2);
    x.dispose();
    y.dispose();
  });

  test("swiglu: silu(gate) x up, every element", () => {
    const rows = 77, dim = 1000;
    const [x, xh] = bf16Tensor([rows, 2 * dim], 41, 4);
    using out = poisoned([rows, dim]);
    swiglu({ x, out });
    expect(relError(out.download() as Float32Array, swigluRef(xh, rows, dim))).toBeLessThan(1e-2);
    x.dispose();
  });

  test("copyColumns: rows' column ranges, exactly; rows past `rows` untouched", () => {
    const rows = 300, stride = 1000, column = 136, width = 520;
    const [src, host] = bf16Tensor([rows + 5, stride], 43);
    using out = poisoned([rows + 2, width]);
    copyColumns({ src, column, out, rows });
    const got = out.download() as Float32Array;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < width; c++) if (got[r * width + c] !== host[r * stride + column + c]) throw new Error(`row ${r} column ${c} differs`);
    }
    expect(got.subarray(rows * width).every(Number.isNaN)).toBe(true);
    src.dispose();
  });

  for (const headDim of [64, 256]) {
    test(`kvAppend + cacheAttention, head dim ${headDim}: prefill rows and decode rows over several key tiles`, () => {
      const slots = 4, maxSeq = 300, kvHeads = 2, heads = 6, width = kvHeads * headDim;
      const qkvStride = (heads + 2 * kvHeads) * headDim;
      // A cache full of old random keys and values; this step writes some positions anew.
      const [kCache, kh] = bf16Tensor([slots, maxSeq, width], 51 + headDim);
      const [vCache, vh] = bf16Tensor([slots, maxSeq, width], 52 + headDim);
      // Rows: a 5-token prompt at slot 2 (positions 0..4), decode rows at slot 0 (pos 299: three tiles),
      // slot 1 (pos 130) and slot 3 (pos 0), a padding row and a row with a bad slot.
      const slotIds = Int32Array.from([2, 2, 2, 2, 2, 0, 1, 3, -1, 9]);
      const positions = Int32Array.from([0, 1, 2, 3, 4, 299, 130, 0, 0, 0]);
      const rows = slotIds.length;
      const [qkv, qh] = bf16Tensor([rows, qkvStride], 53 + headDim);
      using sT = Tensor.from(slotIds, [rows], "i32");
      using pT = Tensor.from(positions, [rows], "i32");
      kvAppend({ src: qkv, kColumn: heads * headDim, vColumn: (heads + kvHeads) * headDim, kCache, vCache, slotIds: sT, positions: pT });
      for (let r = 0; r < rows; r++) {
        if (slotIds[r]! < 0 || slotIds[r]! >= slots) continue;
        const at = (slotIds[r]! * maxSeq + positions[r]!) * width;
        for (let i = 0; i < width; i++) {
          kh[at + i] = qh[r * qkvStride + heads * headDim + i]!;
          vh[at + i] = qh[r * qkvStride + (heads + kvHeads) * headDim + i]!;
        }
      }
      expect(relError(kCache.download() as Float32Array, kh)).toBe(0);
      expect(relError(vCache.download() as Float32Array, vh)).toBe(0);
      using out = poisoned([rows, heads * headDim]);
      cacheAttention({ q: qkv, heads, kvHeads, headDim, kCache, vCache, slotIds: sT, positions: pT, out });
      const got = out.download() as Float32Array;
      const ref = cacheAttentionRef(qh, qkvStride, 0, kh, vh, { slots, maxSeq, kvHeads, headDim }, heads, slotIds, positions, rows,
        1 / Math.sqrt(headDim));
      const valid = heads * headDim * 8;
      expect(relError(got.subarray(0, valid), ref.subarray(0, valid))).toBeLessThan(1e-2);
      expect(got.subarray(valid, valid + heads * headDim).every((v) => v === 0)).toBe(true);  // padding
      expect(got.subarray(valid + heads * headDim).every((v) => Number.isNaN(v))).toBe(true);  // bad slot
      for (const t of [kCache, vCache, qkv]) t.dispose();
    });
  }
});

describeGpu("sampling on the GPU", 1, () => {
  const vocab = 1000;

  test("greedy: the first maximum of every row, bf16 and f32 logits, with logprobs", async () => {
    using s = Sampler.create(0, 64);
    for (const dtype of ["f32", "bf16"] as const) {
      const host = roundBf16(randomArray(64 * vocab, dtype === "f32" ? 61 : 62).map((v) => v * 6));
      host[3 * vocab + 10] = host[3 * vocab + 900] = 50;  // a tie: the lower index wins
      using logits = Tensor.from(host, [64, vocab], dtype);
      for (let r = 0; r < 64; r++) s.set(r, { temperature: 0, seed: r });
      const { tokens, logprobs } = await s.run(logits);
      for (let r = 0; r < 64; r++) {
        const row = host.subarray(r * vocab, (r + 1) * vocab);
        expect(tokens[r]).toBe(argmax(row));
        expect(Math.abs(logprobs[r]! - sampleRef(row, { temperature: 0, topK: 0, topP: 1, seed: 0, counter: 0 }).logprob)).toBeLessThan(1e-4);
      }
      expect(tokens[3]).toBe(10);
    }
  });

  test("temperature, top-k and top-p against the reference law, 256 rows, draws from the same u", async () => {
    const rows = 256;
    using s = Sampler.create(0, rows);
    const host = randomArray(rows * vocab, 71).map((v) => v * 4);
    using logits = Tensor.from(host, [rows, vocab], "f32");
    const settings = Array.from({ length: rows }, (_, r) => ({
      temperature: [0.5, 1, 1.5][r % 3]!, topK: [0, 1, 5, 50][r % 4]!, topP: [1, 0.9, 0.5, 0.1][(r >> 2) % 4]!, seed: 1000 + r, counter: r * 3,
    }));
    settings.forEach((c, r) => s.set(r, c));
    const { tokens } = await s.run(logits);
    let same = 0;
    for (let r = 0; r < rows; r++) {
      const row = host.subarray(r * vocab, (r + 1) * vocab);
      const ref = sampleRef(row, settings[r]!);
      if (tokens[r] === ref.token) same++;
      // Whatever fp32 rounding does at a cut, the token is one the (slightly widened) cuts keep.
      expect(sampleRef(row, settings[r]!, 1e-4).kept.has(tokens[r]!)).toBe(true);
    }
    expect(same).toBeGreaterThanOrEqual(rows - 2);
  });

  test("deterministic per seed: 120 back-to-back launches give the same tokens; other seeds others", async () => {
    const rows = 32;
    using s = Sampler.create(0, rows);
    const host = randomArray(rows * vocab, 81).map((v) => v * 2);
    using logits = Tensor.from(host, [rows, vocab], "bf16");
    for (let r = 0; r < rows; r++) s.set(r, { temperature: 1, topP: 0.95, seed: 42 + r, counter: 7 });
    const first = (await s.run(logits)).tokens;
    for (let i = 0; i < 120; i++) expect(Array.from((await s.run(logits)).tokens)).toEqual(Array.from(first));
    for (let r = 0; r < rows; r++) s.set(r, { temperature: 1, topP: 0.95, seed: 4242 + r, counter: 7 });
    const other = (await s.run(logits)).tokens;
    expect(Array.from(other).filter((t, r) => t !== first[r]).length).toBeGreaterThan(rows / 4);
  });

  test("the draws follow the distribution: 4096 seeds over a 4-token top-k", async () => {
    const rows = 4096, v = 64;
    using s = Sampler.create(0, rows);
    const row = Float32Array.from({ length: v }, (_, i) => (i < 4 ? [2, 1.5, 1, 0.2][i]! : -3 + (i % 7) * 0.1));
    const host = new Float32Array(rows * v);
    for (let r = 0; r < rows; r++) host.set(row, r * v);
    using logits = Tensor.from(host, [rows, v], "f32");
    for (let r = 0; r < rows; r++) s.set(r, { temperature: 1, topK: 4, seed: r, counter: 0 });
    const { tokens } = await s.run(logits);
    const z = [2, 1.5, 1, 0.2].reduce((a, x) => a + Math.exp(x), 0);
    for (let t = 0; t < 4; t++) {
      const p = Math.exp([2, 1.5, 1, 0.2][t]!) / z;
      const n = tokens.filter((x) => x === t).length;
      expect(Math.abs(n - rows * p)).toBeLessThan(5 * Math.sqrt(rows * p * (1 - p)));
    }
    expect(tokens.every((x) => x >= 0 && x < 4)).toBe(true);
  });
});
