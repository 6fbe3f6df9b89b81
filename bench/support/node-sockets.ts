// node-sockets.ts — the store's TCP (lib/runtime/sockets.ts) over node:net, which Bun and Deno
// both implement: the portable alternative that bench/runtimes.ts measures against each runtime's
// own sockets. Bench code; the store uses the runtime's own (bench/DECISIONS.md "The store's
// sockets are each runtime's own"). listen() is asynchronous here: under Deno node:net binds in
// the background, so the port (or EADDRINUSE) is known only once its Promise settles.
import { createConnection, createServer, type Server, type Socket } from "node:net";

import { SocketError, type Connection, type ConnectionHandlers, type Listener } from "../../lib/runtime/sockets.ts";

function socketError(e: unknown): SocketError {
  const err = e as Error & { code?: unknown };
  return new SocketError(err?.message ?? String(e), typeof err?.code === "string" ? err.code : "EUNKNOWN");
}

class NodeConnection implements Connection {
  readonly #socket: Socket;
  #done = false;

  constructor(socket: Socket) {
    this.#socket = socket;
  }

  write(parts: Uint8Array[]): void {
    if (this.#done) return;
    // Corked, a header and its body leave in one writev: one segment for a small request.
    this.#socket.cork();
    for (const p of parts) if (p.length > 0) this.#socket.write(p);
    this.#socket.uncork();
  }

  end(): void {
    if (this.#done) return;
    this.#done = true;
    this.#socket.end();
  }

  destroy(): void {
    this.#done = true;
    this.#socket.destroy();
  }
}

/** Wires a socket to its handlers: data as Uint8Array chunks, close exactly once (an error is
 * followed by close in node:net, so close alone reports both). */
function attach(socket: Socket, open: (c: Connection) => ConnectionHandlers): Connection {
  socket.setNoDelay(true);
  const conn = new NodeConnection(socket);
  const handlers = open(conn);
  socket.on("data", (chunk: Uint8Array) => handlers.data(chunk));
  socket.on("error", () => {});
  socket.once("close", () => handlers.close());
  return conn;
}

/** Listens on hostname:port (0 = any free port). Rejects with SocketError (EADDRINUSE,
 * EADDRNOTAVAIL). */
export function listen(hostname: string, port: number, accept: (c: Connection) => ConnectionHandlers): Promise<Listener> {
  const server: Server = createServer({ noDelay: true }, (socket) => attach(socket, accept));
  return new Promise((resolve, reject) => {
    server.once("error", (e) => reject(socketError(e)));
    server.listen({ host: hostname, port, exclusive: true }, () => {
      server.removeAllListeners("error");
      server.on("error", () => {});
      resolve({
        port: (server.address() as { port: number }).port,
        stop: () => void server.close(),
      });
    });
  });
}

/** Connects to hostname:port; `open` gets the connection before any data can arrive. Rejects with
 * SocketError (ECONNREFUSED, ENOTFOUND, ...). */
export function connect(hostname: string, port: number, open: (c: Connection) => ConnectionHandlers): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: hostname, port, noDelay: true });
    const failed = (e: Error) => reject(socketError(e));
    socket.once("error", failed);
    socket.once("connect", () => {
      socket.off("error", failed);
      resolve(attach(socket, open));
    });
  });
}
