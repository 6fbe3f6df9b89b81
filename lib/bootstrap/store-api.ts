// store-api.ts — what a communicator needs from a rendezvous (KeyValueStore), the limits and
// argument rules every store shares, and StoreBase: barrier and allGather built from set + keyed
// waits, the same for the TCP store and the in-process one.
import { Buffer } from "node:buffer";

import { ArgumentError, DisposedError } from "../errors.ts";

/** What a communicator needs from a rendezvous; Store (TCP) and LocalStore (in-process) provide it. */
export interface KeyValueStore extends AsyncDisposable {
  readonly rank: number;
  readonly worldSize: number;
  set(key: string, value: Uint8Array | string): Promise<void>;
  /** The value some rank set under `key`; waits until one does. */
  get(key: string, timeoutMs?: number): Promise<Uint8Array>;
  /** Resolves once every key is set. */
  wait(keys: string[], timeoutMs?: number): Promise<void>;
  /** Resolves once every rank has entered the barrier of this name (each call is a new generation). */
  barrier(name: string, timeoutMs?: number): Promise<void>;
  /** Every rank's value, index = rank. */
  allGather(key: string, value: Uint8Array): Promise<Uint8Array[]>;
  close(): Promise<void>;
  /** Calls `listener` for each rank the store learns has gone without closing (a dead process);
   * returns the function that unsubscribes it. Optional: a store whose ranks cannot die apart
   * (LocalStore, one process) has none. The communicator's failure watchdog subscribes here. */
  onRankLost?(listener: RankLostListener): () => void;
}

/** `rank` is gone without closing the store; `reason` says how it was learnt, in words. */
export type RankLostListener = (rank: number, reason: string) => void;

export const DEFAULT_TIMEOUT_MS = 120_000;
/** A key travels with a u16 length on the wire. */
export const MAX_KEY_BYTES = 0xffff;
/** The largest value one set() takes. What weft itself stores is under 1 KiB per key (peer handles,
 * transport addresses, region descriptors); the bound is there so that one frame, and so one
 * allocation on rank 0, has a ceiling. */
export const MAX_VALUE_BYTES = 256 << 20;
/** A token shorter than this could be found by brute force from one recorded handshake. */
export const MIN_TOKEN_CHARS = 16;
const MAX_TOKEN_BYTES = 1024;

export function checkKey(op: string, key: unknown, argument = "key"): asserts key is string {
  if (typeof key !== "string" || key.length === 0) throw new ArgumentError(op, argument, `must be a non-empty string (got ${JSON.stringify(key)})`);
  const n = Buffer.byteLength(key);
  if (n > MAX_KEY_BYTES) throw new ArgumentError(op, argument, `must be at most ${MAX_KEY_BYTES} bytes of UTF-8 (got ${n})`);
}

export function checkTimeout(op: string, ms: unknown, argument = "timeoutMs"): number {
  if (typeof ms !== "number" || !(ms > 0) || !Number.isFinite(ms)) {
    throw new ArgumentError(op, argument, `must be a positive finite number of milliseconds (got ${ms})`);
  }
  return ms;
}

const encoder = new TextEncoder();

export function toBytes(value: Uint8Array | string, op: string): Uint8Array {
  const bytes = typeof value === "string" ? encoder.encode(value) : value;
  if (!(bytes instanceof Uint8Array)) throw new ArgumentError(op, "value", "must be a Uint8Array or a string");
  if (bytes.length > MAX_VALUE_BYTES) {
    throw new ArgumentError(op, "value", `must be at most ${MAX_VALUE_BYTES} bytes (256 MiB; got ${bytes.length})`);
  }
  return bytes;
}

/** A job token: printable, no surrounding whitespace (a token read with a trailing newline on one
 * rank and without on another would fail only at run time), long enough not to be guessed. */
