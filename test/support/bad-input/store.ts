// store.ts — bad input to the rendezvous stores: Store.connect's options (rank, world, address,
// port, timeouts, token, bind address), keys and values over the limits, timeouts, and a store
// used after close(). Each case names the argument its error must name.
import { LocalStore, MAX_KEY_BYTES, MAX_VALUE_BYTES, Store, type StoreOptions } from "../../../lib/bootstrap.ts";
import { ArgumentError, DisposedError } from "../../../lib/errors.ts";
import { runtime } from "../../../lib/runtime/index.ts";
import type { BadInputCase } from "./case.ts";

const good: StoreOptions = { rank: 1, worldSize: 2, addr: "127.0.0.1", port: 29500 };

/** Store.connect with `change` applied to options that are otherwise valid. */
function connect(change: Record<string, unknown>): () => Promise<unknown> {
  return () => Store.connect({ ...good, ...change } as StoreOptions);
}

/** `f` on a fresh one-rank in-process store. */
function onLocal(f: (s: LocalStore) => Promise<unknown>): () => Promise<unknown> {
  return async () => {
    const [s] = LocalStore.group(1, { timeoutMs: 1000 });
    try {
      return await f(s!);
    } finally {
      await s!.close();
    }
  };
}

/** `f` on a fresh one-rank TCP store (rank 0 on a free loopback port). */
function onTcp(f: (s: Store) => Promise<unknown>): () => Promise<unknown> {
  return async () => {
    const s = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0, timeoutMs: 1000 });
    try {
      return await f(s);
    } finally {
      await s.close();
    }
  };
}

const A = ArgumentError;

