// comm.ringAttention: validation and the sequence chunking on the CPU, then the fused ring on one
// GPU as 1-4 ranks sharing it (smBudget), zigzag and contiguous, causal and not, with a sequence
// that is not a multiple of 2W x 128, a forced slot reuse, 100 back-to-back launches with every
// result checked, and the same checks on two GPUs when there are two.
import { afterAll, beforeAll, describe, expect, test } from "../support/test-api.ts";

import { Communicator } from "../../lib/comm.ts";
import { ArgumentError } from "../../lib/errors.ts";
import { native } from "../../lib/native.ts";
import {
  ringChunks, ringShardCapacity, shardLength, shardRanges, validateRingAttention, type RingDescArgs, type RingLayout,
} from "../../lib/ops/ring-attention.ts";
import { describeGpu } from "../support/gpu.ts";
import { ranksOnOneGpu, ringCaseName, RingProblem, type RingCase } from "../support/ring-attention.ts";

const GPU_TIMEOUT_MS = Number(process.env.WEFT_COMM_TIMEOUT_MS ?? 10_000);
const LONG = 600_000;
const d = (shape: number[], extra: Record<string, unknown> = {}) => ({ shape, dtype: "bf16" as const, device: 0, ...extra });
const sym = (shape: number[]) => d(shape, { symmetric: true });

