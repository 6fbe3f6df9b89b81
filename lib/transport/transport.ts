// transport.ts — this rank's libfabric endpoint (DESIGN.md "Inter-node"): open, exchange addresses
// through the bootstrap store, register memory. Closing it releases its regions and stops its
// proxies. Set-up is collective: every rank makes the same calls in the same order.
import { TransportCounters, TransportParams } from "../abi.ts";
import type { KeyValueStore } from "../bootstrap.ts";
import { ArgumentError, checkInt } from "../errors.ts";
import { NativeHandle, teardown } from "../handle.ts";
import { addressOf, check, native, outPointer, readCString } from "../native.ts";
import { checkTransportAddresses } from "../bootstrap/exchanged-values.ts";
import { concatBlobs, copyNative } from "./blobs.ts";
import { HostBuffer } from "./host-buffer.ts";
import type { Proxy } from "./proxy.ts";
import { Region } from "./region.ts";

/** The part of the bootstrap store the transport needs (Store and LocalStore provide it). */
export type Exchange = Pick<KeyValueStore, "rank" | "worldSize" | "allGather" | "barrier">;

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

/** Memory to register: a HostBuffer, or an address range (device memory when `device` is set). */
export type RegisterableMemory = HostBuffer | { address: number; bytes: number; device?: number };

export class Transport extends NativeHandle {
  readonly rank: number;
  readonly worldSize: number;
  readonly #regions = new Set<Region>();
  readonly #proxies = new Set<Proxy>();
  #info: TransportInfo | undefined;

  private constructor(handle: number, rank: number, worldSize: number) {
    super(handle, `Transport of rank ${rank}`, "its endpoint and registrations stay open until the process exits");
    this.rank = rank;
    this.worldSize = worldSize;
  }

  /** Opens this rank's endpoint. Not usable until connect()/connectPeers(). */
  static open(opts: TransportOptions): Transport {
    const op = "Transport.open";
    if (opts === null || typeof opts !== "object") throw new ArgumentError(op, "opts", "must be an object { rank, worldSize, ... }");
    const worldSize = checkInt(op, "worldSize", opts.worldSize, 1);
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
    return this.pointerFor("Transport.handle");
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
    this.guard(op);
    if (!Array.isArray(addresses) || addresses.length !== this.worldSize) {
      throw new ArgumentError(op, "addresses", `must hold one address per rank (${this.worldSize}), got ${addresses?.length}`);
    }
    checkTransportAddresses(op, addresses);
    const { bytes, stride } = concatBlobs(op, "address", addresses);
    check(native().weft_transport_connect(this.handle, bytes, stride, addresses.length), op);
  }

  /** Registers local memory. Pair with Region.connectPeers (or use share()). */
  register(memory: RegisterableMemory): Region {
    const op = "Transport.register";
    this.guard(op);
    if (memory === null || typeof memory !== "object") throw new ArgumentError(op, "memory", "must be a HostBuffer or { address, bytes, device? }");
    const host = memory instanceof HostBuffer;
    const address = host ? memory.address : checkInt(op, "memory.address", memory.address, 1);
    const bytes = checkInt(op, "memory.bytes", memory.bytes, 1);
    const device = host || memory.device === undefined ? -1 : checkInt(op, "memory.device", memory.device, 0);
    const out = new Int32Array(1);
    check(native().weft_transport_register(this.handle, address, bytes, device, out), op);
    const r = new Region(this, out[0]!, bytes, host ? memory : undefined);
    this.#regions.add(r);
    return r;
  }

  /** register() + the descriptor exchange through the store. Collective: same order on every rank. */
  async share(store: Exchange, memory: RegisterableMemory, key?: string): Promise<Region> {
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
  protected destroy(handle: number): void {
    // Closing the endpoint releases every registration with it, in-flight writes included (a
    // failed transport may still have some), so regions are only marked here.
    teardown("Transport.dispose", [
      ...[...this.#proxies].map((p) => () => p.dispose()),
      () => {
        for (const r of this.#regions) r.closed();
        this.#regions.clear();
      },
      () => check(native().weft_transport_close(handle), "Transport.dispose"),
    ]);
  }

  /** @internal a Region or Proxy of this transport was disposed on its own */
  untrack(x: Region | Proxy): void {
    if (x instanceof Region) this.#regions.delete(x);
    else this.#proxies.delete(x);
  }

  /** @internal Proxy.start */
  adopt(p: Proxy): void {
    this.#proxies.add(p);
  }
}

export function transportCounters(): { transports: number; regions: number; proxyThreads: number; hostBuffers: number } {
  const buf = TransportCounters.alloc();
  check(native().weft_transport_counters(buf), "transportCounters");
  const c = TransportCounters.read(buf);
  return { transports: Number(c.transports), regions: Number(c.regions), proxyThreads: Number(c.proxy_threads), hostBuffers: Number(c.host_buffers) };
}
