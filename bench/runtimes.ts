// bench/runtimes.ts — Bun and Deno side by side: the FFI call cost, the store's socket round trips
// (node:net against the runtime's own TCP API), and the awaited 8 KiB allReduce (GPU). Host-side
// latency, measured with mitata, except the socket round trips (timed by hand, interleaved: see
// sockets()).
//
//   bun bench/runtimes.ts                     this runtime, then the other one (node_modules/.bin
//   deno run -A bench/runtimes.ts             or PATH), then one table of both
//   bun bench/runtimes.ts --only=ffi,sockets  sections: ffi, sockets, allreduce (GPU: skipped,
//                                             saying why, without one)
//   bun bench/runtimes.ts --this-only         this runtime alone (what the other runtime's run is)
//   bun bench/runtimes.ts --rounds=30         socket rounds of 100 requests per implementation
//   bun bench/runtimes.ts --world=2           ranks on GPU 0 for the allReduce
//
// Every result is also one JSON line {"runtime", "name", "p50", "min", "max", "unit"} for
// bench/DECISIONS.md. The echo server of the sockets section is this file in a child process of
// the same runtime (--echo-server=IMPL), so a round trip crosses two processes as a store request
// between ranks does.
import { Communicator } from "../lib/comm.ts";
import { LocalStore } from "../lib/bootstrap.ts";
import { deviceCount, deviceInfo } from "../lib/device.ts";
import { addressOf, native, runtimeLabel } from "../lib/native.ts";
import { runtime } from "../lib/runtime/index.ts";
import type { Connection, ConnectionHandlers, Listener } from "../lib/runtime/sockets.ts";
import { readAll, scriptArgv, start } from "../test/support/processes.ts";
import * as nodeSockets from "./support/node-sockets.ts";

type Result = { runtime: string; name: string; p50: number; min: number; max: number; unit: string };

const args = process.argv.slice(2);
const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const sections = new Set((flag("only") ?? "ffi,sockets,allreduce").split(","));

interface SocketApi {
  listen(hostname: string, port: number, accept: (c: Connection) => ConnectionHandlers): Listener | Promise<Listener>;
  connect(hostname: string, port: number, open: (c: Connection) => ConnectionHandlers): Promise<Connection>;
}

/** node:net, and the runtime's own sockets (what the store uses, lib/runtime/sockets.ts). */
const SOCKETS: Record<string, SocketApi> = {
  "node:net": nodeSockets,
  [runtime.name === "bun" ? "Bun.listen" : "Deno.listen"]: runtime.sockets,
};

// ---- the echo protocol: [u32 length][payload], answered with the same frame --------------------

/** Reassembles length-prefixed frames from chunks without copying a large frame more than once. */
class Frames {
  #chunks: Uint8Array[] = [];
  #have = 0;
  #need = -1;
  constructor(readonly onFrame: (payload: Uint8Array) => void) {}

