// store-watch-worker.ts — a rank of the rank-lost notice tests (test/bootstrap/rank-lost.test.ts):
// joins the TCP store with the job token, reports every Store.onRankLost notice as {rank, lost,
// reason}, and leaves cleanly when told: once some rank sets `close/<rank>` it close()s and reports
// {rank, closed: true}. A wait that a notice ends leaves the worker idle until the test kills it
// (at most 60 s).
//   RANK, WORLD_SIZE, MASTER_PORT (0 on rank 0, which reports {"port"} first), WEFT_STORE_TOKEN
import { setTimeout as sleep } from "node:timers/promises";

import { Store } from "../../lib/bootstrap.ts";
import { describeError, report } from "./report-channel.ts";

const rank = Number(process.env.RANK);
const worldSize = Number(process.env.WORLD_SIZE);
const store = await Store.connect({
  rank, worldSize, addr: "127.0.0.1", port: Number(process.env.MASTER_PORT ?? 0), token: process.env.WEFT_STORE_TOKEN, timeoutMs: 60_000,
});
if (rank === 0) report({ port: store.port });
store.onRankLost((lost, reason) => report({ rank, lost, reason }));
try {
  await store.barrier("joined");
  report({ rank, joined: true });
  await store.get(`close/${rank}`);
  await store.close();
  report({ rank, closed: true });
} catch (e) {
  report({ rank, waitEnded: describeError(e) });
  await sleep(60_000);
}
