// proxy.ts — the per-rank proxy thread and its command FIFO (DESIGN.md "Inter-node"): commands
// pushed from JS (the host lane) or from GPU threads (the device lane) become transport writes;
// completion comes back as Promises that reject with the proxy's error.
import { ProxyCommand, ProxyFifo, ProxyParams, ProxyStats as ProxyStatsStruct } from "../abi.ts";
import { ArgumentError, checkInt, errorFromStatus, TimeoutError, TransportError, type WeftError } from "../errors.ts";
import { NativeHandle, teardown } from "../handle.ts";
import { check, detachNative, native, outPointer, readCString, viewNative } from "../native.ts";
import { packCommands, type Command, type PutCommand, type SignalTarget } from "./commands.ts";
import type { Exchange, Transport } from "./transport.ts";

export interface ProxyOptions {
  /** FIFO slots, a power of two (default 1024). */
  fifoSlots?: number;
  /** Commands the proxy takes per pass (default 64). */
  batch?: number;
  /** Commands in flight (default 4096). */
  maxInflight?: number;
  /** Bound on barrier waits (default: the transport's). */
  timeoutMs?: number;
  /** Pin the thread near this GPU and add a device lane for kernels. */
  device?: number;
}

export interface ProxyStats {
  pushed: number; consumed: number; completed: number;
  puts: number; signals: number; fences: number; barriers: number;
  passes: number; idleSleeps: number; maxBatch: number;
  transportWrites: number; transportBytes: number; transportSignalWrites: number;
}

// Words of a lane's control block (cuda/primitives/proxy_command.h), read with plain loads.
const COMPLETED_WORD = 128 / 8;
const ERROR_WORD = 192 / 8;

interface Waiter {
  ticket: number;
  deadline: number;
  resolve(): void;
  reject(e: WeftError): void;
}

export class Proxy extends NativeHandle {
  readonly transport: Transport;
  readonly capacity: number;
  // Views of the proxy's control blocks; private, and detached when the proxy stops (its FIFO is
  // freed then).
  #control: BigUint64Array;
  #errorView: BigInt64Array;
  #deviceControl: BigUint64Array | undefined;
  #scratch: Uint8Array;
  readonly #fifo: ReturnType<typeof ProxyFifo.read>;
  #waiters: Waiter[] = [];
  #ticking = false;
  #idlePolls = 0;

  private constructor(transport: Transport, handle: number) {
    super(handle, `Proxy of rank ${transport.rank}`, "its thread keeps running until the process exits");
    this.transport = transport;
    const fifo = ProxyFifo.alloc();
    check(native().weft_proxy_fifo(handle, fifo), "Proxy.start");
    const f = ProxyFifo.read(fifo);
    this.capacity = f.capacity;
    const control = viewNative(f.host_control, 256);
    this.#control = new BigUint64Array(control);
    this.#errorView = new BigInt64Array(control);
    this.#fifo = f;
    if (f.device_control_host) this.#deviceControl = new BigUint64Array(viewNative(f.device_control_host, 256));
    this.#scratch = new Uint8Array(ProxyCommand.size * 64);
  }

  /** start() on every rank, returning once every rank's proxy runs. Use this (or a store barrier
   * after start()) before pushing: a write completes only while the target's proxy progresses its
   * endpoint, and a rank that blocks in push()/waitSync() before its peers have started theirs can
   * starve them of the bootstrap store it hosts (rank 0). Collective. */
  static async connect(store: Exchange, transport: Transport, opts: ProxyOptions = {}, key = "weft/proxy"): Promise<Proxy> {
    const p = Proxy.start(transport, opts);
    try {
      await store.barrier(`${key}/started`);
    } catch (e) {
      p.dispose();
      throw e;
    }
    return p;
  }

  /** Starts this rank's proxy thread on a connected transport (see connect() for the collective
   * form). */
  static start(transport: Transport, opts: ProxyOptions = {}): Proxy {
    const op = "Proxy.start";
    if (opts === null || typeof opts !== "object") throw new ArgumentError(op, "opts", "must be an object");
    const slots = opts.fifoSlots ?? 1024;
    if (!Number.isInteger(slots) || slots < 2 || slots > 1 << 20 || (slots & (slots - 1)) !== 0) {
      throw new ArgumentError(op, "fifoSlots", `must be a power of two in [2, 1048576] (got ${slots})`);
    }
    const params = ProxyParams.write(ProxyParams.alloc(), {
      fifo_slots: slots,
      batch: opts.batch === undefined ? 0 : checkInt(op, "batch", opts.batch, 1, 4096),
      max_inflight: opts.maxInflight === undefined ? 0 : checkInt(op, "maxInflight", opts.maxInflight, 1, 1 << 20),
      timeout_ms: opts.timeoutMs === undefined ? 0 : checkInt(op, "timeoutMs", opts.timeoutMs, 1, 0xffffffff),
      device: opts.device === undefined ? -1 : checkInt(op, "device", opts.device, 0),
    });
    const out = new BigUint64Array(1);
    check(native().weft_proxy_start(transport.handle, params, out), op);
    const p = new Proxy(transport, outPointer(out));
    transport.adopt(p);
    return p;
  }

