// A rank of a multi-process bootstrap test (test/bootstrap.test.ts). Rank 0 hosts the store on a
// free port and prints {"port": n}; every rank then runs SCENARIO and prints one JSON result line.
//   RANK, WORLD_SIZE, MASTER_PORT (0 on rank 0), SCENARIO, TIMEOUT_MS
import { setTimeout as sleep } from "node:timers/promises";

import { connectWorkerStore, describeError, report } from "./report-channel.ts";

const rank = Number(process.env.RANK);
const worldSize = Number(process.env.WORLD_SIZE);
const scenario = process.env.SCENARIO ?? "basic";
const timeoutMs = Number(process.env.TIMEOUT_MS ?? 20000);

const store = await connectWorkerStore(rank, worldSize, timeoutMs);

/** Runs a scenario's waits and reports how they ended: ok, or the error they threw (what the
 * test checks: its class, code and message). */
async function reportOutcome(waits: () => Promise<unknown>): Promise<void> {
  try {
    await waits();
    report({ rank, ok: true });
  } catch (e) {
    report({ rank, ...describeError(e) });
  }
}

try {
  switch (scenario) {
    case "basic": {
      await store.set(`key/${rank}`, `value of ${rank}`);
      const got: string[] = [];
      for (let r = 0; r < worldSize; r++) got.push(new TextDecoder().decode(await store.get(`key/${r}`)));
      await store.wait(Array.from({ length: worldSize }, (_, r) => `key/${r}`));
      // The same barrier name twice: each call is its own generation.
      await store.barrier("twice");
      await store.barrier("twice");
      const gathered = await store.allGather("ag", Uint8Array.of(rank, rank * 2, 255));
      // A large value crosses many TCP chunks.
      const big = new Uint8Array(3 << 20).map((_, i) => (i * 7 + rank) & 0xff);
      await store.set(`big/${rank}`, big);
      const peerBig = await store.get(`big/${(rank + 1) % worldSize}`);
      let bigOk = peerBig.length === big.length;
      for (let i = 0; bigOk && i < peerBig.length; i++) bigOk = peerBig[i] === ((i * 7 + (rank + 1) % worldSize) & 0xff);
      await store.barrier("end");
      report({ rank, got, gathered: gathered.map((g) => Array.from(g)), bigOk });
      break;
    }
    case "get-timeout": {
      // Every rank joins first: rank 0 closes its store right after its own timeout, and a rank
      // still starting (a loaded host) would then find no store at all.
      await store.barrier("joined");
      await reportOutcome(() => store.get("never-set", 300));
      break;
    }
    case "wait-timeout": {
      await store.barrier("joined");
      await store.set(`present/${rank}`, "x");
      await reportOutcome(() => store.wait([`present/${rank}`, "absent/a", "absent/b"], 300));
      break;
    }
    case "barrier-missing": {
      // Rank 0 waits for rank 1 to join (the test launches 0 and 1 of 4) before its barrier runs out.
      if (rank === 0) await store.wait(["joined/1"]);
      else await store.set(`joined/${rank}`, "");
      await reportOutcome(() => store.barrier("all", 600));
      break;
    }
    case "dies": {
      // Both barriers are in the reported waits: the dying rank may leave before a slower rank has seen
      // "ready" complete, and then that rank's "ready" is the wait that reports the PeerError.
      await reportOutcome(async () => {
        await store.barrier("ready");
        if (rank === worldSize - 1) process.exit(3); // no close(): the connection just drops
        await store.barrier("after", 10000);
      });
      break;
    }
    case "linger": {
      // Stays connected while the test starts a second process that claims the same rank.
      report({ rank, ok: true });
      if (rank === 0) await sleep(2000);
      await store.barrier("done", 20000);
      break;
    }
  }
} finally {
  await store.close();
}
