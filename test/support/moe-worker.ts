// One rank of the one-process-per-GPU MoE tests (test/ops/moe.test.ts): reads RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT like any launched rank, runs every check of moe-checks.ts
// and moe-layer-checks.ts (CHECK_FILTER: a regex on the names) and prints one JSON line per check.
import { Communicator } from "../../lib/comm.ts";
import { MOE_CHECKS, type MoeContext } from "./moe-checks.ts";
import { LAYER_CHECKS } from "./moe-layer-checks.ts";
import { runChecks } from "./report-channel.ts";

const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const comm = await Communicator.fromEnv({ heapBytes: 3 << 30, timeoutMs: GPU_TIMEOUT_MS });
const ctx: MoeContext = { comms: [comm], world: comm.size };
const failures = await runChecks([...MOE_CHECKS, ...LAYER_CHECKS], ctx);
await comm.dispose();
process.exit(failures === 0 ? 0 : 1);
