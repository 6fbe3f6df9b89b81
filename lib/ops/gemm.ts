// gemm.ts — out = a · op(b) on one GPU with weft's Hopper GEMM engine (bf16 in, fp32 accumulate,
// bf16 or f32 out).
//
//   a    [M, K] bf16
//   b    [K, N] bf16, or [N, K] with { transB: true } (the weights layout: out = a · bᵀ)
//   out  [M, N] bf16 or f32
//
// The copy engine needs every row to start on a 16-byte boundary: K (and N for b [K, N] and for
// out) must be a multiple of 8 elements (4 for an f32 out). For other sizes, allocate padded
// tensors and pass the logical size: gemm(a, b, out, { shape: { m, n, k } }) reads and writes only
// the leading m x k, ... region of each tensor; elements outside it are left as they were.
import { GemmChoice, GemmParams, OpLaunch, WeftGemmFailure, WeftGemmFlags } from "../abi.ts";
import { completionPerDevice, decodeReason, type FailureDescriber } from "../completion.ts";
import type { DType } from "../dtype.ts";
import { ArgumentError, TimeoutError, WeftError } from "../errors.ts";
import { check, native } from "../native.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";

/** Engine configuration overrides; every field is optional and validated (validateGemmConfig). */
export interface GemmConfig {
  /** Columns of C per CTA tile: 256 (large problems), 128, or 64 (narrow and decode problems). */
  tileN?: 64 | 128 | 256;
  /** 2: pairs of CTAs on neighbouring M tiles share B's tile through TMA multicast (tileN 128, 256). */
  clusterM?: 1 | 2;
  /** 2: pairs of CTAs on neighbouring N tiles share A's tile (tileN 64). */
  clusterN?: 1 | 2;
  /** Height of the tile-order bands, in cluster tiles (L2 reuse). Default: 16 tile rows at 256-wide
   * tiles, 8 at 128 and 64 (gemm::default_band in cuda/gemm/gemm.h). */
  groupM?: number;
  /** Upper bound on the persistent grid (default: the fewest CTAs, at most one per SM, that take as
   * few rounds of tiles as one per SM would: 128 on a 132-SM GPU at 1024 tiles). */
  maxCtas?: number;
}

export interface GemmShape {
  m: number;
  n: number;
  k: number;
}

export interface GemmOptions {
  /** true: b is [N, K] and out = a · bᵀ. Default false: b is [K, N]. */
  transB?: boolean;
  /** The logical problem when the tensors are padded; default: taken from the tensors' shapes. */
  shape?: GemmShape;
  config?: GemmConfig;
  /** Stream to run on (default: the device's legacy default stream). */
  stream?: Stream | null;
  /** gemm() only: how long to wait for completion before rejecting with TimeoutError (ms). */
  timeoutMs?: number;
}

/** What planGemm needs to know about a tensor (a Tensor, or a plain description of one). */
export interface TensorDesc {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly device: number;
}

export interface GemmPlan {
  device: number;
  m: number;
  n: number;
  k: number;
  lda: number;
  ldb: number;
  ldc: number;
  flags: number;
  config: Required<Record<keyof GemmConfig, number>>;
}

const FLAG_B_NK = WeftGemmFlags.WEFT_GEMM_B_NK;
const FLAG_OUT_F32 = WeftGemmFlags.WEFT_GEMM_OUT_F32;
const DEFAULT_TIMEOUT_MS = 60_000;

function isPositiveInt(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x > 0;
}

/** t's [rows, cols], or an ArgumentError unless t is a 2-D tensor (or description of one) with
 * positive integer dimensions on a device index. A Tensor always is one; a plain description
 * (planGemm, validateTp) is checked as strictly. */
