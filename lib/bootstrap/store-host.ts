// store-host.ts — rank 0's side of the TCP store: the key-value map, the watches, and the rule
// that nothing is served to a connection before it has proven it holds the job token.
//
// A connection starts unauthenticated: its frames are capped at HANDSHAKE_FRAME_BYTES, it has
// AUTH_DEADLINE_MS to answer the challenge, and any frame other than AUTH drops it. A proven
// connection claims its rank; a rank is claimed once per job (a second claim, while the first is
// connected or after it left, is refused), so a late or repeated claim cannot displace the real
// rank, and a rank that reconnects after a drop is told why it cannot. stop() drops every
// connection that holds no rank at once and waits, bounded, only for the ranks.
import {
  encodeFrame, FRAME_BYTES, FrameError, FrameReader, HANDSHAKE_FRAME_BYTES, messageBytes, Op, PROTOCOL_VERSION, type Frame,
} from "./frames.ts";
import { NONCE_BYTES, nonce, proof, PROOF_BYTES, proofMatches } from "./handshake.ts";
import { listen, type Connection, type ConnectionHandlers, type Listener } from "./socket.ts";
import { MAX_VALUE_BYTES } from "./store-api.ts";

/** How long a new connection may take to answer the challenge. A real rank answers within one
 * round trip of connecting; 5 s leaves room for a loaded host, and bounds what a silent stranger
 * holds (one socket, one capped frame). */
export const AUTH_DEADLINE_MS = 5000;

interface Peer {
  conn: Connection;
  reader: FrameReader;
  /** -1 until the handshake has claimed a rank. */
  rank: number;
  hostNonce: Uint8Array;
  bye: boolean;
  watches: Map<string, number[]>;
  deadline: ReturnType<typeof setTimeout> | undefined;
}

export interface StoreHostOptions {
  worldSize: number;
  bindAddr: string;
  port: number;
  /** "" = unauthenticated (the proofs still run, with an empty key). */
  token: string;
}

export class StoreHost {
  readonly #data = new Map<string, Uint8Array>();
  readonly #peers = new Set<Peer>();
  readonly #byRank = new Map<number, Peer>();
  /** Every rank that ever joined; a rank joins once per job. */
  readonly #claimed = new Set<number>();
  readonly #worldSize: number;
  readonly #token: string;
  readonly #listener: Listener;
  #dead: number[] = [];
  #stopping = false;
  #ranksGone: (() => void) | undefined;

  /** Listens at once; throws SocketError when it cannot (EADDRINUSE, EADDRNOTAVAIL). */
  constructor(opts: StoreHostOptions) {
    this.#worldSize = opts.worldSize;
    this.#token = opts.token;
    this.#listener = listen(opts.bindAddr, opts.port, (conn) => this.#accept(conn));
  }

  get port(): number {
    return this.#listener.port;
  }

  /** Connections open now, ranks or not (for tests and diagnostics). */
  get connections(): number {
    return this.#peers.size;
  }

  #accept(conn: Connection): ConnectionHandlers {
    const p: Peer = {
      conn, reader: new FrameReader(HANDSHAKE_FRAME_BYTES), rank: -1, hostNonce: nonce(), bye: false, watches: new Map(), deadline: undefined,
    };
    this.#peers.add(p);
    if (this.#stopping) {
      this.#drop(p);
    } else {
      p.deadline = setTimeout(() => this.#drop(p), AUTH_DEADLINE_MS);
      conn.write(encodeFrame(Op.CHALLENGE, PROTOCOL_VERSION, "", p.hostNonce));
    }
    return {
      data: (chunk) => {
        try {
          p.reader.push(chunk, (f) => this.#frame(p, f));
        } catch (e) {
          if (!(e instanceof FrameError)) throw e;
          this.#drop(p);
        }
      },
      close: () => this.#gone(p),
    };
  }

  /** Hangs up now and ignores whatever else the connection sent. */
  #drop(p: Peer): void {
    p.reader.stop();
    p.conn.destroy();
  }

