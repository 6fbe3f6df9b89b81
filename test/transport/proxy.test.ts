// The proxy and the libfabric transport between real processes (one bun process per rank) over
// tcp;ofi_rxm on loopback, with the bootstrap store for the address exchange. CPU only: runs in CI.
// The ranks' code is test/transport/rank-worker.ts; each scenario there documents what it checks.
import { expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { runtime } from "../../lib/runtime/index.ts";
import { describeFabric } from "../support/fabric.ts";
import { nextReport, spawnWorker, type Worker } from "../support/report-channel.ts";
import { describeStore } from "../support/store-gate.ts";

const worker = join(import.meta.dirname, "rank-worker.ts");

// Loopback only, and the same provider on every rank.
const fabricEnv = { WEFT_FABRIC_PROVIDER: "tcp;ofi_rxm", FI_TCP_IFACE: "lo", FI_SOCKETS_IFACE: "lo" };

type Rank = Worker;

function spawnRank(rank: number, worldSize: number, port: number, scenario: string, env: Record<string, string>): Rank {
  return spawnWorker(worker, { ...fabricEnv, RANK: String(rank), WORLD_SIZE: String(worldSize), MASTER_PORT: String(port), SCENARIO: scenario, ...env });
}

/** Runs `scenario` on `worldSize` processes; returns each rank's result line (undefined for a rank
 * that died without one) in rank order. */
async function runRanks(worldSize: number, scenario: string, env: Record<string, string> = {}): Promise<any[]> {
  const r0 = spawnRank(0, worldSize, 0, scenario, env);
  const { port } = await nextReport(r0);
  expect(port).toBeGreaterThan(0);
  const ranks = [r0, ...Array.from({ length: worldSize - 1 }, (_, i) => spawnRank(i + 1, worldSize, port, scenario, env))];
  const results = await Promise.all(ranks.map(async (r) => {
    try {
      return await nextReport(r);
    } catch {
      return undefined;
    }
  }));
  await Promise.all(ranks.map((r) => r.proc.exited));
  for (const r of results) if (r?.error && scenario !== "killed-peer") throw new Error(`rank ${r.rank}: ${r.error}: ${r.message}`);
  return results;
}

// Skips (saying why) where libfabric or its tcp provider is missing; REQUIRE_FABRIC=1 fails instead.
// The ranks meet through the TCP store: skipped, saying why, where it cannot run in this runtime.
describeStore("between processes", [runtime.name], () => describeFabric("proxy + libfabric tcp;ofi_rxm between processes", "tcp;ofi_rxm", () => {
  test("10 000 puts of 1 B .. 4 MiB at random offsets, checksummed at the receiver, signals never ahead of data", async () => {
    const results = await runRanks(2, "random-writes", { WRITES: "10000", TIMEOUT_MS: "20000", SEED: "11" });
    console.log(`transport provider: ${results[0].provider}; ${results.map((r) =>
      `rank ${r.rank}: ${r.sent} puts sent, ${r.received} verified (${(r.bytesVerified / 2 ** 20).toFixed(0)} MiB), ${r.seconds.toFixed(1)} s`).join("; ")}`);
    let received = 0;
    for (const r of results) {
      expect(r.provider).toBe("tcp;ofi_rxm");
      expect(r.error).toBeNull();
      expect(r.earlySignals).toBe(0);
      expect(r.sent).toBe(5000);
      expect(r.received).toBe(5000);
      expect(r.stats.completed).toBe(r.stats.pushed);
      expect(r.stats.puts).toBe(5000);
      received += r.received;
    }
    expect(received).toBe(10000);
  }, 120_000);

  test("3 ranks in a ring: every put checked, including 1 B and 4 MiB ones", async () => {
    const results = await runRanks(3, "random-writes", { WRITES: "1500", TIMEOUT_MS: "20000", SEED: "12" });
    for (const r of results) {
      expect(r.received).toBe(500);
      expect(r.earlySignals).toBe(0);
    }
  }, 60_000);

  test("a signal is never observed before the data of its put and of every earlier put to that peer", async () => {
    const [sender, receiver] = await runRanks(2, "signal-order", { WRITES: "4000", TIMEOUT_MS: "20000" });
    expect(sender.pushed).toBe(4000);
    expect(receiver.complete).toBe(4000);
    expect(receiver.violations).toBe(0);
    expect(receiver.firstViolation).toBeNull();
    // The receiver saw the signal move many times, so the check ran at many points of the stream.
    expect(receiver.distinct).toBeGreaterThan(50);
  }, 60_000);

  test("the ordering check catches a signal that overtakes its data (fault injection)", async () => {
    const [, receiver] = await runRanks(2, "signal-order", { WRITES: "4000", TIMEOUT_MS: "5000", DROP_EVERY: "997" });
    expect(receiver.violations).toBeGreaterThan(0);
    expect(receiver.firstViolation).toContain("not there yet");
  }, 60_000);

  test("FIFO wrap-around, backpressure when full, concurrent producers, invalid commands refused", async () => {
    const [r] = await runRanks(1, "fifo", { TIMEOUT_MS: "20000" });
    expect(r.error).toBeNull();
    // 4000 puts through a 4-slot FIFO: ~1000 laps.
    expect(r.wrapBad).toBe(0);
    expect(r.afterWrap.completed).toBe(4000);
    expect(r.afterWrap.consumed).toBe(4000);
    expect(r.afterWrap.maxBatch).toBeLessThanOrEqual(3);
    // Paused proxy: the fifth push waits its 300 ms out, a non-blocking one fails at once.
    expect(r.fullError.code).toBe("E_TIMEOUT");
    expect(r.fullError.message).toContain("FIFO stayed full");
    expect(r.fullMs).toBeGreaterThanOrEqual(290);
    expect(r.fullMs).toBeLessThan(3000);
    expect(r.nonBlocking.code).toBe("E_TIMEOUT");
    expect(r.completedWhilePaused).toBe(0);
    expect(r.resumed).toBe(4);
    // Four threads x 3000 pushes: no ticket lost or taken twice, each word ends at its last value.
    expect(r.threads).toEqual([3000, 3000, 3000, 3000]);
    expect(r.finalWords).toEqual([3000, 3000, 3000, 3000]);
    expect(r.stats.completed).toBe(r.stats.pushed);
    expect(r.stats.pushed).toBe(4000 + 4 + 12000 + 1);
    expect(r.invalid.peer).toMatch(/E_INVALID.*peer 1 is not a rank/);
    expect(r.invalid.bounds).toMatch(/E_INVALID.*outside src_region/);
    expect(r.invalid.region0).toMatch(/E_INVALID.*region/);
    expect(r.invalid.align).toMatch(/E_INVALID.*8-byte aligned/);
    expect(r.invalid.tooMany).toMatch(/E_INVALID.*4 slots/);
  }, 60_000);

  test("4 ranks: put+signal to every peer then a proxy barrier, 20 rounds x 3 cycles; mid-transfer stop; nothing leaks", async () => {
    const results = await runRanks(4, "all-to-all", { TIMEOUT_MS: "20000", ROUNDS: "20" });
    for (const r of results) {
      expect(r.checked).toBe(3 * 20 * 3);
      expect(r.bad).toBe(0);
      // Stopping the proxy with 32 x 4 MiB puts in flight is bounded.
      expect(r.stopMs).toBeLessThan(2000);
      for (const c of r.cycles) {
        expect(c.counters).toEqual({ transports: 0, regions: 0, proxyThreads: 0, hostBuffers: 0 });
      }
      // libfabric keeps its own threads after first use; later cycles must not add any.
      expect(r.cycles[2].threads).toBe(r.cycles[0].threads);
    }
  }, 60_000);

  for (const phase of ["after", "before"] as const) {
    test(`a SIGKILLed peer (${phase} the first transfer) fails the proxy within its timeout, no hang`, async () => {
      const [r0, r1] = await runRanks(2, "killed-peer", { TIMEOUT_MS: "3000", PHASE: phase });
      expect(r1).toBeUndefined(); // it died
      expect(r0.completed).toBeUndefined();
      expect(["E_TIMEOUT", "E_PEER", "E_TRANSPORT"]).toContain(r0.code);
      expect(r0.message).toContain("rank 1");
      expect(r0.proxyError).toBe(r0.code);
      expect(r0.ms).toBeLessThan(3000 * 3);
    }, 60_000);
  }
}));
