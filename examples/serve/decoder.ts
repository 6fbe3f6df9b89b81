// decoder.ts — a tensor-parallel Llama-style decoder on weft, the GPU Model of the server.
//
// W ranks (every local GPU through Communicator.local, or several ranks sharing one GPU, each with
// 1/W of its SMs), driven in lockstep from this one process: each op is enqueued on every rank's
// stream before the next op, and the tensor-parallel ops go out together (TpPlan.launchAll).
//
//   prefill (sequence parallel: rank r holds rows r·T/W ..< (r+1)·T/W of the residual stream)
//     norm(shard) → allGatherGemm(qkv) → rope, append k v, attention (all T rows, this rank's heads,
//     over the cache: attention.ts)
//     → gemmReduceScatter(o) → add + norm(shard) → allGatherGemm(gate | up) → swiglu
//     → gemmReduceScatter(down) → add ... → final norm → all-gather the stream → rank 0: the
//     prompts' last rows → LM head → sample
//   decode (the batch on every rank)
//     norm → qkv GEMM → rope, append, attention over the cache (query shorter than the keys)
//     → gemmAllReduce(o) → add + norm → gate | up GEMM → swiglu → gemmAllReduce(down) → add ...
//     → rank 0: final norm → LM head → sample
//
// With one rank there is nothing to communicate: the tensor-parallel GEMMs are our plain GEMM.
//
// Steps pad their rows to a few buckets (decode: powers of two up to the slots; prefill: multiples of
// 128 x W, doubling) so that each bucket's plans are made once. Padding rows have slot -1: their
// keys are never stored and their attention reads nothing (to the engine they are sequences with no
// keys: one per decode padding row, one for all of a prefill's).
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { gemmSync } from "../../lib/ops/gemm.ts";
import { embedding, kvAppend, rmsNorm, rope, swiglu } from "../../lib/ops/nn.ts";
import { Sampler } from "../../lib/ops/sample.ts";
import { TpPlan, type TpPath } from "../../lib/ops/tp.ts";
import type { LaunchPlan } from "../../lib/plan.ts";
import type { Tensor } from "../../lib/tensor.ts";
import { EngineAttention, engineRuns, ReferenceAttention, type AttentionBackend } from "./attention.ts";
import { shardOf, validateConfig, type ModelConfig } from "./config.ts";
import type { DecodeEntry, Model, ModelInfo, PrefillEntry, Sampling, StepInput, StepOutput } from "./model.ts";
import { Rank } from "./rank.ts";
import { EOS } from "./tokenizer.ts";
import { rankWeights, type WeightSource } from "./weights.ts";

export interface DecoderOptions {
  config: ModelConfig;
  /** One rank per entry, rank i on GPU devices[i]; a GPU named twice is shared (smBudget). */
  devices: number[];
  weights: WeightSource;
  slots: number;
  contextLength: number;
  /** Default: contextLength (any admissible prompt fits one step). */
  maxPrefillTokens?: number;
  /** "auto" (the cost model's choice per op, fused where it predicts faster), "fused" or "sequential". */
  path?: TpPath;
  /** Default: EngineAttention where the engine has the head dim (64, 128), else ReferenceAttention.
   * One given here stays the caller's to dispose. */
  attention?: AttentionBackend;
  /** Symmetric heap per rank, bytes (default 2 GiB). */
  heapBytes?: number;
  /** Keep rank 0's logits of the latest step (tests). */
  keepLogits?: boolean;
  name?: string;
}

function pow2Buckets(max: number, unit: number): number[] {
  const out: number[] = [];
  for (let b = unit; ; b *= 2) {
    out.push(b);
    if (b >= max) return out;
  }
}

function bucketFor(n: number, buckets: number[]): number {
  const b = buckets.find((x) => x >= n);
  if (b === undefined) throw new Error(`decoder: ${n} rows exceed the largest bucket (${buckets.at(-1)})`);
  return b;
}

