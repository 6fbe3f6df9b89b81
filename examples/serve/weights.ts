// weights.ts — one rank's shard of the decoder's weights, from a seeded random model or from a
// safetensors file with Hugging Face Llama names.
//
// Sharding (Megatron-style, W ranks, rank r): the packed q | k | v projection and the stacked
// gate | up projection are column-parallel (rank r holds its heads' rows and its slice of the
// intermediate rows, [n, K] layout: y = x · wᵀ); the output and down projections are row-parallel
// (rank r holds rows r·k ..< (r+1)·k of their transposes, [k, N] layout: y = x · w), so that the
// partial products of all ranks sum to the full one. The embedding is on every rank, the LM head on
// rank 0, which samples.
//
// A random model is defined globally, tensor by tensor, from the seed, and every rank cuts its shard
// out of the same global tensor: the model at world 2 is the model at world 1, split.
import { Tensor } from "../../lib/tensor.ts";
import { shardOf, type ModelConfig } from "./config.ts";
import type { SafetensorsFile } from "./safetensors.ts";

export interface LayerWeights {
  attnNorm: Tensor;
  /** [hq + 2 hkv heads x headDim, hidden]: this rank's q, then k, then v rows. */
  qkv: Tensor;
  /** [hq x headDim, hidden]: rows of o_projᵀ. */
  o: Tensor;
  mlpNorm: Tensor;
  /** [2 x inter, hidden]: this rank's gate rows, then its up rows. */
  gateUp: Tensor;
  /** [inter, hidden]: rows of down_projᵀ. */
  down: Tensor;
}

export interface RankWeights {
  embed: Tensor;
  layers: LayerWeights[];
  finalNorm: Tensor;
  /** [vocabPadded, hidden] on rank 0 (zero rows past vocab); null elsewhere. */
  lmHead: Tensor | null;
}

export type WeightSource = { kind: "random"; seed: number } | { kind: "safetensors"; file: SafetensorsFile };

export function disposeWeights(w: RankWeights): void {
  const all = [w.embed, w.finalNorm, ...(w.lmHead && w.lmHead !== w.embed ? [w.lmHead] : []),
    ...w.layers.flatMap((l) => [l.attnNorm, l.qkv, l.o, l.mlpNorm, l.gateUp, l.down])];
  for (const t of all) t.dispose();
}

/** A global tensor's rows [r0, r0 + n) copied into rows [at, at + n) of dst (same row length). */
function copyRows(dst: Tensor, at: number, src: Tensor, r0: number, n: number): void {
  const cols = src.shape[1]!;
  const to = Tensor.wrap(dst.ptr + at * cols * 2, [n, cols], "bf16", dst.device);
  const from = Tensor.wrap(src.ptr + r0 * cols * 2, [n, cols], "bf16", src.device);
  to.copyFrom(from);
}

// ---- random ---------------------------------------------------------------------------------------------------

function seedOf(seed: number, layer: number, tag: number): number {
  return ((seed * 1_000_003 + (layer + 1) * 7919 + tag * 104_729) % 2 ** 52) >>> 0;
}

