// attention.ts — the decoder's attention, behind one small interface so that the kernel under it can
// change without the decoder noticing.
//
// What the decoder asks for, per layer and step: each query row r (this step's tokens; q heads at
// qColumn of the packed qkv row) attends causally to positions 0 ..= positions[r] of its sequence's
// slot slotIds[r] in the layer's KV cache, whose rows for this step were appended just before. That
// one statement covers prefill (a prompt's rows, the query as long as the keys) and decode (one row
// per sequence, the query shorter than the keys: bottom-right causal).
//
// ReferenceAttention runs lib/ops/nn.ts's cacheAttention, a deliberately simple kernel (one CTA per
// row and head). The attention engine (lib/ops/attention.ts, cuda/attention) plugs in here: its
// varlen form takes a prefill step directly (q, k and v of this step's rows, cuSeqlens = the
// prompts' boundaries, causal), and a decode step once it can read each sequence's keys from its
// slot (per-sequence key offsets and lengths: [slots, maxSeq, kvHeads, headDim] is the layout).
import { cacheAttention } from "../../lib/ops/nn.ts";
import type { Stream } from "../../lib/stream.ts";
import type { Tensor } from "../../lib/tensor.ts";

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
  /** Prefill only: int32 [sequences + 1], the rows where each prompt starts (the last entry: where
   * the last one ends), and the longest prompt. */
  cuSeqlens?: Tensor;
  maxSeqlen?: number;
  /** [rows, >= heads x headDim] bf16. */
  out: Tensor;
  rows: number;
  scale: number;
  stream: Stream;
}

export interface AttentionBackend {
  readonly name: string;
  /** Enqueues the attention of `call.rows` rows on call.stream. */
  forward(call: AttentionCall): void;
}

export class ReferenceAttention implements AttentionBackend {
  readonly name = "reference (cacheAttention)";

  forward(c: AttentionCall): void {
    cacheAttention({
      q: c.qkv, qColumn: c.qColumn, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, kCache: c.kCache, vCache: c.vCache,
      slotIds: c.slotIds, positions: c.positions, out: c.out, rows: c.rows, scale: c.scale, stream: c.stream,
    });
  }
}