export class Decoder implements Model {
  readonly info: ModelInfo;
  readonly config: ModelConfig;
  readonly ranks: Rank[];
  readonly path: TpPath;
  readonly attention: AttentionBackend;
  readonly #ownsAttention: boolean;
  readonly #comms: Communicator[];
  readonly #sampler: Sampler;
  readonly #decodeBuckets: number[];
  readonly #prefillBuckets: number[];
  readonly #meta: Int32Array;
  readonly #keepLogits: boolean;
  /** Rank 0's logits of the latest pass, [rows, vocab] (with keepLogits). */
  lastLogits: Float32Array[] = [];
  #disposed = false;

  private constructor(o: DecoderOptions, comms: Communicator[], ranks: Rank[], sampler: Sampler, decodeBuckets: number[], prefillBuckets: number[]) {
    this.config = o.config;
    this.#comms = comms;
    this.ranks = ranks;
    this.path = o.path ?? "auto";
    this.attention = o.attention ?? (engineRuns(o.config.headDim) ? new EngineAttention() : new ReferenceAttention());
    this.#ownsAttention = o.attention === undefined;
    this.#sampler = sampler;
    this.#decodeBuckets = decodeBuckets;
    this.#prefillBuckets = prefillBuckets;
    this.#meta = new Int32Array(ranks[0]!.meta.numel);
    this.#keepLogits = o.keepLogits ?? false;
    const W = comms.length;
    const shared = new Set(o.devices).size < o.devices.length;
    this.info = {
      name: o.name ?? "weft-llama", contextLength: o.contextLength, slots: o.slots, maxPrefillTokens: o.maxPrefillTokens ?? o.contextLength,
      vocab: o.config.vocab, eosToken: EOS, world: W,
      description: `${o.config.layers} layers x ${o.config.hidden}, ${W} rank${W > 1 ? "s" : ""} on GPU${shared ? ` ${o.devices[0]} (shared)` : `s ${o.devices.join(", ")}`}, ` +
        `${W > 1 ? `path ${this.path}` : "one rank: plain GEMMs, nothing to communicate"}, attention ${this.attention.name}`,
    };
  }

  static async create(o: DecoderOptions): Promise<Decoder> {
    const W = o.devices.length;
    const cfg = validateConfig(o.config, W);
    if (!(o.contextLength >= 2)) throw new Error(`decoder: contextLength must be >= 2 (got ${o.contextLength})`);
    const maxPrefill = o.maxPrefillTokens ?? o.contextLength;
    const shared = new Set(o.devices).size < o.devices.length;
    // Ranks on one GPU: each gets 1/W of its SMs, so that their persistent kernels, which wait for
    // each other, are resident together (CommunicatorOptions.smBudget).
    const smBudget = shared ? Math.floor(deviceInfo(o.devices[0]!).smCount / W) : undefined;
    const comms = await Communicator.local({ devices: o.devices, heapBytes: o.heapBytes ?? 2 << 30, smBudget, timeoutMs: 30_000 });
    const decodeBuckets = pow2Buckets(o.slots, 1);
    const prefillBuckets = pow2Buckets(maxPrefill, 128 * W);
    const shape = {
      cfg, world: W, slots: o.slots, contextLength: o.contextLength, rows: Math.max(decodeBuckets.at(-1)!, prefillBuckets.at(-1)!),
      outRows: decodeBuckets.at(-1)!, path: o.path ?? "auto", maxCtas: smBudget ?? 0,
    };
    const ranks: Rank[] = [];
    let sampler: Sampler | undefined;
    try {
      for (const c of comms) ranks.push(new Rank(c, await rankWeights(o.weights, cfg, c.rank, W, c.device), shape));
      sampler = Sampler.create(comms[0]!.device, shape.outRows);
      return new Decoder(o, comms, ranks, sampler, decodeBuckets, prefillBuckets);
    } catch (e) {
      sampler?.dispose();
      for (const r of ranks) r.dispose();
      await Communicator.disposeAll(comms);
      throw e;
    }
  }

