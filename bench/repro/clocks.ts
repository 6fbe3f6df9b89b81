// SM clock and power while the M = 512 decode all-reduce loops, and while our GEMM alone does, 1.5 s
// each. Phase marks go to stdout with wall-clock ms; nvidia-smi samples beside it: run clocks.sh.
import { Communicator } from "../../lib/comm.ts";
import { gemmSync } from "../../lib/ops/gemm.ts";
import { TpPlan, type TpConfig } from "../../lib/ops/tp.ts";
import { Tensor } from "../../lib/tensor.ts";

const comms = await Communicator.local({ devices: [0, 1], heapBytes: 2 * 2 ** 30 });
const M = Number(process.env.CLK_M ?? 512), N = 8192, K = 8192, k = K / 2;
const a = comms.map((c, r) => Tensor.empty([M, k], "bf16", { device: c.device }).fillRandom(11 + r));
const b = comms.map((c, r) => Tensor.empty([k, N], "bf16", { device: c.device }).fillRandom(23 + r));
const owned: { dispose(): void }[] = [];
const make = () => {
  const config: TpConfig = { path: "fused", mover: "exchange" };
  const plans = comms.map((c, r) => c.gemmAllReduce({ a: a[r]!, b: b[r]!, out: c.empty([M, N], "bf16"), config }));
  owned.push(...plans);
  return () => TpPlan.launchAll(plans);
};
const gOut = comms.map((c) => Tensor.empty([M, N], "bf16", { device: c.device }));
const phases: [string, () => void][] = [
  ["gemm", () => comms.forEach((c, r) => gemmSync(a[r]!, b[r]!, gOut[r]!, { stream: c.stream }))],
  ["op", make()], ["op2", make()], ["gemm2", () => comms.forEach((c, r) => gemmSync(a[r]!, b[r]!, gOut[r]!, { stream: c.stream }))],
];
for (const [name, issue] of phases) {
  const t0 = Date.now();
  let n = 0;
  while (Date.now() - t0 < 1500) {
    for (let i = 0; i < 100; i++) issue();
    n += 100;
    comms.forEach((c) => c.stream.synchronize());
  }
  const t1 = Date.now();
  console.log(JSON.stringify({ phase: name, t0, t1, us: ((t1 - t0) * 1000) / n }));
}
for (const x of [...owned, ...a, ...b, ...gOut]) x.dispose();
await Communicator.disposeAll(comms);
