// moe.ts — MoE expert parallelism on the GPU: routing, dispatch (every routed row into its expert's
// owner's receive layout) and combine (rows back, weighted sum), each one kernel, no host sync, so
// plans run back to back and can be captured in a CUDA graph (lib/graph.ts). The same ops fused with
// the experts' grouped GEMMs, and the whole layer, are in moe-gemm.ts and moe-layer.ts.
//
//   const { ids, weights } = await moeRoute({ logits, topk: 8 });           // one GPU (moe-route.ts)
//   const d = comm.moeDispatch({ x, topkIds: ids, topkWeights: weights, experts: 64 });
//   const c = comm.moeCombine({ dispatch: d, hidden, out });             // hidden: the experts' outputs
//   await d.run();   // d.layout.recv [capacity, H]: rows grouped by local expert, padded to 128
//   ...              // the experts' GEMMs over d.layout (expertOffsets, expertCounts), on comm.stream
//   await c.run();   // out [T, H] = Σ_k weights[t, k] · expert_k(x[t])
//
// Expert e lives on rank ⌊e / (E / W)⌋. The receive layout (weft.h, cuda/moe/moe.h): local expert
// le's rows start at expertOffsets[le] (a multiple of 128) and hold expertCounts[le] rows, this
// rank's own first, then the other sources; rowSource [capacity, 4] says per row (source rank,
// token, k slot, 0), -1 on padding rows. Rows past the counts are left as they were.
//
// Plans are collective, like the TP ops: their workspace comes from the symmetric heap (every rank
// creates and disposes its MoE plans in the same order), creation zeroes it and runs a barrier.
// Run whatever reads layout.recv (the experts' GEMMs) on comm.stream, or before the next dispatch.
import { MoeCombineChoice, MoeCombineParams, MoeDispatchChoice, MoeDispatchParams, OpLaunch, WeftAbortSource } from "../abi.ts";
import { Communicator } from "../comm.ts";
import { Completion, decodeReason, type FailureDescriber } from "../completion.ts";
import { DTYPES } from "../dtype.ts";
import { ArgumentError, DisposedError, PeerError, TimeoutError, WeftError } from "../errors.ts";
import type { SymmetricTensor } from "../heap.ts";
import { check, native, viewNative } from "../native.ts";
import { LaunchPlan, writeSlot } from "../plan.ts";
import { Tensor } from "../tensor.ts";
import { validateMoeCombine, validateMoeDispatch, type MoeDispatchShape } from "./moe-validate.ts";
import { createNativePlan } from "./native-plan.ts";

export interface MoeDispatchArgs {
  /** [≥ tokens, H] bf16, H a multiple of 8. */
  x: Tensor;
  /** Rows of x this rank sends (default x.shape[0]); 0 is allowed (a rank with no tokens). */
  tokens?: number;
  /** E; with logits it is logits.shape[1]. */
  experts?: number;
  /** [≥ tokens, k] i32: the routing; with logits, where the GPU routing lands (default: the plan's). */
  topkIds?: Tensor;
  /** [≥ tokens, k] f32: the combine's weights; with logits, where the routing's weights land. */
  topkWeights?: Tensor;
  /** [≥ tokens, E] f32 or bf16: route on the GPU inside the dispatch kernel (softmax, top-k). */
  logits?: Tensor;
  topk?: number;
  normalize?: boolean;
  /** The most tokens any rank sends: the same on every rank (default: tokens). */
  maxTokens?: number;
  /** Receive rows per rank, a multiple of 128 (default: the worst case, W · maxTokens · k + padding,
   * so no row is ever dropped). A routing that needs more fails the launch with an ArgumentError. */
  capacity?: number;
  config?: { ctas?: number };
}

export interface MoeCombineArgs {
  dispatch: MoeDispatchPlan;
  /** [capacity, H] bf16: the experts' outputs, row for row in the dispatch's receive layout. */
  hidden: Tensor;
  /** [≥ tokens, H] bf16. */
  out: Tensor;
  /** Default: the dispatch's topkWeights (given, or routed). */
  topkWeights?: Tensor;
  config?: { ctas?: number };
}

