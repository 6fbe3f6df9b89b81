// One rank of the multi-node tests (test/multi-node.test.ts): a torchrun-style rank whose
// WEFT_NODE_ID puts it on its own node, so that two GPUs of one host are two nodes talking through
// the proxy and libfabric. Creates its communicator with Communicator.fromEnv(), runs every check
// of multi-node-checks.ts (CHECK_FILTER: a regex on the names), one JSON line per check, then
// disposes and checks that the transport left nothing behind.
import { Communicator } from "../../lib/comm.ts";
import { transportCounters } from "../../lib/transport.ts";
import { releaseDiffBuffers } from "./collective-checks.ts";
import { MULTI_NODE_CHECKS } from "./multi-node-checks.ts";
import { describeError, report, runChecks } from "./report-channel.ts";

/** GPU wait bound: short on the device runner so that a broken kernel fails fast. */
const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
let failures = 0;
let comm: Communicator | undefined;
const t0 = performance.now();
try {
  comm = await Communicator.fromEnv({ heapBytes: 512 << 20, timeoutMs: GPU_TIMEOUT_MS, interNodeBytes: 8 << 20, storeTimeoutMs: 60_000 });
  report({ name: "Communicator.fromEnv over nodes", ok: true, detail: `rank ${comm.rank}, provider ${comm.transportProvider}`, ms: performance.now() - t0 });
} catch (e) {
  report({ name: "Communicator.fromEnv over nodes", ok: false, error: JSON.stringify(describeError(e)) + " " + String((e as Error).stack) });
  process.exit(1);
}
failures += await runChecks(MULTI_NODE_CHECKS, { comm });
releaseDiffBuffers();
const t1 = performance.now();
try {
  await comm.dispose();
  const left = transportCounters();
  if (left.transports !== 0 || left.regions !== 0 || left.proxyThreads !== 0 || left.hostBuffers !== 0) {
    throw new Error(`left behind after dispose: ${JSON.stringify(left)}`);
  }
  report({ name: "dispose leaves no transport, region, proxy thread or host buffer", ok: true, detail: JSON.stringify(left), ms: performance.now() - t1 });
} catch (e) {
  failures++;
  report({ name: "dispose leaves no transport, region, proxy thread or host buffer", ok: false, error: String((e as Error).stack ?? e) });
}
process.exit(failures === 0 ? 0 : 1);
