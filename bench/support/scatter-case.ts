// scatter-case.ts — one GEMM + reduce-scatter / all-reduce case of bench/tp-split.ts, every rank
// in one process: the random operands of shape (M, N, K) sharded over
// K, the plans of any config over them (each with its own symmetric out), and everything they own,
// released together.
import type { Communicator } from "../../lib/comm.ts";
import type { TpConfig, TpPlan } from "../../lib/ops/tp.ts";
import { Tensor } from "../../lib/tensor.ts";

export type ScatterOp = "gemmReduceScatter" | "gemmAllReduce";

export class ScatterCase {
  /** K per rank, and out's rows per rank (M / W for reduce-scatter). */
  readonly k: number;
  readonly outRows: number;
  /** Every rank's a [M, k] and b [k, N], bf16, seeds 11 + r and 23 + r. */
  readonly a: Tensor[];
  readonly b: Tensor[];
  readonly #comms: readonly Communicator[];
  readonly #owned: { dispose(): void }[] = [];

  constructor(comms: readonly Communicator[], readonly op: ScatterOp, readonly shape: readonly [number, number, number]) {
    const [M, N, K] = shape;
    this.#comms = comms;
    this.k = K / comms.length;
    this.outRows = op === "gemmReduceScatter" ? M / comms.length : M;
    this.a = comms.map((c, r) => this.keep(Tensor.empty([M, this.k], "bf16", { device: c.device }).fillRandom(11 + r)));
    this.b = comms.map((c, r) => this.keep(Tensor.empty([this.k, N], "bf16", { device: c.device }).fillRandom(23 + r)));
  }

  /** Owns t until dispose(). */
  keep<T extends { dispose(): void }>(t: T): T {
    this.#owned.push(t);
    return t;
  }

  /** Every rank's plan of the op under `config`, each writing a fresh symmetric out. */
  plans(config: TpConfig): { out: Tensor[]; plans: TpPlan[] } {
    const out = this.#comms.map((c) => this.keep(c.empty([this.outRows, this.shape[1]], "bf16")));
    const plans = this.#comms.map((c, r) => {
      const args = { a: this.a[r]!, b: this.b[r]!, out: out[r]!, config };
      return this.keep(this.op === "gemmReduceScatter" ? c.gemmReduceScatter(args) : c.gemmAllReduce(args));
    });
    return { out, plans };
  }

  /** Releases everything it owns, last first. */
  dispose(): void {
    for (const t of this.#owned.splice(0).reverse()) t.dispose();
  }
}
