// tp.ts — fused tensor-parallel ops over NVLink: a GEMM and its communication as one persistent
// kernel per rank (cuda/fused/*), or, where the cost model says it is faster (small M, odd sizes),
// our own GEMM and collective in sequence. Every rank of the communicator makes the same calls.
//
//   const ag = comm.allGatherGemm({ a, b, out });          // column parallel: out = allgather(a) · b
//   const rs = comm.gemmReduceScatter({ a, b, out });      // row parallel: out = my rows of Σ a·b
//   const ar = comm.gemmAllReduce({ a, b, out });          // out = Σ over ranks of a · b
//   await ag.run();                                        // reusable: run() as often as needed
//
// Shapes, with W ranks and m_shard = ceil(M / W) (rank r owns rows r·m_shard .. of the sharded side):
//   allGatherGemm      a [m_shard, K]    b [K, n] or [n, K] (transB)   out [M, n]         gatheredA? [M, K]
//   gemmReduceScatter  a [M, k]          b [k, N] or [N, k]            out [m_shard, N]   (symmetric)
//   gemmAllReduce      a [M, k]          b [k, N] or [N, k]            out [M, N]         (symmetric)
// n = N / W and k = K / W are this rank's shards of the weights. M is out's rows (all-gather) or a's
// rows (the others); rows of out past M (reduce-scatter, last ranks) receive zeros. Outputs the
// peers write into must come from comm.empty(); everything is bf16.
//
// Creating a plan is collective: it takes symmetric workspace from the heap (so every rank must
// create and dispose its plans in the same order), zeroes it on the communicator's stream and
// launches a barrier there, so no peer's first launch can see the old contents.
import { TpChoice, TpLaunch, TpParams } from "../abi.ts";
import { Communicator } from "../comm.ts";
import { decodeReason, type Completion, type FailureDescriber } from "../completion.ts";
import { LaunchPlan, writeSlot } from "../plan.ts";
import type { DType } from "../dtype.ts";
import { matrix, type TensorDesc } from "./gemm.ts";
import { ArgumentError, checkInt, DisposedError, TimeoutError, WeftError } from "../errors.ts";
import { SymmetricTensor } from "../heap.ts";
import { check, native, outPointer } from "../native.ts";
import { Tensor } from "../tensor.ts";

export type TpOp = "allGatherGemm" | "gemmReduceScatter" | "gemmAllReduce";
export type TpPath = "auto" | "fused" | "sequential";
export type TpMover = "auto" | "ctas" | "copyEngine" | "exchange";

/** Overrides of the cost model's choices; every field is optional and validated. */
export interface TpConfig {
  /** "fused": one persistent kernel (an error where the shape does not allow it); "sequential": our
   * GEMM and our collective one after the other; "auto" (default): whichever the cost model predicts
   * faster. */
  path?: TpPath;
  /** Who moves data between the GPUs on the fused path. allGatherGemm: "copyEngine" (default) copies
   * A's rows with the copy engines, no SM taken; "ctas" uses some CTAs of the kernel (see commCtas).
   * gemmReduceScatter / gemmAllReduce: "ctas" (the GEMM's epilogue stores and adds into the peers'
   * outputs over NVLink) or "copyEngine" (the epilogue stores the peers' partials locally, the copy
   * engines move them, the owner adds them in its epilogue; needs M a multiple of 128 x world size).
   * gemmAllReduce also: "exchange" (every rank's epilogue stores each partial tile into every peer
   * and adds theirs: decode sizes). "auto" picks by the cost model. */
  mover?: TpMover;
  /** All-gather with mover "ctas": how many CTAs move data (the rest run the GEMM). */
  commCtas?: number;
  /** Columns per CTA tile: 128 or 256 (all-reduce also 64; with mover "exchange", 256 only when the
   * tiles fit one wave of the GPU's SMs). */
  tileN?: 64 | 128 | 256;
  /** Tile-order band height in tile rows; must divide a shard's tile rows (M / W / 128). Default: the
   * largest power of two up to the GEMM engine's band (16 at 256-wide tiles; all-reduce: 4) that
   * divides them. */
  groupM?: number;
}

