// moe-gemm.ts — the MoE ops fused with their expert GEMMs, each one plan (cuda/moe/dispatch_gemm.cu,
// gemm_combine.cu; weft.h "The expert GEMM of a fused MoE op"):
//
//   const up = comm.moeDispatchGemm({ x, topkIds, topkWeights, experts: 64, w1, activation: "swiglu" });
//   const down = comm.moeGemmCombine({ layout: up, w2, out });   // hidden: up.hidden by default
//   await up.run(); await down.run();   // out [T, H] = Σ_k w[t, k] · expert_k(x[t]), no host sync
//
// moeDispatchGemm: the dispatch (routing, counts, the receive layout, the rows for other ranks pushed
// into theirs) and the up-projection grouped GEMM in one kernel: its tiles wait on the per-block
// arrival counters, the owner's own blocks first. Output: up.hidden [capacity, I] bf16, the rows in
// the receive layout (up.layout), padding rows not written. w1 [E/W, H, I] (or [E/W, I, H] with
// transW), or gate | up [E/W, H, 2I] with activation "swiglu" (silu(gate) · up in fp32, rounded once).
//
// moeGemmCombine: the down-projection grouped GEMM over a layout (a moeDispatchGemm or moeDispatch
// plan), its epilogue storing each row straight into its source rank's returned-row slot (at world 1
// it stays in the receive layout, stored by TMA), then the weighted fp32 sum over each token's k
// experts in top-k order (deterministic), bf16. w2 [E/W, I, H] (or [E/W, H, I] with transW).
//
// Plans are collective like every MoE plan (lib/ops/moe.ts): same creation order on every rank,
// workspaces from the symmetric heap, reusable, capturable in a CUDA graph (enqueue()).
import {
  MoeCombineChoice, MoeCombineParams, MoeDispatchChoice, MoeDispatchParams, MoeExpertGemmChoice, MoeExpertGemmParams, WeftMoeExpertFlags,
} from "../abi.ts";
import { Communicator } from "../comm.ts";
import { ArgumentError, DisposedError } from "../errors.ts";
import type { SymmetricTensor } from "../heap.ts";
import { check, native } from "../native.ts";
import { Tensor } from "../tensor.ts";
import {
  describer, dispatchParams, layoutViews, MoeDispatchPlan, MoePlan, moePlanCalls, reportView, requireTensor, withOwnedTensors,
  type MoeDispatchArgs, type MoeLayout,
} from "./moe.ts";
import {
  validateDownWeights, validateExpertConfig, validateUpWeights, type ExpertGemmConfig, type MoeActivation,
} from "./moe-gemm-validate.ts";
import { validateMoeCombine, validateMoeDispatch, type MoeDispatchShape } from "./moe-validate.ts";
import { createNativePlan } from "./native-plan.ts";

export interface MoeDispatchGemmArgs extends Omit<MoeDispatchArgs, "config"> {
  /** [E/W, H, N] bf16, N = I (or 2I, gate | up, with activation "swiglu"); [E/W, N, H] with transW. */
  w1: Tensor;
  activation?: MoeActivation;
  transW?: boolean;
  /** [capacity, I] bf16 (default: allocated by the plan, see plan.hidden). */
  out?: Tensor;
  config?: ExpertGemmConfig;
}

export interface MoeGemmCombineArgs {
  /** The layout the rows are in: a moeDispatchGemm plan (or a moeDispatch plan). */
  layout: MoeDispatchGemmPlan | MoeDispatchPlan;
  /** [capacity, I] bf16: the experts' hidden rows in the layout (default: a moeDispatchGemm's hidden). */
  hidden?: Tensor;
  /** [E/W, I, H] bf16 ([E/W, H, I] with transW). */
  w2: Tensor;
  /** [≥ tokens, H] bf16. */
  out: Tensor;
  /** Default: the layout's topkWeights (given, or routed). */
  topkWeights?: Tensor;
  transW?: boolean;
  config?: Omit<ExpertGemmConfig, "mover">;
}

export const FLAG_W_NK = WeftMoeExpertFlags.WEFT_MOE_W_NK;
export const FLAG_SWIGLU = WeftMoeExpertFlags.WEFT_MOE_SWIGLU;
/** By WeftMoeMover code. */
export const MOVER_NAMES = ["auto", "push", "pull"] as const;
const UP_KEYS = ["w1", "activation", "transW", "out", "config"];

/** One rank's prepared dispatch + up-projection (comm.moeDispatchGemm). */
export class MoeDispatchGemmPlan extends MoePlan {
  readonly shape: MoeDispatchShape;
  readonly layout: MoeLayout;
  /** [capacity, I] bf16: the up-projection's rows (SwiGLU applied), in the receive layout. */
  readonly hidden: Tensor;
  readonly inter: number;
  readonly activation: MoeActivation;
  readonly topkIds: Tensor;
  readonly topkWeights: Tensor | undefined;
  /** What the cost model chose: CTAs, math tile width, mover. */
  readonly ctas: number;
  readonly tileN: number;
  readonly mover: "push" | "pull";