  #frame(p: Peer, f: Frame): void {
    if (p.rank < 0) {
      if (f.op === Op.AUTH) this.#auth(p, f);
      else this.#drop(p);
      return;
    }
    switch (f.op) {
      case Op.SET: {
        if (f.key === "" || f.value.length > MAX_VALUE_BYTES) {
          p.conn.write(encodeFrame(Op.FAIL, f.id, "", messageBytes(`set needs a key and at most ${MAX_VALUE_BYTES} bytes of value`)));
          return;
        }
        this.#data.set(f.key, f.value);
        for (const other of this.#peers) {
          const ids = other.watches.get(f.key);
          if (!ids) continue;
          other.watches.delete(f.key);
          for (const id of ids) other.conn.write(encodeFrame(Op.VALUE, id, "", f.value));
        }
        p.conn.write(encodeFrame(Op.OK, f.id));
        return;
      }
      case Op.WATCH: {
        const v = this.#data.get(f.key);
        if (v !== undefined) p.conn.write(encodeFrame(Op.VALUE, f.id, "", v));
        else {
          const ids = p.watches.get(f.key) ?? [];
          ids.push(f.id);
          p.watches.set(f.key, ids);
        }
        return;
      }
      case Op.BYE:
        p.bye = true;
        p.conn.write(encodeFrame(Op.OK, f.id));
        return;
      default:
        this.#drop(p);
    }
  }

  #auth(p: Peer, f: Frame): void {
    const rank = f.id;
    const world = /^[0-9]{1,10}$/.test(f.key) ? Number(f.key) : -1;
    if (f.value.length !== NONCE_BYTES + PROOF_BYTES || world < 0) return this.#drop(p);
    const clientNonce = f.value.subarray(0, NONCE_BYTES);
    const want = proof(this.#token, "client", p.hostNonce, clientNonce, rank, world);
    if (!proofMatches(f.value.subarray(NONCE_BYTES), want)) {
      p.reader.stop();
      p.conn.write(encodeFrame(Op.DENIED, 0, "", messageBytes("the store refused the connection: it needs the job's token")));
      p.conn.end();
      return;
    }
    const refusal = world !== this.#worldSize ? `rank ${rank} says the world size is ${world} but rank 0 says ${this.#worldSize}`
      : rank >= this.#worldSize ? `rank ${rank} is out of range for world size ${this.#worldSize}`
      : this.#byRank.has(rank) ? `rank ${rank} is already connected: two processes claim the same rank`
      : this.#claimed.has(rank) ? `rank ${rank} already joined this job and left it: a rank joins a job once (restart the job)`
      : "";
    const hostProof = proof(this.#token, "host", p.hostNonce, clientNonce, rank, world);
    const reply = new Uint8Array(PROOF_BYTES + 1 + (refusal ? messageBytes(refusal).length : 0));
    reply.set(hostProof);
    reply[PROOF_BYTES] = refusal ? 1 : 0;
    if (refusal) reply.set(messageBytes(refusal), PROOF_BYTES + 1);
    p.conn.write(encodeFrame(Op.WELCOME, rank, "", reply));
    clearTimeout(p.deadline);
    p.deadline = undefined;
    if (refusal) {
      p.reader.stop();
      p.conn.end();
      return;
    }
    p.rank = rank;
    p.reader.cap = FRAME_BYTES;
    this.#claimed.add(rank);
    this.#byRank.set(rank, p);
    // A rank that joins after another died learns about it at once.
    for (const r of this.#dead) p.conn.write(encodeFrame(Op.DEAD, r));
  }

  #gone(p: Peer): void {
    if (!this.#peers.delete(p)) return;
    clearTimeout(p.deadline);
    if (p.rank >= 0) {
      this.#byRank.delete(p.rank);
      if (!p.bye) {
        this.#dead.push(p.rank);
        for (const other of this.#byRank.values()) other.conn.write(encodeFrame(Op.DEAD, p.rank));
      }
    }
    if (this.#byRank.size === 0) this.#ranksGone?.();
  }

  /** Stops accepting, drops every connection that holds no rank at once, then waits (at most
   * timeoutMs) for the ranks to leave and closes whatever is left. */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    this.#listener.stop();
    for (const p of this.#peers) if (p.rank < 0) this.#drop(p);
    if (this.#byRank.size > 0 && timeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, timeoutMs);
        this.#ranksGone = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    for (const p of this.#peers) this.#drop(p);
  }
}
