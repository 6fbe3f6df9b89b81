// One rank of the one-process-per-GPU collective tests (test/comm.test.ts): reads RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT like any launched rank, runs every check of
// collective-checks.ts (CHECK_FILTER: a regex on the names) and prints one JSON line per check.
// WEFT_FROM_ENV_PORT: a second free port for a Communicator.fromEnv() smoke run.
import { rankEnvFromProcess, Store } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { CHECKS, releaseDiffBuffers, type CheckContext } from "./collective-checks.ts";
import { report, runChecks } from "./report-channel.ts";

/** GPU wait bound for the suite: short on the device runner so that a broken kernel fails fast. */
const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const env = rankEnvFromProcess();
let failures = 0;

// fromEnv end to end: its own store on another port, a barrier and an allReduce.
if (process.env.WEFT_FROM_ENV_PORT) {
  const t0 = performance.now();
  try {
    const c = await Communicator.fromEnv({ heapBytes: 64 << 20, env: { ...process.env, MASTER_PORT: process.env.WEFT_FROM_ENV_PORT } });
    using x = c.empty([1000], "f32").fill(c.rank + 1);
    await c.barrier();
    await c.allReduce(x);
    const got = (x.download() as Float32Array)[999];
    const want = (c.size * (c.size + 1)) / 2;
    x.dispose();
    await c.dispose();
    if (got !== want) throw new Error(`allReduce of rank+1 gave ${got}, expected ${want}`);
    report({ name: "Communicator.fromEnv: barrier + allReduce", ok: true, detail: `rank ${env.rank}: ${got}`, ms: performance.now() - t0 });
  } catch (e) {
    failures++;
    report({ name: "Communicator.fromEnv: barrier + allReduce", ok: false, error: String((e as Error).stack ?? e) });
  }
}

const store = await Store.connect({ rank: env.rank, worldSize: env.worldSize, addr: env.masterAddr, port: env.masterPort });
const device = env.localRank;
const comm = await Communicator.create(store, env, device, { heapBytes: 1536 << 20, timeoutMs: GPU_TIMEOUT_MS });
const ctx: CheckContext = {
  comms: [comm],
  world: env.worldSize,
  spawn: async (opts) => [await Communicator.create(store, env, device, opts)],
};
failures += await runChecks(CHECKS, ctx);
releaseDiffBuffers();
await comm.dispose();
await store.close();
process.exit(failures === 0 ? 0 : 1);
