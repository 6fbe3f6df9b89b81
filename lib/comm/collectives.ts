// collectives.ts — the communicator's collectives as plans: a call validated and packed into its
// WeftCollectiveParams once, then launched as often as needed (each launch one persistent kernel on
// the communicator's stream; comm.allReduce(x) and the others make or reuse one per call).
import { CollectiveParams } from "../abi.ts";
import type { Communicator } from "../comm.ts";
import type { Completion, FailureDescriber } from "../completion.ts";
import { DTYPES, type DType } from "../dtype.ts";
import { ArgumentError, checkInt, UnsupportedError } from "../errors.ts";
import { requireSymmetric, type SymmetricTensor } from "../heap.ts";
import { addressOf, check, native } from "../native.ts";
import { LaunchPlan, writeSlot, writeU64 } from "../plan.ts";
import { Tensor } from "../tensor.ts";
import type { CommInternals } from "./internals.ts";

export type Algorithm = "auto" | "staged" | "direct";

export interface CollectiveOptions {
  /** CTAs the kernel uses (default: chosen by size). Every rank must pass the same value. */
  ctas?: number;
  /** all-reduce only: staged one-shot (small), direct two-shot (large), or chosen by size. */
  algorithm?: Algorithm;
}

export interface AllToAllOptions extends CollectiveOptions {
  /** Elements this rank sends to each rank, in rank order (default: input split evenly). */
  sendCounts?: readonly number[];
  /** Elements this rank receives from each rank, in rank order (default: output split evenly). */
  recvCounts?: readonly number[];
}

export interface BroadcastOptions extends CollectiveOptions {
  /** The rank whose input everyone receives (default 0). */
  root?: number;
}

export const Kind = { allGather: 0, reduceScatter: 1, allReduce: 2, allToAll: 3, broadcast: 4, barrier: 5 } as const;
type KindName = keyof typeof Kind;
export const ALGORITHMS: Record<Algorithm, number> = { auto: 0, staged: 1, direct: 2 };
const SUM_DTYPES: readonly DType[] = ["bf16", "f16", "f32"];
/** Collectives up to this many bytes per rank get the eager completion spin. */
const EAGER_SPIN_MAX_BYTES = 256 * 1024;

/** The options argument, or an ArgumentError naming it. */
function checkOptions<T extends CollectiveOptions>(op: string, opts: T): T {
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new ArgumentError(op, "opts", `must be an options object (got ${opts === null ? "null" : typeof opts})`);
  }
  return opts;
}

/** A collective call packed once; launch it as often as needed (each launch takes the next epoch,
 * so every rank must launch its plans in the same order). */
export class CollectivePlan extends LaunchPlan {
  readonly op: string;
  readonly comm: Communicator;
  readonly #params: Uint8Array;
  readonly #words: Uint32Array;
  readonly #sendCounts?: BigUint64Array;
  readonly #recvCounts?: BigUint64Array;
  readonly #tensors: readonly Tensor[];
  readonly #internals: CommInternals;
  readonly #small: boolean;
  protected readonly completion: Completion;
  protected readonly describe: FailureDescriber;

  /** @internal comm.prepare.* makes plans. */
  constructor(comm: Communicator, internals: CommInternals, op: string, params: Uint8Array, tensors: readonly Tensor[],
    counts?: [BigUint64Array, BigUint64Array]) {
    super();
    this.#small = tensors.every((t) => t.bytes <= EAGER_SPIN_MAX_BYTES);
    this.comm = comm;
    this.op = op;
    this.#params = params;
    this.#words = new Uint32Array(params.buffer, params.byteOffset, params.byteLength / 4);
    this.#tensors = tensors;
    this.#sendCounts = counts?.[0];
    this.#recvCounts = counts?.[1];
    this.#internals = internals;
    this.completion = this.#internals.completion;
    this.describe = this.#internals.describe(op);
  }

  get label(): string {
    return this.op;
  }

  protected override get eagerSpinMicros(): number {
    return this.#small ? this.comm.eagerSpinMicros : 0;
  }

