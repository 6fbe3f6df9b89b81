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
//
// Its parts live in lib/comm/: options (and their validation), create (the creation sequence),
// collectives (plans and their checks), failure (what a failed launch's reason word means),
// node-plan (who is on which node), inter-node-link (transport, proxy and staging between nodes),
// watchdog (a rank the store reports gone is declared failed at once) and internals (what plans share).
// The tensor-parallel ops are methods here whose bodies are in lib/ops/tp.ts.
import type { CommInfo } from "./abi.ts";
import { LocalStore, rankEnvFromProcess, Store, storeOptionsFromEnv, type KeyValueStore } from "./bootstrap.ts";
import { CollectivePlan, PlanFactory, type Algorithm, type AllToAllOptions, type BroadcastOptions, type CollectiveOptions } from "./comm/collectives.ts";
import { connectRank } from "./comm/create.ts";
import { describeCollectiveFailure } from "./comm/failure.ts";
import type { InterNodeLink } from "./comm/inter-node-link.ts";
import type { CommInternals } from "./comm/internals.ts";
import { watchForLostRanks } from "./comm/watchdog.ts";
import { checkIdentity, checkSpin, resolveOptions, type CommunicatorOptions, type FromEnvOptions, type LocalOptions, type RankIdentity } from "./comm/options.ts";
import type { Completion, FailureDescriber } from "./completion.ts";
import { requireDevice } from "./device.ts";
import { DTYPES, type DType } from "./dtype.ts";
import { ArgumentError, checkInt } from "./errors.ts";
import { NativeHandle, teardownAsync } from "./handle.ts";
import { HeapAllocator, SymmetricTensor, type SymmetricOwner } from "./heap.ts";
import { check, native } from "./native.ts";
import { chooseTpPlan, createTpPlan, type AllGatherGemmArgs, type GemmScatterArgs, type TpChoiceInfo, type TpOp, type TpPlan } from "./ops/tp.ts";
import { createMoeCombine, createMoeDispatch, type MoeCombineArgs, type MoeCombinePlan, type MoeDispatchArgs, type MoeDispatchPlan } from "./ops/moe.ts";
import { ringAttention, type RingAttentionArgs, type RingAttentionPlan } from "./ops/ring-attention.ts";
import { createMoeDispatchGemm, createMoeGemmCombine, type MoeDispatchGemmArgs, type MoeDispatchGemmPlan, type MoeGemmCombineArgs, type MoeGemmCombinePlan } from "./ops/moe-gemm.ts";
import { createMoeLayer, type MoeLayerArgs, type MoeLayerPlan } from "./ops/moe-layer.ts";
import type { Stream } from "./stream.ts";
import { checkDType, checkShape, type Shape, type Tensor } from "./tensor.ts";

export { CollectivePlan, PlanFactory, type Algorithm, type AllToAllOptions, type BroadcastOptions, type CollectiveOptions } from "./comm/collectives.ts";
export type { CommunicatorOptions, FromEnvOptions, LocalOptions, RankIdentity } from "./comm/options.ts";

export class Communicator extends NativeHandle<Promise<void>> implements SymmetricOwner {
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
  readonly #inter: InterNodeLink | undefined;
  readonly #internals: CommInternals;
  // The barrier takes no arguments, so one plan serves every call.
  #barrierPlan: CollectivePlan | undefined;
  /** Stops the failure watchdog (lib/comm/watchdog.ts). */
  readonly #unwatch: () => void;

