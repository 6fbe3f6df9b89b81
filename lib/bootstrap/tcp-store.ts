// tcp-store.ts — Store, the TCP rendezvous: rank 0 hosts it (store-host.ts) and every rank, rank 0
// included, joins it as a client (join.ts).
//
// Where it listens: bindAddr when given; loopback when every rank runs on this host (sameHost, or
// a loopback addr); else addr, the interface the other ranks dial. Which token: the token option
// (WEFT_STORE_TOKEN through storeOptionsFromEnv); else, for a store only this host can reach, one
// rank 0 makes and shares through a private file (token-file.ts); else none, with one warning.
//
// Every wait is bounded. Reaching rank 0 has its own bound (connectTimeoutMs) and says what is
// wrong while it waits; a wait that runs out throws TimeoutError naming the ranks or keys that never
// arrived; a rank whose connection drops without close() (a dead process) fails every pending and
// later wait of the others with PeerError naming that rank.
//
// The same event reaches onRankLost's listeners (the communicator's failure watchdog, lib/comm/
// watchdog.ts) at once: rank 0's host sends DEAD to every connected rank, itself included, when a
// rank's connection drops without BYE; a rank whose own connection to rank 0 drops reports rank 0.
// Only the host, after proving it holds the token, can send DEAD, and only a connection that proved
// it can claim a rank, so a stranger can neither forge a notice nor be the subject of one. A clean
// close() says BYE first, so it reports nothing, and nothing is reported once close() has begun.
import { ArgumentError, DisposedError, PeerError, TimeoutError } from "../errors.ts";
import { encodeFrame, Op, messageText, type Frame } from "./frames.ts";
import { newToken } from "./handshake.ts";
import { join, type Link } from "./join.ts";
import { SocketError } from "./socket.ts";
import {
  checkBindAddr, checkKey, checkTimeout, checkToken, DEFAULT_TIMEOUT_MS, listRanks, StoreBase, toBytes, type RankLostListener,
} from "./store-api.ts";
import { StoreHost } from "./store-host.ts";
import { publishToken, readToken, tokenFilePath, withdrawToken } from "./token-file.ts";

export interface StoreOptions {
  rank: number;
  worldSize: number;
  /** Host of rank 0's store. */
  addr: string;
  /** Port of rank 0's store. Rank 0 may pass 0 to take a free port, then read `store.port`. */
  port: number;
  /** Default bound of every wait, in ms (default 120 000). */
  timeoutMs?: number;
  /** How long a rank keeps trying to reach rank 0's store, in ms (default: the smaller of timeoutMs
   * and 60 000). While it tries, a line on stderr after 5 s and every 10 s says what fails. */
  connectTimeoutMs?: number;
  /** The job's shared secret (16+ characters, the same on every rank). Without one, a store that
   * only this host can reach makes its own and shares it through a private file; any other store
   * runs unauthenticated, with one warning. */
  token?: string;
  /** Every rank runs on this host: the store listens on loopback, and every rank dials loopback. */
  sameHost?: boolean;
  /** Rank 0 only: the address to listen on (default: loopback for a one-host job, else addr).
   * "0.0.0.0" or "::" listens on every interface. */
  bindAddr?: string;
}

/** The default connect bound: long enough for rank 0 to start (process start, imports), short
 * enough that a wrong MASTER_PORT fails within a minute rather than after the 120 s wait bound. */
const CONNECT_TIMEOUT_MS = 60_000;
const FIRST_PROGRESS_MS = 5000;
const PROGRESS_EVERY_MS = 10_000;
/** Bound of one handshake once TCP connected (a real store answers within a round trip). */
const HANDSHAKE_MS = 10_000;

function isLoopback(addr: string): boolean {
  return addr === "localhost" || addr === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(addr);
}

/** The loopback address a one-host job listens on and dials: addr itself when it is one. */
function loopbackOf(addr: string): string {
  return isLoopback(addr) && addr !== "localhost" ? addr : "127.0.0.1";
}

let warnedUnauthenticated = false;

interface Request {
  resolve(f: Frame): void;
  reject(e: Error): void;
}

