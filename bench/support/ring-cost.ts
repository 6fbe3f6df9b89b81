// ring-cost.ts — the fused ring's own cost on one GPU, for bench/attention.ts:
//   world 1: the ring op with one rank (no peers, the ring kernel and its control words) against the
//            plain kernel on the same shape;
//   world 2: two ranks sharing the GPU (half its SMs each, zigzag for causal, contiguous otherwise)
//            against the plain kernel on the whole sequence.
// Each ring sample launches every rank's plan together (RingAttentionPlan.launchAll) and times
// until both are done; the first launch of each is checked against the fp32 reference.
import { Communicator } from "../../lib/comm.ts";
import { planAttention } from "../../lib/ops/attention.ts";
import { RingAttentionPlan } from "../../lib/ops/ring-attention.ts";
import type { Stream } from "../../lib/stream.ts";
import { AttentionProblem } from "../../test/support/attention.ts";
import { ranksOnOneGpu, RingProblem, type RingCase } from "../../test/support/ring-attention.ts";

export interface RingCostRow {
  name: string;
  world: number;
  ringMs: number;
  plainMs: number;
  mover: string;
  rel: number;
}

type TimeLoop = (fn: () => void, stream: Stream) => { medianMs: number };

const shapes: Omit<RingCase, "layout">[] = [
  { batch: 1, seqlen: 8192, heads: 32, kvHeads: 32, headDim: 128, causal: true },
  { batch: 1, seqlen: 8192, heads: 32, kvHeads: 32, headDim: 128, causal: false },
  { batch: 1, seqlen: 32768, heads: 32, kvHeads: 32, headDim: 128, causal: true },
  // The other mover, for the cost model's choice: 4 of the kernel's CTAs copy instead of the engines.
  { batch: 1, seqlen: 32768, heads: 32, kvHeads: 32, headDim: 128, causal: true, config: { mover: "ctas", commCtas: 4 } },
];

/** The rows, pushed into `rows` as each is measured (a failure part way keeps what was measured). */
export async function ringCostRows(stream: Stream, timeLoop: TimeLoop, rows: RingCostRow[] = []): Promise<RingCostRow[]> {
  for (const world of [1, 2]) {
    const comms = await ranksOnOneGpu(world, 3 * 2 ** 30, 30_000);
    try {
      for (const shape of shapes) {
        if (world === 1 && shape.config) continue;  // nothing to move
        const c: RingCase = { ...shape, layout: shape.causal ? "zigzag" : "contiguous" };
        using ring = new RingProblem(comms, c, 77);
        await ring.run();
        const rel = Math.max(...ring.check(`ring W ${world}`).map((e) => e.rel));
        const plans = ring.ranks.map((r) => r.plan);
        // Times on rank 0's stream: launchAll queues every rank's kernel, and rank 0's completion
        // waits for the peers' (each rank's kernel waits for the others' data and pulls).
        const ringMs = timeLoop(() => void RingAttentionPlan.launchAll(plans), comms[0]!.stream).medianMs;
        // Drain: one more launch of every rank together, then wait for each (a lone runSync would wait
        // for peers that were never launched).
        const seqs = RingAttentionPlan.launchAll(plans);
        plans.forEach((p, i) => p.wait(seqs[i]!));
        using plain = new AttentionProblem({ batch: c.batch, seqQ: c.seqlen, seqK: c.seqlen, heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, causal: c.causal }, 5);
        using plan = planAttention({ ...plain.args, stream });
        const plainMs = timeLoop(() => void plan.launch(), stream).medianMs;
        plan.runSync();
        rows.push({ name: `D${c.headDim} S${c.seqlen / 1024}k ${c.causal ? "causal" : "full"} ${c.layout}${c.config ? " (mover ctas)" : ""}`, world, ringMs, plainMs,
          mover: plans[0]!.choice.mover, rel });
        console.log(`ring W ${world} ${rows[rows.length - 1]!.name}: ${ringMs.toFixed(3)} ms vs plain ${plainMs.toFixed(3)} ms`);
      }
    } finally {
      await Communicator.disposeAll(comms);
    }
  }
  return rows;
}
