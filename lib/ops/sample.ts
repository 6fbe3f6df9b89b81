// sample.ts — next-token sampling on the GPU (cuda/nn/sample.cu): greedy, temperature, top-k and
// top-p, each row with its own settings and a seeded counter-based draw, so a sequence's tokens
// depend on its seed and positions only, never on what else shares the batch.
//
//   using s = Sampler.create(device, 64);        // up to 64 rows per launch
//   s.set(0, { temperature: 0.8, topP: 0.95, seed: 7, counter: position });
//   const { tokens, logprobs } = await s.run(logits, { rows: 1, stream });
//
// The settings and the results live in pinned host memory mapped into the GPU: the kernel reads the
// settings and writes the tokens there directly, then publishes completion (lib/completion.ts), so
// run() needs no copy and never blocks the event loop. One launch at a time per Sampler: set() and
// run() again only after the previous run() settled.
import { OpLaunch, SampleParams } from "../abi.ts";
import { Completion } from "../completion.ts";
import { DTYPES } from "../dtype.ts";
import { ArgumentError, DisposedError, checkInt } from "../errors.ts";
import { check, native } from "../native.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";
import { HostBuffer } from "../transport.ts";
import type { TensorDesc } from "./gemm.ts";

export interface SamplingSettings {
  /** 0 = greedy (the lowest index among the largest logits). Default 1. */
  temperature?: number;
  /** Keep the k largest logits (ties at the cut too); 0 = all (default). */
  topK?: number;
  /** Keep the smallest set of largest logits whose probability reaches p; 1 = all (default). */
  topP?: number;
  /** Seed of the draw (an unsigned 64-bit integer; default 0). */
  seed?: number | bigint;
  /** The draw's counter: the same (seed, counter) gives the same u. Use the position of the token
   * being drawn. Default 0. */
  counter?: number | bigint;
}

export interface SampleOptions {
  /** Rows of logits to sample (default: logits' rows, at most the Sampler's capacity). */
  rows?: number;
  /** Logits per row to consider (default: logits' columns); columns past it (padding) are ignored. */
  vocab?: number;
  stream?: Stream | null;
  /** run() only: how long to wait before rejecting with TimeoutError (ms, default 60 000). */
  timeoutMs?: number;
}

export interface SampleResult {
  tokens: Int32Array;
  /** Each token's log-probability under softmax(logits) (temperature 1, nothing cut). */
  logprobs: Float32Array;
}

const U64_MAX = (1n << 64n) - 1n;

function u64(op: string, name: string, v: number | bigint): bigint {
  const b = typeof v === "bigint" ? v : Number.isSafeInteger(v) ? BigInt(v) : -1n;
  if (b < 0n || b > U64_MAX) throw new ArgumentError(op, name, `must be an integer in [0, 2^64) (got ${String(v)})`);
  return b;
}

/** Checks one row's settings; returns them complete. */
export function validateSampling(s: SamplingSettings | undefined, op = "Sampler.set") {
  const c = s ?? {};
  if (typeof c !== "object" || c === null) throw new ArgumentError(op, "settings", "must be an object");
  const temperature = c.temperature ?? 1;
  if (typeof temperature !== "number" || !(temperature >= 0) || !Number.isFinite(temperature)) {
    throw new ArgumentError(op, "temperature", `must be a finite number >= 0 (got ${JSON.stringify(temperature)})`);
  }
  const topK = checkInt(op, "topK", c.topK ?? 0, 0, 2 ** 31 - 1);
  const topP = c.topP ?? 1;
  if (typeof topP !== "number" || !(topP > 0 && topP <= 1)) throw new ArgumentError(op, "topP", `must be in (0, 1] (got ${JSON.stringify(topP)})`);
  return { temperature, topK, topP, seed: u64(op, "seed", c.seed ?? 0), counter: u64(op, "counter", c.counter ?? 0) };
}

