// store-roundtrip.ts — how long a large value takes through the TCP rendezvous store, next to
// what bounds it on this machine: first touch of fresh memory (the host must keep a copy and the
// reader gets its own, so a round trip touches 2x the value in new pages), and raw loopback TCP
// through Bun.listen/Bun.connect and through node:net (the API a Deno adapter would use).
//   bun bench/store-roundtrip.ts [MiB ...]      (default 16 64; CPU only)
import net from "node:net";

import { Store } from "../lib/bootstrap.ts";

const MiB = 1 << 20;
const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
const REPEATS = 3;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

async function timed(f: () => Promise<unknown> | unknown): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    const t0 = performance.now();
    await f();
    out.push(performance.now() - t0);
  }
  return out;
}

function freshCopy(bytes: number, src: Uint8Array): void {
  new Uint8Array(bytes).set(src);
}

/** One-way loopback transfer of `bytes` through Bun's socket API, received into a fresh buffer. */
async function bunOneWay(bytes: number, src: Uint8Array): Promise<void> {
  let got = 0;
  let dst: Uint8Array | undefined;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const l = Bun.listen({
    hostname: "127.0.0.1", port: 0,
    socket: {
      binaryType: "uint8array",
      data(_s, c) {
        dst ??= new Uint8Array(bytes);
        dst.set(c, got);
        got += c.length;
        if (got >= bytes) done();
      },
    },
  });
  let off = 0;
  const pump = (s: { write(b: Uint8Array): number }) => {
    while (off < bytes) {
      const n = s.write(src.subarray(off, bytes));
      if (n <= 0) return;
      off += n;
    }
  };
  const sock = await Bun.connect({ hostname: "127.0.0.1", port: l.port, socket: { data() {}, drain: pump } });
  pump(sock);
  await finished;
  sock.end();
  l.stop(true);
}

/** The same through node:net. */
async function nodeOneWay(bytes: number, src: Uint8Array): Promise<void> {
  let got = 0;
  let dst: Uint8Array | undefined;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const srv = net.createServer((c) => c.on("data", (d: Uint8Array) => {
    dst ??= new Uint8Array(bytes);
    dst.set(d, got);
    got += d.length;
    if (got >= bytes) done();
  }));
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  const c = net.connect((srv.address() as net.AddressInfo).port, "127.0.0.1");
  await new Promise<void>((r) => c.on("connect", () => r()));
  c.write(src.subarray(0, bytes));
  await finished;
  c.destroy();
  srv.close();
}

const store = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0 });
for (const mib of sizes.length ? sizes : [16, 64]) {
  const bytes = mib * MiB;
  const src = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 4096) src[i] = i & 0xff;
  const row = {
    "fresh alloc + copy": await timed(() => freshCopy(bytes, src)),
    "Bun.listen one way": await timed(() => bunOneWay(bytes, src)),
    "node:net one way": await timed(() => nodeOneWay(bytes, src)),
    "store set + get": await timed(async () => {
      await store.set("big", src);
      await store.get("big");
    }),
  };
  console.log(`${mib} MiB: ` + Object.entries(row).map(([k, v]) => `${k} ${median(v).toFixed(0)} ms (${v.map((x) => x.toFixed(0)).join("/")})`).join("; "));
}
await store.close();
