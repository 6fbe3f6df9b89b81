// attention.ts — out = softmax(q·kᵀ·scale)·v on one GPU with weft's Hopper flash-attention engine
// (cuda/attention: bf16 in and out, fp32 softmax and accumulation, optional fp32 log-sum-exp).
//
//   await attention({ q, k, v, out, causal: true });                        // [B, S, H, D]
//   await attention({ q, k, v, out, lse, causal, cuSeqlens, maxSeqlen });   // packed [total, H, D]
//   using plan = planAttention({ q, k, v, out, causal: false }); plan.runSync();
//
// Shapes (weft tensors are dense and row-major; one row per token):
//   bshd    q, out [B, Sq, H, D]    k, v [B, Sk, Hkv, D]    lse f32 [B, H, Sq]
//   varlen  q, out [Tq, H, D]       k, v [Tk, Hkv, D]       lse f32 [H, Tq]
//           cuSeqlens i32 [B + 1] on the GPU (sequence b is rows cuSeqlens[b] .. cuSeqlens[b + 1]),
//           cuSeqlensK for the keys when they differ (else Tk = Tq and the keys share cuSeqlens);
//           maxSeqlen (maxSeqlenK) must be at least every sequence's length: the kernel checks the
//           offsets it reads and the run rejects with ArgumentError when they break a rule.
//   KV cache, read in place (FlashAttention's seqused_k): sequsedK i32 [B] on the GPU; sequence b's
//           keys are rows cuSeqlensK[b] .. cuSeqlensK[b] + sequsedK[b] of k and v (starts in any
//           order, cuSeqlensK's last entry unread): e.g. k = a cache [slots, maxSeq, Hkv, D] viewed
//           as [slots * maxSeq, Hkv, D], cuSeqlensK[b] = slot_b * maxSeq, sequsedK[b] = its length.
// H % Hkv == 0 (GQA / MQA); D 64 or 128. causal: query i sees key j when j <= i + Sk − Sq (aligned
// bottom-right, as in a KV cache); a query that sees no key gets out 0 and lse −inf. scale defaults
// to 1 / √D. lse is the natural log of Σ exp(q·k·scale), for the backward pass.
import { AttentionChoice, AttentionParams, OpLaunch, WeftAttentionFailure, WeftAttentionFlags } from "../abi.ts";
import { completionPerDevice, decodeReason, type Completion, type FailureDescriber } from "../completion.ts";
import { ArgumentError, checkInt, DisposedError, TimeoutError, WeftError } from "../errors.ts";
import { check, native } from "../native.ts";
import { LaunchPlan, writeSlot } from "../plan.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";
import type { TensorDesc } from "./gemm.ts";

export const HEAD_DIMS: readonly number[] = [64, 128];

export interface AttentionConfig {
  /** Upper bound on the persistent grid (default: one CTA per SM, at most one per query tile). */
  maxCtas?: number;
}

/** The tensors and the mask every attention op takes: attention() here, comm.ringAttention
 * (ring-attention.ts), each with its own shapes (its file's header). */
export interface AttentionTensors {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  out: Tensor;
  /** f32 log-sum-exp per query row and head, written when given: [B, H, Sq] (bshd) or [H, Tq]
   * (varlen) for attention(), [B, H, shard_r] for ring attention. */
  lse?: Tensor;
  causal: boolean;
}

export interface AttentionArgs extends AttentionTensors {
  /** Softmax scale, > 0 (default 1 / √D). */
  scale?: number;
  /** i32 [B + 1] on the GPU: q (and k, unless cuSeqlensK) is a packed batch. */
  cuSeqlens?: Tensor;
  cuSeqlensK?: Tensor;
  /** i32 [B] on the GPU (needs cuSeqlensK): sequence b has sequsedK[b] keys from row cuSeqlensK[b]. */
  sequsedK?: Tensor;
  /** The longest sequence of the packed batch (required with cuSeqlens). */
  maxSeqlen?: number;
  /** The longest key sequence (with cuSeqlensK; default maxSeqlen). */
  maxSeqlenK?: number;
  config?: AttentionConfig;
  /** Stream to run on (default: the device's legacy default stream). */
  stream?: Stream | null;
  /** attention() only: how long to wait for completion before rejecting with TimeoutError (ms). */
  timeoutMs?: number;
}

