// comm.ts — the Communicator: one rank of a group of GPUs on one host, its symmetric heap, and
// the GPU-driven collectives over NVLink (DESIGN.md "Process model and bootstrap", "Memory, peers,
// signals", "Completion").
//
//   const comm = await Communicator.fromEnv();           // one rank per process (torchrun, srun, mpirun)
//   const comms = await Communicator.local({ devices: [0, 1] });  // several ranks in this process
//
//   using x = comm.empty([n], "bf16");                    // symmetric: same offset on every rank
//   await comm.allReduce(x);                              // one persistent kernel, awaited
//   await comm.dispose();                                 // collective: every rank calls it
//
// Every collective is one kernel launch on the communicator's stream; its Promise resolves when
// the kernel's last CTA has published completion (lib/completion.ts), so awaiting never blocks
// the event loop. Plans (comm.prepare.allReduce(...)) pack the call once and relaunch it cheaply,
// with runSync() for benchmarks.
import { CollectiveParams, CommConfig, CommInfo, PeerHandle } from "./abi.ts";
import { LocalStore, rankEnvFromProcess, Store, type KeyValueStore } from "./bootstrap.ts";
import { Completion, decodeReason, type FailureDescriber } from "./completion.ts";
import { LaunchPlan, writeSlot, writeU64 } from "./plan.ts";
import { requireDevice } from "./device.ts";
import { DTYPES, type DType } from "./dtype.ts";
import { ArgumentError, checkInt, DisposedError, errorFromStatus, PeerError, Status, TimeoutError, UnsupportedError, WeftError } from "./errors.ts";
import { HeapAllocator, requireSymmetric, SymmetricTensor, type SymmetricOwner } from "./heap.ts";
import { InterNode, planNodes } from "./internode.ts";
import { ringAttention, type RingAttentionArgs, type RingAttentionPlan } from "./ops/ring-attention.ts";
import { addressOf, check, native, outPointer } from "./native.ts";
import { Stream } from "./stream.ts";
import { checkDType, checkShape, Tensor, type Shape } from "./tensor.ts";

export interface CommunicatorOptions {
  /** Bytes of symmetric heap per rank, for comm.empty() (default 1 GiB). The same on every rank. */
  heapBytes?: number;
  /** Staging capacity per source rank, bytes: the largest all-reduce the staged one-shot path can
   * take (default 1 MiB; by default it takes inputs up to 256 KiB, see ffi/src/comm/tuning.hpp). */
  stagedBytes?: number;
  /** Bound of every GPU-side wait for a peer, in ms (default 10 000). */
  timeoutMs?: number;
  /** SMs this rank's kernels may use (default: every SM). For several ranks on one GPU: each fused
   * op's persistent kernel waits for the other ranks' kernels, so together they must fit the GPU
   * (e.g. 44 each for 3 ranks on 132 SMs). */
  smBudget?: number;
  /** Bound of every bootstrap wait (creation, teardown), in ms (default 120 000). */
  storeTimeoutMs?: number;
  /** Completion ticker: µs of polling per event-loop turn while a collective is pending (default
   * 3: below one kernel launch, and it catches a short collective ~0.7 µs sooner; 0 = one pass). */
  pollSpinMicros?: number;
  /** µs the Promise of a small collective (≤ 256 KiB per rank) polls its completion word right
   * after the launch, in a microtask, before the ticker takes over (default 0 = off). Such a
   * collective finishes ~10 µs after its launch; a spin of ~20 saves the event-loop turns in
   * between (0.15-0.35 µs of the 8 KiB latency, bench/NOTES-collectives.md run 9) but blocks the
   * loop up to that long per call, longer than DESIGN.md "Completion" allows, hence opt-in. */
  eagerSpinMicros?: number;
  /** Ranks on several nodes: staging bytes per (rank, peer node), the most one collective call
   * sends each other node (an allGather/reduceScatter block, an allReduce's count / localSize
   * elements). Pinned host memory: 4 x nodes x this per rank (default 8 MiB). */
  interNodeBytes?: number;
  /** Ranks on several nodes: the libfabric provider (default: automatic, or WEFT_FABRIC_PROVIDER). */
  provider?: string;
}

