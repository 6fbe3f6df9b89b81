// nn-reference.ts — CPU references for the decoder layers (lib/ops/nn.ts, lib/ops/sample.ts), fp64
// inside, written from the definitions rather than from the kernels.
import { bf16ToF32, f32ToBf16 } from "../../lib/dtype.ts";
import { sampleUniform } from "../../lib/ops/sample.ts";

/** x rounded to bf16 and back (what a bf16 tensor holds). */
export function roundBf16(x: Float32Array): Float32Array {
  return bf16ToF32(f32ToBf16(x));
}

export function rmsNormRef(x: Float32Array, weight: Float32Array, rows: number, dim: number, eps: number): Float32Array {
  const out = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[r * dim + i]! ** 2;
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = x[r * dim + i]! * inv * weight[i]!;
  }
  return out;
}

/** Rotate-half RoPE of `heads` heads from `column` on, rows `stride` apart; other columns copied. */
export function ropeRef(x: Float32Array, positions: Int32Array, rows: number, stride: number, column: number, heads: number,
  headDim: number, theta: number): Float32Array {
  const out = Float32Array.from(x);
  const half = headDim / 2;
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < heads; h++) {
      const base = r * stride + column + h * headDim;
      for (let i = 0; i < half; i++) {
        const angle = positions[r]! * theta ** (-(2 * i) / headDim);
        const c = Math.cos(angle), s = Math.sin(angle);
        const x1 = x[base + i]!, x2 = x[base + half + i]!;
        out[base + i] = x1 * c - x2 * s;
        out[base + half + i] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

export function swigluRef(x: Float32Array, rows: number, dim: number): Float32Array {
  const out = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < dim; j++) {
      const g = x[r * 2 * dim + j]!, u = x[r * 2 * dim + dim + j]!;
      out[r * dim + j] = (g / (1 + Math.exp(-g))) * u;
    }
  }
  return out;
}

export interface CacheLayout {
  slots: number;
  maxSeq: number;
  kvHeads: number;
  headDim: number;
}

/** Row r's heads attend to positions 0 ..= pos[r] of slot[r]; q rows `qStride` apart from qColumn. */
export function cacheAttentionRef(q: Float32Array, qStride: number, qColumn: number, kCache: Float32Array, vCache: Float32Array,
  c: CacheLayout, heads: number, slot: Int32Array, pos: Int32Array, rows: number, scale: number): Float32Array {
  const d = c.headDim, width = c.kvHeads * d, group = heads / c.kvHeads;
  const out = new Float32Array(rows * heads * d);
  for (let r = 0; r < rows; r++) {
    const s = slot[r]!, p = pos[r]!;
    if (s < 0) continue;
    if (s >= c.slots || p < 0 || p >= c.maxSeq) {
      out.fill(NaN, r * heads * d, (r + 1) * heads * d);
      continue;
    }
    for (let h = 0; h < heads; h++) {
      const kv = Math.floor(h / group);
      const qb = r * qStride + qColumn + h * d;
      const scores = new Float64Array(p + 1);
      let mx = -Infinity;
      for (let j = 0; j <= p; j++) {
        const kb = (s * c.maxSeq + j) * width + kv * d;
        let dot = 0;
        for (let i = 0; i < d; i++) dot += q[qb + i]! * kCache[kb + i]!;
        scores[j] = dot * scale;
        mx = Math.max(mx, scores[j]!);
      }
      let z = 0;
      for (let j = 0; j <= p; j++) z += (scores[j] = Math.exp(scores[j]! - mx));
      for (let i = 0; i < d; i++) {
        let acc = 0;
        for (let j = 0; j <= p; j++) acc += scores[j]! * vCache[(s * c.maxSeq + j) * width + kv * d + i]!;
        out[(r * heads + h) * d + i] = acc / z;
      }
    }
  }
  return out;
}

/** The lowest index holding the largest value. */
export function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

export interface SampleRef {
  token: number;
  /** Indices the cuts keep (top-k then top-p), ties at the cuts included. */
  kept: Set<number>;
  logprob: number;
}

/** The sampling law of weft.h's WeftSampleParams, in fp64: temperature, top-k, top-p, inverse CDF
 * in index order with u = sampleUniform(seed, counter). `topPSlack` widens the top-p cut (a superset
 * for membership checks that allow for fp32 rounding at the boundary). */
export function sampleRef(row: ArrayLike<number>, s: { temperature: number; topK: number; topP: number; seed: number; counter: number },
  topPSlack = 0): SampleRef {
  const v = row.length;
  const mx = Math.max(...Array.from(row));
  let z1 = 0;
  for (let i = 0; i < v; i++) z1 += Math.exp(row[i]! - mx);
  const logprobOf = (t: number) => row[t]! - mx - Math.log(z1);
  if (s.temperature === 0) {
    const t = argmax(row);
    return { token: t, kept: new Set([t]), logprob: logprobOf(t) };
  }
  const order = Array.from({ length: v }, (_, i) => i).sort((a, b) => row[b]! - row[a]! || a - b);
  let cut = -Infinity;
  if (s.topK > 0 && s.topK < v) cut = row[order[s.topK - 1]!]!;
  const w = (i: number) => Math.exp((row[i]! - mx) / s.temperature);
  if (s.topP < 1) {
    let mass = 0;
    for (let i = 0; i < v; i++) if (row[i]! >= cut) mass += w(i);
    const target = Math.min(1, s.topP + topPSlack) * mass;
    // The largest value t such that the mass of logits >= t reaches the target.
    let acc = 0;
    for (let j = 0; j < v; j++) {
      const value = row[order[j]!]!;
      if (value < cut) break;
      acc += w(order[j]!);
      const next = j + 1 < v ? row[order[j + 1]!]! : -Infinity;
      if (next === value) continue;  // ties stay together
      if (acc >= target) {
        cut = value;
        break;
      }
    }
  }
  const kept = new Set<number>();
  let total = 0;
  for (let i = 0; i < v; i++) {
    if (row[i]! >= cut) {
      kept.add(i);
      total += w(i);
    }
  }
  const target = sampleUniform(s.seed, s.counter) * total;
  let cum = 0, token = -1;
  for (let i = 0; i < v; i++) {
    if (row[i]! < cut) continue;
    cum += w(i);
    token = i;
    if (cum > target) break;
  }
  return { token, kept, logprob: logprobOf(token) };
}