/** What validateAttention needs of the arguments: the tensors as descriptions (CPU tests) or Tensors. */
export type AttentionDescArgs = Omit<AttentionArgs, "q" | "k" | "v" | "out" | "lse" | "cuSeqlens" | "cuSeqlensK" | "sequsedK"> & {
  q: TensorDesc; k: TensorDesc; v: TensorDesc; out: TensorDesc; lse?: TensorDesc;
  cuSeqlens?: TensorDesc; cuSeqlensK?: TensorDesc; sequsedK?: TensorDesc;
};

/** The problem validateAttention derived from the arguments. */
export interface AttentionShape {
  device: number;
  batch: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** bshd: every sequence's length; varlen: the longest. */
  seqlenQ: number;
  seqlenK: number;
  /** Rows of q / out and of k / v. */
  totalQ: number;
  totalK: number;
  varlen: boolean;
  /** Keys counted per sequence (sequsedK). */
  seqused: boolean;
  causal: boolean;
  /** 0: 1 / √D. */
  scale: number;
  maxCtas: number;
}

export interface AttentionChoiceInfo {
  blockM: number;
  blockN: number;
  stages: number;
  ctas: number;
  tiles: number;
  section: number;
}

const FLAG_CAUSAL = WeftAttentionFlags.WEFT_ATTENTION_CAUSAL;
const DEFAULT_TIMEOUT_MS = 60_000;
const OPTIONS = ["q", "k", "v", "out", "lse", "causal", "scale", "cuSeqlens", "cuSeqlensK", "sequsedK", "maxSeqlen", "maxSeqlenK",
  "config", "stream", "timeoutMs"];

function desc(t: TensorDesc | undefined, op: string, name: string): TensorDesc {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
  return t;
}

function shapeText(t: TensorDesc): string {
  return `[${t.shape.join(", ")}]`;
}

function requireShape(op: string, name: string, t: TensorDesc, want: readonly number[], what: string): void {
  if (t.shape.length !== want.length || t.shape.some((d, i) => d !== want[i])) {
    throw new ArgumentError(op, name, `must be ${what} = [${want.join(", ")}] (got ${shapeText(t)})`);
  }
}

/** Validates an attention call without touching a GPU. Throws ArgumentError naming the argument and
 * the rule; returns the problem. */