/** The TCP rendezvous store. Rank 0 hosts it; every rank, rank 0 included, is a client. */
export class Store extends StoreBase {
  readonly rank: number;
  readonly worldSize: number;
  /** The port the store listens on (rank 0's choice when it was given port 0). */
  readonly port: number;
  /** The address this rank dialled. */
  readonly addr: string;
  readonly #host: StoreHost | undefined;
  readonly #ownToken: string | undefined;
  readonly #requests = new Map<number, Request>();
  readonly #lostListeners = new Set<RankLostListener>();
  #link: Link | undefined;
  #nextId = 1;
  #dead: number[] = [];
  #lost: string | undefined;
  #closing: Promise<void> | undefined;

  private constructor(rank: number, worldSize: number, addr: string, port: number, timeoutMs: number, host?: StoreHost, ownToken?: string) {
    super(timeoutMs);
    this.rank = rank;
    this.worldSize = worldSize;
    this.addr = addr;
    this.port = port;
    this.#host = host;
    this.#ownToken = ownToken;
  }

  /** Rank 0 starts the host; every rank joins it (retrying while rank 0 is not up yet). */
  static async connect(opts: StoreOptions): Promise<Store> {
    const op = "Store.connect";
    const { rank, worldSize, addr, port } = opts ?? ({} as StoreOptions);
    if (!Number.isInteger(worldSize) || worldSize < 1 || worldSize > 0x7fffffff) {
      throw new ArgumentError(op, "worldSize", `must be an integer in [1, 2147483647] (got ${worldSize})`);
    }
    if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new ArgumentError(op, "rank", `must be an integer in [0, ${worldSize}) (got ${rank})`);
    checkBindAddr(op, "addr", addr);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ArgumentError(op, "port", `must be a TCP port in [0, 65535] (got ${port})`);
    if (port === 0 && rank !== 0) throw new ArgumentError(op, "port", "must be rank 0's real port on ranks other than 0 (got 0)");
    const timeoutMs = checkTimeout(op, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const connectMs = checkTimeout(op, opts.connectTimeoutMs ?? Math.min(timeoutMs, CONNECT_TIMEOUT_MS), "connectTimeoutMs");
    const token = opts.token === undefined ? undefined : checkToken(op, "token", opts.token);
    if (opts.sameHost !== undefined && typeof opts.sameHost !== "boolean") throw new ArgumentError(op, "sameHost", `must be a boolean (got ${opts.sameHost})`);
    if (opts.bindAddr !== undefined) {
      checkBindAddr(op, "bindAddr", opts.bindAddr);
      if (rank !== 0) throw new ArgumentError(op, "bindAddr", "is for rank 0, which hosts the store");
    }
    const local = opts.sameHost === true || isLoopback(addr);
    if (rank !== 0) {
      const store = new Store(rank, worldSize, local ? loopbackOf(addr) : addr, port, timeoutMs);
      await store.#join(connectMs, () => token ?? (local ? readToken(port) : ""), token === undefined && local);
      return store;
    }

    const bind = opts.bindAddr ?? (local ? loopbackOf(addr) : addr);
    // One rank: nobody else may join, so any secret will do. One host: a secret shared by file.
    const own = token === undefined && (worldSize === 1 || local) ? newToken() : undefined;
    const secret = token ?? own ?? "";
    let host: StoreHost;
    try {
      host = new StoreHost({ worldSize, bindAddr: bind, port, token: secret });
    } catch (e) {
      throw listenError(op, e, bind, port);
    }
    const shared = own !== undefined && worldSize > 1;
    const store = new Store(0, worldSize, bind === "0.0.0.0" ? "127.0.0.1" : bind === "::" ? "::1" : bind, host.port, timeoutMs, host, shared ? own : undefined);
    try {
      if (shared) {
        try {
          publishToken(host.port, own!);
        } catch (e) {
          throw new ArgumentError(op, "token", `is needed: rank 0 could not share one through ${tokenFilePath(host.port)} ` +
            `(${(e as Error).message}); set WEFT_STORE_TOKEN alike on every rank`);
        }
      }
      if (secret === "" && !warnedUnauthenticated) {
        warnedUnauthenticated = true;
        console.error(`weft: the rendezvous store on ${bind}:${host.port} is unauthenticated: any process that can reach it can join ` +
          "the job or forge what ranks exchange. Set WEFT_STORE_TOKEN (16+ characters, the same on every rank) to require a token.");
      }
      await store.#join(connectMs, () => secret, false);
    } catch (e) {
      await host.stop(0);
      if (shared) withdrawToken(host.port, own!);
      throw e;
    }
    return store;
  }

  /** Joins the store, retrying until connectMs while nothing listens, nothing answers, or (token
   * from a file) the token is missing or stale; `tokenNow` is asked at each attempt's challenge. */
  async #join(connectMs: number, tokenNow: () => string | undefined, fromFile: boolean): Promise<void> {
    const op = "Store.connect";
    const where = `${this.addr}:${this.port}`;
    const t0 = performance.now();
    const deadline = t0 + connectMs;
    let nextProgress = t0 + FIRST_PROGRESS_MS;
    let delay = 10;
    let problem = "";
    for (;;) {
      try {
        const o = await join(this.addr, this.port, this.rank, this.worldSize, tokenNow,
          Math.max(1, Math.min(HANDSHAKE_MS, deadline - performance.now())));
        if (o.kind === "joined") {
          this.#link = o.link;
          o.link.route((f) => this.#receive(f), (why) => this.#connectionLost(why));
          return;
        }
        if (o.kind === "refused") throw new ArgumentError(op, "rank", o.message);
        if (o.kind === "impostor") {
          throw new PeerError(`the process listening at ${where} answered as a weft store but could not prove it holds the job token: ` +
            "it is not this job's rank 0 (is MASTER_PORT right?)", { code: "E_PEER", op });
        }
        if (o.kind === "denied" && !fromFile) {
          throw new ArgumentError(op, "token", tokenNow() === ""
            ? `is required by the store at ${where}, and this rank has none: set WEFT_STORE_TOKEN alike on every rank`
            : `was refused by the store at ${where}: every rank needs the same job token (WEFT_STORE_TOKEN or the token option)`);
        }
        problem = o.kind === "no-token"
          ? `no token file ${tokenFilePath(this.port)}: rank 0 writes it when its store starts; if rank 0 runs on another host, ` +
            "set WEFT_STORE_TOKEN alike on every rank"
          : o.kind === "denied" ? `it refused the token in ${tokenFilePath(this.port)} (a file left by an earlier job?)` : `connected, but ${o.message}`;
      } catch (e) {
        if (!(e instanceof SocketError)) throw e;
        problem = e.code;
      }
      const now = performance.now();
      if (now >= deadline) {
        throw new TimeoutError(`rank ${this.rank} could not reach the store of rank 0 at ${where} within ${connectMs} ms ` +
          `(last error: ${problem}); is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?`, { code: "E_TIMEOUT", op });
      }
      if (now >= nextProgress) {
        console.error(`weft: rank ${this.rank} still cannot reach the store at ${where} (${problem}) after ${Math.round((now - t0) / 1000)} s; ` +
          `is rank 0 running, and are MASTER_ADDR/MASTER_PORT right? (gives up after ${Math.round(connectMs / 1000)} s)`);
        nextProgress += PROGRESS_EVERY_MS;
      }
      await new Promise((r) => setTimeout(r, Math.min(delay, deadline - now)));
      delay = Math.min(delay * 2, 500);
    }
  }

  /** Calls `listener(rank, reason)` for each rank gone without close(): at once for those already
   * known, then as each notice arrives (see the top of this file). Returns the unsubscribe
   * function. Nothing is reported once close() has begun. */
  onRankLost(listener: RankLostListener): () => void {
    const op = "Store.onRankLost";
    this.guard(op);
    if (typeof listener !== "function") throw new ArgumentError(op, "listener", `must be a function (got ${typeof listener})`);
    this.#lostListeners.add(listener);
    for (const r of this.#dead) this.#tell(listener, r, lostReason(r));
    if (this.#lost) this.#tell(listener, 0, this.#lost);
    return () => void this.#lostListeners.delete(listener);
  }

  #notifyLost(rank: number, reason: string): void {
    if (this.closed) return;
    for (const l of [...this.#lostListeners]) this.#tell(l, rank, reason);
  }

  /** A listener runs inside a socket callback, where a throw would end the process. */
  #tell(listener: RankLostListener, rank: number, reason: string): void {
    try {
      listener(rank, reason);
    } catch (e) {
      console.error(`weft: a Store.onRankLost listener threw on the notice for rank ${rank}: ${(e as Error)?.stack ?? e}`);
    }
  }

  #receive(f: Frame): void {
    if (f.op === Op.DEAD) {
      // The host names only ranks of this job other than the receiver; anything else is not a notice.
      if (f.id >= this.worldSize || f.id === this.rank) return;
      const known = this.#dead.includes(f.id);
      if (!known) this.#dead.push(f.id);
      this.#failAll(this.#deadError("Store"));
      if (!known) this.#notifyLost(f.id, lostReason(f.id));
      return;
    }
    const r = this.#requests.get(f.id);
    if (!r) return; // a reply to a request that already timed out
    this.#requests.delete(f.id);
    r.resolve(f);
  }

  #failAll(err: Error): void {
    for (const [id, r] of this.#requests) {
      this.#requests.delete(id);
      r.reject(err);
    }
  }

  #connectionLost(why: string): void {
    if (this.#lost) return;
    this.#lost = `rank ${this.rank} lost its connection to the store of rank 0 at ${this.addr}:${this.port} (${why}; did rank 0's process die?)`;
    this.#failAll(new PeerError(this.#lost, { code: "E_PEER", op: "Store" }));
    this.#notifyLost(0, this.#lost);
  }

  #deadError(op: string): PeerError {
    return new PeerError(`${listRanks(this.#dead)} left the store without closing it (did the process die?); ` +
      `rank ${this.rank} cannot complete collective waits`, { code: "E_PEER", op });
  }

