// tp.ts — fused tensor-parallel ops over NVLink: a GEMM and its communication as one persistent
// kernel per rank (cuda/fused/*), or, where the cost model says it is faster (small M, odd sizes),
// our own GEMM and collective in sequence. Every rank of the communicator makes the same calls.
//
// They are methods of Communicator (lib/comm.ts), whose bodies call createTpPlan() here:
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
import { TpChoice, OpLaunch, TpParams } from "../abi.ts";
import type { Communicator } from "../comm.ts";
import type { CommInternals } from "../comm/internals.ts";
import { decodeReason, type Completion, type FailureDescriber } from "../completion.ts";
import { ArgumentError, TimeoutError, WeftError } from "../errors.ts";
import { NativeHandle, teardown } from "../handle.ts";
import { SymmetricTensor } from "../heap.ts";
import { check, native } from "../native.ts";
import { LaunchPlan, runAllLaunched, writeSlot } from "../plan.ts";
import { Tensor } from "../tensor.ts";
import {
  FLAG_B_NK, MOVER_NAMES, MOVERS, OPS, opName, PATHS, validateTp, validateTpConfig,
  type AllGatherGemmArgs, type GemmScatterArgs, type TpConfig, type TpOp, type TpShape, type TpTensorDesc,
} from "./tp-validation.ts";
import { createNativePlan } from "./native-plan.ts";

export {
  validateTp, validateTpConfig,
  type AllGatherGemmArgs, type GemmScatterArgs, type TpConfig, type TpMover, type TpOp, type TpPath, type TpShape, type TpTensorDesc,
} from "./tp-validation.ts";

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

export const ENGINE_STAGE: Record<number, string> = {
  1: "the producer, waiting for a peer's data (all-gather: its rows of A; reduce-scatter and all-reduce with the copy-engine mover: its partials of this rank's rows)",
  2: "a consumer (shared-memory pipeline)",
  3: "the epilogue, waiting for a tile's owner to store it or for the peers to enter the launch",
  4: "the end of the kernel, waiting for the peers to finish adding (or for this rank's copies to land)",
};

