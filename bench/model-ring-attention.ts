// model-ring-attention.ts — predicts the fused ring's time on 2 x H200 and 8 x H200 at 32k and 128k
// tokens (B 1, H 32, D 128), causal (zigzag) and not (contiguous), from what this repository has
// measured, and shows each beside the ideal (one GPU's time / W) and torch's ring.
//
//   bun bench/model-ring-attention.ts        (no GPU needed; writes bench/results/model-ring-attention.md)
//
// Inputs:
//   - our kernel's rate at S 32k (TFLOP/s, causal counted half) and the ring's own cost on one GPU
//     (world 2 sharing a GPU against the plain kernel): bench/results/attention.json when it exists,
//     else the design targets (600 TFLOP/s, 1.03), marked as assumed;
//   - the copy engines' NVLink rate, ~300 GB/s per peer link (bench/DECISIONS.md, "Ring attention's peers' K and V come by copy engine unless asked otherwise": 293-312 GB/s for the
//     TP movers' copies), and ~380 GB/s as one GPU's inbound ceiling (the link's measured
//     ceiling; bench/results/collectives.md: a 256 MiB all-gather at 345 GB/s busbw);
//   - the schedule (ring.cuh): every rank computes 1/W of the work (zigzag balances causal work);
//     the peers' K and V stream in by kv-head groups (8 at Hkv 32) while the first tiles compute on
//     local keys, so only the first group's arrival can delay the start; the rest overlaps, and the
//     launch takes the longer of compute and copies.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const H = 32, D = 128, HKV = 32;
const CE_GBPS = 300;
const INBOUND_GBPS = 380;
const GROUPS = 8;
const TORCH_RING_MS: Record<string, number> = { "32k causal 2": 23.1, "32k full 2": 27.2 };

interface Inputs {
  tflops: { causal: number; full: number };
  ringCost: number;
  source: string;
}

function inputs(): Inputs {
  const path = join(import.meta.dirname, "results", "attention.json");
  if (!existsSync(path)) return { tflops: { causal: 600, full: 600 }, ringCost: 1.03, source: "assumed (no bench/results/attention.json yet)" };
  const j = JSON.parse(readFileSync(path, "utf8"));
  const rate = (causal: boolean) => {
    const r = j.rows?.find((x: { case: { seq: number; headDim: number; causal: boolean; kvHeads: number; heads: number } }) =>
      x.case.seq === 32768 && x.case.headDim === 128 && x.case.causal === causal && x.case.kvHeads === x.case.heads);
    return r ? (4 * 32768 * 32768 * H * D * (causal ? 0.5 : 1)) / r.ours.medianMs / 1e9 : 600;
  };
  const w2 = (j.ring ?? []).filter((r: { world: number }) => r.world === 2).map((r: { ringMs: number; plainMs: number }) => r.ringMs / r.plainMs);
  const ringCost = w2.length ? Math.max(...w2) : 1.03;
  return { tflops: { causal: rate(true), full: rate(false) }, ringCost, source: `bench/results/attention.json (${j.device})` };
}

interface Prediction {
  gpus: number;
  tokens: number;
  causal: boolean;
  singleMs: number;
  idealMs: number;
  computeMs: number;
  copyMs: number;
  startMs: number;
  predictedMs: number;
  limit: string;
}

