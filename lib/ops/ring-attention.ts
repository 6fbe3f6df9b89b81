// ring-attention.ts — fused ring attention (sequence parallelism) over a communicator: one
// persistent kernel per rank per launch (cuda/attention/ring.cuh), each query tile keeping its
// softmax state in registers across every rank's key blocks, peers' K and V arriving over NVLink
// by the copy engines into a receive buffer (ffi/src/attention/ring_mover.cpp).
//
//   const plan = comm.ringAttention({ q, k, v, out, causal: true });   // collective
//   await plan.run();                                                  // reusable
//
// Each rank holds its shard of the sequence (shardSequence / unshardSequence convert): of S tokens
// cut into chunks of whole 128-token blocks, "zigzag" (default for causal) gives rank r chunks r and
// 2W − 1 − r of 2W (balanced causal work), "contiguous" (default otherwise) chunk r of W. Shapes on
// rank r, with shard_r its tokens per sequence:
//   q, out [B, shard_r, H, D]; lse f32 [B, H, shard_r] (optional);
//   k, v [B, kvRows, Hkv, D] from comm.empty (the peers copy them), kvRows >= shard_r (the first
//   shard_r rows of each sequence are read). Symmetric tensors must be allocated alike on every
//   rank: when S is not a multiple of 128 x chunks the shards differ by a block, so allocate k and v
//   with kvRows = ringShardCapacity(S, W, layout) everywhere, and pass `seqlen`.
import { OpLaunch, RingAttentionChoice, RingAttentionParams, WeftAttentionFlags, WeftRingLayout, WeftRingMover } from "../abi.ts";
import { Communicator } from "../comm.ts";
import { decodeReason, type Completion, type FailureDescriber } from "../completion.ts";
import { ArgumentError, checkInt, DisposedError } from "../errors.ts";
import { SymmetricTensor } from "../heap.ts";
import { check, native } from "../native.ts";
import { LaunchPlan, runAllLaunched, writeSlot } from "../plan.ts";
import { Tensor } from "../tensor.ts";
import { describeAttentionFailure, HEAD_DIMS, type AttentionTensors } from "./attention.ts";
import type { TensorDesc } from "./gemm.ts";
import { createNativePlan } from "./native-plan.ts";

export type RingLayout = "zigzag" | "contiguous";

export interface RingAttentionConfig {
  /** kv heads per receive group (default: a W-independent eighth of the kv heads, at least 1). */
  groupHeads?: number;
  /** Receive-buffer budget in bytes (default: two shards' worth of K and V). Enough for every
   * peer's shard makes it an all-gather of K and V: no copy then waits for slot reuse. */
  memoryBytes?: number;
  /** Who moves the peers' K and V: "copyEngine" (side streams' 2-D copies, no SM taken) or
   * "ctas" (commCtas CTAs of the kernel load from the peers over NVLink). "auto" (default): the
   * copy engines, or the CTAs where ranks share a GPU (ffi/src/attention/ring_layout.cpp). */
  mover?: "auto" | "copyEngine" | "ctas";
  /** With mover "ctas": how many CTAs copy (default 4); they compute too once their copies are done. */
  commCtas?: number;
}

export interface RingAttentionArgs extends AttentionTensors {
  layout?: RingLayout;
  /** The whole sequence's tokens (default: world x this rank's shard, when that is consistent). */
  seqlen?: number;
  scale?: number;
  config?: RingAttentionConfig;
}

export const LAYOUTS: Record<RingLayout, number> = { zigzag: WeftRingLayout.WEFT_RING_ZIGZAG, contiguous: WeftRingLayout.WEFT_RING_CONTIGUOUS };
export const MOVERS = {
  auto: WeftRingMover.WEFT_RING_MOVER_AUTO, copyEngine: WeftRingMover.WEFT_RING_MOVER_COPY_ENGINE, ctas: WeftRingMover.WEFT_RING_MOVER_CTAS,
} as const;
/** By code: what a choice reports (AUTO: no mover, a world of one). */
export const MOVER_NAMES = ["none", "copyEngine", "ctas"] as const;

