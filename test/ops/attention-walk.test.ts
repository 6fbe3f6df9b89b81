// The attention kernel's tile order and key walk, listed on the host by the kernel's own code
// (weft_testing_attention_walk) and checked without a GPU: every query in exactly one tile, every
// tile's blocks covering exactly the keys its queries may see, once each, at the rows and columns of
// the right map (packed, and a KV cache read in place: per-sequence key starts and counts); for the
// ring, on every rank of worlds 1-4, both layouts. A host replay of the tile scheduler (simulated
// CTAs taking the next index from a model of the device counter, two launches without a reset)
// checks that each launch hands every tile to exactly one CTA.
import { describe, expect, test } from "../support/test-api.ts";

import { check, native } from "../../lib/native.ts";
import { shardLength, shardRanges, type RingLayout } from "../../lib/ops/ring-attention.ts";

const FIELDS = 18;
const REPLAY_ROW = 3;
// The kernels' tiles (cuda/attention/launch.cuh): 128 query rows; keys per block 160 at D 128 (both
// kernels), and at D 64 192 for the one-GPU kernel and 128 for the ring's.
const BM = 128;
const localBlockN = (headDim: number) => (headDim === 64 ? 192 : 160);
const ringBlockN = (headDim: number) => (headDim === 64 ? 128 : 160);

interface Block {
  index: number; status: number; b: number; h: number; hk: number; qRow: number; qRows: number; qPos: number;
  source: number; kvRow: number; kvCol: number; kvPos: number; valid: number; gate: number; masked: boolean; lse: number;
  /** The replayed second launch: the CTA that took the tile (-2: two did, -1: none) and when. */
  cta: number; order: number;
}

interface Config {
  batch: number; heads: number; kvHeads: number; headDim: number; seqQ: number; seqK: number; causal: boolean; section?: number;
  totalQ?: number; totalK?: number; world?: number; rank?: number; layout?: RingLayout; groupHeads?: number; kvRows?: number;
  /** Simulated CTAs of the scheduler replay (0: none), and the CTAs the counter's limit assumes (a fault when it differs). */
  replayCtas?: number; limitCtas?: number;
  /** Of the replay's CTAs, how many take their first tile only at `lateAt` blocks (the ring's mover CTAs, after their copies). */
  lateCtas?: number; lateAt?: number;
  /** The ring rank's L2 share (KiB; the ring's default here: an H200's 50 MiB between two ranks), which sizes its tile order's bands. */
  l2ShareKib?: number;
}

function walk(c: Config, cuQ?: number[], cuK?: number[], usedK?: number[]): Block[] {
  const config = Int32Array.from([c.batch, c.heads, c.kvHeads, c.headDim, c.seqQ, c.seqK, c.causal ? 1 : 0, c.section ?? 1,
    c.totalQ ?? 0, c.totalK ?? 0, c.world ?? 0, c.rank ?? 0, c.layout === "contiguous" ? 1 : 0, c.groupHeads ?? 0, c.kvRows ?? 0, 0, c.replayCtas ?? 0, c.limitCtas ?? 0,
    c.lateCtas ?? 0, c.lateAt ?? 0, c.l2ShareKib ?? 25 * 1024]);
  const count = new BigInt64Array(1);
  const q = cuQ ? Int32Array.from(cuQ) : null, k = cuK ? Int32Array.from(cuK) : null, used = usedK ? Int32Array.from(usedK) : null;
  check(native().weft_testing_attention_walk(config, q, k, used, null, 0, count), "walk");
  const out = new Int32Array(Number(count[0]) * FIELDS);
  check(native().weft_testing_attention_walk(config, q, k, used, out, Number(count[0]), count), "walk");
  const rows: Block[] = [];
  for (let i = 0; i < out.length; i += FIELDS) {
    const f = out.subarray(i, i + FIELDS);
    rows.push({ index: f[0]!, status: f[1]!, b: f[2]!, h: f[3]!, hk: f[4]!, qRow: f[5]!, qRows: f[6]!, qPos: f[7]!, source: f[8]!,
      kvRow: f[9]!, kvCol: f[10]!, kvPos: f[11]!, valid: f[12]!, gate: f[13]!, masked: f[14] === 1, lse: f[15]!, cta: f[16]!, order: f[17]! });
  }
  return rows;
}

