// The Communicator: the symmetric heap allocator (CPU), then every collective on the GPUs in both
// process models — one process driving both GPUs (Communicator.local) and one process per GPU
// (two bun processes launched like torchrun would) — plus world size 1.
import { afterAll, beforeAll, describe, expect, test } from "./support/test-api.ts";
import { join } from "node:path";

import { Communicator } from "../lib/comm.ts";
import { OutOfMemoryError } from "../lib/errors.ts";
import { HeapAllocator } from "../lib/heap.ts";
import { Tensor } from "../lib/tensor.ts";
import { CHECKS, releaseDiffBuffers, type CheckContext } from "./support/collective-checks.ts";
import { deviceError, referenceGemm } from "./support/gemm.ts";
import { expectWorkersPassed, testChecks } from "./support/check-suites.ts";
import { describeGpu, gpuCount } from "./support/gpu.ts";
import { freePorts, runCheckWorkers } from "./support/report-channel.ts";

/** GPU wait bound for the suite: short on the device runner so that a broken kernel fails fast. */
const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const LONG = 600_000;

describe("HeapAllocator (the symmetric heap's offsets)", () => {
  test("the same call sequence gives the same offsets; frees merge; alignment 256", () => {
    const run = () => {
      const h = new HeapAllocator(1 << 20);
      const a = h.alloc(1000, "t");
      const b = h.alloc(1, "t");
      const c = h.alloc(4096, "t");
      h.free(b, 1);
      const d = h.alloc(200, "t"); // reuses b's hole
      h.free(a, 1000);
      h.free(d, 200);
      const e = h.alloc(1200, "t"); // a + b's merged range
      return [a, b, c, d, e, h.freeBytes];
    };
    expect(run()).toEqual(run());
    const [a, b, c, d, e] = run();
    expect([a, b, c, d, e]).toEqual([0, 1024, 1280, 1024, 0]);
    for (const x of [a, b, c, d, e]) expect(x! % 256).toBe(0);
  });

  test("running out is an OutOfMemoryError that says how to fix it", () => {
    const h = new HeapAllocator(4096);
    h.alloc(4000, "t");
    expect(() => h.alloc(1, "comm.empty")).toThrow(OutOfMemoryError);
    expect(() => h.alloc(1, "comm.empty")).toThrow(/heapBytes/);
  });
});

describeGpu("collectives, one process driving both GPUs (Communicator.local)", 2, () => {
  let ctx: CheckContext;
  beforeAll(async () => {
    const devices = [0, 1];
    const comms = await Communicator.local({ devices, heapBytes: 1536 << 20, timeoutMs: GPU_TIMEOUT_MS });
    ctx = { comms, world: devices.length, spawn: (opts) => Communicator.local({ devices, ...opts }) };
  }, LONG);
  afterAll(async () => {
    releaseDiffBuffers();
    if (ctx) await Communicator.disposeAll(ctx.comms);
  }, LONG);

  test("properties", () => {
    const [a, b] = ctx.comms;
    expect([a!.rank, a!.size, a!.localRank, a!.localSize, a!.device]).toEqual([0, 2, 0, 2, 0]);
    expect([b!.rank, b!.device]).toEqual([1, 1]);
    expect(a!.nodeId).toBe(b!.nodeId);
  });

  testChecks(CHECKS, () => ctx, LONG);
});

describeGpu("collectives, one process per GPU (2 bun processes, CUDA IPC)", 2, () => {
  test("every check passes on both ranks", async () => {
    // The second port is for the worker's Communicator.fromEnv() smoke run.
    const [port, port2] = await freePorts(2);
    const worker = join(import.meta.dirname, "support", "comm-worker.ts");
    // Each rank reports one more result than CHECKS: comm-worker's fromEnv run.
    expectWorkersPassed(await runCheckWorkers(worker, 2, { WEFT_FROM_ENV_PORT: String(port2) }, port), CHECKS.length + 1);
  }, LONG);
});

describeGpu("world size 1 (every collective is a local copy)", 1, () => {
  test("allGather, reduceScatter, allReduce (both algorithms), allToAll, broadcast, barrier", async () => {
    const [c] = await Communicator.local({ devices: [0], heapBytes: 64 << 20 });
    try {
      const n = 10_001;
      using x = c!.empty([n], "bf16").fillRandom(3);
      using y = c!.empty([n], "bf16").fill(NaN);
      const want = Array.from(x.download());
      for (const run of [
        () => c!.allGather(x, y), () => c!.reduceScatter(x, y), () => c!.allReduce(x, y, { algorithm: "staged" }),
        () => c!.allReduce(x, y, { algorithm: "direct" }), () => c!.allToAll(x, y), () => c!.broadcast(x, y),
      ]) {
        y.fill(NaN);
        await run();
        expect(Array.from(y.download())).toEqual(want);
      }
      await c!.barrier();
    } finally {
      await c!.dispose();
    }
  }, LONG);
  test("smBudget caps the SMs every kernel of the communicator plans for; a bad one names the option", async () => {
    const [c] = await Communicator.local({ devices: [0], heapBytes: 64 << 20, smBudget: 20 });
    try {
      expect(c!.maxCtas).toBeLessThanOrEqual(20);
    } finally {
      await c!.dispose();
    }
    for (const smBudget of [-1, 0.5, NaN]) {
      await expect(Communicator.local({ devices: [0], heapBytes: 64 << 20, smBudget })).rejects.toThrow(/smBudget/);
    }
    // One SM: the all-gather's CTA mover (a comm CTA beside a GEMM CTA) cannot be had; auto still runs.
    const [one] = await Communicator.local({ devices: [0], heapBytes: 64 << 20, smBudget: 1 });
    try {
      using a = one!.empty([256, 512], "bf16").fillRandom(5);
      using b = one!.empty([512, 256], "bf16").fillRandom(6);
      using out = one!.empty([256, 256], "bf16").fill(NaN);
      expect(() => one!.allGatherGemm({ a, b, out, config: { path: "fused", mover: "ctas" } })).toThrow(/at least 2 SMs/);
      const plan = one!.allGatherGemm({ a, b, out });
      try {
        await plan.run();
        using ref = Tensor.empty([256, 256], "f32", { device: 0 });
        referenceGemm(a, b, ref, { m: 256, n: 256, k: 512 }, false);
        const e = deviceError(out, ref);
        expect(e.nonFinite).toBe(0);
        expect(e.rel).toBeLessThan(1e-2);
      } finally {
        plan.dispose();
      }
    } finally {
      await one!.dispose();
    }
  });
});

test("GPU count seen by the collective tests", () => {
  expect(gpuCount()).toBeGreaterThanOrEqual(0);
});
