// attention(): validation on the CPU, then the engine on a GPU against the fp32 reference kernel
// (and a CPU fp64 loop for tiny shapes), every element of out and lse checked, outputs NaN-poisoned;
// a slotted KV cache read in place (sequsedK) against both that reference and the keys packed densely.
import { describe, expect, test } from "../support/test-api.ts";

import { ArgumentError } from "../../lib/errors.ts";
import { attention, planAttention, validateAttention, type AttentionDescArgs } from "../../lib/ops/attention.ts";
import type { TensorDesc } from "../../lib/ops/gemm.ts";
import { Tensor } from "../../lib/tensor.ts";
import { argError } from "../support/argument-error.ts";
import {
  AttentionProblem, caseName, compare, cpuAttention, expectWithinBars, fp32Reference, LSE_ABS_BAR, type AttentionCase,
} from "../support/attention.ts";
import { cacheCaseName, CacheProblem, randomCacheCase, type CacheCase } from "../support/attention-cache.ts";
import { describeGpu, relError } from "../support/gpu.ts";

const t = (shape: number[], dtype: TensorDesc["dtype"] = "bf16", device = 0): TensorDesc => ({ shape, dtype, device });
const bshd = (extra: Partial<AttentionDescArgs> = {}): AttentionDescArgs => ({
  q: t([2, 100, 8, 128]), k: t([2, 300, 2, 128]), v: t([2, 300, 2, 128]), out: t([2, 100, 8, 128]), causal: true, ...extra,
});
const packed = (extra: Partial<AttentionDescArgs> = {}): AttentionDescArgs => ({
  q: t([900, 4, 64]), k: t([900, 4, 64]), v: t([900, 4, 64]), out: t([900, 4, 64]), causal: false,
  cuSeqlens: t([4], "i32"), maxSeqlen: 500, ...extra,
});

