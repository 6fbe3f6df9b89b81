// bun-sockets.ts — the store's TCP (sockets.ts) over Bun.listen / Bun.connect. Bun's socket.write
// takes what the kernel takes now and says how much; the rest waits here until Bun calls drain.
import type { Socket } from "bun";

import { coalesce, SocketError, type Connection, type ConnectionHandlers, type Sockets } from "./sockets.ts";

interface Slot {
  conn: BunConnection;
  handlers: ConnectionHandlers;
}

class BunConnection implements Connection {
  readonly #socket: Socket<Slot>;
  #queue: Uint8Array[] = [];
  #ending = false;
  #closed = false;

  constructor(socket: Socket<Slot>) {
    this.#socket = socket;
  }

  write(parts: Uint8Array[]): void {
    if (this.#closed || this.#ending) return;
    const idle = this.#queue.length === 0;
    this.#queue.push(...coalesce(parts));
    if (idle) this.flush();
  }

  /** Writes queued bytes until the socket pushes back. */
  flush(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const n = this.#socket.write(head);
      if (n < head.length) {
        if (n > 0) this.#queue[0] = head.subarray(n);
        return;
      }
      this.#queue.shift();
    }
    if (this.#ending && !this.#closed) this.#socket.end();
  }

  end(): void {
    if (this.#closed || this.#ending) return;
    this.#ending = true;
    if (this.#queue.length === 0) this.#socket.end();
  }

  destroy(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    this.#socket.terminate();
  }

  closed(): void {
    this.#closed = true;
    this.#queue = [];
  }
}

function socketError(e: unknown): SocketError {
  const err = e as Error & { code?: unknown };
  return new SocketError(err?.message ?? String(e), typeof err?.code === "string" ? err.code : "EUNKNOWN");
}

/** Reports close once, however the socket ended (close and error may both come). */
function closeOnce(socket: Socket<Slot>): void {
  const slot = socket.data;
  if (!slot) return;
  socket.data = undefined as unknown as Slot;
  slot.conn.closed();
  slot.handlers.close();
}

function handlers(open: (c: Connection) => ConnectionHandlers, opened?: (c: BunConnection) => void) {
  return {
    binaryType: "uint8array" as const,
    open: (socket: Socket<Slot>) => {
      socket.setNoDelay(true);
      const conn = new BunConnection(socket);
      socket.data = { conn, handlers: { data() {}, close() {} } };
      socket.data.handlers = open(conn);
      opened?.(conn);
    },
    data: (socket: Socket<Slot>, chunk: Uint8Array) => socket.data?.handlers.data(chunk),
    drain: (socket: Socket<Slot>) => socket.data?.conn.flush(),
    end: (socket: Socket<Slot>) => void socket.end(),
    close: closeOnce,
    error: closeOnce,
  };
}

export const bunSockets: Sockets = {
  listen(hostname, port, accept) {
    try {
      const l = Bun.listen<Slot>({ hostname, port, exclusive: true, socket: handlers(accept) });
      return { port: l.port, stop: () => l.stop(false) };
    } catch (e) {
      throw socketError(e);
    }
  },
  async connect(hostname, port, open) {
    let conn: BunConnection | undefined;
    try {
      await Bun.connect<Slot>({ hostname, port, socket: { ...handlers(open, (c) => (conn = c)), connectError: () => {} } });
    } catch (e) {
      throw socketError(e);
    }
    return conn!;
  },
};
