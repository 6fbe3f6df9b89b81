// One rank of the one-process-per-GPU tests of the fused TP ops (test/ops/tp.test.ts): reads RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT like any launched rank, runs every check of
// tp-checks.ts (CHECK_FILTER: a regex on the names) and prints one JSON line per check.
import { Communicator } from "../../lib/comm.ts";
import { TP_CHECKS, type TpContext } from "./tp-checks.ts";
import { runChecks } from "./report-channel.ts";

const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const comm = await Communicator.fromEnv({ heapBytes: 1536 << 20, timeoutMs: GPU_TIMEOUT_MS });
const ctx: TpContext = { comms: [comm], world: comm.size };
const failures = await runChecks(TP_CHECKS, ctx);
await comm.dispose();
process.exit(failures === 0 ? 0 : 1);
