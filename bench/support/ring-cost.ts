// ring-cost.ts — the fused ring's own cost on one GPU, for bench/attention.ts and bench/ring-cost.ts:
//   world 1: the ring op with one rank (no peers, the ring kernel and its control words) against the
//            plain kernel on the same shape;
//   world 2: two ranks sharing the GPU (half its SMs each, zigzag for causal, contiguous otherwise)
//            against the plain kernel on the whole sequence.
// Each ring sample launches every rank's plan together (RingAttentionPlan.launchAll) and times
// until both are done; the first launch of each is checked against the fp32 reference.
// Ring and plain samples alternate (ring, plain, ring, plain, ...) and the row reports the median of
// the per-pair ratios with its min and max: the clocks drift by a few percent over seconds, which
// separate blocks of samples would read as part of the ratio.
import { Communicator } from "../../lib/comm.ts";
import { planAttention } from "../../lib/ops/attention.ts";
import { RingAttentionPlan } from "../../lib/ops/ring-attention.ts";
import { Event, type Stream } from "../../lib/stream.ts";
import { AttentionProblem } from "../../test/support/attention.ts";
import { ranksOnOneGpu, RingProblem, type RingCase } from "../../test/support/ring-attention.ts";

export interface RingCostRow {
  name: string;
  world: number;
  ringMs: number;
  plainMs: number;
  /** Median, min and max of the per-pair ratios ring / plain. */
  ratio: { median: number; min: number; max: number };
  /** Each rank's own duration (an event pair on its stream around one launchAll), median over calls. */
  rankMs: number[];
  mover: string;
  groupHeads: number;
  rel: number;
}

type TimeLoop = (fn: () => void, stream: Stream, n?: number) => { medianMs: number };

export type RingShape = Omit<RingCase, "layout"> & { worlds?: number[] };

export const ringCostShapes: RingShape[] = [
  { batch: 1, seqlen: 8192, heads: 32, kvHeads: 32, headDim: 128, causal: true },
  { batch: 1, seqlen: 8192, heads: 32, kvHeads: 32, headDim: 128, causal: false },
  { batch: 1, seqlen: 32768, heads: 32, kvHeads: 32, headDim: 128, causal: true },
  // The other mover, for the cost model's choice: 4 of the kernel's CTAs copy instead of the engines.
  { batch: 1, seqlen: 32768, heads: 32, kvHeads: 32, headDim: 128, causal: true, config: { mover: "ctas", commCtas: 4 }, worlds: [2] },
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Each rank's duration of one launchAll, median over `calls`: the ranks run side by side, and the
 * call lasts as long as the slower one. */
function perRankMs(plans: RingAttentionPlan[], comms: Communicator[], calls: number): number[] {
  const starts = comms.map((c) => Event.create(c.device));
  const ends = comms.map((c) => Event.create(c.device));
  try {
    const ms: number[][] = comms.map(() => []);
    for (let i = 0; i < calls; i++) {
      comms.forEach((c, r) => starts[r]!.record(c.stream));
      RingAttentionPlan.launchAll(plans);
      comms.forEach((c, r) => ends[r]!.record(c.stream));
      comms.forEach((_, r) => { ends[r]!.synchronize(); ms[r]!.push(ends[r]!.elapsedSince(starts[r]!)); });
    }
    return ms.map(median);
  } finally {
    for (const e of [...starts, ...ends]) e[Symbol.dispose]();
  }
}

/** The rows, pushed into `rows` as each is measured (a failure part way keeps what was measured). */
export async function ringCostRows(stream: Stream, timeLoop: TimeLoop, rows: RingCostRow[] = [],
  opts: { worlds?: number[]; shapes?: RingShape[]; pairs?: number } = {}): Promise<RingCostRow[]> {
  const pairs = opts.pairs ?? 9;
  for (const world of opts.worlds ?? [1, 2]) {
    const comms = await ranksOnOneGpu(world, 3 * 2 ** 30, 30_000);
    try {
      for (const shape of opts.shapes ?? ringCostShapes) {
        if (!(shape.worlds ?? [1, 2]).includes(world)) continue;
        const { worlds: _, ...rest } = shape;
        const c: RingCase = { ...rest, layout: shape.causal ? "zigzag" : "contiguous" };
        using ring = new RingProblem(comms, c, 77);
        await ring.run();
        const rel = Math.max(...ring.check(`ring W ${world}`).map((e) => e.rel));
        const plans = ring.ranks.map((r) => r.plan);
        using plain = new AttentionProblem({ batch: c.batch, seqQ: c.seqlen, seqK: c.seqlen, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, causal: c.causal }, 5);
        using plan = planAttention({ ...plain.args, stream });
        const ringTimes: number[] = [], plainTimes: number[] = [], ratios: number[] = [];
        for (let p = 0; p < pairs; p++) {
          // Times on rank 0's stream: launchAll queues every rank's kernel, and rank 0's completion
          // waits for the peers' (each rank's kernel waits for the others' data and pulls).
          const r = timeLoop(() => void RingAttentionPlan.launchAll(plans), comms[0]!.stream, 1).medianMs;
          // Drain: one more launch of every rank together, then wait for each (a lone runSync would
          // wait for peers that were never launched).
          const seqs = RingAttentionPlan.launchAll(plans);
          plans.forEach((q, i) => q.wait(seqs[i]!));
          const pl = timeLoop(() => void plan.launch(), stream, 1).medianMs;
          plan.runSync();
          ringTimes.push(r); plainTimes.push(pl); ratios.push(r / pl);
        }
        const rankMs = perRankMs(plans, comms, 15);
        ratios.sort((a, b) => a - b);
        const choice = plans[0]!.choice;
        rows.push({
          name: `D${c.headDim} S${c.seqlen / 1024}k ${c.causal ? "causal" : "full"} ${c.layout}${c.config ? ` ${JSON.stringify(c.config)}` : ""}`,
          world, ringMs: median(ringTimes), plainMs: median(plainTimes),
          ratio: { median: median(ratios), min: ratios[0]!, max: ratios[ratios.length - 1]! },
          rankMs, mover: choice.mover, groupHeads: choice.groupHeads, rel,
        });
        const row = rows[rows.length - 1]!;
        console.log(`ring W ${world} ${row.name}: ${row.ringMs.toFixed(3)} ms vs plain ${row.plainMs.toFixed(3)} ms, ` +
          `ratio ${row.ratio.median.toFixed(3)} (${row.ratio.min.toFixed(3)}-${row.ratio.max.toFixed(3)}), ranks ${rankMs.map((m) => m.toFixed(3)).join(" / ")} ms`);
      }
    } finally {
      await Communicator.disposeAll(comms);
    }
  }
  return rows;
}

/** The ring table's markdown lines. */
export function ringCostTable(ring: RingCostRow[]): string[] {
  const lines = ["| case | world | ring ms | plain ms | ring / plain (min-max of pairs) | ranks ms | mover, group heads | rel |",
    "|---|---:|---:|---:|---:|---|---|---|"];
  for (const r of ring) {
    lines.push(`| ${r.name} | ${r.world} | ${r.ringMs.toFixed(3)} | ${r.plainMs.toFixed(3)} | ` +
      `${r.ratio.median.toFixed(3)} (${r.ratio.min.toFixed(3)}-${r.ratio.max.toFixed(3)}) | ${r.rankMs.map((m) => m.toFixed(3)).join(" / ")} | ` +
      `${r.mover}, ${r.groupHeads} | ${r.rel.toExponential(1)} |`);
  }
  return lines;
}
