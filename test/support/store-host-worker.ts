// store-host-worker.ts — rank 0 of a store in its own process, so that a test can flood it from
// outside and read its memory. Reports {"port", "rss"} first, then answers one command per stdin
// line: "rss" -> {"rss", "maxLagMs"} (after a full GC; maxLagMs is the longest event-loop stall seen
// since the last report), "get KEY" -> {"value"} or the error, "close" -> {"closeMs"}.
//   WORLD_SIZE, WEFT_STORE_TOKEN (optional); under Deno, --v8-flags=--expose-gc (collectGarbage)
import { createInterface } from "node:readline";

import { Store } from "../../lib/bootstrap.ts";
import { runtime } from "../../lib/runtime/index.ts";
import { describeError, report } from "./report-channel.ts";

const worldSize = Number(process.env.WORLD_SIZE ?? 2);
const token = process.env.WEFT_STORE_TOKEN || undefined;
const store = await Store.connect({ rank: 0, worldSize, addr: "127.0.0.1", port: 0, token } as Parameters<typeof Store.connect>[0]);

let maxLagMs = 0;
let last = performance.now();
const ticker = setInterval(() => {
  const now = performance.now();
  maxLagMs = Math.max(maxLagMs, now - last - 10);
  last = now;
}, 10);

function rss(): number {
  runtime.collectGarbage();
  return process.memoryUsage().rss;
}

report({ port: store.port, rss: rss() });
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "rss") {
    report({ rss: rss(), maxLagMs });
    maxLagMs = 0;
  } else if (line.startsWith("get ")) {
    try {
      report({ value: new TextDecoder().decode(await store.get(line.slice(4), 300)) });
    } catch (e) {
      report(describeError(e));
    }
  } else if (line === "close") {
    const t0 = performance.now();
    await store.close();
    report({ closeMs: performance.now() - t0 });
    break;
  }
}
clearInterval(ticker);