/** Which rows and columns of `logits` a launch samples. */
export function validateSample(logits: TensorDesc, capacity: number, opts: SampleOptions = {}, op = "Sampler.run") {
  if (logits === null || typeof logits !== "object" || !Array.isArray(logits.shape)) throw new ArgumentError(op, "logits", "must be a Tensor");
  if (logits.dtype !== "bf16" && logits.dtype !== "f32") throw new ArgumentError(op, "logits", `must be bf16 or f32 (got ${logits.dtype})`);
  if (logits.shape.length !== 2) throw new ArgumentError(op, "logits", `must be 2-D [rows, vocab] (got [${logits.shape.join(", ")}])`);
  const [rowsHave, cols] = logits.shape as [number, number];
  const rows = opts.rows ?? Math.min(rowsHave, capacity);
  checkInt(op, "rows", rows, 1, Math.min(rowsHave, capacity));
  const vocab = checkInt(op, "vocab", opts.vocab ?? cols, 1, Math.min(cols, 2 ** 24 - 1));
  if (opts.stream !== undefined && opts.stream !== null) {
    if (!(opts.stream instanceof Stream)) throw new ArgumentError(op, "stream", "must be a Stream or null");
    if (opts.stream.device !== logits.device) throw new ArgumentError(op, "stream", `is on device ${opts.stream.device} but logits are on device ${logits.device}`);
  }
  return { rows, vocab, rowStride: cols };
}

// ---- the draw, as the kernel makes it (for tests and references) ------------------------------------------

const MASK = U64_MAX;
function splitmix64(x: bigint): bigint {
  x = (x + 0x9e3779b97f4a7c15n) & MASK;
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return x ^ (x >> 31n);
}

/** The u in [0, 1) the kernel draws for (seed, counter). */
export function sampleUniform(seed: number | bigint, counter: number | bigint): number {
  const s = BigInt(seed) & MASK, c = BigInt(counter) & MASK;
  return Number(splitmix64(s ^ splitmix64(c ^ 0x5851f42d4c957f2dn)) >> 40n) / 16777216;
}

// ---- the Sampler ------------------------------------------------------------------------------------------------

