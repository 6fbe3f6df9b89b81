// Ranks that share one GPU at large shapes (issue 24, finding 5): two or four communicators on GPU 0,
// each with a 1/W share of the SMs (smBudget, as the README describes). With the copy-engine mover
// the all-gather timed out at every M above 4096, because a copy between two buffers of one device
// runs on SMs, which the ranks' persistent kernels held. "auto" must take a mover that completes
// where the ranks are (the CTA movers), and a forced copy-engine mover now leaves one SM of its share
// to those copies. Every run is checked against the fp32 reference; every wait is bounded by
// WEFT_COMM_TIMEOUT_MS (default 10 s), so a deadlock fails the test instead of hanging it.
//
//   REQUIRE_GPU=1 bun test test/ops/tp-shared-gpu.test.ts            (all of it, ~3-6 min on one H200)
//   REQUIRE_GPU=1 bun test test/ops/tp-shared-gpu.test.ts -t "world 2"
import { expect, test } from "../support/test-api.ts";

import { Communicator } from "../../lib/comm.ts";
import type { TpConfig, TpOp, TpPlan } from "../../lib/ops/tp.ts";
import { describeGpu } from "../support/gpu.ts";
import { backToBack, ranksOnOneGpu, type Problem } from "../support/tp-checks.ts";

const LONG = 900_000;

/** The (M, N, K) at which the copy-engine all-gather timed out on one GPU (M = 4096 passed). */
const LARGE: [number, number, number][] = [
  [16384, 8192, 8192], [8192, 12288, 4096], [12288, 8192, 4096], [24576, 4096, 4096], [12288, 12288, 8192],
];
const OPS: TpOp[] = ["allGatherGemm", "gemmReduceScatter", "gemmAllReduce"];

let tag = 2400;

/** Three back-to-back runs of `config` on every rank, each checked, and the mover rank 0 runs. */
async function run(comms: Communicator[], p: Omit<Problem, "tag">, config: TpConfig): Promise<{ mover: string; detail: string }> {
  let mover = "";
  const detail = await backToBack({ comms, world: comms.length }, { ...p, tag: tag++ }, [config], 3, 10,
    (plans: TpPlan[]) => {
      mover = plans[0]!.choice.path === "fused" ? plans[0]!.choice.mover : "sequential";
    });
  return { mover, detail };
}

describeGpu("tensor-parallel ops, ranks sharing one GPU at large shapes (finding 5)", 1, () => {
  for (const world of [2, 4]) {
    test(`world ${world} on one GPU, a 1/${world} share of the SMs each: auto completes at every large shape, with no copy-engine mover`, async () => {
      const comms = await ranksOnOneGpu(world, 3 * 2 ** 30, true);
      try {
        for (const [M, N, K] of LARGE) {
          for (const op of OPS) {
            const t0 = performance.now();
            const { mover, detail } = await run(comms, { op, M, N, K, transB: true }, {});
            console.log(`  [world ${world}] ${op} (${M}, ${N}, ${K}) auto = ${mover}: ${detail} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
            expect(mover).not.toBe("copyEngine");
          }
        }
      } finally {
        await Communicator.disposeAll(comms);
      }
    }, LONG);
  }

  test("world 2 on one GPU: the forced copy-engine mover completes at the largest shapes too (one SM of each share left to the copies)", async () => {
    const comms = await ranksOnOneGpu(2, 3 * 2 ** 30, true);
    try {
      for (const [M, N, K] of [LARGE[0]!, LARGE[3]!]) {
        for (const op of OPS) {
          const { mover, detail } = await run(comms, { op, M, N, K, transB: false }, { path: "fused", mover: "copyEngine" });
          console.log(`  [world 2, forced] ${op} (${M}, ${N}, ${K}) ${mover}: ${detail}`);
          expect(mover).toBe("copyEngine");
        }
      }
    } finally {
      await Communicator.disposeAll(comms);
    }
  }, LONG);
});