export function validateAttention(args: AttentionDescArgs, op = "attention"): AttentionShape {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { q, k, v, out, causal, ... }");
  for (const key of Object.keys(args)) {
    if (!OPTIONS.includes(key)) throw new ArgumentError(op, key, `is not an attention argument (${OPTIONS.join(", ")})`);
  }
  const q = desc(args.q, op, "q"), k = desc(args.k, op, "k"), v = desc(args.v, op, "v"), out = desc(args.out, op, "out");
  if (typeof args.causal !== "boolean") throw new ArgumentError(op, "causal", `must be true or false (got ${JSON.stringify(args.causal)})`);
  for (const [name, t] of [["q", q], ["k", k], ["v", v], ["out", out]] as const) {
    if (t.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${t.dtype})`);
    if (t.device !== q.device) throw new ArgumentError(op, name, `is on device ${t.device} but q is on device ${q.device}`);
  }
  const varlen = args.cuSeqlens !== undefined;
  if (!varlen && args.cuSeqlensK !== undefined) throw new ArgumentError(op, "cuSeqlensK", "needs cuSeqlens (a packed batch)");
  if (args.sequsedK !== undefined && args.cuSeqlensK === undefined) {
    throw new ArgumentError(op, "sequsedK", "needs cuSeqlensK (each sequence's first key row) and cuSeqlens (a packed batch)");
  }
  if (!varlen && (args.maxSeqlen !== undefined || args.maxSeqlenK !== undefined)) {
    throw new ArgumentError(op, args.maxSeqlen !== undefined ? "maxSeqlen" : "maxSeqlenK", "applies to packed batches only (with cuSeqlens)");
  }
  const rank = varlen ? 3 : 4;
  const layout = varlen ? "[total, heads, headDim]" : "[batch, seqlen, heads, headDim]";
  for (const [name, t] of [["q", q], ["k", k], ["v", v]] as const) {
    if (t.shape.length !== rank) {
      throw new ArgumentError(op, name, `must be ${rank}-D ${layout}${varlen ? " (cuSeqlens is given)" : ""} (got ${shapeText(t)})`);
    }
  }
  const headDim = q.shape[rank - 1]!;
  const heads = q.shape[rank - 2]!;
  const kvHeads = k.shape[rank - 2]!;
  if (!HEAD_DIMS.includes(headDim)) throw new ArgumentError(op, "q", `has head dim ${headDim}; supported: ${HEAD_DIMS.join(", ")}`);
  if (k.shape[rank - 1] !== headDim) throw new ArgumentError(op, "k", `has head dim ${k.shape[rank - 1]} but q has ${headDim}`);
  if (heads % kvHeads !== 0) {
    throw new ArgumentError(op, "k", `has ${kvHeads} heads, which must divide q's ${heads} (GQA / MQA: each kv head serves heads / kvHeads query heads)`);
  }
  requireShape(op, "v", v, k.shape, "k's shape");
  requireShape(op, "out", out, q.shape, "q's shape");

  let batch: number, seqlenQ: number, seqlenK: number, totalQ: number, totalK: number;
  if (varlen) {
    const cu = desc(args.cuSeqlens, op, "cuSeqlens");
    if (cu.dtype !== "i32" || cu.shape.length !== 1 || cu.shape[0]! < 2) {
      throw new ArgumentError(op, "cuSeqlens", `must be an i32 tensor [batch + 1] of sequence offsets (got ${cu.dtype} ${shapeText(cu)})`);
    }
    if (cu.device !== q.device) throw new ArgumentError(op, "cuSeqlens", `is on device ${cu.device} but q is on device ${q.device}`);
    batch = cu.shape[0]! - 1;
    totalQ = q.shape[0]!;
    totalK = k.shape[0]!;
    seqlenQ = checkInt(op, "maxSeqlen", args.maxSeqlen, 1, totalQ);
    if (args.cuSeqlensK !== undefined) {
      const cuk = desc(args.cuSeqlensK, op, "cuSeqlensK");
      requireShape(op, "cuSeqlensK", cuk, cu.shape, "cuSeqlens' shape");
      if (cuk.dtype !== "i32") throw new ArgumentError(op, "cuSeqlensK", `must be i32 (got ${cuk.dtype})`);
      if (cuk.device !== q.device) throw new ArgumentError(op, "cuSeqlensK", `is on device ${cuk.device} but q is on device ${q.device}`);
      seqlenK = checkInt(op, "maxSeqlenK", args.maxSeqlenK ?? args.maxSeqlen, 1, totalK);
      if (args.sequsedK !== undefined) {
        const used = desc(args.sequsedK, op, "sequsedK");
        if (used.dtype !== "i32" || used.shape.length !== 1 || used.shape[0] !== batch) {
          throw new ArgumentError(op, "sequsedK", `must be an i32 tensor [batch] = [${batch}] of key counts (got ${used.dtype} ${shapeText(used)})`);
        }
        if (used.device !== q.device) throw new ArgumentError(op, "sequsedK", `is on device ${used.device} but q is on device ${q.device}`);
      }
    } else {
      if (totalK !== totalQ) {
        throw new ArgumentError(op, "k", `has ${totalK} rows but q has ${totalQ}: keys of another length need their own cuSeqlensK`);
      }
      if (args.maxSeqlenK !== undefined) throw new ArgumentError(op, "maxSeqlenK", "needs cuSeqlensK");
      seqlenK = seqlenQ;
    }
  } else {
    [batch, seqlenQ] = [q.shape[0]!, q.shape[1]!];
    [seqlenK, totalQ] = [k.shape[1]!, batch * seqlenQ];
    totalK = batch * seqlenK;
    if (k.shape[0] !== batch) throw new ArgumentError(op, "k", `has batch ${k.shape[0]} but q has ${batch}`);
  }
  if (args.lse !== undefined) {
    const lse = desc(args.lse, op, "lse");
    if (lse.dtype !== "f32") throw new ArgumentError(op, "lse", `must be f32 (got ${lse.dtype})`);
    if (lse.device !== q.device) throw new ArgumentError(op, "lse", `is on device ${lse.device} but q is on device ${q.device}`);
    requireShape(op, "lse", lse, varlen ? [heads, totalQ] : [batch, heads, seqlenQ], varlen ? "[heads, total]" : "[batch, heads, seqlen]");
  }
  let scale = 0;
  if (args.scale !== undefined) {
    if (typeof args.scale !== "number" || !Number.isFinite(args.scale) || args.scale <= 0) {
      throw new ArgumentError(op, "scale", `must be a finite number > 0 (got ${JSON.stringify(args.scale)})`);
    }
    scale = args.scale;
  }
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null) throw new ArgumentError(op, "config", "must be an object { maxCtas? }");
  for (const key of Object.keys(config)) {
    if (key !== "maxCtas") throw new ArgumentError(op, `config.${key}`, "is not an attention config field (maxCtas)");
  }
  const maxCtas = config.maxCtas === undefined ? 0 : checkInt(op, "config.maxCtas", config.maxCtas, 1, 1 << 16);
  const stream = args.stream;
  if (stream !== undefined && stream !== null) {
    if (!(stream instanceof Stream)) throw new ArgumentError(op, "stream", "must be a Stream or null");
    if (stream.device !== q.device) throw new ArgumentError(op, "stream", `is on device ${stream.device} but the tensors are on device ${q.device}`);
  }
  if (args.timeoutMs !== undefined && !(typeof args.timeoutMs === "number" && args.timeoutMs > 0)) {
    throw new ArgumentError(op, "timeoutMs", `must be a positive number of milliseconds (got ${JSON.stringify(args.timeoutMs)})`);
  }
  return {
    device: q.device, batch, heads, kvHeads, headDim, seqlenQ, seqlenK, totalQ, totalK, varlen, seqused: args.sequsedK !== undefined,
    causal: args.causal, scale, maxCtas,
  };
}