export function matrix(t: TensorDesc | undefined, op: string, argument: string): [number, number] {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) {
    throw new ArgumentError(op, argument, "must be a Tensor");
  }
  if (t.shape.length !== 2) {
    throw new ArgumentError(op, argument, `must be 2-D (got shape [${t.shape.join(", ")}])`);
  }
  t.shape.forEach((d, i) => {
    if (!isPositiveInt(d)) throw new ArgumentError(op, `${argument}.shape[${i}]`, `must be a positive integer (got ${JSON.stringify(d)})`);
  });
  if (typeof t.device !== "number" || !Number.isInteger(t.device) || t.device < 0) {
    throw new ArgumentError(op, `${argument}.device`, `must be a non-negative integer (got ${JSON.stringify(t.device)})`);
  }
  return [t.shape[0]!, t.shape[1]!];
}

function rowAligned(op: string, argument: string, rowElems: number, elemBytes: number, what: string): void {
  const per16 = 16 / elemBytes;
  if (rowElems % per16 !== 0) {
    const padded = Math.ceil(rowElems / per16) * per16;
    throw new ArgumentError(op, argument,
      `has rows of ${rowElems} elements (${rowElems * elemBytes} bytes), but the TMA copy engine needs rows that are a ` +
      `multiple of 16 bytes (${per16} elements): pad ${what} to ${padded} and pass the logical size in { shape: { m, n, k } }`);
  }
}

/** Checks a config override; returns it with 0 for every field left to the heuristic. */
export function validateGemmConfig(config: GemmConfig | undefined, op: string): Required<Record<keyof GemmConfig, number>> {
  const c = config ?? {};
  if (typeof c !== "object" || c === null) throw new ArgumentError(op, "config", "must be an object");
  for (const key of Object.keys(c)) {
    if (!["tileN", "clusterM", "clusterN", "groupM", "maxCtas"].includes(key)) {
      throw new ArgumentError(op, `config.${key}`, "is not a GEMM config field (tileN, clusterM, clusterN, groupM, maxCtas)");
    }
  }
  if (c.tileN !== undefined && ![64, 128, 256].includes(c.tileN)) {
    throw new ArgumentError(op, "config.tileN", `must be 64, 128 or 256 (got ${JSON.stringify(c.tileN)})`);
  }
  for (const key of ["clusterM", "clusterN"] as const) {
    if (c[key] !== undefined && c[key] !== 1 && c[key] !== 2) {
      throw new ArgumentError(op, `config.${key}`, `must be 1 or 2 (got ${JSON.stringify(c[key])})`);
    }
  }
  for (const key of ["groupM", "maxCtas"] as const) {
    if (c[key] !== undefined && !isPositiveInt(c[key])) {
      throw new ArgumentError(op, `config.${key}`, `must be a positive integer (got ${JSON.stringify(c[key])})`);
    }
  }
  const clusterM = c.clusterM ?? 0, clusterN = c.clusterN ?? 0;
  if (clusterM === 2 && clusterN === 2) {
    throw new ArgumentError(op, "config.clusterN", "cannot be 2 together with clusterM 2: clusters have at most two CTAs");
  }
  if (c.tileN !== undefined) {
    if (c.tileN === 64 && clusterM === 2) {
      throw new ArgumentError(op, "config.clusterM", "must be 1 with tileN 64 (narrow tiles pair along N: use clusterN)");
    }
    if (c.tileN !== 64 && clusterN === 2) {
      throw new ArgumentError(op, "config.clusterN", `must be 1 with tileN ${c.tileN} (wide tiles pair along M: use clusterM)`);
    }
  }
  return { tileN: c.tileN ?? 0, clusterM, clusterN, groupM: c.groupM ?? 0, maxCtas: c.maxCtas ?? 0 };
}

/** Validates a GEMM's operands and options without touching a GPU. Throws ArgumentError naming the
 * argument and the rule. */