function describer(comm: Communicator, internals: CommInternals, op: string): FailureDescriber {
  const collective = internals.describe(op);
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

/** The native plan (WeftTpPlan*) a TpPlan owns. */
class NativeTpPlan extends NativeHandle {
  constructor(handle: number, op: TpOp, rank: number) {
    super(handle, `TpPlan ${op} on rank ${rank}`, "its workspace stays in the symmetric heap and its native plan until exit");
  }

  handle(op: string): number {
    return this.pointerFor(op);
  }

  protected destroy(handle: number): void {
    check(native().weft_tp_plan_destroy(handle), "TpPlan.dispose");
  }
}

/** One rank's prepared tensor-parallel op: launch it as often as needed (each launch takes the next
 * epoch; every rank launches its plans in the same order). */
export class TpPlan extends LaunchPlan implements Disposable {
  readonly op: TpOp;
  readonly comm: Communicator;
  readonly shape: TpShape;
  readonly choice: TpChoiceInfo;
  readonly #native: NativeTpPlan;
  readonly #workspace: readonly SymmetricTensor[];
  readonly #tensors: readonly Tensor[];
  readonly #launch = OpLaunch.alloc();
  readonly #words: Uint32Array;
  protected readonly describe: FailureDescriber;
  protected readonly completion: Completion;
  readonly #internals: CommInternals;
  #setupFailure: Error | undefined;

  /** @internal comm.allGatherGemm() and the others make plans (createTpPlan). */
  constructor(comm: Communicator, internals: CommInternals, op: TpOp, shape: TpShape, choice: TpChoiceInfo, handle: number,
    workspace: readonly SymmetricTensor[], tensors: readonly Tensor[], setup: Promise<void>) {
    super();
    this.#native = new NativeTpPlan(handle, op, comm.rank);
    this.comm = comm;
    this.op = op;
    this.shape = shape;
    this.choice = choice;
    this.#workspace = workspace;
    this.#tensors = tensors;
    this.#words = new Uint32Array(this.#launch.buffer);
    this.#internals = internals;
    this.completion = internals.completion;
    // A launch that fails after the plan's setup sync failed is that failure's echo: report the cause.
    const describe = describer(comm, internals, opName(op));
    this.describe = (reason, seq) => this.#setupFailure ?? describe(reason, seq);
    setup.catch((e: Error) => {
      this.#setupFailure = e;
    });
  }

  /** Launches on the communicator's stream and returns the launch's sequence number; no wait. */
  launch(): number {
    const op = opName(this.op);
    this.#checkUsable(op);
    const handle = this.#native.handle(op);
    const seq = this.#takeSlot();
    check(native().weft_tp_plan_launch(handle, this.#launch), op);
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
    const launches = new Uint8Array(OpLaunch.size * plans.length);
    const seqs = plans.map((p, i) => {
      const seq = p.#takeSlot();
      launches.set(p.#launch, i * OpLaunch.size);
      handles[i] = BigInt(p.#native.handle(op));
      return seq;
    });
    check(native().weft_tp_plans_launch(handles, launches, plans.length), op);
    return seqs;
  }

  #checkUsable(op: string): void {
    this.#native.guard(op);
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
    return runAllLaunched(plans, (p) => TpPlan.launchAll(p));
  }

  get label(): string {
    return opName(this.op);
  }

  /** Waits for this plan's work, frees it and gives its workspace back to the heap. Every rank
   * disposes its plans in the same order (the heap stays symmetric). Idempotent. */
  dispose(): void {
    teardown(`${opName(this.op)}.dispose`, [() => this.#native.dispose(), ...this.#workspace.map((t) => () => t.dispose())]);
  }

  get disposed(): boolean {
    return this.#native.disposed;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  override toString(): string {
    return `TpPlan(${this.op}, rank ${this.comm.rank}, M ${this.shape.m} n ${this.shape.n} k ${this.shape.k}, ${this.choice.path}` +
      `${this.choice.path === "fused" ? `, tile ${this.choice.tileN}, mover ${this.choice.mover}` : ""})`;
  }
}

const LAUNCH = { done: OpLaunch.offsets.done / 4, seq: OpLaunch.offsets.seq / 4, arrivals: OpLaunch.offsets.arrivals / 4 };


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

/** The argument object of an op, or an ArgumentError naming it. */
function checkArgs(name: string, args: AllGatherGemmArgs | GemmScatterArgs): AllGatherGemmArgs {
  if (args === null || typeof args !== "object") throw new ArgumentError(name, "args", `must be an object { a, b, out, ... } (got ${args === null ? "null" : typeof args})`);
  return args as AllGatherGemmArgs;
}

/** Validates a call and asks the native cost model what a plan for it would run. */
function choose(comm: Communicator, internals: CommInternals, op: TpOp, args: AllGatherGemmArgs, name: string) {
  const shape = validateTp(op, comm.size, comm.device, { ...args, a: desc(args.a, comm)!, b: desc(args.b, comm)!, out: desc(args.out, comm)!,
    gatheredA: desc(args.gatheredA, comm) });
  const config = validateTpConfig(args.config, name, op, comm.maxCtas);
  const params = pack(comm, op, shape, args, config);
  const buf = TpChoice.alloc();
  check(native().weft_tp_choose(internals.handle, params, buf), name);
  return { shape, params, choice: readChoice(buf) };
}

/** The configuration a plan for these arguments would run, without creating it (comm.tpChoice). */
export function chooseTpPlan(comm: Communicator, internals: CommInternals, op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs): TpChoiceInfo {
  const name = opName(op);
  internals.guard(name);
  return choose(comm, internals, op, checkArgs(name, args), name).choice;
}

/** The configuration a plan for these arguments would run, without creating it. */
export function tpChoice(comm: Communicator, op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs): TpChoiceInfo {
  return comm.tpChoice(op, args);
}

/** The body of comm.allGatherGemm() and its siblings: validates, asks the cost model, takes the
 * workspace from the symmetric heap and creates the native plan. Collective. */
export function createTpPlan(comm: Communicator, internals: CommInternals, op: TpOp, given: AllGatherGemmArgs | GemmScatterArgs): TpPlan {
  const name = opName(op);
  internals.guard(name);
  const args = checkArgs(name, given);
  const tensors = [args.a, args.b, args.out, ...(args.gatheredA !== undefined ? [args.gatheredA] : [])];
  tensors.forEach((t, i) => {
    if (!(t instanceof Tensor)) throw new ArgumentError(name, ["a", "b", "out", "gatheredA"][i]!, "must be a Tensor");
    t.guard(name);
  });
  const { shape, params, choice } = choose(comm, internals, op, args, name);
  return createNativePlan(comm, name, TpParams, params, choice.workspaceBytes, {
    create: (out) => native().weft_tp_plan_create(internals.handle, params, out),
    destroy: (handle) => native().weft_tp_plan_destroy(handle),
  }, (handle, workspace) => {
    // The workspace was zeroed on the stream; a barrier on the same stream orders that before any
    // peer's first launch (each rank enters it only after its earlier stream work).
    const ready = comm.prepare.barrier();
    const setup = ready.promise(ready.launch());
    return new TpPlan(comm, internals, op, shape, choice, handle, [workspace], tensors, setup);
  });
}
