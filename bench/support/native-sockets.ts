// native-sockets.ts — the store's socket interface (lib/bootstrap/socket.ts) over each runtime's own
// TCP API, Bun.listen/Bun.connect and Deno.listen/Deno.connect: the alternatives to node:net that
// bench/runtimes.ts measures. Bench code only; the product uses node:net (bench/DECISIONS.md "The
// store's sockets are node:net in both runtimes").
import type { Connection, ConnectionHandlers, Listener } from "../../lib/bootstrap/socket.ts";

export interface SocketApi {
  listen(hostname: string, port: number, accept: (c: Connection) => ConnectionHandlers): Promise<Listener>;
  connect(hostname: string, port: number, open: (c: Connection) => ConnectionHandlers): Promise<Connection>;
}

/** Parts below this size are joined into one write: one segment for a small request. */
const JOIN_BELOW = 64 << 10;

function joined(parts: Uint8Array[]): Uint8Array[] {
  const total = parts.reduce((a, p) => a + p.length, 0);
  if (parts.length < 2 || total >= JOIN_BELOW) return parts.filter((p) => p.length > 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return [out];
}

// ---- Bun ------------------------------------------------------------------------------------------

interface BunSocket {
  write(b: Uint8Array): number;
  end(): void;
  terminate(): void;
  setNoDelay?(on: boolean): void;
  data: { conn: BunConnection; handlers: ConnectionHandlers } | undefined;
}

class BunConnection implements Connection {
  #queue: Uint8Array[] = [];
  #ending = false;
  #closed = false;
  constructor(readonly socket: BunSocket) {}

  write(parts: Uint8Array[]): void {
    if (this.#closed || this.#ending) return;
    const idle = this.#queue.length === 0;
    this.#queue.push(...joined(parts));
    if (idle) this.flush();
  }

  /** Writes until the socket pushes back; Bun calls drain when it takes more. */
  flush(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const n = this.socket.write(head);
      if (n < head.length) {
        if (n > 0) this.#queue[0] = head.subarray(n);
        return;
      }
      this.#queue.shift();
    }
    if (this.#ending && !this.#closed) this.socket.end();
  }

  end(): void {
    if (this.#closed || this.#ending) return;
    this.#ending = true;
    if (this.#queue.length === 0) this.socket.end();
  }

  destroy(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    this.socket.terminate();
  }

  closed(): void {
    this.#closed = true;
    this.#queue = [];
  }
}

function bunHandlers(open: (c: Connection) => ConnectionHandlers, opened?: (c: BunConnection) => void) {
  const close = (s: BunSocket) => {
    const slot = s.data;
    if (!slot) return;
    s.data = undefined;
    slot.conn.closed();
    slot.handlers.close();
  };
  return {
    binaryType: "uint8array" as const,
    open: (s: BunSocket) => {
      s.setNoDelay?.(true);
      const conn = new BunConnection(s);
      s.data = { conn, handlers: { data() {}, close() {} } };
      s.data.handlers = open(conn);
      opened?.(conn);
    },
    data: (s: BunSocket, chunk: Uint8Array) => s.data?.handlers.data(chunk),
    drain: (s: BunSocket) => s.data?.conn.flush(),
    end: (s: BunSocket) => s.end(),
    close,
    error: close,
  };
}

export const bunSockets: SocketApi = {
  async listen(hostname, port, accept) {
    const l = Bun.listen({ hostname, port, exclusive: true, socket: bunHandlers(accept) as never });
    return { port: l.port, stop: () => l.stop(false) };
  },
  async connect(hostname, port, open) {
    let conn: BunConnection | undefined;
    await Bun.connect({ hostname, port, socket: { ...bunHandlers(open, (c) => (conn = c)), connectError: () => {} } as never });
    return conn!;
  },
};

// ---- Deno -----------------------------------------------------------------------------------------

interface DenoConn {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  closeWrite(): Promise<void>;
  close(): void;
  setNoDelay(on: boolean): void;
}
interface DenoNet {
  listen(o: { hostname: string; port: number }): AsyncIterable<DenoConn> & { addr: { port: number }; close(): void };
  connect(o: { hostname: string; port: number }): Promise<DenoConn>;
}
const denoNet = () => (globalThis as unknown as { Deno: DenoNet }).Deno;

class DenoConnection implements Connection {
  #queue: Uint8Array[] = [];
  #pumping = false;
  #ending = false;
  #closed = false;
  constructor(readonly conn: DenoConn) {}

  write(parts: Uint8Array[]): void {
    if (this.#closed || this.#ending) return;
    this.#queue.push(...joined(parts));
    if (!this.#pumping) void this.#pump();
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const head = this.#queue.shift()!;
        for (let at = 0; at < head.length;) at += await this.conn.write(head.subarray(at));
      }
      if (this.#ending && !this.#closed) await this.conn.closeWrite();
    } catch {
      this.destroy();
    } finally {
      this.#pumping = false;
    }
  }

  end(): void {
    if (this.#closed || this.#ending) return;
    this.#ending = true;
    if (!this.#pumping) void this.#pump();
  }

  destroy(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    try {
      this.conn.close();
    } catch {
      // already closed by the reader
    }
  }

  /** Reads until the peer closes, then reports close once. */
  async serve(handlers: ConnectionHandlers): Promise<void> {
    const buf = new Uint8Array(1 << 20);
    try {
      for (;;) {
        const n = await this.conn.read(buf);
        if (n === null) break;
        handlers.data(buf.slice(0, n));
      }
    } catch {
      // reset or closed locally: close below
    }
    this.destroy();
    handlers.close();
  }
}

function denoAttach(conn: DenoConn, open: (c: Connection) => ConnectionHandlers): DenoConnection {
  conn.setNoDelay(true);
  const c = new DenoConnection(conn);
  void c.serve(open(c));
  return c;
}

export const denoSockets: SocketApi = {
  async listen(hostname, port, accept) {
    const l = denoNet().listen({ hostname, port });
    void (async () => {
      try {
        for await (const conn of l) denoAttach(conn, accept);
      } catch {
        // listener closed
      }
    })();
    return { port: l.addr.port, stop: () => l.close() };
  },
  async connect(hostname, port, open) {
    return denoAttach(await denoNet().connect({ hostname, port }), open);
  },
};