/** The receive layout of one rank, as views of the dispatch plan's workspace (valid until it is disposed). */
export interface MoeLayout {
  readonly world: number;
  readonly rank: number;
  readonly experts: number;
  readonly localExperts: number;
  readonly topk: number;
  readonly hidden: number;
  readonly tokens: number;
  readonly maxTokens: number;
  readonly capacity: number;
  /** [capacity, H] bf16. */
  readonly recv: Tensor;
  /** [capacity, 4] i32: source rank, token, k slot, 0 (-1s on padding rows). */
  readonly rowSource: Tensor;
  /** [localExperts + 1] i32: where each local expert's rows start; the last is the rows used. */
  readonly expertOffsets: Tensor;
  /** [localExperts] i32. */
  readonly expertCounts: Tensor;
  /** [world, localExperts] i32: rows from each source rank. */
  readonly sourceCounts: Tensor;
  /** [capacity / 128 * 8] u8: a uint64 per 128-row block, 128 × launches once its rows have landed. */
  readonly arrivals: Tensor;
}

const FLAG_ROUTE = 1;
export const FLAG_NORMALIZE = 2;
const LAUNCH = { done: OpLaunch.offsets.done / 4, seq: OpLaunch.offsets.seq / 4, arrivals: OpLaunch.offsets.arrivals / 4 };

const FIELDS: Record<number, string> = {
  1: "the number of experts", 2: "topk", 3: "the hidden size", 4: "the world size",
  5: "the capacity", 6: "maxTokens (ranks with different token counts must all pass the same maxTokens)",
  7: "the launch count (one rank launched its MoE plans more or fewer times than the other)",
};
const STAGES: Record<number, string> = {
  1: "to send its counts (did it launch the same plan? is it alive?)", 3: "to deliver the rows routed here",
  4: "(this rank's own CTAs, at a grid barrier)", 5: "to start its combine", 6: "to return this rank's rows",
};

/** Turns a failed MoE launch's reason word (weft.h WeftMoeFailure) into the error to reject with. */
export function describer(comm: Communicator, op: string, report: () => BigUint64Array, shape: MoeDispatchShape): FailureDescriber {
  return (reason) => {
    const { code, stage, field, peer } = decodeReason(reason);
    const who = `rank ${comm.rank}`;
    const words = report();
    switch (code) {
      case 1:
        return new TimeoutError(`${who} waited ${comm.timeoutMs} ms for ${peer === 0xffff ? "a peer" : `rank ${peer}`} ${STAGES[stage] ?? `(stage ${stage})`}`,
          { code: "E_TIMEOUT", op });
      case 2:
        if (field === WeftAbortSource.WEFT_ABORT_HOST) {
          return new PeerError(`${who} stopped: rank ${peer} was declared failed (Communicator.abort)`, { code: "E_PEER", op });
        }
        return new PeerError(`${who} stopped because another rank gave up on this launch (its own error says why)`, { code: "E_PEER", op });
      case 3:
        return new PeerError(`${who} and rank ${peer} created different MoE plans: ${FIELDS[field] ?? `field ${field}`} differs`, { code: "E_PEER", op });
      case 4: {
        const item = Number(words[1]);
        return new ArgumentError(op, "topkIds", `holds expert id ${Number(BigInt.asIntN(32, words[2]!))} at token ${Math.floor(item / shape.topk)}, ` +
          `slot ${item % shape.topk}: ids must be in [0, ${shape.experts}) (nothing was sent)`);
      }
      case 5:
        return new PeerError(`rank ${peer}'s routing holds an expert id outside [0, ${shape.experts}); nothing was sent (its own error says where)`,
          { code: "E_PEER", op });
      case 6:
        return new ArgumentError(op, "capacity", `is ${Number(words[2])} rows, but with this routing rank ${peer}'s experts need ` +
          `${Number(words[1])} rows (each expert padded to 128); nothing was sent. Raise capacity or leave it unset (the worst case)`);
      case 7:
        return new WeftError(`${who}: the dispatch plan's latest launch failed (or never ran), so its layout is not valid`, { code: "E_INVALID", op });
      default:
        return new WeftError(`${who}: launch failed with code ${code} at stage ${stage}`, { code: "E_INTERNAL", op });
    }
  };
}

