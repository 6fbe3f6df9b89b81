// socket.ts — the store's only contact with a runtime's TCP API (Bun.listen / Bun.connect today).
// The interface is what the store needs and no more: listen, connect, write (never partial: this
// file queues what the kernel does not take yet), end, destroy, and data / close callbacks. A Deno
// adapter (node:net, which both runtimes implement) replaces this one file.
import type { Socket, TCPSocketListener } from "bun";

export interface Connection {
  /** Queues the parts in order; they go out as the socket takes them. */
  write(parts: Uint8Array[]): void;
  /** Closes once what is queued has gone out. */
  end(): void;
  /** Closes now, dropping what is queued. */
  destroy(): void;
}

export interface ConnectionHandlers {
  data(chunk: Uint8Array): void;
  /** Called once, however the connection ended. */
  close(): void;
}

export interface Listener {
  readonly port: number;
  /** Stops accepting; open connections stay. */
  stop(): void;
}

/** A listen or connect that failed; `code` is the system's (EADDRINUSE, ECONNREFUSED, ENOTFOUND). */
export class SocketError extends Error {
  readonly code: string;
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}

function socketError(e: unknown): SocketError {
  const err = e as Error & { code?: unknown };
  return new SocketError(err?.message ?? String(e), typeof err?.code === "string" ? err.code : "EUNKNOWN");
}

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
    for (const p of parts) if (p.length > 0) this.#queue.push(p);
    if (idle) this.flush();
  }

  /** Writes queued bytes until the socket pushes back; Bun calls drain when it takes more. */
  flush(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const n = this.#socket.write(head);
      if (n < 0) return;
      if (n < head.length) {
        this.#queue[0] = head.subarray(n);
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

function closeOnce(socket: Socket<Slot>): void {
  const slot = socket.data;
  if (!slot) return;
  socket.data = undefined as unknown as Slot;
  slot.conn.closed();
  slot.handlers.close();
}

const handlers = {
  binaryType: "uint8array" as const,
  data: (socket: Socket<Slot>, chunk: Uint8Array) => socket.data?.handlers.data(chunk),
  drain: (socket: Socket<Slot>) => socket.data?.conn.flush(),
  end: (socket: Socket<Slot>) => {
    socket.end();
  },
  close: closeOnce,
  error: closeOnce,
};

/** Listens on hostname:port (0 = any free port). Throws SocketError (EADDRINUSE, EADDRNOTAVAIL). */
export function listen(hostname: string, port: number, accept: (c: Connection) => ConnectionHandlers): Listener {
  let listener: TCPSocketListener<Slot>;
  try {
    listener = Bun.listen<Slot>({
      hostname,
      port,
      exclusive: true,
      socket: {
        ...handlers,
        open: (socket) => {
          const conn = new BunConnection(socket);
          socket.data = { conn, handlers: { data() {}, close() {} } };
          socket.data.handlers = accept(conn);
        },
      },
    });
  } catch (e) {
    throw socketError(e);
  }
  return {
    get port() {
      return listener.port;
    },
    stop: () => listener.stop(false),
  };
}

/** Connects to hostname:port; `open` gets the connection before any data can arrive. Rejects with
 * SocketError (ECONNREFUSED, ENOTFOUND, ...). */
export async function connect(hostname: string, port: number, open: (c: Connection) => ConnectionHandlers): Promise<Connection> {
  let conn: BunConnection | undefined;
  try {
    await Bun.connect<Slot>({
      hostname,
      port,
      socket: {
        ...handlers,
        open: (socket) => {
          conn = new BunConnection(socket);
          socket.data = { conn, handlers: { data() {}, close() {} } };
          socket.data.handlers = open(conn);
        },
        connectError: () => {},
      },
    });
  } catch (e) {
    throw socketError(e);
  }
  return conn!;
}
