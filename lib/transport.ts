// transport.ts — the inter-node transport and its proxy, as handle classes (DESIGN.md "Inter-node").
//
//   HostBuffer   host memory a NIC (and every GPU, when there is one) can reach; viewed zero-copy
//   Transport    this rank's libfabric endpoint; connect() exchanges addresses through the store
//   Region       registered memory, the same index on every rank
//   Proxy        the per-rank proxy thread and its command FIFO: put / signal / fence / barrier,
//                completion as Promises that reject with the proxy's error
//
// Set-up is collective: every rank makes the same calls in the same order.
import { ProxyCommand, ProxyFifo, ProxyParams, ProxyStats as ProxyStatsStruct, TransportCounters, TransportParams } from "./abi.ts";
import type { KeyValueStore } from "./bootstrap.ts";
import { ArgumentError, checkInt, DisposedError, errorFromStatus, TimeoutError, TransportError, type WeftError } from "./errors.ts";
import { addressOf, check, native, outPointer, readCString, viewNative } from "./native.ts";

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(). Call dispose() or declare it with \`using\`.`);
});

/** The part of the bootstrap store the transport needs (Store and LocalStore provide it). */
export type Exchange = Pick<KeyValueStore, "rank" | "worldSize" | "allGather" | "barrier">;

function concatBlobs(op: string, what: string, blobs: Uint8Array[]): { bytes: Uint8Array; stride: number } {
  const stride = blobs[0]?.length ?? 0;
  blobs.forEach((b, i) => {
    if (!(b instanceof Uint8Array) || b.length !== stride || stride === 0) {
      throw new TransportError(`${what} ${i} has ${b?.length} bytes but ${what} 0 has ${stride}: the ranks disagree ` +
        `on the transport (set WEFT_FABRIC_PROVIDER alike on every rank)`, { code: "E_TRANSPORT", op });
    }
  });
  const bytes = new Uint8Array(stride * blobs.length);
  blobs.forEach((b, i) => bytes.set(b, i * stride));
  return { bytes, stride };
}

/** A copy of `bytes` bytes of native memory (a blob the library owns). */
function copyNative(address: number, bytes: number): Uint8Array {
  return new Uint8Array(viewNative(address, bytes).slice(0));
}

// ---- host memory ------------------------------------------------------------------------------------

/** Host memory that a NIC and (when present) every GPU can reach, zero-filled. */
export class HostBuffer implements Disposable {
  readonly bytes: number;
  /** The device alias of the same bytes, or 0 without a GPU. */
  readonly deviceAddress: number;
  #address: number;
  #view: Uint8Array | undefined;

  private constructor(address: number, device: number, bytes: number) {
    this.#address = address;
    this.deviceAddress = device;
    this.bytes = bytes;
    leaks.register(this, `HostBuffer of ${bytes} bytes`, this);
  }

  static alloc(bytes: number): HostBuffer {
    const op = "HostBuffer.alloc";
    checkInt(op, "bytes", bytes, 1);
    const host = new BigUint64Array(1);
    const device = new BigUint64Array(1);
    check(native().weft_transport_host_alloc(bytes, host, device), op);
    return new HostBuffer(outPointer(host), outPointer(device), bytes);
  }

