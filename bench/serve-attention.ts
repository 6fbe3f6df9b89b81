// serve-attention.ts — one layer's attention as the serve decoder runs it (examples/serve/attention.ts):
// EngineAttention (the q copy, then the engine over the KV cache in place) against ReferenceAttention
// (cacheAttention, one CTA per row and head), per call, on one GPU.
//
//   bun bench/serve-attention.ts [--samples N]
//
// Cases: the `small` preset's shard at world 2 (8 query heads, 2 kv heads, D 64; the engine capped
// at half the SMs, as each of two ranks sharing a GPU is) and `llama-8b`'s at world 1 (32 / 8, D 128,
// every SM): decode batches of 8 and 64 sequences of 100 and 1000 cached keys, and one prefill (4
// prompts of 256). Every sequence is in its own slot, slots in reverse order. Each sample is ~20 ms
// of back-to-back calls timed with CUDA events (the median of the samples is shown); before timing,
// every row of the engine's output is checked against the reference's (rel ≤ 1e-2).
// Writes bench/results/serve-attention.{json,md}.
import { mkdirSync, writeFileSync } from "node:fs";

import { EngineAttention, ReferenceAttention, type AttentionBackend, type AttentionCall } from "../examples/serve/attention.ts";
import { deviceInfo } from "../lib/device.ts";
import { Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { relError } from "../test/support/gpu.ts";
import { timeLoop } from "./attention.ts";

const args = process.argv.slice(2);
const samples = Number(args.includes("--samples") ? args[args.indexOf("--samples") + 1] : 7);

interface Case {
  name: string;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Query rows of each sequence (decode: 1) and its keys (they include this step's). */
  queries: number[];
  keys: number[];
  maxCtas: "half" | "all";
}

const decode = (n: number, keys: number) => ({ queries: Array(n).fill(1), keys: Array(n).fill(keys) });
const cases: Case[] = [];
for (const [shard, heads, kvHeads, headDim, maxCtas] of [["small/2", 8, 2, 64, "half"], ["8b/1", 32, 8, 128, "all"]] as const) {
  for (const n of [8, 64]) {
    for (const keys of [100, 1000]) cases.push({ name: `${shard} decode B ${n} keys ${keys}`, heads, kvHeads, headDim, ...decode(n, keys), maxCtas });
  }
  cases.push({ name: `${shard} prefill 4 x 256`, heads, kvHeads, headDim, queries: [256, 256, 256, 256], keys: [256, 256, 256, 256], maxCtas });
}

/** The decoder's tensors for one case, on device 0 (meta as decoder.ts builds it). */
function setup(c: Case, stream: Stream, maxCtas: number) {
  const S = c.keys.length, M = 1024 * Math.ceil(Math.max(...c.keys) / 1024);
  const rows = c.queries.reduce((a, n) => a + n, 0);
  const width = (c.heads + 2 * c.kvHeads) * c.headDim, kv = c.kvHeads * c.headDim;
  const qkv = Tensor.empty([rows, width], "bf16").fillRandom(1);
  const kCache = Tensor.empty([S, M, kv], "bf16").fillRandom(2);
  const vCache = Tensor.empty([S, M, kv], "bf16").fillRandom(3);
  const slotOf = (b: number) => S - 1 - b;
  const slotIds: number[] = [], positions: number[] = [], cu = [0];
  c.queries.forEach((n, b) => {
    for (let j = 0; j < n; j++) {
      slotIds.push(slotOf(b));
      positions.push(c.keys[b]! - n + j);
    }
    cu.push(cu.at(-1)! + n);
  });
  const i32 = (a: number[]) => Tensor.from(Int32Array.from(a), [a.length], "i32");
  const t = {
    qkv, kCache, vCache, slotIds: i32(slotIds), positions: i32(positions), cuSeqlens: i32(cu),
    keyStarts: i32([...c.keys.map((_, b) => slotOf(b) * M), 0]), keyCounts: i32(c.keys),
    out: Tensor.empty([rows, c.heads * c.headDim], "bf16"),
  };
  const call: AttentionCall = {
    phase: c.queries.every((n) => n === 1) ? "decode" : "prefill", qkv, qColumn: 0, kColumn: c.heads * c.headDim,
    vColumn: (c.heads + c.kvHeads) * c.headDim, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, kCache, vCache,
    slotIds: t.slotIds, positions: t.positions, cuSeqlens: t.cuSeqlens, maxSeqlen: Math.max(...c.queries), keyStarts: t.keyStarts,
    keyCounts: t.keyCounts, out: t.out, rows, scale: 1 / Math.sqrt(c.headDim), stream, maxCtas,
  };
  return { call, dispose: () => Object.values(t).forEach((x) => x.dispose()) };
}

const time = (fn: () => void, stream: Stream) => timeLoop(fn, stream, samples).medianMs * 1000;

const dev = deviceInfo(0);
using stream = Stream.create(0);
const engine = new EngineAttention();
const reference = new ReferenceAttention();
const rows: { case: Case; referenceUs: number; engineUs: number; rel: number }[] = [];
try {
  for (const c of cases) {
    const s = setup(c, stream, c.maxCtas === "half" ? Math.floor(dev.smCount / 2) : 0);
    try {
      const run = (b: AttentionBackend) => b.forward(s.call);
      run(reference);
      stream.synchronize();
      const want = s.call.out.download() as Float32Array;
      s.call.out.fill(Number.NaN);
      const l = run(engine)!;
      stream.synchronize();
      l.plan.wait(l.seq);
      const rel = relError(s.call.out.download() as Float32Array, want);
      if (!(rel <= 1e-2)) throw new Error(`${c.name}: the engine's output is off the reference's by ${rel}`);
      const referenceUs = time(() => void run(reference), stream);
      const engineUs = time(() => void run(engine), stream);
      stream.synchronize();
      rows.push({ case: c, referenceUs, engineUs, rel });
      console.log(`${c.name}: reference ${referenceUs.toFixed(1)} us, engine ${engineUs.toFixed(1)} us (${(referenceUs / engineUs).toFixed(2)}x), rel ${rel.toExponential(2)}`);
    } finally {
      s.dispose();
    }
  }
} finally {
  engine.dispose();
}

const md = `# Serve attention per call: engine over the KV cache in place vs the reference kernel (${dev.name})

One layer's attention as examples/serve's decoder runs it: EngineAttention = the q copy out of the
qkv rows, then weft's attention engine reading each sequence's keys from its cache slot (sequsedK);
ReferenceAttention = cacheAttention (one CTA per row and head). "small/2": the small preset's shard at
world 2 (8 q heads, 2 kv heads, D 64; engine capped at ${Math.floor(dev.smCount / 2)} CTAs, as one of two
ranks sharing the GPU); "8b/1": llama-8b at world 1 (32 / 8, D 128, every SM). Median of ${samples}
samples of ~20 ms of back-to-back calls (CUDA events). Generated by \`bun bench/serve-attention.ts\`,
${new Date().toISOString()}.

| case | reference µs | engine µs | reference / engine | engine rel err |
|---|---|---|---|---|
${rows.map((r) => `| ${r.case.name} | ${r.referenceUs.toFixed(1)} | ${r.engineUs.toFixed(1)} | ${(r.referenceUs / r.engineUs).toFixed(2)} | ${r.rel.toExponential(2)} |`).join("\n")}
`;
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/serve-attention.json", JSON.stringify({ bench: "serve-attention", device: dev.name, date: new Date().toISOString(), samples, rows }, null, 2));
writeFileSync("bench/results/serve-attention.md", md);
console.log(md);