export function checkToken(op: string, argument: string, token: unknown): string {
  if (typeof token !== "string") throw new ArgumentError(op, argument, `must be a string (got ${typeof token})`);
  if (token.length < MIN_TOKEN_CHARS) {
    throw new ArgumentError(op, argument, `must be at least ${MIN_TOKEN_CHARS} characters (got ${token.length}); ` +
      "make one with e.g. `openssl rand -hex 16` and give every rank the same");
  }
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) throw new ArgumentError(op, argument, `must be at most ${MAX_TOKEN_BYTES} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/^\s|\s$|[\x00-\x1f\x7f]/.test(token)) {
    throw new ArgumentError(op, argument, "must not start or end with whitespace nor hold control characters");
  }
  return token;
}

/** A host name or an IP literal, as given to listen() or connect(). */
export function checkBindAddr(op: string, argument: string, addr: unknown): string {
  if (typeof addr !== "string" || !/^[A-Za-z0-9._:%-]{1,253}$/.test(addr)) {
    throw new ArgumentError(op, argument, `must be a host name or IP address: letters, digits and . - : % _ only, ` +
      `1 to 253 of them (got ${JSON.stringify(addr)})`);
  }
  return addr;
}

export function listRanks(ranks: number[]): string {
  return ranks.length === 1 ? `rank ${ranks[0]}` : `ranks ${ranks.join(", ")}`;
}

/** Keys of the barrier protocol: one per rank and generation, so a name can be reused. */
function barrierKey(name: string, generation: number, rank: number): string {
  return `__weft/barrier/${name}/${generation}/${rank}`;
}

function allGatherKey(key: string, rank: number): string {
  return `__weft/allgather/${key}/${rank}`;
}

/** Shared by Store and LocalStore: barrier and allGather built from set + keyed waits. */
export abstract class StoreBase implements KeyValueStore {
  abstract readonly rank: number;
  abstract readonly worldSize: number;
  protected readonly defaultTimeoutMs: number;
  readonly #generations = new Map<string, number>();
  #closed = false;

  constructor(defaultTimeoutMs: number) {
    this.defaultTimeoutMs = defaultTimeoutMs;
  }

  abstract set(key: string, value: Uint8Array | string): Promise<void>;
  abstract close(): Promise<void>;
  /** Waits for every key; on timeout throws with `describe(missingKeys)` in the message. */
  protected abstract waitKeys(op: string, keys: string[], timeoutMs: number, values: boolean,
    describe: (missing: string[]) => string): Promise<(Uint8Array | undefined)[]>;

  protected get closed(): boolean {
    return this.#closed;
  }

  protected markClosed(): void {
    this.#closed = true;
  }

  /** Throws DisposedError once close() has begun. */
  protected guard(op: string): void {
    if (this.#closed) throw new DisposedError(op, "Store");
  }

  async get(key: string, timeoutMs = this.defaultTimeoutMs): Promise<Uint8Array> {
    const op = "Store.get";
    checkKey(op, key);
    const [v] = await this.waitKeys(op, [key], checkTimeout(op, timeoutMs), true,
      () => `rank ${this.rank} waited ${timeoutMs} ms for key '${key}', which no rank set`);
    return v!;
  }

  async wait(keys: string[], timeoutMs = this.defaultTimeoutMs): Promise<void> {
    const op = "Store.wait";
    if (!Array.isArray(keys)) throw new ArgumentError(op, "keys", "must be an array of strings");
    keys.forEach((k, i) => checkKey(op, k, `keys[${i}]`));
    await this.waitKeys(op, keys, checkTimeout(op, timeoutMs), false,
      (missing) => `rank ${this.rank} waited ${timeoutMs} ms for ${missing.length} of ${keys.length} keys, never set: ${missing.map((k) => `'${k}'`).join(", ")}`);
  }

  async barrier(name: string, timeoutMs = this.defaultTimeoutMs): Promise<void> {
    const op = "Store.barrier";
    checkKey(op, name, "name");
    checkTimeout(op, timeoutMs);
    const gen = this.#generations.get(name) ?? 0;
    this.#generations.set(name, gen + 1);
    await this.set(barrierKey(name, gen, this.rank), "");
    const keys = Array.from({ length: this.worldSize }, (_, r) => barrierKey(name, gen, r));
    await this.waitKeys(op, keys, timeoutMs, false, (missing) => {
      const absent = missing.map((k) => Number(k.slice(k.lastIndexOf("/") + 1)));
      const present = [...Array(this.worldSize).keys()].filter((r) => !absent.includes(r));
      return `barrier '${name}' timed out after ${timeoutMs} ms on rank ${this.rank}: ${listRanks(absent)} never arrived ` +
        `(arrived: ${present.join(", ")})`;
    });
  }

  async allGather(key: string, value: Uint8Array): Promise<Uint8Array[]> {
    const op = "Store.allGather";
    checkKey(op, key);
    await this.set(allGatherKey(key, this.rank), toBytes(value, op));
    const keys = Array.from({ length: this.worldSize }, (_, r) => allGatherKey(key, r));
    const values = await this.waitKeys(op, keys, this.defaultTimeoutMs, true, (missing) => {
      const absent = missing.map((k) => Number(k.slice(k.lastIndexOf("/") + 1)));
      return `allGather '${key}' timed out after ${this.defaultTimeoutMs} ms on rank ${this.rank}: ${listRanks(absent)} never contributed`;
    });
    return values as Uint8Array[];
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