async function randomWeights(cfg: ModelConfig, seed: number, rank: number, world: number, device: number): Promise<RankWeights> {
  const s = shardOf(cfg, world);
  const { hidden: H, headDim: D, vocab: V } = cfg;
  const biggest = Math.max(V, cfg.heads * D, cfg.kvHeads * D, cfg.intermediate) * H;
  using scratch = Tensor.empty([biggest], "bf16", { device });
  // The global tensor `tag` of `layer`, [rows, cols], uniform with standard deviation `std`.
  const global = (layer: number, tag: number, rows: number, cols: number, std: number, lo?: number, hi?: number) => {
    const a = Math.sqrt(3) * std;
    return Tensor.wrap(scratch.ptr, [rows, cols], "bf16", device).fillRandom(seedOf(seed, layer, tag), lo ?? -a, hi ?? a);
  };
  const norm = (layer: number, tag: number) => {
    const t = Tensor.empty([H], "bf16", { device });
    t.copyFrom(Tensor.wrap(global(layer, tag, 1, H, 0, 0.8, 1.2).ptr, [H], "bf16", device));
    return t;
  };
  const embed = Tensor.empty([V, H], "bf16", { device });
  embed.copyFrom(global(-1, 1, V, H, 1));
  const layers: LayerWeights[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    const qkv = Tensor.empty([s.qkv, H], "bf16", { device });
    copyRows(qkv, 0, global(l, 10, cfg.heads * D, H, 1 / Math.sqrt(H)), rank * s.attn, s.attn);
    copyRows(qkv, s.attn, global(l, 11, cfg.kvHeads * D, H, 1 / Math.sqrt(H)), rank * s.kv, s.kv);
    copyRows(qkv, s.attn + s.kv, global(l, 12, cfg.kvHeads * D, H, 1 / Math.sqrt(H)), rank * s.kv, s.kv);
    const o = Tensor.empty([s.attn, H], "bf16", { device });
    copyRows(o, 0, global(l, 13, cfg.heads * D, H, 1 / Math.sqrt(cfg.heads * D)), rank * s.attn, s.attn);
    const gateUp = Tensor.empty([2 * s.inter, H], "bf16", { device });
    copyRows(gateUp, 0, global(l, 14, cfg.intermediate, H, 1 / Math.sqrt(H)), rank * s.inter, s.inter);
    copyRows(gateUp, s.inter, global(l, 15, cfg.intermediate, H, 1 / Math.sqrt(H)), rank * s.inter, s.inter);
    const down = Tensor.empty([s.inter, H], "bf16", { device });
    copyRows(down, 0, global(l, 16, cfg.intermediate, H, 1 / Math.sqrt(cfg.intermediate)), rank * s.inter, s.inter);
    layers.push({ attnNorm: norm(l, 2), qkv, o, mlpNorm: norm(l, 3), gateUp, down });
  }
  const finalNorm = norm(-1, 4);
  let lmHead: Tensor | null = null;
  if (rank === 0) {
    lmHead = Tensor.empty([s.vocabPadded, H], "bf16", { device }).fill(0);
    // Logits with a standard deviation near 4: a random model whose greedy choices are not near-ties.
    const src = cfg.tieEmbeddings ? embed : global(-1, 5, V, H, 4 / Math.sqrt(H));
    copyRows(lmHead, 0, src, 0, V);
  }
  return { embed, layers, finalNorm, lmHead };
}

// ---- safetensors (Hugging Face Llama names) ----------------------------------------------------------------

/** Rows [k0, k0 + k) of the transpose of a [n, K] matrix, as a [k, n] matrix. */
function transposedRows(src: Uint16Array, n: number, K: number, k0: number, k: number): Uint16Array {
  const out = new Uint16Array(k * n);
  for (let j = 0; j < n; j++) {
    const row = j * K + k0;
    for (let i = 0; i < k; i++) out[i * n + j] = src[row + i]!;
  }
  return out;
}

