import { describe, expect, test } from "./support/test-api.ts";

import { bf16ToF32, f16BitsToF32, f16ToF32, f32ToBf16, f32ToF16, f32ToF16Bits, scalarBits } from "../lib/dtype.ts";

/** Fills `xs` with random bits. Web Crypto gives at most 64 KiB per call (Deno enforces it). */
function randomBits(xs: Uint32Array): void {
  for (let i = 0; i < xs.length; i += 16384) crypto.getRandomValues(xs.subarray(i, i + 16384));
}

const f32bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;
const fromBits = (u: number) => new Float32Array(Uint32Array.of(u).buffer)[0]!;

/** Reference rounding: the nearest of the two neighbouring representable values, ties to the
 * even one, computed in fp64 from the candidates' exact values. */
function nearestEven(x: number, lo: number, hi: number, loBits: number): "lo" | "hi" {
  const dl = x - lo, dh = hi - x;
  if (dl < dh) return "lo";
  if (dh < dl) return "hi";
  return (loBits & 1) === 0 ? "lo" : "hi";
}

describe("bf16", () => {
  test("edge values", () => {
    const cases: [number, number][] = [
      [0, 0x0000], [-0, 0x8000], [1, 0x3f80], [-2, 0xc000],
      [Infinity, 0x7f80], [-Infinity, 0xff80],
      [3.3895313892515355e38, 0x7f7f], // bf16 max
      [3.4028234663852886e38, 0x7f80], // f32 max rounds up to Inf
      [1.1754943508222875e-38, 0x0080], // smallest normal
      [9.183549615799121e-41, 0x0001], // smallest bf16 subnormal
      [fromBits(0x3f808000), 0x3f80], // tie, even stays
      [fromBits(0x3f818000), 0x3f82], // tie, odd rounds up
      [fromBits(0x3f808001), 0x3f81], // just above half
    ];
    for (const [x, bits] of cases) expect([x, f32ToBf16(Float32Array.of(x))[0]]).toEqual([x, bits]);
  });

  test("NaN stays NaN (quiet, sign kept), also payload NaNs whose top bits are zero", () => {
    for (const u of [0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff]) {
      const b = f32ToBf16(new Float32Array(Uint32Array.of(u).buffer))[0]!;
      expect((b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0).toBe(true);
      expect(b >>> 15).toBe(u >>> 31);
      expect(Number.isNaN(bf16ToF32(Uint16Array.of(b))[0])).toBe(true);
    }
  });

  test("every bf16 value survives bf16 -> f32 -> bf16", () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = f32ToBf16(bf16ToF32(all));
    for (let i = 0; i < 65536; i++) {
      const isNaN = (i & 0x7f80) === 0x7f80 && (i & 0x7f) !== 0;
      if (isNaN) expect(back[i]! | 0x40).toBe(i | 0x40);
      else if (back[i] !== i) throw new Error(`bf16 ${i.toString(16)} came back as ${back[i]!.toString(16)}`);
    }
  });

  test("random f32 values round to the nearest bf16, ties to even", () => {
    const xs = new Uint32Array(200000);
    randomBits(xs);
    for (const u of xs) {
      if (((u >>> 23) & 0xff) === 0xff) continue;
      const x = fromBits(u);
      const loBits = u >>> 16;
      const lo = fromBits(loBits << 16);
      // Past the largest finite bf16 the next step is 2^128, which rounds to Inf.
      const hiRaw = fromBits(((loBits + 1) << 16) >>> 0);
      const hi = Number.isFinite(hiRaw) ? hiRaw : Math.sign(hiRaw) * 2 ** 128;
      // |x| grows with the bits: "lo" is the truncation towards zero, "hi" the next away from it.
      const want = nearestEven(Math.abs(x), Math.abs(lo), Math.abs(hi), loBits) === "lo" ? loBits : loBits + 1;
      const got = f32ToBf16(Float32Array.of(x))[0]!;
      if (got !== (want & 0xffff)) throw new Error(`bf16(${x}) = ${got.toString(16)}, want ${want.toString(16)}`);
    }
  });
});

