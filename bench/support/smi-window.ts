// smi-window.ts — the SM clock and power over a wall-clock window, from the nvidia-smi log that
// bench/gpu-host.sh keeps for the whole call (SMI_CSV: --query-gpu=timestamp,index,clocks.sm,
// power.draw --format=csv,noheader -lms 50). Under the card's power cap a harness's duty cycle sets
// its clocks (bench/DECISIONS.md, "Both harnesses rest 2 ms before every sample"), so a table that
// compares two libraries timed seconds apart shows each one's clock beside its time.
import { existsSync, readFileSync } from "node:fs";

export interface SmiWindow {
  /** Median SM clock (MHz) and power (W) of the samples inside the window; n: how many. */
  clockMHz: number;
  powerW: number;
  n: number;
}

interface Sample {
  t: number;
  gpu: number;
  clockMHz: number;
  powerW: number;
}

// nvidia-smi writes local time ("2026/12/02 14:00:00.123"); Date's local constructor reads it the
// same way, so the samples and Date.now() windows share one clock.
function parseLine(line: string): Sample | undefined {
  const f = line.split(",").map((x) => x.trim());
  const m = /^(\d+)\/(\d+)\/(\d+) (\d+):(\d+):(\d+)(?:\.(\d+))?$/.exec(f[0] ?? "");
  if (!m || f.length < 4) return undefined;
  const ms = m[7] ? Number(m[7].padEnd(3, "0").slice(0, 3)) : 0;
  const t = new Date(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, ms).getTime();
  const clockMHz = Number.parseFloat(f[2]!), powerW = Number.parseFloat(f[3]!);
  return Number.isFinite(clockMHz) && Number.isFinite(powerW) ? { t, gpu: Number(f[1]), clockMHz, powerW } : undefined;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The log's samples of `gpu` in [t0, t1] (epoch ms); undefined without a log or samples. */
export function smiWindow(window: [number, number] | undefined, gpu = 0, path = process.env.SMI_CSV): SmiWindow | undefined {
  if (!window || !path || !existsSync(path)) return undefined;
  const sel = readFileSync(path, "utf8").split("\n").map(parseLine)
    .filter((s): s is Sample => s !== undefined && s.gpu === gpu && s.t >= window[0] && s.t <= window[1]);
  if (sel.length === 0) return undefined;
  return { clockMHz: median(sel.map((s) => s.clockMHz)), powerW: median(sel.map((s) => s.powerW)), n: sel.length };
}
