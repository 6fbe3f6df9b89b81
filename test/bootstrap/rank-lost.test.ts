// The store's rank-lost notices between real processes (issue 24, finding 6): what the failure
// watchdog (lib/comm/watchdog.ts) acts on. A job of 3 ranks: rank 0 (which hosts the store) and
// rank 2 in child processes (store-watch-worker.ts), rank 1 in this process with the watchdog over
// its store and a recording abort. kill -9 of a rank reaches every other rank within 1 s; a clean
// close reaches none; a stranger without the token can neither forge a notice nor cause one.
// CPU only, under Bun and Deno: runs in CI.
import { expect, test } from "../support/test-api.ts";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { Store } from "../../lib/bootstrap.ts";
import { watchForLostRanks } from "../../lib/comm/watchdog.ts";
import { runtime } from "../../lib/runtime/index.ts";
import { spawnWorker, type Worker } from "../support/report-channel.ts";
import { describeStore } from "../support/store-gate.ts";
import { rawFrame, RawOp, stranger, within } from "../support/stranger.ts";

const TOKEN = "rank-lost-test-token-0123456789";
const worker = join(import.meta.dirname, "..", "support", "store-watch-worker.ts");
const NOTICE_MS = 1000;

/** A worker's reports as they arrive, each stamped with the time this process read it. */
class Reports {
  readonly items: any[] = [];

  constructor(w: Worker) {
    void (async () => {
      for await (const r of w.lines) this.items.push({ ...r, at: performance.now() });
    })();
  }

  /** The first report matching `pred`, or undefined when none came within `ms`. */
  async first(pred: (r: any) => boolean, ms: number): Promise<any> {
    const deadline = performance.now() + ms;
    for (;;) {
      const hit = this.items.find(pred);
      if (hit || performance.now() >= deadline) return hit;
      await sleep(10);
    }
  }

  get notices(): any[] {
    return this.items.filter((r) => r.lost !== undefined);
  }
}

interface Job {
  port: number;
  workers: { 0: Worker; 2: Worker };
  reports: { 0: Reports; 2: Reports };
  /** Rank 1, this process. */
  me: Store;
  /** What the watchdog over `me` declared failed. */
  aborts: { rank: number; at: number }[];
  stopWatch(): void;
}

/** Kills worker rank `victim` with SIGKILL: the other worker and rank 1's watchdog must hear of it,
 * naming it, within NOTICE_MS (waiting at most 5 s, so that a late notice fails with its time). */
async function killAndHear(job: Job, victim: 0 | 2, reason: string): Promise<void> {
  const witness = victim === 0 ? 2 : 0;
  const t0 = performance.now();
  job.workers[victim].proc.kill("SIGKILL");
  const seen = await job.reports[witness].first((r) => r.lost !== undefined, 5000);
  for (const deadline = performance.now() + 5000; job.aborts.length === 0 && performance.now() < deadline;) await sleep(5);
  console.log(`  rank ${witness} notice after ${seen ? (seen.at - t0).toFixed(0) : "-"} ms; rank 1 abort after ` +
    `${job.aborts[0] ? (job.aborts[0].at - t0).toFixed(0) : "-"} ms`);
  expect(seen?.lost).toBe(victim);
  expect(seen.reason).toContain(reason);
  expect(seen.at - t0).toBeLessThan(NOTICE_MS);
  expect(job.aborts.map((a) => a.rank)).toEqual([victim]);
  expect(job.aborts[0]!.at - t0).toBeLessThan(NOTICE_MS);
  expect(await job.workers[victim].proc.exited).toBe(137);
}

function spawnRank(rank: number, port: number): Worker {
  return spawnWorker(worker, { RANK: String(rank), WORLD_SIZE: "3", MASTER_PORT: String(port), WEFT_STORE_TOKEN: TOKEN });
}