function requireTensors(op: string, args: AttentionArgs): Tensor[] {
  const names = ["q", "k", "v", "out", "lse", "cuSeqlens", "cuSeqlensK", "sequsedK"] as const;
  const held: Tensor[] = [];
  for (const name of names) {
    const t = args?.[name];
    if (t === undefined && name !== "q" && name !== "k" && name !== "v" && name !== "out") continue;
    if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    t.guard(op);
    held.push(t);
  }
  // out and lse are written while q, k and v are read: they must not share memory with any of them.
  const overlaps = (a: Tensor, b: Tensor) => a.ptr < b.ptr + b.bytes && b.ptr < a.ptr + a.bytes;
  for (const name of ["out", "lse"] as const) {
    const w = args[name];
    if (!w) continue;
    for (const other of names) {
      const r = args[other];
      if (r && r !== w && overlaps(w, r)) throw new ArgumentError(op, name, `shares memory with '${other}'`);
    }
  }
  return held;
}

/** Packs a validated call into a WeftAttentionParams buffer. */
export function packAttentionParams(shape: AttentionShape, args: AttentionArgs): Uint8Array {
  return AttentionParams.write(AttentionParams.alloc(), {
    q: args.q.ptr, k: args.k.ptr, v: args.v.ptr, out: args.out.ptr, lse: args.lse?.ptr ?? 0,
    cu_seqlens_q: args.cuSeqlens?.ptr ?? 0, cu_seqlens_k: args.cuSeqlensK?.ptr ?? 0,
    batch: shape.batch, heads: shape.heads, kv_heads: shape.kvHeads, head_dim: shape.headDim,
    seqlen_q: shape.seqlenQ, seqlen_k: shape.seqlenK, total_q: shape.varlen ? shape.totalQ : 0, total_k: shape.varlen ? shape.totalK : 0,
    flags: shape.causal ? FLAG_CAUSAL : 0, scale: shape.scale, max_ctas: shape.maxCtas,
    stream: args.stream ? args.stream.handle : 0, seqused_k: args.sequsedK?.ptr ?? 0,
  });
}

// One Completion per device for standalone attention calls (as gemm() has for its own).
const completionFor = completionPerDevice();