  get address(): number {
    if (!this.#address) throw new DisposedError("HostBuffer.address", "HostBuffer");
    return this.#address;
  }

  /** A zero-copy view of the bytes; invalid after dispose(). */
  get view(): Uint8Array {
    this.address;
    return (this.#view ??= new Uint8Array(viewNative(this.#address, this.bytes)));
  }

  get disposed(): boolean {
    return this.#address === 0;
  }

  dispose(): void {
    if (!this.#address) return;
    const a = this.#address;
    this.#address = 0;
    this.#view = undefined;
    leaks.unregister(this);
    check(native().weft_transport_host_free(a), "HostBuffer.dispose");
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

// ---- transport ----------------------------------------------------------------------------------------

export interface TransportOptions {
  rank: number;
  worldSize: number;
  /** GPU whose memory may be registered (FI_HMEM); omit for host memory only. */
  device?: number;
  /** Every rank is on this host: lets the shm provider qualify. */
  sameHost?: boolean;
  /** Bound on every transport operation (default 30 000 ms). */
  timeoutMs?: number;
  /** Force a libfabric provider ("tcp;ofi_rxm", "shm", "verbs;ofi_rxm", "efa"). Default: automatic,
   * or WEFT_FABRIC_PROVIDER. */
  provider?: string;
}

export interface TransportInfo {
  provider: string;
  fabric: string;
  domain: string;
  libfabric: string;
  hmem: boolean;
  deliveryComplete: boolean;
  mrMode: number;
  dataProgress: "auto" | "manual";
  maxMessage: number;
  rank: number;
  worldSize: number;
}

export class Transport implements Disposable {
  readonly rank: number;
  readonly worldSize: number;
  #handle: number;
  #regions = new Set<Region>();
  #proxies = new Set<Proxy>();
  #info: TransportInfo | undefined;

  private constructor(handle: number, rank: number, worldSize: number) {
    this.#handle = handle;
    this.rank = rank;
    this.worldSize = worldSize;
    leaks.register(this, `Transport of rank ${rank}`, this);
  }

  /** Opens this rank's endpoint. Not usable until connect()/connectPeers(). */
  static open(opts: TransportOptions): Transport {
    const op = "Transport.open";
    const worldSize = checkInt(op, "worldSize", opts?.worldSize, 1);
    const rank = checkInt(op, "rank", opts.rank, 0, worldSize - 1);
    const device = opts.device === undefined ? -1 : checkInt(op, "device", opts.device, 0);
    const timeoutMs = opts.timeoutMs === undefined ? 0 : checkInt(op, "timeoutMs", opts.timeoutMs, 1, 0xffffffff);
    if (opts.provider !== undefined && (typeof opts.provider !== "string" || opts.provider === "")) {
      throw new ArgumentError(op, "provider", `must be a non-empty provider name (got ${JSON.stringify(opts.provider)})`);
    }
    const provider = opts.provider === undefined ? null : new TextEncoder().encode(opts.provider + "\0");
    const params = TransportParams.write(TransportParams.alloc(), {
      rank, world_size: worldSize, device, same_host: opts.sameHost ? 1 : 0, timeout_ms: timeoutMs,
      provider: provider ? addressOf(provider) : 0,
    });
    const out = new BigUint64Array(1);
    check(native().weft_transport_open(params, out), op);
    return new Transport(outPointer(out), rank, worldSize);
  }

  /** open() + the address exchange through the bootstrap store. Collective. Returns once every
   * rank has inserted every address, so that no write reaches a peer that cannot place it yet. */
  static async connect(store: Exchange, opts: Omit<TransportOptions, "rank" | "worldSize"> = {}, key = "weft/transport"): Promise<Transport> {
    const t = Transport.open({ ...opts, rank: store.rank, worldSize: store.worldSize });
    try {
      t.connectPeers(await store.allGather(`${key}/address`, t.address()));
      await store.barrier(`${key}/connected`);
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  get handle(): number {
    if (!this.#handle) throw new DisposedError("Transport.handle", "Transport");
    return this.#handle;
  }

  get info(): TransportInfo {
    if (!this.#info) {
      const out = new BigUint64Array(1);
      check(native().weft_transport_info(this.handle, out), "Transport.info");
      this.#info = JSON.parse(readCString(outPointer(out))) as TransportInfo;
    }
    return this.#info;
  }

  get provider(): string {
    return this.info.provider;
  }

  /** This rank's address blob, to hand to every other rank. */
  address(): Uint8Array {
    const blob = new BigUint64Array(1);
    const bytes = new BigUint64Array(1);
    check(native().weft_transport_address(this.handle, blob, bytes), "Transport.address");
    return copyNative(outPointer(blob), Number(bytes[0]));
  }

  /** Every rank's address, in rank order. */
  connectPeers(addresses: Uint8Array[]): void {
    const op = "Transport.connectPeers";
    if (!Array.isArray(addresses) || addresses.length !== this.worldSize) {
      throw new ArgumentError(op, "addresses", `must hold one address per rank (${this.worldSize}), got ${addresses?.length}`);
    }
    const { bytes, stride } = concatBlobs(op, "address", addresses);
    check(native().weft_transport_connect(this.handle, bytes, stride, addresses.length), op);
  }

  /** Registers local memory. Pair with Region.connectPeers (or use share()). */
  register(memory: HostBuffer | { address: number; bytes: number; device?: number }): Region {
    const op = "Transport.register";
    const address = memory instanceof HostBuffer ? memory.address : checkInt(op, "memory.address", memory?.address, 1);
    const bytes = checkInt(op, "memory.bytes", memory.bytes, 1);
    const device = memory instanceof HostBuffer ? -1 : memory.device === undefined ? -1 : checkInt(op, "memory.device", memory.device, 0);
    const out = new Int32Array(1);
    check(native().weft_transport_register(this.handle, address, bytes, device, out), op);
    const r = new Region(this, out[0]!, bytes, memory instanceof HostBuffer ? memory : undefined);
    this.#regions.add(r);
    return r;
  }

  /** register() + the descriptor exchange through the store. Collective: same order on every rank. */
  async share(store: Exchange, memory: HostBuffer | { address: number; bytes: number; device?: number }, key?: string): Promise<Region> {
    const r = this.register(memory);
    try {
      r.connectPeers(await store.allGather(key ?? `weft/transport/region/${r.index}`, r.descriptor()));
    } catch (e) {
      r.dispose();
      throw e;
    }
    return r;
  }

  /** Closes the endpoint (no transfer touches registered memory after this), its regions and
   * proxies. Idempotent. Teardown is collective: barrier on the store first so no peer is still
   * writing. */
  dispose(): void {
    if (!this.#handle) return;
    let first: unknown;
    for (const p of [...this.#proxies]) {
      try {
        p.dispose();
      } catch (e) {
        first ??= e;
      }
    }
    const h = this.#handle;
    this.#handle = 0;
    leaks.unregister(this);
    // Closing the endpoint releases every registration with it, in-flight writes included (a
    // failed transport may still have some), so regions are only marked here.
    for (const r of [...this.#regions]) r.closed();
    this.#regions.clear();
    check(native().weft_transport_close(h), "Transport.dispose");
    if (first) throw first;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** @internal */
  forget(x: Region | Proxy): void {
    if (x instanceof Region) this.#regions.delete(x);
    else this.#proxies.delete(x);
  }

  /** @internal */
  adopt(p: Proxy): void {
    this.#proxies.add(p);
  }
}

export class Region implements Disposable {
  readonly transport: Transport;
  readonly index: number;
  readonly bytes: number;
  /** The HostBuffer registered, when it was one (kept referenced while registered). */
  readonly buffer: HostBuffer | undefined;
  #live = true;

  /** @internal use Transport.register */
  constructor(transport: Transport, index: number, bytes: number, buffer: HostBuffer | undefined) {
    this.transport = transport;
    this.index = index;
    this.bytes = bytes;
    this.buffer = buffer;
  }

  get disposed(): boolean {
    return !this.#live;
  }

  descriptor(): Uint8Array {
    if (!this.#live) throw new DisposedError("Region.descriptor", "Region");
    const blob = new BigUint64Array(1);
    const bytes = new BigUint64Array(1);
    check(native().weft_transport_region_descriptor(this.transport.handle, this.index, blob, bytes), "Region.descriptor");
    return copyNative(outPointer(blob), Number(bytes[0]));
  }

  /** Every rank's descriptor of this region, in rank order. */
  connectPeers(descriptors: Uint8Array[]): void {
    const op = "Region.connectPeers";
    if (!this.#live) throw new DisposedError(op, "Region");
    if (!Array.isArray(descriptors) || descriptors.length !== this.transport.worldSize) {
      throw new ArgumentError(op, "descriptors", `must hold one descriptor per rank (${this.transport.worldSize}), got ${descriptors?.length}`);
    }
    const { bytes, stride } = concatBlobs(op, "descriptor", descriptors);
    check(native().weft_transport_region_connect(this.transport.handle, this.index, bytes, stride, descriptors.length), op);
  }

  /** Deregisters now. Fails while local writes from it are in flight (flush the proxy first). */
  dispose(): void {
    if (!this.#live) return;
    check(native().weft_transport_deregister(this.transport.handle, this.index), "Region.dispose");
    this.#live = false;
    this.transport.forget(this);
  }

  /** @internal the transport closed, taking the registration with it */
  closed(): void {
    this.#live = false;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

export function transportCounters(): { transports: number; regions: number; proxyThreads: number; hostBuffers: number } {
  const buf = TransportCounters.alloc();
  check(native().weft_transport_counters(buf), "transportCounters");
  const c = TransportCounters.read(buf);
  return { transports: Number(c.transports), regions: Number(c.regions), proxyThreads: Number(c.proxy_threads), hostBuffers: Number(c.host_buffers) };
}

// ---- proxy ---------------------------------------------------------------------------------------------

export const Opcode = { put: 1, signal: 2, fence: 3, barrier: 4 } as const;
const FLAG_SIGNAL = 1;

export interface SignalTarget {
  /** Region holding the 64-bit signal word on the peer (same index on every rank). */
  region: Region | number;
  /** Byte offset of the word, 8-byte aligned. */
  offset: number;
  /** The epoch the word is raised to. Values only grow. */
  value: number | bigint;
}

export interface PutCommand {
  peer: number;
  src: Region | number;
  srcOffset: number;
  dst: Region | number;
  dstOffset: number;
  bytes: number;
  /** Then raise this signal: visible only after this put's data (and all earlier data to `peer`). */
  signal?: SignalTarget;
  cookie?: number | bigint;
}

export type Command =
  | ({ op: "put" } & PutCommand)
  | ({ op: "signal"; peer: number; cookie?: number | bigint } & SignalTarget)
  | { op: "fence" }
  | { op: "barrier" };

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

function regionIndex(op: string, name: string, r: Region | number): number {
  if (r instanceof Region) {
    if (r.disposed) throw new DisposedError(op, `Region ${r.index}`);
    return r.index;
  }
  return checkInt(op, name, r, 1, 255);
}

const COMPLETED_WORD = 128 / 8;
const ERROR_WORD = 192 / 8;

interface Waiter {
  ticket: number;
  deadline: number;
  resolve(): void;
  reject(e: WeftError): void;
}

export class Proxy implements Disposable {
  readonly transport: Transport;
  readonly capacity: number;
  #handle: number;
  #control: BigUint64Array;
  #errorView: BigInt64Array;
  #scratch: Uint8Array;
  #deviceControl: BigUint64Array | undefined;
  #fifo: ReturnType<typeof ProxyFifo.read>;
  #waiters: Waiter[] = [];
  #ticking = false;
  #idlePolls = 0;

  private constructor(transport: Transport, handle: number) {
    this.transport = transport;
    this.#handle = handle;
    const fifo = ProxyFifo.alloc();
    check(native().weft_proxy_fifo(handle, fifo), "Proxy.start");
    const f = ProxyFifo.read(fifo);
    this.capacity = f.capacity;
    // The host lane's control block (cuda/primitives/proxy_command.h), read with plain loads.
    const control = viewNative(f.host_control, 256);
    this.#control = new BigUint64Array(control);
    this.#errorView = new BigInt64Array(control);
    this.#fifo = f;
    if (f.device_control_host) this.#deviceControl = new BigUint64Array(viewNative(f.device_control_host, 256));
    this.#scratch = new Uint8Array(ProxyCommand.size * 64);
    leaks.register(this, `Proxy of rank ${transport.rank}`, this);
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
    if (!this.#handle) throw new DisposedError("Proxy.handle", "Proxy");
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#handle === 0;
  }

  /** Host-lane commands completed so far (every ticket below this is done). */
  get completed(): number {
    this.handle;
    return Number(this.#control[COMPLETED_WORD]);
  }

  /** Device-lane commands completed so far, or undefined without a device lane. */
  get deviceCompleted(): number | undefined {
    this.handle;
    return this.#deviceControl ? Number(this.#deviceControl[COMPLETED_WORD]) : undefined;
  }

  /** The device lane's addresses for a kernel's FifoDevice (cuda/primitives/fifo.cuh), or
   * undefined without one. */
  get deviceLane(): { slots: number; head: number; control: number; capacity: number } | undefined {
    this.handle;
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
    if (this.#errorView[ERROR_WORD] === 0n) return null;
    const code = new Int32Array(1);
    const msg = new BigUint64Array(1);
    check(native().weft_proxy_error(this.handle, code, msg), "Proxy.error");
    return code[0] ? errorFromStatus(code[0], "Proxy", readCString(outPointer(msg))) : null;
  }

  /** Packs commands into `buf` (ProxyCommand.size bytes each). Validates in TS first. */
  static pack(commands: readonly Command[], buf?: Uint8Array): Uint8Array {
    const op = "Proxy.push";
    const out = buf && buf.length >= commands.length * ProxyCommand.size ? buf : new Uint8Array(commands.length * ProxyCommand.size);
    commands.forEach((c, i) => {
      const at = out.subarray(i * ProxyCommand.size, (i + 1) * ProxyCommand.size);
      at.fill(0);
      ProxyCommand.write(at, { size: ProxyCommand.size, version: 1 });
      switch (c.op) {
        case "put": {
          const sig = c.signal;
          ProxyCommand.write(at, {
            opcode: Opcode.put,
            flags: sig ? FLAG_SIGNAL : 0,
            peer: checkInt(op, `commands[${i}].peer`, c.peer, 0),
            src_region: regionIndex(op, `commands[${i}].src`, c.src),
            dst_region: regionIndex(op, `commands[${i}].dst`, c.dst),
            src_offset: checkInt(op, `commands[${i}].srcOffset`, c.srcOffset, 0),
            dst_offset: checkInt(op, `commands[${i}].dstOffset`, c.dstOffset, 0),
            bytes: checkInt(op, `commands[${i}].bytes`, c.bytes, 0),
            signal_region: sig ? regionIndex(op, `commands[${i}].signal.region`, sig.region) : 0,
            signal_offset: sig ? checkInt(op, `commands[${i}].signal.offset`, sig.offset, 0) : 0,
            signal_value: sig ? sig.value : 0,
            cookie: c.cookie ?? 0,
          });
          break;
        }
        case "signal":
          ProxyCommand.write(at, {
            opcode: Opcode.signal,
            peer: checkInt(op, `commands[${i}].peer`, c.peer, 0),
            signal_region: regionIndex(op, `commands[${i}].region`, c.region),
            signal_offset: checkInt(op, `commands[${i}].offset`, c.offset, 0),
            signal_value: c.value,
            cookie: c.cookie ?? 0,
          });
          break;
        case "fence":
          ProxyCommand.write(at, { opcode: Opcode.fence });
          break;
        case "barrier":
          ProxyCommand.write(at, { opcode: Opcode.barrier });
          break;
        default:
          throw new ArgumentError(op, `commands[${i}].op`, `must be put, signal, fence or barrier (got ${JSON.stringify((c as { op?: unknown }).op)})`);
      }
    });
    return out;
  }

  /** Pushes commands (all or none, at most `capacity`), waiting up to timeoutMs (default 10 000;
   * 0 = fail at once when the FIFO is full). Returns the ticket of the LAST command (the others
   * precede it consecutively), which is what done()/waitSync() take to wait for all of them. */
  push(commands: readonly Command[] | Uint8Array, opts: { timeoutMs?: number; count?: number } = {}): number {
    const op = "Proxy.push";
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
    check(native().weft_proxy_push(this.handle, packed, count, timeoutMs, first), op);
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
    checkInt(op, "ticket", ticket, 0);
    const timeoutMs = checkInt(op, "timeoutMs", opts.timeoutMs ?? 30_000, 1);
    this.handle;
    if (Number(this.#control[COMPLETED_WORD]) > ticket) return Promise.resolve();
    const err = this.error();
    if (err) return Promise.reject(err);
    return new Promise<void>((resolve, reject) => {
      this.#waiters.push({ ticket, deadline: performance.now() + timeoutMs, resolve, reject });
      this.#tick();
    });
  }

  /** Blocks the calling thread until `ticket` completes (benchmarks, workers). */
  waitSync(ticket: number, timeoutMs = 30_000): void {
    check(native().weft_proxy_wait(this.handle, ticket, timeoutMs), "Proxy.waitSync");
  }

  /** Pushes a fence and resolves when it (and so everything before it) completes. */
  flush(opts: { timeoutMs?: number } = {}): Promise<void> {
    return this.done(this.fence(opts), opts);
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
  dispose(): void {
    if (!this.#handle) return;
    const h = this.#handle;
    this.#handle = 0;
    leaks.unregister(this);
    this.transport.forget(this);
    const waiters = this.#waiters;
    this.#waiters = [];
    const status = native().weft_proxy_stop(h);
    for (const w of waiters) w.reject(new TransportError("the proxy was disposed before this command completed", { code: "E_TRANSPORT", op: "Proxy.done" }));
    check(status, "Proxy.dispose");
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  // One poll loop per proxy for all pending done() calls: hot (setImmediate) while completions keep
  // coming, then every millisecond, so a long wait does not spin the event loop.
  #tick(): void {
    if (this.#ticking) return;
    this.#ticking = true;
    const poll = () => {
      if (!this.#handle) {
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