async function fileWeights(cfg: ModelConfig, f: SafetensorsFile, rank: number, world: number, device: number): Promise<RankWeights> {
  const s = shardOf(cfg, world);
  const { hidden: H, headDim: D, vocab: V } = cfg;
  const up = (bits: Uint16Array, shape: number[]) => Tensor.from(bits, shape, "bf16", { device });
  const rows = (bits: Uint16Array, cols: number, r0: number, n: number) => bits.subarray(r0 * cols, (r0 + n) * cols);
  const embedBits = await f.bf16("model.embed_tokens.weight", [V, H]);
  const embed = up(embedBits, [V, H]);
  const layers: LayerWeights[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    const q = await f.bf16(`${p}self_attn.q_proj.weight`, [cfg.heads * D, H]);
    const k = await f.bf16(`${p}self_attn.k_proj.weight`, [cfg.kvHeads * D, H]);
    const v = await f.bf16(`${p}self_attn.v_proj.weight`, [cfg.kvHeads * D, H]);
    const qkv = new Uint16Array(s.qkv * H);
    qkv.set(rows(q, H, rank * s.attn, s.attn), 0);
    qkv.set(rows(k, H, rank * s.kv, s.kv), s.attn * H);
    qkv.set(rows(v, H, rank * s.kv, s.kv), (s.attn + s.kv) * H);
    const o = transposedRows(await f.bf16(`${p}self_attn.o_proj.weight`, [H, cfg.heads * D]), H, cfg.heads * D, rank * s.attn, s.attn);
    const gate = await f.bf16(`${p}mlp.gate_proj.weight`, [cfg.intermediate, H]);
    const upP = await f.bf16(`${p}mlp.up_proj.weight`, [cfg.intermediate, H]);
    const gateUp = new Uint16Array(2 * s.inter * H);
    gateUp.set(rows(gate, H, rank * s.inter, s.inter), 0);
    gateUp.set(rows(upP, H, rank * s.inter, s.inter), s.inter * H);
    const down = transposedRows(await f.bf16(`${p}mlp.down_proj.weight`, [H, cfg.intermediate]), H, cfg.intermediate, rank * s.inter, s.inter);
    layers.push({
      attnNorm: up(await f.bf16(`${p}input_layernorm.weight`, [H]), [H]),
      qkv: up(qkv, [s.qkv, H]),
      o: up(o, [s.attn, H]),
      mlpNorm: up(await f.bf16(`${p}post_attention_layernorm.weight`, [H]), [H]),
      gateUp: up(gateUp, [2 * s.inter, H]),
      down: up(down, [s.inter, H]),
    });
  }
  const finalNorm = up(await f.bf16("model.norm.weight", [H]), [H]);
  let lmHead: Tensor | null = null;
  if (rank === 0) {
    const head = cfg.tieEmbeddings ? embedBits : await f.bf16("lm_head.weight", [V, H]);
    const padded = new Uint16Array(s.vocabPadded * H);
    padded.set(head);
    lmHead = up(padded, [s.vocabPadded, H]);
  }
  return { embed, layers, finalNorm, lmHead };
}

/** Rank `rank`'s weights on `device`. */
export function rankWeights(source: WeightSource, cfg: ModelConfig, rank: number, world: number, device: number): Promise<RankWeights> {
  return source.kind === "random"
    ? randomWeights(cfg, source.seed, rank, world, device)
    : fileWeights(cfg, source.file, rank, world, device);
}

/** The tensor names and shapes of a model file for `cfg` (Hugging Face Llama layout). */
export function checkpointShapes(cfg: ModelConfig): Record<string, number[]> {
  const { hidden: H, headDim: D } = cfg;
  const out: Record<string, number[]> = { "model.embed_tokens.weight": [cfg.vocab, H], "model.norm.weight": [H] };
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    Object.assign(out, {
      [`${p}input_layernorm.weight`]: [H], [`${p}post_attention_layernorm.weight`]: [H],
      [`${p}self_attn.q_proj.weight`]: [cfg.heads * D, H], [`${p}self_attn.k_proj.weight`]: [cfg.kvHeads * D, H],
      [`${p}self_attn.v_proj.weight`]: [cfg.kvHeads * D, H], [`${p}self_attn.o_proj.weight`]: [H, cfg.heads * D],
      [`${p}mlp.gate_proj.weight`]: [cfg.intermediate, H], [`${p}mlp.up_proj.weight`]: [cfg.intermediate, H],
      [`${p}mlp.down_proj.weight`]: [H, cfg.intermediate],
    });
  }
  if (!cfg.tieEmbeddings) out["lm_head.weight"] = [cfg.vocab, H];
  return out;
}