  push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#have += chunk.length;
    for (;;) {
      if (this.#need < 0) {
        if (this.#have < 4) return;
        const head = this.#take(4);
        this.#need = new DataView(head.buffer, head.byteOffset, 4).getUint32(0, true);
      }
      if (this.#have < this.#need) return;
      const payload = this.#take(this.#need);
      this.#need = -1;
      this.onFrame(payload);
    }
  }

  #take(n: number): Uint8Array {
    const out = new Uint8Array(n);
    let at = 0;
    while (at < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(n - at, c.length);
      out.set(c.subarray(0, k), at);
      at += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    this.#have -= n;
    return out;
  }
}

function frame(payload: Uint8Array): Uint8Array[] {
  const head = new Uint8Array(4);
  new DataView(head.buffer).setUint32(0, payload.length, true);
  return [head, payload];
}

async function echoServer(impl: string): Promise<void> {
  const api = SOCKETS[impl];
  if (!api) throw new Error(`no socket implementation '${impl}' under ${runtime.name}`);
  const l = await api.listen("127.0.0.1", 0, (c) => {
    const frames = new Frames((p) => c.write(frame(p)));
    return { data: (chunk) => frames.push(chunk), close: () => {} };
  });
  process.stdout.write(JSON.stringify({ port: l.port }) + "\n");
}

/** A client whose request() resolves with the echoed payload. */
async function echoClient(api: SocketApi, port: number): Promise<{ request(p: Uint8Array): Promise<Uint8Array>; conn: Connection }> {
  const waiting: ((p: Uint8Array) => void)[] = [];
  const frames = new Frames((p) => waiting.shift()!(p));
  const conn = await api.connect("127.0.0.1", port, () => ({ data: (chunk) => frames.push(chunk), close: () => {} }));
  return {
    conn,
    request: (p) => new Promise<Uint8Array>((resolve) => {
      waiting.push(resolve);
      conn.write(frame(p));
    }),
  };
}

// ---- sections -----------------------------------------------------------------------------------

const results: Result[] = [];
const record = (name: string, p50: number, min: number, max: number, unit: string) => {
  const r = { runtime: runtimeLabel(), name, p50, min, max, unit };
  results.push(r);
  console.log(JSON.stringify(r));
};

async function mitataRun(): Promise<void> {
  const { run } = await import("mitata");
  const { benchmarks } = await run();
  for (const b of benchmarks) {
    for (const r of b.runs) {
      if (!r.stats) continue;
      record(r.name, r.stats.p50 / 1000, r.stats.min / 1000, r.stats.max / 1000, "us");
    }
  }
}

async function ffi(): Promise<void> {
  const { bench, do_not_optimize } = await import("mitata");
  const lib = native();
  const out = new Int32Array(1);
  const live = new BigInt64Array(1);
  const at = addressOf(live); // valid while `live` is referenced: the bench below holds it
  // A typed-array argument (an out-parameter, a packed struct) ...
  bench("ffi weft_abi_version(Int32Array)", () => do_not_optimize(lib.weft_abi_version(out)));
  // ... and an address as a plain number, as lib/ passes handles and memory. Another symbol: one
  // that sees both kinds runs both variants through one call site, which the JIT makes slower.
  bench("ffi weft_dlpack_live(address)", () => do_not_optimize(lib.weft_dlpack_live(at)));
  // A call that does work (cudaGetDeviceCount; without a driver it fails, and says so).
  bench("ffi weft_device_count(Int32Array)", () => do_not_optimize(lib.weft_device_count(out)));
  await mitataRun();
  if (live[0]! < 0n) throw new Error(`weft_dlpack_live wrote ${live[0]} through the address`);
}

/** p50, min and max of `samples`. */
function stats(samples: number[]): [number, number, number] {
  const s = [...samples].sort((a, b) => a - b);
  return [s[Math.floor(s.length / 2)]!, s[0]!, s.at(-1)!];
}

// Timed by hand and interleaved (a block of requests per implementation in turn, round after
// round), not with mitata one implementation after the other: on a shared machine whose load drifts
// over a minute, only interleaving gives both the same conditions.
async function sockets(): Promise<void> {
  const servers: ReturnType<typeof start>[] = [];
  const clients: { impl: string; c: Awaited<ReturnType<typeof echoClient>> }[] = [];
  for (const [impl, api] of Object.entries(SOCKETS)) {
    const server = start([...scriptArgv(import.meta.filename), `--echo-server=${impl}`], process.env);
    servers.push(server);
    const first = await new Promise<string>((resolve) => server.stdout.once("data", (d) => resolve(String(d))));
    const { port } = JSON.parse(first.split("\n")[0]!) as { port: number };
    clients.push({ impl, c: await echoClient(api, port) });
  }
  const ROUNDS = Number(flag("rounds") ?? 30);
  const BLOCK = 100;
  const small = new Uint8Array(32).fill(7);
  const smallTimes = clients.map(() => [] as number[]);
  for (let round = -1; round < ROUNDS; round++) { // round -1 warms up
    for (const [k, { c }] of clients.entries()) {
      for (let i = 0; i < BLOCK; i++) {
        const t0 = performance.now();
        await c.request(small);
        if (round >= 0) smallTimes[k]!.push((performance.now() - t0) * 1000);
      }
    }
  }
  clients.forEach(({ impl }, k) => record(`store round trip 32 B, ${impl}`, ...stats(smallTimes[k]!), "us"));

  // 64 MiB out and back (a store set then a get of a 64 MiB value), samples interleaved likewise.
  const big = new Uint8Array(64 << 20).map((_, i) => i & 0xff);
  const bigTimes = clients.map(() => [] as number[]);
  for (let i = -1; i < 5; i++) {
    for (const [k, { impl, c }] of clients.entries()) {
      const t0 = performance.now();
      const back = await c.request(big);
      const dt = performance.now() - t0;
      if (back.length !== big.length || back[12345] !== big[12345]) throw new Error(`${impl}: the 64 MiB echo came back wrong`);
      if (i >= 0) bigTimes[k]!.push(dt);
    }
  }
  clients.forEach(({ impl }, k) => record(`store echo 64 MiB, ${impl}`, ...stats(bigTimes[k]!), "ms"));
  for (const { c } of clients) c.conn.destroy();
  for (const s of servers) s.kill("SIGTERM");
  await Promise.all(servers.map((s) => s.exited));
}

async function allReduce(): Promise<void> {
  if (deviceCount() < 1) {
    console.log("allreduce: skipped (needs a GPU; this machine has none)");
    return;
  }
  const { bench } = await import("mitata");
  // World 2 (--world=N) on GPU 0, each rank planning for its share of the SMs so that every rank's
  // kernel is resident at once.
  const world = Number(flag("world") ?? 2);
  const stores = LocalStore.group(world, { timeoutMs: 60_000 });
  const smBudget = Math.floor(deviceInfo(0).smCount / world);
  const comms = await Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: "gpu0" }, 0, { heapBytes: 64 << 20, smBudget })));
  const xs = comms.map((c) => c.empty([4096], "bf16").fillRandom(c.rank + 1));
  const ys = comms.map((c) => c.empty([4096], "bf16"));
  const plans = comms.map((c, i) => c.prepare.allReduce(xs[i]!, ys[i]!));
  bench(`awaited allReduce 8 KiB bf16, world ${world} on one GPU`, async () => void (await Promise.all(plans.map((p) => p.run()))));
  bench(`runSync allReduce 8 KiB bf16, world ${world} on one GPU`, () => {
    const seqs = plans.map((p) => p.launch());
    plans.forEach((p, i) => p.wait(seqs[i]!));
  });
  await mitataRun();
  [...xs, ...ys].forEach((t) => t.dispose());
  await Communicator.disposeAll(comms);
}

