// attention.ts — weft's attention engine against torch SDPA (cuDNN and FlashAttention backends,
// bench/peers/torch_attention.py run as a child process in the same device call), and the fused
// ring's own cost on one GPU (bench/support/ring-cost.ts).
//
//   bun bench/attention.ts [--samples N] [--rounds R] [--rest-ms MS] [--only NAME,...] [--no-torch] [--no-ring]
//
// Cases: B 1, H 32, D 128 and 64, S 8k and 32k, causal and not, and one GQA row (Hkv 8). Each
// sample is a back-to-back loop of ~20 ms of launches timed with CUDA events, after MS of idle GPU
// (default 0). torch's harness stays alive beside this one (torch_attention.py --serve), and each
// case is timed R times (default 2) in alternation, ours then torch's, so both libraries meet the
// card in the same thermal state: under its power cap the clock falls from ~1980 to ~1700 MHz in a
// second of this load, and a case timed minutes apart in another process read up to 8% apart from
// call to call. The table shows the median over rounds of each round's median (min, max of the
// samples), TFLOP/s with causal counted as half the work, the ratios cuDNN time / ours and flash
// time / ours (>= 1: we are faster), and, where the host keeps an nvidia-smi log (SMI_CSV:
// bench/gpu-host.sh), the median SM clock while each was timed. Our output at S 8k is checked
// against the fp32 reference kernel, so a fast but wrong kernel cannot hide in the table.
// Writes bench/results/attention.json and bench/results/attention.md (and copies them to $OUT).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { deviceInfo } from "../lib/device.ts";
import { planAttention, type AttentionPlan } from "../lib/ops/attention.ts";
import { Event, Stream } from "../lib/stream.ts";
import { Tensor } from "../lib/tensor.ts";
import { AttentionProblem, compare } from "../test/support/attention.ts";
import { JsonLinesPeer } from "./support/json-lines-peer.ts";
import { ringCostRows, ringCostTable, type RingCostRow } from "./support/ring-cost.ts";
import { smiWindow } from "./support/smi-window.ts";

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const value = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const samples = Number(value("--samples") ?? 7);
const rounds = Number(value("--rounds") ?? 2);
const restMs = Number(value("--rest-ms") ?? 0);
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
  /** Wall-clock window of the samples, epoch ms (both harnesses). */
  window?: [number, number];
  /** Median SM clock in that window (smi-window.ts), median over rounds. */
  clockMHz?: number;
}

const restSleeper = new Int32Array(new SharedArrayBuffer(4));

/** Median (min, max) of `n` samples, each a loop of ~loopMs of fn() between two events on `stream`,
 * after --rest-ms of idle GPU. */
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
  const t0 = Date.now();
  for (let s = 0; s < n; s++) {
    if (restMs > 0) Atomics.wait(restSleeper, 0, 0, restMs);
    a.record(stream);
    for (let i = 0; i < loop; i++) fn();
    b.record(stream);
    b.synchronize();
    times.push(b.elapsedSince(a) / loop);
  }
  times.sort((x, y) => x - y);
  return { medianMs: times[Math.floor(times.length / 2)]!, minMs: times[0]!, maxMs: times[times.length - 1]!, samples: n, loop, window: [t0, Date.now()] };
}

/** One timing from several rounds': the median of their medians, the extremes of all samples, the
 * median of their clocks. */
function pooled(ts: Timing[]): Timing {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const clocks = ts.map((t) => smiWindow(t.window)?.clockMHz).filter((c): c is number => c !== undefined);
  return {
    medianMs: med(ts.map((t) => t.medianMs)), minMs: Math.min(...ts.map((t) => t.minMs)), maxMs: Math.max(...ts.map((t) => t.maxMs)),
    samples: ts.reduce((n, t) => n + t.samples, 0), loop: ts[0]!.loop, clockMHz: clocks.length ? med(clocks) : undefined,
  };
}

interface Row {
  case: Case;
  ours: Timing;
  choice: ReturnType<AttentionPlan["choice"]>;
  rel?: number;
  lseMax?: number;
  torch: Record<string, (Timing & { gqa?: string }) | { error: string }>;
}

type TorchCase = Record<string, (Timing & { gqa?: string }) | { error: string }>;

/** torch's harness, alive for the whole bench (torch_attention.py --serve), or why it is not. */
async function startTorch(): Promise<{ peer: JsonLinesPeer; meta: Record<string, unknown> } | { error: string }> {
  if (flag("--no-torch")) return { error: "--no-torch" };
  try {
    const { peer, banner } = await JsonLinesPeer.start("python3",
      ["bench/peers/torch_attention.py", "--serve", "--samples", String(samples), "--rest-ms", String(restMs)], 300_000);
    return { peer, meta: banner as Record<string, unknown> };
  } catch (e) {
    return { error: `torch_attention.py failed: ${(e as Error).message}` };
  }
}