export const cases: BadInputCase[] = [
  { name: "Store.connect without options", run: () => Store.connect(undefined as unknown as StoreOptions), error: A, names: "worldSize" },
  { name: "Store.connect worldSize 0", run: connect({ worldSize: 0 }), error: A, names: "worldSize" },
  { name: "Store.connect worldSize '2' (a string)", run: connect({ worldSize: "2" }), error: A, names: "worldSize" },
  { name: "Store.connect worldSize 2^31", run: connect({ worldSize: 2 ** 31 }), error: A, names: "worldSize" },
  { name: "Store.connect rank -1", run: connect({ rank: -1 }), error: A, names: "rank" },
  { name: "Store.connect rank 1.5", run: connect({ rank: 1.5 }), error: A, names: "rank" },
  { name: "Store.connect rank = worldSize", run: connect({ rank: 2 }), error: A, names: "rank" },
  { name: "Store.connect addr ''", run: connect({ addr: "" }), error: A, names: "addr" },
  { name: "Store.connect addr with a space", run: connect({ addr: "node 0" }), error: A, names: "addr" },
  { name: "Store.connect addr 42", run: connect({ addr: 42 }), error: A, names: "addr" },
  { name: "Store.connect addr of 300 characters", run: connect({ addr: "a".repeat(300) }), error: A, names: "addr" },
  { name: "Store.connect port -1", run: connect({ port: -1 }), error: A, names: "port" },
  { name: "Store.connect port 65536", run: connect({ port: 65536 }), error: A, names: "port" },
  { name: "Store.connect port 1.5", run: connect({ port: 1.5 }), error: A, names: "port" },
  { name: "Store.connect port 0 on rank 1", run: connect({ port: 0 }), error: A, names: "port" },
  {
    name: "Store.connect on a port in use (EADDRINUSE)",
    run: async () => {
      const held = runtime.sockets.listen("127.0.0.1", 0, () => ({ data() {}, close() {} }));
      try {
        return await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: held.port });
      } finally {
        held.stop();
      }
    },
    error: A,
    names: "port",
  },
  { name: "Store.connect timeoutMs 0", run: connect({ timeoutMs: 0 }), error: A, names: "timeoutMs" },
  { name: "Store.connect timeoutMs NaN", run: connect({ timeoutMs: NaN }), error: A, names: "timeoutMs" },
  { name: "Store.connect timeoutMs Infinity", run: connect({ timeoutMs: Infinity }), error: A, names: "timeoutMs" },
  { name: "Store.connect connectTimeoutMs -5", run: connect({ connectTimeoutMs: -5 }), error: A, names: "connectTimeoutMs" },
  { name: "Store.connect connectTimeoutMs '1000'", run: connect({ connectTimeoutMs: "1000" }), error: A, names: "connectTimeoutMs" },
  { name: "Store.connect token shorter than 16 characters", run: connect({ token: "short" }), error: A, names: "token" },
  { name: "Store.connect token ''", run: connect({ token: "" }), error: A, names: "token" },
  { name: "Store.connect token with a leading space", run: connect({ token: " 0123456789abcdef0123" }), error: A, names: "token" },
  { name: "Store.connect token with a NUL", run: connect({ token: "0123456789\u0000abcdef" }), error: A, names: "token" },
  { name: "Store.connect token over 1024 bytes", run: connect({ token: "t".repeat(2000) }), error: A, names: "token" },
  { name: "Store.connect token as a number", run: connect({ token: 1234567890123456 }), error: A, names: "token" },
  { name: "Store.connect bindAddr ''", run: connect({ rank: 0, bindAddr: "" }), error: A, names: "bindAddr" },
  { name: "Store.connect bindAddr with a trailing space", run: connect({ rank: 0, bindAddr: "0.0.0.0 " }), error: A, names: "bindAddr" },
  { name: "Store.connect bindAddr on rank 1", run: connect({ bindAddr: "0.0.0.0" }), error: A, names: "bindAddr" },
  { name: "Store.connect bindAddr not of this host", run: connect({ rank: 0, port: 0, bindAddr: "203.0.113.7" }), error: A, names: "bindAddr" },
  { name: "Store.connect sameHost 'yes'", run: connect({ sameHost: "yes" }), error: A, names: "sameHost" },
  { name: "LocalStore.group(0)", run: () => LocalStore.group(0), error: A, names: "worldSize" },
  { name: "LocalStore.group(1.5)", run: () => LocalStore.group(1.5), error: A, names: "worldSize" },
  { name: "LocalStore.group timeoutMs -1", run: () => LocalStore.group(2, { timeoutMs: -1 }), error: A, names: "timeoutMs" },
  { name: "Store.set key ''", run: onTcp((s) => s.set("", "v")), error: A, names: "key" },
  { name: "Store.set key 42", run: onTcp((s) => s.set(42 as unknown as string, "v")), error: A, names: "key" },
  { name: "Store.set key over 65535 bytes", run: onTcp((s) => s.set("k".repeat(MAX_KEY_BYTES + 1), "v")), error: A, names: "key" },
  { name: "Store.set value 42", run: onTcp((s) => s.set("k", 42 as unknown as string)), error: A, names: "value" },
  { name: "Store.set value over 256 MiB", run: onTcp((s) => s.set("k", new Uint8Array(MAX_VALUE_BYTES + 1))), error: A, names: "value" },
  { name: "LocalStore.set value over 256 MiB", run: onLocal((s) => s.set("k", new Uint8Array(MAX_VALUE_BYTES + 1))), error: A, names: "value" },
  { name: "Store.get timeoutMs -1", run: onTcp((s) => s.get("k", -1)), error: A, names: "timeoutMs" },
  { name: "Store.get timeoutMs '5'", run: onTcp((s) => s.get("k", "5" as unknown as number)), error: A, names: "timeoutMs" },
  { name: "Store.wait keys not an array", run: onTcp((s) => s.wait("k" as unknown as string[])), error: A, names: "keys" },
  { name: "Store.wait keys with an empty key", run: onTcp((s) => s.wait(["a", ""])), error: A, names: "keys[1]" },
  { name: "Store.barrier name ''", run: onTcp((s) => s.barrier("")), error: A, names: "name" },
  { name: "Store.barrier timeoutMs 0", run: onLocal((s) => s.barrier("b", 0)), error: A, names: "timeoutMs" },
  { name: "Store.allGather value 42", run: onTcp((s) => s.allGather("g", 42 as unknown as Uint8Array)), error: A, names: "value" },
  {
    name: "Store.set after close()",
    run: async () => {
      const s = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0 });
      await s.close();
      return s.set("k", "v");
    },
    error: DisposedError,
    names: "Store",
  },
  {
    name: "LocalStore.get after close()",
    run: async () => {
      const [s] = LocalStore.group(1);
      await s!.close();
      return s!.get("k");
    },
    error: DisposedError,
    names: "Store",
  },
];