/** Checks the scheduler replay of `ctas` CTAs: the counter back at 0 after each launch, every tile
 * of the second launch taken by exactly one CTA, each CTA's tiles in increasing index order, and
 * list scheduling's bound (Graham): no CTA busy longer than the mean plus the longest tile. With
 * `late` CTAs that start at `lateAt`, their idle start counts as busy in both sides of the bound. */
function checkReplay(rows: Block[], ctas: number, late = 0, lateAt = 0): void {
  const trailer = rows.filter((r) => r.status === REPLAY_ROW);
  expect(trailer.length).toBe(1);
  const [wordAfterFirst, wordAfterSecond, missed] = [trailer[0]!.b, trailer[0]!.h, trailer[0]!.hk];
  if (wordAfterFirst !== 0 || wordAfterSecond !== 0) throw new Error(`counter left at ${wordAfterFirst}, ${wordAfterSecond} after the launches`);
  if (missed !== 0) throw new Error(`${missed} tiles nobody took`);
  const cost = new Map<number, number>(), owner = new Map<number, [number, number]>();
  for (const r of rows) {
    if (r.index < 0) continue;
    if (r.cta < 0 || r.cta >= ctas) throw new Error(`tile ${r.index} went to CTA ${r.cta}`);
    owner.set(r.index, [r.cta, r.order]);
    if (r.status === 1) cost.set(r.index, (cost.get(r.index) ?? 0) + (r.source >= 0 ? 1 : 0));
  }
  const orders = [...owner.values()].map(([, o]) => o).sort((a, b) => a - b);
  expect(orders).toEqual(orders.map((_, i) => i));  // one fetch per tile, none twice
  const load = Array.from({ length: ctas }, (_, i) => (i < late ? lateAt : 0)), last = new Array<number>(ctas).fill(-1);
  for (const [index, [cta, order]] of [...owner.entries()].sort((a, b) => a[1][1] - b[1][1])) {
    expect(index).toBeGreaterThan(last[cta]!);
    last[cta] = index;
    if (order >= 0 && cost.has(index)) load[cta]! += Math.max(1, cost.get(index)!) + 1;
  }
  const total = load.reduce((a, b) => a + b, 0);
  const longest = Math.max(...[...cost.values()].map((n) => Math.max(1, n) + 1));
  for (const l of load) expect(l).toBeLessThanOrEqual(total / ctas + longest);
}

function byTile(rows: Block[]): Block[][] {
  const tiles = new Map<number, Block[]>();
  for (const r of rows) {
    if (r.status !== 1) continue;
    let t = tiles.get(r.index);
    if (!t) tiles.set(r.index, (t = []));
    if (r.source >= 0) t.push(r);
    else t.length = 0;
  }
  // Tiles with no blocks keep one placeholder so that their queries are counted.
  return [...tiles.entries()].map(([index, blocks]) => (blocks.length ? blocks : rows.filter((r) => r.index === index)));
}

/** Checks the key blocks of one tile: keys [0, last] visible to its last query are all covered, none
 * twice, and an unmasked block's keys are visible to every valid query. keyRow(pos) gives the map
 * row and column key `pos` must be read from, per source. */
function checkKeys(tile: Block[], keys: number, causal: boolean, BN: number, keyAt: (blk: Block, pos: number) => [number, number] | null): void {
  const t = tile[0]!;
  const last = causal ? Math.min(keys - 1, t.qPos + Math.min(t.qRows, BM) - 1) : keys - 1;
  const seen = new Uint8Array(keys);
  for (const blk of tile) {
    if (blk.source < 0) continue;
    expect(blk.valid).toBeGreaterThan(0);
    expect(blk.valid).toBeLessThanOrEqual(BN);
    const invisible = blk.valid < BN || (causal && blk.kvPos + BN - 1 > t.qPos);
    expect(blk.masked).toBe(invisible);
    for (let j = 0; j < blk.valid; j++) {
      const pos = blk.kvPos + j;
      expect(pos).toBeLessThan(keys);
      expect(seen[pos]).toBe(0);
      seen[pos] = 1;
      const want = keyAt(blk, pos);
      if (want) expect([blk.kvRow + j, blk.kvCol]).toEqual(want);
    }
  }
  for (let p = 0; p <= last; p++) if (!seen[p]) throw new Error(`tile ${t.index} (b ${t.b} h ${t.h} pos ${t.qPos}) misses key ${p}`);
}