describe("attention validation (CPU: checked before anything reaches the GPU)", () => {
  test("bshd shapes, GQA and the defaults", () => {
    expect(validateAttention(bshd())).toMatchObject({
      batch: 2, heads: 8, kvHeads: 2, headDim: 128, seqlenQ: 100, seqlenK: 300, totalQ: 200, totalK: 600, varlen: false,
      causal: true, scale: 0, maxCtas: 0,
    });
    expect(validateAttention(bshd({ lse: t([2, 8, 100], "f32"), scale: 0.1, config: { maxCtas: 7 } }))).toMatchObject({ scale: 0.1, maxCtas: 7 });
  });

  test("packed batches", () => {
    expect(validateAttention(packed())).toMatchObject({ batch: 3, seqlenQ: 500, seqlenK: 500, totalQ: 900, totalK: 900, varlen: true });
    const kv = validateAttention(packed({ k: t([50, 4, 64]), v: t([50, 4, 64]), cuSeqlensK: t([4], "i32"), maxSeqlenK: 20 }));
    expect(kv).toMatchObject({ seqlenK: 20, totalK: 50 });
    expect(argError(() => validateAttention(packed({ maxSeqlen: undefined })), "maxSeqlen")).toContain("integer in [1, 900]");
    expect(argError(() => validateAttention(packed({ maxSeqlen: 901 })), "maxSeqlen")).toContain("[1, 900]");
    expect(argError(() => validateAttention(packed({ cuSeqlens: t([4], "f32") })), "cuSeqlens")).toContain("i32 tensor [batch + 1]");
    expect(argError(() => validateAttention(packed({ cuSeqlens: t([1], "i32") })), "cuSeqlens")).toContain("[batch + 1]");
    expect(argError(() => validateAttention(packed({ k: t([50, 4, 64]), v: t([50, 4, 64]) })), "k")).toContain("cuSeqlensK");
    expect(argError(() => validateAttention(packed({ maxSeqlenK: 3 })), "maxSeqlenK")).toContain("needs cuSeqlensK");
    expect(argError(() => validateAttention(packed({ q: t([2, 450, 4, 64]), out: t([2, 450, 4, 64]) })), "q")).toContain("3-D");
    expect(argError(() => validateAttention(packed({ lse: t([900, 4], "f32") })), "lse")).toContain("[heads, total] = [4, 900]");
    expect(argError(() => validateAttention(bshd({ cuSeqlensK: t([3], "i32") })), "cuSeqlensK")).toContain("needs cuSeqlens");
    expect(argError(() => validateAttention(bshd({ maxSeqlen: 5 })), "maxSeqlen")).toContain("packed batches only");
  });

  test("a KV cache read in place: sequsedK needs cuSeqlensK, i32 [batch] on q's device", () => {
    const cache = (extra: Partial<AttentionDescArgs> = {}) => packed({
      k: t([8 * 512, 4, 64]), v: t([8 * 512, 4, 64]), cuSeqlensK: t([4], "i32"), sequsedK: t([3], "i32"), maxSeqlenK: 512, ...extra,
    });
    expect(validateAttention(cache())).toMatchObject({ batch: 3, totalK: 4096, seqlenK: 512, varlen: true, seqused: true });
    expect(validateAttention(packed())).toMatchObject({ seqused: false });
    expect(argError(() => validateAttention(cache({ cuSeqlensK: undefined })), "sequsedK")).toContain("needs cuSeqlensK");
    expect(argError(() => validateAttention(bshd({ sequsedK: t([2], "i32") })), "sequsedK")).toContain("needs cuSeqlensK");
    expect(argError(() => validateAttention(cache({ sequsedK: t([3], "f32") })), "sequsedK")).toContain("i32 tensor [batch] = [3]");
    expect(argError(() => validateAttention(cache({ sequsedK: t([4], "i32") })), "sequsedK")).toContain("[batch] = [3] of key counts (got i32 [4])");
    expect(argError(() => validateAttention(cache({ sequsedK: t([3, 1], "i32") })), "sequsedK")).toContain("got i32 [3, 1]");
    expect(argError(() => validateAttention(cache({ sequsedK: t([3], "i32", 1) })), "sequsedK")).toContain("device 1 but q is on device 0");
    expect(argError(() => validateAttention(cache({ sequsedK: {} as never })), "sequsedK")).toContain("must be a Tensor");
  });

  test("shapes, dtypes and devices name the argument", () => {
    expect(argError(() => validateAttention(bshd({ q: t([2, 100, 8, 128], "f32") })), "q")).toContain("must be bf16");
    expect(argError(() => validateAttention(bshd({ v: t([2, 300, 2, 128], "bf16", 1) })), "v")).toContain("device 1");
    expect(argError(() => validateAttention(bshd({ q: t([200, 8, 128]) })), "q")).toContain("4-D [batch, seqlen, heads, headDim]");
    expect(argError(() => validateAttention(bshd({ q: t([2, 100, 8, 96]), out: t([2, 100, 8, 96]) })), "q")).toContain("head dim 96; supported: 64, 128");
    expect(argError(() => validateAttention(bshd({ k: t([2, 300, 2, 64]), v: t([2, 300, 2, 64]) })), "k")).toContain("head dim 64 but q has 128");
    expect(argError(() => validateAttention(bshd({ k: t([2, 300, 3, 128]), v: t([2, 300, 3, 128]) })), "k")).toContain("must divide q's 8");
    expect(argError(() => validateAttention(bshd({ v: t([2, 299, 2, 128]) })), "v")).toContain("k's shape");
    expect(argError(() => validateAttention(bshd({ out: t([2, 100, 8, 64]) })), "out")).toContain("q's shape");
    expect(argError(() => validateAttention(bshd({ k: t([1, 300, 2, 128]), v: t([1, 300, 2, 128]) })), "k")).toContain("batch 1 but q has 2");
    expect(argError(() => validateAttention(bshd({ lse: t([2, 100, 8], "f32") })), "lse")).toContain("[batch, heads, seqlen] = [2, 8, 100]");
    expect(argError(() => validateAttention(bshd({ lse: t([2, 8, 100], "bf16") })), "lse")).toContain("must be f32");
  });

  test("options", () => {
    expect(argError(() => validateAttention(bshd({ causal: undefined as unknown as boolean })), "causal")).toContain("true or false");
    for (const scale of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(argError(() => validateAttention(bshd({ scale })), "scale")).toContain("finite number > 0");
    }
    expect(argError(() => validateAttention(bshd({ config: { maxCtas: 0 } })), "config.maxCtas")).toContain("integer");
    expect(argError(() => validateAttention(bshd({ config: { tileN: 64 } as never })), "config.tileN")).toContain("not an attention config field");
    expect(argError(() => validateAttention(bshd({ timeoutMs: 0 })), "timeoutMs")).toContain("positive");
    expect(argError(() => validateAttention({ ...bshd(), window: 3 } as never), "window")).toContain("not an attention argument");
    expect(argError(() => validateAttention(bshd({ stream: {} as never })), "stream")).toContain("Stream");
  });

  test("attention() and planAttention() take Tensors only", async () => {
    expect(argError(() => planAttention(bshd() as never), "q")).toContain("must be a Tensor");
    let caught: unknown;
    try {
      await attention({ q: null } as never);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ArgumentError);
  });
});