/** Chunk starts of a sequence of `seqlen` tokens (chunks + 1 numbers, the last = seqlen); the same
 * rule as cuda/attention/ring_state.h (ring_chunks): whole 128-token blocks, the left-over blocks one
 * per rank (its first chunk, then its second), so shards differ by at most a block. */
export function ringChunks(seqlen: number, world: number, layout: RingLayout): number[] {
  const chunks = layout === "zigzag" ? 2 * world : world;
  const blocks = Math.ceil(seqlen / 128);
  if (blocks < chunks) {
    throw new ArgumentError("ringChunks", "seqlen", `(${seqlen}) is too short for ${chunks} chunks of whole 128-token blocks (needs > ${128 * (chunks - 1)})`);
  }
  const extra = blocks % chunks;
  const starts: number[] = [];
  let at = 0;
  for (let c = 0; c < chunks; c++) {
    starts.push(at);
    const more = c < world ? c < extra : layout === "zigzag" && 2 * world - 1 - c < extra - world;
    at += 128 * (Math.floor(blocks / chunks) + (more ? 1 : 0));
  }
  starts.push(seqlen);
  return starts;
}

/** The [start, end) global token ranges rank `rank` holds, in its shard's order. */
export function shardRanges(seqlen: number, world: number, layout: RingLayout, rank: number): [number, number][] {
  const starts = ringChunks(seqlen, world, layout);
  const chunks = layout === "zigzag" ? [rank, 2 * world - 1 - rank] : [rank];
  return chunks.map((c) => [starts[c]!, starts[c + 1]!]);
}

/** The largest shard of any rank: the rows per sequence every rank gives its k and v. */
export function ringShardCapacity(seqlen: number, world: number, layout: RingLayout): number {
  let most = 0;
  for (let r = 0; r < world; r++) most = Math.max(most, shardLength(seqlen, world, layout, r));
  return most;
}

/** Tokens per sequence of rank `rank`'s shard. */
export function shardLength(seqlen: number, world: number, layout: RingLayout, rank: number): number {
  return shardRanges(seqlen, world, layout, rank).reduce((n, [a, b]) => n + b - a, 0);
}

function copyRows(dst: Tensor, dstRow: number, src: Tensor, srcRow: number, rows: number, rowBytes: number, op: string): void {
  check(native().weft_memcpy(dst.ptr + dstRow * rowBytes, src.ptr + srcRow * rowBytes, rows * rowBytes, 3, null), op);
}

/** Copies, batch by batch and range by range, between rank `rank`'s rows of `full` [B, S, ...] and
 * its shard [B, shard, ...]: into the shard (`toShard`), or back into `full`. */
function copyShardRows(op: string, full: Tensor, shardTensor: Tensor, opts: { rank: number; world: number; layout: RingLayout },
  toShard: boolean): void {
  const { b, s, rowBytes, shard, ranges } = sequenceShapes(op, full, shardTensor, opts);
  for (let bi = 0; bi < b; bi++) {
    let at = 0;
    for (const [start, end] of ranges) {
      const fullRow = bi * s + start, shardRow = bi * shard + at;
      if (toShard) copyRows(shardTensor, shardRow, full, fullRow, end - start, rowBytes, op);
      else copyRows(full, fullRow, shardTensor, shardRow, end - start, rowBytes, op);
      at += end - start;
    }
  }
}

/** Copies rank `rank`'s shard of `full` [B, S, ...] into `into` [B, shard, ...] (same dtype and
 * inner dims; e.g. a comm.empty tensor for k and v). Returns `into`. */
export function shardSequence(full: Tensor, into: Tensor, opts: { rank: number; world: number; layout: RingLayout }): Tensor {
  copyShardRows("shardSequence", full, into, opts, true);
  return into;
}

