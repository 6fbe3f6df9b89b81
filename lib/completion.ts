// completion.ts — how the host learns that a GPU op is done without blocking the event loop
// (DESIGN.md "Completion"; device side: cuda/primitives/completion.cuh).
//
// A Completion owns a ring of slots for one device. Each slot is two 64-bit words of pinned,
// host-mapped memory (done: the last published sequence number, with bit 63 set on failure;
// reason: why it failed) and four 32-bit words in device memory, 0 between launches (two arrival
// counters, then the attention engine's tile counter and a spare: weft.h, WeftOpLaunch). An op launch takes a
// slot with slot(), hands its three addresses to the kernel, and gets its result with
// promise(seq) (async) or wait(seq) (spins: benchmarks only).
//
// promise() never makes FFI calls while it waits: one ticker per process reads the done words of
// every Completion with pending promises through zero-copy views with plain loads, re-arming
// itself with setImmediate only while some promise is pending, so an idle process has no ticker.
// A short op may ask for an eager spin: a microtask (after every launch of the current job has
// been issued) polls its word for a bounded few µs before the ticker takes over, which saves the
// event-loop turns between launch and resolution.
//
//   using c = Completion.create(device);
//   const s = c.slot();
//   launch({ done: s.done, seq: s.seq, arrivals: s.arrivals });
//   await c.promise(s.seq, "myOp");
import { requireDevice } from "./device.ts";
import { ArgumentError, DisposedError, TimeoutError, WeftError } from "./errors.ts";
import { NativeHandle, teardown } from "./handle.ts";
import { check, detachNative, native, outPointer, viewNative } from "./native.ts";

/** Addresses and sequence number for one launch. */
export interface CompletionSlot {
  /** Device alias of the slot's two host-mapped 64-bit words (done, reason). */
  readonly done: number;
  /** Device address of the slot's four 32-bit device words (0 between launches). */
  readonly arrivals: number;
  /** The value the kernel publishes in `done` when it finishes. */
  readonly seq: number;
}

/** Turns a failed op's reason word (code in bits 0..31, stage above) into the error to reject with. */
export type FailureDescriber = (reason: bigint, seq: number) => Error;

/** The fields of a failed launch's reason word (cuda/primitives/completion.cuh): the status or
 * failure code (bits 0..31, signed), the stage (32..39), the mismatched field (40..47) and the peer
 * (48..63) where the kernel reports them. */
export function decodeReason(reason: bigint): { code: number; stage: number; field: number; peer: number } {
  return {
    code: Number(BigInt.asIntN(32, reason & 0xffffffffn)),
    stage: Number((reason >> 32n) & 0xffn),
    field: Number((reason >> 40n) & 0xffn),
    peer: Number(reason >> 48n),
  };
}

/** Device bytes per slot: WeftOpLaunch's four 32-bit words. */
const ARRIVAL_BYTES = 16;

export interface CompletionOptions {
  /** Ring size: launches that may be in flight at once (default 4096). */
  slots?: number;
  /** Host-side bound on how long a promise may stay pending (default 60 000 ms). GPU-side waits
   * have their own, shorter bounds; this one catches a kernel that never runs at all. */
  timeoutMs?: number;
  /** How long one ticker turn keeps polling before it yields to the event loop, µs (default 0:
   * one pass per turn). A few µs catch short ops sooner; keep it below an FFI launch (~3 µs). */
  pollSpinMicros?: number;
}

interface Pending {
  seq: number;
  index: number;
  op: string;
  deadline: number;
  timeoutMs: number;
  resolve(): void;
  reject(e: Error): void;
  describe?: FailureDescriber;
}

export class Completion extends NativeHandle {
  readonly device: number;
  readonly slots: number;
  readonly timeoutMs: number;
  #hostDevice: number;
  #arrivals: number;
  /** The slots' host words, zero-copy; private, and detached by dispose() before the memory is
   * freed. */
  #words: BigUint64Array;
  /** The same memory as 32-bit halves (little-endian: low, high), read with Atomics.load so that
   * the JIT neither hoists nor merges the polls; no BigInt on the hot path. */
  #halves: Uint32Array;
  /** Sequence number last handed out for each slot (0: never used). */
  readonly #issued: Float64Array;
  #next = 1;
  readonly #pending = new Map<number, Pending>();
  /** See CompletionOptions.pollSpinMicros. */
  pollSpinMicros = 0;

  private constructor(device: number, slots: number, timeoutMs: number, host: number, hostDevice: number, arrivals: number) {
    super(host, `Completion on device ${device}`, "its pinned memory stays allocated until the process exits");
    this.device = device;
    this.slots = slots;
    this.timeoutMs = timeoutMs;
    this.#hostDevice = hostDevice;
    this.#arrivals = arrivals;
    this.#words = new BigUint64Array(viewNative(host, slots * 16));
    this.#halves = new Uint32Array(this.#words.buffer);
    this.#issued = new Float64Array(slots);
  }