// ---- GPU ------------------------------------------------------------------------------------------

let seed = 7000;

async function check(c: AttentionCase): Promise<void> {
  using p = new AttentionProblem(c, seed += 3);
  await attention(p.args);
  const ref = p.reference();
  try {
    expectWithinBars(compare(p.out, ref.out32, p.lse, ref.lse32), caseName(c));
  } finally {
    ref.out32.dispose();
    ref.lse32.dispose();
  }
}

function sweep(): AttentionCase[] {
  const cases: AttentionCase[] = [];
  for (const s of [1, 127, 128, 1000, 4096, 8192]) {
    for (const headDim of [64, 128]) {
      for (const kvHeads of [8, 2, 1]) {
        for (const causal of [false, true]) {
          for (const batch of s <= 1000 ? [1, 3] : [1]) {
            cases.push({ batch, seqQ: s, seqK: s, heads: 8, kvHeads, headDim, causal });
          }
        }
      }
    }
  }
  // A batch of 3 at a long sequence, and queries shorter than the keys (a KV cache: bottom-right
  // causal alignment), or longer (the first queries see no key: out 0, lse -inf).
  cases.push({ batch: 3, seqQ: 4096, seqK: 4096, heads: 8, kvHeads: 2, headDim: 128, causal: true });
  for (const [seqQ, seqK] of [[1, 4096], [127, 1000], [128, 8192], [1000, 4096], [1000, 127], [4096, 8192]]) {
    for (const headDim of [64, 128]) {
      for (const causal of [false, true]) cases.push({ batch: 2, seqQ: seqQ!, seqK: seqK!, heads: 8, kvHeads: 2, headDim, causal });
    }
  }
  return cases;
}