/** Writes rank `rank`'s shard `shard` [B, shard, ...] back into its rows of `full` [B, S, ...]. */
export function unshardSequence(shardTensor: Tensor, full: Tensor, opts: { rank: number; world: number; layout: RingLayout }): Tensor {
  copyShardRows("unshardSequence", full, shardTensor, opts, false);
  return full;
}

function sequenceShapes(op: string, full: Tensor, shard: Tensor, opts: { rank: number; world: number; layout: RingLayout }) {
  for (const [name, t] of [["full", full], ["shard", shard]] as const) {
    if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    t.guard(op);
    if (t.shape.length < 2) throw new ArgumentError(op, name, `must be [batch, seqlen, ...] (got [${t.shape.join(", ")}])`);
  }
  const world = checkInt(op, "world", opts?.world, 1, 8);
  const rank = checkInt(op, "rank", opts?.rank, 0, world - 1);
  if (!(opts.layout in LAYOUTS)) throw new ArgumentError(op, "layout", `must be 'zigzag' or 'contiguous' (got ${JSON.stringify(opts.layout)})`);
  const [b, s] = [full.shape[0]!, full.shape[1]!];
  const ranges = shardRanges(s, world, opts.layout, rank);
  const n = ranges.reduce((a, [x, y]) => a + y - x, 0);
  const want = [b, n, ...full.shape.slice(2)];
  // The shard may have spare rows per sequence (k, v at ringShardCapacity): its first n are used.
  if (shard.dtype !== full.dtype || shard.shape.length !== want.length || shard.shape.some((d, i) => (i === 1 ? d < n : d !== want[i]))) {
    throw new ArgumentError(op, "shard", `must be ${full.dtype} [${want.join(", ")}] (rank ${rank}'s tokens of ${s}; more rows per sequence are allowed) ` +
      `(got ${shard.dtype} [${shard.shape.join(", ")}])`);
  }
  const rowBytes = full.bytes / (b * s);
  return { b, s, rowBytes, shard: shard.shape[1]!, ranges };
}

/** What validateRingAttention derived. */
export interface RingShape {
  batch: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  seqlen: number;
  shard: number;
  /** Rows per sequence of k and v (>= shard). */
  kvRows: number;
  layout: RingLayout;
  causal: boolean;
  scale: number;
}

export type RingDescArgs = Omit<RingAttentionArgs, "q" | "k" | "v" | "out" | "lse"> & {
  q: TensorDesc; k: TensorDesc & { symmetric?: boolean }; v: TensorDesc & { symmetric?: boolean }; out: TensorDesc; lse?: TensorDesc;
};

