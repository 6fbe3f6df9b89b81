// One rank of bench/collectives.ts's per-process latency run: an 8 KiB allReduce (bf16) awaited
// in lockstep with the other ranks (every rank runs the same sequence, so none is left waiting).
// Variants run interleaved, BLOCK calls at a time for ROUNDS rounds, so that clock ramps and
// host noise fall on all of them alike. Prints one JSON object: per variant {p50, p99, min,
// samples} in µs.
//   launch: the plan.launch() call alone (host cost of one launch), awaited outside the timing
//   runSync: launch, then spin on the completion word (no event loop)
//   run: launch, then await the Promise (completion ticker at the default pollSpinMicros)
//   run+spinN: the same with the ticker polling N µs per turn (0: one pass per turn)
import { rankEnvFromProcess, Store } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";

const env = rankEnvFromProcess();
const store = await Store.connect({ rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort });
const comm = await Communicator.create(store, env, env.localRank, { heapBytes: 64 << 20 });
const x = comm.empty([4096], "bf16").fillRandom(env.rank + 1);
const y = comm.empty([4096], "bf16");
const plan = comm.prepare.allReduce(x, y);
const BLOCK = 1000;
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const defaultSpin = comm.pollSpinMicros;

const variants: Record<string, () => Promise<number>> = {
  launch: async () => {
    const t0 = performance.now();
    const seq = plan.launch();
    const dt = performance.now() - t0;
    await plan.promise(seq);
    return dt;
  },
  runSync: async () => {
    const t0 = performance.now();
    plan.runSync();
    return performance.now() - t0;
  },
  run: async () => {
    comm.pollSpinMicros = defaultSpin;
    const t0 = performance.now();
    await plan.run();
    return performance.now() - t0;
  },
  "run+spin0": async () => {
    comm.pollSpinMicros = 0;
    const t0 = performance.now();
    await plan.run();
    return performance.now() - t0;
  },
  "run+spin10": async () => {
    comm.pollSpinMicros = 10;
    const t0 = performance.now();
    await plan.run();
    return performance.now() - t0;
  },
};

for (let i = 0; i < 3000; i++) await plan.run();
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, f] of Object.entries(variants)) {
    for (let i = 0; i < BLOCK; i++) samples[name]!.push((await f()) * 1000);
  }
}
comm.pollSpinMicros = defaultSpin;
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
