// attention.ts (test support) — attention problems with fresh random inputs and NaN-poisoned
// outputs, checked element by element against the fp32 GPU reference (weft_reference_attention)
// or, for tiny shapes, a CPU loop in fp64.
import { expect } from "./test-api.ts";

import { referenceAttention, type AttentionArgs } from "../../lib/ops/attention.ts";
import { Tensor } from "../../lib/tensor.ts";
import { deviceError } from "./gemm.ts";

export const OUT_REL_BAR = 1e-2;
export const LSE_ABS_BAR = 1e-3;

export interface AttentionCase {
  batch: number;
  seqQ: number;
  seqK: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  causal: boolean;
  /** Packed batch: the lengths of its sequences (queries and keys alike); batch and seq* ignored. */
  lengths?: number[];
  scale?: number;
}

export function caseName(c: AttentionCase): string {
  const seq = c.lengths ? `varlen (${c.lengths.join(", ")})` : `B ${c.batch} Sq ${c.seqQ} Sk ${c.seqK}`;
  return `${seq} H ${c.heads}/${c.kvHeads} D ${c.headDim} ${c.causal ? "causal" : "full"}`;
}

/** The tensors of one case on `device`: q, k, v random in [-1, 1) (seeded), out and lse NaN. */
export class AttentionProblem implements Disposable {
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  readonly out: Tensor;
  readonly lse: Tensor;
  readonly cu?: Tensor;
  readonly args: AttentionArgs;
  readonly c: AttentionCase;

  constructor(c: AttentionCase, seed: number, device = 0) {
    this.c = c;
    const { heads: h, kvHeads: hk, headDim: d } = c;
    let qShape: number[], kShape: number[], lseShape: number[];
    if (c.lengths) {
      const total = c.lengths.reduce((a, b) => a + b, 0);
      qShape = [total, h, d];
      kShape = [total, hk, d];
      lseShape = [h, total];
      const offsets = [0];
      for (const n of c.lengths) offsets.push(offsets[offsets.length - 1]! + n);
      this.cu = Tensor.from(Int32Array.from(offsets), [offsets.length], "i32", { device });
    } else {
      qShape = [c.batch, c.seqQ, h, d];
      kShape = [c.batch, c.seqK, hk, d];
      lseShape = [c.batch, h, c.seqQ];
    }
    this.q = Tensor.empty(qShape, "bf16", { device }).fillRandom(seed);
    this.k = Tensor.empty(kShape, "bf16", { device }).fillRandom(seed + 1);
    this.v = Tensor.empty(kShape, "bf16", { device }).fillRandom(seed + 2);
    this.out = Tensor.empty(qShape, "bf16", { device }).fill(Number.NaN);
    this.lse = Tensor.empty(lseShape, "f32", { device }).fill(Number.NaN);
    this.args = {
      q: this.q, k: this.k, v: this.v, out: this.out, lse: this.lse, causal: c.causal, scale: c.scale,
      ...(this.cu ? { cuSeqlens: this.cu, maxSeqlen: Math.max(...c.lengths!) } : {}),
    };
  }

  poison(): void {
    this.out.fill(Number.NaN);
    this.lse.fill(Number.NaN);
  }

  /** The fp32 reference of this problem's current inputs. */
  reference(): { out32: Tensor; lse32: Tensor } {
    return fp32Reference(this.args);
  }

  dispose(): void {
    for (const t of [this.q, this.k, this.v, this.out, this.lse, this.cu]) t?.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** weft_reference_attention of a call's inputs into fresh NaN-filled f32 out32 and lse32 (in out's
 * and lse's shapes); dispose both. */
export function fp32Reference(args: AttentionArgs): { out32: Tensor; lse32: Tensor } {
  const { out, lse, ...rest } = args;
  const out32 = Tensor.empty(out.shape, "f32", { device: out.device }).fill(Number.NaN);
  const lse32 = Tensor.empty(lse!.shape, "f32", { device: out.device }).fill(Number.NaN);
  referenceAttention({ ...rest, out32, lse32 });
  return { out32, lse32 };
}

export interface Errors {
  rel: number;
  nonFinite: number;
  lseMax: number;
  lseBad: number;
}

/** out against out32 (relative L2 over every element, non-finite count), lse against lse32 (largest
 * absolute difference; -inf must match -inf exactly, NaN never passes). */
export function compare(out: Tensor, out32: Tensor, lse: Tensor, lse32: Tensor): Errors {
  const { rel, nonFinite } = deviceError(out, out32);
  const a = lse.download() as Float32Array;
  const b = lse32.download() as Float32Array;
  let lseMax = 0;
  let lseBad = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (x === y) continue;  // equal, -inf included
    const diff = Math.abs(x - y);
    if (!(diff <= LSE_ABS_BAR)) lseBad++;
    if (!(diff <= lseMax)) lseMax = Number.isNaN(diff) ? Number.POSITIVE_INFINITY : diff;
  }
  return { rel, nonFinite, lseMax, lseBad };
}

export function expectWithinBars(e: Errors, what: string): void {
  if (!(e.rel <= OUT_REL_BAR) || e.nonFinite !== 0 || e.lseBad !== 0) {
    throw new Error(`${what}: out rel ${e.rel.toExponential(2)} (bar ${OUT_REL_BAR}), ${e.nonFinite} non-finite, ` +
      `lse max |diff| ${e.lseMax.toExponential(2)} with ${e.lseBad} over ${LSE_ABS_BAR}`);
  }
  expect(e.rel).toBeLessThanOrEqual(OUT_REL_BAR);
}

/** fp64 CPU attention of one bshd problem (tiny shapes only): out [B, Sq, H, D], lse [B, H, Sq]. */
export function cpuAttention(q: Float32Array, k: Float32Array, v: Float32Array, c: AttentionCase): { out: Float64Array; lse: Float64Array } {
  const { batch: B, seqQ: sq, seqK: sk, heads: H, kvHeads: HK, headDim: D } = c;
  const scale = c.scale ?? 1 / Math.sqrt(D);
  const out = new Float64Array(B * sq * H * D);
  const lse = new Float64Array(B * H * sq);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const hk = Math.floor(h / (H / HK));
      for (let i = 0; i < sq; i++) {
        const last = c.causal ? Math.min(sk - 1, i + sk - sq) : sk - 1;
        const s: number[] = [];
        for (let j = 0; j <= last; j++) {
          let dot = 0;
          for (let x = 0; x < D; x++) dot += q[((b * sq + i) * H + h) * D + x]! * k[((b * sk + j) * HK + hk) * D + x]!;
          s.push(dot * scale);
        }
        const mx = s.length ? Math.max(...s) : Number.NEGATIVE_INFINITY;
        let sum = 0;
        const acc = new Float64Array(D);
        s.forEach((sj, j) => {
          const e = Math.exp(sj - mx);
          sum += e;
          for (let x = 0; x < D; x++) acc[x] = acc[x]! + e * v[((b * sk + j) * HK + hk) * D + x]!;
        });
        for (let x = 0; x < D; x++) out[((b * sq + i) * H + h) * D + x] = sum > 0 ? acc[x]! / sum : 0;
        lse[(b * H + h) * sq + i] = sum > 0 ? mx + Math.log(sum) : Number.NEGATIVE_INFINITY;
      }
    }
  }
  return { out, lse };
}
