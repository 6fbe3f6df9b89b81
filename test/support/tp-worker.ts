// One rank of the one-process-per-GPU tests of the fused TP ops (test/ops/tp.test.ts): reads RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT like any launched rank, runs every check of
// tp-checks.ts (CHECK_FILTER: a regex on the names) and prints one JSON line per check.
import { Communicator } from "../../lib/comm.ts";
import "../../lib/ops/tp.ts";
import { TP_CHECKS, type TpContext } from "./tp-checks.ts";

function report(x: unknown): void {
  process.stdout.write(JSON.stringify(x) + "\n");
}

const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const filter = new RegExp(process.env.CHECK_FILTER ?? ".");
let failures = 0;
const comm = await Communicator.fromEnv({ heapBytes: 1536 << 20, timeoutMs: GPU_TIMEOUT_MS });
const ctx: TpContext = { comms: [comm], world: comm.size };
for (const check of TP_CHECKS) {
  if (!filter.test(check.name)) continue;
  const t0 = performance.now();
  try {
    const detail = await check.run(ctx);
    report({ name: check.name, ok: true, detail, ms: performance.now() - t0 });
  } catch (e) {
    failures++;
    report({ name: check.name, ok: false, error: String((e as Error).stack ?? e), ms: performance.now() - t0 });
  }
}
await comm.dispose();
process.exit(failures === 0 ? 0 : 1);