async function main(): Promise<void> {
  const dev = deviceInfo(0);
  using stream = Stream.create(0);
  const torch = await startTorch();
  let torchError = "error" in torch ? torch.error : undefined;
  const timed = selected.map(() => ({ ours: [] as Timing[], torch: [] as TorchCase[] }));
  const rows: Row[] = selected.map((c) => ({ case: c, ours: undefined!, choice: undefined!, torch: {} }));
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [i, c] of selected.entries()) {
        const row = rows[i]!;
        {
          using p = new AttentionProblem({ batch: c.batch, seqQ: c.seq, seqK: c.seq, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, causal: c.causal }, 11);
          using plan = planAttention({ ...p.args, stream });
          row.choice = plan.choice();
          if (round === 0 && c.seq <= 8192) {
            plan.runSync();
            const ref = p.reference();
            const e = compare(p.out, ref.out32, p.lse, ref.lse32);
            row.rel = e.nonFinite > 0 ? Number.NaN : e.rel;
            row.lseMax = e.lseMax;
            ref.out32.dispose();
            ref.lse32.dispose();
          }
          timed[i]!.ours.push(timeLoop(() => plan.launch(), stream));
          plan.runSync();  // drains the loop's launches through their completions
        }
        const ours = timed[i]!.ours.at(-1)!;
        let line = `${c.name} round ${round}: ours ${ours.medianMs.toFixed(3)} ms (${(flopsOf(c) / ours.medianMs / 1e9).toFixed(0)} TFLOP/s)` +
          `${round === 0 && row.rel !== undefined ? `, rel ${row.rel.toExponential(2)}, lse ${row.lseMax!.toExponential(2)}` : ""}`;
        if ("peer" in torch && torchError === undefined) {
          try {
            const t = (await torch.peer.request(c, 600_000)) as TorchCase;
            timed[i]!.torch.push(t);
            const cu = t.cudnn && "medianMs" in t.cudnn ? t.cudnn.medianMs : undefined;
            if (cu) line += `; cuDNN ${cu.toFixed(3)} ms, cuDNN / ours ${(cu / ours.medianMs).toFixed(3)}`;
          } catch (e) {
            torchError = (e as Error).message;
          }
        }
        console.log(line);
      }
    }
  } finally {
    if ("peer" in torch) torch.peer.close();
  }
  for (const [i, row] of rows.entries()) {
    row.ours = pooled(timed[i]!.ours);
    for (const backend of new Set(timed[i]!.torch.flatMap((t) => Object.keys(t)))) {
      const ts = timed[i]!.torch.map((t) => t[backend]).filter((t): t is Timing => t !== undefined && "medianMs" in t);
      const failed = timed[i]!.torch.map((t) => t[backend]).find((t) => t !== undefined && "error" in t);
      row.torch[backend] = ts.length ? { ...pooled(ts), gqa: (ts[0] as Timing & { gqa?: string }).gqa } : failed!;
    }
  }
  if (torchError) console.log(`torch: ${torchError}`);
  const ring: RingCostRow[] = [];
  let ringError: string | undefined;
  try {
    if (!flag("--no-ring")) await ringCostRows(stream, timeLoop, ring);
  } catch (e) {
    // The kernel table (and torch's numbers) still get written; the failure is in the report.
    ringError = `${(e as Error).name}: ${(e as Error).message}`;
    console.log(`ring: failed after ${ring.length} rows: ${ringError}`);
  }
  report(rows, ring, dev.name, torchError === undefined && "meta" in torch ? torch.meta : { error: torchError }, ringError);
  if (ringError) process.exitCode = 1;
}

function report(rows: Row[], ring: RingCostRow[], device: string, torch: Record<string, unknown>, ringError?: string): void {
  const tf = (c: Case, ms: number | undefined) => (ms ? (flopsOf(c) / ms / 1e9).toFixed(0) : "-");
  const ms = (t: Timing | { error: string } | undefined) => (t && "medianMs" in t ? t.medianMs : undefined);
  const lines = [
    `# Attention forward (${device}, one GPU)`, "",
    `bf16, random inputs, [B, S, H, D]. ${rounds} rounds, ours then torch's in each (torch_attention.py --serve); per round the median of ` +
    `${samples} CUDA-event samples (each a back-to-back loop of ~20 ms after ${restMs} ms of idle GPU), the table the median over rounds; ` +
    `SM MHz: the median clock while each was timed (nvidia-smi every 50 ms). TFLOP/s count causal as half. cuDNN / ours and flash / ours: time ratios (>= 1: ours is faster). torch: ` +
    `${JSON.stringify(torch)}. rel: ours against the fp32 reference kernel (S 8k only). Generated by bench/attention.ts on ${new Date().toISOString()}.`, "",
    "| case | ours ms (min-max) | ours TFLOP/s | cuDNN ms | cuDNN TFLOP/s | flash ms | cuDNN / ours | flash / ours | SM MHz ours / cuDNN | tile, ctas | rel, lse |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
  ];
  const mhz = (t: Timing | { error: string } | undefined) => (t && "clockMHz" in t && t.clockMHz !== undefined ? t.clockMHz.toFixed(0) : "-");
  for (const r of rows) {
    const cu = ms(r.torch.cudnn), fl = ms(r.torch.flash);
    lines.push(`| ${r.case.name} | ${r.ours.medianMs.toFixed(3)} (${r.ours.minMs.toFixed(3)}-${r.ours.maxMs.toFixed(3)}) | ${tf(r.case, r.ours.medianMs)} | ` +
      `${cu?.toFixed(3) ?? "-"} | ${tf(r.case, cu)} | ${fl?.toFixed(3) ?? "-"} | ${cu ? (cu / r.ours.medianMs).toFixed(3) : "-"} | ` +
      `${fl ? (fl / r.ours.medianMs).toFixed(3) : "-"} | ${mhz(r.ours)} / ${mhz(r.torch.cudnn)} | ${r.choice.blockM}x${r.choice.blockN}, ${r.choice.ctas} | ` +
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
  const json = JSON.stringify({ device, torch, samples, rounds, restMs, rows, ring, ringError }, null, 1);
  writeFileSync(join(dir, "attention.json"), json);
  writeFileSync(join(dir, "attention.md"), lines.join("\n") + "\n");
  if (process.env.OUT) {
    writeFileSync(join(process.env.OUT, "attention.json"), json);
    writeFileSync(join(process.env.OUT, "attention.md"), lines.join("\n") + "\n");
  }
  console.log(lines.join("\n"));
}

if (import.meta.main) await main();
