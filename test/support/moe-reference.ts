// moe-reference.ts (test support) — what the MoE checks compare against: deterministic routings
// (uniform, skewed, identical), the receive layout computed serially on the CPU from every rank's
// routing (the definition in cuda/moe/moe.h, written out as loops), and thin wrappers of the GPU
// references (weft.h, "Test support").
import { DTYPES } from "../../lib/dtype.ts";
import { check, native } from "../../lib/native.ts";
import type { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";

export type RoutingKind = "uniform" | "skewed" | "identical";

/** xorshift32 from a seed: the same sequence in every process. */
export function rng(seed: number): () => number {
  let s = (seed * 2654435761) >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

/** k distinct experts per token, as [tokens * k] (token-major).
 *   uniform    every expert equally likely;
 *   skewed     70% of tokens send slot 0 to expert 0 (one hot expert) and a third of the experts
 *              (those with e % 3 == 2, as far as k allows) get nothing;
 *   identical  every token goes to the same k experts (the same pattern over and over). */
export function makeRouting(kind: RoutingKind, tokens: number, experts: number, topk: number, seed: number): Int32Array {
  const next = rng(seed);
  const ids = new Int32Array(tokens * topk);
  let allowed = Array.from({ length: experts }, (_, e) => e);
  if (kind === "skewed") {
    const empty = allowed.filter((e) => e % 3 === 2).slice(0, Math.max(0, experts - topk));
    allowed = allowed.filter((e) => !empty.includes(e));
  }
  const fixed = pick(allowed, topk, next);
  for (let t = 0; t < tokens; t++) {
    let chosen: number[];
    if (kind === "identical") chosen = fixed;
    else if (kind === "skewed" && next() < 0.7) chosen = [0, ...pick(allowed.filter((e) => e !== 0), topk - 1, next)];
    else chosen = pick(allowed, topk, next);
    ids.set(chosen, t * topk);
  }
  return ids;
}

function pick(from: number[], n: number, next: () => number): number[] {
  const pool = [...from];
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(pool.splice(Math.floor(next() * pool.length), 1)[0]!);
  return out;
}

/** Positive routing weights in [0.05, 1), [tokens * k]. */
export function makeWeights(tokens: number, topk: number, seed: number): Float32Array {
  const next = rng(seed ^ 0x5bd1e995);
  return Float32Array.from({ length: tokens * topk }, () => 0.05 + 0.95 * next());
}

export interface OwnerLayout {
  /** [localExperts + 1]. */
  expertOffsets: Int32Array;
  expertCounts: Int32Array;
  /** [world * localExperts]. */
  sourceCounts: Int32Array;
  /** [rows used * 4]: source, token, slot, 0; -1s on padding rows. */
  rowSource: Int32Array;
  rows: number;
}

/** An owner's real rows (padding rows skipped) and where each came from: its token's row in the
 * sources' inputs stacked `stride` rows per source rank. */
export function realRows(owner: OwnerLayout, stride: number): { rows: number[]; sources: number[] } {
  const rows: number[] = [], sources: number[] = [];
  for (let row = 0; row < owner.rows; row++) {
    const q = owner.rowSource[row * 4]!;
    if (q < 0) continue;
    rows.push(row);
    sources.push(q * stride + owner.rowSource[row * 4 + 1]!);
  }
  return { rows, sources };
}

export interface Layout {
  owners: OwnerLayout[];
  /** where[s][t * k + j] = [owner, row]. */
  where: [number, number][][];
}

/** The receive layout of every owner: expert-contiguous, each expert padded to 128 rows, sources
 * in the order o, o - 1, o - 2, ... (mod W), each source's rows in (token, slot) order. */
export function referenceLayout(world: number, experts: number, topk: number, ids: readonly Int32Array[]): Layout {
  const El = experts / world;
  const where: [number, number][][] = ids.map((a) => Array.from({ length: a.length }, () => [-1, -1] as [number, number]));
  const owners: OwnerLayout[] = [];
  for (let o = 0; o < world; o++) {
    const expertOffsets = new Int32Array(El + 1), expertCounts = new Int32Array(El), sourceCounts = new Int32Array(world * El);
    const rows: number[][] = [];
    let row = 0;
    for (let le = 0; le < El; le++) {
      const e = o * El + le;
      expertOffsets[le] = row;
      for (let d = 0; d < world; d++) {
        const q = (o - d + world) % world;
        const a = ids[q]!;
        for (let i = 0; i < a.length; i++) {
          if (a[i] !== e) continue;
          where[q]![i] = [o, row];
          rows.push([q, Math.floor(i / topk), i % topk, 0]);
          sourceCounts[q * El + le]!++;
          row++;
        }
      }
      expertCounts[le] = row - expertOffsets[le]!;
      while (row % 128 !== 0) {
        rows.push([-1, -1, -1, 0]);
        row++;
      }
    }
    expertOffsets[El] = row;
    owners.push({ expertOffsets, expertCounts, sourceCounts, rowSource: Int32Array.from(rows.flat()), rows: row });
  }
  return { owners, where };
}

function h(stream: Stream | null | undefined): number | null {
  return stream ? stream.handle : null;
}

export function referenceRoute(logits: Tensor, tokens: number, topk: number, normalize: boolean, ids: Tensor, weights: Tensor): void {
  check(native().weft_moe_reference_route(logits.ptr, DTYPES[logits.dtype].code, tokens, logits.shape[1]!, topk, normalize ? 1 : 0,
    ids.ptr, weights.ptr, null), "referenceRoute");
}

/** out[i] = src[index[i]] (bf16 rows); a bad index gives a NaN row. */
export function gatherRows(src: Tensor, index: Tensor, out: Tensor, stream?: Stream | null): void {
  check(native().weft_moe_reference_gather(src.ptr, src.shape[0]!, src.shape[1]!, index.ptr, index.numel, out.ptr, h(stream)), "gatherRows");
}

/** out[t] (f32) = Σ_j weights[t, j] rows[index[t, j]]. */
export function referenceCombine(rows: Tensor, index: Tensor, weights: Tensor, tokens: number, topk: number, out: Tensor,
  stream?: Stream | null): void {
  check(native().weft_moe_reference_combine(rows.ptr, DTYPES[rows.dtype].code, rows.shape[0]!, rows.shape[1]!, index.ptr, weights.ptr,
    tokens, topk, out.ptr, h(stream)), "referenceCombine");
}

/** c[cIndex[i]] = a[aIndex[i]] · op(b) in fp32, for i < m. */
export function rowsGemm(a: Tensor, aIndex: Tensor | null, b: { ptr: number; ld: number; nk: boolean }, c: Tensor,
  cIndex: Tensor | null, m: number, n: number, k: number, stream?: Stream | null): void {
  check(native().weft_moe_reference_rows_gemm(a.ptr, DTYPES[a.dtype].code, a.shape[1]!, aIndex ? aIndex.ptr : null, b.ptr, b.ld,
    b.nk ? 1 : 0, c.ptr, c.shape[1]!, cIndex ? cIndex.ptr : null, m, n, k, h(stream)), "rowsGemm");
}

/** out [rows, inter] = silu(h[:, :inter]) · h[:, inter:]. */
export function swiglu(hIn: Tensor, rows: number, inter: number, out: Tensor, stream?: Stream | null): void {
  check(native().weft_moe_reference_swiglu(hIn.ptr, DTYPES[hIn.dtype].code, rows, inter, out.ptr, DTYPES[out.dtype].code, h(stream)),
    "swiglu");
}

/** A non-owning [count, cols] view of t from row `row0`. */
export function rowsOf(t: Tensor, row0: number, count: number): Tensor {
  const cols = t.numel / t.shape[0]!;
  return Tensor.wrap(t.ptr + row0 * cols * DTYPES[t.dtype].bytes, [count, cols], t.dtype, t.device);
}