export interface AllGatherGemmArgs {
  a: Tensor;
  b: Tensor;
  out: Tensor;
  /** Receives allgather(a) [M, K] too (the backward pass needs it). */
  gatheredA?: Tensor;
  /** true: b is [n, K] and out = a · bᵀ (the weights layout). Default false: b is [K, n]. */
  transB?: boolean;
  config?: TpConfig;
}

export interface GemmScatterArgs {
  a: Tensor;
  b: Tensor;
  /** Symmetric (comm.empty): the peers write into it. */
  out: Tensor;
  transB?: boolean;
  config?: TpConfig;
}

/** What a plan runs (weft_tp_choose). */
export interface TpChoiceInfo {
  path: "fused" | "sequential";
  mover: "none" | "ctas" | "copyEngine" | "exchange";
  commCtas: number;
  gemmCtas: number;
  /** 0 on the sequential path: the GEMM's own heuristic picks. */
  tileN: number;
  groupM: number;
  chunkRows: number;
  fusedAvailable: boolean;
  /** Why the fused kernel cannot take this call ("" when it can). */
  reason: string;
  workspaceBytes: number;
  predictedFusedUs: number;
  predictedSequentialUs: number;
}

/** A tensor as the validation sees it (a Tensor, or a plain description in CPU tests). */
export interface TpTensorDesc extends TensorDesc {
  /** A symmetric tensor of this communicator. */
  readonly symmetric?: boolean;
}

export interface TpShape {
  m: number;
  n: number;
  k: number;
  mShard: number;
  transB: boolean;
}

const OPS: Record<TpOp, number> = { allGatherGemm: 0, gemmReduceScatter: 1, gemmAllReduce: 2 };
const PATHS: Record<TpPath, number> = { auto: 0, fused: 1, sequential: 2 };
const MOVERS: Record<TpMover, number> = { auto: 0, ctas: 1, copyEngine: 2, exchange: 4 };
const MOVER_NAMES = ["none", "ctas", "copyEngine", "none", "exchange"] as const;
const FLAG_B_NK = 1;

function opName(op: TpOp): string {
  return `Communicator.${op}`;
}

