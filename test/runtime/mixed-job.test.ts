// One job, two runtimes: a Bun rank and a Deno rank share the TCP rendezvous store (each runtime
// hosting it in turn) and move data through the libfabric transport and proxy, with the workers of
// test/bootstrap.test.ts and test/transport/proxy.test.ts. CPU only. Skips, saying why, where the
// store cannot run under one of the runtimes here (store-gate.ts), or libfabric's tcp is missing.
import { expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { testFabric } from "../support/fabric.ts";
import type { RuntimeName } from "../support/processes.ts";
import { nextReport, spawnWorker } from "../support/report-channel.ts";
import { describeStore } from "../support/store-gate.ts";

const storeWorker = join(import.meta.dirname, "..", "support", "store-worker.ts");
const rankWorker = join(import.meta.dirname, "..", "transport", "rank-worker.ts");

/** Rank r runs under runtimes[r]; rank 0 hosts the store. Returns every rank's result and exit. */
async function job(script: string, runtimes: RuntimeName[], env: Record<string, string>) {
  const world = String(runtimes.length);
  const spawn = (rank: number, port: number) =>
    spawnWorker(script, { ...env, RANK: String(rank), WORLD_SIZE: world, MASTER_PORT: String(port) }, runtimes[rank]);
  const r0 = spawn(0, 0);
  const { port } = await nextReport(r0);
  expect(port).toBeGreaterThan(0);
  const ranks = [r0, ...runtimes.slice(1).map((_, i) => spawn(i + 1, port))];
  const results = await Promise.all(ranks.map((r) => nextReport(r)));
  const exits = await Promise.all(ranks.map((r) => r.proc.exited));
  return { results, exits };
}

describeStore("a Bun rank and a Deno rank in one job", ["bun", "deno"], () => {
  for (const runtimes of [["bun", "deno"], ["deno", "bun"]] as RuntimeName[][]) {
    test(`store: set/get/wait/barrier/allGather, 3 MiB values (rank 0 ${runtimes[0]}, rank 1 ${runtimes[1]})`, async () => {
      const { results, exits } = await job(storeWorker, runtimes, { SCENARIO: "basic", TIMEOUT_MS: "15000" });
      expect(exits).toEqual([0, 0]);
      for (const r of results) {
        expect(r.got).toEqual(["value of 0", "value of 1"]);
        expect(r.gathered).toEqual([[0, 0, 255], [1, 2, 255]]);
        expect(r.bigOk).toBe(true);
      }
    }, 60_000);
  }

  testFabric("transport + proxy: 2000 puts of 1 B .. 4 MiB, checked at the receiver (rank 0 bun, rank 1 deno)", "tcp;ofi_rxm", async () => {
    const { results, exits } = await job(rankWorker, ["bun", "deno"], {
      SCENARIO: "random-writes", WRITES: "2000", TIMEOUT_MS: "20000", SEED: "21",
      WEFT_FABRIC_PROVIDER: "tcp;ofi_rxm", FI_TCP_IFACE: "lo", FI_SOCKETS_IFACE: "lo",
    });
    expect(exits).toEqual([0, 0]);
    for (const r of results) {
      expect(r.error).toBeNull();
      expect(r.earlySignals).toBe(0);
      expect(r.sent).toBe(1000);
      expect(r.received).toBe(1000);
    }
  }, 120_000);
});
