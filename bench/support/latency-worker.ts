// One rank of bench/collectives.ts's per-process latency run: an 8 KiB allReduce (bf16) awaited
// in lockstep with the other ranks (every rank runs the same sequence, so none is left waiting).
// Variants run interleaved, BLOCK calls at a time for ROUNDS rounds, so that clock ramps and
// host noise fall on all of them alike. Prints one JSON object: per variant {p50, p99, min,
// samples} in µs. LAT_VARIANTS=a,b,... picks variants (default: all).
//   launch: the plan.launch() call alone (host cost of one launch), awaited outside the timing;
//     its FFI call to weft_collective is timed on its own as "launch.ffi"
//   ffiFloor: one trivial FFI call (weft_abi_version), the floor under launch.ffi
//   runSync: launch, then spin on the completion word (no event loop)
//   run: plan.run() awaited (defaults: no eager spin, the ticker's 3 µs turns)
//   run+eager: the same with a 20 µs eager spin (CommunicatorOptions.eagerSpinMicros, opt-in)
//   allReduce: `await comm.allReduce(x, y)`, the unprepared call (packs a plan each time)
import { rankEnvFromProcess, Store } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { native } from "../../lib/native.ts";

const env = rankEnvFromProcess();
const store = await Store.connect({ rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort });
const comm = await Communicator.create(store, env, env.localRank, { heapBytes: 64 << 20 });
const x = comm.empty([4096], "bf16").fillRandom(env.rank + 1);
const y = comm.empty([4096], "bf16");
const plan = comm.prepare.allReduce(x, y);
const BLOCK = Number(process.env.BLOCK ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const defaultEager = comm.eagerSpinMicros;

const symbols = native() as unknown as Record<string, (...a: unknown[]) => number>;
const rawCollective = symbols.weft_collective!;
const ffiTimes: number[] = [];
const abiOut = new Int32Array(1);

interface Variant {
  setup?(): void;
  teardown?(): void;
  call(): Promise<number>;
}
/** A variant's call(): the ms from calling `f` until what it returns has settled. */
const timedAwait = (f: () => Promise<unknown>) => async () => {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
};

const variants: Record<string, Variant> = {
  launch: {
    setup() {
      symbols.weft_collective = (...a: unknown[]) => {
        const t0 = performance.now();
        const r = rawCollective(...a);
        ffiTimes.push((performance.now() - t0) * 1000);
        return r;
      };
    },
    teardown() {
      symbols.weft_collective = rawCollective;
    },
    async call() {
      const t0 = performance.now();
      const seq = plan.launch();
      const dt = performance.now() - t0;
      await plan.promise(seq);
      return dt;
    },
  },
  ffiFloor: {
    async call() {
      const t0 = performance.now();
      for (let i = 0; i < 100; i++) native().weft_abi_version(abiOut);
      return (performance.now() - t0) / 100;
    },
  },
  runSync: {
    async call() {
      const t0 = performance.now();
      const seq = plan.launch();
      plan.wait(seq);
      return performance.now() - t0;
    },
  },
  run: {
    setup() {
      comm.eagerSpinMicros = defaultEager;
    },
    call: timedAwait(() => plan.run()),
  },
  "run+eager": {
    setup() {
      comm.eagerSpinMicros = 20;
    },
    teardown() {
      comm.eagerSpinMicros = defaultEager;
    },
    call: timedAwait(() => plan.run()),
  },
  allReduce: {
    call: timedAwait(() => comm.allReduce(x, y)),
  },
};
const chosen = process.env.LAT_VARIANTS ? process.env.LAT_VARIANTS.split(",") : Object.keys(variants);

for (let i = 0; i < 3000; i++) await plan.run();
const samples: Record<string, number[]> = Object.fromEntries(chosen.map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const name of chosen) {
    const v = variants[name]!;
    v.setup?.();
    for (let i = 0; i < BLOCK; i++) samples[name]!.push((await v.call()) * 1000);
    v.teardown?.();
  }
}
if (ffiTimes.length > 0) samples["launch.ffi"] = ffiTimes;
const out: Record<string, { p50: number; p99: number; min: number; samples: number }> = {};
for (const [name, t] of Object.entries(samples)) {
  t.sort((a, b) => a - b);
  out[name] = { p50: t[Math.floor(t.length / 2)]!, p99: t[Math.floor(t.length * 0.99)]!, min: t[0]!, samples: t.length };
}
x.dispose();
y.dispose();
await comm.dispose();
await store.close();
console.log(JSON.stringify(out));
process.exit(0);