/** Validates one rank's ring-attention arguments without touching a GPU. */
export function validateRingAttention(world: number, rank: number, device: number, args: RingDescArgs, op = "Communicator.ringAttention"): RingShape {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { q, k, v, out, causal, ... }");
  const allowed = ["q", "k", "v", "out", "lse", "causal", "layout", "seqlen", "scale", "config"];
  for (const key of Object.keys(args)) if (!allowed.includes(key)) throw new ArgumentError(op, key, `is not a ringAttention argument (${allowed.join(", ")})`);
  if (typeof args.causal !== "boolean") throw new ArgumentError(op, "causal", `must be true or false (got ${JSON.stringify(args.causal)})`);
  const layout = args.layout ?? (args.causal ? "zigzag" : "contiguous");
  if (!(layout in LAYOUTS)) throw new ArgumentError(op, "layout", `must be 'zigzag' or 'contiguous' (got ${JSON.stringify(layout)})`);
  for (const name of ["q", "k", "v", "out"] as const) {
    const t = args[name];
    if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
    if (t.shape.length !== 4) throw new ArgumentError(op, name, `must be 4-D [batch, shard, heads, headDim] (got [${t.shape.join(", ")}])`);
    if (t.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${t.dtype})`);
    if (t.device !== device) throw new ArgumentError(op, name, `is on device ${t.device} but this rank's communicator is on device ${device}`);
  }
  const [batch, shard, heads, headDim] = args.q.shape as [number, number, number, number];
  const kvHeads = args.k.shape[2]!;
  const kvRows = args.k.shape[1]!;
  if (!HEAD_DIMS.includes(headDim)) throw new ArgumentError(op, "q", `has head dim ${headDim}; supported: ${HEAD_DIMS.join(", ")}`);
  const kWant = [batch, kvRows, kvHeads, headDim];
  if (args.k.shape[0] !== batch || args.k.shape[3] !== headDim || kvRows < shard) {
    throw new ArgumentError(op, "k", `must be [${batch}, >= ${shard}, kvHeads, ${headDim}] (q's batch, at least its shard, its head dim) (got [${args.k.shape.join(", ")}])`);
  }
  for (const name of ["k", "v"] as const) {
    const t = args[name];
    if (t.shape.some((d, i) => d !== kWant[i])) throw new ArgumentError(op, name, `must be [${kWant.join(", ")}] (k's shape) (got [${t.shape.join(", ")}])`);
    if (!t.symmetric) throw new ArgumentError(op, name, "must be a symmetric tensor of this communicator (comm.empty): the peers copy it");
  }
  if (heads % kvHeads !== 0) throw new ArgumentError(op, "k", `has ${kvHeads} heads, which must divide q's ${heads}`);
  if (args.out.shape.some((d, i) => d !== args.q.shape[i])) throw new ArgumentError(op, "out", `must be q's shape [${args.q.shape.join(", ")}]`);
  const seqlen = args.seqlen === undefined ? world * shard : checkInt(op, "seqlen", args.seqlen, 1, 2 ** 31 - 1);
  let expected: number;
  try {
    expected = shardLength(seqlen, world, layout, rank);
  } catch (e) {
    throw new ArgumentError(op, "seqlen", (e as ArgumentError).message.replace(/^.*argument 'seqlen' /, ""));
  }
  if (expected !== shard) {
    throw new ArgumentError(op, args.seqlen === undefined ? "q" : "seqlen",
      `gives rank ${rank} ${expected} tokens of ${seqlen} (${layout}), but q holds ${shard} per sequence` +
      (args.seqlen === undefined ? ": pass seqlen (the whole sequence) when the shards differ" : ""));
  }
  if (args.lse !== undefined) {
    const lse = args.lse;
    const want = [batch, heads, shard];
    if (lse.dtype !== "f32" || lse.shape.length !== 3 || lse.shape.some((d, i) => d !== want[i])) {
      throw new ArgumentError(op, "lse", `must be f32 [${want.join(", ")}] (got ${lse.dtype} [${lse.shape.join(", ")}])`);
    }
  }
  if (args.scale !== undefined && !(typeof args.scale === "number" && Number.isFinite(args.scale) && args.scale > 0)) {
    throw new ArgumentError(op, "scale", `must be a finite number > 0 (got ${JSON.stringify(args.scale)})`);
  }
  const c = args.config ?? {};
  for (const key of Object.keys(c)) if (!["groupHeads", "memoryBytes", "mover", "commCtas"].includes(key)) {
    throw new ArgumentError(op, `config.${key}`, "is not a ringAttention config field (groupHeads, memoryBytes, mover, commCtas)");
  }
  if (c.groupHeads !== undefined) checkInt(op, "config.groupHeads", c.groupHeads, 1, kvHeads);
  if (c.memoryBytes !== undefined) checkInt(op, "config.memoryBytes", c.memoryBytes, 1);
  if (c.mover !== undefined && !(c.mover in MOVERS)) {
    throw new ArgumentError(op, "config.mover", `must be 'auto', 'copyEngine' or 'ctas' (got ${JSON.stringify(c.mover)})`);
  }
  if (c.commCtas !== undefined) {
    checkInt(op, "config.commCtas", c.commCtas, 1, 64);
    if (c.mover !== "ctas") throw new ArgumentError(op, "config.commCtas", "applies to mover 'ctas' only");
  }
  return { batch, heads, kvHeads, headDim, seqlen, shard, kvRows, layout, causal: args.causal, scale: args.scale ?? 0 };
}