export function planGemm(a: TensorDesc, b: TensorDesc, out: TensorDesc, opts: GemmOptions = {}, op = "gemm"): GemmPlan {
  if (opts === null || typeof opts !== "object") throw new ArgumentError(op, "opts", "must be an object");
  const transB = opts.transB ?? false;
  if (typeof transB !== "boolean") throw new ArgumentError(op, "opts.transB", `must be a boolean (got ${JSON.stringify(transB)})`);
  const [ma, ka] = matrix(a, op, "a");
  const [b0, b1] = matrix(b, op, "b");
  const [mo, no] = matrix(out, op, "out");
  if (a.dtype !== "bf16") throw new ArgumentError(op, "a", `must be bf16 (got ${a.dtype})`);
  if (b.dtype !== "bf16") throw new ArgumentError(op, "b", `must be bf16 (got ${b.dtype})`);
  if (out.dtype !== "bf16" && out.dtype !== "f32") throw new ArgumentError(op, "out", `must be bf16 or f32 (got ${out.dtype})`);
  if (b.device !== a.device) throw new ArgumentError(op, "b", `is on device ${b.device} but a is on device ${a.device}`);
  if (out.device !== a.device) throw new ArgumentError(op, "out", `is on device ${out.device} but a is on device ${a.device}`);
  const [nb, kb] = transB ? [b0, b1] : [b1, b0];
  const bShape = transB ? "[N, K]" : "[K, N]";

  let m: number, n: number, k: number;
  if (opts.shape !== undefined) {
    const s = opts.shape;
    if (s === null || typeof s !== "object") throw new ArgumentError(op, "opts.shape", "must be { m, n, k }");
    for (const key of ["m", "n", "k"] as const) {
      if (!isPositiveInt(s[key])) throw new ArgumentError(op, `opts.shape.${key}`, `must be a positive integer (got ${JSON.stringify(s[key])})`);
    }
    ({ m, n, k } = s);
    const fits: [string, number, number, string][] = [
      ["a", m, ma, "rows (m)"], ["a", k, ka, "columns (k)"],
      ["b", n, nb, `${transB ? "rows" : "columns"} (n; b is ${bShape})`], ["b", k, kb, `${transB ? "columns" : "rows"} (k; b is ${bShape})`],
      ["out", m, mo, "rows (m)"], ["out", n, no, "columns (n)"],
    ];
    for (const [arg, need, have, what] of fits) {
      if (need > have) throw new ArgumentError(op, arg, `has ${have} ${what} but opts.shape needs ${need}`);
    }
  } else {
    m = ma;
    k = ka;
    n = nb;
    if (kb !== k) {
      throw new ArgumentError(op, "b", `is [${b0}, ${b1}], read as ${bShape}${transB ? " (transB)" : ""}, so K = ${kb}, but a is [${ma}, ${ka}] with K = ${ka}`);
    }
    if (mo !== m || no !== n) throw new ArgumentError(op, "out", `must be [${m}, ${n}] (got [${mo}, ${no}])`);
  }
  rowAligned(op, "a", ka, 2, "K (a's rows)");
  rowAligned(op, "b", b1, 2, transB ? "K (b's rows)" : "N (b's rows)");
  rowAligned(op, "out", no, out.dtype === "f32" ? 4 : 2, "N (out's rows)");
  const stream = opts.stream;
  if (stream !== undefined && stream !== null) {
    if (!(stream instanceof Stream)) throw new ArgumentError(op, "opts.stream", "must be a Stream or null");
    if (stream.device !== a.device) throw new ArgumentError(op, "opts.stream", `is on device ${stream.device} but the tensors are on device ${a.device}`);
  }
  const timeout = opts.timeoutMs;
  if (timeout !== undefined && !(typeof timeout === "number" && timeout > 0)) {
    throw new ArgumentError(op, "opts.timeoutMs", `must be a positive number of milliseconds (got ${JSON.stringify(timeout)})`);
  }
  return {
    device: a.device, m, n, k, lda: ka, ldb: b1, ldc: no,
    flags: (transB ? FLAG_B_NK : 0) | (out.dtype === "f32" ? FLAG_OUT_F32 : 0),
    config: validateGemmConfig(opts.config, op),
  };
}

/** Throws unless a, b and out are live Tensors. */
export function requireTensors(op: string, a: unknown, b: unknown, out: unknown): void {
  for (const [name, t] of [["a", a], ["b", b], ["out", out]] as const) {
    if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    t.guard(op);
  }
}

const paramsBuffer = GemmParams.alloc();
const launchBuffer = OpLaunch.alloc();