function predict(gpus: number, tokens: number, causal: boolean, x: Inputs): Prediction {
  const flops = 4 * tokens * tokens * H * D * (causal ? 0.5 : 1);
  const rate = (causal ? x.tflops.causal : x.tflops.full) * 1e12;
  const singleMs = (flops / rate) * 1e3;
  const idealMs = singleMs / gpus;
  // The ring's own cost (control words, per-source segments, waits) as measured on one GPU.
  const computeMs = idealMs * x.ringCost;
  const shardBytes = 2 * (tokens / gpus) * HKV * D * 2;  // K and V of one rank's shard
  const inbound = Math.min(CE_GBPS * (gpus - 1), INBOUND_GBPS) * 1e9;
  const copyMs = ((gpus - 1) * shardBytes / inbound) * 1e3;
  // The first group of every peer lands before the first tiles reach their peer blocks: a local
  // tile's share (1/W of a tile's keys) is computed meanwhile.
  const tiles = (tokens / gpus / 128) * H;
  const waves = Math.max(1, tiles / 132);
  const firstLocalMs = computeMs / waves / gpus;
  const startMs = Math.max(0, copyMs / GROUPS - firstLocalMs);
  // Default memory (two shards of K and V): slots = min(groups, floor(2 x groups / (W - 1))) groups of
  // every peer; with fewer slots than groups a group's copy starts when the group two slots back
  // is done everywhere, so each group's copy must fit one group's compute, or the copies set the pace.
  const slots = Math.min(GROUPS, Math.floor((2 * GROUPS) / Math.max(1, gpus - 1)));
  const paced = slots < GROUPS && copyMs / GROUPS > (computeMs / GROUPS) * (slots - 1);
  const predictedMs = Math.max(computeMs, paced ? copyMs * 2 : copyMs) + startMs + 0.01;
  const limit = copyMs > computeMs || paced ? "the copy engines (NVLink inbound)" :
    `the kernel's math rate (compute-bound; copies hidden${slots < GROUPS ? `, ${slots} receive slots` : ""})`;
  return { gpus, tokens, causal, singleMs, idealMs, computeMs, copyMs, startMs, predictedMs, limit };
}

const x = inputs();
const rows: Prediction[] = [];
for (const gpus of [2, 8]) for (const tokens of [32768, 131072]) for (const causal of [true, false]) rows.push(predict(gpus, tokens, causal, x));
const lines = [
  "# Fused ring attention: predicted times (B 1, H 32, D 128)", "",
  `Kernel rate: causal ${x.tflops.causal.toFixed(0)}, full ${x.tflops.full.toFixed(0)} TFLOP/s at S 32k; ring's own cost ${x.ringCost.toFixed(3)}x ` +
  `(${x.source}). Copy engines ${CE_GBPS} GB/s per peer, ${INBOUND_GBPS} GB/s inbound per GPU. Ideal: one GPU's time / W. ` +
  "Generated by bench/model-ring-attention.ts.", "",
  "| GPUs | tokens | mask | one GPU ms | ideal ms | compute ms | copies ms | start ms | predicted ms | / ideal | torch ring ms | what limits it |",
  "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
];
for (const r of rows) {
  const key = `${r.tokens / 1024}k ${r.causal ? "causal" : "full"} ${r.gpus}`;
  lines.push(`| ${r.gpus} | ${r.tokens / 1024}k | ${r.causal ? "causal (zigzag)" : "full (contiguous)"} | ${r.singleMs.toFixed(2)} | ${r.idealMs.toFixed(2)} | ` +
    `${r.computeMs.toFixed(2)} | ${r.copyMs.toFixed(2)} | ${r.startMs.toFixed(3)} | ${r.predictedMs.toFixed(2)} | ${(r.predictedMs / r.idealMs).toFixed(3)} | ` +
    `${TORCH_RING_MS[key] ?? "-"} | ${r.limit} |`);
}
const c32 = rows.find((r) => r.gpus === 2 && r.tokens === 32768 && r.causal)!;
lines.push("", `2 x H200, 32k causal: ${c32.predictedMs.toFixed(2)} ms predicted (bar 8.5 ms; torch's ring 23.1 ms; ideal ${c32.idealMs.toFixed(2)} ms). ` +
  `It is ${c32.limit}: at ${x.tflops.causal.toFixed(0)} TFLOP/s the math of one rank's half takes ${c32.computeMs.toFixed(2)} ms, while the peer's ` +
  `K and V (${(2 * 16384 * HKV * D * 2 / 2 ** 20).toFixed(0)} MiB) need ${c32.copyMs.toFixed(2)} ms of copy engine, hidden under it. The bar holds while ` +
  `the kernel runs at >= ${((4 * 32768 * 32768 * H * D * 0.5) / 2 / ((8.5 - 0.01 - c32.startMs) / x.ringCost) / 1e9).toFixed(0)} TFLOP/s.`);
const dir = join(import.meta.dirname, "results");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "model-ring-attention.md"), lines.join("\n") + "\n");
writeFileSync(join(dir, "model-ring-attention.json"), JSON.stringify({ inputs: x, rows }, null, 1));
console.log(lines.join("\n"));
