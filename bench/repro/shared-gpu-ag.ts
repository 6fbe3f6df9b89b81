// shared-gpu-ag.ts — which tensor-parallel paths complete when two ranks share GPU 0 (each a 1/2
// share of the SMs), at the large shapes where issue 24's finding 5 was seen. One fresh pair of
// communicators per case (a timed-out case leaves its pair aborted), three checked back-to-back runs
// each; prints one line per case: ok with the time, or the first words of the failure.
//
//   WEFT_COMM_TIMEOUT_MS=3000 bun bench/repro/shared-gpu-ag.ts   (the GPU wait bound, as tp-checks reads it)
import { Communicator } from "../../lib/comm.ts";
import type { TpConfig } from "../../lib/ops/tp-validation.ts";
import { backToBack, ranksOnOneGpu, type Problem } from "../../test/support/tp-checks.ts";

// smBudget: each rank's SMs (0: all of them, no share).
type Case = { op: Problem["op"]; shape: [number, number, number]; config: TpConfig; smBudget: number };

const cases: Case[] = [];
for (const shape of [[4096, 8192, 8192], [16384, 8192, 8192]] as [number, number, number][]) {
  for (const config of [{}, { path: "sequential" }, { path: "fused", mover: "ctas" }, { path: "fused", mover: "ctas", commCtas: 2 },
    { path: "fused", mover: "copyEngine" }] as TpConfig[]) {
    cases.push({ op: "allGatherGemm", shape, config, smBudget: 66 });
  }
  // Fewer SMs than half: does a spare SM (or several) let the CTA mover complete?
  for (const smBudget of [65, 60, 0]) cases.push({ op: "allGatherGemm", shape, config: { path: "fused", mover: "ctas" }, smBudget });
  cases.push({ op: "gemmReduceScatter", shape, config: {}, smBudget: 66 });
  cases.push({ op: "gemmAllReduce", shape, config: {}, smBudget: 66 });
}

let tag = 9100;
for (const c of cases) {
  const comms = await ranksOnOneGpu(2, 3 * 2 ** 30, c.smBudget || false);
  const t0 = performance.now();
  let line: string;
  try {
    let chosen = "";
    const detail = await backToBack({ comms, world: 2 }, { op: c.op, M: c.shape[0], N: c.shape[1], K: c.shape[2], transB: true, tag: tag++ },
      [c.config], 3, 10, (plans) => {
        const ch = plans[0]!.choice;
        chosen = ch.path === "fused" ? `fused/${ch.mover} comm ${ch.commCtas} gemm ${ch.gemmCtas}` : "sequential";
      });
    line = `ok (${chosen}) ${detail}`;
  } catch (e) {
    line = `FAILED ${(e as Error).name}: ${(e as Error).message.slice(0, 160)}`;
  }
  const ms = (performance.now() - t0).toFixed(0);
  console.log(`${c.op} ${c.shape.join("x")} ${JSON.stringify(c.config)} smBudget ${c.smBudget || "all"}: ${line} (${ms} ms)`);
  try {
    await Communicator.disposeAll(comms);
  } catch (e) {
    console.log(`  dispose: ${(e as Error).message.slice(0, 120)}`);
  }
}