  static create(device: number, opts: CompletionOptions = {}): Completion {
    const op = "Completion.create";
    requireDevice(device, op);
    if (opts === null || typeof opts !== "object") throw new ArgumentError(op, "opts", "must be an options object");
    const slots = opts.slots ?? 4096;
    if (!Number.isInteger(slots) || slots < 1 || slots > 1 << 20) throw new ArgumentError(op, "slots", `must be an integer in [1, 2^20] (got ${slots})`);
    const timeoutMs = opts.timeoutMs ?? 60_000;
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) throw new ArgumentError(op, "timeoutMs", `must be a number > 0 (got ${timeoutMs})`);
    const pollSpinMicros = opts.pollSpinMicros ?? 0;
    if (typeof pollSpinMicros !== "number" || !(pollSpinMicros >= 0 && pollSpinMicros <= 1000)) {
      throw new ArgumentError(op, "pollSpinMicros", `must be a number of µs in [0, 1000] (got ${pollSpinMicros})`);
    }
    const host = new BigUint64Array(1);
    const hostDevice = new BigUint64Array(1);
    check(native().weft_host_alloc(slots * 16, host, hostDevice), op);
    const arrivals = new BigUint64Array(1);
    try {
      check(native().weft_malloc(device, slots * ARRIVAL_BYTES, arrivals), op);
    } catch (e) {
      native().weft_host_free(outPointer(host));
      throw e;
    }
    const c = new Completion(device, slots, timeoutMs, outPointer(host), outPointer(hostDevice), outPointer(arrivals));
    c.pollSpinMicros = pollSpinMicros;
    c.#words.fill(0n);
    check(native().weft_memset(outPointer(arrivals), 0, slots * ARRIVAL_BYTES, null), op);
    return c;
  }

  /** Takes the next slot for one launch. When the ring is full of pending launches it waits
   * (bounded) for the oldest one: a slot is never shared by two launches in flight. */
  slot(): CompletionSlot {
    this.guard("Completion.slot");
    const seq = this.#next++;
    const index = seq % this.slots;
    const previous = this.#issued[index]!;
    if (previous !== 0) {
      if (!this.#finished(index, previous)) this.wait(previous);
      // Settle the previous launch's promise now: the words are about to mean the next launch.
      const p = this.#pending.get(previous);
      if (p) {
        this.#pending.delete(previous);
        const failure = this.#check(index, previous, p.op, p.describe);
        if (failure) p.reject(failure);
        else p.resolve();
      }
    }
    this.#issued[index] = seq;
    return { done: this.#hostDevice + index * 16, arrivals: this.#arrivals + index * ARRIVAL_BYTES, seq };
  }

  /** Resolves when launch `seq` finishes; rejects with describe(reason) when it failed.
   * `eagerSpinMicros` > 0: first poll for up to that long in a microtask (bounded; for ops
   * expected to finish within a few µs of launch), then hand over to the ticker. The Promise
   * rejects with TimeoutError when no completion is reported within `timeoutMs` (default: this
   * Completion's). */
  promise(seq: number, op: string, describe?: FailureDescriber, eagerSpinMicros = 0, timeoutMs = this.timeoutMs): Promise<void> {
    this.guard("Completion.promise");
    const index = seq % this.slots;
    if (this.#issued[index] !== seq) throw new ArgumentError("Completion.promise", "seq", `${seq} is not a launch in flight on this Completion`);
    const failure = this.#check(index, seq, op, describe);
    if (failure !== undefined) return failure === null ? Promise.resolve() : Promise.reject(failure);
    return new Promise<void>((resolve, reject) => {
      const p: Pending = { seq, index, op, deadline: performance.now() + timeoutMs, timeoutMs, resolve, reject, describe };
      this.#pending.set(seq, p);
      if (eagerSpinMicros > 0) queueMicrotask(() => this.#eager(p, eagerSpinMicros));
      else this.#arm();
    });
  }

  /** The reason word of launch `seq` while its slot still holds it (diagnostics: a kernel may
   * leave phase times there on success, see cuda/collectives/args.h kStamps). @internal */
  reasonWord(seq: number): bigint {
    this.guard("Completion.reasonWord");
    const index = seq % this.slots;
    if (this.#issued[index] !== seq) throw new ArgumentError("Completion.reasonWord", "seq", `${seq} no longer owns its slot`);
    return this.#words[index * 2 + 1]!;
  }

  #arm(): void {
    Completion.#active.add(this);
    if (!Completion.#ticking) {
      Completion.#ticking = true;
      setImmediate(Completion.#tick);
    }
  }

  /** Polls one pending launch for up to `us` µs, then leaves it to the ticker. */
  #eager(p: Pending, us: number): void {
    if (this.disposed || this.#pending.get(p.seq) !== p) return;  // settled meanwhile
    const until = performance.now() + us / 1000;
    do {
      const failure = this.#check(p.index, p.seq, p.op, p.describe);
      if (failure !== undefined) {
        this.#pending.delete(p.seq);
        if (failure === null) p.resolve();
        else p.reject(failure);
        return;
      }
    } while (performance.now() < until);
    this.#arm();
  }

  /** Spins until launch `seq` finishes; throws like promise() would reject. Blocks the thread:
   * for benchmarks and teardown only. */
  wait(seq: number, timeoutMs = this.timeoutMs, op = "Completion.wait", describe?: FailureDescriber): void {
    this.guard("Completion.wait");
    const index = seq % this.slots;
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const failure = this.#check(index, seq, op, describe);
      if (failure === null) return;
      if (failure !== undefined) throw failure;
      if (performance.now() > deadline) {
        throw new TimeoutError(`launch ${seq} on device ${this.device} did not finish within ${timeoutMs} ms`, { code: "E_TIMEOUT", op });
      }
    }
  }

  /** Settles what has finished, rejects what has not, and frees the memory. Idempotent. */
  protected destroy(host: number): void {
    for (const p of this.#pending.values()) {
      const failure = this.#check(p.index, p.seq, p.op, p.describe);
      if (failure === null) p.resolve();
      else p.reject(failure ?? new DisposedError(p.op, `the Completion (launch ${p.seq} still pending)`));
    }
    this.#pending.clear();
    detachNative(this.#words.buffer as ArrayBuffer);
    teardown("Completion.dispose", [
      () => check(native().weft_free(this.#arrivals), "Completion.dispose"),
      () => check(native().weft_host_free(host), "Completion.dispose"),
    ]);
  }

  #finished(index: number, seq: number): boolean {
    // High half first: a read that the GPU's 8-byte store tears can then only under-estimate the
    // (growing) word, never report a launch done early.
    const h = this.#halves;
    const hi = Atomics.load(h, index * 4 + 1) & 0x7fffffff;
    return hi * 4294967296 + Atomics.load(h, index * 4) >= seq;
  }

  /** undefined: still running; null: done; an Error: failed. */
  #check(index: number, seq: number, op: string, describe?: FailureDescriber): Error | null | undefined {
    if (!this.#finished(index, seq)) return undefined;
    // Read after the low half that showed `seq`: the failure bit of the same store.
    if ((Atomics.load(this.#halves, index * 4 + 1) & 0x80000000) === 0) return null;
    const reason = this.#words[index * 2 + 1]!;
    return describe ? describe(reason, seq) : genericFailure(reason, op);
  }

  // ---- the process-wide ticker ----------------------------------------------------------------------
  static readonly #active = new Set<Completion>();
  static #ticking = false;

  /** One event-loop turn: polls every Completion with pending promises, for up to the largest
   * pollSpinMicros among them, then yields (setImmediate) while anything is still pending. */
  static readonly #tick = (): void => {
    let spin = 0;
    for (const c of Completion.#active) spin = Math.max(spin, c.pollSpinMicros);
    const until = performance.now() + spin / 1000;
    for (;;) {
      const now = performance.now();
      for (const c of Completion.#active) {
        if (!c.disposed) c.#pass(now);
        if (c.disposed || c.#pending.size === 0) Completion.#active.delete(c);
      }
      if (Completion.#active.size === 0 || performance.now() >= until) break;
    }
    if (Completion.#active.size > 0) setImmediate(Completion.#tick);
    else Completion.#ticking = false;
  };

  #pass(now: number): void {
    for (const [seq, p] of this.#pending) {
      const failure = this.#check(p.index, seq, p.op, p.describe);
      if (failure === undefined) {
        if (now > p.deadline) {
          this.#pending.delete(seq);
          p.reject(new TimeoutError(`launch ${seq} on device ${this.device} did not report completion within ${p.timeoutMs} ms ` +
            `(the kernel never ran, or the GPU is wedged)`, { code: "E_TIMEOUT", op: p.op }));
        }
        continue;
      }
      this.#pending.delete(seq);
      if (failure === null) p.resolve();
      else p.reject(failure);
    }
  }
}

function genericFailure(reason: bigint, op: string): WeftError {
  const { code, stage } = decodeReason(reason);
  return new WeftError(`the GPU reported failure (status ${code}, stage ${stage})`, { code: "E_INTERNAL", op });
}

/** For an op without a communicator (gemm, groupedGemm, attention, moeRoute): its one Completion
 * per device, made on first use. Each op calls this once and keeps its own slots. */
export function completionPerDevice(): (device: number) => Completion {
  const made = new Map<number, Completion>();
  return (device) => {
    let c = made.get(device);
    if (!c) made.set(device, (c = Completion.create(device)));
    return c;
  };
}
