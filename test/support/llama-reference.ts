// llama-reference.ts — a CPU Llama forward pass, one token at a time with its own KV cache, fp64
// inside and rounded to bf16 wherever the GPU decoder stores a bf16 tensor (so the two differ by
// accumulation order, not by what is stored). The reference the decoder's logits are checked
// against; and a random tiny model written as a safetensors file with Hugging Face Llama names.
import { bf16ToF32, f32ToBf16 } from "../../lib/dtype.ts";
import type { ModelConfig } from "../../examples/serve/config.ts";
import { writeSafetensors } from "../../examples/serve/safetensors.ts";
import { checkpointShapes } from "../../examples/serve/weights.ts";
import { randomArray } from "./gpu.ts";

const r16 = (x: number) => {
  const f = new Float32Array([x]);
  return bf16ToF32(f32ToBf16(f))[0]!;
};
const round = (v: Float64Array | Float32Array) => Float32Array.from(v, r16);

/** A random model with every weight at the scale weights.ts's random model uses; bf16 bits by name. */
export function randomHostModel(cfg: ModelConfig, seed: number): Record<string, Uint16Array> {
  const out: Record<string, Uint16Array> = {};
  let i = 0;
  for (const [name, shape] of Object.entries(checkpointShapes(cfg))) {
    const n = shape.reduce((a, b) => a * b, 1);
    const u = randomArray(n, seed * 1000 + i++);
    let x: Float32Array;
    if (name.endsWith("norm.weight")) x = u.map((v) => 1 + 0.2 * v);
    else if (name.includes("embed_tokens")) x = u.map((v) => Math.sqrt(3) * v);
    else if (name === "lm_head.weight") x = u.map((v) => (4 * Math.sqrt(3) / Math.sqrt(cfg.hidden)) * v);
    else x = u.map((v) => (Math.sqrt(3) / Math.sqrt(shape[1]!)) * v);
    out[name] = f32ToBf16(x);
  }
  return out;
}

export async function writeHostModel(path: string, cfg: ModelConfig, model: Record<string, Uint16Array>): Promise<void> {
  const tensors = Object.fromEntries(Object.entries(model).map(([name, bits]) =>
    [name, { dtype: "BF16" as const, shape: checkpointShapes(cfg)[name]!, data: bits }]));
  await writeSafetensors(path, tensors, { "weft.config": JSON.stringify(cfg) });
}

/** y [n] = W [n, k] · x [k]. */
function matvec(w: Float32Array, x: Float32Array, n: number, k: number): Float64Array {
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    const row = i * k;
    for (let j = 0; j < k; j++) s += w[row + j]! * x[j]!;
    y[i] = s;
  }
  return y;
}

function rmsnorm(x: Float32Array, w: Float32Array, eps: number): Float32Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return round(Float64Array.from(x, (v, i) => v * inv * w[i]!));
}

function rope(x: Float32Array, heads: number, d: number, pos: number, theta: number): Float32Array {
  const out = new Float64Array(x.length);
  const half = d / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      const a = pos * theta ** (-(2 * i) / d), c = Math.cos(a), s = Math.sin(a);
      const x1 = x[h * d + i]!, x2 = x[h * d + half + i]!;
      out[h * d + i] = x1 * c - x2 * s;
      out[h * d + half + i] = x2 * c + x1 * s;
    }
  }
  return round(out);
}

/** One sequence through the model, a token at a time. */
export class ReferenceDecoder {
  readonly cfg: ModelConfig;
  readonly #w: Map<string, Float32Array>;
  #k: Float32Array[][] = [];
  #v: Float32Array[][] = [];

  constructor(cfg: ModelConfig, model: Record<string, Uint16Array>) {
    this.cfg = cfg;
    this.#w = new Map(Object.entries(model).map(([k, v]) => [k, bf16ToF32(v)]));
    this.reset();
  }

  reset(): void {
    this.#k = Array.from({ length: this.cfg.layers }, () => []);
    this.#v = Array.from({ length: this.cfg.layers }, () => []);
  }

  get length(): number {
    return this.#k[0]!.length;
  }

  #W(name: string): Float32Array {
    return this.#w.get(name)!;
  }

  /** Appends `token` at the next position; returns the logits (fp32) that predict the one after. */
  push(token: number): Float32Array {
    const c = this.cfg, H = c.hidden, D = c.headDim, pos = this.length;
    let x = this.#W("model.embed_tokens.weight").slice(token * H, (token + 1) * H);
    for (let l = 0; l < c.layers; l++) {
      const p = `model.layers.${l}.`;
      const h = rmsnorm(x, this.#W(`${p}input_layernorm.weight`), c.rmsEps);
      const q = rope(round(matvec(this.#W(`${p}self_attn.q_proj.weight`), h, c.heads * D, H)), c.heads, D, pos, c.ropeTheta);
      const k = rope(round(matvec(this.#W(`${p}self_attn.k_proj.weight`), h, c.kvHeads * D, H)), c.kvHeads, D, pos, c.ropeTheta);
      const v = round(matvec(this.#W(`${p}self_attn.v_proj.weight`), h, c.kvHeads * D, H));
      this.#k[l]!.push(k);
      this.#v[l]!.push(v);
      const att = new Float64Array(c.heads * D);
      const group = c.heads / c.kvHeads;
      for (let hd = 0; hd < c.heads; hd++) {
        const kv = Math.floor(hd / group);
        const scores = this.#k[l]!.map((kr) => {
          let s = 0;
          for (let i = 0; i < D; i++) s += q[hd * D + i]! * kr[kv * D + i]!;
          return s / Math.sqrt(D);
        });
        const mx = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - mx));
        const z = e.reduce((a, b) => a + b, 0);
        for (let i = 0; i < D; i++) {
          let acc = 0;
          for (let j = 0; j < e.length; j++) acc += e[j]! * this.#v[l]![j]![kv * D + i]!;
          att[hd * D + i] = acc / z;
        }
      }
      const o = round(matvec(this.#W(`${p}self_attn.o_proj.weight`), round(att), H, c.heads * D));
      x = round(Float64Array.from(x, (xv, i) => xv + o[i]!));
      const h2 = rmsnorm(x, this.#W(`${p}post_attention_layernorm.weight`), c.rmsEps);
      const g = round(matvec(this.#W(`${p}mlp.gate_proj.weight`), h2, c.intermediate, H));
      const u = round(matvec(this.#W(`${p}mlp.up_proj.weight`), h2, c.intermediate, H));
      const act = round(Float64Array.from(g, (gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]!));
      const dn = round(matvec(this.#W(`${p}mlp.down_proj.weight`), act, H, c.intermediate));
      x = round(Float64Array.from(x, (xv, i) => xv + dn[i]!));
    }
    const hf = rmsnorm(x, this.#W("model.norm.weight"), c.rmsEps);
    const head = this.#W(c.tieEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    return Float32Array.from(matvec(head, hf, c.vocab, H));
  }
}

/** Top-1 minus top-2 of a row of logits. */
export function topGap(row: ArrayLike<number>): number {
  let a = -Infinity, b = -Infinity;
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) b = v;
  }
  return a - b;
}