/** Ranks 0 and 2 as processes, rank 1 here; resolves once all three have passed barrier "joined". */
async function withJob(body: (job: Job) => Promise<void>): Promise<void> {
  const w0 = spawnRank(0, 0);
  const r0 = new Reports(w0);
  let w2: Worker | undefined;
  let me: Store | undefined;
  let stopWatch = () => {};
  try {
    const first = await r0.first((r) => r.port !== undefined, 20_000);
    if (!first) throw new Error(`rank 0's worker reported no port (exit ${await within(w0.proc.exited, 100, "still running")})`);
    w2 = spawnRank(2, first.port);
    const r2 = new Reports(w2);
    me = await Store.connect({ rank: 1, worldSize: 3, addr: "127.0.0.1", port: first.port, token: TOKEN, timeoutMs: 20_000 });
    const aborts: Job["aborts"] = [];
    stopWatch = watchForLostRanks(me, { rank: 1, size: 3, abort: (rank) => void aborts.push({ rank, at: performance.now() }) });
    await me.barrier("joined");
    for (const r of [r0, r2]) expect(await r.first((x) => x.joined, 10_000)).toBeDefined();
    await body({ port: first.port, workers: { 0: w0, 2: w2 }, reports: { 0: r0, 2: r2 }, me, aborts, stopWatch });
  } finally {
    stopWatch();
    await me?.close().catch(() => {});
    for (const w of [w0, w2]) {
      w?.proc.kill("SIGKILL");
      await w?.proc.exited;
    }
  }
}

describeStore("rank-lost notices (the failure watchdog's source)", [runtime.name], () => {
  test("kill -9 of rank 2: rank 0 (the host) and rank 1 get the notice naming rank 2 within 1 s", () =>
    withJob(async (job) => {
      const { me, reports } = job;
      // A listener that throws is reported on stderr and does not keep the notice from the next one.
      const afterThrower: number[] = [];
      const stops = [me.onRankLost(() => { throw new Error("a listener's own bug (expected in this test)"); }),
        me.onRankLost((r) => afterThrower.push(r))];
      await killAndHear(job, 2, "rank 2 left the store without closing it");
      expect(afterThrower).toEqual([2]);
      stops.forEach((stop) => stop());
      // A listener that subscribes later hears of the known loss at once.
      const late: number[] = [];
      const stop = me.onRankLost((r) => late.push(r));
      stop();
      expect(late).toEqual([2]);
      expect(reports[0].notices.length).toBe(1);
    }), 30_000);

  test("kill -9 of rank 0 (the store's host): ranks 1 and 2 get the notice naming rank 0 within 1 s", () =>
    withJob((job) => killAndHear(job, 0, "lost its connection to the store of rank 0")), 30_000);

  test("a clean close gives no notice: rank 2 leaves, then rank 0 and rank 1 close together", () =>
    withJob(async ({ workers, reports, me, aborts }) => {
      await me.set("close/2", "");
      expect(await reports[2].first((r) => r.closed, 5000)).toBeDefined();
      expect(await workers[2].proc.exited).toBe(0);
      await sleep(300);
      expect(reports[0].notices).toEqual([]);
      expect(aborts).toEqual([]);
      // Rank 0 closes while rank 1 is still connected (its host waits for rank 1 to leave), and rank
      // 1 closes with the watchdog still subscribed.
      await me.set("close/0", "");
      await me.close();
      expect(await reports[0].first((r) => r.closed, 5000)).toBeDefined();
      expect(await workers[0].proc.exited).toBe(0);
      expect([...reports[0].notices, ...reports[2].notices]).toEqual([]);
      expect(aborts).toEqual([]);
    }), 30_000);

  test("a stranger without the token cannot forge a notice nor cause one; a real death still gives one", () =>
    withJob(async (job) => {
      const { port, reports, aborts } = job;
      // A DEAD frame of its own (the host's notice), before any handshake: hung up on.
      const forger = await stranger(port);
      forger.send(rawFrame(RawOp.DEAD, 2));
      forger.send(rawFrame(RawOp.DEAD, 0));
      // A claim of rank 2 without the token, then gone: denied, so no rank was ever its.
      const claimer = await stranger(port);
      claimer.send(rawFrame(RawOp.AUTH, 2, "3", new Uint8Array(randomBytes(64))));
      // A connection that just leaves.
      const leaver = await stranger(port);
      leaver.end();
      for (const s of [forger, claimer, leaver]) expect(await within(s.closed, 6000, -1)).toBeGreaterThanOrEqual(0);
      await sleep(500);
      expect([...reports[0].notices, ...reports[2].notices]).toEqual([]);
      expect(aborts).toEqual([]);
      // The notices still flow: the silence above is not a broken path.
      await killAndHear(job, 2, "rank 2 left the store without closing it");
    }), 30_000);
});
