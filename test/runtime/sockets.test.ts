// The runtime adapter's TCP (lib/runtime/sockets.ts), which the rendezvous store runs on: bytes in
// order and intact both ways, small writes joined, large ones queued until the socket takes them,
// end() after queued bytes, close reported once on both sides, and the system's error codes. Then
// the same bytes between this runtime and the other one (a child process). CPU only.
import { expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { runtime } from "../../lib/runtime/index.ts";
import { SocketError, type Connection, type ConnectionHandlers } from "../../lib/runtime/sockets.ts";
import { runtimeBinary } from "../support/processes.ts";
import { nextReport, spawnWorker } from "../support/report-channel.ts";

const { listen, connect } = runtime.sockets;
const other = runtime.name === "bun" ? "deno" : "bun";

/** A client that collects what it receives; `received(n)` resolves once n bytes have arrived. */
async function client(port: number) {
  const chunks: Uint8Array[] = [];
  let have = 0;
  let closed = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const conn = await connect("127.0.0.1", port, () => ({
    data: (c) => {
      chunks.push(c);
      have += c.length;
      for (const w of waiters.filter((w) => have >= w.n)) w.resolve();
    },
    close: () => void closed++,
  }));
  return {
    conn,
    closes: () => closed,
    received: (n: number) => new Promise<Uint8Array>((resolve) => {
      const done = () => {
        const all = new Uint8Array(have);
        let at = 0;
        for (const c of chunks) (all.set(c, at), (at += c.length));
        resolve(all);
      };
      if (have >= n) done();
      else waiters.push({ n, resolve: done });
    }),
  };
}

const pattern = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

test(`${runtime.name}: echo of small and 24 MiB writes, in order; end() sends the queue first; close once each side`, async () => {
  // The first connection is echoed; the second only counted (an echo still arriving when a side
  // closes turns its FIN into a reset, which may drop what the other side has not read yet).
  const serverCloses: number[] = [];
  const serverGot: number[] = [];
  const l = listen("127.0.0.1", 0, (c: Connection): ConnectionHandlers => {
    const mine = serverCloses.length;
    serverCloses.push(0);
    serverGot.push(0);
    return {
      data: (chunk) => {
        serverGot[mine]! += chunk.length;
        if (mine === 0) c.write([chunk]);
      },
      close: () => void serverCloses[mine]!++,
    };
  });
  try {
    expect(l.port).toBeGreaterThan(0);
    const c = await client(l.port);
    // Three small parts (joined into one write) and a large one (queued past what the kernel takes).
    const parts = [pattern(3, 1), pattern(0, 2), pattern(61, 3)];
    const big = pattern(24 << 20, 4);
    c.conn.write(parts);
    c.conn.write([big]);
    const want = new Uint8Array(64 + big.length);
    want.set(parts[0]!, 0);
    want.set(parts[2]!, 3);
    want.set(big, 64);
    const got = await c.received(want.length);
    expect(got.length).toBe(want.length);
    let firstBad = -1;
    for (let i = 0; i < want.length && firstBad < 0; i++) if (got[i] !== want[i]) firstBad = i;
    expect(firstBad).toBe(-1);
    c.conn.end();
    // end() right after a 4 MiB write: the server still gets all of it, then both sides see close
    // exactly once.
    const d = await client(l.port);
    d.conn.write([pattern(4 << 20, 5)]);
    d.conn.end();
    const closedBoth = () => c.closes() === 1 && d.closes() === 1 && serverCloses.every((n) => n === 1);
    for (let i = 0; i < 500 && !closedBoth(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(serverGot).toEqual([want.length, 4 << 20]);
    expect([c.closes(), d.closes()]).toEqual([1, 1]);
    expect(serverCloses).toEqual([1, 1]);
    d.conn.destroy(); // after close: nothing happens
    expect(d.closes()).toBe(1);
  } finally {
    l.stop();
  }
}, 60_000);

test(`${runtime.name}: destroy() closes both sides at once; errors carry the system's code`, async () => {
  // Stopped first, connected to last: under Deno the port refuses only once the accept it had in
  // flight has ended (before that, a connect there is reset).
  const gone = listen("127.0.0.1", 0, () => ({ data() {}, close() {} }));
  gone.stop();
  let serverClosed = 0;
  const l = listen("127.0.0.1", 0, () => ({ data() {}, close: () => void serverClosed++ }));
  const c = await client(l.port);
  c.conn.destroy();
  for (let i = 0; i < 200 && serverClosed === 0; i++) await new Promise((r) => setTimeout(r, 10));
  expect(serverClosed).toBe(1);
  expect(c.closes()).toBe(1);
  let inUse: unknown;
  try {
    listen("127.0.0.1", l.port, () => ({ data() {}, close() {} })).stop();
  } catch (e) {
    inUse = e;
  }
  expect(inUse).toBeInstanceOf(SocketError);
  expect((inUse as SocketError).code).toBe("EADDRINUSE");
  l.stop();
  await new Promise((r) => setTimeout(r, 100));
  const refused = await connect("127.0.0.1", gone.port, () => ({ data() {}, close() {} })).catch((e) => e);
  expect(refused).toBeInstanceOf(SocketError);
  expect(refused.code).toBe("ECONNREFUSED");
  const unknown = await connect("no-such-host.invalid", 9, () => ({ data() {}, close() {} })).catch((e) => e);
  expect(unknown).toBeInstanceOf(SocketError);
  // A host with no resolver at all (no network) says EAI_AGAIN, not ENOTFOUND.
  expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(unknown.code);
}, 60_000);

const noOther = runtimeBinary(other) ? undefined : `no ${other} binary (node_modules/.bin or PATH; npm install provides it)`;
(noOther ? test.skip : test)(`${runtime.name} client, ${other} server: 8 MiB both ways${noOther ? ` (skipped: ${noOther})` : ""}`, async () => {
  const server = spawnWorker(join(import.meta.dirname, "..", "support", "echo-worker.ts"), {}, other);
  try {
    const { port, runtime: theirs } = await nextReport(server);
    expect(theirs).toBe(other);
    const c = await client(port);
    const data = pattern(8 << 20, 6);
    c.conn.write([data]);
    const got = await c.received(data.length);
    expect(got.length).toBe(data.length);
    expect(Buffer.from(got).equals(Buffer.from(data))).toBe(true);
    c.conn.end();
  } finally {
    server.proc.kill("SIGTERM");
    await server.proc.exited;
  }
}, 60_000);
