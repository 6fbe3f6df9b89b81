// The failure watchdog (lib/comm/watchdog.ts) without a GPU: what it does with a store's rank-lost
// notices, and Store.onRankLost's own rules in one process. Between processes, with kill -9:
// test/bootstrap/rank-lost.test.ts; on the GPU, with fused ops: test/comm/kill-rank.test.ts.
import { describe, expect, test } from "../support/test-api.ts";
import { setTimeout as sleep } from "node:timers/promises";

import { LocalStore, Store, type RankLostListener } from "../../lib/bootstrap.ts";
import { watchForLostRanks } from "../../lib/comm/watchdog.ts";
import { ArgumentError, DisposedError } from "../../lib/errors.ts";

/** A store's notice side and nothing else. */
class Notices {
  readonly listeners = new Set<RankLostListener>();

  onRankLost(l: RankLostListener): () => void {
    this.listeners.add(l);
    return () => void this.listeners.delete(l);
  }

  tell(rank: number): void {
    for (const l of this.listeners) l(rank, `rank ${rank} left the store without closing it (a test)`);
  }
}

describe("the failure watchdog", () => {
  test("declares each reported rank of the group failed at once, and ignores ranks outside it", () => {
    const store = new Notices();
    const aborted: number[] = [];
    const stop = watchForLostRanks(store, { rank: 0, size: 4, abort: (r) => void aborted.push(r) });
    store.tell(3);
    expect(aborted).toEqual([3]); // synchronously, inside the notice
    for (const bad of [4, -1, 1.5, NaN]) store.tell(bad);
    store.tell(1);
    expect(aborted).toEqual([3, 1]);
    stop();
  });

  test("stop() unsubscribes (idempotently): later notices reach nothing", () => {
    const store = new Notices();
    const aborted: number[] = [];
    const stop = watchForLostRanks(store, { rank: 1, size: 2, abort: (r) => void aborted.push(r) });
    expect(store.listeners.size).toBe(1);
    stop();
    stop();
    expect(store.listeners.size).toBe(0);
    store.tell(0);
    expect(aborted).toEqual([]);
  });

  test("a communicator disposed meanwhile is no error; any other failure of abort reaches the store", () => {
    const store = new Notices();
    watchForLostRanks(store, { rank: 0, size: 2, abort: () => { throw new DisposedError("Communicator.abort", "Communicator"); } });
    expect(() => store.tell(1)).not.toThrow();
    const other = new Notices();
    watchForLostRanks(other, { rank: 0, size: 2, abort: () => { throw new Error("native failure"); } });
    expect(() => other.tell(1)).toThrow("native failure");
  });

  test("a store without notices (LocalStore: every rank in this process) gets no watchdog", async () => {
    const [s] = LocalStore.group(2);
    const stop = watchForLostRanks(s!, { rank: 0, size: 2, abort: () => { throw new Error("never"); } });
    stop();
    await s!.close();
  });
});

describe("Store.onRankLost in one process", () => {
  test("a clean close() reports nothing, on the rank that leaves nor on the host; the rules of the call", async () => {
    const r0 = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: 0, timeoutMs: 5000 });
    const r1 = await Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: r0.port, timeoutMs: 5000 });
    const heard: number[] = [];
    r0.onRankLost((r) => heard.push(r));
    r1.onRankLost((r) => heard.push(r));
    expect(() => r1.onRankLost("no" as unknown as RankLostListener)).toThrow(ArgumentError);
    await Promise.all([r0.barrier("both"), r1.barrier("both")]);
    await r1.close();
    await sleep(100);
    await r0.close();
    expect(heard).toEqual([]);
    expect(() => r0.onRankLost(() => {})).toThrow(DisposedError);
  });
});