  /** Launches the kernel and returns its sequence number; does not wait. */
  launch(): number {
    this.#internals.guard(this.op);
    for (const t of this.#tensors) t.guard(this.op);
    const slot = this.completion.slot();
    const w = this.#words;
    writeSlot(w, OFF, slot);
    if (this.#sendCounts) {
      writeU64(w, OFF.send_counts, addressOf(this.#sendCounts));
      writeU64(w, OFF.recv_counts, addressOf(this.#recvCounts!));
    }
    check(native().weft_collective(this.#internals.handle, this.#params), this.op);
    return slot.seq;
  }
}

const OFF = {
  done: CollectiveParams.offsets.done / 4,
  seq: CollectiveParams.offsets.seq / 4,
  arrivals: CollectiveParams.offsets.arrivals / 4,
  send_counts: CollectiveParams.offsets.send_counts / 4,
  recv_counts: CollectiveParams.offsets.recv_counts / 4,
};

/** Validates a call and packs it into a CollectivePlan. */
export class PlanFactory {
  readonly #comm: Communicator;
  readonly #internals: CommInternals;

  /** @internal the Communicator makes its one factory (comm.prepare). */
  constructor(comm: Communicator, internals: CommInternals) {
    this.#comm = comm;
    this.#internals = internals;
  }

  allGather(input: Tensor, output: Tensor, opts: CollectiveOptions = {}): CollectivePlan {
    const op = "Communicator.allGather";
    opts = this.#begin(op, opts);
    const c = this.#comm;
    this.#local(input, op, "input");
    const out = this.#symmetric(output, op, "output");
    this.#sameDtype(input, out, op);
    if (out.numel !== c.size * input.numel) {
      throw new ArgumentError(op, "output", `has ${out.numel} elements but must have size × input.numel = ${c.size} × ${input.numel} = ${c.size * input.numel}`);
    }
    return this.#plan(op, "allGather", input.numel, input, out, opts);
  }

  reduceScatter(input: Tensor, output: Tensor, opts: CollectiveOptions = {}): CollectivePlan {
    const op = "Communicator.reduceScatter";
    opts = this.#begin(op, opts);
    const c = this.#comm;
    const inp = this.#symmetric(input, op, "input");
    this.#local(output, op, "output");
    this.#sameDtype(inp, output, op);
    this.#sumDtype(inp, op);
    if (inp.numel !== c.size * output.numel) {
      throw new ArgumentError(op, "input", `has ${inp.numel} elements but must have size × output.numel = ${c.size} × ${output.numel} = ${c.size * output.numel}`);
    }
    return this.#plan(op, "reduceScatter", output.numel, inp, output, opts);
  }

  allReduce(input: Tensor, output: Tensor = input, opts: CollectiveOptions = {}): CollectivePlan {
    const op = "Communicator.allReduce";
    opts = this.#begin(op, opts);
    const inp = this.#symmetric(input, op, "input");
    const out = this.#symmetric(output, op, "output");
    this.#sameDtype(inp, out, op);
    this.#sumDtype(inp, op);
    if (out.numel !== inp.numel) throw new ArgumentError(op, "output", `has ${out.numel} elements but the input has ${inp.numel}`);
    if (opts.algorithm === "staged" && inp.bytes > this.#comm.stagedBytes) {
      throw new ArgumentError(op, "algorithm", `'staged' holds at most stagedBytes = ${this.#comm.stagedBytes} bytes per rank but the input has ${inp.bytes}`);
    }
    return this.#plan(op, "allReduce", inp.numel, inp, out, opts);
  }

  allToAll(input: Tensor, output: Tensor, opts: AllToAllOptions = {}): CollectivePlan {
    const op = "Communicator.allToAll";
    opts = this.#begin(op, opts);
    const c = this.#comm;
    this.#local(input, op, "input");
    const out = this.#symmetric(output, op, "output");
    this.#sameDtype(input, out, op);
    const counts = (name: "sendCounts" | "recvCounts", given: readonly number[] | undefined, t: Tensor): BigUint64Array => {
      if (given === undefined) {
        if (t.numel % c.size !== 0) {
          throw new ArgumentError(op, name, `must be given: ${name === "sendCounts" ? "input" : "output"} has ${t.numel} elements, which do not split evenly over ${c.size} ranks`);
        }
        return new BigUint64Array(c.size).fill(BigInt(t.numel / c.size));
      }
      if (!Array.isArray(given) || given.length !== c.size) throw new ArgumentError(op, name, `must be an array of ${c.size} element counts, one per rank`);
      let sum = 0;
      given.forEach((n, i) => {
        if (!Number.isInteger(n) || n < 0) throw new ArgumentError(op, `${name}[${i}]`, `must be a non-negative integer (got ${n})`);
        sum += n;
      });
      if (sum > t.numel) throw new ArgumentError(op, name, `adds up to ${sum} elements but the ${name === "sendCounts" ? "input" : "output"} has ${t.numel}`);
      return BigUint64Array.from(given, (n) => BigInt(n));
    };
    const send = counts("sendCounts", opts.sendCounts, input);
    const recv = counts("recvCounts", opts.recvCounts, out);
    if (send[c.rank] !== recv[c.rank]) {
      throw new ArgumentError(op, "recvCounts", `[${c.rank}] is ${recv[c.rank]} but sendCounts[${c.rank}] is ${send[c.rank]}: both describe this rank's block to itself`);
    }
    return this.#plan(op, "allToAll", 0, input, out, opts, 0, [send, recv]);
  }

  broadcast(input: Tensor, output: Tensor, opts: BroadcastOptions = {}): CollectivePlan {
    const op = "Communicator.broadcast";
    opts = this.#begin(op, opts);
    const c = this.#comm;
    const root = opts.root ?? 0;
    if (!Number.isInteger(root) || root < 0 || root >= c.size) throw new ArgumentError(op, "root", `must be a rank in [0, ${c.size}) (got ${root})`);
    this.#local(input, op, "input");
    const out = this.#symmetric(output, op, "output");
    this.#sameDtype(input, out, op);
    if (out.numel !== input.numel) throw new ArgumentError(op, "output", `has ${out.numel} elements but the input has ${input.numel}`);
    return this.#plan(op, "broadcast", input.numel, input, out, opts, root);
  }

  barrier(): CollectivePlan {
    return this.#plan("Communicator.barrier", "barrier", 0, undefined, undefined, {});
  }

  /** A disposed communicator is reported first, then the options object. */
  #begin<T extends CollectiveOptions>(op: string, opts: T): T {
    this.#internals.guard(op);
    return checkOptions(op, opts);
  }

  #plan(op: string, kind: KindName, count: number, input: Tensor | undefined, output: Tensor | undefined, opts: CollectiveOptions,
    root = 0, counts?: [BigUint64Array, BigUint64Array]): CollectivePlan {
    const c = this.#comm;
    this.#internals.guard(op);
    if (c.nodes > 1) this.#interNode(op, kind, count, input ?? output);
    const ctas = opts.ctas ?? 0;
    if (ctas !== 0) checkInt(op, "ctas", ctas, 1, c.maxCtas);
    const algorithm = opts.algorithm ?? "auto";
    if (typeof algorithm !== "string" || !Object.hasOwn(ALGORITHMS, algorithm)) throw new ArgumentError(op, "algorithm", `must be 'auto', 'staged' or 'direct' (got ${JSON.stringify(algorithm)})`);
    if (algorithm !== "auto" && kind !== "allReduce") throw new ArgumentError(op, "algorithm", "is an all-reduce option");
    const dtype = (input ?? output)?.dtype ?? "u8";
    const params = CollectiveParams.write(CollectiveParams.alloc(), {
      kind: Kind[kind], dtype: DTYPES[dtype].code, count, input: input?.ptr ?? 0, output: output?.ptr ?? 0, root, ctas,
      algorithm: ALGORITHMS[algorithm], stream: c.stream.handle,
    });
    return new CollectivePlan(c, this.#internals, op, params, [input, output].filter((t): t is Tensor => t !== undefined), counts);
  }

  /** Multi-node communicators: which collectives exist, and what fits the inter-node staging. */
  #interNode(op: string, kind: KindName, count: number, t: Tensor | undefined): void {
    const c = this.#comm;
    if (kind === "allToAll" || kind === "broadcast") {
      throw new UnsupportedError(`${kind} is single-node only: this communicator spans ${c.nodes} nodes ` +
        "(allGather, reduceScatter, allReduce and barrier are hierarchical)", { code: "E_UNSUPPORTED", op });
    }
    if (kind === "barrier" || !t) return;
    const elem = DTYPES[t.dtype].bytes;
    let bytes = count * elem;
    if (kind === "allReduce") {
      const align = 16 / elem;
      bytes = Math.ceil(Math.ceil(count / c.localSize) / align) * align * elem;
    }
    if (bytes > c.interNodeBytes) {
      const what = kind === "allReduce" ? `its shard of ${count} elements over ${c.localSize} local rank(s) is ${bytes} bytes` : `one rank's block is ${bytes} bytes`;
      throw new ArgumentError(op, kind === "reduceScatter" ? "output" : "input",
        `is too large for the inter-node staging: ${what} but interNodeBytes is ${c.interNodeBytes} ` +
        "(create the communicator with a larger interNodeBytes)");
    }
  }

  #local(t: Tensor, op: string, argument: string): void {
    if (!(t instanceof Tensor)) throw new ArgumentError(op, argument, `must be a Tensor (got ${t === null ? "null" : typeof t})`);
    t.guard(op);
    if (t.device !== this.#comm.device) {
      throw new ArgumentError(op, argument, `is on device ${t.device} but this rank's communicator is on device ${this.#comm.device}`);
    }
  }

  #symmetric(t: Tensor, op: string, argument: string): SymmetricTensor {
    this.#local(t, op, argument);
    return requireSymmetric(t, this.#comm, op, argument);
  }

  #sameDtype(a: Tensor, b: Tensor, op: string): void {
    if (a.dtype !== b.dtype) throw new ArgumentError(op, "output", `is ${b.dtype} but the input is ${a.dtype}: collectives do not convert`);
  }

  #sumDtype(t: Tensor, op: string): void {
    if (!SUM_DTYPES.includes(t.dtype)) {
      throw new ArgumentError(op, "dtype", `must be one of ${SUM_DTYPES.join(", ")} for a sum (got ${t.dtype})`);
    }
  }
}
