// options.ts — a Communicator's options, and their validation in one place (STYLE.md: tunables
// are named, validated fields).
import { ArgumentError, checkInt } from "../errors.ts";

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
   * between (0.15-0.35 µs of the 8 KiB latency, bench/DECISIONS.md, "The completion ticker spins 3 µs per turn; the eager spin is opt-in") but blocks the
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

/** Every option with its default applied, validated. */
export interface ResolvedOptions {
  heapBytes: number;
  stagedBytes: number;
  timeoutMs: number;
  storeTimeoutMs: number;
  /** 0: every SM. */
  smBudget: number;
  pollSpinMicros: number;
  eagerSpinMicros: number;
  interNodeBytes: number;
  provider: string | undefined;
}

/** Throws ArgumentError unless `us` is a spin bound in µs, [0, 1000]. */
export function checkSpin(op: string, name: string, us: unknown): number {
  if (typeof us !== "number" || !(us >= 0 && us <= 1000)) throw new ArgumentError(op, name, `must be a number of µs in [0, 1000] (got ${JSON.stringify(us)})`);
  return us;
}

export function resolveOptions(opts: CommunicatorOptions | undefined, op: string): ResolvedOptions {
  if (opts === undefined) opts = {};
  if (opts === null || typeof opts !== "object") throw new ArgumentError(op, "opts", `must be an options object (got ${opts === null ? "null" : typeof opts})`);
  const interNodeBytes = checkInt(op, "interNodeBytes", opts.interNodeBytes ?? 8 << 20, 1, 2 ** 40);
  if (interNodeBytes % 256 !== 0) throw new ArgumentError(op, "interNodeBytes", `must be a multiple of 256 (got ${interNodeBytes})`);
  if (opts.provider !== undefined && (typeof opts.provider !== "string" || opts.provider === "")) {
    throw new ArgumentError(op, "provider", `must be a non-empty libfabric provider name (got ${JSON.stringify(opts.provider)})`);
  }
  return {
    heapBytes: checkInt(op, "heapBytes", opts.heapBytes ?? 1 << 30, 1),
    stagedBytes: checkInt(op, "stagedBytes", opts.stagedBytes ?? 1 << 20, 1, 1 << 30),
    timeoutMs: checkInt(op, "timeoutMs", opts.timeoutMs ?? 10_000, 1),
    storeTimeoutMs: checkInt(op, "storeTimeoutMs", opts.storeTimeoutMs ?? 120_000, 1),
    smBudget: opts.smBudget === undefined ? 0 : checkInt(op, "smBudget", opts.smBudget, 1, 1 << 16),
    pollSpinMicros: checkSpin(op, "pollSpinMicros", opts.pollSpinMicros ?? 3),
    eagerSpinMicros: checkSpin(op, "eagerSpinMicros", opts.eagerSpinMicros ?? 0),
    interNodeBytes,
    provider: opts.provider,
  };
}

/** Throws ArgumentError unless `ident` describes a rank: integers in range and a node id. */
export function checkIdentity(ident: RankIdentity, op: string): RankIdentity {
  if (ident === null || typeof ident !== "object") throw new ArgumentError(op, "ident", "must be { rank, worldSize, localRank, localWorldSize, nodeId }");
  const worldSize = checkInt(op, "ident.worldSize", ident.worldSize, 1);
  checkInt(op, "ident.rank", ident.rank, 0, worldSize - 1);
  const localWorldSize = checkInt(op, "ident.localWorldSize", ident.localWorldSize, 1, worldSize);
  checkInt(op, "ident.localRank", ident.localRank, 0, localWorldSize - 1);
  if (typeof ident.nodeId !== "string" || ident.nodeId === "") throw new ArgumentError(op, "ident.nodeId", `must be a non-empty string (got ${JSON.stringify(ident.nodeId)})`);
  return ident;
}