  /** @internal comm.moeDispatchGemm() makes plans. */
  constructor(comm: Communicator, shape: MoeDispatchShape, choice: ReturnType<typeof MoeDispatchChoice.read>,
    gemm: ReturnType<typeof MoeExpertGemmChoice.read>, handle: number, workspace: SymmetricTensor, inputs: readonly Tensor[],
    owned: readonly Tensor[], parts: { hidden: Tensor; inter: number; activation: MoeActivation; ids: Tensor; weights?: Tensor },
    report: number) {
    const op = "Communicator.moeDispatchGemm";
    super(comm, op, "dispatch_gemm", handle, workspace, inputs, owned,
      describer(comm, op, reportView(report), shape));
    this.shape = shape;
    this.layout = layoutViews(comm, shape, choice, workspace);
    this.hidden = parts.hidden;
    this.inter = parts.inter;
    this.activation = parts.activation;
    this.topkIds = parts.ids;
    this.topkWeights = parts.weights;
    this.ctas = gemm.ctas;
    this.tileN = gemm.tile_n;
    this.mover = MOVER_NAMES[gemm.mover] === "push" ? "push" : "pull";
  }

  override toString(): string {
    const s = this.shape;
    return `MoeDispatchGemmPlan(rank ${this.comm.rank} of ${s.world}, T ${s.tokens}, H ${s.hidden}, I ${this.inter}, E ${s.experts}, ` +
      `k ${s.topk}, ${this.activation}, capacity ${this.layout.capacity}, ${this.ctas} CTAs, tile ${this.tileN}, ${this.mover})`;
  }
}

/** One rank's prepared down-projection + combine (comm.moeGemmCombine). */
export class MoeGemmCombinePlan extends MoePlan {
  readonly layout: MoeDispatchGemmPlan | MoeDispatchPlan;
  readonly ctas: number;
  readonly tileN: number;

  /** @internal comm.moeGemmCombine() makes plans. */
  constructor(comm: Communicator, layout: MoeDispatchGemmPlan | MoeDispatchPlan, ctas: number, tileN: number, handle: number,
    workspace: SymmetricTensor, inputs: readonly Tensor[], report: number) {
    const op = "Communicator.moeGemmCombine";
    super(comm, op, "gemm_combine", handle, workspace, inputs, [],
      describer(comm, op, reportView(report), layout.shape));
    this.layout = layout;
    this.ctas = ctas;
    this.tileN = tileN;
  }

  protected override checkUsable(): void {
    if (this.layout.disposed) throw new DisposedError(this.label, "the layout plan this combine reads");
    super.checkUsable();
  }
}

function gemmParams(values: { flags: number; n: number; k: number; mover: number; tileN: number; ctas: number; w: number; out: number }): Uint8Array {
  return MoeExpertGemmParams.write(MoeExpertGemmParams.alloc(), {
    flags: values.flags, n: values.n, k: values.k, mover: values.mover, tile_n: values.tileN, ctas: values.ctas, w: values.w, out: values.out,
  });
}

/** comm.moeDispatchGemm: validates, allocates the workspace (symmetric), the routing outputs and the
 * hidden rows when not given, creates the plan. */
export function createMoeDispatchGemm(comm: Communicator, args: MoeDispatchGemmArgs): MoeDispatchGemmPlan {
  const op = "Communicator.moeDispatchGemm";
  const internals = Communicator.internals(comm);
  internals.guard(op);
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { x, topkIds | logits, w1, ... }");
  requireTensor(args.x, op, "x");
  requireTensor(args.w1, op, "w1");
  for (const name of ["topkIds", "topkWeights", "logits", "out"] as const) if (args[name] !== undefined) requireTensor(args[name], op, name);
  const dispatchArgs = Object.fromEntries(Object.entries(args).filter(([key]) => !UP_KEYS.includes(key))) as MoeDispatchArgs;
  const shape = validateMoeDispatch(comm.size, comm.device, comm.maxCtas, dispatchArgs, op);
  const up = validateUpWeights(shape, args.w1, args.activation, args.transW, comm.device, op);
  const config = validateExpertConfig(args.config, comm.maxCtas, op, true);
  return withOwnedTensors((owned) => {
    const { params, ids, weights, inputs } = dispatchParams(comm, shape, dispatchArgs, owned);
    const flags = (up.transW ? FLAG_W_NK : 0) | (up.swiglu ? FLAG_SWIGLU : 0);
    const choiceBuf = MoeDispatchChoice.alloc(), gemmBuf = MoeExpertGemmChoice.alloc();
    const probe = gemmParams({ flags, n: up.inter, k: shape.hidden, ...config, w: args.w1.ptr, out: 0 });
    check(native().weft_moe_dispatch_gemm_choose(internals.handle, params, probe, choiceBuf, gemmBuf), op);
    const choice = MoeDispatchChoice.read(choiceBuf), gemm = MoeExpertGemmChoice.read(gemmBuf);
    const capacity = Number(choice.capacity);
    let hidden = args.out;
    if (hidden === undefined) {
      hidden = Tensor.empty([capacity, up.inter], "bf16", { device: comm.device });
      owned.push(hidden);
    } else if (hidden.dtype !== "bf16" || hidden.shape.length !== 2 || hidden.shape[0]! < capacity || hidden.shape[1] !== up.inter) {
      throw new ArgumentError(op, "out", `must be [${capacity}, ${up.inter}] bf16 (the receive layout's rows x I; got [${hidden.shape.join(", ")}] ${hidden.dtype})`);
    } else if (hidden.device !== comm.device) {
      throw new ArgumentError(op, "out", `is on device ${hidden.device} but this rank is on device ${comm.device}`);
    }
    const g = gemmParams({ flags, n: up.inter, k: shape.hidden, ...config, w: args.w1.ptr, out: hidden.ptr });
    return createNativePlan(comm, op, MoeDispatchParams, params, choice.workspace_bytes, {
      ...moePlanCalls("dispatch_gemm"), create: (out) => native().weft_moe_dispatch_gemm_create(internals.handle, params, g, out),
    }, (handle, workspace, report) => new MoeDispatchGemmPlan(comm, shape, choice, gemm, handle, workspace, [...inputs, args.w1, hidden], owned,
      { hidden, inter: up.inter, activation: up.swiglu ? "swiglu" : "none", ids, weights }, report));
  });
}

