// moe-layer.ts — a whole MoE layer as one reusable plan: dispatch + gate|up projection with SwiGLU
// (comm.moeDispatchGemm), then down-projection + combine (comm.moeGemmCombine), two plans on the
// communicator's stream with no host sync between them (lib/ops/moe-gemm.ts).
//
//   using layer = comm.moeLayer({ x, logits, topk: 8, w1, w2, out });   // w1 [E/W, H, 2I], w2 [E/W, I, H]
//   await layer.run();        // out [T, H] = Σ_k w[t, k] · W2ₑ(silu(x W1ₑ_gate) · x W1ₑ_up), e = ids[t, k]
//   layer.enqueue();          // untracked: what a CUDA-graph capture on comm.stream records
//
// Collective like every MoE plan: every rank creates, runs and disposes its layers in the same order.
import type { Communicator } from "../comm.ts";
import { ArgumentError } from "../errors.ts";
import type { Tensor } from "../tensor.ts";
import { createMoeDispatchGemm, createMoeGemmCombine, type MoeDispatchGemmPlan, type MoeGemmCombinePlan } from "./moe-gemm.ts";
import type { ExpertGemmConfig, MoeActivation } from "./moe-gemm-validate.ts";

export interface MoeLayerArgs {
  /** [≥ tokens, H] bf16. */
  x: Tensor;
  tokens?: number;
  /** The routing: logits [≥ tokens, E] (+ topk, normalize) routed on the GPU inside the dispatch,
   * or topkIds [≥ tokens, k] i32 + topkWeights [≥ tokens, k] f32 (+ experts). */
  logits?: Tensor;
  topk?: number;
  normalize?: boolean;
  topkIds?: Tensor;
  topkWeights?: Tensor;
  experts?: number;
  maxTokens?: number;
  capacity?: number;
  /** [E/W, H, 2I] gate | up with activation "swiglu" (the default), [E/W, H, I] with "none";
   * [E/W, 2I or I, H] with transW. */
  w1: Tensor;
  /** [E/W, I, H] ([E/W, H, I] with transW). */
  w2: Tensor;
  /** [≥ tokens, H] bf16. */
  out: Tensor;
  activation?: MoeActivation;
  /** Both weights in a Linear's layout ([E/W, N, K]). */
  transW?: boolean;
  config?: { up?: ExpertGemmConfig; down?: Omit<ExpertGemmConfig, "mover"> };
}

const KEYS = ["x", "tokens", "logits", "topk", "normalize", "topkIds", "topkWeights", "experts", "maxTokens", "capacity", "w1", "w2",
  "out", "activation", "transW", "config"];

/** One rank's prepared MoE layer (comm.moeLayer). */
export class MoeLayerPlan implements Disposable {
  readonly up: MoeDispatchGemmPlan;
  readonly down: MoeGemmCombinePlan;

  /** @internal comm.moeLayer() makes plans. */
  constructor(up: MoeDispatchGemmPlan, down: MoeGemmCombinePlan) {
    this.up = up;
    this.down = down;
  }

  /** Launches both kernels on comm.stream; returns their sequence numbers (no wait). */
  launch(): { up: number; down: number } {
    const up = this.up.launch();
    return { up, down: this.down.launch() };
  }

  /** Launches and resolves when this rank's layer is done. When both halves fail, the first one's
   * error is the one thrown (the second then only reports that its layout is not valid). */
  async run(): Promise<void> {
    const seq = this.launch();
    const [a, b] = await Promise.allSettled([this.up.promise(seq.up), this.down.promise(seq.down)]);
    if (a.status === "rejected") throw a.reason;
    if (b.status === "rejected") throw b.reason;
  }

  /** Launches and spins until done (benchmarks; a process driving several ranks launches them all
   * first, then waits for each). */
  runSync(): void {
    const seq = this.launch();
    this.wait(seq);
  }

  wait(seq: { up: number; down: number }): void {
    let first: unknown;
    try {
      this.up.wait(seq.up);
    } catch (e) {
      first = e;
    }
    try {
      this.down.wait(seq.down);
    } catch (e) {
      first ??= e;
    }
    if (first !== undefined) throw first;
  }

  /** Enqueues both without completion tracking (a CUDA-graph capture, lib/graph.ts). */
  enqueue(): void {
    this.up.enqueue();
    this.down.enqueue();
  }

  get disposed(): boolean {
    return this.up.disposed && this.down.disposed;
  }

  /** Disposes both plans (collective, idempotent). */
  dispose(): void {
    try {
      this.down.dispose();
    } finally {
      this.up.dispose();
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** comm.moeLayer: the two plans, created in this order on every rank. */
export function createMoeLayer(comm: Communicator, args: MoeLayerArgs): MoeLayerPlan {
  const op = "Communicator.moeLayer";
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { x, logits | topkIds, w1, w2, out, ... }");
  for (const key of Object.keys(args)) if (!KEYS.includes(key)) throw new ArgumentError(op, key, `is not a moeLayer argument (${KEYS.join(", ")})`);
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null) throw new ArgumentError(op, "config", "must be an object { up?, down? }");
  for (const key of Object.keys(config)) if (key !== "up" && key !== "down") throw new ArgumentError(op, `config.${key}`, "is not a config field (up, down)");
  const { w2, out, config: _config, activation, ...rest } = args;
  const up = createMoeDispatchGemm(comm, { ...rest, activation: activation ?? "swiglu", config: config.up });
  try {
    return new MoeLayerPlan(up, createMoeGemmCombine(comm, { layout: up, w2, out, transW: args.transW, config: config.down }));
  } catch (e) {
    up.dispose();
    throw e;
  }
}
