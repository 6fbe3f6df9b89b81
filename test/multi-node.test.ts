// A communicator across nodes, on the GPUs (libfabric tcp;ofi_rxm unless WEFT_FABRIC_PROVIDER says
// otherwise; the node plan itself is checked on the CPU in test/comm/node-plan.test.ts):
//   - two bun processes with WEFT_NODE_ID set per rank, so each GPU of this host is its own node:
//     the hierarchical collectives and the inter-node TP plans (multi-node-checks.ts);
//   - one process driving 2 nodes x 2 ranks (each GPU hosts one rank of each node): NVLink inside
//     a node and the proxy between nodes in the same kernel.
import { afterAll, beforeAll, expect, test } from "./support/test-api.ts";
import { join } from "node:path";

import { LocalStore } from "../lib/bootstrap.ts";
import { Communicator } from "../lib/comm.ts";
import { transportCounters } from "../lib/transport.ts";
import { releaseDiffBuffers } from "./support/collective-checks.ts";
import { describeGpu } from "./support/gpu.ts";
import { prepareAllGather, prepareAllReduce, prepareReduceScatter, runAll, sizes } from "./support/multi-node-checks.ts";
import { runCheckWorkers } from "./support/report-channel.ts";

describeGpu("hierarchical collectives, each GPU its own node (2 processes, proxy + libfabric)", 2, () => {
  test("every check passes on both ranks", async () => {
    const worker = join(import.meta.dirname, "support", "multi-node-worker.ts");
    const provider = process.env.WEFT_FABRIC_PROVIDER ?? "tcp;ofi_rxm";
    console.log(`  provider requested: ${provider}`);
    const { failed, exits, reported } = await runCheckWorkers(worker, 2, (rank) => ({ WEFT_FABRIC_PROVIDER: provider, WEFT_NODE_ID: `node${rank}` }));
    expect(failed).toEqual([]);
    expect(exits).toEqual([0, 0]);
    expect(reported.every((n) => n >= 10)).toBe(true);
  }, 300_000);
});

describeGpu("hierarchical collectives, 2 nodes x 2 ranks in one process (NVLink inside a node, proxy between)", 2, () => {
  // Ranks 0, 1 form node 'a' and ranks 2, 3 node 'b'; local rank l runs on GPU l, so each GPU hosts
  // one rank of each node (two communicators, two proxies, never mapped to each other). Only the
  // collectives: their kernels take a few dozen CTAs, so the two nodes' kernels on one GPU run side
  // by side (the fused ops take every SM and cannot share a GPU this way).
  const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
  let comms: Communicator[] = [];

  beforeAll(async () => {
    const stores = LocalStore.group(4, { timeoutMs: 60_000 });
    const made = await Promise.allSettled([0, 1, 2, 3].map((rank) => Communicator.create(stores[rank]!,
      { rank, worldSize: 4, localRank: rank % 2, localWorldSize: 2, nodeId: rank < 2 ? "a" : "b" }, rank % 2,
      { heapBytes: 256 << 20, timeoutMs: GPU_TIMEOUT_MS, interNodeBytes: 1 << 20, provider: process.env.WEFT_FABRIC_PROVIDER ?? "tcp;ofi_rxm" })));
    comms = made.flatMap((m) => (m.status === "fulfilled" ? [m.value] : []));
    const failed = made.find((m) => m.status === "rejected") as PromiseRejectedResult | undefined;
    if (failed) {
      await Communicator.disposeAll(comms);
      throw failed.reason;
    }
  }, 120_000);

  afterAll(async () => {
    releaseDiffBuffers();
    await Communicator.disposeAll(comms);
    expect(transportCounters()).toEqual({ transports: 0, regions: 0, proxyThreads: 0, hostBuffers: 0 });
  }, 120_000);

  test("node plan: 2 nodes of 2, node-major", () => {
    expect(comms.map((c) => [c.rank, c.node, c.nodes, c.localRank, c.localSize, c.device])).toEqual([
      [0, 0, 2, 0, 2, 0], [1, 0, 2, 1, 2, 1], [2, 1, 2, 0, 2, 0], [3, 1, 2, 1, 2, 1],
    ]);
    console.log(`  provider ${comms[0]!.transportProvider}`);
  });

  let tag = 9000;
  for (const dtype of ["bf16", "f32"] as const) {
    test(`allGather, reduceScatter, allReduce ${dtype} at every size up to the staging`, async () => {
      let worst = 0;
      for (const n of sizes(comms[0]!, dtype)) {
        const t = tag++;
        await runAll(comms.map((c) => prepareAllGather(c, dtype, n, t)));
        const t2 = tag++;
        worst = Math.max(worst, ...(await runAll(comms.map((c) => prepareReduceScatter(c, dtype, n, t2)))));
      }
      for (const n of sizes(comms[0]!, dtype, true)) {
        const t = tag++;
        worst = Math.max(worst, ...(await runAll(comms.map((c) => prepareAllReduce(c, dtype, n, t, n % 2 === 1)))));
      }
      console.log(`  ${dtype}: worst rel ${worst.toExponential(2)}`);
    }, 120_000);
  }

  test("100 back-to-back rounds without reset, every result checked", async () => {
    for (let i = 0; i < 100; i++) {
      const n = 1 + ((i * 7919) % 20_000);
      const [t1, t2, t3] = [tag++, tag++, tag++];
      await runAll(comms.map((c) => prepareAllReduce(c, "bf16", n, t1, i % 2 === 0)));
      await runAll(comms.map((c) => prepareAllGather(c, "f32", n, t2)));
      await runAll(comms.map((c) => prepareReduceScatter(c, "bf16", n, t3)));
      await Promise.all(comms.map((c) => c.barrier()));
    }
  }, 120_000);
});