  get handle(): number {
    return this.pointerFor("Proxy.handle");
  }

  /** Host-lane commands completed so far (every ticket below this is done). */
  get completed(): number {
    this.guard("Proxy.completed");
    return Number(this.#control[COMPLETED_WORD]);
  }

  /** Device-lane commands completed so far, or undefined without a device lane. */
  get deviceCompleted(): number | undefined {
    this.guard("Proxy.deviceCompleted");
    return this.#deviceControl ? Number(this.#deviceControl[COMPLETED_WORD]) : undefined;
  }

  /** The device lane's addresses for a kernel's FifoDevice (cuda/primitives/fifo.cuh), or
   * undefined without one. */
  get deviceLane(): { slots: number; head: number; control: number; capacity: number } | undefined {
    this.guard("Proxy.deviceLane");
    const f = this.#fifo;
    return f.device_control ? { slots: f.device_slots, head: f.device_head, control: f.device_control, capacity: f.capacity } : undefined;
  }

  /** Test and benchmark support: ctas x threads GPU threads each push `perThread` copies of
   * `template` into the device lane (thread g raises word template.offset + 8 g to 1..perThread).
   * `failures`: 16 bytes of zeroed device memory ([0] pushes that gave up, [1] proxy status). */
  devicePush(template: Command, opts: { ctas: number; threads: number; perThread: number; failures: number; timeoutMs?: number; stream?: number }): void {
    const op = "Proxy.devicePush";
    const packed = Proxy.pack([template]);
    check(native().weft_proxy_device_push(this.handle, packed, checkInt(op, "ctas", opts.ctas, 1), checkInt(op, "threads", opts.threads, 1, 1024),
      checkInt(op, "perThread", opts.perThread, 1), opts.timeoutMs ?? 10_000, checkInt(op, "failures", opts.failures, 1), opts.stream ?? null), op);
  }

  /** The error that stopped the proxy, or null while it is healthy. */
  error(): WeftError | null {
    const handle = this.handle;
    if (this.#errorView[ERROR_WORD] === 0n) return null;
    const code = new Int32Array(1);
    const msg = new BigUint64Array(1);
    check(native().weft_proxy_error(handle, code, msg), "Proxy.error");
    return code[0] ? errorFromStatus(code[0], "Proxy", readCString(outPointer(msg))) : null;
  }

  /** Packs commands into `buf` (ProxyCommand.size bytes each). Validates in TS first. */
  static pack(commands: readonly Command[], buf?: Uint8Array): Uint8Array {
    return packCommands(commands, buf);
  }

  /** Pushes commands (all or none, at most `capacity`), waiting up to timeoutMs (default 10 000;
   * 0 = fail at once when the FIFO is full). Returns the ticket of the LAST command (the others
   * precede it consecutively), which is what done()/waitSync() take to wait for all of them. */
  push(commands: readonly Command[] | Uint8Array, opts: { timeoutMs?: number; count?: number } = {}): number {
    const op = "Proxy.push";
    const handle = this.handle;
    const timeoutMs = opts.timeoutMs === undefined ? 10_000 : checkInt(op, "timeoutMs", opts.timeoutMs, 0, 0xffffffff);
    let packed: Uint8Array;
    let count: number;
    if (commands instanceof Uint8Array) {
      count = opts.count ?? commands.length / ProxyCommand.size;
      checkInt(op, "count", count, 1, Math.floor(commands.length / ProxyCommand.size));
      packed = commands;
    } else {
      if (!Array.isArray(commands) || commands.length === 0) throw new ArgumentError(op, "commands", "must be a non-empty array");
      count = commands.length;
      if (count > this.capacity) throw new ArgumentError(op, "commands", `holds ${count} commands but the FIFO has ${this.capacity} slots: push in batches`);
      if (this.#scratch.length < count * ProxyCommand.size) this.#scratch = new Uint8Array(count * ProxyCommand.size);
      packed = Proxy.pack(commands, this.#scratch);
    }
    const first = new BigUint64Array(1);
    check(native().weft_proxy_push(handle, packed, count, timeoutMs, first), op);
    return Number(first[0]) + count - 1;
  }

  put(c: PutCommand, opts?: { timeoutMs?: number }): number {
    return this.push([{ op: "put", ...c }], opts);
  }

  signal(peer: number, target: SignalTarget, opts?: { timeoutMs?: number }): number {
    return this.push([{ op: "signal", peer, ...target }], opts);
  }

  fence(opts?: { timeoutMs?: number }): number {
    return this.push([{ op: "fence" }], opts);
  }

  barrier(opts?: { timeoutMs?: number }): number {
    return this.push([{ op: "barrier" }], opts);
  }

  /** Resolves once every ticket <= `ticket` is complete; rejects with the proxy's error, or
   * TimeoutError after timeoutMs (default 30 000). Never blocks the event loop. */
  done(ticket: number, opts: { timeoutMs?: number } = {}): Promise<void> {
    const op = "Proxy.done";
    try {
      this.guard(op);
      checkInt(op, "ticket", ticket, 0);
      const timeoutMs = checkInt(op, "timeoutMs", opts.timeoutMs ?? 30_000, 1);
      if (Number(this.#control[COMPLETED_WORD]) > ticket) return Promise.resolve();
      const err = this.error();
      if (err) return Promise.reject(err);
      return new Promise<void>((resolve, reject) => {
        this.#waiters.push({ ticket, deadline: performance.now() + timeoutMs, resolve, reject });
        this.#tick();
      });
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Blocks the calling thread until `ticket` completes (benchmarks, workers). */
  waitSync(ticket: number, timeoutMs = 30_000): void {
    const op = "Proxy.waitSync";
    const handle = this.handle;
    check(native().weft_proxy_wait(handle, checkInt(op, "ticket", ticket, 0), checkInt(op, "timeoutMs", timeoutMs, 0, 0xffffffff)), op);
  }

  /** Pushes a fence and resolves when it (and so everything before it) completes. */
  flush(opts: { timeoutMs?: number } = {}): Promise<void> {
    try {
      return this.done(this.fence(opts), opts);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Fails the proxy now: its thread ends, pending done() Promises reject, and GPU threads waiting
   * in the device lane give up. Dispose it once the kernels using it have finished. */
  abort(): void {
    check(native().weft_proxy_abort(this.handle), "Proxy.abort");
  }

  set paused(p: boolean) {
    check(native().weft_proxy_set_paused(this.handle, p ? 1 : 0), "Proxy.paused");
  }

  stats(): ProxyStats {
    const buf = ProxyStatsStruct.alloc();
    check(native().weft_proxy_stats(this.handle, buf), "Proxy.stats");
    const s = ProxyStatsStruct.read(buf);
    return {
      pushed: Number(s.pushed), consumed: Number(s.consumed), completed: Number(s.completed),
      puts: Number(s.puts), signals: Number(s.signals), fences: Number(s.fences), barriers: Number(s.barriers),
      passes: Number(s.passes), idleSleeps: Number(s.idle_sleeps), maxBatch: Number(s.max_batch),
      transportWrites: Number(s.transport_writes), transportBytes: Number(s.transport_bytes),
      transportSignalWrites: Number(s.transport_signal_writes),
    };
  }

  /** Stops the thread (bounded; in-flight transfers are abandoned: flush() first when they must
   * land) and frees the FIFO. Pending done() Promises reject. Idempotent. */
  protected destroy(handle: number): void {
    this.transport.untrack(this);
    const waiters = this.#waiters;
    this.#waiters = [];
    teardown("Proxy.dispose", [
      () => check(native().weft_proxy_stop(handle), "Proxy.dispose"),
      () => {
        for (const w of waiters) w.reject(new TransportError("the proxy was disposed before this command completed", { code: "E_TRANSPORT", op: "Proxy.done" }));
      },
      () => {
        detachNative(this.#control.buffer as ArrayBuffer);
        if (this.#deviceControl) detachNative(this.#deviceControl.buffer as ArrayBuffer);
      },
    ]);
  }

  // One poll loop per proxy for all pending done() calls: hot (setImmediate) while completions keep
  // coming, then every millisecond, so a long wait does not spin the event loop.
  #tick(): void {
    if (this.#ticking) return;
    this.#ticking = true;
    const poll = () => {
      if (this.disposed) {
        this.#ticking = false;
        return;
      }
      const completed = Number(this.#control[COMPLETED_WORD]);
      const now = performance.now();
      const failed = this.#errorView[ERROR_WORD] !== 0n ? this.error() : null;
      const before = this.#waiters.length;
      this.#waiters = this.#waiters.filter((w) => {
        if (completed > w.ticket) w.resolve();
        else if (failed) w.reject(failed);
        else if (now > w.deadline) {
          w.reject(new TimeoutError(`command ${w.ticket} did not complete in time (${completed} of ${this.#control[0]} done)`,
            { code: "E_TIMEOUT", op: "Proxy.done" }));
        } else return true;
        return false;
      });
      if (this.#waiters.length === 0) {
        this.#ticking = false;
        return;
      }
      this.#idlePolls = this.#waiters.length < before ? 0 : this.#idlePolls + 1;
      if (this.#idlePolls < 64) setImmediate(poll);
      else setTimeout(poll, 1);
    };
    setImmediate(poll);
  }
}
