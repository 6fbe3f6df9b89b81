// rank.ts — what one tensor-parallel rank of the decoder holds: its communicator, weights, KV cache,
// activation buffers sized for the largest step, and its tensor-parallel plans, made on first use
// for each (layer, op, row bucket) and kept.
//
// Buffers (R rows = the largest bucket; prefill shards and decode batches both fit; O = the largest
// decode bucket, >= S):
//   meta     int32: ids [R] | positions [R] | slot ids [R] | last rows [S] | the step's sequences for
//            attention (attention.ts AttentionCall): cu_seqlens [O + 2] | key starts [O + 2] | key
//            counts [O + 1] (prefill: S prompts and the padding; decode: O rows, one each)
//   resid    [R, hidden]   the residual stream (decode: the batch; prefill: this rank's token shard)
//   normed   [R, hidden]   the normalized stream, the GEMMs' input
//   qkv      [R, (hq + 2 hkv) x headDim]    attn [R, hq x headDim]
//   gateUp   [R, 2 x inter]                 act  [R, inter]
//   symmetric, per bucket: the all-reduce / reduce-scatter outputs of the o and down projections,
//   and (prefill, W > 1) the gathered final stream
//   rank 0: lastHidden [S', hidden], logits f32 [S', vocabPadded] (S' = the largest decode bucket)
import type { Communicator } from "../../lib/comm.ts";
import type { CollectivePlan } from "../../lib/comm.ts";
import type { SymmetricTensor } from "../../lib/heap.ts";
import type { TpPath, TpPlan } from "../../lib/ops/tp.ts";
import { Tensor } from "../../lib/tensor.ts";
import { shardOf, type ModelConfig } from "./config.ts";
import { disposeWeights, type RankWeights } from "./weights.ts";
import "../../lib/ops/tp.ts";  // adds comm.allGatherGemm and the others

function once<T>(m: Map<string, T>, key: string, make: () => T): T {
  let v = m.get(key);
  if (v === undefined) m.set(key, (v = make()));
  return v;
}

export interface RankShape {
  cfg: ModelConfig;
  world: number;
  slots: number;
  contextLength: number;
  /** Rows of the largest step (prefill bucket or decode bucket). */
  rows: number;
  /** Rows of the largest decode bucket (>= slots): the LM head's and sampler's rows. */
  outRows: number;
  path: TpPath;
  /** Cap on a local GEMM's CTAs (ranks sharing a GPU), 0 = none. */
  maxCtas: number;
}

export class Rank {
  readonly comm: Communicator;
  readonly weights: RankWeights;
  readonly shape: RankShape;
  readonly meta: Tensor;
  readonly resid: Tensor;
  readonly normed: Tensor;
  readonly qkv: Tensor;
  readonly attn: Tensor;
  readonly gateUp: Tensor;
  readonly act: Tensor;
  readonly kCache: Tensor[];
  readonly vCache: Tensor[];
  readonly lastHidden: Tensor | null;
  readonly logits: Tensor | null;
  readonly #owned: Tensor[] = [];
  readonly #symmetric = new Map<string, SymmetricTensor>();
  readonly #plans = new Map<string, TpPlan>();
  readonly #collectives = new Map<string, CollectivePlan>();
  readonly #views = new Map<string, Tensor>();

  constructor(comm: Communicator, weights: RankWeights, shape: RankShape) {
    this.comm = comm;
    this.weights = weights;
    this.shape = shape;
    const { cfg, rows: R, slots: S } = shape;
    const s = shardOf(cfg, shape.world);
    const device = comm.device;
    const own = (dims: number[], dtype: "bf16" | "f32" | "i32" = "bf16") => {
      const t = Tensor.empty(dims, dtype, { device });
      this.#owned.push(t);
      return t;
    };
    this.meta = own([this.metaAt.end], "i32");
    this.resid = own([R, cfg.hidden]);
    this.normed = own([R, cfg.hidden]);
    this.qkv = own([R, s.qkv]);
    this.attn = own([R, s.attn]);
    this.gateUp = own([R, 2 * s.inter]);
    this.act = own([R, s.inter]);
    this.kCache = [];
    this.vCache = [];
    for (let l = 0; l < cfg.layers; l++) {
      // Zeroed: a slot's unused rows are never read, but a NaN there would be hard to explain.
      this.kCache.push(own([S, shape.contextLength, s.kv]).fill(0));
      this.vCache.push(own([S, shape.contextLength, s.kv]).fill(0));
    }
    this.lastHidden = comm.rank === 0 ? own([shape.outRows, cfg.hidden]) : null;
    this.logits = comm.rank === 0 ? own([shape.outRows, s.vocabPadded], "f32") : null;
  }

  get device(): number {
    return this.comm.device;
  }

  /** Offsets (in int32 elements) of the meta sections; `end`: its length. */
  get metaAt() {
    const R = this.shape.rows, S = this.shape.slots, O = this.shape.outRows;
    const cuSeqlens = 3 * R + S, keyStarts = cuSeqlens + O + 2, keyCounts = keyStarts + O + 2;
    return { ids: 0, positions: R, slots: 2 * R, lastRows: 3 * R, cuSeqlens, keyStarts, keyCounts, end: keyCounts + O + 1 };
  }

  /** A view of `t` from element `offset` with shape `dims` (cached: plans hold their tensors). */
  view(t: Tensor, offset: number, dims: number[]): Tensor {
    const key = `${t.ptr}/${offset}/${dims.join("x")}/${t.dtype}`;
    let v = this.#views.get(key);
    if (!v) {
      const bytes = t.dtype === "f32" || t.dtype === "i32" ? 4 : 2;
      v = Tensor.wrap(t.ptr + offset * bytes, dims, t.dtype, t.device);
      this.#views.set(key, v);
    }
    return v;
  }

  /** A symmetric tensor of this communicator, made once per key. Every rank asks for the same
   * keys in the same order (the decoder drives them in lockstep), so the heap stays symmetric. */
  symmetric(key: string, dims: number[]): SymmetricTensor {
    return once(this.#symmetric, key, () => this.comm.empty(dims, "bf16"));
  }

  /** The tensor-parallel plan for `key`, made by `make` on first use (collective: every rank
   * reaches the same key in the same order). */
  plan(key: string, make: () => TpPlan): TpPlan {
    return once(this.#plans, key, make);
  }

  collective(key: string, make: () => CollectivePlan): CollectivePlan {
    return once(this.#collectives, key, make);
  }

  get planCount(): number {
    return this.#plans.size;
  }

  /** How the plans run: "fused ctas 12, sequential 4", for the startup line and the bench. */
  planSummary(): Map<string, number> {
    const m = new Map<string, number>();
    for (const p of this.#plans.values()) {
      const k = `${p.op} ${p.choice.path}${p.choice.path === "fused" ? ` ${p.choice.mover}` : ""}`;
      m.set(k, (m.get(k) ?? 0) + 1);
    }
    return m;
  }

  /** Frees plans, symmetric tensors, buffers and weights (every rank in the same order). */
  dispose(): void {
    for (const p of this.#plans.values()) p.dispose();
    this.#plans.clear();
    this.#collectives.clear();
    for (const t of this.#symmetric.values()) t.dispose();
    this.#symmetric.clear();
    this.#views.clear();
    for (const t of this.#owned) t.dispose();
    disposeWeights(this.weights);
  }
}