  private constructor(init: {
    ident: RankIdentity; device: number; handle: number; info: ReturnType<typeof CommInfo.read>; store: KeyValueStore;
    ownsStore: boolean; keys: string; completion: Completion; stream: Stream; timeoutMs: number; storeTimeoutMs: number;
    eagerSpinMicros: number; node: number; nodes: number; inter: InterNodeLink | undefined;
  }) {
    super(init.handle, `Communicator rank ${init.ident.rank} on device ${init.device}`,
      "its symmetric heap and peer mappings stay until the process exits", "Call `await comm.dispose()` on every rank.");
    this.rank = init.ident.rank;
    this.size = init.ident.worldSize;
    this.localRank = init.ident.localRank;
    this.localSize = init.ident.localWorldSize;
    this.nodeId = init.ident.nodeId;
    this.node = init.node;
    this.nodes = init.nodes;
    this.#inter = init.inter;
    this.device = init.device;
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
    const describers = new Map<string, FailureDescriber>();
    const self = { rank: this.rank, timeoutMs: this.timeoutMs, interNodeError: () => this.#inter?.error() ?? null };
    this.#internals = {
      handle: init.handle,
      completion: init.completion,
      interNode: init.inter,
      guard: (op) => this.guard(op),
      describe: (op) => {
        let d = describers.get(op);
        if (!d) describers.set(op, (d = (reason) => describeCollectiveFailure(self, op, reason)));
        return d;
      },
    };
    this.prepare = new PlanFactory(this, this.#internals);
    // Last: a rank already reported gone is declared failed right here.
    this.#unwatch = watchForLostRanks(init.store, { rank: this.rank, size: this.size, abort: (r) => this.abort(r) });
  }

  // ---- creation ------------------------------------------------------------------------------------

  /** One rank per process: reads the launcher's environment (lib/bootstrap.ts), rendezvous through
   * rank 0's TCP store. Every rank calls it. */
  static async fromEnv(opts: FromEnvOptions = {}): Promise<Communicator> {
    const env = rankEnvFromProcess(opts.env ?? process.env);
    const store = await Store.connect({ ...storeOptionsFromEnv(opts.env ?? process.env), timeoutMs: opts.storeTimeoutMs });
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
  static create(store: KeyValueStore, ident: RankIdentity, device: number, opts?: CommunicatorOptions): Promise<Communicator> {
    return Communicator.#create(store, false, ident, device, opts);
  }

  static async #create(store: KeyValueStore, ownsStore: boolean, ident: RankIdentity, device: number, options: CommunicatorOptions | undefined): Promise<Communicator> {
    const op = "Communicator.create";
    const opts = resolveOptions(options, op);
    const { timeoutMs, storeTimeoutMs, eagerSpinMicros } = opts;
    checkIdentity(ident, op);
    requireDevice(device, op);
    if (store === null || typeof store !== "object" || typeof store.allGather !== "function") {
      throw new ArgumentError(op, "store", "must be a KeyValueStore (Store.connect, LocalStore.group)");
    }
    if (ident.worldSize !== store.worldSize || ident.rank !== store.rank) {
      throw new ArgumentError(op, "ident", `says rank ${ident.rank} of ${ident.worldSize} but the store is rank ${store.rank} of ${store.worldSize}`);
    }
    const c = await connectRank(store, ident, device, opts, op);
    return new Communicator({
      ident: c.ident, device, handle: c.handle, info: c.info, store, ownsStore, keys: c.keys, completion: c.completion,
      stream: c.stream, timeoutMs, storeTimeoutMs, eagerSpinMicros, node: c.node, nodes: c.nodes, inter: c.inter,
    });
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
    this.guard(op);
    const numel = checkShape(shape, op);
    checkDType(dtype, op);
    const offset = this.#heap.alloc(numel * DTYPES[dtype].bytes, op);
    return new SymmetricTensor(this, offset, shape, dtype, this.device);
  }

  /** @internal SymmetricTensor.dispose() gives its range back. */
  release(offset: number, bytes: number): void {
    if (!this.disposed) this.#heap.free(offset, bytes);
  }

  /** µs the completion ticker polls per event-loop turn (see CommunicatorOptions.pollSpinMicros). */
  get pollSpinMicros(): number {
    return this.#completion.pollSpinMicros;
  }

  set pollSpinMicros(us: number) {
    this.#completion.pollSpinMicros = checkSpin("Communicator.pollSpinMicros", "us", us);
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
   * allReduce, bench/DECISIONS.md, "comm.allReduce() reuses the previous call's plan"); else a new one, remembered. A plan's launch
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

  /** MoE dispatch: every routed row of x to its expert's owner, laid out for the grouped GEMMs
   * (lib/ops/moe.ts). Collective: every rank creates its MoE plans in the same order. */
  moeDispatch(args: MoeDispatchArgs): MoeDispatchPlan {
    return createMoeDispatch(this, args);
  }

  /** MoE combine: the experts' output rows back to their tokens, out = their weighted sum (lib/ops/moe.ts). Collective. */
  moeCombine(args: MoeCombineArgs): MoeCombinePlan {
    return createMoeCombine(this, args);
  }

  /** MoE dispatch fused with the up-projection grouped GEMM, one kernel (lib/ops/moe-gemm.ts). Collective. */
  moeDispatchGemm(args: MoeDispatchGemmArgs): MoeDispatchGemmPlan {
    return createMoeDispatchGemm(this, args);
  }
  /** The down-projection grouped GEMM sending each row home, then the weighted sum (lib/ops/moe-gemm.ts). Collective. */
  moeGemmCombine(args: MoeGemmCombineArgs): MoeGemmCombinePlan {
    return createMoeGemmCombine(this, args);
  }
  /** A whole MoE layer: moeDispatchGemm (SwiGLU), then moeGemmCombine (lib/ops/moe-layer.ts). Collective. */
  moeLayer(args: MoeLayerArgs): MoeLayerPlan {
    return createMoeLayer(this, args);
  }

  /** Fused ring attention over this communicator's ranks (lib/ops/ring-attention.ts): a reusable
   * plan; collective (every rank creates its plans in the same order). */
  ringAttention(args: RingAttentionArgs): RingAttentionPlan {
    return ringAttention(this, args);
  }

  /** Resolves once every rank has reached this barrier on its stream. */
  barrier(): Promise<void> {
    this.#barrierPlan ??= this.prepare.barrier();
    return this.#barrierPlan.run();
  }

  // ---- tensor-parallel ops (bodies in lib/ops/tp.ts) ----------------------------------------------------

  /** Column-parallel GEMM: out [M, n] = allgather(a) · b, one persistent kernel per rank. Collective. */
  allGatherGemm(args: AllGatherGemmArgs): TpPlan {
    return createTpPlan(this, this.#internals, "allGatherGemm", args);
  }

  /** Row-parallel GEMM: out [ceil(M / W), N] = this rank's rows of Σ over ranks a · b. Collective. */
  gemmReduceScatter(args: GemmScatterArgs): TpPlan {
    return createTpPlan(this, this.#internals, "gemmReduceScatter", args);
  }

  /** out [M, N] = Σ over ranks a · b on every rank. Collective. */
  gemmAllReduce(args: GemmScatterArgs): TpPlan {
    return createTpPlan(this, this.#internals, "gemmAllReduce", args);
  }

  /** Declares rank `failedRank` (a rank of this communicator, global across nodes) failed: what the
   * failure watchdog calls when the store reports a rank gone. Every wait of this rank's running
   * kernels (collectives, tensor-parallel ops, MoE plans, ring attention) gives up at its next poll, within
   * microseconds, and their launches reject with a PeerError naming the rank; every later launch and
   * plan creation on this communicator throws one at once. The first rank declared stays. Returns at
   * once (one store into host-mapped memory); dispose() still works afterwards. */
  abort(failedRank: number): void {
    const op = "Communicator.abort";
    this.guard(op);
    checkInt(op, "failedRank", failedRank, 0, this.size - 1);
    check(native().weft_comm_abort(this.#internals.handle, failedRank), op);
  }

  /** What a plan of `op` for these arguments would run (path, mover, tiles), without creating it. */
  tpChoice(op: TpOp, args: AllGatherGemmArgs | GemmScatterArgs): TpChoiceInfo {
    return chooseTpPlan(this, this.#internals, op, args);
  }

  // ---- teardown ------------------------------------------------------------------------------------------

  /** Collective (every rank calls dispose()): barrier, unmap the peers' arenas, barrier, free. */
  protected async destroy(handle: number): Promise<void> {
    // Teardown launches no kernel; a peer that dies from here on fails the barriers below instead.
    this.#unwatch();
    this.#lastPlans.clear();
    this.#barrierPlan = undefined;
    const op = "Communicator.dispose";
    // Everyone is done issuing collectives before anyone unmaps; everyone has unmapped before
    // anyone frees the memory the others mapped. Every rank's kernels have finished once
    // close_peers returns, so no transfer is still headed for anyone's staging when the inter-node
    // link closes.
    await teardownAsync(op, [
      () => this.#store.barrier(`${this.#keys}/dispose`, this.#storeTimeoutMs),
      () => check(native().weft_comm_close_peers(handle), op),
      () => this.#store.barrier(`${this.#keys}/unmapped`, this.#storeTimeoutMs),
      () => this.#inter?.dispose(),
      () => check(native().weft_comm_destroy(handle), op),
      () => this.#completion.dispose(),
      () => this.stream.dispose(),
      () => (this.#ownsStore ? this.#store.close() : undefined),
    ]);
  }

  /** Teardown is collective and asynchronous: `await using`, never `using`. */
  override [Symbol.dispose](): void {
    this.refuseSyncDispose("Communicator[Symbol.dispose]");
  }

  override toString(): string {
    return `Communicator(rank ${this.rank} of ${this.size}, device ${this.device}${this.disposed ? ", disposed" : ""})`;
  }

  /** @internal what plans and tests reach through (lib/comm/internals.ts) */
  static internals(c: Communicator): CommInternals {
    return c.#internals;
  }
}