// ---- main ---------------------------------------------------------------------------------------

const echo = flag("echo-server");
if (echo) {
  await echoServer(echo);
} else {
  console.log(`# ${runtimeLabel()}`);
  if (sections.has("ffi")) await ffi();
  if (sections.has("sockets")) await sockets();
  if (sections.has("allreduce")) await allReduce();
  if (!args.includes("--this-only")) {
    const other = runtime.name === "bun" ? "deno" : "bun";
    let theirs: Result[] = [];
    try {
      const child = start([...scriptArgv(import.meta.filename, { runtime: other }), ...args, "--this-only"], process.env);
      const text = await readAll(child.stdout);
      await child.exited;
      theirs = text.split("\n").filter((l) => l.startsWith('{"runtime"')).map((l) => JSON.parse(l) as Result);
    } catch (e) {
      console.log(`(${other} not run: ${(e as Error).message})`);
    }
    const names = [...new Set([...results, ...theirs].map((r) => r.name.replace(/, (Bun|Deno)\.listen$/, ", native")))];
    const cell = (rs: Result[], n: string) => {
      const r = rs.find((x) => x.name.replace(/, (Bun|Deno)\.listen$/, ", native") === n);
      return r ? `${r.p50.toFixed(r.unit === "ms" ? 1 : 3)} ${r.unit}`.padStart(14) : "-".padStart(14);
    };
    const [bun, deno] = runtime.name === "bun" ? [results, theirs] : [theirs, results];
    console.log(`\n${"p50".padEnd(56)}${"bun".padStart(14)}${"deno".padStart(14)}`);
    for (const n of names) console.log(`${n.padEnd(56)}${cell(bun, n)}${cell(deno, n)}`);
  }
  process.exit(0);
}
