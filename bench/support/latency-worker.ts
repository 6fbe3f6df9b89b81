// One rank of bench/collectives.ts's per-process latency run: an 8 KiB allReduce (bf16) awaited
// ITERS times per variant, in lockstep with the other ranks (every rank runs the same sequence,
// so none is left waiting). Prints one JSON object: per variant {p50, p99, min, samples} in µs.
//   launch: the plan.launch() call alone (host cost of one launch)
//   runSync: launch, then spin on the completion word (no event loop)
//   run: launch, then await the Promise (completion ticker; default pollSpinMicros)
//   run+spinN: the same with the ticker polling N µs per turn (0: one pass per turn)
import { rankEnvFromProcess, Store } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";

const env = rankEnvFromProcess();
const store = await Store.connect({ rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort });
const comm = await Communicator.create(store, env, env.localRank, { heapBytes: 64 << 20 });
const x = comm.empty([4096], "bf16").fillRandom(env.rank + 1);
const y = comm.empty([4096], "bf16");
const plan = comm.prepare.allReduce(x, y);
const iters = Number(process.env.ITERS ?? 10000);

function stats(t: Float64Array) {
  t.sort();
  return { p50: t[Math.floor(t.length / 2)]!, p99: t[Math.floor(t.length * 0.99)]!, min: t[0]!, samples: t.length };
}

const out: Record<string, ReturnType<typeof stats>> = {};
for (let i = 0; i < 2000; i++) await plan.run();
{
  const launch = new Float64Array(iters);
  const total = new Float64Array(iters);
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    const seq = plan.launch();
    launch[i] = (performance.now() - t0) * 1000;
    await plan.promise(seq);
    total[i] = (performance.now() - t0) * 1000;
  }
  out.launch = stats(launch);
  out.run = stats(total);
}
{
  const t = new Float64Array(iters);
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    plan.runSync();
    t[i] = (performance.now() - t0) * 1000;
  }
  out.runSync = stats(t);
}
const defaultSpin = comm.pollSpinMicros;
for (const spin of [0, 10]) {
  comm.pollSpinMicros = spin;
  const t = new Float64Array(iters);
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await plan.run();
    t[i] = (performance.now() - t0) * 1000;
  }
  out[`run+spin${spin}`] = stats(t);
}
comm.pollSpinMicros = defaultSpin;
x.dispose();
y.dispose();
await comm.dispose();
await store.close();
console.log(JSON.stringify(out));
process.exit(0);