// Pinned layout, `capacity` rows of each: f32 temperature, i32 top_k, f32 top_p, u64 seed, u64 counter,
// i32 tokens, f32 logprobs; every array starts on an 8-byte boundary.
function layout(capacity: number) {
  const pad = (n: number) => Math.ceil(n / 8) * 8;
  const a4 = pad(capacity * 4), a8 = capacity * 8;
  const o = { temperature: 0, topK: a4, topP: 2 * a4, seed: 3 * a4, counter: 3 * a4 + a8, tokens: 3 * a4 + 2 * a8, logprobs: 4 * a4 + 2 * a8 };
  return { ...o, bytes: 5 * a4 + 2 * a8 };
}

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(); its pinned memory stays allocated until exit.`);
});

export class Sampler implements Disposable {
  readonly device: number;
  readonly capacity: number;
  readonly #host: HostBuffer;
  readonly #completion: Completion;
  readonly #at: ReturnType<typeof layout>;
  readonly #temperature: Float32Array;
  readonly #topK: Int32Array;
  readonly #topP: Float32Array;
  readonly #seed: BigUint64Array;
  readonly #counter: BigUint64Array;
  readonly #tokens: Int32Array;
  readonly #logprobs: Float32Array;
  readonly #params = SampleParams.alloc();
  readonly #launch = OpLaunch.alloc();
  #disposed = false;

  private constructor(device: number, capacity: number, host: HostBuffer, completion: Completion) {
    this.device = device;
    this.capacity = capacity;
    this.#host = host;
    this.#completion = completion;
    const at = (this.#at = layout(capacity));
    const buf = host.view.buffer, base = host.view.byteOffset;
    this.#temperature = new Float32Array(buf, base + at.temperature, capacity);
    this.#topK = new Int32Array(buf, base + at.topK, capacity);
    this.#topP = new Float32Array(buf, base + at.topP, capacity);
    this.#seed = new BigUint64Array(buf, base + at.seed, capacity);
    this.#counter = new BigUint64Array(buf, base + at.counter, capacity);
    this.#tokens = new Int32Array(buf, base + at.tokens, capacity);
    this.#logprobs = new Float32Array(buf, base + at.logprobs, capacity);
    this.#temperature.fill(1);
    this.#topP.fill(1);
    leaks.register(this, `Sampler of ${capacity} rows on device ${device}`, this);
  }

  /** A sampler for up to `capacity` rows per launch, on `device`. */
  static create(device: number, capacity: number): Sampler {
    const op = "Sampler.create";
    checkInt(op, "capacity", capacity, 1, 1 << 20);
    const completion = Completion.create(device, { slots: 64 });
    let host: HostBuffer;
    try {
      host = HostBuffer.alloc(layout(capacity).bytes);
    } catch (e) {
      completion.dispose();
      throw e;
    }
    return new Sampler(device, capacity, host, completion);
  }

  /** Row `row`'s settings for the next launches. */
  set(row: number, settings: SamplingSettings): void {
    const op = "Sampler.set";
    this.#guard(op);
    checkInt(op, "row", row, 0, this.capacity - 1);
    const s = validateSampling(settings, op);
    this.#temperature[row] = s.temperature;
    this.#topK[row] = s.topK;
    this.#topP[row] = s.topP;
    this.#seed[row] = s.seed;
    this.#counter[row] = s.counter;
  }

  /** Enqueues the sampling of `rows` rows and returns the launch's sequence number (no wait). */
  launch(logits: Tensor, opts: SampleOptions = {}): number {
    const op = "Sampler.launch";
    this.#guard(op);
    if (!(logits instanceof Tensor)) throw new ArgumentError(op, "logits", "must be a Tensor");
    logits.guard(op);
    if (logits.device !== this.device) throw new ArgumentError(op, "logits", `is on device ${logits.device} but the sampler is on device ${this.device}`);
    const v = validateSample(logits, this.capacity, opts, op);
    const d = this.#host.deviceAddress, at = this.#at;
    const slot = this.#completion.slot();
    check(native().weft_nn_sample(SampleParams.write(this.#params, {
      logits: logits.ptr, dtype: DTYPES[logits.dtype].code, rows: v.rows, vocab: v.vocab, row_stride: v.rowStride,
      temperature: d + at.temperature, top_k: d + at.topK, top_p: d + at.topP, seed: d + at.seed, counter: d + at.counter,
      tokens: d + at.tokens, logprobs: d + at.logprobs, stream: opts.stream ? opts.stream.handle : 0,
    }), OpLaunch.write(this.#launch, { done: slot.done, seq: slot.seq, arrivals: slot.arrivals })), op);
    return slot.seq;
  }

  /** Samples and resolves with copies of the rows' tokens and logprobs. */
  async run(logits: Tensor, opts: SampleOptions = {}): Promise<SampleResult> {
    const rows = opts.rows ?? Math.min(logits?.shape?.[0] ?? 1, this.capacity);
    const seq = this.launch(logits, opts);
    await this.#completion.promise(seq, "Sampler.run", undefined, 0, opts.timeoutMs ?? 60_000);
    return { tokens: this.#tokens.slice(0, rows), logprobs: this.#logprobs.slice(0, rows) };
  }

  /** Spins until launch `seq` is done (benchmarks); then read tokens() and logprobs(). */
  wait(seq: number): void {
    this.#completion.wait(seq, this.#completion.timeoutMs, "Sampler.wait");
  }

  /** The pinned results of the latest finished launch (views, valid until the next launch). */
  get tokens(): Int32Array {
    this.#guard("Sampler.tokens");
    return this.#tokens;
  }

  get logprobs(): Float32Array {
    this.#guard("Sampler.logprobs");
    return this.#logprobs;
  }

  #guard(op: string): void {
    if (this.#disposed) throw new DisposedError(op, "Sampler");
  }

  /** Idempotent. Settles a pending run() first (its completion is disposed with the Sampler). */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    leaks.unregister(this);
    try {
      this.#completion.dispose();
    } finally {
      this.#host.dispose();
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