describe("f16", () => {
  test("edge values", () => {
    const cases: [number, number][] = [
      [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000],
      [65504, 0x7bff], [65519.99, 0x7bff], [65520, 0x7c00], [1e6, 0x7c00],
      [Infinity, 0x7c00], [-Infinity, 0xfc00],
      [6.103515625e-5, 0x0400], // smallest normal
      [5.960464477539063e-8, 0x0001], // smallest subnormal 2^-24
      [2.9802322387695312e-8, 0x0000], // 2^-25: tie between 0 and 2^-24, rounds to even 0
      [2.98023259e-8, 0x0001], // just above 2^-25
      [8.940696716308594e-8, 0x0002], // 1.5 * 2^-24: tie, rounds to even 2
      [6.097555160522461e-5, 0x03ff], // largest subnormal
    ];
    for (const [x, bits] of cases) expect([x, f32ToF16Bits(x)]).toEqual([x, bits]);
  });

  test("NaN stays NaN with its sign", () => {
    // Through arrays: a NaN passed as a JS number loses its sign to canonicalization.
    for (const u of [0x7fc00000, 0xffc00000, 0x7f800001]) {
      const h = f32ToF16(new Float32Array(Uint32Array.of(u).buffer))[0]!;
      expect((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0).toBe(true);
      expect(h >>> 15).toBe(u >>> 31);
      expect(Number.isNaN(f16BitsToF32(h))).toBe(true);
      const back = new Uint32Array(f16ToF32(Uint16Array.of(h)).buffer)[0]!;
      expect(back >>> 31).toBe(u >>> 31);
    }
  });

  test("every f16 value survives f16 -> f32 -> f16, subnormals included", () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const wide = f16ToF32(all);
    for (let i = 0; i < 65536; i++) {
      const v = f16BitsToF32(i);
      if (!(Object.is(wide[i], v) || (Number.isNaN(v) && Number.isNaN(wide[i]!)))) throw new Error(`f16 ${i.toString(16)}: array ${wide[i]} vs scalar ${v}`);
    }
    const back = f32ToF16(wide);
    for (let i = 0; i < 65536; i++) {
      const isNaN = (i & 0x7c00) === 0x7c00 && (i & 0x3ff) !== 0;
      if (isNaN) expect((back[i]! & 0x7c00) === 0x7c00 && (back[i]! & 0x3ff) !== 0).toBe(true);
      else if (back[i] !== i) throw new Error(`f16 ${i.toString(16)} came back as ${back[i]!.toString(16)}`);
    }
  });

  test("random f32 values round to the nearest f16, ties to even (checked against fp64 neighbours)", () => {
    const finite = new Float64Array(65536);
    for (let i = 0; i < 65536; i++) finite[i] = f16BitsToF32(i);
    const xs = new Uint32Array(100000);
    randomBits(xs);
    for (const u of xs) {
      // Keep magnitudes within and just beyond f16's range so the test exercises rounding.
      const x = fromBits((u & 0x80000000) | (0x30000000 + (u % 0x18000000)));
      const h = f32ToF16Bits(x);
      const ax = Math.abs(x);
      const mag = h & 0x7fff;
      if (mag === 0x7c00) {
        expect(ax).toBeGreaterThanOrEqual(65520);
        continue;
      }
      const v = finite[mag]!;
      const below = mag > 0 ? finite[mag - 1]! : -Infinity;
      const above = mag < 0x7bff ? finite[mag + 1]! : 65536; // the step past f16 max rounds to Inf
      // h is the nearest: no neighbour is strictly closer, and on a tie h is even.
      expect(Math.abs(ax - v)).toBeLessThanOrEqual(Math.abs(ax - below));
      expect(Math.abs(ax - v)).toBeLessThanOrEqual(Math.abs(ax - above));
      if (Math.abs(ax - v) === Math.abs(ax - below) || Math.abs(ax - v) === Math.abs(ax - above)) expect(mag & 1).toBe(0);
      expect(h >>> 15).toBe(u >>> 31);
    }
  });
});

test("scalarBits gives fill patterns for each dtype", () => {
  expect(scalarBits("f32", 1)).toBe(BigInt(f32bits(1)));
  expect(scalarBits("bf16", 1)).toBe(0x3f80n);
  expect(scalarBits("f16", -2)).toBe(0xc000n);
  expect(scalarBits("i32", -1)).toBe(0xffffffffn);
  expect(scalarBits("u8", 255)).toBe(255n);
  expect(Number(scalarBits("bf16", NaN)) & 0x7fff).toBeGreaterThan(0x7f80);
});
