// decoder-dry.ts — runs the tensor-parallel decoder (examples/serve/decoder.ts) with every GPU call
// replaced by the library's own argument validation: tensors are shapes with fake addresses, plans
// check their operands with validateTp, local GEMMs with planGemm, the layers with lib/ops/nn.ts's
// validators, the attention engine's plans with validateAttention. What it proves without a GPU: every op of prefill, decode and warm-up gets tensors of
// the shapes it accepts, at world 1 and 2, from random and from safetensors weights; and the ops
// come in the order the decoder's comment says. Run as its own process (module mocks are global):
//   bun test/support/decoder-dry.ts  → prints a JSON report, exit 0; any validation error exits 1.
import { mock } from "./test-api.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const realTensor = await import("../../lib/tensor.ts");
const realGemm = await import("../../lib/ops/gemm.ts");
const realTp = await import("../../lib/ops/tp.ts");
const realNn = await import("../../lib/ops/nn.ts");
const realSample = await import("../../lib/ops/sample.ts");
const realAttention = await import("../../lib/ops/attention.ts");
const { Stream } = await import("../../lib/stream.ts");
const { validateTp, validateTpConfig } = realTp;
const { planGemm, matrix } = realGemm;
const nnValidate = { ...realNn };
const { validateSample, validateSampling, sampleUniform } = realSample;

const log: string[] = [];
let nextAddress = 1 << 20;

class FakeTensor {
  readonly shape: readonly number[];
  readonly dtype: "bf16" | "f32" | "i32" | "u8" | "f16";
  readonly device: number;
  readonly numel: number;
  readonly bytes: number;
  readonly ptr: number;
  symmetric = false;
  disposed = false;

  constructor(shape: readonly number[], dtype: FakeTensor["dtype"], device: number, ptr?: number) {
    realTensor.checkShape(shape, "FakeTensor");
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.device = device;
    this.numel = shape.reduce((a, b) => a * b, 1);
    this.bytes = this.numel * (dtype === "f32" || dtype === "i32" ? 4 : dtype === "u8" ? 1 : 2);
    this.ptr = ptr ?? (nextAddress += Math.ceil(this.bytes / 256) * 256 + 256);
  }
  static empty(shape: number[], dtype: FakeTensor["dtype"], opts: { device?: number } = {}) {
    return new FakeTensor(shape, dtype, opts.device ?? 0);
  }
  static from(data: ArrayLike<number>, shape: number[], dtype: FakeTensor["dtype"], opts: { device?: number } = {}) {
    const t = new FakeTensor(shape, dtype, opts.device ?? 0);
    if (data.length !== t.numel) throw new Error(`Tensor.from: ${data.length} elements for shape [${shape.join(", ")}]`);
    return t;
  }
  static wrap(ptr: number, shape: number[], dtype: FakeTensor["dtype"], device: number) {
    return new FakeTensor(shape, dtype, device, ptr);
  }
  guard(op: string) {
    if (this.disposed) throw new Error(`${op}: tensor used after dispose`);
  }
  fill() { return this; }
  fillRandom() { return this; }
  upload(data: ArrayLike<number>) {
    if (data.length !== this.numel) throw new Error(`Tensor.upload: ${data.length} elements into ${this.numel}`);
    return this;
  }
  download() { return new Float32Array(this.numel); }
  copyFrom(src: FakeTensor) {
    if (src.bytes !== this.bytes) throw new Error(`Tensor.copyFrom: ${src.bytes} bytes into ${this.bytes}`);
    return this;
  }
  dispose() { this.disposed = true; }
  [Symbol.dispose]() { this.dispose(); }
}

const desc = (t: FakeTensor) => ({ shape: t.shape, dtype: t.dtype, device: t.device, symmetric: t.symmetric });
let seq = 0;

class FakePlan {
  choice = { path: "sequential", mover: "none" };
  constructor(readonly op: string, readonly rank: number) {}
  launch() { return ++seq; }
  wait() {}
  promise() { return Promise.resolve(); }
  dispose() {}
  static launchAll(plans: FakePlan[]) {
    log.push(`tp ${plans[0]!.op} x${plans.length}`);
    return plans.map((p) => p.launch());
  }
}