/** Checks one-GPU tiles: every query once, each tile's keys exactly those of its sequence, read from
 * rows startK(b) + pos. */
function checkLocal(c: Config, rows: Block[], lenQ: (b: number) => number, lenK: (b: number) => number,
  startQ: (b: number) => number, startK: (b: number) => number): void {
  const packed = c.totalQ !== undefined;
  const covered = new Map<string, number>();
  for (const tile of byTile(rows)) {
    const t = tile[0]!;
    expect(t.hk).toBe(Math.floor(t.h / (c.heads / c.kvHeads)));
    const i0 = t.qRow - startQ(t.b);
    expect(t.qRows).toBe(lenQ(t.b) - i0);
    expect(t.qPos).toBe(i0 + lenK(t.b) - lenQ(t.b));
    expect(t.lse).toBe(packed ? t.h * c.totalQ! + t.qRow : (t.b * c.heads + t.h) * c.seqQ + i0);
    for (let i = 0; i < Math.min(BM, t.qRows); i++) {
      const key = `${t.b}/${t.h}/${i0 + i}`;
      covered.set(key, (covered.get(key) ?? 0) + 1);
    }
    if (lenK(t.b) === 0) expect(tile.every((blk) => blk.source < 0)).toBe(true);
    checkKeys(tile, lenK(t.b), c.causal, localBlockN(c.headDim), (blk, pos) => [startK(t.b) + pos, t.hk * c.headDim]);
  }
  for (let b = 0; b < c.batch; b++) for (let h = 0; h < c.heads; h++) for (let i = 0; i < lenQ(b); i++) {
    expect(covered.get(`${b}/${h}/${i}`)).toBe(1);
  }
}

