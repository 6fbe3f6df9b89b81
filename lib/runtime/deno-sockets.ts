// deno-sockets.ts — the store's TCP (sockets.ts) over Deno.listen / Deno.connect. Deno's reads and
// writes are Promises: one read loop per connection hands chunks to data(), and one write pump
// drains the queue, a write at a time.

import { coalesce, SocketError, type Connection, type ConnectionHandlers, type Sockets } from "./sockets.ts";

// The part of Deno's API used here (tsconfig loads Bun's types, not Deno's).
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

/** The largest chunk one read hands over: a store frame of a few MiB arrives in few pieces. */
const READ_BYTES = 1 << 20;

class DenoConnection implements Connection {
  readonly #conn: DenoConn;
  #queue: Uint8Array[] = [];
  #pumping = false;
  #ending = false;
  #closed = false;

  constructor(conn: DenoConn) {
    this.#conn = conn;
  }

  write(parts: Uint8Array[]): void {
    if (this.#closed || this.#ending) return;
    this.#queue.push(...coalesce(parts));
    if (!this.#pumping) void this.#pump();
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const head = this.#queue.shift()!;
        for (let at = 0; at < head.length && !this.#closed;) at += await this.#conn.write(head.subarray(at));
      }
      if (this.#ending && !this.#closed) await this.#conn.closeWrite();
    } catch {
      this.destroy(); // the peer is gone: the read loop reports close
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
      this.#conn.close();
    } catch {
      // closed already
    }
  }

  /** Reads until the peer closes or the connection is destroyed, then reports close once. */
  async serve(handlers: ConnectionHandlers): Promise<void> {
    const buf = new Uint8Array(READ_BYTES);
    try {
      for (;;) {
        const n = await this.#conn.read(buf);
        if (n === null) break;
        handlers.data(buf.slice(0, n));
      }
    } catch {
      // reset by the peer, or closed here
    }
    this.destroy();
    handlers.close();
  }
}

function socketError(e: unknown): SocketError {
  const err = e as Error & { code?: unknown };
  const message = err?.message ?? String(e);
  // Deno gives most errors the system's code; a failed name lookup comes without one.
  const code = typeof err?.code === "string" ? err.code : /lookup address/.test(message) ? "ENOTFOUND" : "EUNKNOWN";
  return new SocketError(message, code);
}

function attach(conn: DenoConn, open: (c: Connection) => ConnectionHandlers): DenoConnection {
  conn.setNoDelay(true);
  const c = new DenoConnection(conn);
  void c.serve(open(c));
  return c;
}

export function denoSockets(net: DenoNet): Sockets {
  return {
    listen(hostname, port, accept) {
      let l: ReturnType<DenoNet["listen"]>;
      try {
        l = net.listen({ hostname, port });
      } catch (e) {
        throw socketError(e);
      }
      void (async () => {
        try {
          for await (const conn of l) attach(conn, accept);
        } catch {
          // the listener was stopped
        }
      })();
      return { port: l.addr.port, stop: () => l.close() };
    },
    async connect(hostname, port, open) {
      let conn: DenoConn;
      try {
        conn = await net.connect({ hostname, port });
      } catch (e) {
        throw socketError(e);
      }
      return attach(conn, open);
    },
  };
}