class FakeCommunicator {
  readonly stream: import("../../lib/stream.ts").Stream;
  readonly maxCtas = 132;
  constructor(readonly rank: number, readonly size: number, readonly device: number) {
    this.stream = Object.assign(Object.create(Stream.prototype), { device, done: () => true, synchronize: () => {} });
  }
  static async local(o: { devices: number[] }) {
    return o.devices.map((d, r) => new FakeCommunicator(r, o.devices.length, d));
  }
  static async disposeAll() {}
  empty(shape: number[], dtype: FakeTensor["dtype"]) {
    const t = new FakeTensor(shape, dtype, this.device);
    t.symmetric = true;
    return t;
  }
  #tp(op: "allGatherGemm" | "gemmReduceScatter" | "gemmAllReduce", a: { a: FakeTensor; b: FakeTensor; out: FakeTensor; transB?: boolean; config?: object }) {
    validateTp(op, this.size, this.device, { a: desc(a.a), b: desc(a.b), out: desc(a.out), transB: a.transB });
    validateTpConfig(a.config as never, op, op, this.maxCtas);
    return new FakePlan(op, this.rank);
  }
  allGatherGemm(a: never) { return this.#tp("allGatherGemm", a); }
  gemmReduceScatter(a: never) { return this.#tp("gemmReduceScatter", a); }
  gemmAllReduce(a: never) { return this.#tp("gemmAllReduce", a); }
  prepare = {
    allGather: (input: FakeTensor, output: FakeTensor) => {
      if (!output.symmetric) throw new Error("allGather: output must be symmetric");
      if (output.numel !== this.size * input.numel) throw new Error(`allGather: ${output.numel} != ${this.size} x ${input.numel}`);
      if (input.dtype !== output.dtype) throw new Error("allGather: dtypes differ");
      return { launch: () => { log.push("allGather"); return ++seq; }, wait() {}, promise: () => Promise.resolve() };
    },
  };
}

class FakeSampler {
  rows: ReturnType<typeof validateSampling>[] = [];
  constructor(readonly device: number, readonly capacity: number) {}
  static create(device: number, capacity: number) { return new FakeSampler(device, capacity); }
  set(row: number, s: object) {
    if (!(row >= 0 && row < this.capacity)) throw new Error(`Sampler.set: row ${row} of ${this.capacity}`);
    this.rows[row] = validateSampling(s);
  }
  async run(logits: FakeTensor, opts: { rows?: number; vocab?: number; stream?: unknown }) {
    const v = validateSample(desc(logits), this.capacity, opts as never);
    log.push(`sample ${v.rows} of vocab ${v.vocab}`);
    return { tokens: Int32Array.from({ length: v.rows }, (_, i) => (i * 7 + 3) % 256), logprobs: new Float32Array(v.rows) };
  }
  dispose() {}
}

const nnOp = (name: string, validate: (a: never) => unknown) => (a: never) => {
  validate(a);
  log.push(name);
};

mock.module("../../lib/tensor.ts", () => ({ ...realTensor, Tensor: FakeTensor }));
mock.module("../../lib/comm.ts", () => ({ Communicator: FakeCommunicator }));
mock.module("../../lib/device.ts", () => ({ deviceInfo: () => ({ smCount: 132 }), deviceCount: () => 1, requireDevice: () => {} }));
mock.module("../../lib/ops/gemm.ts", () => ({
  planGemm, matrix,
  gemmSync: (a: FakeTensor, b: FakeTensor, out: FakeTensor, opts: object) => {
    const p = planGemm(desc(a), desc(b), desc(out), opts as never);
    log.push(`gemm ${p.m}x${p.n}x${p.k}`);
  },
}));
mock.module("../../lib/ops/tp.ts", () => ({ TpPlan: FakePlan, validateTp, validateTpConfig }));
mock.module("../../lib/ops/nn.ts", () => ({
  embedding: nnOp("embedding", nnValidate.validateEmbedding as never), rmsNorm: nnOp("rmsNorm", nnValidate.validateRmsNorm as never),
  rope: nnOp("rope", nnValidate.validateRope as never), swiglu: nnOp("swiglu", nnValidate.validateSwiglu as never),
  kvAppend: nnOp("kvAppend", nnValidate.validateKvAppend as never), cacheAttention: nnOp("cacheAttention", nnValidate.validateCacheAttention as never),
  copyColumns: nnOp("copyColumns", nnValidate.validateCopyColumns as never),
}));
mock.module("../../lib/ops/attention.ts", () => ({
  ...realAttention,
  planAttention: (a: Record<string, unknown>) => {
    const descs = Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v instanceof FakeTensor ? desc(v) : v]));
    realAttention.validateAttention(descs as never, "planAttention");
    return { launch: () => (log.push("attention"), ++seq), wait() {}, dispose() {} };
  },
}));
mock.module("../../lib/ops/sample.ts", () => ({ Sampler: FakeSampler, validateSample, validateSampling, sampleUniform }));

const { Decoder } = await import("../../examples/serve/decoder.ts");
const { PRESETS } = await import("../../examples/serve/config.ts");
const { SafetensorsFile } = await import("../../examples/serve/safetensors.ts");
const { encode } = await import("../../examples/serve/tokenizer.ts");
const { randomHostModel, writeHostModel } = await import("./llama-reference.ts");

const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0n };
const report: Record<string, unknown> = {};
const dir = mkdtempSync(join(tmpdir(), "weft-dry-"));
try {
  const cfg = PRESETS.tiny!;
  await writeHostModel(join(dir, "m.safetensors"), cfg, randomHostModel(cfg, 1));
  const file = await SafetensorsFile.open(join(dir, "m.safetensors"));
  for (const [name, devices, weights] of [
    ["world 1, random", [0], { kind: "random", seed: 1 }], ["world 2 on one GPU, file", [0, 0], { kind: "safetensors", file }],
    ["world 2 on two GPUs, random", [0, 1], { kind: "random", seed: 1 }],
  ] as const) {
    const d = await Decoder.create({ config: cfg, devices: [...devices], weights: weights as never, slots: 6, contextLength: 300 });
    log.length = 0;
    const prompts = ["hi", "a longer prompt than that", "x"].map(encode);
    const out = await d.step({ prefill: prompts.map((tokens, slot) => ({ slot, tokens, sampling: greedy })), decode: [] });
    const prefillOps = [...log];
    log.length = 0;
    await d.step({ prefill: [{ slot: 4, tokens: encode("joins"), sampling: greedy }],
      decode: prompts.map((p, slot) => ({ slot, token: out.prefill[slot]!, position: p.length, sampling: greedy })) });
    const mixedOps = [...log];
    await d.warm();
    report[name] = { prefillOps, mixedOps, info: d.info };
    await d.dispose();
  }
  console.log(JSON.stringify(report));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
