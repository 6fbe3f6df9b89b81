// config.ts — the shape of a Llama-style decoder (layers, hidden size, heads, KV heads, intermediate
// size, vocabulary), a few named presets, and the rules a shape must follow to be split over W
// tensor-parallel ranks.
import { BYTE_VOCAB } from "./tokenizer.ts";

export interface ModelConfig {
  vocab: number;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  rmsEps: number;
  ropeTheta: number;
  /** The LM head is the embedding table (no lm_head weight). */
  tieEmbeddings: boolean;
}

/** Presets: `tiny` for tests, `small` for a quick server, then Llama 3.2 1B and Llama 3 8B shapes.
 * Every head dim is one the attention engine runs (64, 128): tiny's too, so the tests run it. */
export const PRESETS: Record<string, ModelConfig> = {
  tiny: { vocab: 264, hidden: 128, layers: 2, heads: 4, kvHeads: 2, headDim: 64, intermediate: 256, rmsEps: 1e-5, ropeTheta: 10000, tieEmbeddings: false },
  small: { vocab: 264, hidden: 1024, layers: 8, heads: 16, kvHeads: 4, headDim: 64, intermediate: 2816, rmsEps: 1e-5, ropeTheta: 10000, tieEmbeddings: false },
  "llama-1b": { vocab: 128256, hidden: 2048, layers: 16, heads: 32, kvHeads: 8, headDim: 64, intermediate: 8192, rmsEps: 1e-5, ropeTheta: 500000, tieEmbeddings: true },
  "llama-8b": { vocab: 128256, hidden: 4096, layers: 32, heads: 32, kvHeads: 8, headDim: 128, intermediate: 14336, rmsEps: 1e-5, ropeTheta: 500000, tieEmbeddings: false },
};

export class ConfigError extends Error {}

function positive(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new ConfigError(`model config: '${name}' must be a positive integer (got ${JSON.stringify(v)})`);
  return v;
}

/** Checks a config for `world` ranks; returns it. Every rule names the field. */
export function validateConfig(c: ModelConfig, world: number): ModelConfig {
  for (const k of ["vocab", "hidden", "layers", "heads", "kvHeads", "headDim", "intermediate"] as const) positive(k, c[k]);
  const rule = (ok: boolean, msg: string) => {
    if (!ok) throw new ConfigError(`model config: ${msg}`);
  };
  rule(c.vocab >= BYTE_VOCAB, `vocab (${c.vocab}) must hold the byte-level tokenizer's ${BYTE_VOCAB} ids`);
  rule(c.hidden % 8 === 0, `hidden (${c.hidden}) must be a multiple of 8 (16-byte rows)`);
  rule(c.headDim % 16 === 0 && c.headDim <= 256, `headDim (${c.headDim}) must be a multiple of 16, at most 256`);
  rule(c.heads % c.kvHeads === 0, `heads (${c.heads}) must be a multiple of kvHeads (${c.kvHeads})`);
  rule(c.heads % world === 0 && c.kvHeads % world === 0, `heads (${c.heads}) and kvHeads (${c.kvHeads}) must split evenly over ${world} ranks`);
  rule(c.intermediate % (8 * world) === 0, `intermediate (${c.intermediate}) must be a multiple of 8 x ${world} ranks`);
  rule(typeof c.rmsEps === "number" && c.rmsEps > 0 && c.rmsEps < 1, `rmsEps must be in (0, 1) (got ${c.rmsEps})`);
  rule(typeof c.ropeTheta === "number" && c.ropeTheta > 1, `ropeTheta must be > 1 (got ${c.ropeTheta})`);
  rule(typeof c.tieEmbeddings === "boolean", "tieEmbeddings must be true or false");
  return c;
}

/** A config from a Hugging Face config.json (LlamaForCausalLM and friends). */
export function fromHuggingFace(j: Record<string, unknown>): ModelConfig {
  const n = (k: string, d?: number) => {
    const v = j[k] ?? d;
    if (typeof v !== "number") throw new ConfigError(`config.json: '${k}' is missing or not a number`);
    return v;
  };
  const hidden = n("hidden_size"), heads = n("num_attention_heads");
  return {
    vocab: n("vocab_size"), hidden, layers: n("num_hidden_layers"), heads, kvHeads: n("num_key_value_heads", heads),
    headDim: n("head_dim", hidden / heads), intermediate: n("intermediate_size"), rmsEps: n("rms_norm_eps", 1e-5),
    ropeTheta: n("rope_theta", 10000), tieEmbeddings: j.tie_word_embeddings === true,
  };
}

/** One rank's share of the shape. */
export function shardOf(c: ModelConfig, world: number) {
  const hq = c.heads / world, hkv = c.kvHeads / world, d = c.headDim;
  return {
    hq, hkv,
    /** Columns of the packed q | k | v row: hq + 2 hkv heads. */
    qkv: (hq + 2 * hkv) * d,
    attn: hq * d,
    kv: hkv * d,
    inter: c.intermediate / world,
    /** The LM head's rows, padded so fp32 logits rows are 16-byte multiples. */
    vocabPadded: Math.ceil(c.vocab / 4) * 4,
  };
}

/** Weights, bytes (bf16), of the whole model. */
export function modelBytes(c: ModelConfig): number {
  const d = c.headDim;
  const perLayer = c.hidden * (c.heads + 2 * c.kvHeads) * d + c.heads * d * c.hidden + 3 * c.hidden * c.intermediate + 2 * c.hidden;
  return 2 * (c.vocab * c.hidden * (c.tieEmbeddings ? 1 : 2) + c.layers * perLayer + c.hidden);
}