export interface RingChoiceInfo {
  mover: (typeof MOVER_NAMES)[number];
  /** CTAs that copy (mover "ctas"), else 0. */
  commCtas: number;
  groupHeads: number;
  groups: number;
  slots: number;
  ctas: number;
  shard: number;
  workspaceBytes: number;
  receiveBytes: number;
  predictedUs: number;
}

const LAUNCH = { done: OpLaunch.offsets.done / 4, seq: OpLaunch.offsets.seq / 4, arrivals: OpLaunch.offsets.arrivals / 4 };

/** One rank's prepared ring attention: launch it as often as needed (each launch takes the next
 * epoch; every rank launches its plans in the same order). */
export class RingAttentionPlan extends LaunchPlan implements Disposable {
  readonly comm: Communicator;
  readonly shape: RingShape;
  readonly choice: RingChoiceInfo;
  readonly label = "Communicator.ringAttention";
  protected readonly completion: Completion;
  protected readonly describe: FailureDescriber;
  #handle: number;
  readonly #workspace: SymmetricTensor;
  readonly #tensors: Tensor[];
  readonly #launch = OpLaunch.alloc();
  readonly #words: Uint32Array;
  readonly #setup: { wait(): void };
  #connected = false;
  #disposed = false;

  /** @internal comm.ringAttention() makes plans. */
  constructor(comm: Communicator, shape: RingShape, choice: RingChoiceInfo, handle: number, workspace: SymmetricTensor,
    tensors: Tensor[], completion: Completion, setup: { wait(): void }) {
    super();
    this.comm = comm;
    this.shape = shape;
    this.choice = choice;
    this.#handle = handle;
    this.#workspace = workspace;
    this.#tensors = tensors;
    this.#words = new Uint32Array(this.#launch.buffer);
    this.completion = completion;
    // WEFT_E_PEER (a negative code): stopped by Communicator.abort or by a peer that gave up, reported
    // as the collectives report it (primitives/abort.cuh); the rest are the engine's own codes.
    const engine = describeAttentionFailure(this.label);
    const peers = Communicator.internals(comm).describe(this.label);
    this.describe = (reason, seq) => (decodeReason(reason).code < 0 ? peers(reason, seq) : engine(reason, seq));
    this.#setup = setup;
  }