export function reportView(address: number): () => BigUint64Array {
  const words = new BigUint64Array(viewNative(address, 32));
  return () => words;
}

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(): its workspace stays in the symmetric heap.`);
});

/** The MoE plan kinds, as weft.h names their functions: weft_moe_<kind>_choose, _create, _report,
 * _launch and _destroy. */
export type MoeKind = "dispatch" | "combine" | "dispatch_gemm" | "gemm_combine";

/** The calls every MoE plan makes once it exists (the same signatures for every kind). The symbol
 * names are made once per plan, not per launch. */
export function moePlanCalls(kind: MoeKind) {
  const report = `weft_moe_${kind}_report` as const;
  const launch = `weft_moe_${kind}_launch` as const;
  const destroy = `weft_moe_${kind}_destroy` as const;
  return {
    report: (handle: number, out: BigUint64Array) => native()[report](handle, out),
    launch: (handle: number, words: Uint8Array) => native()[launch](handle, words),
    destroy: (handle: number) => native()[destroy](handle),
  };
}

/** What every MoE plan shares: the native handle, the workspace, the launch struct. */
export abstract class MoePlan extends LaunchPlan implements Disposable {
  readonly comm: Communicator;
  protected readonly completion: Completion;
  protected readonly describe: FailureDescriber;
  readonly #op: string;
  readonly #launch = OpLaunch.alloc();
  readonly #words = new Uint32Array(this.#launch.buffer);
  readonly #workspace: SymmetricTensor;
  readonly #owned: readonly Tensor[];
  readonly #inputs: readonly Tensor[];
  readonly #calls: ReturnType<typeof moePlanCalls>;
  #handle: number;
  #setupFailure: Error | undefined;
  #disposed = false;

  protected constructor(comm: Communicator, op: string, kind: MoeKind, handle: number, workspace: SymmetricTensor,
    inputs: readonly Tensor[], owned: readonly Tensor[], describe: FailureDescriber) {
    super();
    this.comm = comm;
    this.#op = op;
    this.#handle = handle;
    this.#calls = moePlanCalls(kind);
    this.#workspace = workspace;
    this.#inputs = inputs;
    this.#owned = owned;
    const internals = Communicator.internals(comm);
    this.completion = internals.completion;
    this.describe = (reason, seq) => this.#setupFailure ?? describe(reason, seq);
    // Creation zeroed the workspace on the stream; a barrier there orders that before any peer's first launch.
    const ready = comm.prepare.barrier();
    ready.promise(ready.launch()).catch((e: Error) => {
      this.#setupFailure = e;
    });
    leaks.register(this, `${op} plan on rank ${comm.rank}`, this);
  }

  get label(): string {
    return this.#op;
  }

  /** @internal The native plan, for the combines that read a dispatch's layout. */
  static nativeHandle(p: MoePlan): number {
    p.checkUsable();
    return p.#handle;
  }

  protected checkUsable(): void {
    if (this.#disposed) throw new DisposedError(this.#op, "MoE plan");
    if (this.#setupFailure) throw this.#setupFailure;
    Communicator.internals(this.comm).guard(this.#op);
    for (const t of this.#inputs) t.guard(this.#op);
  }

  /** Launches on comm.stream and returns the launch's sequence number; no wait. */
  launch(): number {
    this.checkUsable();
    const slot = this.completion.slot();
    writeSlot(this.#words, LAUNCH, slot);
    check(this.#calls.launch(this.#handle, this.#launch), this.#op);
    return slot.seq;
  }

  /** Enqueues a launch without completion tracking: what a CUDA-graph capture on comm.stream records
   * (lib/graph.ts). A failure then shows only as a failed layout in the next tracked combine. */
  enqueue(): void {
    this.checkUsable();
    check(this.#calls.launch(this.#handle, OpLaunch.alloc()), this.#op);
  }

  /** Waits for the plan's work, frees it and gives its workspace back (every rank disposes its MoE
   * plans in the same order). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    leaks.unregister(this);
    const h = this.#handle;
    this.#handle = 0;
    try {
      check(this.#calls.destroy(h), `${this.#op}.dispose`);
    } finally {
      this.#workspace.dispose();
      for (const t of this.#owned) t.dispose();
    }
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

export type DispatchChoice = ReturnType<typeof MoeDispatchChoice.read>;

/** The receive layout as views of a dispatch plan's workspace (its offsets from the choice). */
export function layoutViews(comm: Communicator, shape: MoeDispatchShape, choice: DispatchChoice, workspace: SymmetricTensor): MoeLayout {
  const capacity = Number(choice.capacity), El = choice.local_experts;
  const view = (offset: bigint | number, dims: number[], dtype: "bf16" | "i32" | "u8") =>
    Tensor.wrap(workspace.ptr + Number(offset), dims, dtype, comm.device);
  return Object.freeze({
    world: comm.size, rank: comm.rank, experts: shape.experts, localExperts: El, topk: shape.topk, hidden: shape.hidden,
    tokens: shape.tokens, maxTokens: Number(choice.max_tokens), capacity,
    recv: view(choice.recv_offset, [capacity, shape.hidden], "bf16"),
    rowSource: view(choice.row_source_offset, [capacity, 4], "i32"),
    expertOffsets: view(choice.expert_offsets_offset, [El + 1], "i32"),
    expertCounts: view(choice.expert_counts_offset, [El], "i32"),
    sourceCounts: view(choice.source_counts_offset, [comm.size, El], "i32"),
    arrivals: view(choice.arrivals_offset, [(capacity / 128) * 8], "u8"),
  });
}

/** One rank's prepared dispatch (comm.moeDispatch). */
export class MoeDispatchPlan extends MoePlan {
  readonly shape: MoeDispatchShape;
  readonly ctas: number;
  readonly layout: MoeLayout;
  /** The routing the plan sends by: the given topkIds, or where its GPU routing lands. */
  readonly topkIds: Tensor;
  readonly topkWeights: Tensor | undefined;

  /** @internal comm.moeDispatch() makes plans. */
  constructor(comm: Communicator, shape: MoeDispatchShape, choice: DispatchChoice, handle: number,
    workspace: SymmetricTensor, inputs: readonly Tensor[], owned: readonly Tensor[], ids: Tensor, weights: Tensor | undefined,
    report: number) {
    super(comm, "Communicator.moeDispatch", "dispatch", handle, workspace, inputs, owned,
      describer(comm, "Communicator.moeDispatch", reportView(report), shape));
    this.shape = shape;
    this.ctas = choice.ctas;
    this.topkIds = ids;
    this.topkWeights = weights;
    this.layout = layoutViews(comm, shape, choice, workspace);
  }

  override toString(): string {
    const s = this.shape;
    return `MoeDispatchPlan(rank ${this.comm.rank} of ${s.world}, T ${s.tokens}, H ${s.hidden}, E ${s.experts}, k ${s.topk}, ` +
      `capacity ${this.layout.capacity}, ${this.ctas} CTAs${s.route ? ", routes from logits" : ""})`;
  }
}

/** One rank's prepared combine (comm.moeCombine). */
export class MoeCombinePlan extends MoePlan {
  readonly dispatch: MoeDispatchPlan;
  readonly ctas: number;

  /** @internal comm.moeCombine() makes plans. */
  constructor(comm: Communicator, dispatch: MoeDispatchPlan, ctas: number, handle: number, workspace: SymmetricTensor,
    inputs: readonly Tensor[], report: number) {
    super(comm, "Communicator.moeCombine", "combine", handle, workspace, inputs, [],
      describer(comm, "Communicator.moeCombine", reportView(report), dispatch.shape));
    this.dispatch = dispatch;
    this.ctas = ctas;
  }

  protected override checkUsable(): void {
    if (this.dispatch.disposed) throw new DisposedError(this.label, "the dispatch plan this combine reads");
    super.checkUsable();
  }
}

/** Runs `make`, which pushes the tensors it allocates onto `owned` (they go to the plan it returns);
 * if it throws, they are disposed before the error propagates. */
export function withOwnedTensors<T>(make: (owned: Tensor[]) => T): T {
  const owned: Tensor[] = [];
  try {
    return make(owned);
  } catch (e) {
    for (const t of owned) t.dispose();
    throw e;
  }
}

export function requireTensor(t: unknown, op: string, name: string): Tensor {
  if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
  t.guard(op);
  return t;
}

/** A dispatch's WeftMoeDispatchParams (workspace still 0) and the routing tensors it reads or
 * writes: the given ones, or new ones pushed onto `owned`. */
export function dispatchParams(comm: Communicator, shape: MoeDispatchShape, args: MoeDispatchArgs, owned: Tensor[]) {
  const rows = Math.max(1, shape.tokens);
  const ids = args.topkIds ?? (owned.push(Tensor.empty([rows, shape.topk], "i32", { device: comm.device })), owned.at(-1)!);
  const weights = args.topkWeights ??
    (shape.route ? (owned.push(Tensor.empty([rows, shape.topk], "f32", { device: comm.device })), owned.at(-1)!) : undefined);
  const params = MoeDispatchParams.write(MoeDispatchParams.alloc(), {
    flags: (shape.route ? FLAG_ROUTE : 0) | (shape.normalize ? FLAG_NORMALIZE : 0), experts: shape.experts, topk: shape.topk,
    hidden: shape.hidden, tokens: shape.tokens, max_tokens: shape.maxTokens, capacity: shape.capacity, x: args.x.ptr,
    ids: ids.ptr, weights: weights?.ptr ?? 0, logits: args.logits?.ptr ?? 0,
    logits_dtype: DTYPES[shape.logitsDtype].code, ctas: shape.ctas, stream: comm.stream.handle,
  });
  const inputs = [args.x, ids, ...(weights ? [weights] : []), ...(args.logits ? [args.logits] : [])];
  return { params, ids, weights, inputs };
}

/** comm.moeDispatch: validates, allocates the workspace (symmetric) and the routing outputs, creates the plan. */
export function createMoeDispatch(comm: Communicator, args: MoeDispatchArgs): MoeDispatchPlan {
  const op = "Communicator.moeDispatch";
  const internals = Communicator.internals(comm);
  internals.guard(op);
  requireTensor(args?.x, op, "x");
  for (const name of ["topkIds", "topkWeights", "logits"] as const) if (args[name] !== undefined) requireTensor(args[name], op, name);
  const shape = validateMoeDispatch(comm.size, comm.device, comm.maxCtas, args, op);
  return withOwnedTensors((owned) => {
    const { params, ids, weights, inputs } = dispatchParams(comm, shape, args, owned);
    const choiceBuf = MoeDispatchChoice.alloc();
    check(native().weft_moe_dispatch_choose(internals.handle, params, choiceBuf), op);
    const choice = MoeDispatchChoice.read(choiceBuf);
    return createNativePlan(comm, op, MoeDispatchParams, params, choice.workspace_bytes, {
      ...moePlanCalls("dispatch"), create: (out) => native().weft_moe_dispatch_create(internals.handle, params, out),
    }, (handle, workspace, report) => new MoeDispatchPlan(comm, shape, choice, handle, workspace, inputs, owned, ids, weights, report));
  });
}

/** comm.moeCombine: validates against the dispatch's layout and creates the plan. */
export function createMoeCombine(comm: Communicator, args: MoeCombineArgs): MoeCombinePlan {
  const op = "Communicator.moeCombine";
  const internals = Communicator.internals(comm);
  internals.guard(op);
  const d = args?.dispatch;
  if (!(d instanceof MoeDispatchPlan)) throw new ArgumentError(op, "dispatch", "must be a MoeDispatchPlan (comm.moeDispatch)");
  if (d.comm !== comm) throw new ArgumentError(op, "dispatch", "belongs to another communicator");
  const dispatchHandle = MoeDispatchPlan.nativeHandle(d);
  requireTensor(args.hidden, op, "hidden");
  requireTensor(args.out, op, "out");
  if (args.topkWeights !== undefined) requireTensor(args.topkWeights, op, "topkWeights");
  const { ctas } = validateMoeCombine(d.shape, d.layout.capacity, comm.device, comm.maxCtas, args, d.topkWeights !== undefined, op);
  const weights = args.topkWeights ?? d.topkWeights!;
  const params = MoeCombineParams.write(MoeCombineParams.alloc(), {
    dispatch: dispatchHandle, hidden: args.hidden.ptr, weights: weights.ptr, out: args.out.ptr, ctas, stream: comm.stream.handle,
  });
  const choiceBuf = MoeCombineChoice.alloc();
  check(native().weft_moe_combine_choose(internals.handle, params, choiceBuf), op);
  const choice = MoeCombineChoice.read(choiceBuf);
  return createNativePlan(comm, op, MoeCombineParams, params, choice.workspace_bytes, {
    ...moePlanCalls("combine"), create: (out) => native().weft_moe_combine_create(internals.handle, params, out),
  }, (handle, workspace, report) => new MoeCombinePlan(comm, d, choice.ctas, handle, workspace, [args.hidden, args.out, weights], report));
}
