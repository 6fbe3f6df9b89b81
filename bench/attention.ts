// attention.ts — weft's attention engine against torch SDPA (cuDNN and FlashAttention backends,
// bench/peers/torch_attention.py run as a child process in the same device call), and the fused
// ring's own cost on one GPU (bench/support/ring-cost.ts).
//
//   bun bench/attention.ts [--samples N] [--only NAME,...] [--no-torch] [--no-ring]
//
// Cases: B 1, H 32, D 128 and 64, S 8k and 32k, causal and not, and one GQA row (Hkv 8). Each
// sample is a back-to-back loop of ~20 ms of launches timed with CUDA events; the table shows the
// median (min, max) of the samples, TFLOP/s with causal counted as half the work, and the ratios
// cuDNN time / ours and flash time / ours (>= 1: we are faster). Our output at S 8k is checked
// against the fp32 reference kernel, so a fast but wrong kernel cannot hide in the table.
// Writes bench/results/attention.json and bench/results/attention.md (and copies them to $OUT).
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { deviceInfo } from "../lib/device.ts";
import { planAttention, type AttentionPlan } from "../lib/ops/attention.ts";
import { Event, Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { AttentionProblem, compare } from "../test/support/attention.ts";
import { ringCostRows, ringCostTable, type RingCostRow } from "./support/ring-cost.ts";

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const value = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const samples = Number(value("--samples") ?? 7);
const only = value("--only")?.split(",");

export interface Case {
  name: string;
  batch: number;
  seq: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  causal: boolean;
}

const cases: Case[] = [];
for (const headDim of [128, 64]) {
  for (const seq of [8192, 32768]) {
    for (const causal of [false, true]) {
      cases.push({ name: `D${headDim} S${seq / 1024}k ${causal ? "causal" : "full"}`, batch: 1, seq, heads: 32, kvHeads: 32, headDim, causal });
    }
  }
}
cases.push({ name: "D128 S8k full GQA8", batch: 1, seq: 8192, heads: 32, kvHeads: 8, headDim: 128, causal: false });
cases.push({ name: "D128 S8k causal GQA8", batch: 1, seq: 8192, heads: 32, kvHeads: 8, headDim: 128, causal: true });
const selected = only ? cases.filter((c) => only.includes(c.name)) : cases;

export const flopsOf = (c: Omit<Case, "name">) => 4 * c.batch * c.heads * c.seq * c.seq * c.headDim * (c.causal ? 0.5 : 1);

export interface Timing {
  medianMs: number;
  minMs: number;
  maxMs: number;
  samples: number;
  loop: number;
}

/** Median (min, max) of `n` samples, each a loop of ~loopMs of fn() between two events on `stream`. */
export function timeLoop(fn: () => void, stream: Stream, n = samples, loopMs = 20): Timing {
  using a = Event.create(stream.device);
  using b = Event.create(stream.device);
  for (let i = 0; i < 3; i++) fn();
  a.record(stream);
  fn();
  b.record(stream);
  b.synchronize();
  const loop = Math.max(1, Math.ceil(loopMs / Math.max(b.elapsedSince(a), 1e-3)));
  const times: number[] = [];
  for (let s = 0; s < n; s++) {
    a.record(stream);
    for (let i = 0; i < loop; i++) fn();
    b.record(stream);
    b.synchronize();
    times.push(b.elapsedSince(a) / loop);
  }
  times.sort((x, y) => x - y);
  return { medianMs: times[Math.floor(times.length / 2)]!, minMs: times[0]!, maxMs: times[times.length - 1]!, samples: n, loop };
}

interface Row {
  case: Case;
  ours: Timing;
  choice: ReturnType<AttentionPlan["choice"]>;
  rel?: number;
  lseMax?: number;
  torch: Record<string, (Timing & { gqa?: string }) | { error: string }>;
}

function runTorch(list: Case[]): { meta: Record<string, unknown>; cases: Record<string, Row["torch"]> } | { error: string } {
  if (flag("--no-torch")) return { error: "--no-torch" };
  const out = join(tmpdir(), `torch_attention_${process.pid}.json`);
  const r = spawnSync("python3", ["bench/peers/torch_attention.py", "--cases", JSON.stringify(list), "--out", out, "--samples", String(samples)],
    { encoding: "utf8", timeout: 1_200_000 });
  if (r.status !== 0) return { error: `torch_attention.py failed (${r.status}): ${(r.stderr || r.stdout || "").trim().split("\n").slice(-3).join(" | ")}` };
  const j = JSON.parse(readFileSync(out, "utf8"));
  return { meta: { torch: j.torch, cudnn: j.cudnn, device: j.device }, cases: j.cases };
}

async function main(): Promise<void> {
  const dev = deviceInfo(0);
  using stream = Stream.create(0);
  const rows: Row[] = [];
  for (const c of selected) {
    using p = new AttentionProblem({ batch: c.batch, seqQ: c.seq, seqK: c.seq, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, causal: c.causal }, 11);
    using plan = planAttention({ ...p.args, stream });
    const choice = plan.choice();
    let rel: number | undefined, lseMax: number | undefined;
    if (c.seq <= 8192) {
      plan.runSync();
      const ref = p.reference();
      const e = compare(p.out, ref.out32, p.lse, ref.lse32);
      rel = e.nonFinite > 0 ? Number.NaN : e.rel;
      lseMax = e.lseMax;
      ref.out32.dispose();
      ref.lse32.dispose();
    }
    const ours = timeLoop(() => plan.launch(), stream);
    plan.runSync();  // drains the loop's launches through their completions
    rows.push({ case: c, ours, choice, rel, lseMax, torch: {} });
    console.log(`${c.name}: ours ${ours.medianMs.toFixed(3)} ms (${(flopsOf(c) / ours.medianMs / 1e9).toFixed(0)} TFLOP/s)` +
      `${rel !== undefined ? `, rel ${rel.toExponential(2)}, lse ${lseMax!.toExponential(2)}` : ""}`);
  }
  const torch = runTorch(selected);
  if ("cases" in torch) for (const r of rows) r.torch = torch.cases[r.case.name] ?? {};
  else console.log(`torch: ${torch.error}`);
  const ring: RingCostRow[] = [];
  let ringError: string | undefined;
  try {
    if (!flag("--no-ring")) await ringCostRows(stream, timeLoop, ring);
  } catch (e) {
    // The kernel table (and torch's numbers) still get written; the failure is in the report.
    ringError = `${(e as Error).name}: ${(e as Error).message}`;
    console.log(`ring: failed after ${ring.length} rows: ${ringError}`);
  }
  report(rows, ring, dev.name, "cases" in torch ? torch.meta : { error: torch.error }, ringError);
  if (ringError) process.exitCode = 1;
}

function report(rows: Row[], ring: RingCostRow[], device: string, torch: Record<string, unknown>, ringError?: string): void {
  const tf = (c: Case, ms: number | undefined) => (ms ? (flopsOf(c) / ms / 1e9).toFixed(0) : "-");
  const ms = (t: Timing | { error: string } | undefined) => (t && "medianMs" in t ? t.medianMs : undefined);
  const lines = [
    `# Attention forward (${device}, one GPU)`, "",
    `bf16, random inputs, [B, S, H, D]. Median of ${samples} CUDA-event samples (each a back-to-back loop of ~20 ms); ` +
    `TFLOP/s count causal as half. cuDNN / ours and flash / ours: time ratios (>= 1: ours is faster). torch: ` +
    `${JSON.stringify(torch)}. rel: ours against the fp32 reference kernel (S 8k only). Generated by bench/attention.ts on ${new Date().toISOString()}.`, "",
    "| case | ours ms (min-max) | ours TFLOP/s | cuDNN ms | cuDNN TFLOP/s | flash ms | cuDNN / ours | flash / ours | tile, ctas | rel, lse |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
  ];
  for (const r of rows) {
    const cu = ms(r.torch.cudnn), fl = ms(r.torch.flash);
    lines.push(`| ${r.case.name} | ${r.ours.medianMs.toFixed(3)} (${r.ours.minMs.toFixed(3)}-${r.ours.maxMs.toFixed(3)}) | ${tf(r.case, r.ours.medianMs)} | ` +
      `${cu?.toFixed(3) ?? "-"} | ${tf(r.case, cu)} | ${fl?.toFixed(3) ?? "-"} | ${cu ? (cu / r.ours.medianMs).toFixed(3) : "-"} | ` +
      `${fl ? (fl / r.ours.medianMs).toFixed(3) : "-"} | ${r.choice.blockM}x${r.choice.blockN}, ${r.choice.ctas} | ` +
      `${r.rel !== undefined ? `${r.rel.toExponential(1)}, ${r.lseMax!.toExponential(1)}` : "-"} |`);
  }
  const errors = rows.flatMap((r) => Object.entries(r.torch).filter(([, t]) => "error" in t).map(([b, t]) => `- ${r.case.name} ${b}: ${(t as { error: string }).error}`));
  if (errors.length) lines.push("", "torch backends that refused a case:", "", ...errors);
  if (ring.length) {
    lines.push("", "## The ring's own cost on one GPU", "",
      "The fused ring op (comm.ringAttention) against the plain kernel on the same GPU: world 1 (one rank, no peers) against the plain " +
      "kernel on the same shape, and world 2 (two ranks sharing the GPU, half its SMs each, zigzag for causal) against the plain " +
      "kernel on the whole sequence. Bars: world 1 <= 1.03, world 2 <= 1.10. Ring and plain samples alternate; the ratio is the median of the per-pair ratios.", "",
      ...ringCostTable(ring));
  }
  if (ringError) lines.push("", `The ring's cost stopped after ${ring.length} rows: ${ringError}`);
  const dir = join(import.meta.dirname, "results");
  mkdirSync(dir, { recursive: true });
  const json = JSON.stringify({ device, torch, samples, rows, ring, ringError }, null, 1);
  writeFileSync(join(dir, "attention.json"), json);
  writeFileSync(join(dir, "attention.md"), lines.join("\n") + "\n");
  if (process.env.OUT) {
    writeFileSync(join(process.env.OUT, "attention.json"), json);
    writeFileSync(join(process.env.OUT, "attention.md"), lines.join("\n") + "\n");
  }
  console.log(lines.join("\n"));
}

if (import.meta.main) await main();
