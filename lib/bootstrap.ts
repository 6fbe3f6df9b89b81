// bootstrap.ts — how ranks find each other (DESIGN.md "Process model and bootstrap").
//
// rankEnvFromProcess() reads who this process is from the launcher's environment (torchrun, then
// Slurm, then Open MPI names). Store is the rendezvous: a small TCP key-value store that rank 0
// hosts (Bun.listen) and every rank, rank 0 included, talks to (Bun.connect). LocalStore is the
// same interface for several ranks inside one process (Communicator.local), with no sockets.
//
// Every wait is bounded. A wait that runs out throws TimeoutError naming the ranks or keys that
// never arrived; a rank whose connection drops without close() (a dead process) fails every
// pending and later wait of the others with PeerError naming that rank.
import { hostname } from "node:os";

import { ArgumentError, PeerError, TimeoutError, WeftError } from "./errors.ts";

// ---- who am I: launcher environment --------------------------------------------------------------

export interface RankEnv {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  masterAddr: string;
  masterPort: number;
  /** Ranks with the same nodeId share a host (and can map each other's GPU memory). */
  nodeId: string;
}

type Env = Record<string, string | undefined>;

const ENV_OP = "rankEnvFromProcess";

function intVar(env: Env, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) {
    throw new ArgumentError(ENV_OP, name, `must be an integer >= ${min} (got '${raw}')`);
  }
  return v;
}

/** Slurm's task-count lists: "4", "4(x2)", "2(x3),1". The first entry is this node's count when all
 * nodes run the same number of tasks, which is the only layout we accept without LOCAL_WORLD_SIZE. */
function slurmTasksPerNode(raw: string | undefined): number | undefined {
  if (!raw) return undefined;
  const m = /^(\d+)(\(x\d+\))?$/.exec(raw.trim());
  if (m) return Number(m[1]);
  const first = /^(\d+)/.exec(raw.trim());
  return first ? Number(first[1]) : undefined;
}

