// socket.ts — the store's only contact with TCP: the runtime adapter's sockets (lib/runtime/
// sockets.ts: Bun.listen / Bun.connect under Bun, Deno.listen / Deno.connect under Deno), under
// the names the store uses. The interface is what the store needs and no more: listen, connect,
// write (never partial), end, destroy, and data / close callbacks.
import { runtime } from "../runtime/index.ts";

export { SocketError, type Connection, type ConnectionHandlers, type Listener } from "../runtime/sockets.ts";

/** Listens on hostname:port (0 = any free port). Throws SocketError (EADDRINUSE, EADDRNOTAVAIL). */
export const listen = runtime.sockets.listen;

/** Connects to hostname:port; `open` gets the connection before any data can arrive. Rejects with
 * SocketError (ECONNREFUSED, ENOTFOUND, ...). */
export const connect = runtime.sockets.connect;