/** The error a failed launch rejects with (weft.h: WeftAttentionFailure and WeftAttentionStage). */
export function describeAttentionFailure(op: string): FailureDescriber {
  const F = WeftAttentionFailure;
  return (reason) => {
    const { code, stage } = decodeReason(reason);
    if (code === F.WEFT_ATTENTION_FAIL_SEQLENS) {
      return new ArgumentError(op, "cuSeqlens", "holds offsets outside [0, total] or not non-decreasing, or a sequence longer than maxSeqlen, " +
        "or (with sequsedK) a key count below 0 or past k's rows: those sequences were skipped");
    }
    if (code === F.WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT || code === F.WEFT_ATTENTION_FAIL_PEER_WAIT) {
      const what = code === F.WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT ? "a shared-memory barrier wait" : "a wait for a peer's data";
      return new TimeoutError(`the kernel reported a failure: ${what} timed out (stage ${stage})`, { code: "E_TIMEOUT", op });
    }
    return new WeftError(`the kernel reported a failure: code ${code} (stage ${stage})`, { code: "E_INTERNAL", op });
  };
}

const LAUNCH = { done: OpLaunch.offsets.done / 4, seq: OpLaunch.offsets.seq / 4, arrivals: OpLaunch.offsets.arrivals / 4 };

/** A validated attention call, packed once: launch it as often as needed (benchmarks, loops). It
 * keeps its tensors referenced; dispose() only drops them. */
export class AttentionPlan extends LaunchPlan implements Disposable {
  readonly shape: AttentionShape;
  readonly label = "attention";
  protected readonly completion: Completion;
  protected readonly describe: FailureDescriber;
  readonly #params: Uint8Array;
  readonly #launch = OpLaunch.alloc();
  readonly #words = new Uint32Array(this.#launch.buffer);
  readonly #tensors: Tensor[];
  #disposed = false;

  /** @internal planAttention() makes plans. */
  constructor(shape: AttentionShape, params: Uint8Array, tensors: Tensor[]) {
    super();
    this.shape = shape;
    this.#params = params;
    this.#tensors = tensors;
    this.completion = completionFor(shape.device);
    this.describe = describeAttentionFailure("attention");
  }

  /** Launches on the plan's stream and returns the launch's sequence number; no wait. */
  launch(): number {
    const op = "attention";
    if (this.#disposed) throw new DisposedError(op, "AttentionPlan");
    for (const t of this.#tensors) t.guard(op);
    const slot = this.completion.slot();
    writeSlot(this.#words, LAUNCH, slot);
    check(native().weft_attention(this.#params, this.#launch), op);
    return slot.seq;
  }

  /** The configuration the plan runs. */
  choice(): AttentionChoiceInfo {
    const buf = AttentionChoice.alloc();
    check(native().weft_attention_choose(this.#params, buf), "AttentionPlan.choice");
    const c = AttentionChoice.read(buf);
    return { blockM: c.block_m, blockN: c.block_n, stages: c.stages, ctas: c.ctas, tiles: c.tiles, section: c.section };
  }

  dispose(): void {
    this.#disposed = true;
    this.#tensors.length = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Validates the call and packs it into a reusable plan (run() / runSync()). */
export function planAttention(args: AttentionArgs, op = "planAttention"): AttentionPlan {
  const tensors = requireTensors(op, args);
  const shape = validateAttention(args, op);
  return new AttentionPlan(shape, packAttentionParams(shape, args), tensors);
}

/** out = softmax(q·kᵀ·scale)·v; resolves with `out` once the kernel has finished. */
export async function attention(args: AttentionArgs): Promise<Tensor> {
  const op = "attention";
  const plan = planAttention(args, op);
  const seq = plan.launch();
  await completionFor(plan.shape.device).promise(seq, op, describeAttentionFailure(op), 0, args.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  return args.out;
}

/** The fp32 reference (test support): out32 f32 in q's shape, lse32 (optional) in lse's; simple
 * and slow, on CUDA cores. Synchronous on the legacy stream when `stream` is unset. */
export function referenceAttention(args: Omit<AttentionArgs, "out" | "lse"> & { out32: Tensor; lse32?: Tensor }): void {
  const op = "referenceAttention";
  const { out32, lse32, ...rest } = args;
  if (!(out32 instanceof Tensor)) throw new ArgumentError(op, "out32", "must be a Tensor");
  const shape = validateAttention({ ...rest, out: { shape: out32.shape, dtype: "bf16", device: out32.device } }, op);
  if (out32.dtype !== "f32") throw new ArgumentError(op, "out32", `must be f32 (got ${out32.dtype})`);
  const params = packAttentionParams(shape, { ...rest, out: args.q });
  check(native().weft_reference_attention(params, out32.ptr, lse32?.ptr ?? 0), op);
}
