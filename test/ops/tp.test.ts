// The fused tensor-parallel ops: validation on the CPU, then every op on the GPUs in both process
// models — one process driving both GPUs (Communicator.local) and one process per GPU (two bun
// processes, CUDA IPC) — with the checks of test/support/tp-checks.ts.
import { afterAll, beforeAll, describe, expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { Communicator } from "../../lib/comm.ts";
import { ArgumentError } from "../../lib/errors.ts";
import { TpPlan, validateTp, validateTpConfig, type TpTensorDesc } from "../../lib/ops/tp.ts";
import { caught } from "../support/caught.ts";
import { expectWorkersPassed, testChecks } from "../support/check-suites.ts";
import { describeGpu } from "../support/gpu.ts";
import { runCheckWorkers } from "../support/report-channel.ts";
import { backToBack, checkOddSizes, checkProblem, ranksOnOneGpu, TP_CHECKS, type TpContext } from "../support/tp-checks.ts";

const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const LONG = 600_000;

const t = (shape: number[], extra: Partial<TpTensorDesc> = {}): TpTensorDesc => ({ shape, dtype: "bf16", device: 0, ...extra });
const sym = (shape: number[]) => t(shape, { symmetric: true });

describe("tensor-parallel ops: validation (CPU)", () => {
  test("allGatherGemm: shapes follow out's M, b's layout and the world size", () => {
    expect(validateTp("allGatherGemm", 2, 0, { a: t([64, 520]), b: t([520, 500]), out: t([127, 500]) }))
      .toEqual({ m: 127, n: 500, k: 520, mShard: 64, transB: false });
    expect(validateTp("allGatherGemm", 2, 0, { a: t([4, 32]), b: t([16, 32]), out: t([8, 16]), transB: true }).n).toBe(16);
    expect(() => validateTp("allGatherGemm", 2, 0, { a: t([63, 520]), b: t([520, 500]), out: t([127, 500]) }))
      .toThrow(/a.*ceil\(M \/ 2\) = 64/);
    expect(() => validateTp("allGatherGemm", 2, 0, { a: t([4, 32]), b: t([33, 16]), out: t([8, 16]) })).toThrow(/K = 33/);
    expect(() => validateTp("allGatherGemm", 2, 0, { a: t([4, 32]), b: t([32, 16]), out: t([8, 17]) })).toThrow(/out.*17 columns/);
    expect(() => validateTp("allGatherGemm", 2, 0, { a: t([4, 32]), b: t([32, 16]), out: t([8, 16]), gatheredA: t([8, 31]) }))
      .toThrow(/'gatheredA' must be \[8, 32\]/);
  });

  test("gemmReduceScatter / gemmAllReduce: out rows and symmetry", () => {
    expect(validateTp("gemmReduceScatter", 2, 0, { a: t([127, 260]), b: t([260, 1000]), out: sym([64, 1000]) }).mShard).toBe(64);
    expect(() => validateTp("gemmReduceScatter", 2, 0, { a: t([127, 260]), b: t([260, 1000]), out: sym([127, 1000]) }))
      .toThrow(/ceil\(M \/ 2\) = 64/);
    expect(() => validateTp("gemmReduceScatter", 2, 0, { a: t([128, 64]), b: t([64, 64]), out: t([64, 64]) })).toThrow(/symmetric/);
    expect(() => validateTp("gemmAllReduce", 2, 0, { a: t([16, 64]), b: t([64, 32]), out: sym([8, 32]) })).toThrow(/M = 16/);
    expect(() => validateTp("gemmAllReduce", 2, 0, { a: t([16, 64]), b: t([64, 32]), out: sym([16, 32]), gatheredA: t([16, 64]) }))
      .toThrow(/allGatherGemm output/);
  });

  test("dtype, rank and device errors name the argument", () => {
    const bad = (args: Parameters<typeof validateTp>[3], re: RegExp) => {
      const err = caught(() => validateTp("gemmAllReduce", 2, 0, args));
      expect(err).toBeInstanceOf(ArgumentError);
      expect(String((err as Error).message)).toMatch(re);
    };
    bad({ a: t([16, 64], { dtype: "f32" }), b: t([64, 32]), out: sym([16, 32]) }, /'a' must be bf16/);
    bad({ a: t([16, 64, 1]), b: t([64, 32]), out: sym([16, 32]) }, /'a' must be 2-D/);
    bad({ a: t([16, 64]), b: t([64, 32], { device: 1 }), out: sym([16, 32]) }, /'b' is on device 1/);
    bad({ a: t([16, 64]), b: t([64, 32]), out: sym([16, 32]), transB: "yes" as unknown as boolean }, /'transB' must be a boolean/);
  });

  test("config overrides are checked", () => {
    expect(validateTpConfig(undefined, "op", "allGatherGemm", 132)).toEqual({ path: "auto", mover: "auto", commCtas: 0, tileN: 0 as 128, groupM: 0 });
    expect(validateTpConfig({ path: "fused", mover: "ctas", commCtas: 8 }, "op", "allGatherGemm", 132).commCtas).toBe(8);
    expect(() => validateTpConfig({ path: "fast" as "fused" }, "op", "gemmAllReduce", 132)).toThrow(/config.path/);
    expect(validateTpConfig({ mover: "copyEngine" }, "op", "gemmReduceScatter", 132).mover).toBe("copyEngine");
    expect(() => validateTpConfig({ mover: "copyEngine", commCtas: 4 }, "op", "gemmAllReduce", 132)).toThrow(/CTA mover only/);
    expect(() => validateTpConfig({ commCtas: 8, mover: "copyEngine" }, "op", "allGatherGemm", 132)).toThrow(/CTA mover only/);
    expect(() => validateTpConfig({ commCtas: 132 }, "op", "allGatherGemm", 132)).toThrow(/'config.commCtas' must be an integer in \[1, 131\]/);
    expect(() => validateTpConfig({ tileN: 64 }, "op", "allGatherGemm", 132)).toThrow(/'config.tileN' must be one of 128, 256/);
    expect(validateTpConfig({ tileN: 64 }, "op", "gemmAllReduce", 132).tileN).toBe(64);
    expect(validateTpConfig({ mover: "exchange" }, "op", "gemmAllReduce", 132).mover).toBe("exchange");
    // 256-wide exchange tiles are allowed here; the planner takes them for one wave only (it knows the shape).
    expect(validateTpConfig({ mover: "exchange", tileN: 256 }, "op", "gemmAllReduce", 132).tileN).toBe(256);
    expect(() => validateTpConfig({ tileN: 64 }, "op", "gemmReduceScatter", 132)).toThrow(/must be one of 128, 256 for gemmReduceScatter/);
    expect(() => validateTpConfig({ mover: "exchange" }, "op", "gemmReduceScatter", 132)).toThrow(/'exchange' applies to gemmAllReduce only/);
    expect(() => validateTpConfig({ mover: "dma" as "ctas" }, "op", "gemmAllReduce", 132)).toThrow(/'auto', 'ctas', 'copyEngine' or 'exchange'/);
    expect(() => validateTpConfig({ groupM: 0 }, "op", "gemmAllReduce", 132)).toThrow(/groupM/);
    expect(() => validateTpConfig({ tile: 128 } as never, "op", "gemmAllReduce", 132)).toThrow(/'config.tile' is not a config field/);
  });

  test("TpPlan.launchAll takes a non-empty array of distinct plans", () => {
    for (const bad of [[], undefined, [{}], "plans"]) {
      expect(() => TpPlan.launchAll(bad as never)).toThrow(ArgumentError);
      expect(() => TpPlan.launchAll(bad as never)).toThrow(/'plans' must be a non-empty array of TpPlans/);
    }
    expect(TpPlan.runAll([])).rejects.toThrow(/'plans'/);
  });
});

describeGpu("tensor-parallel ops, one process driving both GPUs (Communicator.local)", 2, () => {
  let ctx: TpContext;
  beforeAll(async () => {
    const comms = await Communicator.local({ devices: [0, 1], heapBytes: 1536 << 20, timeoutMs: GPU_TIMEOUT_MS });
    ctx = { comms, world: 2 };
  }, LONG);
  afterAll(async () => {
    if (ctx) await Communicator.disposeAll(ctx.comms);
  }, LONG);

  testChecks(TP_CHECKS, () => ctx, LONG);
});

describeGpu("tensor-parallel ops, one process per GPU (2 bun processes, CUDA IPC)", 2, () => {
  test("every check passes on both ranks", async () => {
    const worker = join(import.meta.dirname, "..", "support", "tp-worker.ts");
    expectWorkersPassed(await runCheckWorkers(worker, 2), TP_CHECKS.length);
  }, LONG);
});

describeGpu("tensor-parallel ops, 1 to 4 ranks on one GPU (every rank's kernel resident at once)", 1, () => {
  // Several ranks share GPU 0, so all ranks' kernels must be resident together (they wait for each
  // other): decode tiles (M = 16, N = 1000: 16 CTAs each), or a 1/W share of the SMs per rank
  // (smBudget). This is where world sizes above 2 run, every op with every mover.
  for (const world of [2, 4]) {
    test(`gemmAllReduce (16, 1000, ${512 * world}), world ${world}: every path against the fp32 reference`, async () => {
      const comms = await ranksOnOneGpu(world, 256 << 20);
      try {
        const detail = await checkProblem({ comms, world }, { op: "gemmAllReduce", M: 16, N: 1000, K: 512 * world, transB: false, tag: 900 + world });
        console.log(`  [one GPU, world ${world}] ${detail}`);
        expect(detail).toContain("fused exchange");
      } finally {
        await Communicator.disposeAll(comms);
      }
    }, LONG);
  }
  // Every op and mover at world 3 and 4: each rank gets a 1/W share of the SMs (smBudget), so that
  // all ranks' persistent kernels are resident together. M a multiple of 128 x W (row ownership, so
  // the copy-engine movers run too), N / W a multiple of 8 (fused paths), K / W whole.
  for (const world of [3, 4]) {
    test(`every op and path, world ${world} on one GPU, each rank a 1/${world} share of its SMs`, async () => {
      const comms = await ranksOnOneGpu(world, 512 << 20, true);
      try {
        const M = 256 * world, N = 1056, K = 512 * world;
        for (const op of ["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"] as const) {
          for (const transB of [false, true]) {
            const detail = await checkProblem({ comms, world }, { op, M, N, K, transB, tag: 920 + world });
            console.log(`  [one GPU, world ${world}] ${op} (${M}, ${N}, ${K})${transB ? " b [n, k]" : ""}: ${detail}`);
            expect(detail).toContain("fused copy-engine");
          }
        }
        // Back to back with no reset (each launch reuses the receive slots, flags and side streams of
        // the one before, by epoch), the movers alternating, every result checked.
        for (const op of ["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"] as const) {
          const detail = await backToBack({ comms, world }, { op, M, N, K, transB: true, tag: 930 + world },
            [{ path: "fused", mover: "copyEngine" }, { path: "fused", mover: "ctas" }], 60);
          console.log(`  [one GPU, world ${world}] ${op} back to back: ${detail}`);
        }
      } finally {
        await Communicator.disposeAll(comms);
      }
    }, LONG);
  }
  // Odd sizes at world 2 and 3 (each rank a 1/W share of the SMs): the sequential path's padded
  // copies, its GEMM and our collectives with rows of odd lengths and shards of uneven heights.
  for (const world of [2, 3]) {
    test(`odd sizes, world ${world} on one GPU: every op, both B layouts, against the fp32 reference`, async () => {
      const comms = await ranksOnOneGpu(world, 256 << 20, true);
      try {
        console.log(`  [one GPU, world ${world}] ${await checkOddSizes({ comms, world })}`);
      } finally {
        await Communicator.disposeAll(comms);
      }
    }, LONG);
  }
  // World 1 with the fused exchange and several tiles per CTA (M 384 x N 8192 at 64-wide tiles: 3 x
  // 128 tiles): the deferred path, whose receive has no source. A prefetch there once landed in the
  // staging buffer after the sum was staged, so a tile could store stale rows.
  test("gemmAllReduce (384, 8192, 1024), world 1, fused exchange with deferred tiles: 60 back-to-back runs, every result checked", async () => {
    const comms = await ranksOnOneGpu(1, 256 << 20);
    try {
      const detail = await backToBack({ comms, world: 1 }, { op: "gemmAllReduce", M: 384, N: 8192, K: 1024, transB: true, tag: 940 },
        [{ path: "fused", mover: "exchange" }], 60);
      console.log(`  [one GPU, world 1] ${detail}`);
    } finally {
      await Communicator.disposeAll(comms);
    }
  }, LONG);
  // World 3 with one wave of 256-wide exchange tiles (exchange_at_once): each tile adds two peers'
  // partials, landing one after the other in the same boxes of the ring. 1 x 9 tiles per rank (a
  // tail in N), so the three kernels are resident together.
  test("gemmAllReduce (128, 2056, 1536), world 3, 256-wide exchange tiles: 60 back-to-back runs, every result checked", async () => {
    const world = 3;
    const comms = await ranksOnOneGpu(world, 256 << 20);
    try {
      const detail = await backToBack({ comms, world }, { op: "gemmAllReduce", M: 128, N: 2056, K: 512 * world, transB: true, tag: 910 },
        [{ path: "fused", mover: "exchange", tileN: 256 }], 60);
      console.log(`  [one GPU, world ${world}] ${detail}`);
    } finally {
      await Communicator.disposeAll(comms);
    }
  }, LONG);
});
