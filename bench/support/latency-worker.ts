// One rank of bench/collectives.ts's per-process latency run: awaits an 8 KiB allReduce (bf16)
// ITERS times in lockstep with the other ranks (every rank runs the same count, so none is left
// waiting) and prints {p50, p99, min, samples} in µs.
import { rankEnvFromProcess, Store } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";

const env = rankEnvFromProcess();
const store = await Store.connect({ rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort });
const comm = await Communicator.create(store, env, env.localRank, { heapBytes: 64 << 20 });
const x = comm.empty([4096], "bf16").fillRandom(env.rank + 1);
const y = comm.empty([4096], "bf16");
const plan = comm.prepare.allReduce(x, y);
const iters = Number(process.env.ITERS ?? 20000);
for (let i = 0; i < 2000; i++) await plan.run();
const t = new Float64Array(iters);
for (let i = 0; i < iters; i++) {
  const t0 = performance.now();
  await plan.run();
  t[i] = (performance.now() - t0) * 1000;
}
t.sort();
x.dispose();
y.dispose();
await comm.dispose();
await store.close();
console.log(JSON.stringify({ p50: t[Math.floor(iters / 2)], p99: t[Math.floor(iters * 0.99)], min: t[0], samples: iters }));
process.exit(0);
