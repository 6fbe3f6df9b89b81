// attention.ts — the decoder's attention, behind one small interface so that the kernel under it can
// change without the decoder noticing.
//
// What the decoder asks for, per layer and step: each query row r (this step's tokens; q heads at
// qColumn of the packed qkv row) attends causally to positions 0 ..= positions[r] of its sequence's
// slot slotIds[r] in the layer's KV cache, whose rows for this step were appended just before. That
// one statement covers prefill (a prompt's rows, the query as long as the keys) and decode (one row
// per sequence, the query shorter than the keys: bottom-right causal). Padding rows (slot -1) see no
// keys and get 0.
//
// EngineAttention (the default on a GPU) runs weft's attention engine (lib/ops/attention.ts,
// cuda/attention) for both phases, reading the keys in place: the cache [slots, maxSeq, kvHeads x
// headDim] viewed as [slots * maxSeq, kvHeads, headDim] rows, sequence b's keys from row
// keyStarts[b] = slot x maxSeq, keyCounts[b] = (its last row's position + 1) of them (sequsedK,
// FlashAttention's seqused_k). The query rows are a packed batch (cuSeqlens: the prompts'
// boundaries, or one row per sequence in decode), copied out of the qkv rows into a dense buffer
// first (the engine reads dense [rows, heads, headDim] through TMA), and out is written in place.
// Decode tiles hold one query of one head each (a 128- or 192-row tile, one row valid): the engine
// reads each sequence's keys once per query head rather than once per kv head there.
//
// ReferenceAttention runs lib/ops/nn.ts's cacheAttention, a deliberately simple kernel (one CTA per
// row and head) that any head dim up to 256 runs: the decoder's fallback where the engine has no
// kernel (head dims other than 64 and 128), and the reference the tests check the engine against.
import { HEAD_DIMS, planAttention, type AttentionArgs, type AttentionPlan } from "../../lib/ops/attention.ts";
import { cacheAttention, copyColumns } from "../../lib/ops/nn.ts";
import type { LaunchPlan } from "../../lib/plan.ts";
import type { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";

export interface AttentionCall {
  phase: "prefill" | "decode";
  /** [rows, stride] bf16: q heads from qColumn, then k, then v (already rotated and appended). */
  qkv: Tensor;
  qColumn: number;
  kColumn: number;
  vColumn: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** This layer's cache, [slots, maxSeq, kvHeads x headDim] each. */
  kCache: Tensor;
  vCache: Tensor;
  /** int32 [rows] each. */
  slotIds: Tensor;
  positions: Tensor;
  /** The step's rows as sequences: int32 [sequences + 1], where each one's rows start (the last
   * entry: where the last one ends). Prefill: the prompts, then the padding rows as one more;
   * decode: one row each (0, 1, ..., rows). */
  cuSeqlens: Tensor;
  /** The most rows of one sequence. */
  maxSeqlen: number;
  /** int32 [sequences + 1]: each sequence's first cache row, slot x maxSeq (padding: 0; the last
   * entry is not read), and int32 [sequences]: its keys, its last row's position + 1 (padding: 0). */
  keyStarts: Tensor;
  keyCounts: Tensor;
  /** [rows, >= heads x headDim] bf16. */
  out: Tensor;
  rows: number;
  scale: number;
  stream: Stream;
  /** Cap on a persistent kernel's CTAs (ranks sharing a GPU: their SM budget); 0 = none. */
  maxCtas: number;
}

/** A launch whose completion the decoder checks once the step is done (its failure, if any). */
export interface AttentionLaunch {
  plan: LaunchPlan;
  seq: number;
}

export interface AttentionBackend {
  readonly name: string;
  /** Enqueues the attention of `call.rows` rows on call.stream. */
  forward(call: AttentionCall): AttentionLaunch | null;
  /** Frees what the backend allocated (idempotent). */
  dispose(): void;
}

export class ReferenceAttention implements AttentionBackend {
  readonly name = "reference (cacheAttention)";

  forward(c: AttentionCall): null {
    cacheAttention({
      q: c.qkv, qColumn: c.qColumn, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, kCache: c.kCache, vCache: c.vCache,
      slotIds: c.slotIds, positions: c.positions, out: c.out, rows: c.rows, scale: c.scale, stream: c.stream,
    });
    return null;
  }

  dispose(): void {}
}

/** Whether EngineAttention runs a model of this head dim. */
export function engineRuns(headDim: number): boolean {
  return HEAD_DIMS.includes(headDim);
}

export class EngineAttention implements AttentionBackend {
  readonly name = "engine (KV cache in place)";
  /** Per qkv buffer (one per rank): the dense copy of its q heads, [rows, heads x headDim]. */
  readonly #dense = new Map<Tensor, Tensor>();
  /** Views of the decoder's buffers, by address and shape (plans hold them). */
  readonly #views = new Map<string, Tensor>();
  /** Decode plans by (the caller's tensors, rows): a decode step's shape is its bucket's; only the meta
   * tensors' contents change. A prefill's batch and longest prompt change per step: it plans per
   * call (host work only, a few µs against the prefill's milliseconds). */
  readonly #plans = new Map<string, AttentionPlan>();

  forward(c: AttentionCall): AttentionLaunch {
    const width = c.heads * c.headDim;
    if (!engineRuns(c.headDim)) throw new Error(`EngineAttention: head dim ${c.headDim} has no engine kernel (${HEAD_DIMS.join(", ")})`);
    if (c.out.shape.length !== 2 || c.out.shape[1] !== width) {
      throw new Error(`EngineAttention: out must be [rows, heads x headDim = ${width}] (the engine writes dense rows; got [${c.out.shape.join(", ")}])`);
    }
    const dense = this.#denseFor(c.qkv, width);
    copyColumns({ src: c.qkv, column: c.qColumn, out: dense, rows: c.rows, stream: c.stream });
    // By the identity of every caller tensor the plan holds (not by address: a freed tensor's
    // address comes back for the next allocation, and a plan must never keep a disposed meta tensor).
    const key = [c.kCache, c.vCache, c.out, c.cuSeqlens, c.keyStarts, c.keyCounts].map((t) => this.#id(t)).join("/") + `/${c.rows}`;
    let plan = c.phase === "decode" ? this.#plans.get(key) : undefined;
    if (!plan) {
      plan = planAttention(this.#args(c, dense));
      if (c.phase === "decode") this.#plans.set(key, plan);
    }
    return { plan, seq: plan.launch() };
  }

  #args(c: AttentionCall, dense: Tensor): AttentionArgs {
    const [slots, maxSeq] = c.kCache.shape as [number, number, number];
    const rows = (t: Tensor, dims: number[]) => this.#view(t, dims);
    return {
      q: rows(dense, [c.rows, c.heads, c.headDim]),
      k: rows(c.kCache, [slots * maxSeq, c.kvHeads, c.headDim]),
      v: rows(c.vCache, [slots * maxSeq, c.kvHeads, c.headDim]),
      out: rows(c.out, [c.rows, c.heads, c.headDim]),
      causal: true, scale: c.scale,
      cuSeqlens: c.cuSeqlens, maxSeqlen: c.maxSeqlen, cuSeqlensK: c.keyStarts, sequsedK: c.keyCounts, maxSeqlenK: maxSeq,
      stream: c.stream, config: c.maxCtas > 0 ? { maxCtas: c.maxCtas } : undefined,
    };
  }

  readonly #ids = new WeakMap<Tensor, number>();
  #nextId = 0;
  #id(t: Tensor): number {
    let id = this.#ids.get(t);
    if (id === undefined) this.#ids.set(t, (id = this.#nextId++));
    return id;
  }

  #denseFor(qkv: Tensor, width: number): Tensor {
    let d = this.#dense.get(qkv);
    if (!d) this.#dense.set(qkv, (d = Tensor.empty([qkv.shape[0]!, width], "bf16", { device: qkv.device })));
    return d;
  }

  /** The leading elements of `t` as `dims` (the same memory; cached). */
  #view(t: Tensor, dims: number[]): Tensor {
    const key = `${t.ptr}/${dims.join("x")}/${t.dtype}`;
    let v = this.#views.get(key);
    if (!v) this.#views.set(key, (v = Tensor.wrap(t.ptr, dims, t.dtype, t.device)));
    return v;
  }

  dispose(): void {
    for (const p of this.#plans.values()) p.dispose();
    this.#plans.clear();
    this.#views.clear();
    for (const t of this.#dense.values()) t.dispose();
    this.#dense.clear();
  }
}