function bf16Matrix(t: TpTensorDesc | undefined, op: string, name: string): [number, number] {
  const rc = matrix(t, op, name);
  if (t!.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${t!.dtype})`);
  return rc;
}

function positiveInt(op: string, name: string, v: unknown, max = 2 ** 31 - 1): number {
  return checkInt(op, name, v, 1, max);
}

/** Checks a config override; returns it with 0 / "auto" for every field left to the cost model. */
export function validateTpConfig(config: TpConfig | undefined, op: string, tpOp: TpOp, maxCtas: number): Required<TpConfig> {
  const c = config ?? {};
  if (typeof c !== "object" || c === null) throw new ArgumentError(op, "config", "must be an object");
  for (const key of Object.keys(c)) {
    if (!["path", "mover", "commCtas", "tileN", "groupM"].includes(key)) {
      throw new ArgumentError(op, `config.${key}`, "is not a config field (path, mover, commCtas, tileN, groupM)");
    }
  }
  const path = c.path ?? "auto";
  if (!(path in PATHS)) throw new ArgumentError(op, "config.path", `must be 'auto', 'fused' or 'sequential' (got ${JSON.stringify(path)})`);
  const mover = c.mover ?? "auto";
  if (!(mover in MOVERS)) {
    throw new ArgumentError(op, "config.mover", `must be 'auto', 'ctas', 'copyEngine' or 'exchange' (got ${JSON.stringify(mover)})`);
  }
  if (mover === "exchange" && tpOp !== "gemmAllReduce") throw new ArgumentError(op, "config.mover", "'exchange' applies to gemmAllReduce only");
  const commCtas = c.commCtas === undefined ? 0 : positiveInt(op, "config.commCtas", c.commCtas, maxCtas - 1);
  if (commCtas > 0 && (tpOp !== "allGatherGemm" || mover === "copyEngine")) {
    throw new ArgumentError(op, "config.commCtas", "applies to allGatherGemm's CTA mover only (mover 'ctas')");
  }
  const allowed = tpOp === "gemmAllReduce" ? [64, 128, 256] : [128, 256];
  if (c.tileN !== undefined && !allowed.includes(c.tileN)) {
    throw new ArgumentError(op, "config.tileN", `must be one of ${allowed.join(", ")} for ${tpOp} (got ${JSON.stringify(c.tileN)})`);
  }
  const groupM = c.groupM === undefined ? 0 : positiveInt(op, "config.groupM", c.groupM);
  return { path, mover, commCtas, tileN: (c.tileN ?? 0) as 64 | 128 | 256, groupM };
}

/** Validates one rank's operands of a tensor-parallel op without touching a GPU. Throws
 * ArgumentError naming the argument and the rule; returns this rank's GEMM problem. */
export function validateTp(op: TpOp, world: number, device: number,
  args: { a: TpTensorDesc; b: TpTensorDesc; out: TpTensorDesc; gatheredA?: TpTensorDesc; transB?: boolean }): TpShape {
  const name = opName(op);
  if (args === null || typeof args !== "object") throw new ArgumentError(name, "args", "must be an object { a, b, out, ... }");
  const transB = args.transB ?? false;
  if (typeof transB !== "boolean") throw new ArgumentError(name, "transB", `must be a boolean (got ${JSON.stringify(transB)})`);
  const [ar, ac] = bf16Matrix(args.a, name, "a");
  const [b0, b1] = bf16Matrix(args.b, name, "b");
  const [or, oc] = bf16Matrix(args.out, name, "out");
  for (const [arg, t] of [["a", args.a], ["b", args.b], ["out", args.out]] as const) {
    if (t.device !== device) throw new ArgumentError(name, arg, `is on device ${t.device} but this rank's communicator is on device ${device}`);
  }
  const [bn, bk] = transB ? [b0, b1] : [b1, b0];
  const bShape = transB ? "[n, K]" : "[K, n]";
  if (bk !== ac) {
    throw new ArgumentError(name, "b", `is [${b0}, ${b1}], read as ${bShape}${transB ? " (transB)" : ""}, so K = ${bk}, but a has ${ac} columns`);
  }
  if (oc !== bn) throw new ArgumentError(name, "out", `has ${oc} columns but b gives n = ${bn}`);
  const k = ac;
  const n = bn;
  let m: number;
  let mShard: number;
  if (op === "allGatherGemm") {
    m = or;
    mShard = Math.ceil(m / world);
    if (ar !== mShard) {
      throw new ArgumentError(name, "a", `has ${ar} rows but out has M = ${m} rows, so each of the ${world} ranks holds ceil(M / ${world}) = ${mShard}`);
    }
    if (args.gatheredA !== undefined) {
      const [gr, gc] = bf16Matrix(args.gatheredA, name, "gatheredA");
      if (args.gatheredA.device !== device) throw new ArgumentError(name, "gatheredA", `is on device ${args.gatheredA.device} but this rank is on device ${device}`);
      if (gr !== m || gc !== k) throw new ArgumentError(name, "gatheredA", `must be [${m}, ${k}] (got [${gr}, ${gc}])`);
    }
  } else {
    if (args.gatheredA !== undefined) throw new ArgumentError(name, "gatheredA", "is an allGatherGemm output");
    m = ar;
    mShard = Math.ceil(m / world);
    const rows = op === "gemmReduceScatter" ? mShard : m;
    if (or !== rows) {
      throw new ArgumentError(name, "out", `has ${or} rows but must have ${op === "gemmReduceScatter" ? `ceil(M / ${world}) = ${mShard}` : `M = ${m}`} (a is [${ar}, ${ac}])`);
    }
    if (!args.out.symmetric) {
      throw new ArgumentError(name, "out", "must be a symmetric tensor of this communicator (comm.empty): the peers write into it");
    }
  }
  return { m, n, k, mShard, transB };
}

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(): its workspace stays in the symmetric heap.`);
});

const ENGINE_STAGE: Record<number, string> = {
  1: "the producer, waiting for a peer's data (all-gather: its rows of A; reduce-scatter and all-reduce with the copy-engine mover: its partials of this rank's rows)",
  2: "a consumer (shared-memory pipeline)",
  3: "the epilogue, waiting for a tile's owner to store it or for the peers to enter the launch",
  4: "the end of the kernel, waiting for the peers to finish adding (or for this rank's copies to land)",
};

function describer(comm: Communicator, op: string): FailureDescriber {
  const collective = Communicator.internals(comm).describe(op);
  return (reason, seq) => {
    const { code, stage } = decodeReason(reason);
    if (code < 0) return collective(reason, seq);  // the sequential path's collective failed
    const where = ENGINE_STAGE[stage] ?? `stage ${stage}`;
    if (code === 1 || code === 2) {
      return new TimeoutError(`rank ${comm.rank}: ${code === 1 ? "a shared-memory barrier wait" : "a wait for a peer's signal"} ` +
        `ran out (${comm.timeoutMs} ms) in ${where}. Every rank must launch the same plans in the same order`, { code: "E_TIMEOUT", op });
    }
    return new WeftError(`rank ${comm.rank}: launch ${seq} failed (code ${code}, ${where})`, { code: "E_INTERNAL", op });
  };
}

/** One rank's prepared tensor-parallel op: launch it as often as needed (each launch takes the next
 * epoch; every rank launches its plans in the same order). */
export class TpPlan extends LaunchPlan implements Disposable {
  readonly op: TpOp;
  readonly comm: Communicator;
  readonly shape: TpShape;
  readonly choice: TpChoiceInfo;
  #handle: number;
  readonly #workspace: readonly SymmetricTensor[];
  readonly #tensors: readonly Tensor[];
  readonly #launch = TpLaunch.alloc();
  readonly #words: Uint32Array;
  protected readonly describe: FailureDescriber;
  protected readonly completion: Completion;
  readonly #internals: ReturnType<typeof Communicator.internals>;
  #setupFailure: Error | undefined;
  #disposed = false;

  /** @internal comm.allGatherGemm() and the others make plans. */
  constructor(comm: Communicator, op: TpOp, shape: TpShape, choice: TpChoiceInfo, handle: number, workspace: readonly SymmetricTensor[],
    tensors: readonly Tensor[], setup: Promise<void>) {
    super();
    this.comm = comm;
    this.op = op;
    this.shape = shape;
    this.choice = choice;
    this.#handle = handle;
    this.#workspace = workspace;
    this.#tensors = tensors;
    this.#words = new Uint32Array(this.#launch.buffer);
    this.#internals = Communicator.internals(comm);
    this.completion = this.#internals.completion;
    // A launch that fails after the plan's setup sync failed is that failure's echo: report the cause.
    const describe = describer(comm, opName(op));
    this.describe = (reason, seq) => this.#setupFailure ?? describe(reason, seq);
    setup.catch((e: Error) => {
      this.#setupFailure = e;
    });
    leaks.register(this, `TpPlan ${op} on rank ${comm.rank}`, this);
  }

  /** Launches on the communicator's stream and returns the launch's sequence number; no wait. */
  launch(): number {
    const op = opName(this.op);
    this.#checkUsable(op);
    const seq = this.#takeSlot();
    check(native().weft_tp_plan_launch(this.#handle, this.#launch), op);
    return seq;
  }

  /** Launches several plans of this process together (one per rank of Communicator.local, say) and
   * returns their sequence numbers: every plan's kernel is queued before any plan's copy-engine
   * work, so no rank's kernel waits behind another rank's host-side copy enqueue. Launching them one
   * by one is correct too, only their kernels start further apart. */
  static launchAll(plans: readonly TpPlan[]): number[] {
    const op = "TpPlan.launchAll";
    if (!Array.isArray(plans) || plans.length === 0 || !plans.every((p) => p instanceof TpPlan)) {
      throw new ArgumentError(op, "plans", "must be a non-empty array of TpPlans");
    }
    if (new Set(plans).size !== plans.length) throw new ArgumentError(op, "plans", "must not hold the same plan twice");
    for (const p of plans) p.#checkUsable(opName(p.op));  // before any plan takes a completion slot
    const handles = new BigUint64Array(plans.length);
    const launches = new Uint8Array(TpLaunch.size * plans.length);
    const seqs = plans.map((p, i) => {
      const seq = p.#takeSlot();
      launches.set(p.#launch, i * TpLaunch.size);
      handles[i] = BigInt(p.#handle);
      return seq;
    });
    check(native().weft_tp_plans_launch(handles, launches, plans.length), op);
    return seqs;
  }

  #checkUsable(op: string): void {
    if (this.#disposed) throw new DisposedError(op, "TpPlan");
    if (this.#setupFailure) throw this.#setupFailure;
    this.#internals.guard(op);
    for (const t of this.#tensors) t.guard(op);
  }

  /** The next completion slot, written into this plan's launch struct; returns its sequence number. */
  #takeSlot(): number {
    const slot = this.completion.slot();
    writeSlot(this.#words, LAUNCH, slot);
    return slot.seq;
  }

  /** launchAll(plans), then one Promise that resolves when every plan's launch is done. */
  static runAll(plans: readonly TpPlan[]): Promise<void> {
    let seqs: number[];
    try {
      seqs = TpPlan.launchAll(plans);
    } catch (e) {
      return Promise.reject(e);
    }
    return Promise.all(plans.map((p, i) => p.promise(seqs[i]!))).then(() => undefined);
  }

  get label(): string {
    return opName(this.op);
  }

  /** Waits for this plan's work, frees it and gives its workspace back to the heap. Every rank
   * disposes its plans in the same order (the heap stays symmetric). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    leaks.unregister(this);
    const h = this.#handle;
    this.#handle = 0;
    try {
      check(native().weft_tp_plan_destroy(h), `${opName(this.op)}.dispose`);
    } finally {
      for (const t of this.#workspace) t.dispose();
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  override toString(): string {
    return `TpPlan(${this.op}, rank ${this.comm.rank}, M ${this.shape.m} n ${this.shape.n} k ${this.shape.k}, ${this.choice.path}` +
      `${this.choice.path === "fused" ? `, tile ${this.choice.tileN}, mover ${this.choice.mover}` : ""})`;
  }
}

const LAUNCH = { done: TpLaunch.offsets.done / 4, seq: TpLaunch.offsets.seq / 4, arrivals: TpLaunch.offsets.arrivals / 4 };


function desc(t: Tensor | undefined, comm: Communicator): TpTensorDesc | undefined {
  if (t === undefined) return undefined;
  if (!(t instanceof Tensor)) return t as unknown as TpTensorDesc;
  return { shape: t.shape, dtype: t.dtype, device: t.device, symmetric: t instanceof SymmetricTensor && t.owner === comm };
}

function readChoice(buf: Uint8Array): TpChoiceInfo {
  const c = TpChoice.read(buf);
  return {
    path: c.path === 1 ? "fused" : "sequential",
    mover: MOVER_NAMES[c.mover] ?? "none",
    commCtas: c.comm_ctas,
    gemmCtas: c.gemm_ctas,
    tileN: c.tile_n,
    groupM: c.group_m,
    chunkRows: c.chunk_rows,
    fusedAvailable: c.fused_available === 1,
    reason: c.reason,
    workspaceBytes: Number(c.workspace_bytes),
    predictedFusedUs: c.predicted_fused_us,
    predictedSequentialUs: c.predicted_sequential_us,
  };
}

function pack(comm: Communicator, op: TpOp, shape: TpShape, args: AllGatherGemmArgs | GemmScatterArgs, config: Required<TpConfig>): Uint8Array {
  return TpParams.write(TpParams.alloc(), {
    op: OPS[op], flags: shape.transB ? FLAG_B_NK : 0, m: shape.m, n: shape.n, k: shape.k,
    a: args.a.ptr, b: args.b.ptr, out: args.out.ptr, gathered: (args as AllGatherGemmArgs).gatheredA?.ptr ?? 0,
    path: PATHS[config.path], mover: MOVERS[config.mover], comm_ctas: config.commCtas, tile_n: config.tileN, group_m: config.groupM,
    stream: comm.stream.handle,
  });
}

/** Validates a call and asks the native cost model what a plan for it would run. */
function choose(comm: Communicator, op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs, name: string) {
  const internals = Communicator.internals(comm);
  const shape = validateTp(op, comm.size, comm.device, { ...args, a: desc(args.a, comm)!, b: desc(args.b, comm)!, out: desc(args.out, comm)!,
    gatheredA: desc((args as AllGatherGemmArgs).gatheredA, comm) });
  const config = validateTpConfig(args.config, name, op, comm.maxCtas);
  const params = pack(comm, op, shape, args, config);
  const buf = TpChoice.alloc();
  check(native().weft_tp_choose(internals.handle, params, buf), name);
  return { shape, params, choice: readChoice(buf) };
}

/** The configuration a plan for these arguments would run, without creating it. */
export function tpChoice(comm: Communicator, op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs): TpChoiceInfo {
  const name = opName(op);
  Communicator.internals(comm).guard(name);
  return choose(comm, op, args, name).choice;
}

function createPlan(comm: Communicator, op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs): TpPlan {
  const name = opName(op);
  const internals = Communicator.internals(comm);
  internals.guard(name);
  const gatheredA = (args as AllGatherGemmArgs)?.gatheredA;
  const tensors = [args?.a, args?.b, args?.out, ...(gatheredA ? [gatheredA] : [])];
  tensors.forEach((t, i) => {
    if (!(t instanceof Tensor)) throw new ArgumentError(name, ["a", "b", "out", "gatheredA"][i]!, "must be a Tensor");
    t.guard(name);
  });
  const { shape, params, choice } = choose(comm, op, args, name);
  const workspace = comm.empty([choice.workspaceBytes], "u8");
  let handle = 0;
  try {
    TpParams.write(params, { workspace: workspace.ptr, workspace_bytes: workspace.bytes });
    const out = new BigUint64Array(1);
    check(native().weft_tp_plan_create(internals.handle, params, out), name);
    handle = outPointer(out);
    // The workspace was zeroed on the stream; a barrier on the same stream orders that before any
    // peer's first launch (each rank enters it only after its earlier stream work).
    const ready = comm.prepare.barrier();
    const setup = ready.promise(ready.launch());
    return new TpPlan(comm, op, shape, choice, handle, [workspace], tensors as Tensor[], setup);
  } catch (e) {
    if (handle) native().weft_tp_plan_destroy(handle);
    workspace.dispose();
    throw e;
  }
}

declare module "../comm.ts" {
  interface Communicator {
    /** Column-parallel GEMM: out [M, n] = allgather(a) · b (see lib/ops/tp.ts). Collective. */
    allGatherGemm(args: AllGatherGemmArgs): TpPlan;
    /** Row-parallel GEMM: out [ceil(M / W), N] = this rank's rows of Σ over ranks a · b. Collective. */
    gemmReduceScatter(args: GemmScatterArgs): TpPlan;
    /** out [M, N] = Σ over ranks a · b on every rank. Collective. */
    gemmAllReduce(args: GemmScatterArgs): TpPlan;
  }
}

Communicator.prototype.allGatherGemm = function allGatherGemm(this: Communicator, args: AllGatherGemmArgs): TpPlan {
  return createPlan(this, "allGatherGemm", args);
};
Communicator.prototype.gemmReduceScatter = function gemmReduceScatter(this: Communicator, args: GemmScatterArgs): TpPlan {
  return createPlan(this, "gemmReduceScatter", args);
};
Communicator.prototype.gemmAllReduce = function gemmAllReduce(this: Communicator, args: GemmScatterArgs): TpPlan {
  return createPlan(this, "gemmAllReduce", args);
};