/** Packs a validated plan into the shared WeftGemmParams buffer (valid until the next call). */
export function packGemmParams(plan: GemmPlan, a: Tensor, b: Tensor, out: Tensor, stream: Stream | null | undefined): Uint8Array {
  return GemmParams.write(paramsBuffer, {
    a: a.ptr, b: b.ptr, c: out.ptr,
    m: plan.m, n: plan.n, k: plan.k, lda: plan.lda, ldb: plan.ldb, ldc: plan.ldc,
    flags: plan.flags,
    tile_n: plan.config.tileN, cluster_m: plan.config.clusterM, cluster_n: plan.config.clusterN,
    group_m: plan.config.groupM, max_ctas: plan.config.maxCtas,
    stream: stream ? stream.handle : 0,
  });
}

/** Packs a completion slot into the shared WeftOpLaunch buffer (valid until the next call). */
export function packOpLaunch(slot: { done: number; seq: number; arrivals: number }): Uint8Array {
  return OpLaunch.write(launchBuffer, { done: slot.done, seq: slot.seq, arrivals: slot.arrivals });
}

/** Enqueues out = a · op(b) on the stream and returns `out` at once (no host wait): for benchmarks
 * and stream-ordered pipelines. */
export function gemmSync(a: Tensor, b: Tensor, out: Tensor, opts: GemmOptions = {}): Tensor {
  const op = "gemmSync";
  requireTensors(op, a, b, out);
  const plan = planGemm(a, b, out, opts, op);
  check(native().weft_gemm(packGemmParams(plan, a, b, out, opts.stream), null), op);
  return out;
}

// One Completion (lib/completion.ts) per device for standalone GEMMs: pinned words the kernel's last
// CTA publishes into, polled by the process-wide ticker without FFI calls.
const completionFor = completionPerDevice();

const describeGemmFailure: FailureDescriber = (reason) => {
  const op = "gemm";
  const { code, stage } = decodeReason(reason);
  if (code === WeftGemmFailure.WEFT_GEMM_FAIL_BARRIER_TIMEOUT || code === WeftGemmFailure.WEFT_GEMM_FAIL_HOOK_WAIT) {
    const what = code === WeftGemmFailure.WEFT_GEMM_FAIL_BARRIER_TIMEOUT ? "a shared-memory barrier wait timed out" : "a hook's signal wait timed out";
    return new TimeoutError(`the kernel reported a failure: ${what} (stage ${stage})`, { code: "E_TIMEOUT", op });
  }
  return new WeftError(`the kernel reported a failure: code ${code} (stage ${stage})`, { code: "E_INTERNAL", op });
};

/** out = a · op(b); resolves with `out` once the kernel has finished. */
export async function gemm(a: Tensor, b: Tensor, out: Tensor, opts: GemmOptions = {}): Promise<Tensor> {
  const op = "gemm";
  requireTensors(op, a, b, out);
  const plan = planGemm(a, b, out, opts, op);
  const completion = completionFor(plan.device);
  const slot = completion.slot();
  check(native().weft_gemm(packGemmParams(plan, a, b, out, opts.stream), packOpLaunch(slot)), op);
  await completion.promise(slot.seq, op, describeGemmFailure, 0, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  return out;
}

export interface GemmConfigChoice {
  tileM: number;
  tileN: number;
  tileK: number;
  clusterM: number;
  clusterN: number;
  groupM: number;
  stages: number;
  ctas: number;
}

/** The configuration gemm() would run for these arguments (overrides applied, the rest chosen). */
export function gemmConfigFor(a: Tensor, b: Tensor, out: Tensor, opts: GemmOptions = {}): GemmConfigChoice {
  const op = "gemmConfigFor";
  requireTensors(op, a, b, out);
  const plan = planGemm(a, b, out, opts, op);
  const buf = GemmChoice.alloc();
  check(native().weft_gemm_choose(packGemmParams(plan, a, b, out, opts.stream), buf), op);
  const c = GemmChoice.read(buf);
  return {
    tileM: c.tile_m, tileN: c.tile_n, tileK: c.tile_k, clusterM: c.cluster_m, clusterN: c.cluster_n,
    groupM: c.group_m, stages: c.stages, ctas: c.ctas,
  };
}