/** The first host of a Slurm node list: "node[01-04,07],gpu2" -> "node01". */
function firstSlurmHost(list: string | undefined): string | undefined {
  if (!list) return undefined;
  const m = /^([^,[]+)(?:\[([^\],-]+))?/.exec(list.trim());
  if (!m) return undefined;
  return m[2] ? m[1]! + m[2] : m[1];
}

/**
 * Who this process is, from (in order) torchrun names (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm names (SLURM_PROCID, SLURM_NTASKS, ...) or
 * Open MPI names (OMPI_COMM_WORLD_*). MASTER_ADDR/MASTER_PORT override what a launcher implies.
 * Without LOCAL_RANK/LOCAL_WORLD_SIZE (a hand-started torchrun-style job) all ranks are taken to
 * share one host. nodeId is WEFT_NODE_ID, or else the hostname.
 */
export function rankEnvFromProcess(env: Env = process.env): RankEnv {
  let rank: number | undefined;
  let worldSize: number | undefined;
  let localRank: number | undefined;
  let localWorldSize: number | undefined;
  let addr = env.MASTER_ADDR || undefined;
  let port = intVar(env, "MASTER_PORT", 0);
  let source: string;
  let rankName: string;
  let sizeName: string;

  if (env.RANK !== undefined || env.WORLD_SIZE !== undefined) {
    source = "torchrun";
    rankName = "RANK";
    sizeName = "WORLD_SIZE";
    rank = intVar(env, "RANK", 0);
    worldSize = intVar(env, "WORLD_SIZE", 1);
    localRank = intVar(env, "LOCAL_RANK", 0);
    localWorldSize = intVar(env, "LOCAL_WORLD_SIZE", 1);
    if (localRank === undefined && localWorldSize === undefined) {
      localRank = rank;
      localWorldSize = worldSize;
    }
  } else if (env.SLURM_PROCID !== undefined) {
    source = "Slurm";
    rankName = "SLURM_PROCID";
    sizeName = env.SLURM_NTASKS !== undefined ? "SLURM_NTASKS" : env.SLURM_STEP_NUM_TASKS !== undefined ? "SLURM_STEP_NUM_TASKS" : "SLURM_NPROCS";
    rank = intVar(env, "SLURM_PROCID", 0);
    worldSize = intVar(env, sizeName, 1);
    localRank = intVar(env, "SLURM_LOCALID", 0);
    localWorldSize = slurmTasksPerNode(env.SLURM_STEP_TASKS_PER_NODE ?? env.SLURM_NTASKS_PER_NODE ?? env.SLURM_TASKS_PER_NODE);
    addr ??= env.SLURM_LAUNCH_NODE_IPADDR || firstSlurmHost(env.SLURM_STEP_NODELIST ?? env.SLURM_JOB_NODELIST ?? env.SLURM_NODELIST);
    // A port every rank of the job derives alike, in the dynamic range, when MASTER_PORT is unset.
    const job = intVar(env, "SLURM_JOB_ID", 0);
    if (port === undefined && job !== undefined) port = 29500 + (job % 20000);
  } else if (env.OMPI_COMM_WORLD_RANK !== undefined) {
    source = "Open MPI";
    rankName = "OMPI_COMM_WORLD_RANK";
    sizeName = "OMPI_COMM_WORLD_SIZE";
    rank = intVar(env, "OMPI_COMM_WORLD_RANK", 0);
    worldSize = intVar(env, "OMPI_COMM_WORLD_SIZE", 1);
    localRank = intVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    localWorldSize = intVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else {
    throw new ArgumentError(ENV_OP, "RANK", "is not set, and neither are SLURM_PROCID nor OMPI_COMM_WORLD_RANK: " +
      "start the job with torchrun, srun or mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself");
  }

  const from = `(read from ${source} variables)`;
  if (rank === undefined) throw new ArgumentError(ENV_OP, rankName, `must be set ${from}`);
  if (worldSize === undefined) throw new ArgumentError(ENV_OP, sizeName, `must be set ${from}`);
  if (rank >= worldSize) throw new ArgumentError(ENV_OP, rankName, `must be < ${sizeName}=${worldSize} (got ${rank})`);
  if (localRank === undefined) throw new ArgumentError(ENV_OP, source === "Slurm" ? "SLURM_LOCALID" : "LOCAL_RANK", `must be set ${from}`);
  if (localWorldSize === undefined) {
    throw new ArgumentError(ENV_OP, source === "Slurm" ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE", `must be set ${from}`);
  }
  if (localRank >= localWorldSize) {
    throw new ArgumentError(ENV_OP, "LOCAL_RANK", `must be < the local world size ${localWorldSize} (got ${localRank})`);
  }
  if (localWorldSize > worldSize) {
    throw new ArgumentError(ENV_OP, "LOCAL_WORLD_SIZE", `must be <= the world size ${worldSize} (got ${localWorldSize})`);
  }
  if (!addr) throw new ArgumentError(ENV_OP, "MASTER_ADDR", `must be set: the host where rank 0 runs the store ${from}`);
  if (port === undefined) throw new ArgumentError(ENV_OP, "MASTER_PORT", `must be set: the TCP port of rank 0's store ${from}`);
  if (port > 65535) throw new ArgumentError(ENV_OP, "MASTER_PORT", `must be a TCP port <= 65535 (got ${port})`);
  if (port === 0 && worldSize > 1) {
    throw new ArgumentError(ENV_OP, "MASTER_PORT", `must name a real port when WORLD_SIZE > 1 (got 0): other ranks cannot find an ephemeral port`);
  }
  return { rank, worldSize, localRank, localWorldSize, masterAddr: addr, masterPort: port, nodeId: env.WEFT_NODE_ID || hostname() };
}

// ---- the store interface ---------------------------------------------------------------------------

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
}

const DEFAULT_TIMEOUT_MS = 120_000;

function checkKey(op: string, key: unknown, argument = "key"): asserts key is string {
  if (typeof key !== "string" || key.length === 0) throw new ArgumentError(op, argument, `must be a non-empty string (got ${JSON.stringify(key)})`);
  if (Buffer.byteLength(key) > 0xffff) throw new ArgumentError(op, argument, "must be at most 65535 bytes of UTF-8");
}

function checkTimeout(op: string, ms: unknown): number {
  if (typeof ms !== "number" || !(ms > 0) || !Number.isFinite(ms)) throw new ArgumentError(op, "timeoutMs", `must be a positive finite number of milliseconds (got ${ms})`);
  return ms;
}

function toBytes(value: Uint8Array | string, op: string): Uint8Array {
  if (typeof value === "string") return new TextEncoder().encode(value);
  if (value instanceof Uint8Array) return value;
  throw new ArgumentError(op, "value", "must be a Uint8Array or a string");
}

function listRanks(ranks: number[]): string {
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
abstract class StoreBase implements KeyValueStore {
  abstract readonly rank: number;
  abstract readonly worldSize: number;
  protected readonly defaultTimeoutMs: number;
  readonly #generations = new Map<string, number>();

  constructor(defaultTimeoutMs: number) {
    this.defaultTimeoutMs = defaultTimeoutMs;
  }

  abstract set(key: string, value: Uint8Array | string): Promise<void>;
  abstract close(): Promise<void>;
  /** Waits for every key; on timeout throws with `describe(missingKeys)` in the message. */
  protected abstract waitKeys(op: string, keys: string[], timeoutMs: number, values: boolean,
    describe: (missing: string[]) => string): Promise<(Uint8Array | undefined)[]>;

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

// ---- wire protocol -----------------------------------------------------------------------------------
//
// Frame: u32 LE payload length, then payload = u8 op | u32 LE id | u16 LE key length | key (UTF-8) |
// value (the rest). Client -> host: HELLO (id = rank, key = world size), SET, WATCH (reply VALUE
// when the key exists), BYE. Host -> client: OK / VALUE / FAIL (value = message) for a request id,
// DEAD (id = the rank whose connection dropped without BYE).

const Op = { HELLO: 1, SET: 2, WATCH: 3, BYE: 4, OK: 10, VALUE: 11, FAIL: 12, DEAD: 13 } as const;
const HEADER = 4 + 1 + 4 + 2;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function frame(op: number, id: number, key: string, value: Uint8Array = new Uint8Array(0)): Uint8Array {
  const k = encoder.encode(key);
  const buf = new Uint8Array(HEADER + k.length + value.length);
  const dv = new DataView(buf.buffer);
  dv.setUint32(0, buf.length - 4, true);
  dv.setUint8(4, op);
  dv.setUint32(5, id, true);
  dv.setUint16(9, k.length, true);
  buf.set(k, HEADER);
  buf.set(value, HEADER + k.length);
  return buf;
}

interface Frame {
  op: number;
  id: number;
  key: string;
  value: Uint8Array;
}

/** Reassembles frames from TCP chunks and queues writes the socket could not take yet. */
class Wire {
  #pending: Uint8Array = new Uint8Array(0);
  #out: Uint8Array[] = [];
  #socket: { write(d: Uint8Array): number } | undefined;

  attach(socket: { write(d: Uint8Array): number }): void {
    this.#socket = socket;
    this.flush();
  }

  send(bytes: Uint8Array): void {
    this.#out.push(bytes);
    if (this.#out.length === 1) this.flush();
  }

  /** Writes queued bytes until the socket pushes back; Bun calls drain() when it can take more. */
  flush(): void {
    const s = this.#socket;
    if (!s) return;
    while (this.#out.length > 0) {
      const head = this.#out[0]!;
      const n = s.write(head);
      if (n < 0) return;
      if (n < head.length) {
        this.#out[0] = head.subarray(n);
        return;
      }
      this.#out.shift();
    }
  }

  *receive(chunk: Uint8Array): Generator<Frame> {
    let buf = this.#pending.length === 0 ? chunk : concat(this.#pending, chunk);
    while (buf.length >= 4) {
      const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      const len = dv.getUint32(0, true);
      if (buf.length < 4 + len) break;
      const keyLen = dv.getUint16(9, true);
      yield {
        op: dv.getUint8(4),
        id: dv.getUint32(5, true),
        key: decoder.decode(buf.subarray(HEADER, HEADER + keyLen)),
        value: buf.slice(HEADER + keyLen, 4 + len),
      };
      buf = buf.subarray(4 + len);
    }
    this.#pending = buf.length === 0 ? new Uint8Array(0) : buf.slice();
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

// ---- the host (rank 0) ---------------------------------------------------------------------------------

interface Client {
  wire: Wire;
  rank: number; // -1 until HELLO
  bye: boolean;
  watches: Map<string, number[]>; // key -> request ids waiting for it
}

class StoreHost {
  readonly #data = new Map<string, Uint8Array>();
  readonly #clients = new Set<Client>();
  readonly #byRank = new Map<number, Client>();
  readonly #worldSize: number;
  readonly #listener: import("bun").TCPSocketListener<Client>;
  #dead: number[] = [];
  #allGone: (() => void) | undefined;

  constructor(worldSize: number, port: number) {
    this.#worldSize = worldSize;
    this.#listener = Bun.listen<Client>({
      hostname: "0.0.0.0",
      port,
      exclusive: true,
      socket: {
        binaryType: "uint8array",
        open: (socket) => {
          const c: Client = { wire: new Wire(), rank: -1, bye: false, watches: new Map() };
          c.wire.attach(socket);
          socket.data = c;
          this.#clients.add(c);
        },
        data: (socket, chunk) => {
          for (const f of socket.data.wire.receive(chunk)) this.#handle(socket.data, f);
        },
        drain: (socket) => socket.data.wire.flush(),
        close: (socket) => this.#gone(socket.data),
        error: (socket) => this.#gone(socket.data),
      },
    });
  }

  get port(): number {
    return this.#listener.port;
  }

  #handle(c: Client, f: Frame): void {
    switch (f.op) {
      case Op.HELLO: {
        const world = Number(f.key);
        if (world !== this.#worldSize) {
          c.wire.send(frame(Op.FAIL, f.id, "", encoder.encode(`rank ${f.id} says the world size is ${world} but rank 0 says ${this.#worldSize}`)));
          return;
        }
        if (f.id >= this.#worldSize || this.#byRank.has(f.id)) {
          c.wire.send(frame(Op.FAIL, f.id, "", encoder.encode(f.id >= this.#worldSize
            ? `rank ${f.id} is out of range for world size ${this.#worldSize}` : `rank ${f.id} is already connected: two processes claim the same rank`)));
          return;
        }
        c.rank = f.id;
        this.#byRank.set(f.id, c);
        c.wire.send(frame(Op.OK, f.id, ""));
        // A rank that joins after another died learns about it at once.
        for (const r of this.#dead) c.wire.send(frame(Op.DEAD, r, ""));
        return;
      }
      case Op.SET: {
        this.#data.set(f.key, f.value);
        for (const other of this.#clients) {
          const ids = other.watches.get(f.key);
          if (!ids) continue;
          other.watches.delete(f.key);
          for (const id of ids) other.wire.send(frame(Op.VALUE, id, f.key, f.value));
        }
        c.wire.send(frame(Op.OK, f.id, ""));
        return;
      }
      case Op.WATCH: {
        const v = this.#data.get(f.key);
        if (v !== undefined) c.wire.send(frame(Op.VALUE, f.id, f.key, v));
        else {
          const ids = c.watches.get(f.key) ?? [];
          ids.push(f.id);
          c.watches.set(f.key, ids);
        }
        return;
      }
      case Op.BYE:
        c.bye = true;
        c.wire.send(frame(Op.OK, f.id, ""));
        return;
    }
  }

  #gone(c: Client | undefined): void {
    if (!c || !this.#clients.delete(c)) return;
    if (c.rank >= 0) {
      this.#byRank.delete(c.rank);
      if (!c.bye) {
        this.#dead.push(c.rank);
        for (const other of this.#clients) other.wire.send(frame(Op.DEAD, c.rank, ""));
      }
    }
    if (this.#clients.size === 0) this.#allGone?.();
  }

  /** Stops listening once every client has disconnected, or after timeoutMs. */
  async stop(timeoutMs: number): Promise<void> {
    if (this.#clients.size > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, timeoutMs);
        this.#allGone = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    this.#listener.stop(true);
  }
}

// ---- the client (every rank) -----------------------------------------------------------------------------

interface Request {
  resolve(f: Frame): void;
  reject(e: Error): void;
}

export interface StoreOptions {
  rank: number;
  worldSize: number;
  /** Host of rank 0's store. */
  addr: string;
  /** Port of rank 0's store. Rank 0 may pass 0 to take a free port, then read `store.port`. */
  port: number;
  /** Default bound for connecting and for every wait, in ms (default 120 000). */
  timeoutMs?: number;
}

/** The TCP rendezvous store. Rank 0 hosts it; every rank, rank 0 included, is a client. */
export class Store extends StoreBase {
  readonly rank: number;
  readonly worldSize: number;
  /** The port the store listens on (rank 0's choice when it was given port 0). */
  readonly port: number;
  readonly addr: string;
  readonly #host: StoreHost | undefined;
  readonly #wire = new Wire();
  readonly #requests = new Map<number, Request>();
  #socket: Awaited<ReturnType<typeof Bun.connect>> | undefined;
  #nextId = 1;
  #dead: number[] = [];
  #lost: string | undefined;
  #closed = false;

  private constructor(opts: Required<StoreOptions>, host: StoreHost | undefined) {
    super(opts.timeoutMs);
    this.rank = opts.rank;
    this.worldSize = opts.worldSize;
    this.addr = opts.addr;
    this.port = host ? host.port : opts.port;
    this.#host = host;
  }

  /** Rank 0 starts the host; every rank connects (retrying while rank 0 is not up yet). */
  static async connect(opts: StoreOptions): Promise<Store> {
    const op = "Store.connect";
    const { rank, worldSize, addr, port } = opts ?? ({} as StoreOptions);
    if (!Number.isInteger(worldSize) || worldSize < 1) throw new ArgumentError(op, "worldSize", `must be a positive integer (got ${worldSize})`);
    if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new ArgumentError(op, "rank", `must be an integer in [0, ${worldSize}) (got ${rank})`);
    if (typeof addr !== "string" || addr === "") throw new ArgumentError(op, "addr", `must be a host name or address (got ${JSON.stringify(addr)})`);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ArgumentError(op, "port", `must be a TCP port in [0, 65535] (got ${port})`);
    if (port === 0 && rank !== 0) throw new ArgumentError(op, "port", "must be rank 0's real port on ranks other than 0 (got 0)");
    const timeoutMs = checkTimeout(op, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);

    let host: StoreHost | undefined;
    if (rank === 0) {
      try {
        host = new StoreHost(worldSize, port);
      } catch (cause) {
        throw new WeftError(`rank 0 could not host the store on port ${port}: ${(cause as Error).message}`, { code: "E_INVALID", op, cause });
      }
    }
    const store = new Store({ rank, worldSize, addr: rank === 0 ? "127.0.0.1" : addr, port, timeoutMs }, host);
    try {
      await store.#open(timeoutMs);
    } catch (e) {
      await host?.stop(0);
      throw e;
    }
    return store;
  }

  async #open(timeoutMs: number): Promise<void> {
    const op = "Store.connect";
    const deadline = performance.now() + timeoutMs;
    let delay = 10;
    let lastError = "";
    for (;;) {
      try {
        this.#socket = await Bun.connect<undefined>({
          hostname: this.addr,
          port: this.port,
          socket: {
            binaryType: "uint8array",
            data: (_s, chunk) => {
              for (const f of this.#wire.receive(chunk)) this.#receive(f);
            },
            drain: () => this.#wire.flush(),
            close: () => this.#connectionLost(),
            error: () => this.#connectionLost(),
            connectError: () => {},
          },
        });
        break;
      } catch (e) {
        lastError = (e as Error).message;
      }
      if (performance.now() + delay > deadline) {
        throw new TimeoutError(`rank ${this.rank} could not reach the store of rank 0 at ${this.addr}:${this.port} within ${timeoutMs} ms ` +
          `(last error: ${lastError}); is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?`, { code: "E_TIMEOUT", op });
      }
      await Bun.sleep(delay);
      delay = Math.min(delay * 2, 500);
    }
    this.#wire.attach(this.#socket);
    const reply = await this.#request(op, frame(Op.HELLO, this.rank, String(this.worldSize)), this.rank, Math.max(1, deadline - performance.now()),
      () => `rank ${this.rank} connected to ${this.addr}:${this.port} but got no answer from the store within ${timeoutMs} ms`);
    if (reply.op === Op.FAIL) {
      this.#socket.end();
      throw new ArgumentError(op, "rank", decoder.decode(reply.value));
    }
  }

  #receive(f: Frame): void {
    if (f.op === Op.DEAD) {
      if (!this.#dead.includes(f.id)) this.#dead.push(f.id);
      const err = this.#deadError("Store");
      for (const [id, r] of this.#requests) {
        this.#requests.delete(id);
        r.reject(err);
      }
      return;
    }
    const r = this.#requests.get(f.id);
    if (!r) return; // a reply to a request that already timed out
    this.#requests.delete(f.id);
    r.resolve(f);
  }

  #connectionLost(): void {
    if (this.#closed || this.#lost) return;
    this.#lost = `rank ${this.rank} lost its connection to the store of rank 0 at ${this.addr}:${this.port} (did rank 0's process die?)`;
    for (const [id, r] of this.#requests) {
      this.#requests.delete(id);
      r.reject(new PeerError(this.#lost, { code: "E_PEER", op: "Store" }));
    }
  }

  #deadError(op: string): PeerError {
    return new PeerError(`${listRanks(this.#dead)} left the store without closing it (did the process die?); ` +
      `rank ${this.rank} cannot complete collective waits`, { code: "E_PEER", op });
  }

  #usable(op: string): void {
    if (this.#closed) throw new WeftError("the store was used after close()", { code: "E_DISPOSED", op });
    if (this.#lost) throw new PeerError(this.#lost, { code: "E_PEER", op });
  }

  /** Sends one request and resolves with its reply; rejects with TimeoutError(describe()) after ms. */
  #request(op: string, bytes: Uint8Array, id: number, ms: number, describe: () => string): Promise<Frame> {
    return new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#requests.delete(id);
        reject(new TimeoutError(describe(), { code: "E_TIMEOUT", op }));
      }, ms);
      this.#requests.set(id, {
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.#wire.send(bytes);
    });
  }

  #id(): number {
    const id = this.#nextId;
    this.#nextId = (this.#nextId % 0xfffffff0) + 1;
    return id;
  }

  async set(key: string, value: Uint8Array | string): Promise<void> {
    const op = "Store.set";
    checkKey(op, key);
    const bytes = toBytes(value, op);
    this.#usable(op);
    const id = this.#id();
    await this.#request(op, frame(Op.SET, id, key, bytes), id, this.defaultTimeoutMs,
      () => `rank ${this.rank}: the store did not acknowledge set('${key}') within ${this.defaultTimeoutMs} ms`);
  }

  protected async waitKeys(op: string, keys: string[], timeoutMs: number, values: boolean,
    describe: (missing: string[]) => string): Promise<(Uint8Array | undefined)[]> {
    this.#usable(op);
    if (this.#dead.length > 0) throw this.#deadError(op);
    const out: (Uint8Array | undefined)[] = new Array(keys.length);
    const missing = new Set(keys);
    const ids: number[] = [];
    const deadline = performance.now() + timeoutMs;
    // One WATCH per key, all in flight at once; the first failure (timeout, dead peer) wins.
    try {
      await Promise.all(keys.map((key, i) => {
        const id = this.#id();
        ids.push(id);
        return this.#request(op, frame(Op.WATCH, id, key), id, Math.max(1, deadline - performance.now()),
          () => describe(keys.filter((k) => missing.has(k)))).then((f) => {
          missing.delete(key);
          if (values) out[i] = f.value;
        });
      }));
    } catch (e) {
      // Siblings of a failed wait are abandoned: their late replies are ignored.
      for (const id of ids) this.#requests.delete(id);
      throw e;
    }
    return out;
  }

  /** Leaves the store. On rank 0 this also waits (bounded) for the others to leave, then stops hosting. */
  async close(): Promise<void> {
    if (this.#closed) return;
    const socket = this.#socket;
    if (socket && !this.#lost) {
      const id = this.#id();
      try {
        await this.#request("Store.close", frame(Op.BYE, id, ""), id, Math.min(this.defaultTimeoutMs, 5000), () => "no answer to BYE");
      } catch {
        // The host is gone or slow: leaving anyway is what close() is for.
      }
    }
    this.#closed = true;
    socket?.end();
    await this.#host?.stop(this.defaultTimeoutMs);
  }
}

// ---- in-process store (Communicator.local) ----------------------------------------------------------------

interface LocalShared {
  data: Map<string, Uint8Array>;
  watchers: Map<string, (() => void)[]>;
}

/** The store interface for several ranks in one process: no sockets, one shared map. */
export class LocalStore extends StoreBase {
  readonly rank: number;
  readonly worldSize: number;
  readonly #shared: LocalShared;
  #closed = false;

  private constructor(rank: number, worldSize: number, shared: LocalShared, timeoutMs: number) {
    super(timeoutMs);
    this.rank = rank;
    this.worldSize = worldSize;
    this.#shared = shared;
  }

  /** One store per rank of a group of `worldSize` ranks, all sharing one map. */
  static group(worldSize: number, opts: { timeoutMs?: number } = {}): LocalStore[] {
    const op = "LocalStore.group";
    if (!Number.isInteger(worldSize) || worldSize < 1) throw new ArgumentError(op, "worldSize", `must be a positive integer (got ${worldSize})`);
    const timeoutMs = checkTimeout(op, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const shared: LocalShared = { data: new Map(), watchers: new Map() };
    return Array.from({ length: worldSize }, (_, r) => new LocalStore(r, worldSize, shared, timeoutMs));
  }

  async set(key: string, value: Uint8Array | string): Promise<void> {
    const op = "Store.set";
    checkKey(op, key);
    const bytes = toBytes(value, op);
    if (this.#closed) throw new WeftError("the store was used after close()", { code: "E_DISPOSED", op });
    this.#shared.data.set(key, bytes.slice());
    const ws = this.#shared.watchers.get(key);
    this.#shared.watchers.delete(key);
    ws?.forEach((w) => w());
  }

  protected async waitKeys(op: string, keys: string[], timeoutMs: number, values: boolean,
    describe: (missing: string[]) => string): Promise<(Uint8Array | undefined)[]> {
    if (this.#closed) throw new WeftError("the store was used after close()", { code: "E_DISPOSED", op });
    const { data, watchers } = this.#shared;
    const missing = keys.filter((k) => !data.has(k));
    if (missing.length > 0) {
      await new Promise<void>((resolve, reject) => {
        let left = new Set(missing);
        const timer = setTimeout(() => reject(new TimeoutError(describe([...left]), { code: "E_TIMEOUT", op })), timeoutMs);
        for (const k of missing) {
          const list = watchers.get(k) ?? [];
          list.push(() => {
            left.delete(k);
            if (left.size === 0) {
              clearTimeout(timer);
              resolve();
            }
          });
          watchers.set(k, list);
        }
        left = new Set(missing.filter((k) => !data.has(k)));
      });
    }
    return keys.map((k) => (values ? data.get(k) : undefined));
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
