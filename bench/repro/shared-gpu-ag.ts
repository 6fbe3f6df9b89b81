// shared-gpu-ag.ts — which tensor-parallel paths complete when two ranks share GPU 0 (each a 1/2
// share of the SMs), at the large shapes where issue 24's finding 5 was seen. One fresh pair of
// communicators per case (a timed-out case leaves its pair aborted), three checked back-to-back runs
// each; prints one line per case: ok with the time, or the first words of the failure.
//
//   WEFT_COMM_TIMEOUT_MS=3000 bun bench/repro/shared-gpu-ag.ts
import { Communicator } from "../../lib/comm.ts";
import type { TpConfig } from "../../lib/ops/tp-validation.ts";
import { backToBack, ranksOnOneGpu, type Problem } from "../../test/support/tp-checks.ts";

type Case = { op: Problem["op"]; shape: [number, number, number]; config: TpConfig; share: boolean };

const cases: Case[] = [];
for (const shape of [[4096, 8192, 8192], [16384, 8192, 8192]] as [number, number, number][]) {
  for (const config of [{}, { path: "sequential" }, { path: "fused", mover: "ctas" }, { path: "fused", mover: "ctas", commCtas: 2 },
    { path: "fused", mover: "copyEngine" }] as TpConfig[]) {
    cases.push({ op: "allGatherGemm", shape, config, share: true });
  }
  cases.push({ op: "allGatherGemm", shape, config: { path: "fused", mover: "ctas" }, share: false });
  cases.push({ op: "gemmReduceScatter", shape, config: {}, share: true });
  cases.push({ op: "gemmAllReduce", shape, config: {}, share: true });
}

let tag = 9100;
for (const c of cases) {
  const comms = await ranksOnOneGpu(2, 3 * 2 ** 30, c.share);
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
  console.log(`${c.op} ${c.shape.join("x")} ${JSON.stringify(c.config)} share=${c.share}: ${line} (${ms} ms)`);
  try {
    await Communicator.disposeAll(comms);
  } catch (e) {
    console.log(`  dispose: ${(e as Error).message.slice(0, 120)}`);
  }
}