export interface FromEnvOptions extends CommunicatorOptions {
  /** GPU of this rank (default: the local rank). */
  device?: number;
  /** Where to read RANK, WORLD_SIZE, ... (default process.env). */
  env?: Record<string, string | undefined>;
}

export interface LocalOptions extends CommunicatorOptions {
  /** One rank per entry, rank i on GPU devices[i]. */
  devices: readonly number[];
}

/** Who a rank is, as the bootstrap knows it. */
export interface RankIdentity {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  nodeId: string;
}

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

const Kind = { allGather: 0, reduceScatter: 1, allReduce: 2, allToAll: 3, broadcast: 4, barrier: 5 } as const;
type KindName = keyof typeof Kind;
const ALGORITHMS: Record<Algorithm, number> = { auto: 0, staged: 1, direct: 2 };
const SUM_DTYPES: readonly DType[] = ["bf16", "f16", "f32"];
/** Collectives up to this many bytes per rank get the eager completion spin. */
const EAGER_SPIN_MAX_BYTES = 256 * 1024;

const STAGE_WAIT: Record<number, string> = {
  1: "to enter the same collective (did it make this call? is it alive?)",
  3: "to finish its part of the collective",
  4: "to deliver its staged data",
  6: "(on another node) to deliver its data through the proxy (did it make this call? is it alive?)",
};
const STAGE_REMOTE = 6;
const FIELD_NAMES: Record<number, string> = {
  1: "the collective (one rank called a different one)",
  2: "the dtype",
  3: "the element count",
  4: "the CTA count (the `ctas` option)",
  5: "the root",
  6: "the world size",
  7: "the algorithm (the `algorithm` option)",
  8: "the call sequence (one rank made more or fewer collective calls than the other)",
  9: "the all-to-all counts (this rank's sendCounts for the peer against the peer's recvCounts for this rank)",
};

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(): its symmetric heap and peer mappings stay until exit. ` +
    "Call `await comm.dispose()` on every rank.");
});

/** Store keys of one communicator; several communicators may share a store. */
const generations = new WeakMap<KeyValueStore, number>();

function checkSpin(op: string, name: string, us: unknown): void {
  if (typeof us !== "number" || !(us >= 0 && us <= 1000)) throw new ArgumentError(op, name, `must be a number of µs in [0, 1000] (got ${JSON.stringify(us)})`);
}

function positiveInt(op: string, name: string, v: unknown, max = Number.MAX_SAFE_INTEGER): number {
  return checkInt(op, name, v, 1, max);
}

export class Communicator implements AsyncDisposable, SymmetricOwner {
  readonly rank: number;
  readonly size: number;
  readonly localRank: number;
  readonly localSize: number;
  readonly nodeId: string;
  /** Nodes the ranks span; with more than one, collectives are hierarchical (NVLink inside a
   * node, the proxy and transport between nodes). */
  readonly nodes: number;
  /** This rank's node index (nodes numbered by their lowest rank). */
  readonly node: number;
  readonly device: number;
  /** The stream every collective of this communicator runs on. */
  readonly stream: Stream;
  /** Device address of symmetric offset 0 on this rank. */
  readonly heapBase: number;
  readonly heapBytes: number;
  readonly stagedBytes: number;
  /** GPU-side wait bound, ms. */
  readonly timeoutMs: number;
  /** Most CTAs a collective may use here (min(SMs, 256)). */
  readonly maxCtas: number;
  /** Prepared collectives: pack a call once, launch it many times (benchmarks, training loops). */
  readonly prepare: PlanFactory;
  readonly #handle: number;
  readonly #store: KeyValueStore;
  readonly #ownsStore: boolean;
  readonly #keys: string;
  readonly #storeTimeoutMs: number;
  readonly #completion: Completion;
  readonly #heap: HeapAllocator;
  readonly #describe: Map<string, FailureDescriber> = new Map();
  #eagerSpinMicros: number;
  readonly #lastPlans = new Map<string, {
    input: Tensor; output: Tensor; ctas?: number; algorithm?: Algorithm; root?: number; plan: CollectivePlan;
  }>();
  readonly #inter: InterNode | undefined;
  // The barrier takes no arguments, so one plan serves every call.
  #barrierPlan: CollectivePlan | undefined;
  #disposed = false;

  private constructor(init: {
    ident: RankIdentity; device: number; handle: number; info: ReturnType<typeof CommInfo.read>; store: KeyValueStore;
    ownsStore: boolean; keys: string; completion: Completion; stream: Stream; timeoutMs: number; storeTimeoutMs: number;
    eagerSpinMicros: number; node: number; nodes: number; inter: InterNode | undefined;
  }) {
    this.rank = init.ident.rank;
    this.size = init.ident.worldSize;
    this.localRank = init.ident.localRank;
    this.localSize = init.ident.localWorldSize;
    this.nodeId = init.ident.nodeId;
    this.node = init.node;
    this.nodes = init.nodes;
    this.#inter = init.inter;
    this.device = init.device;
    this.#handle = init.handle;
    this.heapBase = Number(init.info.heap_base);
    this.heapBytes = Number(init.info.heap_bytes);
    this.stagedBytes = Number(init.info.staged_bytes);
    this.maxCtas = init.info.max_ctas;
    this.timeoutMs = init.timeoutMs;
    this.#storeTimeoutMs = init.storeTimeoutMs;
    this.#store = init.store;
    this.#ownsStore = init.ownsStore;
    this.#keys = init.keys;
    this.#completion = init.completion;
    this.#eagerSpinMicros = init.eagerSpinMicros;
    this.stream = init.stream;
    this.#heap = new HeapAllocator(this.heapBytes);
    this.prepare = new PlanFactory(this);
    leaks.register(this, `Communicator rank ${this.rank} on device ${this.device}`, this);
  }

  // ---- creation ------------------------------------------------------------------------------------

  /** One rank per process: reads the launcher's environment (lib/bootstrap.ts), rendezvous through
   * rank 0's TCP store. Every rank calls it. */
  static async fromEnv(opts: FromEnvOptions = {}): Promise<Communicator> {
    const env = rankEnvFromProcess(opts.env ?? process.env);
    const store = await Store.connect({
      rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort, timeoutMs: opts.storeTimeoutMs,
    });
    try {
      return await Communicator.#create(store, true, env, opts.device ?? env.localRank, opts);
    } catch (e) {
      await store.close();
      throw e;
    }
  }

  /** Several ranks in this process, rank i on GPU devices[i]. Call collectives on every returned
   * communicator (e.g. with Promise.all); dispose them all together with Communicator.disposeAll. */
  static async local(opts: LocalOptions): Promise<Communicator[]> {
    const op = "Communicator.local";
    const devices = opts?.devices;
    if (!Array.isArray(devices) || devices.length === 0) throw new ArgumentError(op, "devices", "must be a non-empty array of GPU indices");
    devices.forEach((d, i) => requireDevice(d, op, `devices[${i}]`));
    const n = devices.length;
    const stores = LocalStore.group(n, { timeoutMs: opts.storeTimeoutMs });
    const nodeId = `local-${process.pid}`;
    const made = await Promise.allSettled(devices.map((device, rank) =>
      Communicator.#create(stores[rank]!, true, { rank, worldSize: n, localRank: rank, localWorldSize: n, nodeId }, device, opts)));
    const failed = made.find((m) => m.status === "rejected") as PromiseRejectedResult | undefined;
    if (failed) {
      await Communicator.disposeAll(made.flatMap((m) => (m.status === "fulfilled" ? [m.value] : [])));
      throw failed.reason;
    }
    return made.map((m) => (m as PromiseFulfilledResult<Communicator>).value);
  }

  /** The shared path under fromEnv() and local(): any KeyValueStore, any identity. Collective. */
  static create(store: KeyValueStore, ident: RankIdentity, device: number, opts: CommunicatorOptions = {}): Promise<Communicator> {
    return Communicator.#create(store, false, ident, device, opts);
  }

  static async #create(store: KeyValueStore, ownsStore: boolean, ident: RankIdentity, device: number, opts: CommunicatorOptions): Promise<Communicator> {
    const op = "Communicator.create";
    requireDevice(device, op);
    const heapBytes = positiveInt(op, "heapBytes", opts.heapBytes ?? 1 << 30);
    const stagedBytes = positiveInt(op, "stagedBytes", opts.stagedBytes ?? 1 << 20, 1 << 30);
    const timeoutMs = positiveInt(op, "timeoutMs", opts.timeoutMs ?? 10_000);
    const storeTimeoutMs = positiveInt(op, "storeTimeoutMs", opts.storeTimeoutMs ?? 120_000);
    const smBudget = opts.smBudget === undefined ? 0 : positiveInt(op, "smBudget", opts.smBudget, 1 << 16);
    const eagerSpinMicros = opts.eagerSpinMicros ?? 0;
    checkSpin(op, "eagerSpinMicros", eagerSpinMicros);
    if (ident.worldSize !== store.worldSize || ident.rank !== store.rank) {
      throw new ArgumentError(op, "ident", `says rank ${ident.rank} of ${ident.worldSize} but the store is rank ${store.rank} of ${store.worldSize}`);
    }
    const generation = generations.get(store) ?? 0;
    generations.set(store, generation + 1);
    const keys = `weft/comm/${generation}`;

    const interNodeBytes = positiveInt(op, "interNodeBytes", opts.interNodeBytes ?? 8 << 20, 2 ** 40);
    if (interNodeBytes % 256 !== 0) throw new ArgumentError(op, "interNodeBytes", `must be a multiple of 256 (got ${interNodeBytes})`);
    if (opts.provider !== undefined && (typeof opts.provider !== "string" || opts.provider === "")) {
      throw new ArgumentError(op, "provider", `must be a non-empty libfabric provider name (got ${JSON.stringify(opts.provider)})`);
    }
    const nodeIds = (await store.allGather(`${keys}/node`, new TextEncoder().encode(ident.nodeId))).map((b) => new TextDecoder().decode(b));
    const plan = planNodes(nodeIds, ident.rank, op);
    // Several nodes: the native communicator spans this node's ranks (its rank is the local rank);
    // the inter-node part is added below. One node: it spans every rank, as before.
    const multi = plan.nodes > 1;
    if (multi) ident = { ...ident, localRank: plan.localRank, localWorldSize: plan.localSize };
    const nativeRank = multi ? plan.localRank : ident.rank;
    const nativeWorld = multi ? plan.localSize : ident.worldSize;

    const cfg = CommConfig.write(CommConfig.alloc(), {
      device, rank: nativeRank, world_size: nativeWorld, sm_budget: smBudget, heap_bytes: heapBytes, staged_bytes: stagedBytes,
      timeout_ns: BigInt(timeoutMs) * 1_000_000n,
    });
    const out = new BigUint64Array(1);
    check(native().weft_comm_create(cfg, out), op);
    const handle = outPointer(out);
    let completion: Completion | undefined;
    let stream: Stream | undefined;
    let inter: InterNode | undefined;
    try {
      const infoBuf = CommInfo.alloc();
      check(native().weft_comm_info(handle, infoBuf), op);
      const info = CommInfo.read(infoBuf);
      completion = Completion.create(device, { timeoutMs: timeoutMs + 30_000, pollSpinMicros: opts.pollSpinMicros ?? 3 });
      stream = Stream.create(device);
      const mine = PeerHandle.alloc();
      check(native().weft_comm_export(handle, mine), op);
      const handles = await store.allGather(`${keys}/handles`, mine);
      for (let r = 0; r < ident.worldSize; r++) {
        if (r === ident.rank || nodeIds[r] !== ident.nodeId) continue;
        const h = PeerHandle.alloc();
        h.set(handles[r]!.subarray(0, h.length));
        check(native().weft_comm_import(handle, h), op);
      }
      check(native().weft_comm_connect(handle), op);
      if (multi) {
        inter = await InterNode.connect(store, keys, handle, {
          rank: ident.rank, worldSize: ident.worldSize, device, plan, slotBytes: interNodeBytes, timeoutMs, provider: opts.provider,
        });
        if (ident.rank === 0) {
          const t = inter.transport.info;
          console.error(`weft: ${plan.nodes} nodes x ${plan.localSize} rank${plan.localSize > 1 ? "s" : ""}; inter-node transport ` +
            `${t.provider} (libfabric ${t.libfabric}, ${t.hmem ? "FI_HMEM" : "host-mapped staging"}, ${interNodeBytes} B per node and call)`);
        }
      }
      await store.barrier(`${keys}/ready`, storeTimeoutMs);
      // Rank 0 hosts the TCP store on its own event loop, which the caller may block right after this
      // returns (a synchronous wait, a module load that waits for the GPU to go idle while a kernel
      // waits for a peer). A rank still waiting for the barrier's reply would then wait that long
      // too: 3 s of skew at the first collective, measured (bench/NOTES-tp.md, run 14). So rank 0
      // leaves only after every other rank has said it is out.
      if (ident.rank !== 0) await store.set(`${keys}/left/${ident.rank}`, "");
      else {
        await store.wait(Array.from({ length: ident.worldSize - 1 }, (_, r) => `${keys}/left/${r + 1}`), storeTimeoutMs);
      }
      return new Communicator({
        ident, device, handle, info, store, ownsStore, keys, completion, stream, timeoutMs, storeTimeoutMs, eagerSpinMicros,
        node: plan.node, nodes: plan.nodes, inter,
      });
    } catch (e) {
      native().weft_comm_close_peers(handle);
      try {
        inter?.dispose();
      } catch {
        // the creation error is the one to report
      }
      native().weft_comm_destroy(handle);
      completion?.dispose();
      stream?.dispose();
      throw e;
    }
  }

  /** Disposes several communicators of this process together (their teardown is collective). */
  static async disposeAll(comms: readonly Communicator[]): Promise<void> {
    const results = await Promise.allSettled(comms.map((c) => c.dispose()));
    const failed = results.find((r) => r.status === "rejected") as PromiseRejectedResult | undefined;
    if (failed) throw failed.reason;
  }

  // ---- symmetric heap ----------------------------------------------------------------------------------

  /** A tensor in the symmetric heap: same offset on every rank. Every rank must make the same
   * empty() and dispose() calls in the same order. Contents are uninitialized. */
  empty(shape: Shape, dtype: DType): SymmetricTensor {
    const op = "Communicator.empty";
    this.#guard(op);
    const numel = checkShape(shape, op);
    checkDType(dtype, op);
    const offset = this.#heap.alloc(numel * DTYPES[dtype].bytes, op);
    return new SymmetricTensor(this, offset, shape, dtype, this.device);
  }

  /** @internal SymmetricTensor.dispose() gives its range back. */
  release(offset: number, bytes: number): void {
    if (!this.#disposed) this.#heap.free(offset, bytes);
  }

  /** µs the completion ticker polls per event-loop turn (see CommunicatorOptions.pollSpinMicros). */
  get pollSpinMicros(): number {
    return this.#completion.pollSpinMicros;
  }

  set pollSpinMicros(us: number) {
    if (!(us >= 0 && us <= 1000)) throw new ArgumentError("Communicator.pollSpinMicros", "us", `must be in [0, 1000] (got ${us})`);
    this.#completion.pollSpinMicros = us;
  }

  /** µs a small collective's Promise polls right after launch (see CommunicatorOptions.eagerSpinMicros). */
  get eagerSpinMicros(): number {
    return this.#eagerSpinMicros;
  }

  set eagerSpinMicros(us: number) {
    checkSpin("Communicator.eagerSpinMicros", "us", us);
    this.#eagerSpinMicros = us;
  }

  /** Bytes of the heap not in use. */
  get heapFree(): number {
    return this.#heap.freeBytes;
  }

  /** The libfabric provider between nodes, or undefined on one node. */
  get transportProvider(): string | undefined {
    return this.#inter?.provider;
  }

  /** Staging bytes per (rank, peer node) and call, or 0 on one node (CommunicatorOptions.interNodeBytes). */
  get interNodeBytes(): number {
    return this.#inter?.slotBytes ?? 0;
  }

  // ---- collectives ------------------------------------------------------------------------------------------

  /** output (symmetric, size × input.numel) block r = rank r's input. */
  allGather(input: Tensor, output: Tensor, opts?: CollectiveOptions): Promise<void> {
    return this.#reuse("allGather", input, output, opts, () => this.prepare.allGather(input, output, opts)).run();
  }

  /** output = sum over ranks of block `rank` of their input (symmetric, size × output.numel). */
  reduceScatter(input: Tensor, output: Tensor, opts?: CollectiveOptions): Promise<void> {
    return this.#reuse("reduceScatter", input, output, opts, () => this.prepare.reduceScatter(input, output, opts)).run();
  }

  /** output = sum over ranks of their input; both symmetric, output defaults to input (in place). */
  allReduce(input: Tensor, output: Tensor = input, opts?: CollectiveOptions): Promise<void> {
    return this.#reuse("allReduce", input, output, opts, () => this.prepare.allReduce(input, output, opts)).run();
  }

  /** Block d of input (sendCounts[d] elements) goes to rank d, which stores blocks in rank order. */
  allToAll(input: Tensor, output: Tensor, opts?: AllToAllOptions): Promise<void> {
    return this.prepare.allToAll(input, output, opts).run();
  }

  /** Every output (symmetric) receives the root's input. */
  broadcast(input: Tensor, output: Tensor, opts?: BroadcastOptions): Promise<void> {
    return this.#reuse("broadcast", input, output, opts, () => this.prepare.broadcast(input, output, opts)).run();
  }

  /** The plan of this kind's previous call when it had the very same tensors and options (a loop
   * that reduces the same buffers each step skips validation and packing: ~4 µs of an 8 KiB
   * allReduce, bench/NOTES-collectives.md run 7); else a new one, remembered. A plan's launch
   * still guards its tensors, so a disposed one fails as validation would. */
  #reuse(kind: string, input: Tensor, output: Tensor, opts: BroadcastOptions | undefined, make: () => CollectivePlan): CollectivePlan {
    const last = this.#lastPlans.get(kind);
    if (last && last.input === input && last.output === output && last.ctas === opts?.ctas && last.algorithm === opts?.algorithm &&
      last.root === opts?.root) {
      return last.plan;
    }
    const plan = make();
    this.#lastPlans.set(kind, { input, output, ctas: opts?.ctas, algorithm: opts?.algorithm, root: opts?.root, plan });
    return plan;
  }

  /** Resolves once every rank has reached this barrier on its stream. */
  /** Fused ring attention over this communicator's ranks (lib/ops/ring-attention.ts): a reusable
   * plan; collective (every rank creates its plans in the same order). */
  ringAttention(args: RingAttentionArgs): RingAttentionPlan {
    return ringAttention(this, args);
  }

  barrier(): Promise<void> {
    this.#barrierPlan ??= this.prepare.barrier();
    return this.#barrierPlan.run();
  }

  // ---- teardown ------------------------------------------------------------------------------------------

  /** Collective: every rank calls it. Barrier, unmap the peers' arenas, barrier, free. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#lastPlans.clear();
    this.#barrierPlan = undefined;
    leaks.unregister(this);
    const errors: unknown[] = [];
    const step = async (f: () => unknown) => {
      try {
        await f();
      } catch (e) {
        errors.push(e);
      }
    };
    // Everyone is done issuing collectives before anyone unmaps; everyone has unmapped before
    // anyone frees the memory the others mapped.
    await step(() => this.#store.barrier(`${this.#keys}/dispose`, this.#storeTimeoutMs));
    await step(() => check(native().weft_comm_close_peers(this.#handle), "Communicator.dispose"));
    await step(() => this.#store.barrier(`${this.#keys}/unmapped`, this.#storeTimeoutMs));
    // Every rank's kernels have finished (close_peers waited for them before the barrier), so no
    // transfer is still headed for anyone's staging.
    if (this.#inter) await step(() => this.#inter!.dispose());
    await step(() => check(native().weft_comm_destroy(this.#handle), "Communicator.dispose"));
    await step(() => this.#completion.dispose());
    await step(() => this.stream.dispose());
    if (this.#ownsStore) await step(() => this.#store.close());
    if (errors.length > 0) throw errors[0];
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  toString(): string {
    return `Communicator(rank ${this.rank} of ${this.size}, device ${this.device}${this.#disposed ? ", disposed" : ""})`;
  }

  // ---- internals shared with CollectivePlan ------------------------------------------------------------------

  #guard(op: string): void {
    if (this.#disposed) throw new DisposedError(op, `Communicator (rank ${this.rank})`);
  }

  /** @internal */
  static internals(c: Communicator) {
    return {
      handle: c.#handle,
      completion: c.#completion,
      /** The transport, proxy and staging of a multi-node communicator (tests inject failures). */
      interNode: c.#inter,
      guard: (op: string) => c.#guard(op),
      describe: (op: string) => {
        let d = c.#describe.get(op);
        if (!d) {
          d = (reason) => c.#failure(op, reason);
          c.#describe.set(op, d);
        }
        return d;
      },
    };
  }

  #failure(op: string, reason: bigint): Error {
    const { code, stage, field, peer } = decodeReason(reason);
    const who = `rank ${this.rank}`;
    if (stage === STAGE_REMOTE && code !== Status.E_TIMEOUT) {
      const cause = this.#inter?.error();
      return errorFromStatus(code, op, `${who} could not exchange data with rank ${peer} on another node: the proxy failed` +
        (cause ? ` (${cause.message})` : ""));
    }
    if (code === Status.E_TIMEOUT) {
      return new TimeoutError(`${who} waited ${this.timeoutMs} ms for rank ${peer} ${STAGE_WAIT[stage] ?? `(stage ${stage})`}`,
        { code: "E_TIMEOUT", op });
    }
    if (code === Status.E_INVALID) {
      return new PeerError(`${who} and rank ${peer} made different calls: ${FIELD_NAMES[field] ?? `field ${field}`} differs. ` +
        "Every rank must make the same collective calls, in the same order, with the same sizes, dtypes and options",
        { code: "E_PEER", op });
    }
    if (stage === 5) {
      return new PeerError(`${who} stopped because another rank failed this collective (its own error says why)`, { code: "E_PEER", op });
    }
    return new WeftError(`${who}: the GPU reported status ${code} at stage ${stage} with rank ${peer}`, { code: "E_INTERNAL", op });
  }
}

// ---- plans -----------------------------------------------------------------------------------------------------

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
  readonly #internals: ReturnType<typeof Communicator.internals>;
  readonly #small: boolean;
  protected readonly completion: Completion;
  protected readonly describe: FailureDescriber;

  /** @internal comm.prepare.* makes plans. */
  constructor(comm: Communicator, op: string, params: Uint8Array, tensors: readonly Tensor[], counts?: [BigUint64Array, BigUint64Array]) {
    super();
    this.#small = tensors.every((t) => t.bytes <= EAGER_SPIN_MAX_BYTES);
    this.comm = comm;
    this.op = op;
    this.#params = params;
    this.#words = new Uint32Array(params.buffer, params.byteOffset, params.byteLength / 4);
    this.#tensors = tensors;
    this.#sendCounts = counts?.[0];
    this.#recvCounts = counts?.[1];
    this.#internals = Communicator.internals(comm);
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

  constructor(comm: Communicator) {
    this.#comm = comm;
  }

  allGather(input: Tensor, output: Tensor, opts: CollectiveOptions = {}): CollectivePlan {
    const op = "Communicator.allGather";
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

  #plan(op: string, kind: KindName, count: number, input: Tensor | undefined, output: Tensor | undefined, opts: CollectiveOptions,
    root = 0, counts?: [BigUint64Array, BigUint64Array]): CollectivePlan {
    const c = this.#comm;
    Communicator.internals(c).guard(op);
    if (c.nodes > 1) this.#interNode(op, kind, count, input ?? output);
    const ctas = opts.ctas ?? 0;
    if (ctas !== 0) positiveInt(op, "ctas", ctas, c.maxCtas);
    const algorithm = opts.algorithm ?? "auto";
    if (!(algorithm in ALGORITHMS)) throw new ArgumentError(op, "algorithm", `must be 'auto', 'staged' or 'direct' (got ${JSON.stringify(algorithm)})`);
    if (algorithm !== "auto" && kind !== "allReduce") throw new ArgumentError(op, "algorithm", "is an all-reduce option");
    const dtype = (input ?? output)?.dtype ?? "u8";
    const params = CollectiveParams.write(CollectiveParams.alloc(), {
      kind: Kind[kind], dtype: DTYPES[dtype].code, count, input: input?.ptr ?? 0, output: output?.ptr ?? 0, root, ctas,
      algorithm: ALGORITHMS[algorithm], stream: c.stream.handle,
    });
    return new CollectivePlan(c, op, params, [input, output].filter((t): t is Tensor => t !== undefined), counts);
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
