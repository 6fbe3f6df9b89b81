// soak.ts — each fused tensor-parallel op back to back many times at world W on ONE GPU (the ranks
// share it, each with 1/W of its SMs), alternating two shapes and every mover each shape offers, no
// reset between launches, every result checked on the GPU against the fp32 reference (NaN-poisoned
// outputs, test/support/tp-checks.ts backToBackCases), plus a checked allReduce every 10 launches.
//
//   bun bench/soak.ts [--runs 1000] [--world 2] [--ops allGatherGemm,gemmReduceScatter,gemmAllReduce] [--small]
//
// --small: the small shapes only (for compute-sanitizer, bench/sanitize.sh). One line per op,
// "op: passed/checked checks correct, worst rel ...", then "soak: N of N ops clean"; exit 1 on any failure.
import { LocalStore } from "../lib/bootstrap.ts";
import { Communicator } from "../lib/comm.ts";
import { deviceInfo } from "../lib/device.ts";
import type { TpConfig, TpOp } from "../lib/ops/tp.ts";
import { backToBackCases, type BackToBackCase } from "../test/support/tp-checks.ts";

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : fallback);
const runs = Number(opt("--runs", "1000"));
const world = Number(opt("--world", "2"));
const ops = opt("--ops", "allGatherGemm,gemmReduceScatter,gemmAllReduce").split(",") as TpOp[];
const small = args.includes("--small");
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer (got ${opt("--runs", "")})`);
if (!Number.isInteger(world) || world < 1 || world > 4) throw new Error(`--world must be 1 to 4 (got ${opt("--world", "")})`);

const ce: TpConfig = { path: "fused", mover: "copyEngine" };
const ctas: TpConfig = { path: "fused", mover: "ctas" };
const exchange: TpConfig = { path: "fused", mover: "exchange" };
// M a multiple of 128 x W (row ownership: the copy-engine movers apply), N / W a multiple of 8 (the
// fused paths' 16-byte rows), K / W whole. The all-reduce's small shape is a decode size, where the
// exchange mover applies and the copy engines do not.
function cases(op: TpOp): BackToBackCase[] {
  const large = { M: 4096, N: 4096, K: 4096 };
  const medium = { M: 256 * world, N: 1056, K: 512 * world };
  const decode = { M: 16, N: 1000, K: 512 * world };
  const two = op === "gemmAllReduce"
    ? [{ shape: small ? medium : large, configs: [ce, ctas] }, { shape: decode, configs: [ctas, exchange] }]
    : [{ shape: small ? medium : large, configs: [ce, ctas] }, { shape: small ? { ...medium, M: 128 * world } : medium, configs: [ce, ctas] }];
  return two.map(({ shape, configs }, i) => ({ problem: { op, ...shape, transB: i === 0, tag: 4000 + 10 * ops.indexOf(op) + i }, configs }));
}

const smBudget = Math.floor(deviceInfo(0).smCount / world);
const stores = LocalStore.group(world, { timeoutMs: 60_000 });
const comms = await Promise.all(stores.map((store, rank) => Communicator.create(store,
  { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: "gpu0" }, 0,
  { heapBytes: 1024 << 20, timeoutMs: 10_000, smBudget })));
let clean = 0;
try {
  for (const op of ops) {
    const t0 = performance.now();
    const r = await backToBackCases({ comms, world }, cases(op), runs);
    const s = ((performance.now() - t0) / 1000).toFixed(1);
    console.log(`${op}: ${r.runs - r.failed}/${r.runs} checks correct (${runs} launches per rank, world ${world} on one GPU, ` +
      `smBudget ${smBudget}), worst rel ${r.worst.toExponential(2)}, ${s} s${r.firstFailure ? `; first failure: ${r.firstFailure}` : ""}`);
    if (r.failed === 0) clean++;
  }
} finally {
  await Communicator.disposeAll(comms);
}
console.log(`soak: ${clean} of ${ops.length} ops clean`);
process.exit(clean === ops.length ? 0 : 1);
