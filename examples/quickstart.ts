// The README's API example, as a program: `npm run quickstart` on a machine with 2+ GPUs
// (test/readme.test.ts keeps the README's lines and these in step).
import { Communicator, Tensor, TpPlan, deviceCount, gemm, topology } from "../lib/index.ts";

if (deviceCount() < 2) {
  console.log("quickstart: needs 2 or more GPUs; this machine has", deviceCount());
  process.exit(0);
}
console.log(topology().peer); // how the GPUs reach each other (NVLink count)

// One process driving every local GPU (or Communicator.fromEnv() under torchrun/srun/mpirun).
const comms = await Communicator.local({ devices: [...Array(deviceCount()).keys()] });
const W = comms.length, M = 4096, K = 8192, N = 28672;

// Column-parallel layer: out = allgather(a) · b, the all-gather fused into the GEMM's kernel.
const tensors = comms.map((c) => ({
  a: Tensor.empty([M / W, K], "bf16", { device: c.device }).fillRandom(c.rank),
  b: Tensor.empty([K, N / W], "bf16", { device: c.device }).fillRandom(10 + c.rank),
  out: Tensor.empty([M, N / W], "bf16", { device: c.device }),
}));
const plans = comms.map((c, r) => c.allGatherGemm(tensors[r]!)); // reusable plans
await TpPlan.runAll(plans);  // every GPU's kernel, then the copies; resolves when every GPU is done

// Collectives on symmetric tensors (the same offset in every rank's heap).
const x = comms.map((c) => c.empty([1 << 20], "f32").fill(c.rank + 1));
await Promise.all(comms.map((c, r) => c.allReduce(x[r]!)));
console.log("allReduce:", (x[0]!.download() as Float32Array)[0], "= 1 + 2 + ... + W");

// One GPU, the same GEMM engine: y = xs · wᵀ for weights w [N, K].
using xs = Tensor.empty([128, K], "bf16").fillRandom(1);
using w = Tensor.empty([N, K], "bf16").fillRandom(2);
using y = Tensor.empty([128, N], "bf16");
await gemm(xs, w, y, { transB: true });

// Everything native is disposed explicitly (or by `using`); communicators together, collectively.
plans.forEach((p) => p.dispose());
x.forEach((t) => t.dispose());
tensors.forEach((t) => Object.values(t).forEach((v) => v.dispose()));
await Communicator.disposeAll(comms);