/** comm.moeGemmCombine: validates against the layout and creates the plan. */
export function createMoeGemmCombine(comm: Communicator, args: MoeGemmCombineArgs): MoeGemmCombinePlan {
  const op = "Communicator.moeGemmCombine";
  const internals = Communicator.internals(comm);
  internals.guard(op);
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { layout, w2, out, ... }");
  const d = args.layout;
  if (!(d instanceof MoeDispatchGemmPlan) && !(d instanceof MoeDispatchPlan)) {
    throw new ArgumentError(op, "layout", "must be a MoeDispatchGemmPlan (comm.moeDispatchGemm) or a MoeDispatchPlan");
  }
  if (d.comm !== comm) throw new ArgumentError(op, "layout", "belongs to another communicator");
  const layoutHandle = MoePlan.nativeHandle(d);
  const hidden = args.hidden ?? (d instanceof MoeDispatchGemmPlan ? d.hidden : undefined);
  if (hidden === undefined) throw new ArgumentError(op, "hidden", "must be given with a moeDispatch layout (a moeDispatchGemm plan gives its own)");
  requireTensor(hidden, op, "hidden");
  requireTensor(args.w2, op, "w2");
  requireTensor(args.out, op, "out");
  if (args.topkWeights !== undefined) requireTensor(args.topkWeights, op, "topkWeights");
  const capacity = d.layout.capacity;
  const down = validateDownWeights(d.shape, capacity, hidden, args.w2, args.transW, comm.device, op);
  // The combine's own rules (out, topkWeights); `hidden` there is the GEMM's output, which never
  // exists here, so it is checked as the layout's [capacity, H] shape.
  validateMoeCombine(d.shape, capacity, comm.device, comm.maxCtas,
    { hidden: { shape: [capacity, d.shape.hidden], dtype: "bf16", device: comm.device }, out: args.out, topkWeights: args.topkWeights },
    d.topkWeights !== undefined, op);
  const config = validateExpertConfig(args.config, comm.maxCtas, op, false);
  const weights = args.topkWeights ?? d.topkWeights!;
  const params = MoeCombineParams.write(MoeCombineParams.alloc(), {
    dispatch: layoutHandle, hidden: hidden.ptr, weights: weights.ptr, out: args.out.ptr, ctas: 0, stream: comm.stream.handle,
  });
  const g = gemmParams({ flags: down.transW ? FLAG_W_NK : 0, n: d.shape.hidden, k: down.inter, ...config, mover: 0, w: args.w2.ptr, out: 0 });
  const choiceBuf = MoeCombineChoice.alloc(), gemmBuf = MoeExpertGemmChoice.alloc();
  check(native().weft_moe_gemm_combine_choose(internals.handle, params, g, choiceBuf, gemmBuf), op);
  const choice = MoeCombineChoice.read(choiceBuf), gemm = MoeExpertGemmChoice.read(gemmBuf);
  return createNativePlan(comm, op, MoeCombineParams, params, choice.workspace_bytes, {
    ...moePlanCalls("gemm_combine"), create: (out) => native().weft_moe_gemm_combine_create(internals.handle, params, g, out),
  }, (handle, workspace, report) =>
    new MoeGemmCombinePlan(comm, d, gemm.ctas, gemm.tile_n, handle, workspace, [hidden, args.w2, args.out, weights], report));
}
