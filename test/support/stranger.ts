// stranger.ts — a process on the same host that is not part of the job: raw TCP to the store,
// frames in the store's wire format written by hand (u32 LE body length | u8 op | u32 LE id |
// u16 LE key length | key | value), no token, over the runtime adapter's sockets (so it runs under
// Bun and Deno). Used by test/bootstrap/stranger.test.ts.
import { runtime } from "../../lib/runtime/index.ts";

export const RawOp = { HELLO: 1, SET: 2, WATCH: 3, BYE: 4, OK: 10, VALUE: 11, DEAD: 13, CHALLENGE: 20, AUTH: 21, WELCOME: 22 } as const;

export function rawFrame(op: number, id: number, key = "", value: Uint8Array = new Uint8Array(0)): Uint8Array {
  const k = new TextEncoder().encode(key);
  const out = new Uint8Array(4 + 7 + k.length + value.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, out.length - 4, true);
  dv.setUint8(4, op);
  dv.setUint32(5, id, true);
  dv.setUint16(9, k.length, true);
  out.set(k, 11);
  out.set(value, 11 + k.length);
  return out;
}

export interface Stranger {
  /** Queues bytes; they go out as the socket takes them. */
  send(bytes: Uint8Array): void;
  /** Resolves with the ms from connect to the store hanging up. */
  closed: Promise<number>;
  /** Bytes received so far. */
  received(): number;
  end(): void;
}

export async function stranger(port: number, host = "127.0.0.1"): Promise<Stranger> {
  const t0 = performance.now();
  let resolveClosed!: (ms: number) => void;
  const closed = new Promise<number>((r) => (resolveClosed = r));
  let got = 0;
  // The adapter queues what the kernel does not take yet, and reports close once, however it ended.
  const socket = await runtime.sockets.connect(host, port, () => ({
    data: (chunk) => void (got += chunk.length),
    close: () => resolveClosed(performance.now() - t0),
  }));
  return {
    send: (bytes) => socket.write([bytes]),
    closed,
    received: () => got,
    end: () => socket.end(),
  };
}

/** Resolves with `p`'s value, or with `fallback` after `ms`. */
export function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  return Promise.race([p, new Promise<F>((r) => setTimeout(() => r(fallback), ms))]);
}
