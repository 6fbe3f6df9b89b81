// attention-cache.ts (test support) — attention over a slotted KV cache read in place (sequsedK):
// k and v are [slots * maxSeq, Hkv, D], every row random (the rows past a sequence's keys too, so a
// key read past its count shows), sequence b's keys start at its slot's first row and count
// used[b]; q holds this step's rows of each sequence (decode: 1, prefill: its keys' count, or any
// mix). Two references: weft_reference_attention with the same sequsedK, and the same sequences
// with their keys copied into a dense packed batch, run by the engine's and the reference's plain
// varlen path (no sequsedK anywhere), so a bug shared by both kernels' sequsedK handling cannot pass.
import type { AttentionArgs } from "../../lib/ops/attention.ts";
import { Tensor } from "../../lib/tensor.ts";
import { fp32Reference } from "./attention.ts";

export interface CacheCase {
  slots: number;
  maxSeq: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Per sequence: its slot, its keys' count (<= maxSeq) and its queries this step (<= keys, or 1). */
  slotOf: number[];
  used: number[];
  queries: number[];
}

export function cacheCaseName(c: CacheCase): string {
  return `cache ${c.slots} x ${c.maxSeq}, used (${c.used.join(", ")}), queries (${c.queries.join(", ")}), H ${c.heads}/${c.kvHeads} D ${c.headDim}`;
}

const offsetsOf = (lengths: number[]) => lengths.reduce((o, n) => (o.push(o.at(-1)! + n), o), [0]);

/** A case of `batch` sequences in distinct random slots: lengths from `lengths` (cycled). */
export function randomCacheCase(seed: number, o: Omit<CacheCase, "slotOf" | "used" | "queries"> & { used: number[]; decode: boolean[] }): CacheCase {
  let s = (seed * 2654435761) >>> 0 || 1;
  const next = () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), (s >>> 0) / 4294967296);
  const free = Array.from({ length: o.slots }, (_, i) => i);
  const slotOf = o.used.map(() => free.splice(Math.floor(next() * free.length), 1)[0]!);
  const queries = o.used.map((n, b) => (o.decode[b % o.decode.length] ? 1 : n));
  return { slots: o.slots, maxSeq: o.maxSeq, heads: o.heads, kvHeads: o.kvHeads, headDim: o.headDim, slotOf, used: [...o.used], queries };
}

export class CacheProblem implements Disposable {
  readonly c: CacheCase;
  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  readonly out: Tensor;
  readonly lse: Tensor;
  readonly cuQ: Tensor;
  /** Key starts: slot x maxSeq per sequence, then an entry the kernels must not read. */
  readonly cuK: Tensor;
  readonly usedK: Tensor;
  readonly #owned: Tensor[];

  constructor(c: CacheCase, seed: number, device = 0) {
    this.c = c;
    const { heads: h, kvHeads: hk, headDim: d } = c;
    const totalQ = c.queries.reduce((a, n) => a + n, 0);
    this.q = Tensor.empty([totalQ, h, d], "bf16", { device }).fillRandom(seed);
    this.k = Tensor.empty([c.slots * c.maxSeq, hk, d], "bf16", { device }).fillRandom(seed + 1);
    this.v = Tensor.empty([c.slots * c.maxSeq, hk, d], "bf16", { device }).fillRandom(seed + 2);
    this.out = Tensor.empty([totalQ, h, d], "bf16", { device }).fill(Number.NaN);
    this.lse = Tensor.empty([h, totalQ], "f32", { device }).fill(Number.NaN);
    this.cuQ = Tensor.from(Int32Array.from(offsetsOf(c.queries)), [c.queries.length + 1], "i32", { device });
    this.cuK = Tensor.from(Int32Array.from([...c.slotOf.map((s) => s * c.maxSeq), 1 << 30]), [c.used.length + 1], "i32", { device });
    this.usedK = Tensor.from(Int32Array.from(c.used), [c.used.length], "i32", { device });
    this.#owned = [this.q, this.k, this.v, this.out, this.lse, this.cuQ, this.cuK, this.usedK];
  }

  get args(): AttentionArgs {
    return {
      q: this.q, k: this.k, v: this.v, out: this.out, lse: this.lse, causal: true, cuSeqlens: this.cuQ, cuSeqlensK: this.cuK,
      sequsedK: this.usedK, maxSeqlen: Math.max(1, ...this.c.queries), maxSeqlenK: this.c.maxSeq,
    };
  }

  /** New slots and key counts for the same batch and query counts (uploaded, synchronous). */
  relocate(slotOf: number[], used: number[]): void {
    this.c.slotOf = slotOf;
    this.c.used = used;
    this.cuK.upload(Int32Array.from([...slotOf.map((s) => s * this.c.maxSeq), 1 << 30]));
    this.usedK.upload(Int32Array.from(used));
  }

  poison(): void {
    this.out.fill(Number.NaN);
    this.lse.fill(Number.NaN);
  }

  /** The fp32 reference kernel over the cache in place, with the same sequsedK. */
  reference(): { out32: Tensor; lse32: Tensor } {
    return fp32Reference(this.args);
  }

  /** Each sequence's keys copied out of its slot into one dense packed batch: the plain varlen
   * problem (cuSeqlensK = prefix sums, no sequsedK) with the same q. Dispose what it returns. */
  packed(): { k: Tensor; v: Tensor; cuK: Tensor; dispose(): void } {
    const { c } = this;
    const total = c.used.reduce((a, n) => a + n, 0);
    const width = c.kvHeads * c.headDim, rowBytes = width * 2;
    const k = Tensor.empty([Math.max(total, 1), c.kvHeads, c.headDim], "bf16", { device: this.q.device }).fill(Number.NaN);
    const v = Tensor.empty(k.shape, "bf16", { device: this.q.device }).fill(Number.NaN);
    let at = 0;
    c.used.forEach((n, b) => {
      if (n === 0) return;
      for (const [dst, src] of [[k, this.k], [v, this.v]] as const) {
        using from = Tensor.wrap(src.ptr + c.slotOf[b]! * c.maxSeq * rowBytes, [n, width], "bf16", src.device);
        using to = Tensor.wrap(dst.ptr + at * rowBytes, [n, width], "bf16", dst.device);
        to.copyFrom(from);
      }
      at += n;
    });
    const cuK = Tensor.from(Int32Array.from(offsetsOf(c.used)), [c.used.length + 1], "i32", { device: this.q.device });
    return { k, v, cuK, dispose: () => [k, v, cuK].forEach((t) => t.dispose()) };
  }

  dispose(): void {
    for (const t of this.#owned) t.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