  /** The peers' offsets are read once every rank's creation (and its barrier) is done. */
  #ready(op: string): void {
    if (this.#disposed) throw new DisposedError(op, "RingAttentionPlan");
    for (const t of this.#tensors) t.guard(op);
    if (this.#connected) return;
    this.#setup.wait();
    check(native().weft_ring_attention_plan_connect(this.#handle), op);
    this.#connected = true;
  }

  #takeSlot(): number {
    const slot = this.completion.slot();
    writeSlot(this.#words, LAUNCH, slot);
    return slot.seq;
  }

  launch(): number {
    this.#ready(this.label);
    const seq = this.#takeSlot();
    check(native().weft_ring_attention_plan_launch(this.#handle, this.#launch), this.label);
    return seq;
  }

  /** Launches several plans of this process together (one per rank of Communicator.local, or of
   * ranks sharing one GPU): every kernel before any copy. Returns their sequence numbers. */
  static launchAll(plans: readonly RingAttentionPlan[]): number[] {
    const op = "RingAttentionPlan.launchAll";
    if (!Array.isArray(plans) || plans.length === 0 || !plans.every((p) => p instanceof RingAttentionPlan)) {
      throw new ArgumentError(op, "plans", "must be a non-empty array of RingAttentionPlans");
    }
    for (const p of plans) p.#ready(op);
    const handles = new BigUint64Array(plans.length);
    const launches = new Uint8Array(OpLaunch.size * plans.length);
    const seqs = plans.map((p, i) => {
      const seq = p.#takeSlot();
      launches.set(p.#launch, i * OpLaunch.size);
      handles[i] = BigInt(p.#handle);
      return seq;
    });
    check(native().weft_ring_attention_plans_launch(handles, launches, plans.length), op);
    return seqs;
  }

  static runAll(plans: readonly RingAttentionPlan[]): Promise<void> {
    return runAllLaunched(plans, (p) => RingAttentionPlan.launchAll(p));
  }

  /** Waits for the plan's work, frees it and gives its workspace back (every rank in the same
   * order). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    const h = this.#handle;
    this.#handle = 0;
    try {
      check(native().weft_ring_attention_plan_destroy(h), `${this.label}.dispose`);
    } finally {
      this.#workspace.dispose();
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

function readChoice(buf: Uint8Array): RingChoiceInfo {
  const c = RingAttentionChoice.read(buf);
  return {
    mover: MOVER_NAMES[c.mover] ?? "none", commCtas: c.comm_ctas, groupHeads: c.group_heads, groups: c.groups, slots: c.slots, ctas: c.ctas,
    shard: c.shard, workspaceBytes: Number(c.workspace_bytes), receiveBytes: Number(c.receive_bytes), predictedUs: c.predicted_us,
  };
}

/** comm.ringAttention's body: validates, asks the cost model, takes symmetric workspace, creates the
 * plan (collective: every rank in the same order) and a barrier that orders every rank's setup
 * before any peer connects. */
export function ringAttention(comm: Communicator, args: RingAttentionArgs): RingAttentionPlan {
  const op = "Communicator.ringAttention";
  // (comm.ts imports this module too: Communicator is used at call time only.)
  const internals = Communicator.internals(comm);
  internals.guard(op);
  const names = ["q", "k", "v", "out", "lse"] as const;
  const tensors: Tensor[] = [];
  for (const name of names) {
    const t = args?.[name];
    if (t === undefined && name === "lse") continue;
    if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    t.guard(op);
    tensors.push(t);
  }
  const desc = (t: Tensor) => ({ shape: t.shape, dtype: t.dtype, device: t.device, symmetric: t instanceof SymmetricTensor && t.owner === comm });
  const shape = validateRingAttention(comm.size, comm.rank, comm.device, {
    ...args, q: desc(args.q), k: desc(args.k), v: desc(args.v), out: desc(args.out), ...(args.lse ? { lse: desc(args.lse) } : {}),
  }, op);
  const c = args.config ?? {};
  const params = RingAttentionParams.write(RingAttentionParams.alloc(), {
    q: args.q.ptr, k: args.k.ptr, v: args.v.ptr, out: args.out.ptr, lse: args.lse?.ptr ?? 0,
    batch: shape.batch, heads: shape.heads, kv_heads: shape.kvHeads, head_dim: shape.headDim, seqlen: shape.seqlen, kv_rows: shape.kvRows,
    layout: LAYOUTS[shape.layout], flags: shape.causal ? WeftAttentionFlags.WEFT_ATTENTION_CAUSAL : 0, scale: shape.scale, mover: MOVERS[c.mover ?? "auto"], comm_ctas: c.commCtas ?? 0,
    group_heads: c.groupHeads ?? 0, memory_bytes: c.memoryBytes ?? 0, stream: comm.stream.handle,
  });
  const buf = RingAttentionChoice.alloc();
  check(native().weft_ring_attention_choose(internals.handle, params, buf), op);
  const choice = readChoice(buf);
  return createNativePlan(comm, op, RingAttentionParams, params, choice.workspaceBytes, {
    create: (out) => native().weft_ring_attention_plan_create(internals.handle, params, out),
    destroy: (handle) => native().weft_ring_attention_plan_destroy(handle),
  }, (handle, workspace) => {
    // The workspace was zeroed and this rank's offsets written on the stream; a barrier there orders
    // both before any peer reads them (at its first launch) or copies into them.
    const barrier = comm.prepare.barrier();
    const seq = barrier.launch();
    return new RingAttentionPlan(comm, shape, choice, handle, workspace, tensors, internals.completion, { wait: () => barrier.wait(seq) });
  });
}