  #usable(op: string): void {
    this.guard(op);
    if (this.#lost) throw new PeerError(this.#lost, { code: "E_PEER", op });
  }

  /** Sends one request and resolves with its reply; rejects with TimeoutError(describe()) after ms. */
  #request(op: string, parts: Uint8Array[], id: number, ms: number, describe: () => string): Promise<Frame> {
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
      this.#link!.write(parts);
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
    const reply = await this.#request(op, encodeFrame(Op.SET, id, key, bytes), id, this.defaultTimeoutMs,
      () => `rank ${this.rank}: the store did not acknowledge set('${key}') within ${this.defaultTimeoutMs} ms`);
    if (reply.op === Op.FAIL) throw new ArgumentError(op, "value", messageText(reply.value));
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
        return this.#request(op, encodeFrame(Op.WATCH, id, key), id, Math.max(1, deadline - performance.now()),
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

  /** Leaves the store; later calls throw DisposedError and pending ones reject with it. On rank 0
   * this also stops hosting: connections that hold no rank are dropped at once, ranks get up to
   * timeoutMs to leave. */
  close(): Promise<void> {
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    this.markClosed();
    this.#lostListeners.clear();
    this.#failAll(new DisposedError("Store.close", "Store"));
    const link = this.#link;
    if (link && !this.#lost) {
      const id = this.#id();
      try {
        await this.#request("Store.close", encodeFrame(Op.BYE, id), id, Math.min(this.defaultTimeoutMs, 5000), () => "no answer to BYE");
      } catch {
        // The host is gone or slow: leaving anyway is what close() is for.
      }
    }
    link?.end();
    await this.#host?.stop(this.defaultTimeoutMs);
    if (this.#ownToken !== undefined) withdrawToken(this.port, this.#ownToken);
  }
}

function lostReason(rank: number): string {
  return `rank ${rank} left the store without closing it (did the process die?)`;
}

/** A listen failure in words a user can act on. */
function listenError(op: string, e: unknown, bind: string, port: number): Error {
  if (!(e instanceof SocketError)) return e as Error;
  if (e.code === "EADDRINUSE") {
    return new ArgumentError(op, "port", `${port} is already in use on ${bind} (EADDRINUSE): another job or an earlier run still ` +
      `holds it. Pick another MASTER_PORT, or stop that process (\`ss -ltnp 'sport = :${port}'\` shows it)`);
  }
  if (e.code === "EADDRNOTAVAIL") {
    return new ArgumentError(op, "bindAddr", `'${bind}' is not an address of this host (EADDRNOTAVAIL), so rank 0 cannot listen there: ` +
      "MASTER_ADDR must name the host rank 0 runs on, or pass bindAddr (\"0.0.0.0\" listens on every interface)");
  }
  return new ArgumentError(op, "port", `rank 0 could not listen on ${bind}:${port} (${e.code}: ${e.message})`);
}