describeGpu("attention on one GPU", 1, () => {
  test("tiny shapes against a CPU loop in fp64 (and the reference kernel against it too)", async () => {
    for (const c of [
      { batch: 1, seqQ: 5, seqK: 7, heads: 2, kvHeads: 1, headDim: 64, causal: true },
      { batch: 2, seqQ: 3, seqK: 3, heads: 2, kvHeads: 2, headDim: 128, causal: false },
      { batch: 1, seqQ: 9, seqK: 4, heads: 1, kvHeads: 1, headDim: 64, causal: true, scale: 0.3 },
    ] as AttentionCase[]) {
      using p = new AttentionProblem(c, seed += 3);
      await attention(p.args);
      const cpu = cpuAttention(p.q.download() as Float32Array, p.k.download() as Float32Array, p.v.download() as Float32Array, c);
      expect(relError(p.out.download() as Float32Array, cpu.out)).toBeLessThanOrEqual(1e-2);
      const lse = p.lse.download() as Float32Array;
      for (let i = 0; i < lse.length; i++) {
        if (cpu.lse[i] === Number.NEGATIVE_INFINITY) expect(lse[i]).toBe(Number.NEGATIVE_INFINITY);
        else expect(Math.abs(lse[i]! - cpu.lse[i]!)).toBeLessThanOrEqual(LSE_ABS_BAR);
      }
      const ref = p.reference();
      expect(relError(ref.out32.download() as Float32Array, cpu.out)).toBeLessThanOrEqual(1e-5);
      ref.out32.dispose();
      ref.lse32.dispose();
    }
  });

  test("shape sweep: S 1 .. 8192, D 64 and 128, H 8 with Hkv 8, 2, 1, causal and not, B 1 and 3, KV-cache lengths", async () => {
    for (const c of sweep()) await check(c);
  }, 600_000);

  test("a packed batch of lengths (1, 777, 2048)", async () => {
    for (const headDim of [64, 128]) {
      for (const causal of [false, true]) {
        await check({ batch: 3, seqQ: 0, seqK: 0, heads: 8, kvHeads: 2, headDim, causal, lengths: [1, 777, 2048] });
      }
    }
  });

  // 1000 keys end inside a block of the D 128 kernel's 160 (launch.cuh).
  for (const causal of [true, false]) {
    test(`100 back-to-back launches of one plan, no reset, fresh inputs checked every tenth (${causal ? "causal" : "no mask"})`, async () => {
      const c: AttentionCase = { batch: 1, seqQ: 1000, seqK: 1000, heads: 8, kvHeads: 2, headDim: 128, causal };
      using p = new AttentionProblem(c, seed += 3);
      using plan = planAttention(p.args);
      for (let round = 0; round < 10; round++) {
        p.q.fillRandom(seed += 3);
        p.poison();
        for (let i = 0; i < 10; i++) plan.runSync();
        const ref = p.reference();
        expectWithinBars(compare(p.out, ref.out32, p.lse, ref.lse32), `round ${round}`);
        ref.out32.dispose();
        ref.lse32.dispose();
      }
      expect(plan.choice()).toMatchObject({ blockM: 128, blockN: 160 });
    });
  }

  test("bad packed offsets are reported, not read out of bounds", async () => {
    using q = Tensor.empty([64, 2, 64], "bf16").fillRandom(1);
    using out = Tensor.empty([64, 2, 64], "bf16").fill(0);
    using cu = Tensor.from(Int32Array.from([0, 40, 100]), [3], "i32");  // 100 > 64 rows
    let caught: unknown;
    try {
      await attention({ q, k: q, v: q, out, causal: false, cuSeqlens: cu, maxSeqlen: 60 });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ArgumentError);
    expect((caught as ArgumentError).argument).toBe("cuSeqlens");
  });
});

// ---- GPU: a slotted KV cache read in place ----------------------------------------------------------

/** Runs the case by the engine over the cache (sequsedK), checks every element against the reference
 * kernel with the same sequsedK, and against the keys packed densely (the plain varlen path of both
 * kernels): the engine's output must equal its plain-path output bit for bit (the same tiles and key
 * blocks, the masked keys contributing exact zeros), and the two references each other. */