  async step(input: StepInput): Promise<StepOutput> {
    if (this.#disposed) throw new Error("decoder: step after dispose");
    this.lastLogits = [];
    const prefill = input.prefill.length > 0 ? await this.#prefill(input.prefill) : new Int32Array(0);
    const decode = input.decode.length > 0 ? await this.#decode(input.decode) : new Int32Array(0);
    return { prefill, decode };
  }

  release(_slot: number): void {
    // A slot's cache rows are overwritten by its next sequence's prefill before any read.
  }

  // ---- the passes ---------------------------------------------------------------------------------------------

  /** out[:m] = a[:m] · bᵀ on the rank's stream (a local GEMM: no communication). */
  #gemm(r: Rank, a: Tensor, b: Tensor, out: Tensor, m: number) {
    gemmSync(a, b, out, {
      transB: true, shape: { m, n: b.shape[0]!, k: b.shape[1]! }, stream: r.comm.stream,
      config: r.shape.maxCtas ? { maxCtas: r.shape.maxCtas } : undefined,
    });
  }

  /** Uploads the step's ids, positions and slot ids (the previous step is done on every rank). */
  #upload(): void {
    for (const r of this.ranks) r.meta.upload(this.#meta);
  }

  /** One attention layer for `rows` rows of qkv: rope, append the keys, attend. `seqs`: the step's
   * sequences in meta's attention sections (n of them, at most `longest` rows each). */
  #attention(l: number, rows: number, phase: "prefill" | "decode", seqs: { n: number; longest: number }, pending: [LaunchPlan, number][]) {
    const cfg = this.config;
    const s = shardOf(cfg, this.ranks.length);
    for (const r of this.ranks) {
      const at = r.metaAt;
      const positions = r.view(r.meta, at.positions, [rows]);
      const slotIds = r.view(r.meta, at.slots, [rows]);
      const stream = r.comm.stream;
      rope({ x: r.qkv, positions, heads: s.hq + s.hkv, headDim: cfg.headDim, theta: cfg.ropeTheta, rows, stream });
      kvAppend({ src: r.qkv, kColumn: s.attn, vColumn: s.attn + s.kv, kCache: r.kCache[l]!, vCache: r.vCache[l]!, slotIds, positions, rows, stream });
      const launched = this.attention.forward({
        phase, qkv: r.qkv, qColumn: 0, kColumn: s.attn, vColumn: s.attn + s.kv, heads: s.hq, kvHeads: s.hkv, headDim: cfg.headDim,
        kCache: r.kCache[l]!, vCache: r.vCache[l]!, slotIds, positions, out: r.attn, rows, scale: 1 / Math.sqrt(cfg.headDim), stream,
        cuSeqlens: r.view(r.meta, at.cuSeqlens, [seqs.n + 1]), maxSeqlen: seqs.longest,
        keyStarts: r.view(r.meta, at.keyStarts, [seqs.n + 1]), keyCounts: r.view(r.meta, at.keyCounts, [seqs.n]),
        maxCtas: r.shape.maxCtas,
      });
      if (launched) pending.push([launched.plan, launched.seq]);
    }
  }

  /** Meta's attention sections for sequence i: its rows start at `row`, its keys are the first
   * `keys` rows of `slot` (slot < 0: padding, no keys). */
  #sequence(i: number, row: number, slot: number, keys: number): void {
    const at = this.ranks[0]!.metaAt, meta = this.#meta;
    meta[at.cuSeqlens + i] = row;
    meta[at.keyStarts + i] = slot < 0 ? 0 : slot * this.info.contextLength;
    meta[at.keyCounts + i] = slot < 0 ? 0 : keys;
  }

  /** One tensor-parallel GEMM on every rank: its plan for `key` (made on first use) launched on all
   * ranks together. With one rank there is nothing to communicate, and the same product is our
   * plain GEMM (a [m, K] · b, b [N, K] with transB, else [K, N]). */
  #tp(op: "allGatherGemm" | "gemmReduceScatter" | "gemmAllReduce", key: string, pending: [LaunchPlan, number][],
    args: (r: Rank) => { a: Tensor; b: Tensor; out: Tensor; transB?: boolean }): void {
    if (this.ranks.length === 1) {
      const r = this.ranks[0]!, x = args(r);
      gemmSync(x.a, x.b, x.out, {
        transB: x.transB ?? false, stream: r.comm.stream, config: r.shape.maxCtas ? { maxCtas: r.shape.maxCtas } : undefined,
      });
      return;
    }
    const config = { path: this.path };
    const plans = this.ranks.map((r) => r.plan(key, () => r.comm[op]({ ...args(r), config })));
    const seqs = TpPlan.launchAll(plans);
    plans.forEach((p, i) => pending.push([p, seqs[i]!]));
  }

  async #prefill(entries: PrefillEntry[]): Promise<Int32Array> {
    const cfg = this.config, W = this.ranks.length, H = cfg.hidden;
    const s = shardOf(cfg, W);
    const total = entries.reduce((a, e) => a + e.tokens.length, 0);
    const T = bucketFor(total, this.#prefillBuckets), mS = T / W;
    const at = this.ranks[0]!.metaAt, meta = this.#meta;
    meta.fill(0);
    meta.fill(-1, at.slots, at.slots + T);
    let row = 0, longest = 0;
    entries.forEach((e, i) => {
      meta.set(e.tokens, at.ids + row);
      for (let j = 0; j < e.tokens.length; j++) {
        meta[at.positions + row + j] = j;
        meta[at.slots + row + j] = e.slot;
      }
      this.#sequence(i, row, e.slot, e.tokens.length);
      row += e.tokens.length;
      meta[at.lastRows + i] = row - 1;
      longest = Math.max(longest, e.tokens.length);
    });
    // The padding rows: one more sequence, with no keys (its rows get 0).
    this.#sequence(entries.length, row, -1, 0);
    meta[at.cuSeqlens + entries.length + 1] = T;
    const seqs = { n: entries.length + 1, longest: Math.max(longest, T - row) };
    this.#upload();
    const pending: [LaunchPlan, number][] = [];
    for (const r of this.ranks) {
      const ids = r.view(r.meta, at.ids + r.comm.rank * mS, [mS]);
      embedding({ table: r.weights.embed, ids, out: r.resid, rows: mS, stream: r.comm.stream });
    }
    for (let l = 0; l < cfg.layers; l++) {
      const lw = (r: Rank) => r.weights.layers[l]!;
      const rsO = (r: Rank) => r.symmetric(`pre/o/${T}`, [mS, H]);
      const rsDown = (r: Rank) => r.symmetric(`pre/down/${T}`, [mS, H]);
      for (const r of this.ranks) {
        rmsNorm(l === 0
          ? { x: r.resid, weight: lw(r).attnNorm, out: r.normed, rows: mS, eps: cfg.rmsEps, stream: r.comm.stream }
          : { x: rsDown(r), residual: r.resid, weight: lw(r).attnNorm, out: r.normed, rows: mS, eps: cfg.rmsEps, stream: r.comm.stream });
      }
      this.#tp("allGatherGemm", `pre/qkv/${l}/${T}`, pending, (r) => ({
        a: r.view(r.normed, 0, [mS, H]), b: lw(r).qkv, out: r.view(r.qkv, 0, [T, s.qkv]), transB: true,
      }));
      this.#attention(l, T, "prefill", seqs, pending);
      this.#tp("gemmReduceScatter", `pre/o/${l}/${T}`, pending, (r) => ({ a: r.view(r.attn, 0, [T, s.attn]), b: lw(r).o, out: rsO(r) }));
      for (const r of this.ranks) {
        rmsNorm({ x: rsO(r), residual: r.resid, weight: lw(r).mlpNorm, out: r.normed, rows: mS, eps: cfg.rmsEps, stream: r.comm.stream });
      }
      this.#tp("allGatherGemm", `pre/gu/${l}/${T}`, pending, (r) => ({
        a: r.view(r.normed, 0, [mS, H]), b: lw(r).gateUp, out: r.view(r.gateUp, 0, [T, 2 * s.inter]), transB: true,
      }));
      for (const r of this.ranks) swiglu({ x: r.gateUp, out: r.act, rows: T, stream: r.comm.stream });
      this.#tp("gemmReduceScatter", `pre/down/${l}/${T}`, pending, (r) => ({ a: r.view(r.act, 0, [T, s.inter]), b: lw(r).down, out: rsDown(r) }));
    }
    for (const r of this.ranks) {
      rmsNorm({
        x: r.symmetric(`pre/down/${T}`, [mS, H]), residual: r.resid, weight: r.weights.finalNorm, out: r.normed, rows: mS, eps: cfg.rmsEps,
        stream: r.comm.stream,
      });
    }
    // The prompts' last rows live on whichever rank holds them: gather the stream to every rank.
    const r0 = this.ranks[0]!;
    let gathered = r0.view(r0.normed, 0, [T, H]);
    if (W > 1) {
      const plans = this.ranks.map((r) => r.collective(`pre/gather/${T}`, () =>
        r.comm.prepare.allGather(r.view(r.normed, 0, [mS * H]), r.symmetric(`pre/gathered/${T}`, [T * H]))));
      plans.forEach((p) => pending.push([p, p.launch()]));
      gathered = r0.view(r0.symmetric(`pre/gathered/${T}`, [T * H]), 0, [T, H]);
    }
    embedding({ table: gathered, ids: r0.view(r0.meta, at.lastRows, [entries.length]), out: r0.lastHidden!, rows: entries.length, stream: r0.comm.stream });
    return this.#sample(entries.length, entries.map((e) => [e.sampling, e.tokens.length]), pending);
  }

  async #decode(entries: DecodeEntry[]): Promise<Int32Array> {
    const cfg = this.config, W = this.ranks.length, H = cfg.hidden;
    const s = shardOf(cfg, W);
    const B = bucketFor(entries.length, this.#decodeBuckets);
    const at = this.ranks[0]!.metaAt, meta = this.#meta;
    meta.fill(0);
    meta.fill(-1, at.slots, at.slots + B);
    entries.forEach((e, i) => {
      meta[at.ids + i] = e.token;
      meta[at.positions + i] = e.position;
      meta[at.slots + i] = e.slot;
    });
    // One sequence per row, of keys 0 ..= its position (padding rows: none).
    for (let i = 0; i < B; i++) {
      const e = entries[i];
      this.#sequence(i, i, e ? e.slot : -1, e ? e.position + 1 : 0);
    }
    meta[at.cuSeqlens + B] = B;
    this.#upload();
    const pending: [LaunchPlan, number][] = [];
    const arO = (r: Rank) => r.symmetric(`dec/o/${B}`, [B, H]);
    const arDown = (r: Rank) => r.symmetric(`dec/down/${B}`, [B, H]);
    for (const r of this.ranks) {
      embedding({ table: r.weights.embed, ids: r.view(r.meta, at.ids, [B]), out: r.resid, rows: B, stream: r.comm.stream });
    }
    for (let l = 0; l < cfg.layers; l++) {
      const lw = (r: Rank) => r.weights.layers[l]!;
      for (const r of this.ranks) {
        rmsNorm(l === 0
          ? { x: r.resid, weight: lw(r).attnNorm, out: r.normed, rows: B, eps: cfg.rmsEps, stream: r.comm.stream }
          : { x: arDown(r), residual: r.resid, weight: lw(r).attnNorm, out: r.normed, rows: B, eps: cfg.rmsEps, stream: r.comm.stream });
        this.#gemm(r, r.normed, lw(r).qkv, r.qkv, B);
      }
      this.#attention(l, B, "decode", { n: B, longest: 1 }, pending);
      this.#tp("gemmAllReduce", `dec/o/${l}/${B}`, pending, (r) => ({ a: r.view(r.attn, 0, [B, s.attn]), b: lw(r).o, out: arO(r) }));
      for (const r of this.ranks) {
        rmsNorm({ x: arO(r), residual: r.resid, weight: lw(r).mlpNorm, out: r.normed, rows: B, eps: cfg.rmsEps, stream: r.comm.stream });
        this.#gemm(r, r.normed, lw(r).gateUp, r.gateUp, B);
        swiglu({ x: r.gateUp, out: r.act, rows: B, stream: r.comm.stream });
      }
      this.#tp("gemmAllReduce", `dec/down/${l}/${B}`, pending, (r) => ({ a: r.view(r.act, 0, [B, s.inter]), b: lw(r).down, out: arDown(r) }));
    }
    const r0 = this.ranks[0]!;
    rmsNorm({ x: arDown(r0), residual: r0.resid, weight: r0.weights.finalNorm, out: r0.lastHidden!, rows: B, eps: cfg.rmsEps, stream: r0.comm.stream });
    return this.#sample(entries.length, entries.map((e) => [e.sampling, e.position + 1]), pending);
  }

  /** LM head and sampling on rank 0 for the first `n` rows of lastHidden; then every rank's
   * tensor-parallel launches of the pass are checked (all finished by then). */
  async #sample(n: number, rows: [Sampling, number][], pending: [LaunchPlan, number][]): Promise<Int32Array> {
    const r0 = this.ranks[0]!;
    this.#gemm(r0, r0.lastHidden!, r0.weights.lmHead!, r0.logits!, n);
    rows.forEach(([s, counter], i) => this.#sampler.set(i, { temperature: s.temperature, topK: s.topK, topP: s.topP, seed: s.seed, counter }));
    const { tokens } = await this.#sampler.run(r0.logits!, { rows: n, vocab: this.config.vocab, stream: r0.comm.stream });
    for (const r of this.ranks.slice(1)) if (!r.comm.stream.done()) r.comm.stream.synchronize();
    for (const [p, seq] of pending) p.wait(seq);
    if (this.#keepLogits) {
      const V = this.config.vocab, Vp = r0.logits!.shape[1]!;
      const all = r0.logits!.download() as Float32Array;
      for (let i = 0; i < n; i++) this.lastLogits.push(all.slice(i * Vp, i * Vp + V));
    }
    return tokens;
  }

  /** Runs one step at every bucket (dummy tokens, results dropped), so that every plan exists before
   * the first request: creating one is collective and costs milliseconds. `log` gets a line per
   * bucket. The slots' cache rows it writes are overwritten before any sequence reads them. */
  async warm(log: (line: string) => void = () => {}): Promise<void> {
    const greedy: Sampling = { temperature: 0, topK: 0, topP: 1, seed: 0n };
    const { slots, contextLength } = this.info;
    for (const B of this.#decodeBuckets) {
      const n = Math.min(B, slots);
      const t0 = performance.now();
      await this.step({ prefill: [], decode: Array.from({ length: n }, (_, i) => ({ slot: i, token: 0, position: 0, sampling: greedy })) });
      log(`decode bucket ${B}: ${(performance.now() - t0).toFixed(0)} ms`);
    }
    const longest = Math.min(contextLength - 1, this.info.maxPrefillTokens);
    for (const T of this.#prefillBuckets) {
      const entries: PrefillEntry[] = [];
      for (let left = Math.min(T, this.info.maxPrefillTokens); left > 0 && entries.length < slots;) {
        const len = Math.min(left, longest);
        entries.push({ slot: entries.length, tokens: new Int32Array(len), sampling: greedy });
        left -= len;
      }
      const t0 = performance.now();
      await this.step({ prefill: entries, decode: [] });
      log(`prefill bucket ${T}: ${(performance.now() - t0).toFixed(0)} ms`);
    }
  }

  /** Plans by op and path (all ranks alike): what the cost model chose. */
  planSummary(): Map<string, number> {
    return this.ranks[0]!.planSummary();
  }

  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#ownsAttention) this.attention.dispose();
    this.#sampler.dispose();
    for (const r of this.ranks) r.dispose();
    await Communicator.disposeAll(this.#comms);
  }
}
