// sockets.ts — the TCP a runtime adapter gives the rendezvous store (lib/bootstrap/socket.ts
// re-exports it): listen, connect, write (never partial: the adapter queues what the kernel does
// not take yet), end, destroy, and data / close callbacks. Each adapter implements it over its
// runtime's own sockets (bun-sockets.ts, deno-sockets.ts): they answer a small request 10-30%
// sooner than node:net in the same runtime, and under Bun move 64 MiB twice as fast
// (bench/DECISIONS.md "The store's sockets are each runtime's own"). The bytes on the wire are the
// same in both, so a Bun rank and a Deno rank share one store.

export interface Connection {
  /** Queues the parts in order; they go out as the socket takes them (small ones joined into one
   * write, so that a header and its body leave in one segment). */
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

export interface Sockets {
  /** Listens on hostname:port (0 = any free port), at once. Throws SocketError (EADDRINUSE,
   * EADDRNOTAVAIL). */
  listen(hostname: string, port: number, accept: (c: Connection) => ConnectionHandlers): Listener;
  /** Connects; `open` gets the connection before any data can arrive. Rejects with SocketError
   * (ECONNREFUSED, ENOTFOUND, ...). */
  connect(hostname: string, port: number, open: (c: Connection) => ConnectionHandlers): Promise<Connection>;
}

/** A listen or connect that failed; `code` is the system's (EADDRINUSE, ECONNREFUSED, ENOTFOUND). */
export class SocketError extends Error {
  readonly code: string;
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}

/** Parts below this many bytes in all are joined into one buffer: one write, one segment. */
const JOIN_BELOW = 64 << 10;

/** `parts` without empty ones, joined into one when they are small together. */
export function coalesce(parts: Uint8Array[]): Uint8Array[] {
  const nonEmpty = parts.filter((p) => p.length > 0);
  const total = nonEmpty.reduce((a, p) => a + p.length, 0);
  if (nonEmpty.length < 2 || total >= JOIN_BELOW) return nonEmpty;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of nonEmpty) {
    out.set(p, at);
    at += p.length;
  }
  return [out];
}