async function checkCache(c: CacheCase): Promise<void> {
  using p = new CacheProblem(c, seed += 3);
  await attention(p.args);
  const name = cacheCaseName(c);
  const ref = p.reference();
  const dense = p.packed();
  const { cuSeqlensK: _k, sequsedK: _u, ...plain } = p.args;
  using out2 = Tensor.empty(p.out.shape, "bf16").fill(Number.NaN);
  using lse2 = Tensor.empty(p.lse.shape, "f32").fill(Number.NaN);
  const packedArgs = {
    ...plain, k: dense.k, v: dense.v, cuSeqlensK: dense.cuK, maxSeqlenK: Math.min(c.maxSeq, dense.k.shape[0]!), out: out2, lse: lse2,
  };
  const { out32, lse32 } = fp32Reference(packedArgs);
  try {
    expectWithinBars(compare(p.out, ref.out32, p.lse, ref.lse32), `${name} vs the reference (sequsedK)`);
    expect(relError(out32.download() as Float32Array, ref.out32.download() as Float32Array)).toBeLessThanOrEqual(1e-6);
    expectWithinBars(compare(p.out, out32, p.lse, lse32), `${name} vs the reference over the packed keys`);
    await attention(packedArgs);
    const a = p.out.download({ raw: true }) as Uint16Array, b = out2.download({ raw: true }) as Uint16Array;
    const differ = a.reduce((n, x, i) => n + (x !== b[i] ? 1 : 0), 0);
    if (differ) throw new Error(`${name}: ${differ} of ${a.length} out elements differ from the engine over the packed keys`);
    expect(Array.from(p.lse.download() as Float32Array)).toEqual(Array.from(lse2.download() as Float32Array));
  } finally {
    for (const t of [ref.out32, ref.lse32, out32, lse32]) t.dispose();
    dense.dispose();
  }
}

describeGpu("attention over a slotted KV cache read in place (sequsedK) on one GPU", 1, () => {
  // Lengths of 1, of a block and one past, long, and one sequence with no keys at all.
  const used = [1, 0, 600, 257, 128, 129, 37];
  const shape = { slots: 9, maxSeq: 640, heads: 8, kvHeads: 2 };

  test("prefill (queries = keys), decode (one query) and a mixed batch; GQA; D 64 and 128; causal", async () => {
    for (const headDim of [64, 128]) {
      for (const decode of [[false], [true], [true, false]]) {
        await checkCache(randomCacheCase(seed += 5, { ...shape, headDim, used, decode }));
      }
      // MQA and a decode batch of 64 sequences, most of them short.
      const many = Array.from({ length: 64 }, (_, i) => (i * 37) % 300 + (i % 5 === 0 ? 0 : 1));
      await checkCache(randomCacheCase(seed += 5, { slots: 80, maxSeq: 320, heads: 8, kvHeads: 1, headDim, used: many, decode: [true] }));
    }
  }, 300_000);

  test("100 back-to-back launches of one decode plan, slots and lengths changing every launch, each checked", async () => {
    const c = randomCacheCase(seed += 5, { ...shape, headDim: 128, used, decode: [true] });
    using p = new CacheProblem(c, seed += 3);
    using plan = planAttention(p.args);
    let s = 12345;
    const rand = (n: number) => ((s = (s * 1103515245 + 12345) >>> 0) >>> 8) % n;
    for (let launch = 0; launch < 100; launch++) {
      const free = Array.from({ length: shape.slots }, (_, i) => i);
      const slots = used.map(() => free.splice(rand(free.length), 1)[0]!);
      const lengths = used.map((_, b) => (b === launch % used.length ? 0 : 1 + rand(shape.maxSeq)));
      p.relocate(slots, lengths);
      p.poison();
      plan.runSync();
      const ref = p.reference();
      try {
        expectWithinBars(compare(p.out, ref.out32, p.lse, ref.lse32), `launch ${launch}`);
      } finally {
        ref.out32.dispose();
        ref.lse32.dispose();
      }
    }
  }, 300_000);

  test("key counts past k's rows, or a start below 0, are reported, not read out of bounds", async () => {
    const c = randomCacheCase(seed += 5, { ...shape, headDim: 64, used: [5, 9], decode: [true] });
    using p = new CacheProblem(c, seed += 3);
    for (const [slots, lengths] of [[[0, shape.slots - 1], [5, shape.maxSeq + 1]], [[0, 1], [-1, 3]]] as const) {
      p.relocate([...slots], [...lengths]);
      let caught: unknown;
      try {
        await attention(p.args);
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(ArgumentError);
      expect((caught as ArgumentError).message).toContain("sequsedK");
    }
    p.cuK.upload(Int32Array.from([-shape.maxSeq, 0, 0]));
    p.usedK.upload(Int32Array.from([3, 3]));
    await expect(attention(p.args)).rejects.toThrow(/sequsedK/);
  });
});