describe("ring attention: chunking and validation (CPU)", () => {
  test("chunks are whole 128-token blocks, left-over blocks one per rank, the last ending at S", () => {
    expect(ringChunks(1024, 2, "zigzag")).toEqual([0, 256, 512, 768, 1024]);
    // 11 blocks over 4 chunks: 2 each, left-overs to chunk 0 (rank 0), 1 (rank 1), 3 (rank 0's second).
    expect(ringChunks(1300, 2, "zigzag")).toEqual([0, 384, 768, 1024, 1300]);
    expect(ringChunks(1300, 3, "contiguous")).toEqual([0, 512, 1024, 1300]);
    expect(shardRanges(1300, 2, "zigzag", 0)).toEqual([[0, 384], [1024, 1300]]);
    expect(shardRanges(1300, 2, "zigzag", 1)).toEqual([[384, 768], [768, 1024]]);
    expect([shardLength(1300, 2, "zigzag", 0), shardLength(1300, 2, "zigzag", 1)]).toEqual([660, 640]);
    expect([0, 1, 2, 3].map((r) => shardLength(2500, 4, "zigzag", r))).toEqual([580, 640, 640, 640]);
    expect(ringShardCapacity(1300, 2, "zigzag")).toBe(660);
    expect(() => ringChunks(896, 4, "zigzag")).toThrow(/too short for 8 chunks/);
  });

  test("the TS chunking is the library's (weft_ring_chunks)", () => {
    for (const [s, w, layout] of [[1300, 2, "zigzag"], [2500, 4, "zigzag"], [2500, 3, "contiguous"], [32768, 8, "zigzag"], [129, 1, "zigzag"]] as const) {
      const starts = new Int32Array(2 * w + 1);
      const chunks = new Int32Array(1);
      expect(native().weft_ring_chunks(s, w, layout === "zigzag" ? 0 : 1, starts, chunks)).toBe(0);
      expect(Array.from(starts.subarray(0, chunks[0]! + 1))).toEqual(ringChunks(s, w, layout as RingLayout));
    }
  });

  test("shapes, symmetry, layout and seqlen", () => {
    const base = (extra: Partial<RingDescArgs> = {}): RingDescArgs => ({
      q: d([1, 512, 8, 128]), k: sym([1, 512, 2, 128]), v: sym([1, 512, 2, 128]), out: d([1, 512, 8, 128]), causal: true, ...extra,
    });
    expect(validateRingAttention(2, 0, 0, base())).toMatchObject({ seqlen: 1024, shard: 512, kvRows: 512, layout: "zigzag", heads: 8, kvHeads: 2 });
    expect(validateRingAttention(2, 1, 0, base({ causal: false })).layout).toBe("contiguous");
    // Uneven shards: seqlen says so; k and v may be larger (the capacity every rank allocates).
    expect(validateRingAttention(2, 1, 0, base({ q: d([1, 640, 8, 128]), out: d([1, 640, 8, 128]), k: sym([1, 660, 2, 128]), v: sym([1, 660, 2, 128]), seqlen: 1300 })).shard).toBe(640);
    const bad = (args: RingDescArgs, argument: string, re: RegExp, rank = 0) => {
      let e: unknown;
      try {
        validateRingAttention(2, rank, 0, args);
      } catch (x) {
        e = x;
      }
      expect(e).toBeInstanceOf(ArgumentError);
      expect((e as ArgumentError).argument).toBe(argument);
      expect((e as Error).message).toMatch(re);
    };
    bad(base({ k: d([1, 512, 2, 128]) }), "k", /symmetric tensor/);
    bad(base({ seqlen: 1300 }), "seqlen", /gives rank 0 660 tokens of 1300/);
    bad(base({ q: d([1, 500, 8, 128]), out: d([1, 500, 8, 128]) }), "q", /pass seqlen/);
    bad(base({ layout: "ring" as RingLayout }), "layout", /'zigzag' or 'contiguous'/);
    bad(base({ k: sym([1, 256, 2, 128]), v: sym([1, 256, 2, 128]) }), "k", /at least its shard/);
    bad(base({ v: sym([1, 512, 4, 128]) }), "v", /k's shape/);
    bad(base({ lse: d([1, 512, 8], { dtype: "f32" }) }), "lse", /\[1, 8, 512\]/);
    bad(base({ config: { groupHeads: 3 } }), "config.groupHeads", /\[1, 2\]/);
    bad(base({ config: { mover: "dma" as "auto" } }), "config.mover", /'auto', 'copyEngine' or 'ctas'/);
    bad(base({ config: { commCtas: 2 } }), "config.commCtas", /mover 'ctas' only/);
    bad(base({ q: d([1, 512, 8, 96]), out: d([1, 512, 8, 96]), k: sym([1, 512, 2, 96]), v: sym([1, 512, 2, 96]) }), "q", /head dim 96/);
    bad({ ...base(), window: 2 } as RingDescArgs, "window", /not a ringAttention argument/);
  });
});

// ---- GPU ------------------------------------------------------------------------------------------

const seqFor = (world: number) => (world <= 2 ? 1300 : 2500);  // never a multiple of 2W x 128

function cases(world: number): RingCase[] {
  const out: RingCase[] = [];
  for (const layout of ["zigzag", "contiguous"] as const) {
    for (const causal of [true, false]) {
      out.push({ batch: 1, seqlen: seqFor(world), heads: 4, kvHeads: 2, headDim: 128, causal, layout });
    }
  }
  out.push({ batch: 2, seqlen: seqFor(world), heads: 4, kvHeads: 4, headDim: 64, causal: true, layout: "zigzag" });
  if (world > 1) {
    // The CTA mover (the kernel's own CTAs copy the peers' groups), both layouts.
    out.push({ batch: 1, seqlen: seqFor(world), heads: 4, kvHeads: 2, headDim: 128, causal: true, layout: "zigzag", config: { mover: "ctas", commCtas: 2 } });
    out.push({ batch: 2, seqlen: seqFor(world), heads: 4, kvHeads: 4, headDim: 64, causal: false, layout: "contiguous", config: { mover: "ctas" } });
  }
  return out;
}

let seed = 9100;

for (const world of [1, 2, 3, 4]) {
  describeGpu(`ring attention, ${world} rank${world > 1 ? "s" : ""} sharing one GPU`, 1, () => {
    let comms: Communicator[];
    beforeAll(async () => {
      comms = await ranksOnOneGpu(world, 256 << 20, GPU_TIMEOUT_MS);
    }, LONG);
    afterAll(async () => {
      if (comms) await Communicator.disposeAll(comms);
    }, LONG);

    test("zigzag and contiguous, causal and not, against the reference of the whole sequence", async () => {
      for (const c of cases(world)) {
        using p = new RingProblem(comms, c, seed += 30);
        await p.run();
        p.check(ringCaseName(c, world));
      }
    }, LONG);

    if (world >= 3) {
      test("a receive budget of one group at a time (slots reused under backpressure)", async () => {
        // Two slots of one kv head for four groups: a slot's bytes are K and V of one head of every
        // peer's shard, for the rank whose peers hold the most tokens.
        const s = seqFor(world);
        const shards = Array.from({ length: world }, (_, r) => shardLength(s, world, "zigzag", r));
        const most = Math.max(...shards.map((_, r) => shards.reduce((a, n, q) => a + (q === r ? 0 : n), 0)));
        const c: RingCase = { batch: 1, seqlen: s, heads: 4, kvHeads: 4, headDim: 128, causal: true, layout: "zigzag",
          config: { groupHeads: 1, memoryBytes: 2 * (2 * most * 128 * 2) } };
        using p = new RingProblem(comms, c, seed += 30);
        expect(p.ranks[0]!.plan.choice.slots).toBeLessThan(p.ranks[0]!.plan.choice.groups);
        await p.backToBack(4);
        // The same budget with the CTA mover (its copies wait for slots in the kernel).
        const ctas: RingCase = { ...c, config: { ...c.config, mover: "ctas", commCtas: 2 } };
        using q = new RingProblem(comms, ctas, seed += 30);
        await q.backToBack(4);
      }, LONG);
    }

    if (world >= 3) {
      test("the CTA mover's stripes: 3 and 5 CTAs, batch 2 with uneven shards, group rows wider than a CTA, one slot", async () => {
        // Every mover CTA copies a stripe of every item and the last to arrive raises its flag, so
        // which CTA raises a flag changes from item to item and launch to launch: back-to-back
        // launches with alternating inputs fail if a flag went up before every stripe had landed.
        // Batch 2 at these shards reads the peer with the smaller shard at a row stride past its
        // shard (k and v are sized for the largest); 26 kv heads per group at D 128 are 416 vectors
        // a row, more than the CTA's 384 threads, so the copy goes in blocks of whole heads (24 + 2),
        // and the second group has 2 heads. The D 64 case has one receive slot for its two groups,
        // so every mover CTA waits for the slot before its stripe of the second group.
        const s = seqFor(world);
        const shards = Array.from({ length: world }, (_, r) => shardLength(s, world, "contiguous", r));
        const most = Math.max(...shards.map((_, r) => shards.reduce((a, n, q) => a + (q === r ? 0 : n), 0)));
        const striped: { c: RingCase; oneSlot?: boolean }[] = [
          { c: { batch: 2, seqlen: s, heads: 8, kvHeads: 4, headDim: 128, causal: true, layout: "zigzag", config: { mover: "ctas", commCtas: 3, groupHeads: 2, memoryBytes: 64 << 20 } } },
          { c: { batch: 1, seqlen: s, heads: 28, kvHeads: 28, headDim: 128, causal: false, layout: "contiguous",
            config: { mover: "ctas", groupHeads: 26, memoryBytes: 64 << 20 } } },
          { c: { batch: 2, seqlen: s, heads: 4, kvHeads: 4, headDim: 64, causal: true, layout: "contiguous",
            config: { mover: "ctas", commCtas: 5, groupHeads: 3, memoryBytes: 2 * 2 * most * 3 * 64 * 2 } }, oneSlot: true },
        ];
        for (const { c, oneSlot } of striped) {
          using p = new RingProblem(comms, c, seed += 30);
          expect(p.ranks[0]!.plan.choice.groups).toBe(2);
          expect(p.ranks[0]!.plan.choice.slots).toBe(oneSlot ? 1 : 2);
          await p.backToBack(6);
        }
      }, LONG);
    }

    if (world === 2 || world === 3) {
      test("4 mover CTAs compute after their copies: back to back, inputs alternate, and with one receive slot", async () => {
        // The movers take tiles from the same counter once every stripe they copy is published, so
        // the counter counts them as fetchers (a miscount leaves it off 0 and the next launch skips or
        // repeats tiles), their tiles gate on flags other movers may still be raising, and they add
        // nothing to group_done. More tiles than compute CTAs (8 heads x 18+ query blocks against
        // 62 or 40), so the movers find tiles left. The one-slot case makes each mover wait for the
        // other CTAs to leave group 0 before it copies group 1, and then compute group 1's tiles.
        const s = 4096 + 300;
        const shards = Array.from({ length: world }, (_, r) => shardLength(s, world, "zigzag", r));
        const most = Math.max(...shards.map((_, r) => shards.reduce((a, n, q) => a + (q === r ? 0 : n), 0)));
        const joined: { c: RingCase; oneSlot?: boolean }[] = [
          { c: { batch: 1, seqlen: s, heads: 8, kvHeads: 4, headDim: 128, causal: true, layout: "zigzag", config: { mover: "ctas", commCtas: 4 } } },
          { c: { batch: 1, seqlen: s, heads: 8, kvHeads: 8, headDim: 64, causal: false, layout: "contiguous", config: { mover: "ctas", commCtas: 4 } } },
          { c: { batch: 1, seqlen: s, heads: 8, kvHeads: 4, headDim: 128, causal: true, layout: "zigzag",
            config: { mover: "ctas", commCtas: 4, groupHeads: 2, memoryBytes: 2 * most * 2 * 128 * 2 } }, oneSlot: true },
        ];
        for (const { c, oneSlot } of joined) {
          using p = new RingProblem(comms, c, seed += 30);
          expect(p.ranks[0]!.plan.choice.commCtas).toBe(4);
          if (oneSlot) expect([p.ranks[0]!.plan.choice.slots, p.ranks[0]!.plan.choice.groups]).toEqual([1, 2]);
          await p.backToBack(8);
        }
      }, LONG);
    }

    if (world === 2 || world === 4) {
      test("100 back-to-back launches, no reset, every result checked (inputs alternate)", async () => {
        const c: RingCase = { batch: 1, seqlen: seqFor(world), heads: 4, kvHeads: 2, headDim: 128, causal: true, layout: "zigzag" };
        using p = new RingProblem(comms, c, seed += 30);
        await p.backToBack(100);
      }, LONG);
    }
  });
}

describeGpu("ring attention on two GPUs, one process (Communicator.local)", 2, () => {
  let comms: Communicator[];
  beforeAll(async () => {
    comms = await Communicator.local({ devices: [0, 1], heapBytes: 512 << 20, timeoutMs: GPU_TIMEOUT_MS });
  }, LONG);
  afterAll(async () => {
    if (comms) await Communicator.disposeAll(comms);
  }, LONG);

  test("zigzag and contiguous, causal and not", async () => {
    for (const c of cases(2)) {
      using p = new RingProblem(comms, c, seed += 30);
      await p.run();
      p.check(ringCaseName(c, 2));
    }
  }, LONG);

  test("100 back-to-back launches, every result checked", async () => {
    const c: RingCase = { batch: 1, seqlen: 4096 + 300, heads: 8, kvHeads: 8, headDim: 128, causal: true, layout: "zigzag" };
    using p = new RingProblem(comms, c, seed += 30);
    await p.backToBack(100);
  }, LONG);
});
