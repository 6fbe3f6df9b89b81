// examples/serve/main.ts as a process: SIGTERM's graceful shutdown (in-flight requests finish, new
// ones get 503, exit 0), and the "no GPU" mode a GPU-less machine starts in.
import { describe, expect, onlyUnderBun, test } from "../support/test-api.ts";

import { complete, metricsOf, stream, until } from "../../examples/serve/client.ts";
import { startServer } from "../../examples/serve/process.ts";
import { gpuCount } from "../support/gpu.ts";

onlyUnderBun("examples/serve runs on Bun.serve, Bun.file and Bun.spawn, by its issue's spec");

describe("main.ts as a process", () => {
  test("SIGTERM: the in-flight stream finishes, a new request gets 503, the process exits 0", async () => {
    const { proc, url } = await startServer(["--fake", "--step-ms", "10", "--slots", "4"]);
    try {
      const inflight = stream(url, { prompt: "keep going", max_tokens: 60 });
      await until(async () => (await metricsOf(url)).get("weft_serve_kv_cache_slots_used") === 1, 5000, "the stream to run");
      proc.kill("SIGTERM");
      await until(async () => (await fetch(`${url}/health`)).status === 503, 5000, "health to say shutting down");
      const late = await complete(url, { prompt: "late", max_tokens: 2 });
      expect(late.status).toBe(503);
      const r = await inflight;
      expect(r.done).toBe(true);
      expect(r.finishReason).toBe("length");
      expect(r.usage?.completion_tokens).toBe(60);
      expect(await proc.exited).toBe(0);
    } finally {
      proc.kill("SIGKILL");
    }
  }, 60_000);

  const noGpu = gpuCount() === 0;
  (noGpu ? test : test.skip)(`without a GPU: 503 "no GPU" from /health and completions${noGpu ? "" : " (skipped: this machine has a GPU)"}`, async () => {
    const { proc, url } = await startServer([]);
    try {
      const h = await fetch(`${url}/health`);
      expect(h.status).toBe(503);
      const body = (await h.json()) as { status: string; reason: string };
      expect(body.status).toBe("no GPU");
      expect(body.reason).toContain("no GPU");
      const r = await complete(url, { prompt: "x" });
      expect(r.status).toBe(503);
      expect((await metricsOf(url)).get("weft_serve_up")).toBe(0);
      proc.kill("SIGTERM");
      expect(await proc.exited).toBe(0);
    } finally {
      proc.kill("SIGKILL");
    }
  }, 60_000);
});
