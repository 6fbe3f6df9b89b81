// ring-attention.ts (test support) — a fused ring-attention problem over a group of ranks: the
// whole sequence's q, k, v (random, seeded) on every rank's device, each rank's shard (q, out, lse
// local; k, v symmetric at the shard capacity), the plans, and the check of every rank's out and
// lse against the fp32 reference of the whole sequence.
import { LocalStore } from "../../lib/bootstrap.ts";
import { Communicator } from "../../lib/comm.ts";
import { deviceInfo } from "../../lib/device.ts";
import { referenceAttention } from "../../lib/ops/attention.ts";
import {
  RingAttentionPlan, ringShardCapacity, shardLength, shardRanges, shardSequence, type RingAttentionConfig, type RingLayout,
} from "../../lib/ops/ring-attention.ts";
import { Tensor } from "../../lib/tensor.ts";
import { compare, expectWithinBars, type Errors } from "./attention.ts";

export interface RingCase {
  batch: number;
  seqlen: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  causal: boolean;
  layout: RingLayout;
  config?: RingAttentionConfig;
}

export const ringCaseName = (c: RingCase, world: number) =>
  `W ${world} ${c.layout} ${c.causal ? "causal" : "full"} B ${c.batch} S ${c.seqlen} H ${c.heads}/${c.kvHeads} D ${c.headDim}` +
  (c.config ? ` ${JSON.stringify(c.config)}` : "");

/** `world` ranks of one communicator on GPU `device` of this process; shareSms: each rank plans
 * for a 1/W share of the SMs (smBudget), so that their persistent kernels are resident together. */
export async function ranksOnOneGpu(world: number, heapBytes: number, timeoutMs: number, device = 0): Promise<Communicator[]> {
  const stores = LocalStore.group(world, { timeoutMs: 60_000 });
  const smBudget = world > 1 ? Math.floor(deviceInfo(device).smCount / world) : undefined;
  return Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: `gpu${device}` }, device,
    { heapBytes, timeoutMs, smBudget })));
}

interface RankTensors {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  out: Tensor;
  lse: Tensor;
  plan: RingAttentionPlan;
}

/** One ring problem: two input sets (A and B, alternated by `use`) so that back-to-back launches
 * that read a previous launch's data fail the check. */
export class RingProblem implements Disposable {
  readonly c: RingCase;
  readonly comms: Communicator[];
  readonly ranks: RankTensors[] = [];
  readonly #full: { q: Tensor; k: Tensor; v: Tensor }[][] = [];  // [set][rank's device copy]
  readonly #refs: { out32: Tensor; lse: Float32Array }[] = [];
  #set = 0;

  constructor(comms: Communicator[], c: RingCase, seed: number) {
    this.c = c;
    this.comms = comms;
    const world = comms.length;
    const { batch: b, seqlen: s, heads: h, kvHeads: hk, headDim: d } = c;
    for (let set = 0; set < 2; set++) {
      this.#full.push(comms.map((comm) => ({
        q: Tensor.empty([b, s, h, d], "bf16", { device: comm.device }).fillRandom(seed + 10 * set),
        k: Tensor.empty([b, s, hk, d], "bf16", { device: comm.device }).fillRandom(seed + 10 * set + 1),
        v: Tensor.empty([b, s, hk, d], "bf16", { device: comm.device }).fillRandom(seed + 10 * set + 2),
      })));
      const f = this.#full[set]![0]!;
      const out32 = Tensor.empty([b, s, h, d], "f32", { device: f.q.device });
      using lse32 = Tensor.empty([b, h, s], "f32", { device: f.q.device });
      referenceAttention({ q: f.q, k: f.k, v: f.v, causal: c.causal, out32, lse32 });
      this.#refs.push({ out32, lse: lse32.download() as Float32Array });
    }
    const capacity = ringShardCapacity(s, world, c.layout);
    comms.forEach((comm, rank) => {
      const n = shardLength(s, world, c.layout, rank);
      const q = Tensor.empty([b, n, h, d], "bf16", { device: comm.device });
      const k = comm.empty([b, capacity, hk, d], "bf16");
      const v = comm.empty([b, capacity, hk, d], "bf16");
      const out = Tensor.empty([b, n, h, d], "bf16", { device: comm.device });
      const lse = Tensor.empty([b, h, n], "f32", { device: comm.device });
      const plan = comm.ringAttention({ q, k, v, out, lse, causal: c.causal, layout: c.layout, seqlen: s, config: c.config });
      this.ranks.push({ q, k, v, out, lse, plan });
    });
    this.use(0);
  }

  /** Shards input set `set` into every rank's tensors and poisons the outputs. */
  use(set: number): void {
    this.#set = set;
    const world = this.comms.length;
    this.ranks.forEach((r, rank) => {
      const f = this.#full[set]![rank]!;
      const opts = { rank, world, layout: this.c.layout };
      shardSequence(f.q, r.q, opts);
      shardSequence(f.k, r.k, opts);
      shardSequence(f.v, r.v, opts);
      r.out.fill(Number.NaN);
      r.lse.fill(Number.NaN);
    });
  }

  async run(): Promise<void> {
    await RingAttentionPlan.runAll(this.ranks.map((r) => r.plan));
  }

  /** `launches` launches back to back, no reset, the input sets alternating, every result checked. */
  async backToBack(launches: number): Promise<void> {
    for (let i = 0; i < launches; i++) {
      this.use(i % 2);
      await this.run();
      this.check(`launch ${i}`);
    }
  }

  /** Every rank's out and lse against the reference of the current input set. */
  check(what: string): Errors[] {
    const world = this.comms.length;
    const { batch: b, seqlen: s, heads: h, headDim: d } = this.c;
    const ref = this.#refs[this.#set]!;
    return this.ranks.map((r, rank) => {
      const n = shardLength(s, world, this.c.layout, rank);
      using refShard = Tensor.empty([b, n, h, d], "f32", { device: ref.out32.device });
      shardSequence(ref.out32, refShard, { rank, world, layout: this.c.layout });
      using refLse = Tensor.from(this.#lseShard(ref.lse, rank), [b, h, n], "f32", { device: r.out.device });
      using refOut = r.out.device === refShard.device ? Tensor.wrap(refShard.ptr, refShard.shape, "f32", refShard.device)
        : Tensor.empty(refShard.shape, "f32", { device: r.out.device }).copyFrom(refShard);
      const e = compare(r.out, refOut, r.lse, refLse);
      expectWithinBars(e, `${what}, rank ${rank}`);
      return e;
    });
  }

  #lseShard(full: Float32Array, rank: number): Float32Array {
    const world = this.comms.length;
    const { batch: b, seqlen: s, heads: h } = this.c;
    const ranges = shardRanges(s, world, this.c.layout, rank);
    const n = shardLength(s, world, this.c.layout, rank);
    const out = new Float32Array(b * h * n);
    for (let bi = 0; bi < b; bi++) {
      for (let hi = 0; hi < h; hi++) {
        let at = 0;
        for (const [start, end] of ranges) {
          out.set(full.subarray((bi * h + hi) * s + start, (bi * h + hi) * s + end), (bi * h + hi) * n + at);
          at += end - start;
        }
      }
    }
    return out;
  }

  dispose(): void {
    for (const r of this.ranks) r.plan.dispose();
    for (const r of this.ranks) for (const t of [r.q, r.k, r.v, r.out, r.lse]) t.dispose();
    for (const set of this.#full) for (const f of set) for (const t of [f.q, f.k, f.v]) t.dispose();
    for (const ref of this.#refs) ref.out32.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
