// stranger.ts — a process on the same host that is not part of the job: raw TCP to the store,
// frames in the store's wire format written by hand (u32 LE body length | u8 op | u32 LE id |
// u16 LE key length | key | value), no token. Used by test/bootstrap/stranger.test.ts.
export const RawOp = { HELLO: 1, SET: 2, WATCH: 3, BYE: 4, OK: 10, VALUE: 11, CHALLENGE: 20, AUTH: 21, WELCOME: 22 } as const;

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
  const queue: Uint8Array[] = [];
  let got = 0;
  let isClosed = false;
  const pump = (s: { write(b: Uint8Array): number }) => {
    while (queue.length > 0 && !isClosed) {
      const n = s.write(queue[0]!);
      if (n < 0) return;
      if (n < queue[0]!.length) {
        queue[0] = queue[0]!.subarray(n);
        return;
      }
      queue.shift();
    }
  };
  const done = () => {
    if (isClosed) return;
    isClosed = true;
    resolveClosed(performance.now() - t0);
  };
  const socket = await Bun.connect({
    hostname: host,
    port,
    socket: {
      binaryType: "uint8array",
      data: (_s, chunk) => {
        got += chunk.length;
      },
      drain: (s) => pump(s),
      close: done,
      error: done,
      end: done,
    },
  });
  return {
    send: (bytes) => {
      queue.push(bytes);
      if (queue.length === 1) pump(socket);
    },
    closed,
    received: () => got,
    end: () => socket.end(),
  };
}

/** Resolves with `p`'s value, or with `fallback` after `ms`. */
export function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  return Promise.race([p, new Promise<F>((r) => setTimeout(() => r(fallback), ms))]);
}