describe("the attention kernel's tiles and key blocks (host listing of the kernel's code)", () => {
  const local: [string, Config, number[]?][] = [
    ["bshd causal, GQA, sections of 3", { batch: 2, heads: 4, kvHeads: 2, headDim: 128, seqQ: 300, seqK: 300, causal: true, section: 3 }],
    ["bshd full, KV cache (Sq < Sk)", { batch: 2, heads: 4, kvHeads: 1, headDim: 64, seqQ: 130, seqK: 500, causal: false, section: 2 }],
    ["bshd causal, KV cache", { batch: 1, heads: 2, kvHeads: 2, headDim: 128, seqQ: 129, seqK: 700, causal: true }],
    ["bshd causal, Sq > Sk (early queries see nothing)", { batch: 1, heads: 2, kvHeads: 1, headDim: 128, seqQ: 500, seqK: 200, causal: true }],
    ["varlen causal (1, 200, 130)", { batch: 3, heads: 4, kvHeads: 2, headDim: 128, seqQ: 200, seqK: 200, causal: true, totalQ: 331, totalK: 331, section: 5 }, [0, 1, 201, 331]],
    ["varlen full (1, 200, 130)", { batch: 3, heads: 2, kvHeads: 2, headDim: 64, seqQ: 200, seqK: 200, causal: false, totalQ: 331, totalK: 331 }, [0, 1, 201, 331]],
  ];
  for (const [name, c, cu] of local) {
    test(`one GPU: ${name}`, () => {
      const rows = walk({ ...c, replayCtas: 3 }, cu, cu);
      checkReplay(rows, 3);
      const len = (b: number, s: number) => (cu ? cu[b + 1]! - cu[b]! : s);
      const start = (b: number, s: number) => (cu ? cu[b]! : b * s);
      checkLocal(c, rows, (b) => len(b, c.seqQ), (b) => len(b, c.seqK), (b) => start(b, c.seqQ), (b) => start(b, c.seqK));
    });
  }

  // A slotted KV cache read in place (seqused_k): k is [slots * maxSeq] rows, sequence b's keys start
  // at its slot's first row (slots in any order) and count used[b]; its queries are this step's rows:
  // decode (1 each), prefill (the whole prompt) or both in one batch; one sequence has no keys.
  const maxSeq = 700, slots = [5, 0, 3, 1, 6, 2];
  const used = [1, 0, 129, 700, 128, 300];
  const prompt = used.map((n) => Math.max(n, 1));  // the empty sequence still has a query (it sees nothing)
  for (const [phase, lenQ] of [["decode", used.map(() => 1)], ["prefill", prompt], ["mixed", prompt.map((n, b) => (b % 2 ? n : 1))]] as const) {
    for (const headDim of [64, 128]) {
      test(`one GPU: KV cache in place (seqused_k), ${phase}, D ${headDim}, causal, slots in any order`, () => {
        const cuQ = [0];
        for (const n of lenQ) cuQ.push(cuQ.at(-1)! + n);
        const cuK = [...slots.map((s) => s * maxSeq), 123456];  // the last entry is never read
        const c: Config = { batch: used.length, heads: 4, kvHeads: 2, headDim, seqQ: Math.max(...lenQ), seqK: maxSeq, causal: true,
          section: 3, totalQ: cuQ.at(-1)!, totalK: 8 * maxSeq };
        const rows = walk(c, cuQ, cuK, used);
        expect(rows.some((r) => r.status === 2)).toBe(false);
        checkLocal(c, rows, (b) => lenQ[b]!, (b) => used[b]!, (b) => cuQ[b]!, (b) => cuK[b]!);
      });
    }
  }

  test("one GPU: key counts past k's rows, or below 0, are reported (status invalid), not walked", () => {
    const c: Config = { batch: 3, heads: 2, kvHeads: 1, headDim: 128, seqQ: 1, seqK: 100, causal: true, totalQ: 3, totalK: 300 };
    const statusOf = (used: number[], cuK = [0, 100, 200, 0]) => {
      const rows = walk(c, [0, 1, 2, 3], cuK, used);
      return [0, 1, 2].map((b) => rows.find((r) => r.index === b * c.heads)!.status);
    };
    expect(statusOf([100, 100, 100])).toEqual([1, 1, 1]);
    expect(statusOf([100, 101, 100])).toEqual([1, 1, 1]);  // 100 + 101 <= 300: inside k
    expect(statusOf([100, 100, 101])).toEqual([1, 1, 2]);  // 200 + 101 > 300
    expect(statusOf([-1, 0, 0])).toEqual([2, 1, 1]);
    expect(statusOf([1, 1, 1], [0, -5, 0, 0])).toEqual([1, 2, 1]);
  });

  for (const world of [1, 2, 3, 4]) {
    for (const layout of ["zigzag", "contiguous"] as const) {
      for (const causal of [true, false]) {
        test(`ring: world ${world} ${layout} ${causal ? "causal" : "full"}, every rank`, () => {
          const s = world <= 2 ? 1300 : 2500;
          const c = { batch: 2, heads: 4, kvHeads: 2, headDim: 128 };
          const shards = Array.from({ length: world }, (_, r) => shardLength(s, world, layout, r));
          const kvRows = Math.max(...shards) + 5;  // spare rows: the local map's stride is kvRows
          for (let rank = 0; rank < world; rank++) {
            // 5 + rank CTAs, of them (world > 1) 2 movers that join after copying for 6 blocks' time.
            const ctas = 5 + rank, late = world > 1 ? 2 : 0, lateAt = 6;
            const rows = walk({ ...c, seqQ: s, seqK: s, causal, world, rank, layout, groupHeads: 1, kvRows, replayCtas: ctas, lateCtas: late, lateAt },
              undefined, undefined);
            checkReplay(rows, ctas, late, lateAt);
            // The movers fetch too: a limit that leaves them out leaves the word off 0.
            if (late > 0) expect(() => checkReplay(walk({ ...c, seqQ: s, seqK: s, causal, world, rank, layout, groupHeads: 1, kvRows,
              replayCtas: ctas, limitCtas: ctas - late, lateCtas: late, lateAt }), ctas, late, lateAt)).toThrow();
            const ranges = shardRanges(s, world, layout, rank);
            const localOf = (r: number, pos: number) => {
              let at = 0;
              for (const [a, e] of shardRanges(s, world, layout, r)) {
                if (pos >= a && pos < e) return at + pos - a;
                at += e - a;
              }
              return -1;
            };
            const slotRows = c.batch * shards.reduce((a, n, q) => a + (q === rank ? 0 : n), 0);
            const sourceRow = (src: number) => shards.slice(0, src).reduce((a, n, q) => a + (q === rank ? 0 : c.batch * n), 0);
            const covered = new Map<string, number>();
            for (const tile of byTile(rows)) {
              const t = tile[0]!;
              const i0 = t.qRow - t.b * shards[rank]!;
              expect(localOf(rank, t.qPos)).toBe(i0);
              for (let i = 0; i < Math.min(BM, t.qRows); i++) {
                const key = `${t.b}/${t.h}/${i0 + i}`;
                covered.set(key, (covered.get(key) ?? 0) + 1);
              }
              // This rank's own keys first, then the peers'.
              const firstPeer = tile.findIndex((blk) => blk.source === 1);
              if (firstPeer >= 0) expect(tile.slice(firstPeer).every((blk) => blk.source === 1)).toBe(true);
              checkKeys(tile, s, causal, ringBlockN(c.headDim), (blk, pos) => {
                if (blk.source === 0) {
                  expect(blk.gate).toBe(-1);
                  return [t.b * kvRows + localOf(rank, pos), t.hk * c.headDim];
                }
                const src = blk.gate % world, group = Math.floor(blk.gate / world);
                expect(src).not.toBe(rank);
                expect(group).toBe(t.hk);  // one kv head per group
                const inSlot = blk.kvRow + (pos - blk.kvPos) - (sourceRow(src) + t.b * shards[src]! + localOf(src, pos));
                expect(inSlot % slotRows).toBe(0);
                expect(blk.kvCol).toBe(0);
                return null;
              });
            }
            for (let b = 0; b < c.batch; b++) for (let h = 0; h < c.heads; h++) for (let i = 0; i < shards[rank]!; i++) {
              expect(covered.get(`${b}/${h}/${i}`)).toBe(1);
            }
            expect(ranges.length).toBe(layout === "zigzag" ? 2 : 1);
          }
        });
      }
    }
  }

  // The ring's tile order under a causal mask (ring.cuh, "Tile order"): handed out in index order to
  // whichever CTA is free (the device counter), its tiles costing their key blocks, the busiest CTA
  // of each rank stays within 1.5% of an even split at the bench's shape (S 8k, H 32, D 128, zigzag,
  // world 2 on one H200: 66 CTAs each, 1-head groups, a slot per group, 25 MiB of L2 each). Group by
  // group it was 3.1-3.8% over: the last group's long tiles started near the end.
  test("ring: a causal zigzag launch at world 2 ends within 1.5% of an even split of its key blocks", () => {
    const world = 2, ctas = 66, seq = 8192;
    for (let rank = 0; rank < world; rank++) {
      const kvRows = shardLength(seq, world, "zigzag", rank);
      const rows = walk({ batch: 1, heads: 32, kvHeads: 32, headDim: 128, seqQ: seq, seqK: seq, causal: true, world, rank, layout: "zigzag", groupHeads: 1, kvRows });
      const cost = new Map<number, number>();
      for (const r of rows) if (r.status === 1 && r.index >= 0) cost.set(r.index, (cost.get(r.index) ?? 0) + (r.source >= 0 ? 1 : 0));
      const busy = new Array<number>(ctas).fill(0);
      let total = 0;
      for (const [, blocks] of [...cost.entries()].sort((a, b) => a[0] - b[0])) {
        busy[busy.indexOf(Math.min(...busy))]! += blocks;
        total += blocks;
      }
      expect(cost.size).toBe(1024);
      expect(Math.max(...busy) / (total / ctas)).toBeLessThan(1.015);
    }
  });

  test("the replay's checks fail when the counter's limit miscounts the CTAs", () => {
    const c: Config = { batch: 2, heads: 4, kvHeads: 2, headDim: 128, seqQ: 700, seqK: 700, causal: true, section: 3, replayCtas: 4 };
    expect(() => checkReplay(walk(c), 4)).not.toThrow();
    for (const limitCtas of [3, 5]) expect(() => checkReplay(walk({ ...c, limitCtas }), 4)).toThrow();
  });
});
